"""Facts of the ``draft-registry`` gate: how the tree renames an EAGLE drafter's architectures.

``EAGLEConfig.__init__`` (``vllm/transformers_utils/configs/eagle.py``) assigns, per method,
``kwargs["architectures"] = [<expression of arch> for arch in self.model.architectures]`` under
``if method == "eagle":`` / ``elif method == "eagle3":`` (``X`` → ``EagleX`` unless it starts with
``Eagle``; ``X`` → ``Eagle3X`` unless it starts or ends with ``Eagle3``). The extractor keeps each
method's expression (as source text) and :func:`eagle_architectures` applies it with
:mod:`auditor.index.evaluate`, so that the rule is the tree's own, whatever it says.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from auditor.cache import cacheable
from auditor.index.evaluate import Evaluator
from auditor.index.summary import Extractor
from auditor.index.values import TOP, Inputs, State, one


@cacheable
@dataclass
class EagleRewriteFact:
    """One method's architecture rewrite: ``method`` (``eagle``), ``line`` of the assignment,
    ``var`` (the comprehension variable, ``arch``) and ``expression`` (the element's source text)."""

    method: str
    line: int
    var: str
    expression: str


def _method_of(test: ast.AST) -> str | None:
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.left, ast.Name) and test.left.id == "method"
            and isinstance(test.comparators[0], ast.Constant) and isinstance(test.comparators[0].value, str)):
        return test.comparators[0].value
    return None


def extract_eagle_rewrite(tree: ast.Module) -> list[EagleRewriteFact]:
    """Every ``if method == "X": ...["architectures"] = [<expr> for v in ...]`` of a module."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        method = _method_of(node.test)
        if method is None:
            continue
        for s in node.body:
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Subscript)
                    and isinstance(s.targets[0].slice, ast.Constant) and s.targets[0].slice.value == "architectures"
                    and isinstance(s.value, ast.ListComp) and len(s.value.generators) == 1
                    and isinstance(s.value.generators[0].target, ast.Name)):
                continue
            comp = s.value
            out.append(EagleRewriteFact(method, s.lineno, comp.generators[0].target.id, ast.unparse(comp.elt)))
    return out


#: Runs on the HF config classes of the tree that assign ``architectures`` per ``method``.
EXTRACTOR = Extractor("eagle-rewrite", extract_eagle_rewrite, prefixes=("vllm/transformers_utils/configs/",),
                      needles=(b"architectures", b"method"))


def rewrite_for(ctx, method: str) -> tuple[str, EagleRewriteFact] | None:
    """``(path, fact)`` of the tree's architecture rewrite for ``method``, or None."""
    for path, f in ctx.facts.found(EXTRACTOR):
        if f.method == method:
            return path, f
    return None


def apply_rewrite(fact: EagleRewriteFact, arch: str) -> str | None:
    """The architecture the rewrite makes of ``arch``, or None when the expression cannot be
    evaluated to one string (it is interpreted, never executed)."""
    try:
        expr = ast.parse(fact.expression, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    st = State()
    st.env[fact.var] = one(arch)
    v = Evaluator(Inputs()).eval(expr, st)
    if v is TOP or len(v) != 1:
        return None
    out = next(iter(v))
    return out if isinstance(out, str) else None


def eagle_architectures(ctx, method: str, draft_config: dict) -> tuple[str, int, list[str] | None] | None:
    """The drafter config's ``architectures`` as the tree rewrites them for ``method``: ``(path,
    line of the rewrite, rewritten names or None when one cannot be evaluated)``; None when the
    tree has no rewrite for the method."""
    found = rewrite_for(ctx, method)
    if found is None:
        return None
    path, fact = found
    archs = [a for a in draft_config.get("architectures") or [] if isinstance(a, str)]
    out = []
    for a in archs:
        r = apply_rewrite(fact, a)
        if r is None:
            return path, fact.line, None
        out.append(r)
    return path, fact.line, out
