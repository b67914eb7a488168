"""The value of an expression of vLLM's speculative config validation for one speculative method,
computed without running anything (:class:`Evaluator`).

What it computes exactly: the method, constants, followed names (:mod:`rules.allowlist.names`),
literals (tuple, list, set, dict and the ``frozenset``/``set``/... builtins of them), comparisons
and their chains, ``and``/``or``/``not``, conditional expressions, ``:=``, strings joined,
formatted (f-strings, ``%s``, ``.format``, ``str()``), indexed and sliced, ``len()``, a few str
methods, ``Literal[...]`` and ``get_args``. What it cannot compute raises :class:`Undecided` when the
expression reads run state (a run option, the target, a call on ``self``): the test is conditional;
otherwise :class:`Unfollowed` naming the construct and its line: such a test may refuse the method
for every target and is reported, never taken as conditional.
"""

from __future__ import annotations

import ast
import operator
import re
import string
from dataclasses import dataclass
from typing import Any

from auditor.index.tables import COMPARISONS
from rules.allowlist.names import METHOD, Scope, Undecided, Unfollowed
from rules.allowlist.validators import is_method

_STR_METHODS = {"startswith": str.startswith, "endswith": str.endswith}
_STR_CHANGES = {"lower": str.lower, "upper": str.upper, "strip": str.strip, "casefold": str.casefold}
_COMPARE = {**COMPARISONS, ast.Is: operator.is_, ast.IsNot: operator.is_not, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
#: builtins that build a collection from one iterable (or none)
_COLLECTIONS = {"frozenset": frozenset, "set": frozenset, "tuple": tuple, "list": tuple}
#: values whose text (``str()``, f-strings, ``%s``) is computed
_SCALARS = (str, int, bool, type(None))
#: ``%`` formats computed: ``%s``, ``%r``, ``%%`` only (no width, which could be anything)
_PERCENT = re.compile(r"%[^sr%]")
#: deeper chains of names than this are not followed
_DEPTH = 16


@dataclass(frozen=True)
class _LiteralType:
    """A ``Literal[...]`` type alias: ``get_args`` gives its values (nested ones flattened)."""

    args: tuple


@dataclass(frozen=True)
class _Failed:
    """A dict value that cannot be had: reading it raises ``error`` (Undecided or Unfollowed)."""

    error: Exception


def is_name(node: ast.AST, name: str) -> bool:
    """``name`` or ``<module>.name`` (``Literal``, ``typing.Literal``)."""
    return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)


def _at(node: ast.AST) -> str:
    return f"`{ast.unparse(node)[:60]}` (line {getattr(node, 'lineno', '?')})"


