"""The names a test of vLLM's speculative config validation reads, followed the way Python binds them.

A refusal of a method may read it through a name: a module constant (``_NO = "eagle3"``), a local
list (``bad = ["eagle3"]``), a local alias of the method (``m = self.method``) or a helper's
parameter (``_check(self.method)``). :class:`Scope` says what such a name holds when a statement of
a function runs: the expression of its binding (the last one that has run), the method itself,
or why it cannot be said.

A name is followed when every binding of it in its scope is a plain assignment at the top level
(of the module, or of the function's body before the statement) and nothing changes it in place;
otherwise :class:`Unfollowed` names the binding or change it cannot follow. A name bound nowhere
(a builtin) or a parameter of no known value reads state the scan does not know (:class:`Undecided`).
"""

from __future__ import annotations

import ast
import builtins
import functools
from dataclasses import dataclass, field
from typing import Iterator

from auditor.index.syntax import walk


@functools.lru_cache(maxsize=64)
def _attribute_stores(cls: ast.ClassDef) -> dict[str, list[ast.Attribute]]:
    """Every ``NAME.attr = ...`` store target inside ``cls`` (its methods included), by attribute
    name, in the order ``ast.walk`` meets them (computed once per class node)."""
    out: dict[str, list[ast.Attribute]] = {}
    for n in ast.walk(cls):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name):
            out.setdefault(n.attr, []).append(n)
    return out


class Undecided(Exception):
    """The value depends on something other than the method (a run option, the target, a call)."""


