"""Small readings of Python syntax that the index's passes share (``ast`` only, no state).

Module names from paths (:func:`module_name_for`, :func:`resolve_relative`), dotted names and short
texts of expressions (:func:`dotted`, :func:`node_text`, :func:`short_text`, :func:`head_of`), the
statements of a block (:func:`iter_stmts`, :data:`COMPOUND`, :func:`walk`, :func:`walk_statements`), a statement that changes a container
(:func:`container_change`), and positions and parents (:func:`char_position`, :class:`ParentMap`).
"""

from __future__ import annotations

import ast
from typing import Any


def module_name_for(path: str) -> tuple[str, bool]:
    """Map a POSIX path (``vllm/a/b.py`` or ``vllm/a/__init__.py``) to ``(dotted name, is_package)``."""
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Absolute module for ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name or ""
    pkg_parts = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        pkg_parts = pkg_parts[: len(pkg_parts) - (level - 1)]
    base = ".".join(pkg_parts)
    if name:
        return f"{base}.{name}" if base else name
    return base


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def node_text(node: ast.AST) -> str:
    """The source text of ``node`` (``ast.unparse``), or ``"<expr>"`` should unparsing fail."""
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every node ast produces
        return "<expr>"


def construct_text(node: ast.AST) -> str:
    """The text of ``node`` as a finding quotes it (at most 100 characters)."""
    return node_text(node)[:100]


def is_empty_class_body(body: list[ast.stmt]) -> bool:
    """True when a class body holds only a docstring (or other constant expressions), ``pass`` and ``...``."""
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Pass):
            continue
        return False
    return True


