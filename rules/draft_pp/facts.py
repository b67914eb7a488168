"""Facts of the ``draft-pp`` gate, found by what the code does.

- **The draft's parallel config**: a ``ParallelConfig(pipeline_parallel_size=..., ...)`` call in
  the speculative config (``SpeculativeConfig.create_draft_parallel_config`` in
  ``vllm/config/speculative.py``): the draft *inherits* the target's pipeline size when the value
  reads a ``pipeline_parallel_size`` attribute (``target_parallel_config.pipeline_parallel_size``,
  up to 0.27.x), and runs unsplit when it is the constant ``1`` (0.33.0). The same module calls
  ``draft_model_config.verify_with_parallel_config(...)`` on the draft.
- **The refusal**: an ``if`` that tests a ``pipeline_parallel_size`` against 1 together with a
  call asking whether the model supports pipeline parallelism
  (``self.registry.is_pp_supported_model(...)``) and raises (``ModelConfig.verify_with_parallel_config``
  in ``vllm/config/model.py``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from auditor.cache import cacheable
from auditor.index.summary import Extractor
from auditor.index.syntax import ParentMap, dotted


@cacheable
@dataclass
class DraftParallelFact:
    """One ``ParallelConfig(...)`` built in the speculative config: ``line``; ``function``;
    ``value``: the source text of its ``pipeline_parallel_size`` argument; ``inherits``: it reads a
    ``pipeline_parallel_size`` attribute; ``constant``: its value when it is an int literal;
    ``verify_line``: the line of a ``draft_model_config.verify_with_parallel_config(...)`` call in
    the module (None when there is none)."""

    line: int
    function: str
    value: str
    inherits: bool
    constant: int | None
    verify_line: int | None


def extract_draft_parallel(tree: ast.Module) -> list[DraftParallelFact]:
    """Every ``ParallelConfig(pipeline_parallel_size=...)`` of a module (see the module docstring)."""
    verify = None
    for n in ast.walk(tree):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "verify_with_parallel_config"
                and "draft" in (dotted(n.func.value) or "")):
            verify = n.lineno if verify is None else min(verify, n.lineno)
    out = []
    pm: ParentMap | None = None
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and (dotted(n.func) or "").split(".")[-1] == "ParallelConfig"):
            continue
        kw = next((k for k in n.keywords if k.arg == "pipeline_parallel_size"), None)
        if kw is None:
            continue
        pm = pm or ParentMap(tree)
        fn = pm.enclosing_function(n)
        inherits = any(isinstance(x, ast.Attribute) and x.attr == "pipeline_parallel_size" for x in ast.walk(kw.value))
        const = kw.value.value if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, int) else None
        out.append(DraftParallelFact(n.lineno, getattr(fn, "name", "<module>"), ast.unparse(kw.value), inherits,
                                     const, verify))
    return out


#: Runs on ``vllm/config*`` modules that build a ``ParallelConfig`` with a pipeline size.
PARALLEL_EXTRACTOR = Extractor("draft-parallel", extract_draft_parallel, prefixes=("vllm/config",),
                               needles=(b"ParallelConfig(", b"pipeline_parallel_size", b"draft"))


@cacheable
@dataclass
class PPRefusalFact:
    """The model config's refusal of a model without pipeline-parallel support: ``line`` of the
    ``if``, ``function``, ``check``: the call that asks (``is_pp_supported_model``), ``message``:
    the start of the error text (or "")."""

    line: int
    function: str
    check: str
    message: str


def extract_pp_refusal(tree: ast.Module) -> list[PPRefusalFact]:
    """Every ``if <pipeline_parallel_size> > 1 and not <...supports pp...>(...): raise`` of a module."""
    out = []
    pm: ParentMap | None = None
    for n in ast.walk(tree):
        if not isinstance(n, ast.If):
            continue
        test = n.test
        mentions_pp = any((isinstance(x, ast.Name) and x.id == "pipeline_parallel_size")
                          or (isinstance(x, ast.Attribute) and x.attr == "pipeline_parallel_size")
                          for x in ast.walk(test))
        asks = [x for x in ast.walk(test) if isinstance(x, ast.Call)
                and "pp" in (dotted(x.func) or "").split(".")[-1].lower().split("_")
                and "support" in (dotted(x.func) or "").split(".")[-1].lower()]
        raises = [s for s in n.body if isinstance(s, ast.Raise)]
        if not (mentions_pp and asks and raises):
            continue
        msg = ""
        exc = raises[0].exc
        if isinstance(exc, ast.Call) and exc.args:
            parts = [v.value for v in ast.walk(exc.args[0]) if isinstance(v, ast.Constant) and isinstance(v.value, str)]
            msg = "".join(parts)[:200]
        pm = pm or ParentMap(tree)
        fn = pm.enclosing_function(n)
        out.append(PPRefusalFact(n.lineno, getattr(fn, "name", "<module>"), dotted(asks[0].func) or "", msg))
    return out


#: Runs on ``vllm/config*`` modules that test a pipeline size and ask for pipeline support.
REFUSAL_EXTRACTOR = Extractor("pp-refusal", extract_pp_refusal, prefixes=("vllm/config",),
                              needles=(b"pipeline_parallel_size", b"pp_supported"))


def draft_parallel(ctx) -> list[tuple[str, DraftParallelFact]]:
    """``(path, fact)`` of every draft parallel config the tree's speculative config builds."""
    return ctx.facts.found(PARALLEL_EXTRACTOR)


def pp_refusal(ctx) -> tuple[str, PPRefusalFact] | None:
    """``(path, fact)`` of the model config's pipeline-parallel refusal, or None."""
    found = ctx.facts.found(REFUSAL_EXTRACTOR)
    return found[0] if found else None


def implements_pp(ctx, ref) -> tuple[bool | None, str]:
    """Whether the class ``ref`` passes vLLM's ``supports_pp`` check on the class (the registry's
    ``_ModelInfo.supports_pp``): it inherits the tree's ``SupportsPP`` protocol, or defines its
    members (the ``supports_pp`` flag set true and ``make_empty_intermediate_tensors``) at class
    level. Returns ``(answer or None when the tree has no protocol, a sentence saying why)``."""
    from auditor.index.facts import AttrFact

    proto = ctx.facts.protocol("SupportsPP")
    if proto is None:
        return None, "the tree defines no SupportsPP protocol in interfaces.py"
    if proto.ref in ctx.resolver.mro(ref).entries:
        return True, f"{ref.name} inherits SupportsPP"
    flag = ctx.resolver.lookup(ref, "supports_pp")
    if flag is None or not (isinstance(flag[1], AttrFact) and flag[1].literal is True):
        return False, f"{ref.name} neither inherits SupportsPP nor sets supports_pp = True"
    missing = [m for m in proto.members if m not in ("supports_pp", "forward") and ctx.resolver.lookup(ref, m) is None]
    if missing:
        return False, f"{ref.name} sets supports_pp but lacks {', '.join(missing)} at class level"
    return True, f"{ref.name} defines the SupportsPP members"
