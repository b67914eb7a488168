"""Facts of the ``draft-lm-head`` gate, found by what the code does.

Drafter side (model modules): per class, whether its ``__init__`` assigns ``self.lm_head``, how it
runs its parent's ``__init__`` (``super().__init__(...)``, ``Base.__init__(self, ...)``, or not
at all), and whether its ``load_weights`` skips ``lm_head.`` weights (``skip_prefixes``). vLLM
0.11.2 ``model_executor/models/llama4_eagle.py``: ``EagleLlama4ForCausalLM(Llama4ForCausalLM)``
runs ``nn.Module.__init__(self)`` (not ``Llama4ForCausalLM.__init__``, which builds the head) and
assigns no ``lm_head``; its ``load_weights`` skips ``lm_head.``. :data:`CLASS_EXTRACTOR`.

Proposer side (``vllm/v1/spec_decode/``): the method that shares the target's LM head with the
draft (``self.model.lm_head = <target>.lm_head``) and, before that, reads the draft's own
``self.model.lm_head`` (0.11.2 ``eagle.py``: ``torch.equal(...,
self.model.lm_head.weight)``, reached when the drafter's ``has_own_lm_head`` is set, which
``process_eagle_weight`` does when the checkpoint ships an ``lm_head`` weight).
:data:`SHARE_EXTRACTOR`.
"""

from __future__ import annotations

import ast

from dataclasses import dataclass, field

from auditor.cache import cacheable
from auditor.index.summary import Extractor
from auditor.index.syntax import walk, walk_statements


@cacheable
@dataclass
class InitFact:
    """A class's ``__init__``: ``cls``, ``line``; ``lm_head``: it assigns ``self.lm_head``;
    ``parent``: how it runs a parent's ``__init__`` (``"super"``, the dotted name ``X`` of
    ``X.__init__(self, ...)``, or None when it runs none); ``skips_lm_head``: its
    ``load_weights`` skips ``lm_head.`` weights; ``weight_calls``: the functions its
    ``load_weights`` calls by name (``process_eagle_weight``); ``has_init``: False for a class
    recorded for its ``load_weights`` alone."""

    cls: str
    line: int
    lm_head: bool
    parent: str | None
    skips_lm_head: bool = False
    has_init: bool = True
    weight_calls: list[str] = field(default_factory=list)


@cacheable
@dataclass
class LmHeadShareFact:
    """A proposer method that shares the target's LM head with the draft: ``cls``/``method``,
    ``line``; ``read_line``: where it reads the draft's own ``self.model.lm_head`` (None: it never
    does); ``flag_line``: the test of ``has_own_lm_head``."""

    cls: str
    method: str
    line: int
    read_line: int | None = None
    flag_line: int | None = None


def _dotted(e: ast.AST) -> str | None:
    parts = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if isinstance(e, ast.Name):
        return ".".join([e.id, *reversed(parts)])
    return None


