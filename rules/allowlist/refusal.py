"""Tests of vLLM's speculative config validation that refuse a method outright, read statically.

Beside the spelling :mod:`rules.allowlist.facts` reads first (``if self.method == "eagle3":
raise``), a validation may refuse the method by a test that depends on nothing but the method:
``if self.method.startswith("eagle3"): raise``, ``if "eagle3" in self.method: raise``,
``assert self.method != "eagle3"``. Such a test is evaluated here for each speculative method
(:data:`METHODS`) without running anything; a test that reads anything else is not decided here.

Also here: the functions a later binding of the same name replaces (``def _verify_args`` written
twice in a class body: the last one is the method Python binds), whose tests never run.
"""

from __future__ import annotations

import ast
from typing import Any

from auditor.index.tables import COMPARISONS

#: The speculative methods a refusal is evaluated for (those of the engines, ``Engine.methods``).
METHODS = ("eagle3", "eagle", "mtp")


class _Undecided(Exception):
    pass


_STR_METHODS = {"startswith": str.startswith, "endswith": str.endswith}
_STR_CHANGES = {"lower": str.lower, "upper": str.upper, "strip": str.strip, "casefold": str.casefold}
_IDENTITY = {ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b}


def _is_method(node: ast.AST) -> bool:
    """``<name>.method`` or ``getattr(<name>, "method")``: the speculative method read."""
    if isinstance(node, ast.Attribute) and node.attr == "method" and isinstance(node.value, ast.Name):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
        and len(node.args) == 2 and isinstance(node.args[0], ast.Name) and isinstance(node.args[1], ast.Constant) \
        and node.args[1].value == "method"


