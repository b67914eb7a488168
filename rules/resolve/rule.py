"""EA300 ``resolve``: the target's class cannot be resolved, or the index cannot follow a change
made to the members of a class on its MRO (or on its holder model's)."""

from __future__ import annotations

from typing import Iterator

from auditor.index.imports import import_failures
from auditor.index.targets import ClassRef
from auditor.model.findings import Finding, Severity
from auditor.model.options import METHODS
from rules.base import AuditTarget, Context, Example, Rule

_PATCHED = '''
from vllm.model_executor.models.llama import LlamaForCausalLM


def _forward(self, *args, **kwargs):
    return None


class PatchedForCausalLM(LlamaForCausalLM):
    pass


PatchedForCausalLM.forward = _forward
'''

_PATCHED_SGLANG = '''
from sglang.srt.models.llama import LlamaForCausalLM


def _forward(self, *args, **kwargs):
    return None


class PatchedForCausalLM(LlamaForCausalLM):
    pass


PatchedForCausalLM.forward = _forward

EntryClass = PatchedForCausalLM
'''


class ResolveRule(Rule):
    """The target's class and the members the gates read can be followed statically.

    What it does: reports, as ``unknown``, a registry row whose class does not resolve in the
    tree (the gates are then not evaluated), and each change to the members of the classes on
    the target's C3 MRO and on its holder model's that the index cannot follow
    (``Cls.forward = other`` after the class, ``setattr(Cls, name, value)``).
    """

    CODE = "EA300"
    GATE = "resolve"
    NAME = "target-not-followable"
    SUMMARY = ("the target's class does not resolve, or a member on its MRO is changed by a construct static "
               "analysis cannot follow: the gates that read it are not decided")
    WHY = (
        "Every gate reads the target's class and the classes of its MRO from the tree. A registry row "
        "that names a class the tree does not define, or a method replaced after the class "
        "(Cls.forward = other, setattr(Cls, ...)), leaves the gates that read it undecided."
    )
    HOW_TO_FIX = (
        "Make the registry row name a class the tree defines, and define the members in the class "
        "body instead of assigning them afterwards."
    )
    BLOCKING = False
    METHODS = METHODS
    ENGINES = ("vllm", "sglang")
    #: the scan runs this rule even when the target's class does not resolve (and only it)
    UNRESOLVED = True
    VALID = [Example({}, "LlamaForCausalLM", engine="vllm"), Example({}, "LlamaForCausalLM", engine="sglang")]
    INVALID = [Example({"vllm/model_executor/models/patched.py": _PATCHED}, "PatchedForCausalLM",
                       expect_severity=Severity.UNKNOWN, note="forward replaced after the class", engine="vllm"),
               Example({"sglang/srt/models/patched.py": _PATCHED_SGLANG}, "PatchedForCausalLM",
                       expect_severity=Severity.UNKNOWN, note="forward replaced after the class", engine="sglang")]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        facts = target.facts
        if facts.ref is None:
            e = ctx.registry.entries[target.architecture]
            yield self.finding(Severity.UNKNOWN,
                               f"cannot resolve the class of {target.architecture}: {facts.unresolved.reason}",
                               getattr(e, "path", None) or ctx.registry.path, e.line)
            return
        yield from self.unfollowable(ctx, facts.ref, target.holder)

    def unfollowable(self, ctx: Context, ref: ClassRef, holder: str | None, elsewhere: bool = False
                     ) -> Iterator[Finding]:
        """``unknown`` findings for the changes the index cannot follow to the methods of the
        classes on ``ref``'s MRO and on its ``holder`` model's (dotted name, or None); with
        ``elsewhere``, also those made by other modules of the tree and by module-level functions
        (:meth:`auditor.index.resolve.Resolver.changes_from_elsewhere`: the scan asks for them
        only when the verdict is otherwise supported, as the search reads the whole tree)."""
        refs = [ref]
        if holder and "." in holder:
            mod, _, name = holder.rpartition(".")
            h = ctx.resolver.resolve_name(mod, name) if ctx.resolver.tree.has_module(mod) else None
            if isinstance(h, ClassRef) and h != ref:
                refs.append(h)
        seen: set = set()
        for r in refs:
            for cls, member, construct, path, line in ctx.resolver.unfollowable_members(r, elsewhere):
                if (path, line) in seen:
                    continue
                seen.add((path, line))
                what = ("its members" if member == "*" else f"the name {cls.name} in {cls.module}"
                        if member == cls.name else f"{cls.name}.{member}")
                yield self.finding(Severity.UNKNOWN,
                                   f"{what} changed by `{construct}` at {path}:{line}, which static analysis cannot "
                                   "follow: the gates that read it are not decided", path, line)
        if elsewhere:
            for r in refs:
                for path, line, why in import_failures(ctx.resolver, r):
                    if (path, line) in seen:
                        continue
                    seen.add((path, line))
                    yield self.finding(Severity.UNKNOWN, f"{why}: the engine cannot load {ref.name} from it, so "
                                       "the gates are not decided", path, line)
            yield from self.unread(ctx)

    def unread(self, ctx: Context) -> Iterator[Finding]:
        """One ``unknown`` finding when the tree holds code Python may run that the analysis
        cannot read (:meth:`auditor.index.tree.Tree.unread_code`: a folder linked from outside the
        tree, a compiled module that Python imports instead of its source): a change made there
        (a registry entry re-pointed, a member replaced) cannot be searched, so a verdict that is
        otherwise supported is not decided. It names the first three."""
        unread = ctx.resolver.tree.unread_code()
        if not unread:
            return
        items = sorted(unread.items())
        shown = "; ".join(f"{p}: {why}" for p, why in items[:3]) + (f"; and {len(items) - 3} more" if len(items) > 3
                                                                     else "")
        yield self.finding(Severity.UNKNOWN, f"the tree holds code that Python may run but the analysis cannot read "
                           f"({shown}): a change it makes to the target or the registry cannot be searched, so the "
                           "gates are not decided", items[0][0], None)
