"""Statements of vLLM's speculative config validation that stop a method for every target, read statically.

Beside the spelling :mod:`rules.allowlist.facts` reads first (``if self.method == "eagle3":
raise``), a validation may refuse the method by a test that depends on nothing but the method:
``if self.method.startswith("eagle3"): raise``, ``if "eagle3" in self.method: raise``,
``assert self.method != "eagle3"``, through a name (``_NO = "eagle3"``; ``m = self.method``; a
helper's parameter, ``_check(self.method)``), in an ``elif`` chain, a ``case`` of a ``match``, a
``try`` whose handlers do not catch it. Each ``raise``/``assert`` of the functions building the
config runs (:func:`validation_functions`) is evaluated for each speculative method
(:data:`METHODS`) the way Python runs it, without running anything: the branches above it, the
names its tests read (:mod:`rules.allowlist.names`). A test that reads anything else (a run
option, the target) is conditional and refuses nothing for every target; one that reads a binding
the scan does not follow is reported as such. An assignment of a new value to the method
(``self.method = self.method.upper()``) that Python may run for a method makes the tests after
it read another value: reported too (:class:`Refusal`).

Also here: the functions a later binding of the same name replaces (``def _verify_args`` written
twice in a class body: the last one is the method Python binds), whose tests never run.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from typing import Any

from auditor.index.syntax import ParentMap
from auditor.index.tables import COMPARISONS
from rules.allowlist.names import METHOD, Scope, Undecided, Unfollowed, bindings, own_nodes
from rules.allowlist.validators import is_method as _is_method
from rules.allowlist.validators import shadowed_functions, validation_functions

#: The speculative methods a refusal is evaluated for (those of the engines, ``Engine.methods``).
METHODS = ("eagle3", "eagle", "mtp")


_STR_METHODS = {"startswith": str.startswith, "endswith": str.endswith}
_STR_CHANGES = {"lower": str.lower, "upper": str.upper, "strip": str.strip, "casefold": str.casefold}
_IDENTITY = {ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b}
#: deeper chains of names than this are not followed
_DEPTH = 16


@dataclass(frozen=True)
class _LiteralType:
    """A ``Literal[...]`` type alias: ``get_args`` gives its values (nested ones flattened)."""

    args: tuple


def _is_name(node: ast.AST, name: str) -> bool:
    """``name`` or ``<module>.name`` (``Literal``, ``typing.Literal``)."""
    return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)


class _Eval:
    """Evaluates an expression of a config module when the speculative method is ``method``.

    ``read`` is set once the value read the method (directly, or through a name bound to it).
    """

    def __init__(self, method: str, scope: Scope, at: ast.AST | None):
        self.method, self.scope, self.at = method, scope, at
        self.read = False
        self.depth = 0

    def all(self, nodes: list) -> list:
        """The values of ``nodes``; when some cannot be had, Undecided wins over Unfollowed (a test
        that reads a run option is conditional, whatever else it reads)."""
        vals, unfollowed, undecided = [], None, False
        for n in nodes:
            try:
                vals.append(None if n is None else self.value(n))
            except Undecided:
                undecided = True
            except Unfollowed as e:
                unfollowed = unfollowed or e
        if undecided:
            raise Undecided
        if unfollowed is not None:
            raise unfollowed
        return vals

    def name(self, node: ast.Name) -> Any:
        found = self.scope.lookup(node.id, self.at)
        if found is METHOD:
            self.read = True
            return self.method
        expr, scope, stmt = found
        if self.depth > _DEPTH:
            raise Undecided
        inner = _Eval(self.method, scope, stmt)
        inner.depth = self.depth + 1
        try:
            return inner.value(expr)
        finally:
            self.read = self.read or inner.read

    def value(self, node: ast.AST) -> Any:
        """The value of ``node``: the method, constants, names (:class:`Scope`), tuple/list/set
        literals, ``.startswith``/``.endswith``, ``.lower()``-style changes, comparisons (``==``,
        ``in``, ``is``, ``.__eq__``), ``and``/``or``/``not`` (short-circuit), strings joined by ``+``
        and sliced by constants, ``getattr(x, "method")``, ``Literal[...]`` and ``get_args``.

        Raises:
            Undecided: the value reads anything else.
            Unfollowed: it reads a name whose binding is not followed.
        """
        if _is_method(node):
            self.read = True
            return self.method
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # ``"eagle" + "3"``
            a, b = self.all([node.left, node.right])
            if isinstance(a, str) and isinstance(b, str):
                return a + b
            raise Undecided
        if isinstance(node, ast.Subscript) and _is_name(node.value, "Literal"):  # a type alias
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            vals = self.all(elts)
            return _LiteralType(tuple(a for v in vals for a in (v.args if isinstance(v, _LiteralType) else (v,))))
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):  # ``self.method[:6]``
            subject, *bounds = self.all([node.value, node.slice.lower, node.slice.upper, node.slice.step])
            if isinstance(subject, str) and all(x is None or type(x) is int for x in bounds):
                return subject[slice(*bounds)]
            raise Undecided
        if isinstance(node, ast.Call) and _is_name(node.func, "get_args") and len(node.args) == 1:
            arg = self.value(node.args[0])
            if isinstance(arg, _LiteralType):
                return arg.args
            raise Undecided
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("__eq__", "__ne__") \
                and len(node.args) == 1 and not node.keywords:  # ``self.method.__eq__("eagle3")``
            a, b = self.all([node.func.value, node.args[0]])
            return (a == b) if node.func.attr == "__eq__" else (a != b)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            vals = tuple(self.all(list(node.elts)))
            return set(vals) if isinstance(node, ast.Set) else vals
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
            subject, *args = self.all([node.func.value, *node.args])
            if not isinstance(subject, str):
                raise Undecided
            attr = node.func.attr
            if attr in _STR_METHODS and len(args) == 1:
                arg = args[0]
                if isinstance(arg, (str, tuple)) and all(isinstance(a, str) for a in (arg if isinstance(arg, tuple) else [arg])):
                    return _STR_METHODS[attr](subject, arg)
            if attr in _STR_CHANGES and not args:
                return _STR_CHANGES[attr](subject)
            raise Undecided
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a, b = self.all([node.left, node.comparators[0]])
            op = type(node.ops[0])
            compare = COMPARISONS.get(op) or _IDENTITY.get(op)
            if compare is None:
                raise Undecided
            try:
                return compare(a, b)
            except TypeError as e:
                raise Undecided from e
        if isinstance(node, ast.BoolOp):
            # Python stops at the first operand that decides; one that decides makes the others moot
            decisive = isinstance(node.op, ast.Or)
            vals = []
            for v in node.values:
                try:
                    vals.append(bool(self.value(v)))
                except (Undecided, Unfollowed):
                    vals.append(None)
                    continue
                if vals[-1] is decisive:
                    return decisive
            if None in vals:
                self.all(list(node.values))  # raises the reason
            return not decisive
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.value(node.operand)
        raise Undecided

    def truth(self, node: ast.AST) -> bool:
        """The truth of ``node`` (see :meth:`value`)."""
        return bool(self.value(node))

    def matches(self, pattern: ast.pattern, subject: Any) -> bool:
        """Whether a ``case`` pattern matches ``subject``: values, singletons, ``|``, ``_`` and captures.

        Raises:
            Undecided, Unfollowed: as :meth:`value`; Unfollowed for other patterns (classes,
            sequences, mappings)."""
        if isinstance(pattern, ast.MatchValue):
            return subject == self.value(pattern.value)
        if isinstance(pattern, ast.MatchSingleton):
            return subject is pattern.value
        if isinstance(pattern, ast.MatchAs):
            return True if pattern.pattern is None else self.matches(pattern.pattern, subject)
        if isinstance(pattern, ast.MatchOr):
            for p in pattern.patterns:
                if self.matches(p, subject):
                    return True
            return False
        raise Unfollowed(f"`case {ast.unparse(pattern)[:50]}` (line {pattern.lineno})")


# -- where a statement runs: the branches, cases, try blocks and loops above it -----------------

#: how a statement of a validation function runs for one method, from the surest to the least:
#: ``never`` (a branch Python does not take), ``conditional`` (a branch that depends on anything
#: but the method), ``unfollowed`` (one that reads a binding the scan does not follow), ``always``
TAKEN, NEVER, CONDITIONAL, UNFOLLOWED = "always", "never", "conditional", "unfollowed"


@dataclass
class Reach:
    """How a statement runs for one method: ``how`` (one of the states above), ``read`` whether a
    test on its way read the method, ``what`` the construct that is not followed."""

    how: str = TAKEN
    read: bool = False
    what: str | None = None

    def add(self, how: str, what: str | None = None) -> None:
        """Combine with one more step: ``never`` wins, then ``conditional``, then ``unfollowed``."""
        order = (NEVER, CONDITIONAL, UNFOLLOWED, TAKEN)
        if order.index(how) < order.index(self.how):
            self.how, self.what = how, what if how == UNFOLLOWED else self.what


def _builtin_exception(name: str | None) -> type | None:
    cls = getattr(builtins, name, None) if name else None
    return cls if isinstance(cls, type) and issubclass(cls, BaseException) else None


def _raised_name(node: ast.stmt) -> str | None:
    """The class a ``raise`` or ``assert`` statement raises, by name (``ValueError``), if it says."""
    if isinstance(node, ast.Assert):
        return "AssertionError"
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return exc.id if isinstance(exc, ast.Name) else getattr(exc, "attr", None)


def _catches(handler: ast.ExceptHandler, raised: str | None) -> bool | None:
    """Whether ``except`` ``handler`` catches the exception class named ``raised``; None when the
    classes are not builtins (which one derives from which is not followed here)."""
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    cls = _builtin_exception(raised)
    out = False
    for t in types:
        caught = _builtin_exception(t.id if isinstance(t, ast.Name) else None)
        if cls is None or caught is None:
            return None
        out = out or issubclass(cls, caught)
    return out


def _exits(body: list[ast.stmt]) -> bool | None:
    """Whether a ``finally`` block ends an exception that crosses it: True for a ``return``,
    ``break`` or ``continue`` at its top, None for one further in, False for none."""
    if any(isinstance(s, (ast.Return, ast.Break, ast.Continue)) for s in body):
        return True
    inner = [n for s in body for n in ast.walk(s) if isinstance(n, (ast.Return, ast.Break, ast.Continue))]
    return None if inner else False


def reach(stmt: ast.stmt, fn: ast.AST, parents: ParentMap, ev: "_Eval", raises: bool) -> Reach:
    """How ``stmt`` of the function ``fn`` runs when ``fn`` runs with the method of ``ev``, and, for
    a statement that ``raises``, whether its exception leaves ``fn``: the ``if``/``elif`` tests and
    ``case`` patterns above it evaluated, a ``try`` whose handlers catch it or whose ``finally``
    returns ends it; a loop (which may not run) or a ``with`` (whose context may swallow the
    exception) is not followed."""
    out = Reach()
    raised = _raised_name(stmt) if raises else None
    child, node = stmt, parents.parent.get(stmt)
    while node is not None and node is not fn:
        where = f"`{ast.unparse(node).splitlines()[0][:60]}` (line {getattr(node, 'lineno', '?')})" \
            if hasattr(node, "lineno") else None
        try:
            if isinstance(node, ast.If):
                ev.at = node
                if ev.truth(node.test) is not (child in node.body):
                    out.add(NEVER)
            elif isinstance(node, ast.match_case):
                match = parents.parent[node]
                ev.at = match
                subject = ev.value(match.subject)
                for case in match.cases:
                    hit = ev.matches(case.pattern, subject) and (case.guard is None or ev.truth(case.guard))
                    if case is node:
                        if not hit:
                            out.add(NEVER)
                        break
                    if hit:
                        out.add(NEVER)
                        break
            elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                if isinstance(child, ast.ExceptHandler):
                    out.add(CONDITIONAL)
                elif raises and child not in node.finalbody:
                    for h in node.handlers if child in node.body else ():
                        caught = _catches(h, raised)
                        if caught is None:
                            out.add(UNFOLLOWED, f"`except {ast.unparse(h.type)}` (line {h.lineno})")
                        elif caught and not any(isinstance(s, ast.Raise) for s in h.body):
                            out.add(NEVER)
                            break
                        elif caught:
                            break
                    ends = _exits(node.finalbody)
                    if ends:
                        out.add(NEVER)
                    elif ends is None:
                        out.add(UNFOLLOWED, f"the `finally` block of {where}")
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                if raises:
                    out.add(UNFOLLOWED, where)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                out.add(UNFOLLOWED, where)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                out.add(CONDITIONAL)
        except Undecided:
            out.add(CONDITIONAL)
        except Unfollowed as e:
            out.add(UNFOLLOWED, f"{e.what} in {where}" if where else e.what)
        child, node = node, parents.parent.get(node)
    out.read = ev.read
    return out


# -- the refusals and method rewrites of a config module ----------------------------------------


@dataclass
class Refusal:
    """One statement of a config module's validation that stops some methods for every target.

    ``kind``: ``refuses-all`` (a ``raise`` or failing ``assert`` that Python reaches for those
    methods whatever the target), ``unfollowed`` (one it may reach, through a construct the scan
    does not follow: ``what``), ``rewrites-method`` (an assignment of a new value to the method,
    after which the tests read another method); ``node`` the statement shown (the ``if`` that
    raises, the ``assert``, the ``raise`` of a ``case``, the assignment), ``function`` its function.
    """

    kind: str
    methods: list[str]
    node: ast.stmt
    function: ast.AST
    what: str | None = None


def _method_target(node: ast.stmt) -> ast.expr | None:
    """For a statement that gives the method a new value, that value (None: not a rewrite; the
    statement itself when the value is not one expression): ``self.method = v``, ``+=``,
    ``setattr(self, "method", v)``, ``object.__setattr__(self, "method", v)``,
    ``self.__dict__["method"] = v``."""
    def is_method(t: ast.AST) -> bool:
        return (isinstance(t, ast.Attribute) and t.attr == "method") or (
            isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and t.slice.value == "method")
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(is_method(t) for t in targets):
            return node.value
        if any(is_method(n) for t in targets for n in ast.walk(t)):
            return node
    if isinstance(node, ast.AugAssign) and is_method(node.target):
        return node
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        if _is_name(call.func, "setattr") or _is_name(call.func, "__setattr__"):
            args = call.args[1:] if isinstance(call.func, ast.Attribute) and len(call.args) == 3 else call.args
            if len(args) == 3 and isinstance(args[1], ast.Constant) and args[1].value == "method":
                return args[2]
    return None


def method_refusals(tree: ast.Module, parents: ParentMap | None = None) -> list[Refusal]:
    """The statements of a config module's validation (:func:`validation_functions`, without the
    functions a later binding replaces) that refuse a speculative method (:data:`METHODS`) for
    every target, that may and cannot be followed, or that rewrite the method, evaluated for each
    method without running anything (see :class:`Refusal`).

    Args:
        tree: the config module's syntax tree.
        parents: its parent links, when the caller has them.

    Returns:
        The refusals, in source order; one per statement, with the methods it stops.
    """
    parents = parents or ParentMap(tree)
    shadowed = shadowed_functions(tree)
    mb = bindings(tree)
    out = []
    for fn, params in validation_functions(tree).items():
        if in_replaced_function(fn, shadowed, parents):
            continue
        scope = Scope(tree, mb, fn, frozenset(params))
        for node in own_nodes(fn):
            if isinstance(node, (ast.Raise, ast.Assert)) and not (isinstance(node, ast.Raise) and node.exc is None):
                found = _refusal(node, fn, scope, parents)
            elif isinstance(node, ast.stmt) and _method_target(node) is not None:
                found = _rewrite(node, fn, scope, parents)
            else:
                continue
            if found is not None:
                out.append(found)
    return sorted(out, key=lambda r: r.node.lineno)


def in_replaced_function(node: ast.AST, shadowed: set, parents: ParentMap) -> bool:
    """Whether ``node`` is (in) a function that a later binding of its name replaces, or in one
    nested in such a function: never run as that name.

    Args:
        node: a node of the module.
        shadowed: :func:`shadowed_functions` of the module.
        parents: the module's parent links.
    """
    cur = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else parents.enclosing_function(node)
    while cur is not None:
        if cur in shadowed:
            return True
        cur = parents.enclosing_function(cur)
    return False


def _refusal(node: ast.stmt, fn: ast.AST, scope: Scope, parents: ParentMap) -> Refusal | None:
    """A ``raise``/``assert`` as a :class:`Refusal` for the methods it stops, or None."""
    refused, unfollowed, what = [], [], None
    for m in METHODS:
        ev = _Eval(m, scope, node)
        r = reach(node, fn, parents, ev, raises=True)
        if isinstance(node, ast.Assert) and r.how != NEVER:
            try:
                ev.at = node
                if ev.truth(node.test):
                    r.add(NEVER)
            except Undecided:
                r.add(CONDITIONAL)
            except Unfollowed as e:
                r.add(UNFOLLOWED, f"{e.what} in `{ast.unparse(node)[:60]}`")
            r.read = ev.read
        if r.how == TAKEN and r.read:
            refused.append(m)
        elif r.how == UNFOLLOWED and r.read:
            unfollowed.append(m)
            what = what or r.what
    shown = node
    if isinstance(node, ast.Raise) and isinstance(parents.parent.get(node), ast.If):
        shown = parents.parent[node]
    if "eagle3" in refused:
        return Refusal("refuses-all", refused, shown, fn)
    if "eagle3" in unfollowed:
        return Refusal("unfollowed", unfollowed, shown, fn, what)
    return None


def _rewrite(node: ast.stmt, fn: ast.AST, scope: Scope, parents: ParentMap) -> Refusal | None:
    """An assignment of the method as a ``rewrites-method`` :class:`Refusal` for the methods whose
    value it may change, or None: one on a branch Python does not take for a method, or one that
    depends on anything but the method (a conditional change, as a conditional refusal), or one
    that assigns the method its own value, changes nothing."""
    value = _method_target(node)
    changed = []
    for m in METHODS:
        ev = _Eval(m, scope, node)
        r = reach(node, fn, parents, ev, raises=False)
        if r.how in (NEVER, CONDITIONAL):
            continue
        if value is not node:
            try:
                ev.at = node
                if ev.value(value) == m:
                    continue
            except (Undecided, Unfollowed):
                pass
        changed.append(m)
    return Refusal("rewrites-method", changed, node, fn) if "eagle3" in changed else None