def _value(node: ast.AST, method: str) -> Any:
    """The value of ``node`` when the speculative method is ``method``: ``<name>.method``,
    constants, tuple/list/set literals of them, ``.startswith``/``.endswith`` with a constant
    prefix, ``.lower()``-style changes, comparisons (``==`` or ``.__eq__``), ``and``/``or``/``not``,
    strings joined by ``+`` and sliced by constants, ``getattr(x, "method")``. Raises _Undecided
    for anything else."""
    if _is_method(node):
        return method
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # ``"eagle" + "3"``
        a, b = _value(node.left, method), _value(node.right, method)
        if isinstance(a, str) and isinstance(b, str):
            return a + b
        raise _Undecided
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):  # ``self.method[:6]``
        subject = _value(node.value, method)
        bounds = [None if x is None else _value(x, method) for x in (node.slice.lower, node.slice.upper,
                                                                     node.slice.step)]
        if isinstance(subject, str) and all(x is None or type(x) is int for x in bounds):
            return subject[slice(*bounds)]
        raise _Undecided
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("__eq__", "__ne__") \
            and len(node.args) == 1 and not node.keywords:  # ``self.method.__eq__("eagle3")``
        a, b = _value(node.func.value, method), _value(node.args[0], method)
        return (a == b) if node.func.attr == "__eq__" else (a != b)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        vals = tuple(_value(e, method) for e in node.elts)
        return set(vals) if isinstance(node, ast.Set) else vals
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
        subject = _value(node.func.value, method)
        if not isinstance(subject, str):
            raise _Undecided
        attr = node.func.attr
        if attr in _STR_METHODS and len(node.args) == 1:
            arg = _value(node.args[0], method)
            if isinstance(arg, (str, tuple)) and all(isinstance(a, str) for a in (arg if isinstance(arg, tuple) else [arg])):
                return _STR_METHODS[attr](subject, arg)
        if attr in _STR_CHANGES and not node.args:
            return _STR_CHANGES[attr](subject)
        raise _Undecided
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a, b = _value(node.left, method), _value(node.comparators[0], method)
        op = type(node.ops[0])
        compare = COMPARISONS.get(op) or _IDENTITY.get(op)
        if compare is None:
            raise _Undecided
        try:
            return compare(a, b)
        except TypeError as e:
            raise _Undecided from e
    if isinstance(node, ast.BoolOp):
        vals = [bool(_value(v, method)) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _value(node.operand, method)
    raise _Undecided


def refused_methods(node: ast.stmt) -> list[str] | None:
    """The speculative methods that ``node`` refuses for every target: an ``if`` whose test reads
    only the method (see :func:`_value`) and whose body raises at its top level, or an
    ``assert`` on such a test; as the :data:`METHODS` for which the ``if`` test holds (or the
    ``assert`` test fails). None when the statement is neither, or its test reads anything else,
    or it does not refuse eagle3."""
    if isinstance(node, ast.If):
        if not any(isinstance(s, ast.Raise) for s in node.body):
            return None
        test, refuses_when = node.test, True
    elif isinstance(node, ast.Assert):
        test, refuses_when = node.test, False
    else:
        return None
    if not any(_is_method(n) for n in ast.walk(test)):
        return None
    try:
        out = [m for m in METHODS if bool(_value(test, m)) is refuses_when]
    except _Undecided:
        return None
    return out if "eagle3" in out else None


def shadowed_functions(tree: ast.Module) -> set[ast.AST]:
    """The function definitions a later statement of the same body (module, class or function)
    binds the same name again, by a ``def``, a ``class`` or an assignment: the earlier one is never
    what the name means once the body has run (the last binding wins). A later ``def`` decorated
    with ``@<name>.<attr>`` (a property's setter) or ``@overload`` builds on the earlier one and
    does not count."""
    out: set[ast.AST] = set()
    for body_owner in ast.walk(tree):
        body = getattr(body_owner, "body", None)
        if not isinstance(body, list):
            continue
        for i, st in enumerate(body):
            if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if any(_is_overload(d) for d in st.decorator_list):
                continue
            for later in body[i + 1:]:
                if _rebinds(later, st.name):
                    out.add(st)
                    break
    return out


def _is_overload(deco: ast.expr) -> bool:
    return (deco.id if isinstance(deco, ast.Name) else getattr(deco, "attr", "")) == "overload"


def _rebinds(st: ast.stmt, name: str) -> bool:
    """True when the statement ``st`` binds ``name`` anew (see :func:`shadowed_functions`)."""
    if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and st.name == name:
        return not any(isinstance(d, ast.Attribute) and isinstance(d.value, ast.Name) and d.value.id == name
                       or _is_overload(d) for d in st.decorator_list)
    if isinstance(st, (ast.Assign, ast.AnnAssign)):
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        return st.value is not None and any(isinstance(t, ast.Name) and t.id == name for t in targets)
    return False


#: The methods of a config class that its construction runs (a dataclass's ``__post_init__``,
#: ``__init__``, vLLM's ``_verify_args`` called from them) and the decorators that make a method a
#: validator run with the construction (pydantic's ``model_validator``/``field_validator``).
_ENTRY_METHODS = frozenset({"__init__", "__post_init__", "_verify_args", "__attrs_post_init__"})
_VALIDATOR_WORDS = ("validator",)


def validation_functions(tree: ast.Module) -> set[ast.AST]:
    """The functions of a config module that constructing its classes runs: the entry methods of
    each class (:data:`_ENTRY_METHODS`, a method decorated as a validator), then, transitively,
    the methods they call as ``self.m(...)`` and the module-level functions they call by name. A
    test in any other function (one never called, one of another code path) refuses nothing when
    the config is built.

    Args:
        tree: the config module's syntax tree.

    Returns:
        The function nodes (``ast.FunctionDef``/``AsyncFunctionDef``).
    """
    funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
    module_fns = {st.name: st for st in tree.body if isinstance(st, funcs)}
    out: set[ast.AST] = set()
    todo: list[tuple[ast.AST, dict]] = []
    for cls in (st for st in ast.walk(tree) if isinstance(st, ast.ClassDef)):
        methods = {st.name: st for st in cls.body if isinstance(st, funcs)}
        for name, fn in methods.items():
            words = [ast.unparse(d) for d in fn.decorator_list]
            if name in _ENTRY_METHODS or any(w in d for d in words for w in _VALIDATOR_WORDS):
                todo.append((fn, methods))
    while todo:
        fn, methods = todo.pop()
        if fn in out:
            continue
        out.add(fn)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls") \
                    and f.attr in methods:
                todo.append((methods[f.attr], methods))
            elif isinstance(f, ast.Name) and f.id in module_fns:
                todo.append((module_fns[f.id], {}))
    return out
