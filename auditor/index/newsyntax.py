"""The fallback parser for modules of a newer Python grammar than this interpreter's.

:func:`parse_newer_syntax` parses with libcst and replaces each statement ``ast`` rejects by
``pass``; :func:`left_out_statements` says where those statements stood.
"""

from __future__ import annotations

import ast

#: Files the newer-grammar parser is tried on: at most this size, and brackets nested at most
#: this deep (Python itself refuses more than 200 nested parentheses).
_NEWER_SYNTAX_MAX_BYTES = 4 << 20
_NEWER_SYNTAX_MAX_DEPTH = 200


def _bracket_depth(source: bytes) -> int:
    """The deepest nesting of ``( [ {`` in ``source``, ignoring that brackets may sit in strings
    or comments (an upper bound, only used to refuse pathological input cheaply)."""
    depth = deepest = 0
    for ch in source.translate(None, _NOT_BRACKETS):
        if ch in b"([{":
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest


_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"()[]{}")


def left_out_statements(tree: ast.Module, replaced: list[int]) -> list[tuple[int, str | None, bool]]:
    """Where the statements :func:`parse_newer_syntax` replaced by ``pass`` stood, as ``(line,
    qualname of the innermost enclosing class or None, True when the statement is at module
    level)``."""
    lines = set(replaced)
    out: list[tuple[int, str | None, bool]] = []
    todo: list[tuple[list[ast.stmt], str | None, bool]] = [(tree.body, None, True)]
    while todo:
        body, qual, top = todo.pop()
        for st in body:
            if isinstance(st, ast.Pass) and st.lineno in lines:
                out.append((st.lineno, qual, top))
            if isinstance(st, ast.ClassDef):
                todo.append((st.body, f"{qual}.{st.name}" if qual else st.name, False))
                continue
            for field_name in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in getattr(st, field_name, None) or ():
                    if isinstance(child, ast.stmt):
                        todo.append(([child], qual, top and not isinstance(st, (ast.FunctionDef,
                                                                                 ast.AsyncFunctionDef))))
                    elif hasattr(child, "body"):  # an except handler, a match case
                        todo.append((child.body, qual, top))
    return out


def parse_newer_syntax(source: bytes, path: str) -> tuple[ast.Module, list[int]] | None:
    """Parse a module that this interpreter's ``ast`` rejects but that is valid Python of a newer
    grammar (``type X = int``, ``def f[T](x: T)`` on Python 3.11): libcst's parser, which accepts
    newer grammar, checks that the module is valid, and each statement that ``ast`` cannot parse is
    replaced by ``pass`` (same lines, same indentation) so that the rest of the module is indexed.

    Returns:
        ``(syntax tree, first lines of the replaced statements)``, or None when libcst rejects the
        module too (a real syntax error), the statements cannot be isolated, or the file is too
        large or too deeply nested to try (see :data:`_NEWER_SYNTAX_MAX_DEPTH`).
    """
    if len(source) > _NEWER_SYNTAX_MAX_BYTES or _bracket_depth(source) > _NEWER_SYNTAX_MAX_DEPTH:
        return None  # pathological nesting: libcst's native parser would overflow its stack
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    try:
        mod = cst.parse_module(source)
        spans = []
        for node, pos in MetadataWrapper(mod, unsafe_skip_copy=True).resolve(PositionProvider).items():
            if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                spans.append((pos.start.line, pos.end.line, pos.start.column))
        lines = source.decode(mod.encoding).splitlines(keepends=True)
    except Exception:  # libcst rejects it (ParserSyntaxError) or it cannot be decoded
        return None
    replaced: list[int] = []
    for _ in range(200):
        try:
            return ast.parse("".join(lines), filename=path), replaced
        except (SyntaxError, ValueError) as exc:
            ln = getattr(exc, "lineno", None)
            hits = [sp for sp in spans if ln is not None and sp[0] <= ln <= sp[1] and sp[0] not in replaced]
            if not hits:
                return None
            start, end, col = min(hits, key=lambda sp: sp[1] - sp[0])
            lines[start - 1] = " " * col + "pass\n"
            for i in range(start, min(end, len(lines))):
                lines[i] = "\n"
            replaced.append(start)
    return None
