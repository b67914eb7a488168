"""What a name of the tree resolves to (:data:`Target`: :class:`ClassRef`, :class:`External`,
:class:`ModuleRef`, :class:`FunctionRef`, :class:`Unresolved`), and a class's C3 linearisation
(:class:`MroResult`): the values :class:`auditor.index.resolve.Resolver` gives back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union


@dataclass(frozen=True)
class ClassRef:
    """A class defined in the tree: its module and qualname. ``subst`` binds the parameters of
    the factory function that builds it (``as_seq_cls_model(cls)`` → ``(("cls", <target>),)``)."""

    module: str
    qualname: str
    subst: tuple = ()

    @property
    def dotted(self) -> str:
        """``module.qualname``, as Python's ``f"{cls.__module__}.{cls.__qualname__}"`` (an
        earlier definition of a name defined twice is keyed ``Name@line`` internally)."""
        return f"{self.module}.{self.qualname.split('@')[0]}"

    @property
    def name(self) -> str:
        """The class name (last part of the qualname)."""
        return self.qualname.split("@")[0].rsplit(".", 1)[-1]


@dataclass(frozen=True)
class External:
    """A name from outside the tree, dotted as imported (``torch.nn.Module``)."""

    name: str

    @property
    def dotted(self) -> str:
        return self.name


@dataclass(frozen=True)
class ModuleRef:
    """A module of the tree."""

    module: str


@dataclass(frozen=True)
class FunctionRef:
    """A module-level function of the tree."""

    module: str
    name: str


@dataclass(frozen=True)
class Unresolved:
    """A name that static analysis cannot bind, with the reason."""

    text: str
    reason: str

    @property
    def dotted(self) -> str:
        return self.text


Target = Union[ClassRef, External, ModuleRef, FunctionRef, Unresolved]


@dataclass
class MroResult:
    """The C3 linearisation of a class: ``entries`` (ClassRef or External, the class first,
    ``External("object")`` last), ``error`` (an inconsistent hierarchy, as Python would raise),
    and ``unresolved`` base texts that could not be bound (the MRO is then partial)."""

    entries: list
    error: str | None = None
    unresolved: list[Unresolved] = field(default_factory=list)
