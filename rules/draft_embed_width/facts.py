"""Facts of the ``draft-embed-width`` gate, found by what the code does.

Drafter side (model modules): a class whose ``__init__`` builds its own embedding
``self.embed_tokens = <Embedding>(vocab, W_e, ...)`` and an input projection whose input width is
``2 * W_b`` with ``W_b`` another expression than ``W_e``, and whose ``forward`` concatenates two
tensors (``torch.cat([inputs_embeds, hidden_states], dim=-1)``): it projects the *target's*
embedding (width ``W_b``) beside the target's hidden states, so it relies on the proposer
replacing its own embedding by the target's (vLLM 0.25.1 ``model_executor/models/gemma4_mtp.py``,
``Gemma4MultiTokenPredictor``: ``embed_tokens`` at ``hidden_size``, ``pre_projection`` at
``2 * backbone_hidden_size``). :data:`DRAFT_EXTRACTOR` records each such class.

Proposer side (``vllm/v1/spec_decode/``): the method that shares the target's embedding
(assigns ``self.model.model.embed_tokens = ...``) and keeps the draft's own when the two widths
differ (``if target_dim != draft_dim: share_embeddings = False``, the dims read from
``.weight.shape``), and whether that test runs only for EAGLE drafts (under a test of
``has_own_embed_tokens``: 0.27.0) or for MTP drafts too (0.25.1). :data:`SHARER_EXTRACTOR`
records every method that puts the target's embedding into the draft, with its width guard when
it has one (so that a subclass overriding the sharing without the guard, as 0.27.0's
``Gemma4Proposer``, is seen).
"""

from __future__ import annotations

import ast

from dataclasses import dataclass, field

from auditor.cache import cacheable
from auditor.index.summary import Extractor
from auditor.index.syntax import walk, walk_statements


@cacheable
@dataclass
class DraftWidthFact:
    """A drafter class that projects a target-width embedding: ``cls`` (its name) and ``line``;
    the width expression of its own embedding (``embed_width``, at ``embed_line``); the projection
    attribute (``projection``), the half of its input width (``projection_width``: ``W`` of
    ``2 * W``) at ``projection_line``; the ``concat_line`` of its forward's ``cat`` of two tensors;
    ``inner``: the class name ``self.model`` is built from, when it is (for the drafter's outer
    class)."""

    cls: str
    line: int
    embed_width: str | None = None
    embed_line: int | None = None
    projection: str | None = None
    projection_width: str | None = None
    projection_line: int | None = None
    concat_line: int | None = None
    inner: str | None = None


@cacheable
@dataclass
class SharerFact:
    """A proposer method that puts the target's embedding into the draft
    (``self.model.model.embed_tokens = ...``): ``cls``/``method`` and its ``line``; ``guard_line``:
    the ``if`` that keeps the draft's own embedding when the two widths differ (None: no such
    guard); ``eagle_only``: that guard runs only under a test of ``has_own_embed_tokens`` (EAGLE
    drafts), not for MTP drafts."""

    cls: str
    method: str
    line: int
    guard_line: int | None = None
    eagle_only: bool = False


