"""Bases, the C3 method resolution order and member lookup of the tree's classes.

:class:`MroMixin`, a part of :class:`auditor.index.resolve.Resolver`: a class's resolved bases (with
those its decorators append to ``__bases__``), its MRO as ``type.mro()`` computes it, the class of
its MRO that defines a member, and subclass tests.
"""

from __future__ import annotations

from auditor.index.facts import AttrFact, MethodFact
from auditor.index.targets import ClassRef, External, FunctionRef, MroResult, Target, Unresolved

#: MROs of the external bases whose MRO matters for C3 (from CPython's typing module).
_EXTERNAL_MRO = {
    "typing.Protocol": ["typing.Protocol", "typing.Generic"],
    "typing_extensions.Protocol": ["typing.Protocol", "typing.Generic"],
    "typing.Generic": ["typing.Generic"],
    "typing_extensions.Generic": ["typing.Generic"],
}


class MroMixin:
    """The MRO part of the resolver (a mixin of :class:`auditor.index.resolve.Resolver`, whose
    ``tree``, ``_mro``, ``cls``, ``resolve_base`` and ``resolve_dotted`` it uses)."""

    # -- MRO ---------------------------------------------------------------------------
    def bases(self, ref: ClassRef) -> list[Target]:
        """The resolved direct bases of ``ref`` (empty list means ``object``), as they are after
        the class's decorators ran: a decorator that executes
        ``cls.__bases__ = cls.__bases__ + (X,)`` (vLLM's ``support_torch_compile`` does, in
        ``vllm/compilation/decorators.py``) appends X."""
        c = self.cls(ref)
        if c is None:
            return []
        out = [self.resolve_base(ref, b) for b in c.bases]
        for deco in c.decorators:
            for extra in self.decorator_appended_bases(ref.module, deco):
                if extra not in out:
                    out.append(extra)
        return out

    def decorator_appended_bases(self, module: str, deco: str) -> list[Target]:
        """Bases a class decorator appends to ``__bases__`` (through the functions of its module
        that it calls), resolved; [] for decorators that leave the bases alone."""
        key = (module, deco)
        cache = self.__dict__.setdefault("_deco_cache", {})
        if key in cache:
            return cache[key]
        cache[key] = []
        name = deco.removesuffix("(...)")
        if not all(p.isidentifier() for p in name.split(".")):
            return []
        f = self.resolve_dotted(module, name)
        result: list[Target] = []
        if isinstance(f, FunctionRef):
            fm = self.tree.module(f.module)
            if fm is not None:
                seen: set[str] = set()
                todo = [f.name]
                while todo:
                    fn = todo.pop()
                    if fn in seen or fn not in fm.functions:
                        continue
                    seen.add(fn)
                    ff = fm.functions[fn]
                    for b in ff.appends_bases:
                        t = self.resolve_dotted(f.module, b)
                        if t not in result:
                            result.append(t)
                    todo += ff.calls
        cache[key] = result
        return result

    def mro(self, ref: ClassRef) -> MroResult:
        """C3 linearisation of ``ref``, as ``type.mro()`` computes it.

        Args:
            ref: the class.

        Returns:
            Its MRO; an inconsistent or recursive hierarchy is returned as ``MroResult.error``.

        Raises:
            RecursionError: the inheritance chain is too deep to follow (a thousand classes deriving
                from each other); no partial result of this call stays cached, so the classes of
                other targets are linearised afresh.
        """
        if ref in self._mro:
            return self._mro[ref]
        started = self.__dict__.setdefault("_mro_started", [])
        top = not started
        try:
            return self._linearise(ref, started)
        except RecursionError:
            if top:  # forget the placeholders of the classes whose linearisation was cut short
                for r, placeholder in started:
                    if self._mro.get(r) is placeholder:
                        del self._mro[r]
            raise
        finally:
            if top:
                started.clear()

    def _linearise(self, ref: ClassRef, started: list) -> MroResult:
        placeholder = MroResult([ref, External("object")], error="recursive hierarchy")
        started.append((ref, placeholder))
        self._mro[ref] = placeholder
        unresolved: list[Unresolved] = []
        seqs: list[list] = []
        direct: list = []
        for b in self.bases(ref):
            if isinstance(b, ClassRef):
                r = self.mro(b)
                unresolved += r.unresolved
                if r.error == "recursive hierarchy":
                    unresolved.append(Unresolved(b.dotted, "recursive hierarchy"))
                    continue
                seqs.append(list(r.entries))
                direct.append(b)
            elif isinstance(b, External):
                chain = _EXTERNAL_MRO.get(b.name, [b.name])
                ext = [External(n) for n in chain] + [External("object")]
                if b.name == "object":
                    ext = [External("object")]
                seqs.append(ext)
                direct.append(ext[0])
            else:
                ub = b if isinstance(b, Unresolved) else Unresolved(str(b), "not a class")
                unresolved.append(ub)
        if not direct:
            res = MroResult([ref, External("object")], unresolved=unresolved)
        else:
            merged, err = _c3_merge(seqs + [direct])
            res = MroResult([ref] + merged, error=err, unresolved=unresolved)
        self._mro[ref] = res
        return res

    def lookup(self, ref: ClassRef, name: str) -> tuple[ClassRef, MethodFact | AttrFact] | None:
        """The first class on ``ref``'s MRO that defines ``name`` (a method, or an attribute with
        a value; annotation-only names define nothing), with its fact; None if none does."""
        for entry in self.mro(ref).entries:
            if not isinstance(entry, ClassRef):
                continue
            c = self.cls(entry)
            if c is None:
                continue
            if name in c.methods:
                return entry, c.methods[name]
            a = c.attrs.get(name)
            if a is not None and a.has_value:
                return entry, a
        return None

    def is_subclass(self, ref: ClassRef, base: ClassRef | str) -> bool:
        """True when ``base`` (a ClassRef, or a class name) is on ``ref``'s MRO."""
        for e in self.mro(ref).entries:
            if isinstance(e, ClassRef):
                if (isinstance(base, ClassRef) and e.module == base.module and e.qualname == base.qualname) or (
                    isinstance(base, str) and e.name == base
                ):
                    return True
        return False


def _c3_merge(seqs: list[list]) -> tuple[list, str | None]:
    seqs = [list(s) for s in seqs if s]
    out: list = []
    while True:
        seqs = [s for s in seqs if s]
        if not seqs:
            return out, None
        for s in seqs:
            head = s[0]
            if not any(head in t[1:] for t in seqs):
                break
        else:
            names = ", ".join(getattr(s[0], "dotted", str(s[0])) for s in seqs)
            return out, f"Cannot create a consistent method resolution order (MRO) for bases {names}"
        out.append(head)
        for s in seqs:
            if s and s[0] == head:
                del s[0]
