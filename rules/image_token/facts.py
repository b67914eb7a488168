"""Facts of the ``image-token`` gate: the EAGLE proposer's per-architecture image-token branches.

In ``vllm/v1/spec_decode/eagle.py`` (``llm_base_proposer.py`` from 0.20.0): when the target
``supports_multimodal``, the proposer copies an image token id into the drafter's config, with
branches naming architectures and a fallback reading ``image_token_index``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from auditor.cache import cacheable
from auditor.index.summary import Extractor
from auditor.index.syntax import ParentMap, char_position, dotted


@cacheable
@dataclass
class ImageTokenBranch:
    """One branch of the proposer's image-token chain: the architectures it names (empty for the
    fallback ``else``), the attribute path it reads from the target (``config.image_token_id``),
    and its line."""

    architectures: list[str]
    attr_path: str
    line: int
    assign_at: tuple[int, int] | None = None


@cacheable
@dataclass
class ImageTokenFact:
    """The proposer's image-token handling: ``line`` of the ``supports_multimodal(...)`` test,
    ``branches`` in order (the fallback last, with no architectures), ``function``.

    Where a fix edits, found here once (the codemod maps these places to its own syntax tree):
    ``at`` is the ``(line, column)`` of the ``if supports_multimodal(...)`` statement,
    ``target_var`` the variable it tests, ``branch_at`` the places of the per-architecture ``if``
    branches in order, and each branch's ``assign_at`` the place of its assignment. Columns count
    characters."""

    line: int
    function: str
    branches: list[ImageTokenBranch] = field(default_factory=list)
    at: tuple[int, int] | None = None
    target_var: str = "target_model"
    branch_at: list[tuple[int, int]] = field(default_factory=list)


def _arch_test(test: ast.AST) -> list[str] | None:
    """Architectures named by a branch test like ``self.get_model_name(m) in [..]`` / ``== ".."``."""
    if isinstance(test, ast.BoolOp):
        names: list[str] = []
        for v in test.values:
            r = _arch_test(v)
            if r:
                names += r
        return names or None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        comp = test.comparators[0]
        if isinstance(test.ops[0], ast.Eq) and isinstance(comp, ast.Constant) and isinstance(comp.value, str):
            return [comp.value]
        if isinstance(test.ops[0], ast.In) and isinstance(comp, (ast.List, ast.Tuple, ast.Set)):
            return [e.value for e in comp.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


def _image_token_assign(body: list[ast.stmt]) -> tuple[str, int, ast.Assign] | None:
    for s in body:
        for n in ast.walk(s):
            if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "image_token_index" for t in n.targets
            ):
                d = dotted(n.value) or ast.unparse(n.value)
                parts = d.split(".")
                # drop the target-model variable: target_model.config.x -> config.x
                path = ".".join(parts[1:]) if len(parts) > 1 else d
                return path, n.lineno, n
    return None


def extract_image_token(tree: ast.Module, source: str | None = None) -> list[ImageTokenFact]:
    """Find the proposer's image-token chains (see :class:`ImageTokenFact`); ``source`` (the
    module's text) makes the recorded columns exact for non-ASCII lines."""
    lines = source.splitlines() if source is not None else None
    out: list[ImageTokenFact] = []
    pm: ParentMap | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        call = next((n for n in ast.walk(node.test)
                     if isinstance(n, ast.Call) and (dotted(n.func) or "").endswith("supports_multimodal")), None)
        if call is None:
            continue
        body_has = any(
            isinstance(n, ast.Attribute) and n.attr == "image_token_index"
            for s in node.body
            for n in ast.walk(s)
        )
        if not body_has:
            continue
        pm = pm or ParentMap(tree)
        fn = pm.enclosing_function(node)
        fact = ImageTokenFact(line=node.lineno, function=getattr(fn, "name", "<module>"),
                              at=char_position(node, lines),
                              target_var=(dotted(call.args[0]) if call.args else None) or "target_model")
        # find the first if-chain in the body that assigns image_token_index
        chain = next((s for s in node.body if isinstance(s, ast.If) and _arch_test(s.test)), None)
        if chain is None:
            a = _image_token_assign(node.body)
            if a:
                fact.branches.append(ImageTokenBranch([], a[0], a[1], char_position(a[2], lines)))
            out.append(fact)
            continue
        cur: ast.stmt | None = chain
        while isinstance(cur, ast.If):
            archs = _arch_test(cur.test) or []
            fact.branch_at.append(char_position(cur, lines))
            a = _image_token_assign(cur.body)
            if a:
                fact.branches.append(ImageTokenBranch(archs, a[0], a[1], char_position(a[2], lines)))
            if len(cur.orelse) == 1 and isinstance(cur.orelse[0], ast.If) and _arch_test(cur.orelse[0].test):
                cur = cur.orelse[0]
            else:
                a = _image_token_assign(cur.orelse) if cur.orelse else None
                if a:
                    fact.branches.append(ImageTokenBranch([], a[0], a[1], char_position(a[2], lines)))
                cur = None
        out.append(fact)
    return out



#: The image-token extractor, run on ``vllm/v1/spec_decode`` modules with both trigger words.
EXTRACTOR = Extractor("image_token", prefixes=("vllm/v1/spec_decode",),
                      needles=(b"image_token_index", b"supports_multimodal"), run=extract_image_token)


def image_token_chains(ctx) -> "list[tuple[str, ImageTokenFact]]":
    """``(path, fact)`` for every image-token chain of the proposer in the tree of ``ctx``."""
    return ctx.facts.found(EXTRACTOR)
