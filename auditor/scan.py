"""The scan: open a tree, pick targets, run every rule, collect verdicts (no printing here).

Data flows one way: sources → index/resolve (facts) → rules (findings) → :class:`ScanReport`,
which the reporters in :mod:`auditor.report` render.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable, Iterable

from auditor.analysis import HOLDER_ATTRS, LANGUAGE_MODEL_ATTRS, TreeFacts, find_holder, target_facts
from auditor.errors import AuditError
from auditor.findings import Finding, Verdict, verdict_of
from auditor.registry import Registry
from auditor.resolve import Resolver
from auditor.tree import SummaryCache, Tree
from rules.base import AuditTarget, Context
from rules.registry import RULES

METHODS = ("eagle3", "eagle")

_SUFFIXES = (
    "ForConditionalGeneration", "ForCausalLM", "LMHeadModel", "ForSequenceClassification",
    "ForTokenClassification", "ForEmbedding", "ForRewardModel", "Model",
)


def derive_model_type(arch: str) -> str:
    """The HF convention for a model_type from an architecture name:
    ``DeepseekV3ForCausalLM`` → ``deepseek_v3``, ``Qwen3NextForCausalLM`` → ``qwen3_next``."""
    stem = arch
    for suf in _SUFFIXES:
        if stem.endswith(suf) and stem != suf:
            stem = stem[: -len(suf)]
            break
    stem = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", stem)
    return stem.lower()


def load_alias_table() -> dict:
    """The alias table ``rules/targets.toml`` (model_type → targets, architecture → model_types)."""
    text = resources.files("rules").joinpath("targets.toml").read_text()
    return tomllib.loads(text)


@dataclass
class TargetSpec:
    """A requested target before analysis: architecture and what is known of its model_types."""

    architecture: str
    model_type: str | None
    text_model_type: str | None
    source: str


def load_hf_config(path: str | Path) -> dict:
    """Parse a checkpoint's ``config.json``. Raises AuditError with one line on bad input."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise AuditError(f"--hf-config: no such file: {p}") from None
    except (OSError, ValueError) as exc:
        raise AuditError(f"--hf-config: cannot read {p} as JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AuditError(f"--hf-config: {p} is not a JSON object")
    return data


def resolve_targets(
    registry: Registry,
    names: Iterable[str],
    model_type: str | None = None,
    hf_config: dict | None = None,
) -> list[TargetSpec]:
    """Turn ``--model`` names (architectures or model_types), ``--model-type`` and a checkpoint
    config into target specs. No names and no config: every registry architecture.

    Raises:
        AuditError: a name that is neither an architecture nor a known model_type (the message
            lists the closest matches).
    """
    aliases = load_alias_table()
    names = list(names)
    specs: list[TargetSpec] = []
    if hf_config is not None:
        archs = [a for a in hf_config.get("architectures") or [] if isinstance(a, str)]
        mt = hf_config.get("model_type")
        tc = hf_config.get("text_config") if isinstance(hf_config.get("text_config"), dict) else None
        tmt = (tc or {}).get("model_type") or mt
        for a in archs:
            if a not in registry.entries:
                raise AuditError(f"--hf-config: architecture {a} is not in this tree's registry{_close(a, registry)}")
            specs.append(TargetSpec(a, mt, model_type or tmt, "--model-type" if model_type else "--hf-config"))
        if not names:
            return specs
    if not names:
        return [_arch_spec(a, aliases, model_type) for a in registry.architectures()]
    for name in names:
        if name in registry.entries:
            specs.append(_arch_spec(name, aliases, model_type))
            continue
        entry = aliases.get("model_type", {}).get(name)
        if entry:
            found = [t for t in entry["targets"] if t["architecture"] in registry.entries]
            if not found:
                raise AuditError(f"model_type {name!r}: none of its architectures is in this tree "
                                 f"({', '.join(t['architecture'] for t in entry['targets'])})")
            for t in found:
                specs.append(TargetSpec(t["architecture"], t.get("model_type"), model_type or t.get("text_model_type"),
                                        "--model-type" if model_type else "alias table"))
            continue
        derived = [a for a in registry.architectures() if derive_model_type(a) == name and not registry.entries[a].is_drafter]
        if derived:
            for a in derived:
                specs.append(TargetSpec(a, name, model_type or name, "--model-type" if model_type else "given model_type"))
            continue
        raise AuditError(f"unknown model {name!r}: not an architecture in this tree's registry nor a known model_type{_close(name, registry)}")
    seen: set[str] = set()
    out = []
    for s in specs:
        if s.architecture not in seen:
            seen.add(s.architecture)
            out.append(s)
    return out


def _arch_spec(arch: str, aliases: dict, model_type: str | None) -> TargetSpec:
    a = aliases.get("architecture", {}).get(arch)
    if model_type:
        mt = a.get("model_type") if a else derive_model_type(arch)
        return TargetSpec(arch, mt, model_type, "--model-type")
    if a:
        return TargetSpec(arch, a.get("model_type"), a.get("text_model_type"), "alias table")
    mt = derive_model_type(arch)
    return TargetSpec(arch, mt, mt, "derived from the architecture name")


def _close(name: str, registry: Registry) -> str:
    pool = registry.architectures() + sorted(load_alias_table().get("model_type", {}))
    m = difflib.get_close_matches(name, pool, n=4, cutoff=0.5)
    if not m:
        low = name.lower()
        m = [p for p in pool if low in p.lower()][:4]
    return f"; did you mean: {', '.join(m)}?" if m else ""


@dataclass
class TargetResult:
    """The audit of one target for one method: verdict and findings, plus what the tool assumed."""

    architecture: str
    class_name: str | None
    method: str
    verdict: Verdict
    findings: list[Finding]
    model_type: str | None = None
    text_model_type: str | None = None
    model_type_source: str = ""
    holder: str | None = None
    language_model: str | None = None

    @property
    def blocking(self) -> list[str]:
        """Gate ids of the error findings, in rule order, without repeats."""
        out: list[str] = []
        for f in self.findings:
            if f.severity.value == "error" and f.gate not in out:
                out.append(f.gate)
        return out

    def as_dict(self) -> dict:
        return {
            "architecture": self.architecture,
            "class": self.class_name,
            "method": self.method,
            "verdict": self.verdict.value,
            "blocking": self.blocking,
            "model_type": self.model_type,
            "text_model_type": self.text_model_type,
            "model_type_source": self.model_type_source,
            "holder": self.holder,
            "language_model": self.language_model,
            "findings": [f.as_dict() for f in self.findings],
        }


@dataclass
class ScanReport:
    """A scan's results: the tree's version and label, one :class:`TargetResult` per target and
    method, the files that did not parse, and the drafter architectures the tree registers."""

    vllm_version: str | None
    source: str
    results: list[TargetResult]
    parse_errors: dict[str, str] = field(default_factory=dict)
    drafters: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "vllm_version": self.vllm_version,
            "source": self.source,
            "results": [r.as_dict() for r in self.results],
            "parse_errors": [{"path": p, "error": e} for p, e in sorted(self.parse_errors.items())],
            "drafters": self.drafters,
            "summary": {v.value: sum(1 for r in self.results if r.verdict is v) for v in Verdict},
        }


