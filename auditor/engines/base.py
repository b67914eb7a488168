"""What the layers above need to know about a serving engine, whichever it is.

An :class:`Engine` describes one engine package (``auditor/engines/vllm``,
``auditor/engines/sglang``): the top-level package of its trees, the fact extractors its index
pass needs, how to build its registry and tree-wide facts over a resolver, the import-time
conditions of a platform, where its model code lives, the speculative methods it audits, and
the hooks the layers above call (a target's facts, the holder shown on a result line, the
explanation of ``eagle-audit explain``, the targets a ``--model`` names). The orchestration
layer, the command line, the reporters and the rules pick the engine of a tree
(:func:`auditor.engines.catalog.engine_for`) and never name an engine's modules themselves
(import-linter's ``forbidden`` contracts in ``pyproject.toml``); the engines never import each
other (its ``independence`` contract). What both engines read alike lives beside this module
(:mod:`auditor.engines.modelfiles`) or below the engines (:mod:`auditor.hf`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from auditor.index.resolve import Resolver
from auditor.index.summary import Extractor
from auditor.index.targets import ClassRef


@dataclass(frozen=True)
class Engine:
    """One serving engine's vocabulary.

    Attributes:
        name: the engine id used on the command line and in reports (``vllm``, ``sglang``).
        display: how messages name it (``vLLM``, ``SGLang``).
        package: the top-level package of its trees (``vllm``, ``sglang``).
        extractors: the fact extractors its index pass runs (the rules' own are added by the
            scan).
        make_registry: ``resolver -> registry``: the architectures of a tree (an object with
            ``entries``, ``architectures()``, ``role(arch)``, ``class_ref(arch)``, ``drafters()``,
            ``path``). Raises ``AuditError`` when the tree has no readable registry.
        make_facts: ``(resolver, registry) -> tree facts`` (an object with ``found``,
            ``candidate_paths``, ``unanalysed``, ``broken_module``).
        conditions: ``platform -> {expression text: value}`` for the resolver's evaluation of
            import-time branches, or None when the engine's trees are not audited per platform.
        methods: the speculative methods it audits.
        model_scopes: path prefixes of its model code (the modules a full scan summarises in
            waves, following imports).
        prefetch: ``tree -> paths`` of the modules besides the registry's that a full scan reads.
        holder: ``(context, class ref) -> (holder class dotted or None, language-model
            architecture or None)`` for a target's report line (EAGLE-3), from the typed facts
            the gates read (``context.get``).
        explain: ``(resolver, registry, tree facts, architecture, platform) -> dict``: what
            ``eagle-audit explain`` says of one registered architecture.
        target: ``(resolver, registry, architecture) -> target facts`` (its class, MRO, code
            holder: :func:`auditor.engines.modelfiles.target_facts` for both engines).
        resolve_targets: ``(registry, models, model_type, hf_config, ...) -> [TargetSpec]``:
            the rows a ``--model`` names (:func:`auditor.hf.targets.resolve_targets`).
        release_option: the keyword of :func:`auditor.orchestration.scan.open_tree` (and the
            command-line option) that names one of its releases (``vllm_version``).
        models_drafter: True when the rules name the draft model a run builds
            (``rules.drafts.draft_model``) for its trees.
        verifiable: True when ``eagle-audit verify`` (and ``fix --apply --verify``) can run
            this engine (:mod:`auditor.orchestration.verify`: vLLM only).
    """

    name: str
    display: str
    package: str
    extractors: tuple[Extractor, ...]
    make_registry: Callable[[Any], Any]
    make_facts: Callable[[Any, Any], Any]
    conditions: Callable[[str], Mapping[str, object] | None]
    methods: tuple[str, ...]
    model_scopes: tuple[str, ...]
    prefetch: Callable[[Any], set[str]]
    holder: Callable[[Any, Any], tuple[str | None, str | None]]
    explain: Callable[..., dict]
    target: Callable[[Any, Any, str], Any]
    resolve_targets: Callable[..., list]
    release_option: str
    models_drafter: bool = False
    verifiable: bool = False

    def version(self, tree) -> str | None:
        """The release of ``tree`` as the tree states it (its package metadata or version
        module: :meth:`auditor.index.tree.Tree.version`), None when it does not."""
        return tree.version()


class TreeFactsBase:
    """The engine-neutral part of an engine's tree-wide facts: which modules an extractor applies
    to, the facts it found there, and the modules missing from the analysis.

    Args:
        resolver: the tree's :class:`auditor.index.resolve.Resolver`.
        registry: the engine's registry of the tree.
    """

    def __init__(self, resolver, registry):
        self.resolver = resolver
        self.registry = registry
        self.tree = resolver.tree
        self._found: dict[str, list[tuple[str, object]]] = {}

    def candidate_paths(self, extractor: Extractor) -> list[str]:
        """Paths of the modules an extractor applies to (by path and trigger words); a file
        under its paths that cannot be read is a candidate too (see :meth:`unanalysed`).
        Computed once per tree (:meth:`auditor.index.tree.Tree.candidates`)."""
        return list(self.tree.candidates(extractor))

    def unanalysed(self, extractor: Extractor) -> list[tuple[str, str]]:
        """``(path, why)`` for each module that may hold the facts of ``extractor`` but is
        missing from the analysis: it does not parse (even with a newer grammar, see
        :func:`auditor.index.summary.parse_newer_syntax`) or cannot be read. A gate whose fact
        is not found while such a module exists is undecidable, not passed."""
        out = []
        for p in self.candidate_paths(extractor):
            s = self.tree.summary(p)
            if s.error:
                out.append((p, s.error))
        # a folder the tree could not list (a symbolic link out of the tree) may hold them too
        for folder, why in self.tree.unread_code().items():
            if folder.endswith("/") and (extractor.suffixes or any(
                    folder.startswith(x) or x.startswith(folder) or (x + "/").startswith(folder)
                    for x in extractor.prefixes)):
                out.append((folder, f"cannot be read ({why})"))
        return out

    def broken_module(self, module: str) -> tuple[str, str] | None:
        """``(path, why)`` when the tree has ``module`` but it is missing from the analysis (does
        not parse, cannot be read); None when it is analysed or absent."""
        path = self.tree.path_of(module)
        if path is None:
            hidden = self.tree.hidden_by(module.replace(".", "/"))
            return (hidden[0], f"cannot be read ({hidden[1]})") if hidden else None
        s = self.tree.summary(path)
        return (path, s.error) if s.error else None

    def found(self, extractor: Extractor) -> list[tuple[str, object]]:
        """``(path, fact)`` for every fact ``extractor`` found in the modules it applies to
        (computed once per tree and extractor)."""
        hit = self._found.get(extractor.name)
        if hit is None:
            hit = []
            for p in self.candidate_paths(extractor):
                s = self.tree.summary(p)
                hit += [(s.path, f) for f in s.extras.get(extractor.name, ())]
            self._found[extractor.name] = hit
        return hit

    def found_in(self, extractor: Extractor, path: str) -> list[object]:
        """The facts ``extractor`` found in the one module at ``path`` (tree path), as
        :meth:`found` lists them for that path; empty when the module is not one the extractor
        applies to. Only that module is summarised (a gate that asks about one class's module
        need not summarise every candidate)."""
        hit = self._found.get(extractor.name)
        if hit is not None:
            return [f for p, f in hit if p == path]
        if path not in self.tree.candidates(extractor):
            return []
        return list(self.tree.summary(path).extras.get(extractor.name, ()))


def init_assign(resolver: Resolver, ref: ClassRef, attrs: tuple[str, ...]):
    """The first ``__init__`` on ``ref``'s MRO that assigns ``self.<attr>`` for one of ``attrs``
    (``self.model = DeepseekV2Model(...)`` in a model file's ``ForCausalLM.__init__``, in vLLM
    and SGLang alike).

    Returns:
        ``(defining class, attr, (callee text, kwargs, line) or None, value text)``, or None.
    """
    for e in resolver.mro(ref).entries:
        if not isinstance(e, ClassRef):
            continue
        c = resolver.cls(e)
        if c is None or "__init__" not in c.methods:
            continue
        init = c.methods["__init__"]
        for a in attrs:
            if a in init.self_assigns:
                return e, a, init.self_assign_calls.get(a), init.self_assigns[a]
        # a helper the __init__ calls that assigns it (``self._build_model()`` setting
        # ``self.model = X(...)``), looked up on ref's MRO: an override counts
        for name in init.self_calls:
            hit = resolver.lookup(ref, name)
            if hit is None or hit[1] is init or not hasattr(hit[1], "self_assign_calls"):
                continue
            for a in attrs:
                if a in hit[1].self_assign_calls:
                    return hit[0], a, hit[1].self_assign_calls[a], hit[1].self_assigns[a]
    return None


def init_argument(resolver: Resolver, ref: ClassRef, owner: ClassRef, param: str) -> tuple[str, str] | None:
    """The value an instance of ``ref`` built with its defaults (how the engine's loader calls it:
    ``config``, ``quant_config``, ``prefix``) hands to the parameter ``param`` of
    ``owner.__init__``, following the ``super().__init__(...)`` chain from the first ``__init__``
    on ``ref``'s MRO down to ``owner``'s: a subclass's own default passed on positionally or by
    keyword (SGLang 0.5.11 ``sglang/srt/models/qwen3_vl_moe.py``:
    ``language_model_cls=Qwen3MoeLLMModel`` handed to ``Qwen3VLForConditionalGeneration.__init__``).

    Args:
        resolver: the tree's resolver.
        ref: the class instantiated.
        owner: a class on its MRO whose ``__init__`` takes ``param``.
        param: the parameter's name.

    Returns:
        ``(value text, module it is written in)``, or None when the value cannot be known (no
        default, a call that passes ``*args``, an ``__init__`` that does not call ``super()``).
    """
    env: dict[str, tuple[str, str] | None] | None = None
    for e in resolver.mro(ref).entries:
        if not isinstance(e, ClassRef):
            continue
        c = resolver.cls(e)
        init = c.methods.get("__init__") if c is not None else None
        if init is None:
            continue
        names = [n for n, _ in init.params]
        bound: dict[str, tuple[str, str] | None] = {n: ((d, e.module) if d is not None else None) for n, d in init.params}
        if env is not None:  # the arguments the previous __init__'s super().__init__ passed
            args, kwargs = env["__args__"], env["__kwargs__"]
            for n, v in list(zip(names, args)) + [(k, v) for k, v in kwargs.items() if k in bound]:
                bound[n] = v
        if e == owner:
            return bound.get(param)
        sup = init.super_init
        if sup is None or any(t.startswith("<Starred") for t in sup[0]):
            return None

        def value(text: str, bound=bound, e=e) -> tuple[str, str] | None:
            return bound.get(text) if text in bound else (text, e.module)

        env = {"__args__": [value(t) for t in sup[0]], "__kwargs__": {k: value(t) for k, t in sup[1].items()}}
    return None


# -- explain: the parts every engine's explanation shares ---------------------------------


def unresolved_class(dotted: str, facts) -> dict:
    """The class part of an explanation when the registry row names no class the tree resolves."""
    return {"class": dotted, "path": None, "line": None, "empty_subclass": False, "mro": [], "mro_detail": [],
            "resolved": False, "mro_problems": [f"cannot resolve the class: {facts.unresolved.reason}"]}


def class_and_mro(r, facts, is_protocol=None) -> dict:
    """The class part of an explanation, the same for every engine: ``class``, ``path``, ``line``,
    ``empty_subclass``, ``mro``, ``mro_detail`` (each entry's place and emptiness, and whether it
    is a typing protocol when ``is_protocol`` is given), ``mro_problems``, ``resolved``."""
    detail = []
    for e in facts.mro:
        d = {"name": e.dotted}
        if isinstance(e, ClassRef):
            loc = r.location(e)
            c = r.cls(e)
            d.update(path=loc[0] if loc else None, line=loc[1] if loc else None, empty=bool(c and c.empty))
            if is_protocol is not None:
                d["protocol"] = is_protocol(e)
        detail.append(d)
    problems = ([facts.mro_error] if facts.mro_error else []) + [
        f"unresolved base {u.text}: {u.reason}" for u in facts.mro_unresolved]
    return {"class": facts.ref.dotted, "path": facts.path, "line": facts.line, "empty_subclass": facts.empty,
            "mro": [e.dotted for e in facts.mro], "mro_detail": detail, "mro_problems": problems,
            "resolved": True}


def branches_followed(resolver: Resolver, modules: set[str]) -> list[dict]:
    """The import-time branches the resolution followed in ``modules`` on the resolver's platform:
    ``module``, ``name``, ``path``, ``line`` of the binding used (None: no branch binds it) and
    ``branch`` (the tests that hold there, e.g. ``not (current_platform.is_rocm())``)."""
    out = []
    for (mod, name), (conds, line) in sorted(resolver.followed.items()):
        if mod not in modules:
            continue
        branch = " and ".join(t if want else f"not ({t})" for t, want in conds) or "no branch binds it"
        out.append({"module": mod, "name": name, "path": resolver.tree.path_of(mod), "line": line, "branch": branch})
    return out
