"""The scan: open a tree, pick targets, run every rule, collect verdicts (no printing here).

Data flows one way: sources → index/resolve (facts) → rules (findings) → :class:`ScanReport`,
which the reporters in :mod:`auditor.render.report` render.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Callable, Iterable

from auditor.cache import Store
from auditor.cache import key as cache_key
from auditor.engines.base import Engine
from auditor.engines.catalog import ENGINES, engine_for
from auditor.engines.modelfiles import HOLDER_ATTRS, LANGUAGE_MODEL_ATTRS
from auditor.index.resolve import Resolver
from auditor.hf.configs import same_transformers  # noqa: F401 (re-exported: part of this module's API)
from auditor.hf.configs import wheel_digest
from auditor.index.tree import SummaryCache, Tree
from auditor.model.errors import AuditError
from auditor.model.findings import INTERNAL_RULE, Finding, verdict_of
from auditor.model.options import DEFAULT_PLATFORM, PLATFORMS, RunOptions, effective_method
from auditor.model.results import ScanReport, TargetResult, TargetSpec
from rules.base import AuditTarget, Context
from rules.drafts import draft_model
from rules.registry import EXTRACTORS as RULE_EXTRACTORS
from rules.registry import extractors_for as rule_extractors_for
from rules.registry import rules_for
from rules.resolve import ResolveRule


class Auditor:
    """Analysis of one tree: resolver, registry and tree facts, built once.

    Args:
        tree: the tree to audit.
        transformers: ``--transformers``: a folder that contains a ``transformers`` package (or
            the package folder), a transformers wheel or sdist, or a release version (fetched on
            first need); default: see :func:`auditor.hf.configs.transformers_for_tree`.
        platform: the platform whose branches to follow where a module picks its classes at
            import time (``cuda``, ``rocm``, ``xpu``, ``cpu``; see
            :mod:`auditor.engines.vllm.platforms`).
        engine: the engine whose vocabulary reads the tree (an
            :class:`auditor.engines.base.Engine`, or its name); default: the tree's own package
            (``vllm/`` or ``sglang/``, :attr:`Tree.package`).
    Raises:
        AuditError: the tree has no readable model registry, ``transformers`` is not a
            transformers source, ``platform`` is not a known platform, or ``engine`` is not the
            tree's package.
        ValueError: ``tree`` was not built with :func:`make_tree` (its summaries would lack
            the gates' facts).
    """

    def __init__(self, tree: Tree, transformers: str | None = None, platform: str = DEFAULT_PLATFORM,
                 engine: Engine | str | None = None):
        self.engine = engine if isinstance(engine, Engine) else engine_for(engine or tree.package)
        if self.engine.package != tree.package:
            raise AuditError(f"--engine {self.engine.name}: the tree holds a {tree.package}/ package, "
                             f"not {self.engine.package}/")
        if not set(extractors_for(self.engine)) <= set(tree.extractors):
            raise ValueError(f"the tree lacks the {self.engine.display} and rule extractors: build it with make_tree()")
        self.tree = tree
        if platform not in PLATFORMS:
            raise AuditError(f"--platform: unknown platform {platform!r} (one of {', '.join(PLATFORMS)})")
        self.platform = platform
        self.resolver = Resolver(tree, self.engine.conditions(platform))
        self.registry = self.engine.make_registry(self.resolver)
        self.facts = self.engine.make_facts(self.resolver, self.registry)
        self.rules = rules_for(self.engine.name)
        self.ctx = Context(self.resolver, self.registry, self.facts, engine=self.engine.name,
                           transformers_loader=self.load_transformers)
        self.transformers_arg = transformers
        self.progress = False
        if transformers:
            check_transformers(transformers)
        else:
            from auditor.hf.configs import check_transformers_env

            check_transformers_env()

    def load_transformers(self):
        """The transformers source for this tree, chosen once, on first need (see
        :func:`auditor.hf.configs.transformers_for_tree`): a fetch happens only when
        a verdict needs a class from transformers. Returns ``(configs or None, note)``."""
        from auditor.hf.configs import transformers_for_tree
        from auditor.source.folder import FolderSource

        if "transformers_chosen" not in self.shared:
            src = self.tree.source
            tf, note = transformers_for_tree(src, self.transformers_arg, progress=self.progress,
                                             prefer_installed=isinstance(src, FolderSource))
            self.shared["transformers_chosen"] = (tf, note)
        return self.shared["transformers_chosen"]

    @property
    def shared(self) -> dict:
        """State shared by every auditor of one tree (one per platform): the transformers chosen."""
        return self.tree.__dict__.setdefault("_auditor_shared", {})

    def transformers_used(self) -> dict | None:
        """``{"version", "how"}`` of the transformers source the verdicts read, or None when no
        verdict needed one (nothing was chosen)."""
        chosen = self.shared.get("transformers_chosen")
        if chosen is None:
            return None
        tf, note = chosen
        return {"version": tf.version if tf else None, "how": note}

    def prefetch_all(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Summarise, in parallel, the modules a full scan reads: every registry module, the
        modules holding tree-wide facts, then (in waves) the in-tree model and config modules
        they import."""
        tree = self.tree
        wave: set[str] = set()
        wanted: dict[str, set[str]] = {}  # registry module path -> the class names it must bind
        for e in self.registry.entries.values():
            p = tree.path_of(e.dotted_module)
            if p:
                wave.add(p)
                wanted.setdefault(p, set()).add(e.class_name)
        for extractor in rule_extractors_for(self.engine.name):  # the facts of the rules that judge the tree
            wave |= set(self.facts.candidate_paths(extractor))
        wave |= self.engine.prefetch(tree)  # e.g. vLLM's HF config classes and protocols
        scope = self.engine.model_scopes
        holder_attrs = set(HOLDER_ATTRS) | set(LANGUAGE_MODEL_ATTRS)

        def imports(s) -> list[str]:
            # the modules that bind names this module's classes are built from: bases,
            # decorators, class attributes, and what __init__ and factory methods construct
            used: set[str] = set(wanted.get(s.path, ()))
            anywhere: set[str] = set()  # decorators may rewrite bases: read them wherever they live
            for name, b in s.bindings.items():
                if b.kind == "factory":  # ``X = as_seq_cls_model(Y)``
                    used.add(b.target[0].split(".")[0])
            for c in s.classes.values():
                used.update(t.split(".")[0].split("[")[0].split("(")[0] for t in c.bases)
                anywhere.update(t.split(".")[0].split("(")[0] for t in c.decorators)
                used.update((a.value or "").split(".")[0] for n, a in c.attrs.items() if n.endswith("_cls"))
                for m in c.methods.values():
                    used.update(v[0].split(".")[0] for k, v in m.self_assign_calls.items() if k in holder_attrs)
                    used.update(r.split(".")[0] for r in m.returns_call)
                    # classes handed to the __init__ chain (``language_model_cls=Qwen3MoeLLMModel``)
                    texts = [d for _, d in m.params if d] + (
                        m.super_init[0] + list(m.super_init[1].values()) if m.super_init else [])
                    used.update(t.split(".")[0] for t in texts if t.split(".")[0].isidentifier())
            for f in s.functions.values():
                used.update(r.split(".")[0] for r in f.returns_call)
            out = []
            for name in used | anywhere:
                bs = [s.bindings.get(name) or s.tc_bindings.get(name)]
                bs += s.cond_bindings.get(name, []) + s.tc_cond_bindings.get(name, [])  # every platform's branch
                for b in bs:
                    if b is None:
                        continue
                    if b.kind == "import":
                        mods = (b.target[0], f"{b.target[0]}.{b.target[1]}")
                    elif b.kind == "module":
                        mods = (b.target,)
                    else:
                        continue
                    for m in mods:
                        q = tree.path_of(m)
                        if q and (q.startswith(scope) or name in anywhere):
                            out.append(q)
            return out

        tree.prefetch(sorted(wave), progress=progress, expand=imports)

    def audit(self, spec: TargetSpec, method: str, hf_config: dict | None = None,
              options: RunOptions | None = None) -> TargetResult:
        """Run every rule for one target and method under the run ``options`` (default: a plain
        run: no pipeline parallelism, no drafter config). ``method`` is the method as requested;
        an older MTP method string (``deepseek_mtp``) is audited as the method the tree maps it
        to (:func:`auditor.model.options.effective_method`). A row that is not a target (a
        drafter or a pooling model, see :meth:`Registry.role`) is not audited: its result has the
        verdict ``not-a-target`` and a note saying what it is."""
        opts = (options or RunOptions()).with_method(method)
        if opts.platform != self.platform:
            opts = opts.with_platform(self.platform)
        method = effective_method(method)
        role = self.registry.role(spec.architecture)
        if role != "target":
            result = self._not_a_target(spec, method, role)
            result.run_options = opts
            return result
        try:
            return self._audit_target(spec, method, hf_config, opts)
        except AuditError:
            raise
        except (RecursionError, MemoryError) as exc:  # a hierarchy or a construct too deep for the index
            return self._failed(spec, method, opts, ResolveRule.CODE, ResolveRule.GATE,
                                f"cannot analyse {spec.architecture}: its class hierarchy or code is nested too "
                                f"deeply to follow ({type(exc).__name__}); this target is not audited")
        except Exception as exc:  # a bug in a rule or the index: this target only, the scan goes on
            what = " ".join(str(exc).split())[:200]
            return self._failed(spec, method, opts, INTERNAL_RULE, "internal",
                                f"internal error while auditing {spec.architecture} ({type(exc).__name__}"
                                f"{': ' + what if what else ''}): this is a bug in eagle-audit, please report it; "
                                "this target is not audited")

    def _failed(self, spec: TargetSpec, method: str, opts: RunOptions, code: str, gate: str,
                message: str) -> TargetResult:
        """The result of a target whose audit raised: ``unknown`` with one finding saying why."""
        from auditor.model.findings import Severity

        e = self.registry.entries.get(spec.architecture)
        finding = Finding(code, gate, Severity.UNKNOWN, message,
                          getattr(e, "path", None) or getattr(self.registry, "path", None), getattr(e, "line", None))
        return TargetResult(architecture=spec.architecture, class_name=None, method=method,
                            verdict=verdict_of([finding]), findings=[finding], model_type=spec.model_type,
                            text_model_type=spec.text_model_type, model_type_source=spec.source or "",
                            run_options=opts)

    def _audit_target(self, spec: TargetSpec, method: str, hf_config: dict | None,
                      opts: RunOptions) -> TargetResult:
        spec = self.with_model_type(spec)
        facts = self.engine.target(self.resolver, self.registry, spec.architecture)
        target = AuditTarget(spec.architecture, method, facts, spec.model_type, spec.text_model_type, spec.source,
                             hf_config, opts)
        findings: list[Finding] = []
        evaluated: set[str] = set()
        skipped: dict[str, str] = {}
        if method not in self.engine.methods:
            raise AuditError(f"--method {method}: {self.engine.display} trees are audited for "
                             f"{', '.join(self.engine.methods)} only")
        holder = lm = None
        if facts.ref is not None and method == "eagle3":
            holder, lm = self.engine.holder(self.ctx, facts.ref)
        target.holder = holder
        for rule_cls in self.rules.values():
            if facts.ref is None and not rule_cls.UNRESOLVED:
                skipped.setdefault(rule_cls.GATE, f"the class of {spec.architecture} is not resolved")
                continue
            rule = rule_cls()
            if rule.applies(target):
                with self.ctx.store.consumer(rule_cls, rule_cls.FACTS):
                    found = list(rule.check(self.ctx, target))
                if rule.not_evaluated is not None and not found:
                    skipped.setdefault(rule.GATE, rule.not_evaluated)  # the rule could not reach a decision
                    continue
                evaluated.add(rule.GATE)
                findings.extend(found)
            else:
                skipped.setdefault(rule.GATE, rule.skip_reason(target))
        if facts.ref is not None and verdict_of(findings).value == "supported":
            # changes made by other modules or by functions are searched only where they could
            # turn a verdict that is otherwise supported (the search reads the whole tree)
            from rules.resolve.rule import ResolveRule

            findings += list(ResolveRule().unfollowable(self.ctx, facts.ref, holder, elsewhere=True))
        if facts.ref is not None:
            skipped.update(self._unmodelled(target, evaluated, skipped))
        draft = draft_model(self.ctx, target) if facts.ref is not None and self.engine.models_drafter else None
        return TargetResult(
            architecture=spec.architecture,
            class_name=facts.ref.dotted if facts.ref else None,
            method=method,
            verdict=verdict_of(findings),
            findings=findings,
            model_type=spec.model_type,
            text_model_type=spec.text_model_type,
            model_type_source=spec.source,
            holder=holder,
            language_model=lm,
            run_options=opts,
            draft_architecture=draft.architecture if draft and not draft.unknown else None,
            draft_class=draft.ref.dotted if draft and draft.ref and not draft.unknown else None,
            not_evaluated={g: why for g, why in skipped.items() if g not in evaluated},
        )

    def _unmodelled(self, target: AuditTarget, evaluated: set[str], skipped: dict[str, str]) -> dict[str, str]:
        """Gates the run asks for that this engine's rules do not model: a gate of another engine
        that depends on a run option (its rule's ``REQUIRES``) and applies to this run
        (``-pp 2``, ``--parallel-drafting`` on an SGLang tree), with no rule of this engine under
        its gate id. Gate id → the reason, listed as not evaluated (never silently dropped)."""
        from rules.registry import RULES

        mine = {r.GATE for r in self.rules.values()}
        out: dict[str, str] = {}
        for rule_cls in RULES.values():
            if rule_cls.judges(self.engine.name) or not rule_cls.REQUIRES or rule_cls.GATE in mine:
                continue
            if rule_cls.GATE in evaluated or rule_cls.GATE in skipped or rule_cls.GATE in out:
                continue
            try:
                applies = rule_cls().applies(target)
            except Exception:  # another engine's rule reading facts of its own engine's shape
                applies = False
            if applies:
                out[rule_cls.GATE] = (f"{rule_cls.CHECKED_WITH or rule_cls.GATE} (asked for; "
                                      f"not modelled on {self.engine.display} trees)")
        return out

    def with_model_type(self, spec: TargetSpec) -> TargetSpec:
        """``spec`` with its model_types filled in from the tree when the user gave none (see
        :func:`auditor.hf.modeltypes.infer_model_type`: the model's config class, vLLM's
        config registry read backwards, the alias table, and only then a labelled name guess)."""
        if spec.model_type is not None:
            return spec
        from auditor.hf.modeltypes import ModelTypeFacts

        mt, tmt, how = self.ctx.get(ModelTypeFacts, spec.architecture)
        if spec.text_model_type is not None:
            return TargetSpec(spec.architecture, mt, spec.text_model_type, spec.source)
        return TargetSpec(spec.architecture, mt, tmt, how)

    def _not_a_target(self, spec: TargetSpec, method: str, role: str) -> TargetResult:
        from auditor.model.findings import Verdict

        t = self.registry.class_ref(spec.architecture)
        tables = self.registry.registered_in(spec.architecture)
        what = {"drafter": "a drafter (a speculative-decoding head or MTP module), not a target: pass it as the "
                           "speculative model and audit the target it drafts for",
                "pooling": "a pooling model (embedding, scoring, reward or classification): it never generates, "
                           "so no speculative method applies"}[role]
        return TargetResult(
            architecture=spec.architecture,
            class_name=getattr(t, "dotted", None),
            method=method,
            verdict=Verdict.NOT_A_TARGET,
            findings=[],
            role=role,
            note=f"{spec.architecture} is registered in {tables}: it is {what}",
        )

    def scan(
        self,
        specs: list[TargetSpec],
        methods: Iterable[str] = ("eagle3",),
        hf_config: dict | None = None,
        progress: Callable[[int, int], None] | None = None,
        prefetch: bool = False,
        prefetch_progress: Callable[[int, int], None] | None = None,
        options: RunOptions | None = None,
    ) -> ScanReport:
        """Audit every spec for every method under the run ``options`` (their ``method`` is
        replaced by each of ``methods``); ``progress(done, total)`` after each target.
        ``prefetch``: summarise every module a full scan needs in parallel first (on a miss of
        the result cache only)."""
        methods = list(methods)
        options = options or RunOptions()
        results_cache = ResultCache(self.tree, specs, methods, hf_config, self.request_inputs(options))
        self.__dict__.pop("_hit_state", None)
        hit = results_cache.get(self.same_transformers)
        if hit is not None:
            # the environment's start-up code is outside the tree: read now, never from the cache
            hit.environment_code = list(getattr(self.tree.source, "startup_code", []))
            self._hit_state = results_cache.state  # what of transformers the cached verdicts read
            return hit
        if prefetch:
            self.prefetch_all(prefetch_progress)
        self.ctx.store.begin_run()
        report = self._scan(specs, methods, hf_config, progress, options)
        cacheable, state = self.transformers_state()
        if cacheable:
            results_cache.put(report, state)
        return report

    def transformers_state(self) -> tuple[bool, dict | None]:
        """Whether the results computed so far may be cached, and what of ``transformers`` they
        depend on: ``(True, None)`` when no verdict read transformers' files; ``(True, state)``
        when one did, ``state`` naming the source chosen (its ``how`` and version), its file list
        (sha256), the sha256 of every file read from it and, for a fetched wheel, the wheel's
        verified sha256 (``archive``; see :func:`same_transformers`);
        ``(False, None)`` when a verdict needed one and none was at hand (what is installed, or a
        network failure, may change that), unless the tree alone decides it (an archive that states
        no transformers requirement, with no ``--transformers``)."""
        if hasattr(self, "_hit_state"):  # answered from the result cache: its entry says
            return True, self._hit_state
        chosen = self.shared.get("transformers_chosen")  # chosen only when a verdict needed it
        if chosen is not None and chosen[0] is None:
            # needed, and none was at hand (the fact framework records no read): cacheable only
            # where the tree alone says so (an archive that states no requirement, none given)
            src = self.tree.source
            alone = (src.root() is None and not self.transformers_arg
                     and getattr(src, "requirement", lambda _: None)("transformers") is None)
            return alone, None
        if not self.ctx.store.outside_reads():  # recorded by the fact framework for this run
            return True, None
        if chosen is None:
            return False, None
        tf, note = chosen
        state = {"how": note, "version": tf.version, "files": tf.tree.files_digest(), "reads": dict(tf.tree.reads)}
        archive = wheel_digest(tf)
        if archive is not None:
            state["archive"] = archive
        return True, state

    def same_transformers(self, state: dict) -> bool:
        """True when the transformers source this tree's verdicts would read now (chosen as on
        first need, see :meth:`load_transformers`) is the one ``state`` recorded, with the same
        files and the same content in every file read (:func:`same_transformers`)."""
        tf, how = self.load_transformers()
        return same_transformers(state, tf, how)

    def request_inputs(self, options: RunOptions | None = None) -> dict:
        """The inputs besides the tree and the targets that a verdict depends on, for keying
        cached results: the platform whose branches are followed, the ``--transformers`` given,
        the tree's own transformers requirement (which picks the release fetched), the engine, and
        the run options (pipeline-parallel size, drafter config, …)."""
        req = self.tree.source.requirement("transformers") if hasattr(self.tree.source, "requirement") else None
        return {"platform": self.platform, "transformers": self.transformers_arg, "transformers_requirement": req,
                "engine": self.engine.name, "run": (options or RunOptions()).with_method("").key()}

    def _scan(self, specs, methods, hf_config, progress, options: RunOptions) -> ScanReport:
        results = []
        total = len(specs) * len(methods)
        for i, spec in enumerate(specs):
            for method in methods:
                results.append(self.audit(spec, method, hf_config, options))
            if progress:
                progress((i + 1) * len(methods), total)
        return ScanReport(
            engine=self.engine.name,
            engine_version=self.engine.version(self.tree),
            source=getattr(self.tree.source, "label", ""),
            platform=self.platform,
            transformers=self.transformers_used(),
            results=results,
            parse_errors=dict(self.tree.parse_errors),
            environment_code=list(getattr(self.tree.source, "startup_code", [])),
            drafters=sorted(e.architecture for e in self.registry.drafters()),
            pooling=sorted(a for a in self.registry.entries if self.registry.role(a) == "pooling"),
        )


class ResultCache:
    """Whole-scan results (the ``results`` kind of :mod:`auditor.cache`), keyed on the tool's
    code, the request (targets, methods, checkpoint config, and the other inputs of
    :meth:`Auditor.request_inputs`), the tree's version, label and file list, and valid only
    while every file the scan read still has the content it had (sha256 of each, checked on
    every hit) and, for results that read ``transformers``, while the transformers chosen now is
    the one read, with the same files and content (:func:`same_transformers`): it can never
    return a stale verdict."""

    def __init__(self, tree: Tree, specs: list[TargetSpec], methods: list[str], hf_config: dict | None,
                 inputs: dict | None = None):
        self.tree = tree
        self.state: dict | None = None
        self.store = Store("results", tree.cache.enabled)
        self.key = cache_key("results", tree.files_digest(), tree.version(), getattr(tree.source, "label", ""),
                             [e.name for e in tree.extractors],
                             [(s.architecture, s.model_type, s.text_model_type, s.source) for s in specs],
                             methods, hf_config, inputs or {})

    def _unchanged(self, entry) -> bool:
        if not (isinstance(entry, tuple) and len(entry) == 3 and isinstance(entry[0], dict)
                and isinstance(entry[1], ScanReport) and (entry[2] is None or isinstance(entry[2], dict))):
            return False
        for rel, digest in entry[0].items():
            try:
                data = self.tree.source.read(rel)
            except (KeyError, OSError):
                return False
            if hashlib.sha256(data).hexdigest() != digest:
                return False
        return True

    def get(self, same_transformers: Callable[[dict], bool] | None = None) -> ScanReport | None:
        """The cached report if every file it was computed from is unchanged and, when it read
        ``transformers``, ``same_transformers(state)`` says the transformers at hand now is the one
        it read (same source, files and content); else None. After a hit, :attr:`state` is
        that transformers state (None: the verdicts read none)."""
        entry = self.store.get(self.key, tuple, self._unchanged)
        if entry is None:
            return None
        if entry[2] is not None and (same_transformers is None or not same_transformers(entry[2])):
            return None
        self.tree.reads.update(entry[0])
        self.state = entry[2]
        return entry[1]

    def put(self, report: ScanReport, transformers: dict | None = None) -> None:
        """Store ``report`` with the sha256 of every file it was computed from, and the
        ``transformers`` state it read (:meth:`Auditor.transformers_state`; None: none)."""
        self.store.put(self.key, (dict(self.tree.reads), report, transformers))


def extractors_for(engine: Engine):
    """The fact extractors a tree of ``engine`` is summarised with: the engine's and the rules'
    (:data:`EXTRACTORS` for vLLM)."""
    return engine.extractors + RULE_EXTRACTORS


#: The fact extractors every vLLM tree is summarised with: the engine's and the rules'.
EXTRACTORS = extractors_for(engine_for(None))


def make_tree(source, cache: SummaryCache | None = None) -> Tree:
    """A :class:`Tree` over a tree source, summarised with the extractors of the source's
    engine (its ``package``: :data:`EXTRACTORS` for vLLM)."""
    engine = ENGINES.get(getattr(source, "package", "vllm"), engine_for(None))
    return Tree(source, cache, extractors_for(engine))


def open_tree(path: str | None, vllm_version: str | None, *, progress: bool = True, use_cache: bool = True,
              sglang_version: str | None = None, engine: str | None = None, python: str | None = None) -> Tree:
    """Open a tree from a PATH, a release version (fetched and cached) or the installed package.

    Args:
        path: a folder or archive; None for a version or the installed package.
        vllm_version: a vLLM release to fetch.
        sglang_version: an SGLang release to fetch (sdist, else the wheel for this Python).
        engine: ``vllm`` or ``sglang`` to read that package of the tree (default: detected).
        python: with no path and no version, the interpreter (or environment folder) whose
            installed engine to read, located from its layout without running it (``--python``).
    Raises:
        AuditError: bad path, corrupt archive, unknown version, no vllm installed.
    """
    from auditor.source.opener import open_source

    src = open_source(path, vllm_version, progress=progress, sglang_version=sglang_version, package=engine,
                      python=python)
    return make_tree(src, SummaryCache(enabled=use_cache))


def platform_differences(reports: dict[str, ScanReport]) -> list[dict]:
    """Where the verdicts of one tree differ between platforms.

    Args:
        reports: platform name → the scan of the same targets and methods on that platform.

    Returns:
        One dict per target and method whose verdict, blocking gates or resolved class is not
        the same on every platform: ``architecture``, ``method``, and per platform ``verdict``,
        ``blocking`` and ``class`` (in the order of ``reports``).
    """
    keyed = {p: {(r.architecture, r.method): r for r in rep.targets} for p, rep in reports.items()}
    order: list[tuple[str, str]] = []
    for rows in keyed.values():
        order += [k for k in rows if k not in order]
    out = []
    for key in order:
        per = {p: rows.get(key) for p, rows in keyed.items()}
        shapes = {(r.verdict.value, tuple(r.blocking), r.class_name) if r else None for r in per.values()}
        if len(shapes) > 1:
            out.append({
                "architecture": key[0], "method": key[1],
                "platforms": {p: ({"verdict": r.verdict.value, "blocking": r.blocking, "class": r.class_name}
                                  if r else None) for p, r in per.items()},
            })
    return out


class TransformersMissing(AuditError):
    """``--transformers VERSION`` names a release the package index does not have (raised by
    :func:`check_transformers`; the caller may ask again with the tree's requirement, so that the
    suggestions are releases the tree accepts)."""


@functools.cache
def check_transformers(value: str, requirement: str | None = None) -> None:
    """Refuse, before any work, a ``--transformers`` that cannot be used: a folder, wheel or
    sdist without a transformers package, something that is neither a path nor a version, or a
    version the package index does not have (one read of its page, none when the wheel is
    cached; never a download: the release is fetched only when a verdict needs a config class
    from transformers, see :func:`auditor.source.fetch.check_wheel_release`). With
    ``requirement`` (the tree's own specifier for transformers), a missing release's
    suggestions are only releases it accepts.

    Raises:
        TransformersMissing: the release is not on the index (one line, nearest releases).
        AuditError: one line naming ``--transformers`` and why.
    """
    if Path(value).expanduser().exists():
        from auditor.hf.configs import open_transformers

        open_transformers(value)  # a folder, wheel or sdist without transformers: refused now
        return
    from packaging.version import InvalidVersion, Version

    from auditor.source.fetch import check_wheel_release

    try:
        Version(value)
    except InvalidVersion:
        raise AuditError(f"--transformers: {value} is neither a transformers folder, wheel or "
                         "sdist, nor a release version") from None
    why = check_wheel_release("transformers", value, accepts=requirement)
    if why is not None:
        raise TransformersMissing(f"--transformers {value}: {why}")