class Auditor:
    """Analysis of one tree: resolver, registry and tree facts, built once.

    Args:
        tree: the tree to audit.
        transformers: the folder that contains a ``transformers`` package (or the package
            folder) whose config classes to read; default: the installed one, if any.
    Raises:
        AuditError: the tree has no readable model registry, or ``transformers`` is not a
            transformers source.
    """

    def __init__(self, tree: Tree, transformers: str | None = None):
        self.tree = tree
        self.resolver = Resolver(tree)
        self.registry = Registry(self.resolver)
        self.facts = TreeFacts(self.resolver, self.registry)
        self.ctx = Context(self.resolver, self.registry, self.facts)
        if transformers:
            from auditor.hfconfigs import locate_transformers

            if locate_transformers(transformers) is None:
                raise AuditError(f"--transformers: no transformers package at {transformers}")
            self.ctx.cache["transformers_path"] = transformers

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
        for search in self.facts.SEARCHES:
            wave |= set(self.facts.candidate_paths(search))
        # HF config classes of multimodal targets
        wave |= {f for f in tree.files if f.startswith("vllm/transformers_utils/configs/")}
        for mod in ("vllm.model_executor.models.interfaces", "vllm.transformers_utils.config"):
            p = tree.path_of(mod)
            if p:
                wave.add(p)
        scope = ("vllm/model_executor/models/", "vllm/models/")
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
            for f in s.functions.values():
                used.update(r.split(".")[0] for r in f.returns_call)
            out = []
            for name in used | anywhere:
                b = s.bindings.get(name) or s.tc_bindings.get(name)
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

    def audit(self, spec: TargetSpec, method: str, hf_config: dict | None = None) -> TargetResult:
        """Run every rule for one target and method."""
        facts = target_facts(self.resolver, self.registry, spec.architecture)
        target = AuditTarget(spec.architecture, method, facts, spec.model_type, spec.text_model_type, spec.source, hf_config)
        findings: list[Finding] = []
        if facts.ref is None:
            from auditor.findings import Severity

            e = self.registry.entries[spec.architecture]
            findings.append(Finding("EA300", "resolve", Severity.UNKNOWN,
                                    f"cannot resolve the class of {spec.architecture}: {facts.unresolved.reason}",
                                    self.registry.path, e.line))
        else:
            for rule_cls in RULES.values():
                rule = rule_cls()
                if rule.applies(target):
                    findings.extend(rule.check(self.ctx, target))
        holder = lm = None
        if facts.ref is not None and method == "eagle3":
            key = ("holder", facts.ref)
            h = self.ctx.cache[key][0] if key in self.ctx.cache else find_holder(self.resolver, self.registry, facts.ref)
            holder = h.ref.dotted if h.ref else None
            lm = h.language_arch
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
        )

    def scan(
        self,
        specs: list[TargetSpec],
        methods: Iterable[str] = ("eagle3",),
        hf_config: dict | None = None,
        progress: Callable[[int, int], None] | None = None,
        prefetch: bool = False,
        prefetch_progress: Callable[[int, int], None] | None = None,
    ) -> ScanReport:
        """Audit every spec for every method; ``progress(done, total)`` after each target.
        ``prefetch``: summarise every module a full scan needs in parallel first (on a miss of
        the result cache only)."""
        methods = list(methods)
        results_cache = ResultCache(self.tree, specs, methods, hf_config)
        hit = results_cache.get()
        if hit is not None:
            return hit
        if prefetch:
            self.prefetch_all(prefetch_progress)
        report = self._scan(specs, methods, hf_config, progress)
        if not self.ctx.cache.get("consulted_transformers"):
            results_cache.put(report)  # results that read transformers' files are not cached
        return report

    def _scan(self, specs, methods, hf_config, progress) -> ScanReport:
        results = []
        total = len(specs) * len(methods)
        for i, spec in enumerate(specs):
            for method in methods:
                results.append(self.audit(spec, method, hf_config))
            if progress:
                progress((i + 1) * len(methods), total)
        return ScanReport(
            vllm_version=self.tree.version(),
            source=getattr(self.tree.source, "label", ""),
            results=results,
            parse_errors=dict(self.tree.parse_errors),
            drafters=sorted(e.architecture for e in self.registry.drafters()),
        )


