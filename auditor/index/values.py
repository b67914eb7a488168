"""The values, inputs and state of the static evaluator (:mod:`auditor.index.evaluate`).

A value is a set of possible constants, or :data:`TOP` when nothing is known (:func:`one`,
:func:`join`, :func:`only`, :func:`truth`, :func:`values`); dict literals are :class:`FrozenDict`
and an unknown item in a known container is :data:`UNKNOWN_ITEM`. Only a closed list of pure
operations on constants is applied (:data:`PURE_METHODS`, :data:`COMPARE_OPS`,
:data:`BINARY_OPS`, through :func:`lift`). :class:`Inputs` says what names mean before the code
runs; :class:`State` and :class:`Outcome` are what the evaluator carries and gives back.
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
PURE_METHODS = {
    str: {"startswith", "endswith", "lower", "upper", "strip", "lstrip", "rstrip", "replace", "split",
          "removeprefix", "removesuffix", "count", "find", "join", "isdigit", "title", "capitalize"},
    tuple: {"count", "index"},
    frozenset: {"intersection", "union", "difference", "issubset", "issuperset", "isdisjoint"},
    FrozenDict: {"get", "keys"},
}

#: The comparison operators evaluation applies, by ``ast`` operator class.
COMPARE_OPS = {
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


#: The binary operators evaluation applies, by ``ast`` operator class.
BINARY_OPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: _mult,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b if not isinstance(a, str) else not_evaluated(),
    ast.BitOr: lambda a, b: a | b, ast.BitAnd: lambda a, b: a & b,
}


def not_evaluated():
    """Raise TypeError: the operation is not one evaluation applies (:func:`lift` then gives :data:`TOP`)."""
    raise TypeError("not evaluated")


def _contains(container, item) -> bool:
    if isinstance(container, FrozenDict):
        return container.has(item)
    if isinstance(container, (str, tuple, frozenset)):
        return item in container
    raise TypeError("not a container")


def is_safe(v: Any) -> bool:
    """True when ``v`` is an immutable constant small enough to keep as a possible value (strings and
    containers of at most 4096 items, integers below 2**62, :data:`UNKNOWN_ITEM`)."""
    if isinstance(v, str):
        return len(v) <= 4096
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return abs(v) < 1 << 62
    if isinstance(v, (tuple, frozenset)):
        return len(v) <= 4096 and all(is_safe(x) for x in v)
    if isinstance(v, FrozenDict):
        return len(v) <= 4096
    return isinstance(v, _IMMUTABLE) or v is UNKNOWN_ITEM


def lift(fn: Callable, *args: Value) -> Value:
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
        if r is UNKNOWN_ITEM or not is_safe(r):
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


def values(v: Value) -> Iterable:
    """The possible values of ``v`` (empty for TOP)."""
    return () if v is TOP else v
