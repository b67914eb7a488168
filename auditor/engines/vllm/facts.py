"""Facts about a vLLM tree as a whole (no verdicts here).

:class:`TreeFacts` gathers what the whole tree says about speculative decoding: the
``SupportsEagle3`` / ``SupportsEagle`` protocols and their members (read from the tree's own
``vllm/model_executor/models/interfaces.py``), ``EagleModelMixin``, and the facts each gate's
extractor found (:meth:`TreeFacts.found`; the extractors live with their gates in ``rules/``).
One target's class, holder model and ``forward`` are read the same way in both engines
(:mod:`auditor.engines.modelfiles`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from auditor.engines.base import TreeFactsBase
from auditor.index.facts import AttrFact, MethodFact
from auditor.index.targets import ClassRef, External

INTERFACES_MODULE = "vllm.model_executor.models.interfaces"

#: Names Python's ``typing`` never counts as protocol members.
_NON_MEMBERS = {"__doc__", "__module__", "__init__", "__new__", "__slots__", "__annotations__", "__dict__", "__weakref__"}

@dataclass
class Protocol:
    """A runtime-checkable protocol of the tree: its class, and each member name with the
    protocol class that declares it (``members``: name → ``(ClassRef, fact)``)."""

    ref: ClassRef
    path: str
    line: int
    members: dict[str, tuple[ClassRef, MethodFact | AttrFact]]

    def is_protocol_class(self, ref: ClassRef) -> bool:
        """True when ``ref`` is the protocol or one of the classes that declare its members."""
        return any(r == ref for r, _ in self.members.values()) or ref == self.ref


class TreeFacts(TreeFactsBase):
    """Tree-wide facts of a vLLM tree, computed lazily once per tree (see the module docstring);
    the engine-neutral part (extractor facts, unanalysed modules) is
    :class:`auditor.engines.base.TreeFactsBase`."""

    #: the module of the tree's speculative-decoding protocols (``SupportsEagle3``)
    interfaces_module = INTERFACES_MODULE

    def protocol(self, name: str) -> Protocol | None:
        """The tree's protocol ``name`` (``SupportsEagle3``) with its members, or None when the
        tree has none (vLLM ≤ 0.10.0 calls the EAGLE-3 methods by duck typing)."""
        return self._protocols.get(name) if name in self._protocols else self._load_protocol(name)

    @cached_property
    def _protocols(self) -> dict[str, Protocol | None]:
        return {}

    def _load_protocol(self, name: str) -> Protocol | None:
        r = self.resolver
        t = r.resolve_name(INTERFACES_MODULE, name) if self.tree.has_module(INTERFACES_MODULE) else None
        proto = None
        if isinstance(t, ClassRef):
            members: dict[str, tuple[ClassRef, MethodFact | AttrFact]] = {}
            for entry in reversed(r.mro(t).entries):
                if not isinstance(entry, ClassRef):
                    continue
                c = r.cls(entry)
                if c is None:
                    continue  # typing.Protocol/Generic/object contribute no members
                for mname, mf in c.methods.items():
                    if not (mname.startswith("__") and mname.endswith("__")):
                        members[mname] = (entry, mf)
                for aname, af in c.attrs.items():
                    if aname not in _NON_MEMBERS and not aname.startswith("_abc_") and not (
                        aname.startswith("__") and aname.endswith("__")
                    ):
                        members[aname] = (entry, af)
            loc = r.location(t)
            proto = Protocol(t, loc[0], loc[1], members) if loc else None
        self._protocols[name] = proto
        return proto

    def is_typing_protocol(self, ref: ClassRef) -> bool:
        """True when ``ref`` derives directly from ``typing.Protocol`` (or
        ``typing_extensions.Protocol``), as vLLM's ``SupportsEagle3`` does in
        ``vllm/model_executor/models/interfaces.py``."""
        for b in self.resolver.bases(ref):
            if isinstance(b, External) and b.name in ("typing.Protocol", "typing_extensions.Protocol"):
                return True
        return False

    @cached_property
    def eagle_model_mixin(self) -> ClassRef | None:
        """``EagleModelMixin`` (vLLM ≥ 0.18), or None."""
        if not self.tree.has_module(INTERFACES_MODULE):
            return None
        t = self.resolver.resolve_name(INTERFACES_MODULE, "EagleModelMixin")
        return t if isinstance(t, ClassRef) else None