def _self_attr(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _half_of_double(node: ast.AST) -> ast.AST | None:
    """``W`` of ``2 * W`` (or ``W * 2``)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for a, b in ((node.left, node.right), (node.right, node.left)):
            if isinstance(a, ast.Constant) and a.value == 2:
                return b
    return None


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}


def extract_draft_widths(tree: ast.Module) -> list[DraftWidthFact]:
    """Every class that builds its own ``embed_tokens`` and a ``2 * W`` projection of another width
    ``W`` (see the module docstring), or that builds ``self.model`` from a class (kept so that a
    drafter's outer class leads to its inner model)."""
    out = []
    for cls in [n for n in walk_statements(tree) if isinstance(n, ast.ClassDef)]:
        ms = _methods(cls)
        init = ms.get("__init__")
        if init is None:
            continue
        fact = DraftWidthFact(cls.name, cls.lineno)
        for n in walk(init):
            if not isinstance(n, ast.Assign) or not isinstance(n.value, ast.Call):
                continue
            for t in n.targets:
                attr = _self_attr(t)
                if attr is None:
                    continue
                call = n.value
                if attr == "embed_tokens" and len(call.args) >= 2:
                    fact.embed_width, fact.embed_line = ast.unparse(call.args[1]), n.lineno
                elif attr == "model" and isinstance(call.func, ast.Name):
                    fact.inner = call.func.id
                elif call.args and fact.projection is None:
                    half = _half_of_double(call.args[0])
                    if half is not None:
                        fact.projection, fact.projection_width, fact.projection_line = attr, ast.unparse(half), n.lineno
        fwd = ms.get("forward")
        for n in walk(fwd) if fwd is not None else ():
            if (isinstance(n, ast.Call) and n.args and isinstance(n.args[0], (ast.List, ast.Tuple))
                    and len(n.args[0].elts) == 2
                    and ((isinstance(n.func, ast.Attribute) and n.func.attr in ("cat", "concat", "concatenate"))
                         or (isinstance(n.func, ast.Name) and n.func.id in ("cat", "concat")))):
                fact.concat_line = n.lineno
                break
        relies = (fact.embed_width and fact.projection_width and fact.concat_line
                  and fact.projection_width != fact.embed_width)
        if relies or fact.inner:
            if not relies:
                fact.embed_width = fact.projection = fact.projection_width = None
            out.append(fact)
    return out


def _shape_read(node: ast.AST) -> bool:
    """``<x>.weight.shape[...]`` or ``<x>.weight.size(...)`` somewhere in ``node``."""
    for n in walk(node):
        if isinstance(n, ast.Attribute) and n.attr in ("shape", "size") and isinstance(n.value, ast.Attribute) \
                and n.value.attr == "weight":
            return True
    return False


def _mentions(node: ast.AST, word: str) -> bool:
    return any((isinstance(n, ast.Attribute) and n.attr == word) or (isinstance(n, ast.Constant) and n.value == word)
               for n in walk(node))


def _assigns_draft_embedding(fn: ast.AST) -> bool:
    """``self.model.model.embed_tokens = ...`` (or ``self.model.embed_tokens = ...``)."""
    for n in walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Attribute) and t.attr == "embed_tokens" and "self.model" in ast.unparse(t):
                    return True
    return False


def _width_guard(fn: ast.FunctionDef) -> tuple[int, bool] | None:
    """``(line, eagle_only)`` of the ``if A != B:`` whose body sets a ``share*`` name False, A and B
    assigned from ``.weight.shape`` reads in the same function."""
    dims = set()
    for n in walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and _shape_read(n.value):
            dims.add(n.targets[0].id)

    def visit(stmts, eagle: bool):
        for st in stmts:
            if isinstance(st, ast.If):
                t = st.test
                if (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.NotEq)
                        and isinstance(t.left, ast.Name) and isinstance(t.comparators[0], ast.Name)
                        and {t.left.id, t.comparators[0].id} <= dims
                        and any(isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) and s.value.value is False
                                and any(isinstance(x, ast.Name) and x.id.startswith("share") for x in s.targets)
                                for s in st.body)):
                    return st.lineno, eagle
                inner = eagle or _mentions(st.test, "has_own_embed_tokens")
                hit = visit(st.body, inner) or visit(st.orelse, eagle)
                if hit:
                    return hit
            elif isinstance(st, (ast.For, ast.While, ast.With, ast.Try)):
                for fld in ("body", "orelse", "finalbody"):
                    hit = visit(getattr(st, fld, []) or [], eagle)
                    if hit:
                        return hit
        return None

    return visit(fn.body, False)


def extract_sharers(tree: ast.Module) -> list[SharerFact]:
    """Every proposer method that puts the target's embedding into the draft, with its width guard
    when it has one (see the module docstring)."""
    out = []
    for cls in [n for n in walk_statements(tree) if isinstance(n, ast.ClassDef)]:
        for name, fn in _methods(cls).items():
            if not _assigns_draft_embedding(fn):
                continue
            g = _width_guard(fn)
            out.append(SharerFact(cls.name, name, fn.lineno, g[0] if g else None, g[1] if g else False))
    return out


#: Runs on model modules that build an ``embed_tokens`` and concatenate.
DRAFT_EXTRACTOR = Extractor("draft-embed-width", extract_draft_widths,
                            prefixes=("vllm/model_executor/models/", "vllm/models/"),
                            needles=(b"embed_tokens", b"cat(", b"2 *"))

#: Runs on the proposer modules that put an embedding into the draft.
SHARER_EXTRACTOR = Extractor("embed-sharers", extract_sharers, prefixes=("vllm/v1/spec_decode/",),
                             needles=(b"embed_tokens",))