class Unfollowed(Exception):
    """The value depends on a binding or change static analysis does not follow; ``what`` names
    it as ``construct (line N)``."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


#: The value of a name bound to the speculative method itself (a parameter, ``m = self.method``).
METHOD = object()

#: Methods that only read their receiver (str, tuple and dict reads): calling one changes nothing.
_READS = frozenset({"startswith", "endswith", "lower", "upper", "strip", "lstrip", "rstrip", "casefold",
                    "count", "index", "find", "format", "join", "split", "replace", "copy", "get", "keys",
                    "values", "items", "__eq__", "__ne__", "__contains__"})
#: Builtins that only read their arguments.
_PURE = frozenset({"len", "str", "repr", "bool", "tuple", "list", "set", "frozenset", "sorted", "any", "all",
                   "isinstance", "print", "get_args", "getattr", "hasattr", "id", "type", "min", "max"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def own_nodes(owner: ast.AST) -> Iterator[ast.AST]:
    """The nodes of the scope of ``owner`` (a module or a function): not those inside a nested
    function, lambda or class body (the nested definition itself is yielded, its name is bound
    here), nor a comprehension's loop variables (bound in the comprehension's own scope)."""
    stack = list(ast.iter_child_nodes(owner))
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, _SCOPES):
            continue
        if isinstance(n, ast.comprehension):
            stack.extend([n.iter, *n.ifs])
            continue
        stack.extend(ast.iter_child_nodes(n))


@dataclass
class Bindings:
    """How the names of one scope are bound: ``plain`` the plain assignments of each name
    (``name = value``, in source order), ``other`` for each name one binding of another kind
    (an import, a loop, a walrus, ``+=``, a ``global`` elsewhere, ...), ``params`` the parameters,
    ``changes`` for each name one in-place change (a method call, an item store, passed to a call)."""

    plain: dict[str, list[ast.stmt]] = field(default_factory=dict)
    other: dict[str, ast.AST] = field(default_factory=dict)
    params: set[str] = field(default_factory=set)
    changes: dict[str, ast.AST] = field(default_factory=dict)
    declared_global: set[str] = field(default_factory=set)


def _other_names(n: ast.AST) -> list[str]:
    """The names ``n`` binds when it is a binding other than a Name store (imports, definitions,
    ``except ... as``, match captures, ``global``/``nonlocal``)."""
    if isinstance(n, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in n.names]
    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [n.name]
    if isinstance(n, ast.ExceptHandler) and n.name:
        return [n.name]
    if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
        return [n.name]
    if isinstance(n, ast.MatchMapping) and n.rest:
        return [n.rest]
    return []


def _changed_name(n: ast.AST) -> list[str]:
    """The names ``n`` may change in place: ``x.append(...)`` (any method that is not a read),
    ``x[k] = v``/``del x[k]``, ``f(x)`` (a call other than a pure builtin)."""
    out = []
    if isinstance(n, ast.Call):
        f = n.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr not in _READS:
            out.append(f.value.id)
        if not (isinstance(f, ast.Name) and f.id in _PURE) and not (isinstance(f, ast.Attribute) and f.attr in _READS):
            out += [a.id for a in [*n.args, *(k.value for k in n.keywords)] if isinstance(a, ast.Name)]
            out += [a.value.id for a in n.args if isinstance(a, ast.Starred) and isinstance(a.value, ast.Name)]
    elif isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)) and isinstance(n.value, ast.Name):
        out.append(n.value.id)
    return out


def _writes_globals(n: ast.AST) -> bool:
    """``globals()[k] = v``, ``globals().update(...)`` (or ``vars()``): any module name may change."""
    def is_globals(x: ast.AST) -> bool:
        return isinstance(x, ast.Call) and isinstance(x.func, ast.Name) and x.func.id in ("globals", "vars") \
            and not x.args
    if isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)) and is_globals(n.value):
        return True
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and is_globals(n.func.value) \
        and n.func.attr not in _READS


def bindings(owner: ast.AST, changes_in: ast.AST | None = None) -> Bindings:
    """The :class:`Bindings` of the scope of ``owner`` (a module or a function); in-place changes
    are looked for in the whole of ``changes_in`` (default ``owner``: a module's names may be
    changed from any of its functions)."""
    b = Bindings()
    plain_targets: set[int] = set()
    for n in own_nodes(owner):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    b.plain.setdefault(t.id, []).append(n)
                    plain_targets.add(id(t))
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)) and id(n) not in plain_targets:
            b.other.setdefault(n.id, n)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            b.declared_global.update(n.names)
        elif isinstance(n, ast.arg):
            b.params.add(n.arg)
        for name in _other_names(n):
            b.other.setdefault(name, n)
    for stmts in b.plain.values():
        stmts.sort(key=lambda st: (st.lineno, st.col_offset))
    if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = owner.args
        b.params |= {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    whole = changes_in or owner
    for n in walk(whole):
        if _writes_globals(n):
            b.changes.setdefault("*", n)
        for name in _changed_name(n):
            b.changes.setdefault(name, n)
    if isinstance(whole, ast.Module):  # a ``global x`` in a function that binds x there binds the module's x
        for fn in (f for f in walk(whole) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))):
            declared = {g for st in walk(fn) if isinstance(st, ast.Global) for g in st.names}
            for n in walk(fn):
                if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)) and n.id in declared:
                    b.other.setdefault(n.id, n)
    return b


def _at(node: ast.AST) -> str:
    return f"`{ast.unparse(node)[:60]}` (line {getattr(node, 'lineno', '?')})"


class Scope:
    """What the names of one function of a config module hold when one of its statements runs.

    Args:
        module: the module's syntax tree.
        module_bindings: :func:`bindings` of the module (shared by its functions).
        fn: the function, or None for the module scope itself.
        method_params: the parameters of ``fn`` that every call of it the validation makes binds
            to the speculative method.
        passed: where ``fn`` is also passed as a value (``construct (line N)``): what its other
            parameters hold is then not followed (Unfollowed rather than Undecided).
        arguments: for a helper evaluated at one call of it (:meth:`rules.allowlist.evaluate.Evaluator`),
            its parameters bound by that call, each to ``(expression, the caller's scope, the
            caller's statement)``.
    """

    def __init__(self, module: ast.Module, module_bindings: Bindings, fn: ast.AST | None = None,
                 method_params: frozenset[str] = frozenset(), passed: str | None = None,
                 arguments: dict | None = None):
        self.module, self.mb, self.fn = module, module_bindings, fn
        self.fb = bindings(fn) if fn is not None else None
        self.method_params = method_params
        self.passed = passed
        self.arguments = arguments or {}

    def lookup(self, name: str, at: ast.AST | None) -> "tuple[ast.expr, Scope, ast.stmt | None] | object":
        """What ``name`` holds when the statement ``at`` of this scope runs: :data:`METHOD`, or
        ``(expression, the scope to evaluate it in, the statement that bound it)``.

        Raises:
            Undecided: a builtin, a name bound nowhere, a parameter of unknown value.
            Unfollowed: a binding or change that is not followed (see the module docstring).
        """
        fb = self.fb
        if fb is not None and name not in fb.declared_global and (
                name in fb.plain or name in fb.other or name in fb.params):
            if name in fb.params:
                if name in fb.plain or name in fb.other:
                    raise Unfollowed(f"parameter `{name}` rebound at {_at((fb.plain.get(name) or [fb.other[name]])[0])}")
                if name in self.method_params:
                    return METHOD
                if name in self.arguments:
                    return self.arguments[name]
                if self.passed is not None:
                    raise Unfollowed(f"parameter `{name}` of a function passed as a value at {self.passed}")
                raise Undecided
            if name in fb.other:
                raise Unfollowed(f"`{name}`, bound by {_at(fb.other[name])}")
            if name in fb.changes:
                raise Unfollowed(f"`{name}`, changed by {_at(fb.changes[name])}")
            body = self.fn.body
            top = _top_index(body, at)
            plain = fb.plain[name]
            if any(st not in body for st in plain):
                raise Unfollowed(f"`{name}`, bound by {_at(next(st for st in plain if st not in body))}")
            before = [st for st in plain if top is not None and body.index(st) < top]
            if not before:
                raise Unfollowed(f"`{name}`, not yet bound when it is read")
            return before[-1].value, self, before[-1]
        mb = self.mb
        if name in mb.other:
            raise Unfollowed(f"`{name}`, bound by {_at(mb.other[name])}")
        if name not in mb.plain:
            star = mb.other.get("*")
            if star is not None and not hasattr(builtins, name):  # may come from the other module
                raise Unfollowed(f"`{name}`, maybe bound by {_at(star)}")
            raise Undecided
        changed = mb.changes.get(name) or mb.changes.get("*")
        if changed is not None:
            raise Unfollowed(f"`{name}`, changed by {_at(changed)}")
        plain = mb.plain[name]
        if any(st not in self.module.body for st in plain):
            raise Unfollowed(f"`{name}`, bound by {_at(next(st for st in plain if st not in self.module.body))}")
        module_scope = self if self.fn is None else Scope(self.module, mb)
        if self.fn is None:  # read while the module runs: the bindings above ``at``
            top = _top_index(self.module.body, at)
            plain = [st for st in plain if top is not None and self.module.body.index(st) < top]
            if not plain:
                raise Unfollowed(f"`{name}`, not yet bound when it is read")
        return plain[-1].value, module_scope, plain[-1]  # a function runs after the module: the last binding

    def _local(self, name: str) -> bool:
        fb = self.fb
        return fb is not None and name not in fb.declared_global and (
            name in fb.plain or name in fb.other or name in fb.params)

    def _binding(self, name: str) -> ast.AST | None:
        """The one non-plain binding of ``name`` seen from this scope (an import, a ``def``, ...)."""
        if self._local(name):
            return self.fb.other.get(name) if name not in self.fb.plain else None
        return self.mb.other.get(name) if name not in self.mb.plain else None

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` is a builtin nothing in the module binds (``len``, ``frozenset``)."""
        return hasattr(builtins, name) and not self._local(name) and name not in self.mb.plain \
            and name not in self.mb.other and "*" not in self.mb.changes

    def is_import(self, name: str) -> bool:
        """Whether ``name`` is bound by an import (a module or an object of one: run state)."""
        return isinstance(self._binding(name), (ast.Import, ast.ImportFrom))

    def function(self, node: ast.expr) -> "tuple[ast.AST, bool] | None":
        """The function of the module a call's ``node`` names, with whether the call binds its first
        parameter (``self.m``/``cls.m`` of this method's class or a base of the module, ``Class.m``
        of a class of the module, a module function by name); None for anything else."""
        funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, ast.Name):
            found = self._binding(node.id)
            return (found, False) if isinstance(found, funcs) else None
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
            return None
        name, cls, bound = node.value.id, None, False
        fn = self.fn
        if fn is not None and self._local(name):
            args = [*fn.args.posonlyargs, *fn.args.args]
            if args and args[0].arg == name and name not in self.fb.plain and name not in self.fb.other:
                cls, bound = self._owner(), True
        elif isinstance(self._binding(name), ast.ClassDef):
            cls = self._binding(name)
        if cls is None:
            return None
        found = _class_member(cls, node.attr, self.module)
        if isinstance(found, funcs) and bound:  # ``self._is_eagle3 = ...``: the instance's attribute hides it
            store = next((n for n in _attribute_stores(cls).get(node.attr, ()) if n.value.id == name), None)
            if store is not None:
                raise Unfollowed(f"{_at(node)}, `{name}.{node.attr}` also bound on the instance at {_at(store)}")
        if isinstance(found, funcs):
            kinds = {getattr(d, "id", getattr(d, "attr", None)) for d in found.decorator_list}
            return found, bound and "staticmethod" not in kinds or "classmethod" in kinds
        return None

    def _owner(self) -> ast.ClassDef | None:
        """The class whose body defines this scope's function (found once)."""
        if not hasattr(self, "_cls"):
            self._cls = next((c for c in walk(self.module) if isinstance(c, ast.ClassDef) and self.fn in c.body),
                             None)
        return self._cls

    def class_attribute(self, node: ast.Attribute) -> ast.stmt | None:
        """For ``self.X``/``cls.X`` in a method, or ``Class.X`` of a class of the module, the
        statement of the class body that binds ``X`` as a class attribute (a plain assignment, or
        one annotated ``ClassVar``/``Final``; an annotated one alone is a field: a run option)."""
        if not isinstance(node.value, ast.Name):
            return None
        name, cls = node.value.id, None
        fn = self.fn
        if fn is not None and self._local(name):
            args = [*fn.args.posonlyargs, *fn.args.args]
            if args and args[0].arg == name and name not in self.fb.plain and name not in self.fb.other:
                cls = self._owner()
        elif isinstance(self._binding(name), ast.ClassDef):
            cls = self._binding(name)
        if cls is None:
            return None
        found = None
        for st in cls.body:
            if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.attr for t in st.targets):
                found = st
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id == node.attr \
                    and st.value is not None and any(w in ast.unparse(st.annotation) for w in ("ClassVar", "Final")):
                found = st
        return found


def _class_member(cls: ast.ClassDef, name: str, module: ast.Module, seen: frozenset = frozenset()) -> ast.AST | None:
    """The last statement of ``cls``'s body that binds ``name`` (a ``def``, an assignment), else
    that of its first base of the module that binds it; None when none does."""
    found = None
    for st in cls.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and st.name == name:
            found = st
        elif isinstance(st, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id == name for t in (st.targets if isinstance(st, ast.Assign) else [st.target])):
            found = st
    if found is not None:
        return found
    classes = {st.name: st for st in module.body if isinstance(st, ast.ClassDef)}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
            found = _class_member(classes[base.id], name, module, seen | {cls.name})
            if found is not None:
                return found
    return None


def _top_index(body: list[ast.stmt], node: ast.AST | None) -> int | None:
    """The index in ``body`` of the statement that holds ``node`` (by position), or None."""
    if node is None:
        return None
    line = getattr(node, "lineno", None)
    for i, st in enumerate(body):
        if line is not None and st.lineno <= line <= (st.end_lineno or st.lineno):
            return i
    return None
