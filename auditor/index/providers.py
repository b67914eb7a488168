"""Typed fact providers, computed once per tree (in the style of LibCST's metadata providers).

A fact a gate, a planner or an engine hook needs more than once is a :class:`FactProvider`
subclass: ``compute(ctx, key)`` builds it, ``DEPENDS_ON`` names the providers it asks for in
turn, and ``OUTSIDE_TREE`` marks a provider whose value comes from outside the scanned tree (a
``transformers`` source). A consumer asks ``ctx.get(Provider, key)``; the :class:`FactStore`
memoises the value by provider type and key, refuses a provider that asks for one it did not
declare, and records, for the run, which outside-tree providers a value was (transitively) built
from, so that "did a verdict read transformers?" is answered by the framework
(:meth:`FactStore.outside_reads`), never left behind by a rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Hashable, TypeVar

T = TypeVar("T")


class FactProvider:
    """Base class of the fact providers.

    Subclasses set :attr:`DEPENDS_ON` (the providers ``compute`` asks for with ``ctx.get``) and
    implement :meth:`compute`. A provider is never instantiated: the class is the fact's type.
    """

    #: the providers :meth:`compute` may ask for (``ctx.get(Other, key)``); any other is refused
    DEPENDS_ON: ClassVar[tuple[type["FactProvider"], ...]] = ()
    #: True when the value is read from outside the scanned tree (recorded per run when used)
    OUTSIDE_TREE: ClassVar[bool] = False

    @classmethod
    def compute(cls, ctx: Any, key: Hashable) -> Any:  # pragma: no cover - every provider overrides it
        """The fact for ``key`` in the tree of ``ctx`` (called once per key and store).

        Args:
            ctx: the context of the tree (an object with ``get``, ``resolver``, ``registry``,
                ``facts``; :class:`rules.base.Context`).
            key: what the fact is about (a class reference, an architecture, a tuple), or None
                for a tree-wide fact.
        """
        raise NotImplementedError

    @classmethod
    def used(cls, value: Any) -> bool:
        """For an :attr:`OUTSIDE_TREE` provider: True when ``value`` carries something read from
        outside the tree (default: it is not None)."""
        return value is not None


@dataclass
class _Frame:
    """One consumer being computed: what it declared and the outside providers it read."""

    consumer: object
    declared: tuple[type[FactProvider], ...] | None
    outside: set[type[FactProvider]] = field(default_factory=set)


class UndeclaredFact(TypeError):
    """A provider (or a consumer that declares its facts) asked for a provider it did not
    declare in ``DEPENDS_ON`` (``FACTS`` on a rule)."""


class FactStore:
    """The memo of one tree's facts: ``(provider type, key) → value``, with the outside-tree
    providers each value was built from."""

    def __init__(self) -> None:
        self._memo: dict[tuple[type[FactProvider], Hashable], tuple[Any, frozenset]] = {}
        self._stack: list[_Frame] = []
        self._outside: set[type[FactProvider]] = set()

    def get(self, ctx: Any, provider: type[FactProvider], key: Hashable = None) -> Any:
        """The value of ``provider`` for ``key`` (computed on first request).

        Raises:
            UndeclaredFact: the consumer being computed did not declare ``provider``.
            TypeError: ``key`` is not hashable.
        """
        if self._stack:
            top = self._stack[-1]
            if top.declared is not None and provider not in top.declared:
                name = getattr(top.consumer, "__name__", str(top.consumer))
                raise UndeclaredFact(f"{name} asks for {provider.__name__}, which it does not declare")
        mk = (provider, key)
        hit = self._memo.get(mk)
        if hit is None:
            frame = _Frame(provider, provider.DEPENDS_ON)
            self._stack.append(frame)
            try:
                value = provider.compute(ctx, key)
            finally:
                self._stack.pop()
            outside = set(frame.outside)
            if provider.OUTSIDE_TREE and provider.used(value):
                outside.add(provider)
            hit = (value, frozenset(outside))
            self._memo[mk] = hit
        value, outside = hit
        if outside:
            if self._stack:
                self._stack[-1].outside |= outside
            self._outside |= outside
        return value

    def consumer(self, who: object, declared: tuple[type[FactProvider], ...] | None) -> "_Consuming":
        """A context manager under which ``who`` (a rule class) asks for facts: with
        ``declared``, any provider it does not name is refused."""
        return _Consuming(self, _Frame(who, declared))

    def begin_run(self) -> None:
        """Forget the outside reads recorded so far (a new scan starts; the memo stays)."""
        self._outside = set()

    def outside_reads(self) -> set[type[FactProvider]]:
        """The outside-tree providers whose values the facts asked for since :meth:`begin_run`
        carried (directly or through the providers they were built from)."""
        return set(self._outside)


class _Consuming:
    def __init__(self, store: FactStore, frame: _Frame):
        self.store, self.frame = store, frame

    def __enter__(self) -> _Frame:
        self.store._stack.append(self.frame)
        return self.frame

    def __exit__(self, *exc) -> None:
        self.store._stack.pop()


class ModuleAst(FactProvider):
    """The ``ast`` syntax tree of the module at a path of the tree (the key), parsed once per
    tree (with a newer grammar when it must, :func:`auditor.index.newsyntax.parse_newer_syntax`),
    never executed; None when it cannot be read or parsed."""

    @classmethod
    def compute(cls, ctx, key: str):
        import ast

        try:
            data = ctx.resolver.tree.read(key)
        except (KeyError, OSError):
            return None
        try:
            return ast.parse(data, filename=key)
        except (SyntaxError, ValueError, RecursionError):
            from auditor.index.newsyntax import parse_newer_syntax

            parsed = parse_newer_syntax(data, key)
            return parsed[0] if parsed else None
