"""The layout of the code the codemods write: comma-separated sequences (an import's names, a
call's arguments, a class's bases, a literal's items) grown in their own layout
(:func:`insert_items`), wrapped one item per line (:func:`explode`, :func:`is_exploded`,
:func:`indent_ws`) when a line would pass :data:`LINE_LENGTH` (:func:`too_long`).
"""

from __future__ import annotations

from typing import Any, Sequence

import libcst as cst

#: Line length the codemods aim to stay within (vLLM's ruff setting).
LINE_LENGTH = 88


def _no_comment(ws: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """The same whitespace without a trailing comment (so that copying a separator never
    duplicates a comment)."""
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return ws


def _separator(items: Sequence[Any], opening_ws: cst.BaseParenthesizableWhitespace | None) -> cst.Comma:
    """The comma that separates two items of this sequence, as the sequence writes it."""
    for it in items[:-1]:
        if isinstance(it.comma, cst.Comma):
            return it.comma.with_changes(whitespace_after=_no_comment(it.comma.whitespace_after))
    if isinstance(opening_ws, cst.ParenthesizedWhitespace):
        return cst.Comma(whitespace_after=_no_comment(opening_ws))
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def insert_items(
    items: Sequence[Any],
    new_items: Sequence[Any],
    index: int | None = None,
    opening_ws: cst.BaseParenthesizableWhitespace | None = None,
    closing_ws: cst.BaseParenthesizableWhitespace | None = None,
) -> tuple[list[Any], cst.BaseParenthesizableWhitespace | None]:
    """Insert ``new_items`` (Element / Arg / ImportAlias nodes) into a comma-separated sequence
    at ``index`` (default: the end), in the sequence's own layout: one per line when it is
    exploded, ``a, b`` when inline, keeping a trailing comma and any comment on the last line
    where they were.

    Returns:
        ``(items, closing_ws)``: the new items and the whitespace to put before the closing
        bracket (changed only when a comment had to move).
    """
    items = list(items)
    if not items:
        out = [n.with_changes(comma=cst.MaybeSentinel.DEFAULT) for n in new_items]
        for i in range(len(out) - 1):
            out[i] = out[i].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return out, closing_ws
    sep = _separator(items, opening_ws)
    if index is not None and index < len(items):
        fresh = [n.with_changes(comma=sep) for n in new_items]
        return items[:index] + fresh + items[index:], closing_ws
    last = items[-1]
    trailing = last.comma  # Comma (trailing comma) or MaybeSentinel
    last_sep = sep
    if isinstance(sep.whitespace_after, cst.ParenthesizedWhitespace) and isinstance(
        closing_ws, cst.ParenthesizedWhitespace
    ):
        # the old last line's comment (kept before the closing bracket) stays on that line
        last_sep = sep.with_changes(
            whitespace_after=sep.whitespace_after.with_changes(first_line=closing_ws.first_line)
        )
        closing_ws = closing_ws.with_changes(first_line=cst.TrailingWhitespace())
    out = items[:-1] + [last.with_changes(comma=last_sep)]
    for i, n in enumerate(new_items):
        out.append(n.with_changes(comma=sep if i < len(new_items) - 1 else trailing))
    return out, closing_ws


def indent_ws(indent: str) -> cst.ParenthesizedWhitespace:
    """The whitespace after an opening bracket (or before a closing one) that starts a new line
    indented by ``indent``."""
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True, last_line=cst.SimpleWhitespace(indent)
    )


def explode(items: Sequence[Any], indent: str = "    ") -> tuple[list[Any], cst.ParenthesizedWhitespace, cst.ParenthesizedWhitespace]:
    """Lay a sequence out one item per line with a trailing comma (ruff's "magic trailing comma"
    form). Returns ``(items, opening whitespace, closing whitespace)``."""
    out = []
    for it in items:
        out.append(it.with_changes(comma=cst.Comma(whitespace_after=indent_ws(indent))))
    if out:
        out[-1] = out[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace("")))
    return out, indent_ws(indent), indent_ws("")


def is_exploded(items: Sequence[Any]) -> bool:
    """True when the items of a sequence are laid out one per line (a newline follows a comma)."""
    return any(
        isinstance(it.comma, cst.Comma) and isinstance(it.comma.whitespace_after, cst.ParenthesizedWhitespace)
        for it in list(items)[:-1]
    )


def too_long(module: cst.Module, node: cst.CSTNode, depth: int = 0, needle: str | None = None) -> bool:
    """True when a line of ``node`` (rendered at block depth ``depth``) that contains ``needle``
    (any line if None) is longer than :data:`LINE_LENGTH`."""
    pad = len(module.default_indent) * depth
    for line in module.code_for_node(node).splitlines():
        if needle is not None and needle not in line:
            continue
        if pad + len(line) > LINE_LENGTH:
            return True
    return False