class ResultCache:
    """Whole-scan results, keyed on the request and the tree's file list, and valid only while
    every file the scan read still has the content it had (sha256 of each, checked on every
    hit): it can never return a stale verdict. Stored under the user cache folder."""

    def __init__(self, tree: Tree, specs: list[TargetSpec], methods: list[str], hf_config: dict | None):
        import hashlib

        from auditor import __version__
        from auditor.index import INDEX_FORMAT

        self.tree = tree
        self.enabled = tree.cache.enabled
        if not self.enabled:
            return
        request = json.dumps([__version__, INDEX_FORMAT, tree.files_digest(),
                              [(s.architecture, s.model_type, s.text_model_type, s.source) for s in specs],
                              methods, hf_config], sort_keys=True, default=str)
        key = hashlib.sha256(request.encode()).hexdigest()
        self.path = tree.cache.root.parent.parent / "results" / key[:2] / f"{key}.pkl"

    def get(self) -> ScanReport | None:
        """The cached report if every file it was computed from is unchanged, else None."""
        if not self.enabled:
            return None
        import hashlib

        from auditor.tree import load_cached

        entry = load_cached(self.path)
        if not (isinstance(entry, tuple) and len(entry) == 2):
            return None
        reads, report = entry
        for rel, digest in reads.items():
            try:
                data = self.tree.source.read(rel)
            except KeyError:
                return None
            if hashlib.sha256(data).hexdigest() != digest:
                return None
        self.tree.reads.update(reads)
        return report

    def put(self, report: ScanReport) -> None:
        """Store ``report`` with the sha256 of every file it was computed from."""
        if self.enabled:
            from auditor.tree import store_cached

            store_cached(self.path, (dict(self.tree.reads), report))


def open_tree(path: str | None, vllm_version: str | None, *, progress: bool = True, use_cache: bool = True) -> Tree:
    """Open a tree from a PATH, a release version (fetched and cached) or the installed vllm.

    Raises:
        AuditError: bad path, corrupt archive, unknown version, no vllm installed.
    """
    from auditor.sources import open_source

    src = open_source(path, vllm_version, progress=progress)
    return Tree(src, SummaryCache(enabled=use_cache))