def extract_inits(tree: ast.Module) -> list[InitFact]:
    """Every class with an ``__init__``, as :class:`InitFact`."""
    out = []
    for cls in [n for n in walk_statements(tree) if isinstance(n, ast.ClassDef)]:
        ms = {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        init = ms.get("__init__")
        lw = ms.get("load_weights")
        if init is None and lw is None:
            continue
        lm = init is not None and any(isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
            isinstance(t, ast.Attribute) and t.attr == "lm_head" and isinstance(t.value, ast.Name) and t.value.id == "self"
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])) for n in walk(init))
        parent = None
        for n in walk(init) if init is not None else ():
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__":
                v = n.func.value
                if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
                    parent = "super"
                    break
                d = _dotted(v)
                if d and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == "self":
                    parent = d
                    break
        skips = False
        calls = sorted({n.func.id for n in walk(lw) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
                       if lw is not None else set())
        for n in walk(lw) if lw is not None else ():
            if isinstance(n, ast.keyword) and n.arg == "skip_prefixes":
                skips = any(isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.startswith("lm_head")
                            for c in walk(n.value))
                if skips:
                    break
        out.append(InitFact(cls.name, cls.lineno, lm, parent, skips, init is not None, calls))
    return out


def _is_draft_head(e: ast.AST) -> bool:
    """``self.model.lm_head``."""
    return (isinstance(e, ast.Attribute) and e.attr == "lm_head" and isinstance(e.value, ast.Attribute)
            and e.value.attr == "model" and isinstance(e.value.value, ast.Name) and e.value.value.id == "self")


def extract_lm_head_sharing(tree: ast.Module) -> list[LmHeadShareFact]:
    """Every proposer method that assigns ``self.model.lm_head = <x>.lm_head``, with the first read
    of ``self.model.lm_head`` (not a ``del`` or an assignment of it; ``hasattr(self.model.lm_head,
    ...)`` reads it) and the ``has_own_lm_head`` test."""
    out = []
    for cls in [n for n in walk_statements(tree) if isinstance(n, ast.ClassDef)]:
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            shares = any(isinstance(n, ast.Assign) and any(_is_draft_head(t) for t in n.targets)
                         and isinstance(n.value, ast.Attribute) and n.value.attr == "lm_head" for n in walk(fn))
            if not shares:
                continue
            guarded: set[int] = set()
            for n in walk(fn):
                if isinstance(n, ast.Delete):
                    guarded |= {id(x) for t in n.targets for x in walk(t)}
                if isinstance(n, ast.Assign):
                    guarded |= {id(t) for t in n.targets}
            reads = sorted(n.lineno for n in walk(fn) if _is_draft_head(n) and id(n) not in guarded
                           and isinstance(n.ctx, ast.Load))
            flags = sorted(n.lineno for n in walk(fn) if isinstance(n, ast.Constant) and n.value == "has_own_lm_head")
            out.append(LmHeadShareFact(cls.name, fn.name, fn.lineno, reads[0] if reads else None,
                                       flags[0] if flags else None))
    return out


#: Runs on model modules that build or skip an LM head.
CLASS_EXTRACTOR = Extractor("draft-lm-head-init", extract_inits,
                            prefixes=("vllm/model_executor/models/", "vllm/models/"), needles=(b"lm_head", b"__init__"))

#: Runs on the proposer modules that share the target's LM head.
SHARE_EXTRACTOR = Extractor("lm-head-sharing", extract_lm_head_sharing, prefixes=("vllm/v1/spec_decode/",),
                            needles=(b"lm_head",))


def extract_flag_setters(tree: ast.Module) -> list[str]:
    """Functions of a module that set ``<param>.has_own_lm_head = True`` (0.11.2
    ``model_executor/models/utils.py`` ``process_eagle_weight``, when a weight's name has
    ``lm_head``): a drafter's ``load_weights`` that calls one can turn the flag on."""
    out = []
    for fn in tree.body:
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is True
                and any(isinstance(t, ast.Attribute) and t.attr == "has_own_lm_head" for t in n.targets)
                for n in walk(fn)):
            out.append(fn.name)
    return out


def extract_head_methods(tree: ast.Module) -> list[str]:
    """``Class.method`` for every method of a proposer module whose name mentions ``lm_head`` (a
    subclass overriding the base's head sharing, as 0.33.0's ``Step3p5MTPProposer``)."""
    return sorted({f"{c.name}.{f.name}" for c in walk_statements(tree) if isinstance(c, ast.ClassDef) for f in c.body
                   if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and "lm_head" in f.name})


#: Runs on model modules that set the drafter's has_own_lm_head flag.
FLAG_EXTRACTOR = Extractor("lm-head-flag-setters", extract_flag_setters,
                           prefixes=("vllm/model_executor/models/", "vllm/models/"), needles=(b"has_own_lm_head",))

#: Runs on the proposer modules: their methods named for the LM head.
METHODS_EXTRACTOR = Extractor("lm-head-methods", extract_head_methods, prefixes=("vllm/v1/spec_decode/",),
                              needles=(b"lm_head",))
