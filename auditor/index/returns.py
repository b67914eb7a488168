"""What a function gives back (:func:`returns_fact`, a :class:`~auditor.index.facts.ReturnsFact`),
read from its statements, to follow a function or method used as a class decorator.
"""

from __future__ import annotations

import ast

from auditor.index.facts import ReturnsFact
from auditor.index.syntax import COMPOUND, dotted, node_text, short_text, walk


def _return_entry(value: ast.expr | None, conds: tuple) -> tuple:
    """One ``return`` for :class:`ReturnsFact`: ``(kind, text, args, conds)``."""
    if value is None:
        return ("other", "None", (), conds)
    d = dotted(value)
    if d is not None:
        return ("name", d, (), conds)
    if isinstance(value, ast.Call) and dotted(value.func) is not None:
        args = tuple("?" if isinstance(a, ast.Starred) else (dotted(a) or "?") for a in value.args)
        return ("call", dotted(value.func), args, conds)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Call) and dotted(value.func.func) is not None:
        # ``return REGISTRY.register(...)(cls)``: a decorator factory applied in place
        args = tuple("?" if isinstance(a, ast.Starred) else (dotted(a) or "?") for a in value.args)
        inner = value.func
        return ("decorate", dotted(inner.func), args, conds, (len(inner.args), [k.arg or "**" for k in inner.keywords]))
    return ("other", short_text(value), (), conds)


def _gather_returns(body: list[ast.stmt], conds: tuple, out: list, inner: dict, depth: int) -> bool:
    """Record the returns of ``body`` run under ``conds`` into ``out`` (and the functions it
    defines into ``inner``); True when the block always ends in a ``return`` or ``raise``."""
    for st in body:
        if isinstance(st, ast.Return):
            out.append(_return_entry(st.value, conds))
            return True
        if isinstance(st, ast.Raise):
            return True
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if depth < 2:
                inner[st.name] = returns_fact(st, depth + 1)
            else:
                inner.pop(st.name, None)
        elif isinstance(st, ast.ClassDef):
            inner.pop(st.name, None)
        elif isinstance(st, ast.If):
            test = node_text(st.test)
            done_true = _gather_returns(st.body, conds + ((test, True),), out, inner, depth)
            done_false = _gather_returns(st.orelse, conds + ((test, False),), out, inner, depth)
            if done_true and done_false:
                return True
            if done_true:
                conds = conds + ((test, False),)  # what follows runs only when the test was false
            elif done_false:
                conds = conds + ((test, True),)
        elif isinstance(st, COMPOUND):
            for fld in ("body", "orelse", "finalbody"):
                sub = getattr(st, fld, None)
                if sub and isinstance(sub[0], ast.stmt):
                    _gather_returns(sub, conds, out, inner, depth)
            for h in getattr(st, "handlers", ()) or ():
                _gather_returns(h.body, conds, out, inner, depth)
            for c in getattr(st, "cases", ()) or ():
                _gather_returns(c.body, conds, out, inner, depth)
    return False


def _passes_own_arguments(fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call) -> bool:
    """True when ``call`` hands on exactly the arguments ``fn`` was called with: ``f(*args,
    **kwargs)`` with ``fn``'s own ``*args``/``**kwargs``, or its positional parameters in order."""
    a = fn.args
    own = [p.arg for p in a.posonlyargs + a.args]
    star = [f"*{a.vararg.arg}"] if a.vararg else []
    got = [("*" + x.value.id) if isinstance(x, ast.Starred) and isinstance(x.value, ast.Name)
           else x.id if isinstance(x, ast.Name) else "?" for x in call.args]
    kws = [k.value.id if k.arg is None and isinstance(k.value, ast.Name) else "?" for k in call.keywords]
    if got != own + star or a.kwonlyargs:
        return False
    return kws == ([a.kwarg.arg] if a.kwarg else [])


def returns_fact(fn: ast.FunctionDef | ast.AsyncFunctionDef, depth: int = 0) -> ReturnsFact:
    """What ``fn`` gives back (see :class:`ReturnsFact`), read from its statements.

    Args:
        fn: a function or method definition (already pruned of dead code).
        depth: how deeply ``fn`` is nested in the function being described (its own nested
            functions are described up to two levels).

    Returns:
        The fact (an ``async def`` gives back a coroutine: recorded as one ``"other"`` return).
    """
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults = {p.arg: short_text(d) for p, d in zip(pos[len(pos) - len(a.defaults):], a.defaults)}
    fact = ReturnsFact(params=[p.arg for p in pos], defaults=defaults)
    if depth:
        fact.calls = frozenset(d for n in walk(fn) if isinstance(n, ast.Call) and (d := dotted(n.func)))
        fact.passes = frozenset(d for n in walk(fn) if isinstance(n, ast.Call) and (d := dotted(n.func))
                                and _passes_own_arguments(fn, n))
    if isinstance(fn, ast.AsyncFunctionDef):
        fact.returns.append(("other", "a coroutine", (), ()))
        return fact
    if not _gather_returns(fn.body, (), fact.returns, fact.inner, depth):
        fact.returns.append(("other", "None", (), ()))  # the end of the body is reachable
    return fact