def _plain_format(text: str) -> bool:
    """A ``.format`` string whose fields are ``{}``/``{0}`` with no spec (its result is computed)."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return False
    return all(f is None or (f in ("",) or f.isdigit()) and not spec and conv in (None, "s", "r")
               for _, f, spec, conv in fields)


class Evaluator:
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
        """The value of a name (see :meth:`Scope.lookup`)."""
        found = self.scope.lookup(node.id, self.at)
        if found is METHOD:
            self.read = True
            return self.method
        expr, scope, stmt = found
        if self.depth > _DEPTH:
            raise Undecided
        inner = Evaluator(self.method, scope, stmt)
        inner.depth = self.depth + 1
        try:
            return inner.value(expr)
        finally:
            self.read = self.read or inner.read

    def truth(self, node: ast.AST) -> bool:
        """The truth of ``node`` (see :meth:`value`)."""
        return bool(self.value(node))

    def value(self, node: ast.AST) -> Any:
        """The value of ``node`` (see the module docstring).

        Raises:
            Undecided: the value reads run state.
            Unfollowed: it cannot be computed and reads nothing but the method, constants and names.
        """
        if is_method(node):
            self.read = True
            return self.method
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.name(node)
        for kind, how in _RULES:
            if isinstance(node, kind):
                return how(self, node)
        return self.opaque(node)

    def cannot(self, node: ast.AST) -> Unfollowed:
        """The error for ``node`` whose parts are known but whose value is not computed."""
        return Unfollowed(f"{_at(node)}, not evaluated")

    def opaque(self, node: ast.AST) -> Any:
        """``node`` is not computed: raise Undecided when a part of it reads run state (an attribute
        of ``self`` that is no class constant, a call on ``self``, a parameter, an imported name),
        else Unfollowed naming it."""
        bound = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        bound |= {a.arg for n in ast.walk(node) if isinstance(n, ast.Lambda) for a in ast.walk(n.args)
                  if isinstance(a, ast.arg)}
        skip: set[int] = set()
        for n in ast.walk(node):  # breadth first: an attribute comes before the name it is read from
            if is_method(n):
                self.read = True
                skip.add(id(n.value if isinstance(n, ast.Attribute) else n.args[0]))
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and \
                    (n.attr == "__dict__" or self.scope.class_attribute(n) is not None):
                skip.add(id(n.value))
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in skip \
                    and n.id not in bound and not self.scope.is_builtin(n.id):
                if self.scope.is_import(n.id):
                    raise Undecided
                try:
                    self.name(n)
                except Unfollowed:
                    pass
        raise self.cannot(node)

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

    # -- one rule per kind of node ----------------------------------------------------------

    def _binop(self, node: ast.BinOp) -> Any:
        a, b = self.all([node.left, node.right])
        if isinstance(node.op, ast.Add) and isinstance(a, str) and isinstance(b, str):
            return a + b
        if isinstance(node.op, ast.Mod) and isinstance(a, str) and not _PERCENT.search(a) and \
                all(isinstance(x, _SCALARS) for x in (b if isinstance(b, tuple) else (b,))):
            try:
                return a % b
            except (TypeError, ValueError):
                pass
        if isinstance(node.op, ast.Add) and isinstance(a, tuple) and isinstance(b, tuple):
            return a + b
        raise self.cannot(node)

    def _unary(self, node: ast.UnaryOp) -> Any:
        v = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            return not v
        if isinstance(node.op, (ast.USub, ast.UAdd)) and type(v) is int:
            return -v if isinstance(node.op, ast.USub) else v
        raise self.cannot(node)

    def _subscript(self, node: ast.Subscript) -> Any:
        if is_name(node.value, "Literal"):  # a type alias
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            vals = self.all(elts)
            return _LiteralType(tuple(a for v in vals for a in (v.args if isinstance(v, _LiteralType) else (v,))))
        whole = node.value
        if (isinstance(whole, ast.Call) and is_name(whole.func, "vars") and len(whole.args) == 1) or \
                (isinstance(whole, ast.Attribute) and whole.attr == "__dict__"):  # ``vars(self)["method"]``
            key = self.value(node.slice)
            if key == "method":
                self.read = True
                raise Unfollowed(f"{_at(node)}, the method read through the instance's namespace")
            raise Undecided
        if isinstance(node.slice, ast.Slice):  # ``self.method[:6]``
            subject, *bounds = self.all([node.value, node.slice.lower, node.slice.upper, node.slice.step])
            if isinstance(subject, (str, tuple)) and all(x is None or type(x) is int for x in bounds):
                return subject[slice(*bounds)]
            raise self.cannot(node)
        subject, key = self.all([node.value, node.slice])
        if not isinstance(subject, (str, tuple, dict)):
            raise self.cannot(node)
        try:
            out = subject[key]
        except (LookupError, TypeError):
            raise self.cannot(node) from None
        if isinstance(out, _Failed):
            raise out.error
        return out

    def _call(self, node: ast.Call) -> Any:
        f = node.func
        if is_name(f, "get_args") and len(node.args) == 1:
            arg = self.value(node.args[0])
            if isinstance(arg, _LiteralType):
                return arg.args
            raise self.cannot(node)
        if isinstance(f, ast.Name) and self.scope.is_builtin(f.id):
            return self._builtin(node)
        helper = self._function(f)
        if helper is not None:
            return self._helper(node, *helper)
        if isinstance(f, ast.Name):  # ``_is_eagle3 = lambda c: ...``: a value bound by an assignment, called
            local = self.scope.fn is not None and self.scope._local(f.id)
            plain = (self.scope.fb if local else self.scope.mb).plain.get(f.id)
            if plain:
                self.read = self.read or any(is_method(n) for st in plain for n in ast.walk(st))
                raise Unfollowed(f"{_at(node)}, a call of `{f.id}`, bound at {_at(plain[-1])}")
        bound_at = self.scope.class_attribute(f) if isinstance(f, ast.Attribute) else None
        if bound_at is not None:  # ``_is_eagle3 = lambda self: ...`` in the class: not evaluated
            self.read = self.read or any(is_method(n) for n in ast.walk(bound_at))
            raise Unfollowed(f"{_at(node)}, a call of `{f.attr}`, a class attribute bound at {_at(bound_at)}")
        if isinstance(f, ast.Attribute) and f.attr in ("__eq__", "__ne__") and len(node.args) == 1 \
                and not node.keywords:  # ``self.method.__eq__("eagle3")``
            a, b = self.all([f.value, node.args[0]])
            return (a == b) if f.attr == "__eq__" else (a != b)
        if isinstance(f, ast.Attribute) and not node.keywords:
            return self._str_call(node)
        return self.opaque(node)

    def _builtin(self, node: ast.Call) -> Any:
        f = node.func.id
        if node.keywords or len(node.args) > 1 or f not in (*_COLLECTIONS, "str", "len", "bool") \
                or any(isinstance(a, ast.Starred) for a in node.args):
            return self.opaque(node)
        args = self.all(list(node.args))
        if not args:
            return _COLLECTIONS[f]() if f in _COLLECTIONS else self.opaque(node)
        arg = args[0]
        if f in _COLLECTIONS and isinstance(arg, (str, tuple, frozenset, dict)):
            return _COLLECTIONS[f](arg)
        if f == "str" and isinstance(arg, _SCALARS):
            return str(arg)
        if f == "len" and isinstance(arg, (str, tuple, frozenset, dict)):
            return len(arg)
        if f == "bool" and not isinstance(arg, _LiteralType):
            return bool(arg)
        raise self.cannot(node)

    def _str_call(self, node: ast.Call) -> Any:
        f = node.func
        try:
            subject, *args = self.all([f.value, *node.args])
        except Unfollowed:
            return self.opaque(node)
        if not isinstance(subject, str):
            raise self.cannot(node)
        if f.attr in _STR_METHODS and len(args) == 1:
            arg = args[0]
            if isinstance(arg, (str, tuple)) and all(isinstance(a, str) for a in (arg if isinstance(arg, tuple) else [arg])):
                return _STR_METHODS[f.attr](subject, arg)
        if f.attr in _STR_CHANGES and not args:
            return _STR_CHANGES[f.attr](subject)
        if f.attr == "format" and _plain_format(subject) and all(isinstance(a, _SCALARS) for a in args):
            try:
                return subject.format(*args)
            except (IndexError, ValueError):
                pass
        raise self.cannot(node)

    def _compare(self, node: ast.Compare) -> Any:
        vals = self.all([node.left, *node.comparators])
        for op, a, b in zip(node.ops, vals, vals[1:]):
            compare = _COMPARE.get(type(op))
            try:
                if compare is None:
                    raise TypeError
                if not compare(a, b):
                    return False
            except TypeError:
                raise self.cannot(node) from None
        return True

    def _boolop(self, node: ast.BoolOp) -> Any:
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

    def _collection(self, node: ast.AST) -> Any:
        vals = tuple(self.all(list(node.elts)))
        if isinstance(node, ast.Set):
            try:
                return frozenset(vals)
            except TypeError:
                raise self.cannot(node) from None
        return vals

    def _dict(self, node: ast.Dict) -> Any:
        if any(k is None for k in node.keys):
            return self.opaque(node)
        keys = self.all(list(node.keys))
        out = {}
        for k, v in zip(keys, node.values):
            try:
                out[k] = self.value(v)
            except (Undecided, Unfollowed) as e:
                out[k] = _Failed(e)
            except TypeError:
                raise self.cannot(node) from None
        return out

    def _function(self, node: ast.expr) -> "tuple[ast.AST, bool] | None":
        """:meth:`Scope.function`; when the instance may hide the function (Unfollowed), what
        hides it or the function may read the method: counted as read."""
        try:
            return self.scope.function(node)
        except Unfollowed:
            self.read = True
            raise

    def _attribute(self, node: ast.Attribute) -> Any:
        helper = self._function(node)
        if helper is not None:
            fn, bound = helper
            if bound and any(is_name(d, "property") or is_name(d, "cached_property") for d in fn.decorator_list):
                return self._helper(node, fn, bound)
            raise Unfollowed(f"{_at(node)}, the function `{fn.name}` (line {fn.lineno}) read as a value")
        binding = self.scope.class_attribute(node)
        if binding is not None:
            raise Unfollowed(f"{_at(node)}, a class attribute bound at {_at(binding)}")
        raise Undecided

    def _helper(self, node: ast.Call | ast.Attribute, fn: ast.AST, bound: bool) -> Any:
        """The value of a call of a function of the module (``self._is_eagle3()``, ``_check(m)``, a
        property read): its one ``return`` evaluated with the call's arguments bound to its
        parameters. A function of another shape is not evaluated: Unfollowed naming the call when it
        reads the method, Undecided when it reads run state (an attribute, a parameter, an import)."""
        call = node if isinstance(node, ast.Call) else None
        args = list(call.args) if call else []
        keywords = list(call.keywords) if call else []
        a = fn.args
        params = [p.arg for p in [*a.posonlyargs, *a.args]][1 if bound else 0:]
        body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and \
            isinstance(fn.body[0].value, ast.Constant) and isinstance(fn.body[0].value.value, str) else fn.body
        plain = {"property", "cached_property", "staticmethod", "classmethod"}
        values = dict(zip(params, args))
        values.update({k.arg: k.value for k in keywords if k.arg in params})
        defaults = dict(zip(params[len(params) - len(a.defaults):], a.defaults)) if a.defaults else {}
        simple = isinstance(fn, ast.FunctionDef) and not (a.vararg or a.kwarg or a.kwonlyargs) \
            and len(args) <= len(params) and all(k.arg in params for k in keywords) \
            and not any(isinstance(x, ast.Starred) for x in args) \
            and all(isinstance(d, (ast.Name, ast.Attribute)) for d in fn.decorator_list) \
            and {getattr(d, "id", getattr(d, "attr", "")) for d in fn.decorator_list} <= plain \
            and len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None \
            and all(p in values or p in defaults for p in params)
        shown = f"{_at(node)}, a call of `{fn.name}` (line {fn.lineno}) whose result is not evaluated"
        if not simple or self.depth > _DEPTH:
            if any(is_method(n) for n in [*ast.walk(fn), *args, *(k.value for k in keywords)]):
                self.read = True
                raise Unfollowed(shown)
            names = {p.arg for p in ast.walk(a) if isinstance(p, ast.arg)}
            if any(isinstance(n, ast.Name) and (n.id in names or self.scope.is_import(n.id)) for n in ast.walk(fn)):
                raise Undecided
            raise Unfollowed(shown)
        methods = frozenset(p for p, v in values.items() if is_method(v))
        passed = {p: (v, self.scope, self.at) for p, v in values.items() if p not in methods}
        passed.update({p: (d, Scope(self.scope.module, self.scope.mb), None) for p, d in defaults.items()
                       if p not in values})
        inner = Evaluator(self.method, Scope(self.scope.module, self.scope.mb, fn, methods, None, passed), body[0])
        inner.depth = self.depth + 1
        try:
            return inner.value(body[0].value)
        finally:
            self.read = self.read or inner.read

    def _fstring(self, node: ast.JoinedStr) -> Any:
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
                continue
            v = self.value(part.value)
            if part.format_spec is not None or not isinstance(v, _SCALARS) or part.conversion not in (-1, 115, 114, 97):
                raise self.cannot(node)
            out.append({114: repr, 97: ascii}.get(part.conversion, str)(v))
        return "".join(out)


_RULES = (
    (ast.NamedExpr, lambda ev, n: ev.value(n.value)),
    (ast.IfExp, lambda ev, n: ev.value(n.body if ev.truth(n.test) else n.orelse)),
    (ast.BinOp, Evaluator._binop),
    (ast.UnaryOp, Evaluator._unary),
    (ast.Subscript, Evaluator._subscript),
    (ast.Call, Evaluator._call),
    (ast.Compare, Evaluator._compare),
    (ast.BoolOp, Evaluator._boolop),
    ((ast.Tuple, ast.List, ast.Set), Evaluator._collection),
    (ast.Dict, Evaluator._dict),
    (ast.Attribute, Evaluator._attribute),
    (ast.JoinedStr, Evaluator._fstring),
)