def is_type_checking(test: ast.expr) -> bool:
    """True when an ``if`` test is ``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    d = dotted(test)
    return d in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def short_text(node: ast.AST) -> str:
    """Cheap display text: a dotted name as written, a call's callee with ``(...)``, else the
    node type (full unparsing of every value costs more than parsing the module)."""
    d = dotted(node)
    if d is not None:
        return d
    if isinstance(node, ast.Call):
        return f"{short_text(node.func)}(...)"
    if isinstance(node, ast.Constant):
        return repr(node.value)[:80]
    return f"<{type(node).__name__}>"


#: statements that hold statements
COMPOUND = tuple(getattr(ast, n) for n in ("If", "For", "AsyncFor", "While", "With", "AsyncWith", "Try", "TryStar",
                                             "FunctionDef", "AsyncFunctionDef", "ClassDef", "Match") if hasattr(ast, n))


def iter_stmts(body: list[ast.stmt]):
    """Every statement in ``body``, recursively through compound statements, but not into
    nested functions or classes."""
    stack = list(reversed(body))
    while stack:
        st = stack.pop()
        yield st
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for fld in ("body", "orelse", "finalbody"):
            sub = getattr(st, fld, None)
            if sub:
                stack.extend(reversed(sub))
        for h in getattr(st, "handlers", ()) or ():
            stack.extend(reversed(h.body))
        for c in getattr(st, "cases", ()) or ():
            stack.extend(reversed(c.body))


#: The fields that hold statements, handlers or cases, in the order of every node's ``_fields``
#: (a ``try``: body, handlers, orelse, finalbody).
_STATEMENT_FIELDS = ("body", "handlers", "orelse", "finalbody", "cases")


def walk(node: ast.AST):
    """Every node of ``node``'s tree, ``node`` first, in exactly the order of :func:`ast.walk`
    (the same breadth-first walk over each node's ``_fields``), with less overhead per node: the
    summary pass walks whole functions and modules many times."""
    from collections import deque

    todo = deque([node])
    pop, append, extend = todo.popleft, todo.append, todo.extend
    node_type = ast.AST
    while todo:
        n = pop()
        for name in n._fields:
            v = getattr(n, name, None)
            if isinstance(v, node_type):
                append(v)
            elif isinstance(v, list):
                extend([x for x in v if isinstance(x, node_type)])
        yield n


def walk_statements(tree: ast.AST):
    """The nodes of ``tree`` that are statements (``tree`` itself first, then every statement,
    handler and ``case``, nested functions and classes included), in exactly the order
    :func:`ast.walk` yields them: the same breadth-first walk, which skips the expressions (they
    never hold a statement), so a search for definitions finds them in the same order, faster."""
    from collections import deque

    todo = deque([tree])
    while todo:
        node = todo.popleft()
        for name in _STATEMENT_FIELDS:
            sub = getattr(node, name, None)
            if isinstance(sub, list):
                todo.extend(sub)
        yield node


def head_of(node: ast.AST) -> str:
    """The head of a member change as written: a dotted name, ``getattr(X, "a")`` as ``X.a``,
    else the expression's text (``getattr(llama, NAME)``: an object computed at run time)."""
    d = dotted(node)
    if d is not None:
        return d
    if isinstance(node, ast.Call) and dotted(node.func) == "getattr" and len(node.args) >= 2:
        key = node.args[1]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return f"{head_of(node.args[0])}.{key.value}"
    return node_text(node)[:100]


def dict_owner(node: ast.AST) -> ast.AST | None:
    """``X`` of ``X.__dict__`` or ``vars(X)`` (a namespace written through), else None."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    if isinstance(node, ast.Call) and dotted(node.func) == "vars" and len(node.args) == 1:
        return node.args[0]
    return None


#: method names of a call that may change the container it is called on
_CHANGING_CALLS = frozenset({"update", "pop", "setdefault", "clear", "popitem", "__setitem__", "__delitem__",
                             "append", "extend", "insert", "remove"})


def container_change(st: ast.stmt) -> tuple[str, str, Any] | None:
    """``(dotted head, method, first argument or key when a string constant)`` when statement
    ``st`` is a call that may change the container it is called on (a method of
    :data:`_CHANGING_CALLS` or one whose name starts with ``register``) or an item write or delete
    through a dotted name; else None."""
    def key(node):
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None

    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Attribute):
        f = st.value.func
        head = dotted(f.value)
        if head is not None and (f.attr in _CHANGING_CALLS or f.attr.startswith("register")):
            return head, f.attr, key(st.value.args[0]) if st.value.args else None
    if isinstance(st, (ast.Assign, ast.AugAssign, ast.Delete)):
        targets = st.targets if isinstance(st, (ast.Assign, ast.Delete)) else [st.target]
        for t in targets:
            if isinstance(t, ast.Subscript) and dotted(t.value) is not None:
                return dotted(t.value), "__delitem__" if isinstance(st, ast.Delete) else "__setitem__", key(t.slice)
    return None


def char_position(node: ast.AST, lines: list[str] | None) -> tuple[int, int]:
    """``(line, character column)`` of a node, as libcst counts them (``ast`` columns count
    UTF-8 bytes); ``lines`` is the module's text split into lines (None: byte columns kept)."""
    col = node.col_offset
    if lines is not None and 0 < node.lineno <= len(lines):
        col = len(lines[node.lineno - 1].encode("utf-8")[:col].decode("utf-8", "replace"))
    return node.lineno, col


class ParentMap:
    """Parent links of a syntax tree, to find the function that encloses a node."""

    def __init__(self, tree: ast.AST):
        from collections import deque

        parent: dict[ast.AST, ast.AST] = {}
        self.parent = parent
        # the walk of :func:`walk`, recording each node's children as it queues them (the links
        # in the order ``ast.walk``/``ast.iter_child_nodes`` give them)
        todo = deque([tree])
        node_type = ast.AST
        while todo:
            p = todo.popleft()
            for name in p._fields:
                v = getattr(p, name, None)
                if isinstance(v, node_type):
                    parent[v] = p
                    todo.append(v)
                elif isinstance(v, list):
                    for c in v:
                        if isinstance(c, node_type):
                            parent[c] = p
                            todo.append(c)

    def enclosing_function(self, node: ast.AST) -> ast.AST | None:
        """The function definition that contains ``node``, or None at module level."""
        cur = self.parent.get(node)
        while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
            cur = self.parent.get(cur)
        return cur
