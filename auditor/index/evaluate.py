"""Static evaluation of a small, pure subset of Python over sets of possible values.

Some gates are decided by a few lines of straight-line code in the scanned tree: a chain of
``if hf_config.model_type == "...": hf_config.model_type = "..."`` branches, an f-string that
rewrites an architecture name, a guard whose condition is derived from a run option. This module
*interprets* such code without importing or executing it: every value is a set of possible
constants (:data:`TOP` when nothing is known), conditions that cannot be decided run both branches
and join their effects, and only a closed list of pure operations on constants (comparisons,
arithmetic, string and tuple methods such as ``str.startswith``) is ever applied. Calls to
anything else give :data:`TOP`. Nothing in the scanned code can cause anything to run.

The engine-neutral machinery lives here; the layers above say what the names mean through
:class:`Inputs` (the value of ``hf_config.model_type`` for one target, ``hasattr`` on a checkpoint
config) and through a call hook (``hf_config.update({...})``).

Names and attribute chains are keyed by their *canonical path*: ``hf_config.text_config`` after
``hf_config = hf_config.text_config`` makes ``hf_config.model_type`` mean
``hf_config.text_config.model_type`` (the object roots are the names :class:`Inputs` declares).
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

#: The value of which nothing is known.
TOP = None

#: A set of possible values grows no larger than this; beyond it, the value is :data:`TOP`.
MAX_VALUES = 64

#: Statements interpreted in one evaluation at most (a bound on work for hostile input).
MAX_STEPS = 20000

#: Deepest nesting of expressions and blocks interpreted; deeper code evaluates to :data:`TOP`
#: (statements: the run stops), so that hostile nesting never exhausts the stack.
MAX_DEPTH = 100

#: Largest repeat count of ``str * int`` / ``tuple * int`` evaluated (larger: :data:`TOP`).
MAX_REPEAT = 256

Value = frozenset | None


class _Unknown:
    """The value of an item of a container that is not known (``{"n": getattr(...)}``): any
    operation on it gives :data:`TOP`."""

    __slots__ = ()

    def __eq__(self, other):
        raise TypeError("unknown")

    def __hash__(self):
        return id(self)

    def __bool__(self):
        raise TypeError("unknown")

    def __repr__(self):
        return "<unknown>"


#: An unknown item inside a known container (see :class:`_Unknown`).
UNKNOWN_ITEM = _Unknown()


class FrozenDict(tuple):
    """An immutable, hashable mapping (a tuple of ``(key, value)`` items), the value of a dict
    literal."""

    def get(self, key, default=None):
        for k, v in self:
            if k == key:
                return v
        return default

    def keys(self):
        return tuple(k for k, _ in self)

    def has(self, key) -> bool:
        return any(k == key for k, _ in self)

    def set(self, key, value) -> "FrozenDict":
        return FrozenDict(tuple((k, v) for k, v in self if k != key) + ((key, value),))

    def merged(self, other: "FrozenDict") -> "FrozenDict":
        out = self
        for k, v in other:
            out = out.set(k, v)
        return out


def one(v: Any) -> frozenset:
    """The value set holding only ``v``."""
    return frozenset((v,))


def join(a: Value, b: Value) -> Value:
    """The values either of ``a`` or ``b`` may have."""
    if a is TOP or b is TOP:
        return TOP
    u = a | b
    return u if len(u) <= MAX_VALUES else TOP


def only(v: Value) -> Any:
    """The single value of ``v``; raises ValueError when ``v`` is TOP or holds several values."""
    if v is TOP or len(v) != 1:
        raise ValueError("not a single value")
    return next(iter(v))


def truth(v: Value) -> bool | None:
    """True or False when every possible value of ``v`` has that truth, else None."""
    if v is TOP:
        return None
    ts = set()
    for x in v:
        try:
            ts.add(bool(x))
        except Exception:
            return None
    return ts.pop() if len(ts) == 1 else None


# -- pure operations on constants --------------------------------------------------------------

_IMMUTABLE = (str, int, float, bool, type(None), tuple, frozenset, FrozenDict)

#: Pure methods of immutable constants that evaluation may call.
_PURE_METHODS = {
    str: {"startswith", "endswith", "lower", "upper", "strip", "lstrip", "rstrip", "replace", "split",
          "removeprefix", "removesuffix", "count", "find", "join", "isdigit", "title", "capitalize"},
    tuple: {"count", "index"},
    frozenset: {"intersection", "union", "difference", "issubset", "issuperset", "isdisjoint"},
    FrozenDict: {"get", "keys"},
}

_CMP = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b if b is None or a is None else a == b,
    ast.IsNot: lambda a, b: a is not b if b is None or a is None else a != b,
    ast.In: lambda a, b: _contains(b, a), ast.NotIn: lambda a, b: not _contains(b, a),
}

def _mult(a, b):
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, tuple)) and isinstance(n, int) and not -1 < n <= MAX_REPEAT:
            raise ValueError("repeat too large")
    return a * b


_BIN = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: _mult,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b if not isinstance(a, str) else _no(),
    ast.BitOr: lambda a, b: a | b, ast.BitAnd: lambda a, b: a & b,
}


def _no():
    raise TypeError("not evaluated")


def _contains(container, item) -> bool:
    if isinstance(container, FrozenDict):
        return container.has(item)
    if isinstance(container, (str, tuple, frozenset)):
        return item in container
    raise TypeError("not a container")


def _safe(v: Any) -> bool:
    if isinstance(v, str):
        return len(v) <= 4096
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return abs(v) < 1 << 62
    if isinstance(v, (tuple, frozenset)):
        return len(v) <= 4096 and all(_safe(x) for x in v)
    if isinstance(v, FrozenDict):
        return len(v) <= 4096
    return isinstance(v, _IMMUTABLE) or v is UNKNOWN_ITEM


def _lift(fn: Callable, *args: Value) -> Value:
    """Apply the pure ``fn`` to every combination of the possible values of ``args``."""
    if any(a is TOP for a in args):
        return TOP
    total = 1
    for a in args:
        total *= len(a)
    if total > MAX_VALUES * 4:
        return TOP
    out = set()
    for combo in itertools.product(*args):
        try:
            r = fn(*combo)
        except Exception:
            return TOP
        if r is UNKNOWN_ITEM or not _safe(r):
            return TOP
        out.add(r)
    return frozenset(out) if len(out) <= MAX_VALUES else TOP


def from_json(v: Any) -> Any:
    """A JSON value as an evaluation constant (lists become tuples, objects :class:`FrozenDict`)."""
    if isinstance(v, list):
        return tuple(from_json(x) for x in v)
    if isinstance(v, dict):
        return FrozenDict(tuple((k, from_json(x)) for k, x in v.items()))
    return v


# -- inputs and state --------------------------------------------------------------------------


class Inputs:
    """What the names of the evaluated code mean before it runs. Subclass and override.

    ``roots``: the names that denote objects (a function's parameters such as ``hf_config``,
    ``self``); attribute chains under them are canonical paths.
    """

    roots: tuple[str, ...] = ()

    def value(self, path: str) -> Value:
        """The value of the canonical path ``path`` (``hf_config.model_type``) before the code
        runs; :data:`TOP` when unknown. The default: a plain name that is not a root is read
        with :meth:`module_value`."""
        if "." not in path and path not in self.roots:
            return self.module_value(path)
        return TOP

    def has(self, path: str) -> bool | None:
        """Whether the object at ``path`` has the attribute that ends it (``hasattr``): True,
        False, or None when unknown."""
        return None

    def module_value(self, name: str) -> Value:
        """The value of a module-level name the code reads (a ``Literal[...]`` alias, a constant)."""
        return TOP


@dataclass
class State:
    """The evaluation state: canonical path → value set, the object aliases (``text_config`` →
    ``hf_config.text_config``), and the lines of the conditions that could not be decided."""

    env: dict[str, Value] = field(default_factory=dict)
    alias: dict[str, str | None] = field(default_factory=dict)
    undecided: list[int] = field(default_factory=list)

    def copy(self) -> "State":
        return State(dict(self.env), dict(self.alias), list(self.undecided))


@dataclass
class Outcome:
    """How an evaluated function ends: ``kind`` is ``"return"`` (``returned``: the canonical path
    of the object returned, or None), ``"raise"`` (``line`` of the raise) or ``"end"`` (fell off
    the end); ``state`` is the state at that point."""

    kind: str
    state: State
    line: int | None = None
    returned: str | None = None
    value: Value = TOP


class _Stop(Exception):
    pass


# -- the evaluator -----------------------------------------------------------------------------


class Evaluator:
    """Interprets statements and expressions (see the module docstring).

    Args:
        inputs: the meaning of the names before the code runs.
        call_hook: ``hook(evaluator, call node, state)`` → a value, or ``NotImplemented`` to let the
            evaluator handle the call; used for calls with effects (``hf_config.update(...)``).
    """

    def __init__(self, inputs: Inputs, call_hook: Callable | None = None):
        self.inputs = inputs
        self.call_hook = call_hook
        self.steps = 0
        self.depth = 0

    # paths ------------------------------------------------------------------------------------

    def path(self, node: ast.AST, st: State) -> str | None:
        """The canonical path of a name or attribute chain (``hf_config.model_type``), or None
        when ``node`` is not one, or passes through an object whose identity is unknown."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = node.id
        if root in st.alias:
            base = st.alias[root]
            if base is None:
                return None
        else:
            base = root
        return ".".join([base, *reversed(parts)])

    def is_object(self, path: str | None) -> bool:
        """True when ``path`` lies under an object root (:attr:`Inputs.roots`)."""
        return path is not None and path.split(".")[0] in self.inputs.roots

    def read(self, path: str, st: State) -> Value:
        """The value at a canonical path: what the code assigned, else the input's."""
        if path in st.env:
            return st.env[path]
        return self.inputs.value(path)

    def has(self, path: str, st: State) -> bool | None:
        if path in st.env:
            return True
        return self.inputs.has(path)

    def write(self, path: str, value: Value, st: State) -> None:
        """Assign ``value`` at ``path``; paths under it are forgotten (TOP)."""
        prefix = path + "."
        for k in [k for k in st.env if k.startswith(prefix)]:
            st.env[k] = TOP
        st.env[path] = value

    def object_path(self, node: ast.AST, st: State) -> tuple[bool, str | None]:
        """``(is an object expression, its canonical path or None when ambiguous)`` for the
        right-hand side of an assignment: a chain under an object root, ``getattr(obj, "name",
        default)``, ``copy.deepcopy(obj)``, ``obj.get_text_config()``."""
        if isinstance(node, ast.Call):
            fn = node.func
            fname = fn.id if isinstance(fn, ast.Name) else (fn.attr if isinstance(fn, ast.Attribute) else None)
            if fname in ("deepcopy", "copy") and len(node.args) == 1:
                return self.object_path(node.args[0], st)
            if fname == "getattr" and len(node.args) in (2, 3) and isinstance(node.args[1], ast.Constant) \
                    and isinstance(node.args[1].value, str):
                ok, base = self.object_path(node.args[0], st)
                if not ok:
                    return False, None
                if base is None:
                    return True, None
                full = f"{base}.{node.args[1].value}"
                if len(node.args) == 2:
                    return True, full
                has = self.has(full, st)
                if has is True:
                    return True, full
                okd, dflt = self.object_path(node.args[2], st)
                if has is False and okd:
                    return True, dflt
                return True, None
            if isinstance(fn, ast.Attribute) and fn.attr in ("get_text_config",) and not node.args:
                ok, base = self.object_path(fn.value, st)
                if ok and base is not None:
                    return True, f"{base}.text_config" if self.has(f"{base}.text_config", st) else base
                return ok, None
            return False, None
        p = self.path(node, st)
        if p is not None and self.is_object(p):
            return True, p
        if isinstance(node, (ast.Name, ast.Attribute)):
            root = node
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in st.alias and st.alias[root.id] is None:
                return True, None
        return False, None

    # expressions ------------------------------------------------------------------------------

    def eval(self, node: ast.AST, st: State) -> Value:
        """The possible values of expression ``node`` in state ``st`` (walrus targets are bound).
        Never raises: what cannot be evaluated (unknown names and calls, nesting deeper than
        :data:`MAX_DEPTH`, results too large) is :data:`TOP`."""
        m = getattr(self, f"_e_{type(node).__name__}", None)
        if m is None or self.depth >= MAX_DEPTH:
            return TOP
        self.depth += 1
        try:
            return m(node, st)
        except RecursionError:
            return TOP
        finally:
            self.depth -= 1

    def _e_Constant(self, n: ast.Constant, st: State) -> Value:
        return one(n.value) if _safe(n.value) else TOP

    def _e_Name(self, n: ast.Name, st: State) -> Value:
        p = self.path(n, st)
        return TOP if p is None else self.read(p, st)

    def _e_Attribute(self, n: ast.Attribute, st: State) -> Value:
        p = self.path(n, st)
        if p is not None:
            return self.read(p, st)
        return TOP

    def _e_Tuple(self, n, st: State) -> Value:
        if any(isinstance(e, ast.Starred) for e in n.elts):
            return self._starred(n.elts, st)
        return _lift(lambda *xs: tuple(xs), *[self.eval(e, st) for e in n.elts]) if n.elts else one(())

    _e_List = _e_Tuple

    def _starred(self, elts, st: State) -> Value:
        parts = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.eval(e.value, st)
                parts.append(_lift(lambda x: tuple(x) if isinstance(x, (tuple, str, frozenset)) else _no(), v))
            else:
                parts.append(_lift(lambda x: (x,), self.eval(e, st)))
        return _lift(lambda *xs: tuple(itertools.chain(*xs)), *parts)

    def _e_Set(self, n: ast.Set, st: State) -> Value:
        return _lift(lambda *xs: frozenset(xs), *[self.eval(e, st) for e in n.elts])

    def _e_Dict(self, n: ast.Dict, st: State) -> Value:
        if any(k is None for k in n.keys):
            return TOP
        ks = [self.eval(k, st) for k in n.keys]
        vs = [self.eval(v, st) for v in n.values]
        vs = [one(UNKNOWN_ITEM) if v is TOP else v for v in vs]
        return _lift(lambda *xs: FrozenDict(tuple(zip(xs[: len(ks)], xs[len(ks):]))), *ks, *vs)

    def _e_JoinedStr(self, n: ast.JoinedStr, st: State) -> Value:
        parts = []
        for v in n.values:
            if isinstance(v, ast.Constant):
                parts.append(one(str(v.value)))
            elif isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None:
                parts.append(_lift(lambda x: x if isinstance(x, str) else (str(x) if isinstance(x, int) else _no()),
                                   self.eval(v.value, st)))
            else:
                return TOP
        return _lift(lambda *xs: "".join(xs), *parts) if parts else one("")

    def _e_Compare(self, n: ast.Compare, st: State) -> Value:
        left = self.eval(n.left, st)
        result: Value = one(True)
        for op, comp in zip(n.ops, n.comparators):
            right = self.eval(comp, st)
            fn = _CMP.get(type(op))
            if fn is None:
                return TOP
            step = _lift(lambda a, b: bool(fn(a, b)), left, right)
            result = _lift(lambda a, b: a and b, result, step)
            left = right
        return result

    def _e_BoolOp(self, n: ast.BoolOp, st: State) -> Value:
        is_and = isinstance(n.op, ast.And)
        acc: set = set()
        pending = True  # some path still evaluates the next operand
        for i, e in enumerate(n.values):
            v = self.eval(e, st)
            last = i == len(n.values) - 1
            if v is TOP:
                if last:
                    return TOP
                v = frozenset((True, False)) if self._boolish(e) else TOP
                if v is TOP:
                    return TOP
            cont = set()
            for x in v:
                try:
                    t = bool(x)
                except Exception:
                    return TOP
                if last or (t if not is_and else not t):
                    acc.add(x)  # short-circuits here (or is the last operand)
                else:
                    cont.add(x)
            if not cont:
                pending = False
                break
        del pending
        return frozenset(acc) if len(acc) <= MAX_VALUES else TOP

    @staticmethod
    def _boolish(e: ast.AST) -> bool:
        """True when an expression can only be a bool (a comparison, ``not``, ``hasattr``,
        ``isinstance``), so an unknown value is {True, False}."""
        if isinstance(e, ast.Compare) or (isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not)):
            return True
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("hasattr", "isinstance", "callable"):
            return True
        if isinstance(e, ast.BoolOp):
            return all(Evaluator._boolish(x) for x in e.values)
        return False

    def _e_UnaryOp(self, n: ast.UnaryOp, st: State) -> Value:
        v = self.eval(n.operand, st)
        if isinstance(n.op, ast.Not):
            if v is TOP:
                return frozenset((True, False))
            return _lift(lambda x: not x, v)
        if isinstance(n.op, ast.USub):
            return _lift(lambda x: -x if isinstance(x, (int, float)) and not isinstance(x, bool) else _no(), v)
        return TOP

    def _e_BinOp(self, n: ast.BinOp, st: State) -> Value:
        fn = _BIN.get(type(n.op))
        if fn is None:
            return TOP
        return _lift(fn, self.eval(n.left, st), self.eval(n.right, st))

    def _e_IfExp(self, n: ast.IfExp, st: State) -> Value:
        t = truth(self.eval(n.test, st))
        if t is True:
            return self.eval(n.body, st)
        if t is False:
            return self.eval(n.orelse, st)
        return join(self.eval(n.body, st), self.eval(n.orelse, st))

    def _e_NamedExpr(self, n: ast.NamedExpr, st: State) -> Value:
        v = self.eval(n.value, st)
        if isinstance(n.target, ast.Name):
            st.alias.pop(n.target.id, None)
            self.write(n.target.id, v, st)
        return v

    def _e_Subscript(self, n: ast.Subscript, st: State) -> Value:
        base = self.eval(n.value, st)
        if isinstance(n.slice, ast.Slice):
            lo = self.eval(n.slice.lower, st) if n.slice.lower else one(None)
            hi = self.eval(n.slice.upper, st) if n.slice.upper else one(None)
            return _lift(lambda b, a, c: b[a:c] if isinstance(b, (tuple, str)) else _no(), base, lo, hi)
        idx = self.eval(n.slice, st)

        def sub(b, i):
            if isinstance(b, FrozenDict):
                if not b.has(i):
                    raise KeyError(i)
                return b.get(i)
            if isinstance(b, (tuple, str)) and isinstance(i, int) and not isinstance(i, bool):
                return b[i]
            return _no()
        return _lift(sub, base, idx)

    def _comprehension(self, n, st: State, make) -> Value:
        if len(n.generators) != 1:
            return TOP
        g = n.generators[0]
        if g.is_async or not isinstance(g.target, ast.Name):
            return TOP
        it = self.eval(g.iter, st)
        if it is TOP or len(it) != 1:
            return TOP
        seq = next(iter(it))
        if isinstance(seq, FrozenDict):
            seq = seq.keys()
        if not isinstance(seq, (tuple, frozenset, str)) or len(seq) > 256:
            return TOP
        results: list[Value] = []
        inner = st.copy()
        for x in seq:
            self.write(g.target.id, one(x), inner)
            inner.alias.pop(g.target.id, None)
            keep = True
            for cond in g.ifs:
                t = truth(self.eval(cond, inner))
                if t is None:
                    return TOP
                keep = keep and t
            if keep:
                results.append(self.eval(n.elt, inner))
        return _lift(make, *results) if results else one(make())

    def _e_ListComp(self, n, st: State) -> Value:
        return self._comprehension(n, st, lambda *xs: tuple(xs))

    _e_GeneratorExp = _e_ListComp

    def _e_SetComp(self, n, st: State) -> Value:
        return self._comprehension(n, st, lambda *xs: frozenset(xs))

    def _e_Call(self, n: ast.Call, st: State) -> Value:
        if self.call_hook is not None:
            r = self.call_hook(self, n, st)
            if r is not NotImplemented:
                return r
        fn = n.func
        if any(isinstance(a, ast.Starred) for a in n.args) or any(k.arg is None for k in n.keywords):
            return TOP
        if isinstance(fn, ast.Name):
            name = fn.id
            if name in ("getattr", "hasattr") and len(n.args) in (2, 3) and isinstance(n.args[1], ast.Constant) \
                    and isinstance(n.args[1].value, str):
                ok, base = self.object_path(n.args[0], st)
                if not ok or base is None:
                    return frozenset((True, False)) if name == "hasattr" else TOP
                full = f"{base}.{n.args[1].value}"
                has = self.has(full, st)
                if name == "hasattr":
                    return TOP if has is None else one(has)
                if len(n.args) == 2 or has is True:
                    return self.read(full, st)
                dflt = self.eval(n.args[2], st)
                if has is False:
                    return dflt
                return join(self.read(full, st), dflt)
            if name == "get_args" and len(n.args) == 1:
                return self.eval(n.args[0], st)
            args = [self.eval(a, st) for a in n.args]
            if n.keywords:
                return TOP
            pure = {"len": len, "str": lambda x: x if isinstance(x, str) else _no(), "bool": bool,
                    "tuple": lambda x=(): tuple(x) if isinstance(x, (tuple, frozenset, str)) else _no(),
                    "list": lambda x=(): tuple(x) if isinstance(x, (tuple, frozenset, str)) else _no(),
                    "set": lambda x=(): frozenset(x) if isinstance(x, (tuple, frozenset, str)) else _no(),
                    "frozenset": lambda x=(): frozenset(x) if isinstance(x, (tuple, frozenset, str)) else _no(),
                    "int": lambda x: int(x) if isinstance(x, (int, bool)) else _no(),
                    "any": lambda x: any(x) if isinstance(x, (tuple, frozenset)) else _no(),
                    "all": lambda x: all(x) if isinstance(x, (tuple, frozenset)) else _no()}
            if name in pure and not (name in st.env or name in st.alias):
                return _lift(pure[name], *args)
            return TOP
        if isinstance(fn, ast.Attribute):
            recv = self.eval(fn.value, st)
            if recv is TOP or n.keywords:
                return TOP
            args = [self.eval(a, st) for a in n.args]

            def call(r, *xs):
                allowed = _PURE_METHODS.get(type(r), set())
                if fn.attr not in allowed:
                    return _no()
                out = getattr(r, fn.attr)(*xs)
                if isinstance(out, list):
                    out = tuple(out)
                elif isinstance(out, set):
                    out = frozenset(out)
                return out
            return _lift(call, recv, *args)
        return TOP

    # statements -------------------------------------------------------------------------------

    def run(self, body: list[ast.stmt], st: State) -> list[Outcome] | None:
        """Interpret ``body`` from state ``st``: every way it can end (see :class:`Outcome`).
        A branch that cannot be decided runs both ways; the paths that go on are joined. None
        when the code is too long or too deeply nested to interpret (:data:`MAX_STEPS`,
        :data:`MAX_DEPTH`)."""
        outcomes: list[Outcome] = []
        try:
            live = self._block(body, st, outcomes)
        except (_Stop, RecursionError):
            return None
        if live is not None:
            outcomes.append(Outcome("end", live))
        return outcomes

    def _block(self, body: list[ast.stmt], st: State | None, outcomes: list[Outcome]) -> State | None:
        if self.depth >= MAX_DEPTH:
            raise _Stop()
        self.depth += 1
        try:
            for stmt in body:
                if st is None:
                    return None
                self.steps += 1
                if self.steps > MAX_STEPS:
                    raise _Stop()
                st = self._stmt(stmt, st, outcomes)
            return st
        finally:
            self.depth -= 1

    def _join_states(self, a: State | None, b: State | None) -> State | None:
        if a is None:
            return b
        if b is None:
            return a
        out = State(undecided=list(dict.fromkeys(a.undecided + b.undecided)))
        for k in set(a.env) | set(b.env):
            va = a.env[k] if k in a.env else self._fallback(k)
            vb = b.env[k] if k in b.env else self._fallback(k)
            out.env[k] = join(va, vb)
        for k in set(a.alias) | set(b.alias):
            out.alias[k] = a.alias.get(k) if a.alias.get(k) == b.alias.get(k) else None
        return out

    def _fallback(self, path: str) -> Value:
        return self.inputs.value(path)

    def _stmt(self, s: ast.stmt, st: State, outcomes: list[Outcome]) -> State | None:
        if isinstance(s, ast.If):
            t = truth(self.eval(s.test, st))
            if t is True:
                return self._block(s.body, st, outcomes)
            if t is False:
                return self._block(s.orelse, st, outcomes)
            st.undecided.append(s.lineno)
            a = self._block(s.body, st.copy(), outcomes)
            b = self._block(s.orelse, st.copy(), outcomes)
            return self._join_states(a, b)
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            if s.value is None:
                return st
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                self._assign(t, s.value, st)
            return st
        if isinstance(s, ast.AugAssign):
            p = self.path(s.target, st)
            fn = _BIN.get(type(s.op))
            if p is not None:
                self.write(p, _lift(fn, self.read(p, st), self.eval(s.value, st)) if fn else TOP, st)
            return st
        if isinstance(s, ast.Expr):
            self.eval(s.value, st)
            return st
        if isinstance(s, ast.Return):
            ok, p = self.object_path(s.value, st) if s.value is not None else (False, None)
            val = TOP if (s.value is None or ok) else self.eval(s.value, st)
            outcomes.append(Outcome("return", st, s.lineno, p if ok else None, val))
            return None
        if isinstance(s, ast.Raise):
            outcomes.append(Outcome("raise", st, s.lineno))
            return None
        if isinstance(s, ast.Assert):
            t = truth(self.eval(s.test, st))
            if t is False:
                outcomes.append(Outcome("raise", st, s.lineno))
                return None
            return st
        if isinstance(s, ast.With):
            return self._block(s.body, st, outcomes)
        if isinstance(s, ast.Try):
            after = self._block(s.body, st, outcomes)
            if after is not None and s.orelse:
                after = self._block(s.orelse, after, outcomes)
            if after is not None and s.finalbody:
                after = self._block(s.finalbody, after, outcomes)
            return after
        if isinstance(s, (ast.For, ast.While)):
            # zero or one pass: whatever the body may assign is joined with the state before
            before = st.copy()
            st.undecided.append(s.lineno)
            if isinstance(s, ast.For) and isinstance(s.target, ast.Name):
                self.write(s.target.id, TOP, st)
            body_end = self._block(s.body, st, [])
            return self._join_states(before, body_end)
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            for a in s.names:
                name = (a.asname or a.name).split(".")[0]
                if name != "*":
                    self.write(name, TOP, st)
            return st
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.write(s.name, TOP, st)
            return st
        return st  # pass, global, del, …: no effect on what is tracked

    def _assign(self, target: ast.AST, value: ast.AST, st: State) -> None:
        if isinstance(target, ast.Name):
            ok, p = self.object_path(value, st)
            if ok:
                st.alias[target.id] = p
                for k in [k for k in st.env if k == target.id or k.startswith(target.id + ".")]:
                    del st.env[k]
                return
            st.alias.pop(target.id, None)
            self.write(target.id, self.eval(value, st), st)
            return
        if isinstance(target, ast.Attribute):
            p = self.path(target, st)
            v = self.eval(value, st)
            if p is not None:
                self.write(p, v, st)
            else:
                self._forget_under(target, st)
            return
        if isinstance(target, ast.Subscript):
            p = self.path(target.value, st)
            if p is None:
                return
            base = self.read(p, st)
            key = self.eval(target.slice, st)
            v = self.eval(value, st)
            self.write(p, _lift(lambda b, k, x: b.set(k, x) if isinstance(b, FrozenDict) else _no(), base, key, v), st)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            v = self.eval(value, st)
            for i, e in enumerate(target.elts):
                if isinstance(e, ast.Starred):
                    self._assign_value(e.value, TOP, st)
                    continue
                self._assign_value(e, _lift(lambda t, i=i: t[i] if isinstance(t, tuple) and len(t) == len(target.elts)
                                            else _no(), v), st)

    def _assign_value(self, target: ast.AST, v: Value, st: State) -> None:
        p = self.path(target, st)
        if p is not None:
            if isinstance(target, ast.Name):
                st.alias.pop(target.id, None)
            self.write(p, v, st)

    def _forget_under(self, target: ast.Attribute, st: State) -> None:
        """An assignment through an object of unknown identity: every object path with the
        assigned attribute becomes unknown."""
        for k in list(st.env):
            if k.endswith("." + target.attr):
                st.env[k] = TOP
        st.env[f"?.{target.attr}"] = TOP

    # entry point ------------------------------------------------------------------------------

    def run_function(self, fn: ast.FunctionDef, st: State | None = None) -> list[Outcome] | None:
        """Interpret the body of ``fn`` (its parameters are :attr:`Inputs.roots` or unknown);
        None when it is too long or too deeply nested to interpret (see :meth:`run`)."""
        return self.run(fn.body, st or State())


def values(v: Value) -> Iterable:
    """The possible values of ``v`` (empty for TOP)."""
    return () if v is TOP else v
