"""Statements of vLLM's speculative config validation that stop a method for every target, read statically.

Beside the spelling :mod:`rules.allowlist.facts` reads first (``if self.method == "eagle3":
raise``), a validation may refuse the method by a test that depends on nothing but the method:
``if self.method.startswith("eagle3"): raise``, ``if "eagle3" in self.method: raise``,
``assert self.method != "eagle3"``, through a name (``_NO = "eagle3"``; ``m = self.method``; a
helper's parameter, ``_check(self.method)``), in an ``elif`` chain, a ``case`` of a ``match``, a
``try`` whose handlers do not catch it. Each ``raise``/``assert`` of the functions building the
config runs (:func:`validation_functions`) is evaluated for each speculative method
(:data:`METHODS`) the way Python runs it, without running anything: the branches above it, the
names its tests read (:mod:`rules.allowlist.names`), the values they compute
(:mod:`rules.allowlist.evaluate`), the ``return`` statements above it and, for a helper, the
calls of it (:func:`rules.allowlist.validators.call_graph`: a call under a branch not taken, in a
``try`` that catches the exception). A test that reads anything else (a run option, the target)
is conditional and refuses nothing for every target; one that reads a binding or a construct the
scan does not follow (a helper passed as a value, a nested function, a function of another module
given the method) is reported as such. An assignment of a new value to the method
(``self.method = self.method.upper()``) that Python may run for a method makes the tests after
it read another value: reported too (:class:`Refusal`).

Also here: the functions a later binding of the same name replaces (``def _verify_args`` written
twice in a class body: the last one is the method Python binds), whose tests never run.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from typing import Iterator

from auditor.index.prune import own_yield
from auditor.index.syntax import ParentMap
from rules.allowlist.evaluate import Evaluator as _Eval
from rules.allowlist.evaluate import is_name as _is_name
from rules.allowlist.validators import is_method as _is_method
from rules.allowlist.names import Scope, Undecided, Unfollowed, bindings
from rules.allowlist.validators import CallGraph, call_graph, shadowed_functions

#: The speculative methods a refusal is evaluated for (those of the engines, ``Engine.methods``).
METHODS = ("eagle3", "eagle", "mtp")


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


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _child_stmts(n: ast.AST) -> Iterator[ast.stmt]:
    """The statements directly under ``n`` (its bodies, ``else``, ``finally``, handlers, cases)."""
    for name in ("body", "orelse", "finalbody"):
        seq = getattr(n, name, None)
        if isinstance(seq, list):
            yield from seq
    for h in getattr(n, "handlers", ()):
        yield from h.body
    for c in getattr(n, "cases", ()):
        yield from c.body


def _has_return(st: ast.stmt) -> bool:
    """Whether ``st`` is or holds a ``return`` of its own scope (one in a function or class
    nested in it does not count; ``st`` itself, even a ``def``, is looked into). Only statements
    are walked: an expression never holds a ``return``."""
    if isinstance(st, ast.Return):
        return True
    stack = list(_child_stmts(st))
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return):
            return True
        if not isinstance(n, _NESTED):
            stack.extend(_child_stmts(n))
    return False


def _returns(stmts: list[ast.stmt], ev: "_Eval") -> Reach:
    """How the statement after ``stmts`` is reached, given the ``return`` statements among them:
    ``never`` past a ``return`` Python surely runs for the method of ``ev``, ``conditional`` past
    one under a test of anything else, ``unfollowed`` past one in a construct not followed (a loop,
    a ``with``, a ``match``)."""
    out = Reach()
    for st in stmts:
        if not _has_return(st):
            continue
        if isinstance(st, ast.Return):
            out.add(NEVER)
        elif isinstance(st, ast.If):
            try:
                ev.at = st
                sub = _returns(st.body if ev.truth(st.test) else st.orelse, ev)
                out.add(sub.how, sub.what)
            except Undecided:
                out.add(CONDITIONAL)
            except Unfollowed as e:
                out.add(UNFOLLOWED, f"{e.what} in `if {ast.unparse(st.test)[:50]}` (line {st.lineno}), before a `return`")
        elif isinstance(st, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            if any(_has_return(s) for h in st.handlers for s in h.body):
                out.add(CONDITIONAL)
            sub = _returns([*st.body, *st.orelse, *st.finalbody], ev)
            out.add(sub.how, sub.what)
        else:
            out.add(UNFOLLOWED, f"a `return` in `{ast.unparse(st).splitlines()[0][:50]}` (line {st.lineno})")
        if out.how == NEVER:
            break
    return out


def _before(node: ast.AST, child: ast.AST) -> list[ast.stmt]:
    """The statements of ``node``'s body (or ``else``, ``finally``) that run before ``child`` (for
    the ``else`` of a ``try``, its body too)."""
    for name in ("body", "orelse", "finalbody"):
        seq = getattr(node, name, None)
        if isinstance(seq, list) and child in seq:
            ran = node.body if name == "orelse" and isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))) else []
            return [*ran, *seq[:seq.index(child)]]
    return []


def _where(node: ast.AST) -> str | None:
    """How a finding names the enclosing construct ``node``: its first source line and its line
    (None for a node without a position). Built only when a finding shows it: unparsing a long
    ``if`` or function to keep its first line is the costly part of :func:`reach`."""
    if not hasattr(node, "lineno"):
        return None
    return f"`{ast.unparse(node).splitlines()[0][:60]}` (line {getattr(node, 'lineno', '?')})"


def reach(stmt: ast.stmt, fn: ast.AST, parents: ParentMap, ev: "_Eval", raises: bool,
          raised: str | None = None) -> Reach:
    """How ``stmt`` of the function ``fn`` runs when ``fn`` runs with the method of ``ev``, and, for
    a statement that ``raises``, whether its exception leaves ``fn``: the ``if``/``elif`` tests and
    ``case`` patterns above it evaluated, a ``try`` whose handlers catch it or whose ``finally``
    returns ends it; a loop (which may not run) or a ``with`` (whose context may swallow the
    exception) is not followed; a ``return`` above it on the way (:func:`_returns`) ends ``fn``
    first. ``raised``: the exception class (default: the one ``stmt`` raises)."""
    out = Reach()
    raised = raised or (_raised_name(stmt) if raises else None)
    child, node = stmt, parents.parent.get(stmt)
    while node is not None:
        early = _returns(_before(node, child), ev)
        out.add(early.how, early.what)
        if node is fn:
            break
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
                        out.add(UNFOLLOWED, f"the `finally` block of {_where(node)}")
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                if raises:
                    out.add(UNFOLLOWED, _where(node))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                out.add(UNFOLLOWED, _where(node))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                out.add(UNFOLLOWED, f"the nested function {_where(node)}")  # when and how it is called is not followed
            elif isinstance(node, ast.ClassDef):
                out.add(CONDITIONAL)
        except Undecided:
            out.add(CONDITIONAL)
        except Unfollowed as e:
            out.add(UNFOLLOWED, f"{e.what} in {_where(node)}" if hasattr(node, "lineno") else e.what)
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
    graph = call_graph(tree)
    mod = _Module(tree, parents, graph, bindings(tree))
    out = []
    for fn in graph.functions:
        if in_replaced_function(fn, shadowed, parents):
            continue
        for node in ast.walk(fn):  # a nested function's statements too (how it runs: not followed)
            if isinstance(node, (ast.Raise, ast.Assert)) and not (isinstance(node, ast.Raise) and node.exc is None):
                found = _refusal(node, fn, mod)
            elif isinstance(node, ast.stmt) and _method_target(node) is not None:
                found = _rewrite(node, fn, mod)
            elif isinstance(node, ast.Call) and _foreign(node, mod.scope(fn)):
                found = _foreign_refusal(node, fn, mod)
            else:
                continue
            if found is not None:
                out.append(found)
    return sorted(out, key=lambda r: r.node.lineno)


@dataclass
class _Module:
    """A config module being read: its tree, parent links, :class:`CallGraph` and bindings (and
    the :class:`Scope` of each of its functions, built once: a scope is only read)."""

    tree: ast.Module
    parents: ParentMap
    graph: CallGraph
    mb: object
    scopes: dict = field(default_factory=dict)

    def scope(self, fn: ast.AST) -> Scope:
        """The :class:`Scope` of the validation function ``fn`` (built once per function)."""
        hit = self.scopes.get(fn)
        if hit is None:
            hit = self.scopes[fn] = self._scope(fn)
        return hit

    def _scope(self, fn: ast.AST) -> Scope:
        refs = self.graph.references.get(fn)
        passed = None
        if refs:
            ref = refs[0][0]
            shown = self.parents.parent.get(ref)
            shown = shown if isinstance(shown, ast.Call) else ref
            passed = f"`{ast.unparse(shown)[:60]}` (line {ref.lineno})"
        return Scope(self.tree, self.mb, fn, frozenset(self.graph.functions.get(fn, ())), passed)

    def via_calls(self, fn: ast.AST, method: str, raises: bool, raised: str | None,
                  seen: frozenset = frozenset()) -> Reach:
        """How the construction reaches ``fn`` (and, when it ``raises``, whether the exception
        ``raised`` crosses the calls back to the constructor's caller): ``always`` for an entry
        method, else the path of its calls that reaches it most surely (always, then unfollowed,
        then conditional, then never), each call judged by :func:`reach` in its caller."""
        if fn in self.graph.entries:
            return Reach()
        if raises and _deferred(fn):  # a call makes a generator or a coroutine: the body has not run
            kind = "coroutine is awaited" if isinstance(fn, ast.AsyncFunctionDef) else "generator is iterated"
            return Reach(UNFOLLOWED, True, f"`{fn.name}` (line {fn.lineno}), whose body runs only when its {kind}")
        best = None
        sites = [(c, caller, False) for c, caller in self.graph.callers.get(fn, ())]
        sites += [(ref, caller, True) for ref, caller in self.graph.references.get(fn, ())]
        for call, caller, passed in sites:
            if caller in seen:
                continue
            stmt = call
            while not isinstance(stmt, ast.stmt):
                stmt = self.parents.parent[stmt]
            ev = _Eval(method, self.scope(caller), stmt)
            r = reach(stmt, caller, self.parents, ev, raises=raises, raised=raised)
            if passed:  # called in a way not followed, maybe with the method
                r.add(UNFOLLOWED, f"`{ast.unparse(call)[:60]}` (line {call.lineno}), passed as a value")
                r.read = True
            if r.how != NEVER:
                up = self.via_calls(caller, method, raises, raised, seen | {fn})
                r.add(up.how, up.what)
                r.read = r.read or up.read
            rank = (NEVER, CONDITIONAL, UNFOLLOWED, TAKEN)
            if best is None or rank.index(r.how) > rank.index(best.how):
                best = r
            elif rank.index(r.how) == rank.index(best.how):
                best.read = best.read or r.read
        return best or Reach(NEVER)


def _deferred(fn: ast.AST) -> bool:
    """Whether calling ``fn`` runs none of its body: an ``async def``, or a generator function (a
    ``yield`` of its own, not of a nested function or lambda)."""
    if isinstance(fn, ast.AsyncFunctionDef):
        return True
    return isinstance(fn, ast.FunctionDef) and own_yield(list(ast.iter_child_nodes(fn))) is not None


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


def _refusal(node: ast.stmt, fn: ast.AST, mod: _Module) -> Refusal | None:
    """A ``raise``/``assert`` as a :class:`Refusal` for the methods it stops, or None."""
    refused, unfollowed, what = [], [], None
    scope, parents = mod.scope(fn), mod.parents
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
        if r.how != NEVER:
            up = mod.via_calls(fn, m, True, _raised_name(node))
            r.add(up.how, up.what)
            r.read = r.read or up.read
        if r.how == TAKEN:  # reached for this method whatever the target (read it or not: always)
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


def _rewrite(node: ast.stmt, fn: ast.AST, mod: _Module) -> Refusal | None:
    """An assignment of the method as a ``rewrites-method`` :class:`Refusal` for the methods whose
    value it may change, or None: one on a branch Python does not take for a method, or one that
    depends on anything but the method (a conditional change, as a conditional refusal), or one
    that assigns the method its own value, changes nothing."""
    value = _method_target(node)
    changed = []
    scope = mod.scope(fn)
    for m in METHODS:
        ev = _Eval(m, scope, node)
        r = reach(node, fn, mod.parents, ev, raises=False)
        if r.how != NEVER:
            up = mod.via_calls(fn, m, False, None)
            r.add(up.how, up.what)
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


def _foreign(call: ast.Call, scope: Scope) -> bool:
    """A call of a function of another module (an imported name, or an attribute of one) that is
    given the method (``check(self.method)``): what it does is not read here."""
    f = call.func
    while isinstance(f, ast.Attribute):
        f = f.value
    return isinstance(f, ast.Name) and scope.is_import(f.id) and \
        any(_is_method(a) for a in [*call.args, *(k.value for k in call.keywords)])


def _foreign_refusal(call: ast.Call, fn: ast.AST, mod: _Module) -> Refusal | None:
    """A call of :func:`_foreign` as an ``unfollowed`` :class:`Refusal` for the methods that
    reach it (it may raise for them), or None."""
    stmt = call
    while not isinstance(stmt, ast.stmt):
        stmt = mod.parents.parent[stmt]
    reached = []
    for m in METHODS:
        r = reach(stmt, fn, mod.parents, _Eval(m, mod.scope(fn), stmt), raises=True, raised="Exception")
        if r.how != NEVER:
            up = mod.via_calls(fn, m, True, "Exception")
            r.add(up.how, up.what)
        if r.how in (TAKEN, UNFOLLOWED):
            reached.append(m)
    what = f"`{ast.unparse(call)[:60]}` (line {call.lineno}), a function of another module given the method"
    return Refusal("unfollowed", reached, stmt, fn, what) if "eagle3" in reached else None
