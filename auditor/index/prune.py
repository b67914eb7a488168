"""Dead-code pruning of a parsed module, before the index reads it (:func:`prune_dead_code`), and the
``raise`` a block always reaches (:func:`first_raise`: importing a module that reaches one fails).
"""

from __future__ import annotations

import ast

from auditor.index.syntax import COMPOUND


_TERMINATORS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _const_truth(test: ast.expr) -> bool | None:
    """The truth of an ``if``/``while`` test that is a constant (``False``, ``0``, ``not True``),
    or None when it is not constant."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Constant):
        return not test.operand.value
    return None


#: the statements pruning dropped, one list per function being pruned (innermost last): only
#: they can have held the yield that made it a generator
_DROPPED: list[list[ast.stmt]] = []


def _drop(stmts: list[ast.stmt]) -> None:
    if _DROPPED and stmts:
        _DROPPED[-1].extend(stmts)


def _prune_block(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for i, st in enumerate(body):
        if isinstance(st, ast.If) and _const_truth(st.test) is not None:
            taken = _const_truth(st.test)
            _drop(st.orelse if taken else st.body)
            out.extend(_prune_block(st.body if taken else st.orelse))
            if out and isinstance(out[-1], _TERMINATORS):
                _drop(body[i + 1:])
                break
            continue
        if isinstance(st, ast.While) and _const_truth(st.test) is False:
            _drop(st.body)
            out.extend(_prune_block(st.orelse))
            continue
        if isinstance(st, COMPOUND):
            _prune_children(st)
        out.append(st)
        if isinstance(st, _TERMINATORS):
            _drop(body[i + 1:])
            break  # what follows in this block never runs
    return out


def own_yield(nodes: list[ast.AST]) -> ast.AST | None:
    """A ``yield`` of the function ``nodes`` (its statements or children) belong to, not of a
    nested function, class or lambda; None when there is none (the function is no generator)."""
    todo = list(nodes)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Yield, ast.YieldFrom)):
            return n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(n))
    return None


def _prune_children(st: ast.stmt) -> None:
    if not isinstance(st, ast.FunctionDef):
        _prune_fields(st)
        return
    _DROPPED.append([])
    try:
        _prune_fields(st)
    finally:
        dropped = _DROPPED.pop()
    was = own_yield(dropped) if dropped else None
    if was is not None and own_yield(st.body) is None:
        # a yield only in dead code still makes a generator function (a call runs none of its
        # body): keep one, under ``if False:``, so that readers still see a generator
        at = {"lineno": was.lineno, "col_offset": was.col_offset}
        never = ast.If(test=ast.Constant(value=False, **at), body=[ast.Expr(value=ast.Yield(value=None, **at), **at)],
                       orelse=[], **at)
        st.body.append(never)


def _prune_fields(st: ast.stmt) -> None:
    for fld in ("body", "orelse", "finalbody"):
        sub = getattr(st, fld, None)
        if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
            new = _prune_block(sub)
            if not new and fld == "body":
                new = [ast.Pass(lineno=st.lineno, col_offset=st.col_offset, end_lineno=st.lineno,
                                end_col_offset=st.col_offset)]
            setattr(st, fld, new)
    for h in getattr(st, "handlers", ()) or ():
        h.body = _prune_block(h.body) or [ast.Pass(lineno=h.lineno, col_offset=h.col_offset)]
    for c in getattr(st, "cases", ()) or ():
        c.body = _prune_block(c.body) or [ast.Pass(lineno=st.lineno, col_offset=st.col_offset)]


def _may_catch(handler: ast.ExceptHandler, raised: ast.Raise) -> bool:
    """False only when ``raised`` raises a builtin exception class by name (``raise KeyError``,
    ``raise KeyError(...)``) and every type the handler names is a builtin exception class that
    is not among its bases (Python's own exception hierarchy); True otherwise (a bare
    ``except:``, a name the module may bind, a computed type). The builtin names are taken as
    the builtins, as elsewhere in the summary."""
    import builtins

    exc = raised.exc.func if isinstance(raised.exc, ast.Call) else raised.exc
    cls = getattr(builtins, exc.id, None) if isinstance(exc, ast.Name) else None
    if not (isinstance(cls, type) and issubclass(cls, BaseException)) or handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for t in types:
        caught = getattr(builtins, t.id, None) if isinstance(t, ast.Name) else None
        if not (isinstance(caught, type) and issubclass(caught, BaseException)) or issubclass(cls, caught):
            return True
    return False


def first_raise(body: list[ast.stmt]) -> ast.Raise | None:
    """The ``raise`` that running the (pruned) block always reaches, else None: a ``raise`` of the
    block itself, or one that a statement of it always propagates: the body of a class statement
    (the class is built when the statement runs), a ``finally`` block, or the body of a ``try``
    whose handlers that may catch it (:func:`_may_catch`) all raise too. A ``with`` body is left out: its context manager may
    swallow the exception."""
    for st in body:
        if isinstance(st, ast.Raise):
            return st
        if isinstance(st, ast.ClassDef):
            found = first_raise(st.body)
        elif isinstance(st, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            found = first_raise(st.finalbody)
            if found is None:
                inner = first_raise(st.body)
                catching = [h for h in st.handlers if inner is None or _may_catch(h, inner)]
                if inner is not None and all(first_raise(h.body) is not None for h in catching):
                    found = next((r for h in catching for r in [first_raise(h.body)] if r.exc is not None), inner)
        else:
            found = None
        if found is not None:
            return found
    return None


def prune_dead_code(tree: ast.Module) -> ast.Module:
    """Remove, in place, the statements of ``tree`` that never run, so that every later reading
    (the summary and the extractors) sees only code that executes: what follows an unconditional
    ``return``/``raise``/``continue``/``break`` in the same block, the false branch of an ``if``
    whose test is a constant (``if False:``, ``if 0:``, ``if not True:``), and ``while False:``
    bodies. Lines are kept (nodes are dropped, never renumbered).

    Args:
        tree: a parsed module.

    Returns:
        The same module object, pruned.
    """
    tree.body = _prune_block(tree.body)
    return tree
