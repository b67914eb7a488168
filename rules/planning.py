"""Fix planning shared by every gate: codemod invocations, what cannot be fixed, the planner.

Each gate's own planner lives in ``rules/<gate>/planner.py`` as ``plan(planner, result, finding)``;
:class:`Planner` dispatches to them through the table ``rules.registry.PLANNERS``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from auditor.index.targets import ClassRef
from auditor.model.findings import Finding, Severity
from auditor.model.results import TargetResult
from rules.base import Context


@dataclass
class Invocation:
    """One codemod run: ``codemod`` name, the file ``path`` it edits, its ``params``, the gate
    it fixes, the architectures it serves, and (once applied) the ``changes`` it made."""

    codemod: str
    gate: str
    path: str
    params: dict
    architectures: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)

    def key(self) -> tuple:
        p = self.params
        return (self.codemod, self.path, p.get("class") or p.get("class_name") or p.get("function") or "")

    def merge(self, other: "Invocation", merge_params: Callable[[dict, dict], None]) -> None:
        """Fold ``other`` (the same codemod at the same place) into this invocation: its
        architectures, and its parameters as the codemod's ``merge_params`` says
        (:meth:`rules.cst.EagleCodemod.merge_params`)."""
        for a in other.architectures:
            if a not in self.architectures:
                self.architectures.append(a)
        merge_params(self.params, other.params)

    def as_dict(self) -> dict:
        return {
            "codemod": self.codemod, "gate": self.gate, "path": self.path, "params": self.params,
            "architectures": self.architectures, "changes": self.changes,
        }


@dataclass
class Unfixable:
    """A gate the tool will not fix automatically: why, and what to add by hand; ``codemod``: the
    codemod that was planned and refused (or left out of a replayed file), None when planning
    itself found no patch to make."""

    architecture: str
    gate: str
    reason: str
    hint: str = ""
    path: str | None = None
    line: int | None = None
    codemod: str | None = None

    def text(self) -> str:
        where = f" ({self.path}:{self.line})" if self.path and self.line else (f" ({self.path})" if self.path else "")
        hint = f" — to fix by hand: {self.hint}" if self.hint else ""
        return f"{self.architecture}: {self.gate}{where}: {self.reason}{hint}"


def module_params(ref: ClassRef, path: str) -> dict:
    """The codemod parameters that name the module of ``ref`` (defined at ``path``)."""
    return {"module": ref.module, "is_package": path.endswith("/__init__.py")}



#: Gate id → the rule's ``HOW_TO_FIX`` (of the first rule in report order with that gate), the hint
#: of a gate no codemod fixes. Filled by :mod:`rules.registry` when it builds its table, so that this
#: module, which the planners import, never imports the registry (no import cycle).
HOW_TO_FIX: dict[str, str] = {}


class Planner:
    """Maps findings to codemod invocations for one (possibly patched) tree.

    Args:
        ctx: the tree's rule context (resolver, registry, facts).
        method: the speculative method being fixed.
        planners: gate id → ``plan(planner, result, finding)`` (``rules.registry.PLANNERS``).
        only: codemod names allowed (a replayed codemods file); None allows all.
        codemods: codemod name → its class (``rules.registry.codemod_class``), whose
            ``merge_params`` folds two invocations at the same place; None: the first stands.
    """

    def __init__(self, ctx: Context, method: str, planners: dict[str, Callable], only: set[str] | None = None,
                 codemods: Callable[[str], type] | None = None):
        self.ctx = ctx
        self.r = ctx.resolver
        self.registry = ctx.registry
        self.facts = ctx.facts
        self.source = ctx.resolver.tree.source
        self.planners = planners
        self.method = method
        self.only = only
        self.codemods = codemods
        self.invocations: dict[tuple, Invocation] = {}
        self.unfixable: list[Unfixable] = []
        self.explicit_setter: set[str] = set()  # targets whose planned interface writes the setter
        self.notes: list[str] = []  # what a planned change also does, said in the fix report

    def add(self, inv: Invocation) -> None:
        """Plan ``inv`` (merged with an earlier invocation of the same codemod at the same place)."""
        if self.only is not None and inv.codemod not in self.only:
            self.unfixable.append(Unfixable(inv.architectures[0], inv.gate,
                                            f"the codemods file does not include the {inv.codemod} codemod",
                                            codemod=inv.codemod))
            return
        k = inv.key()
        if k in self.invocations:
            merge = self.codemods(inv.codemod).merge_params if self.codemods else (lambda a, b: None)
            self.invocations[k].merge(inv, merge)
        else:
            self.invocations[k] = inv

    def note(self, text: str) -> None:
        """Record something the user must know about a planned change (once)."""
        if text not in self.notes:
            self.notes.append(text)

    def no(self, arch: str, f: Finding, reason: str, hint: str = "") -> None:
        """Record that the gate of ``f`` cannot be fixed automatically for ``arch``: why, and what to do by hand."""
        self.unfixable.append(Unfixable(arch, f.gate, reason, hint, f.path, f.line))

    def plan(self, result: TargetResult) -> None:
        """Plan a fix for every blocking finding of ``result`` (by the gate's planner)."""
        arch = result.architecture
        for f in result.findings:
            if f.severity is Severity.UNKNOWN:
                self.no(arch, f, f"the verdict is unknown, so there is nothing safe to change: {f.message}")
                continue
            if f.severity is not Severity.ERROR:
                continue
            handler = self.planners.get(f.gate)
            if handler is None:
                hint = HOW_TO_FIX.get(f.gate, "")
                self.no(arch, f, f"no codemod exists for gate {f.gate}: {f.message}", hint)
                continue
            handler(self, result, f)


def code_holder(p: "Planner", ref):
    """The class whose body holds ``ref``'s code: the nearest class of ``ref``'s C3 MRO whose body
    is not empty (``ref`` itself when every class found is empty, as for an unresolved chain).

    Args:
        p: the planner (its resolver ``p.r`` is used).
        ref: an ``auditor.index.targets.ClassRef``.
    Returns:
        A ``ClassRef``: where a codemod adds members the class lacks."""
    from auditor.index.targets import ClassRef

    for e in p.r.mro(ref).entries:
        if isinstance(e, ClassRef):
            c = p.r.cls(e)
            if c is not None and not c.empty:
                return e
    return ref
