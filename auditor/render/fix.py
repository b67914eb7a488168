"""Rendering of a ``fix`` (:class:`auditor.orchestration.fix.FixResult`) as text: the account of
verdicts before and after, the codemods' changes and what is not auto-fixable, and the size of the
patch. No planning here; the diff and the codemods file are the result's own data."""

from __future__ import annotations

from typing import TYPE_CHECKING

from auditor.model.findings import Severity, Verdict
from auditor.model.wording import count, one_line

if TYPE_CHECKING:
    from auditor.orchestration.fix import FixResult


def fix_report(result: FixResult) -> str:
    """A plain-text account of ``result``: verdicts before → after, each codemod's changes, what is
    not auto-fixable and why, and what still fails (each reason said once: a gate explained as
    not auto-fixable is not explained again).

    Returns:
        The lines, joined by newlines; a name read from the tree never starts a line of its own.
    """
    from auditor.engines.catalog import engine_for  # here: importing the engines costs every command

    name = engine_for(result.engine).display
    lines = [f"eagle-audit fix: {result.source} ({name} {result.release or '?'}), method {result.method}"]
    after = {r.architecture: r for r in result.after}
    for r in result.before:
        b = r.verdict.value + (f" ({', '.join(r.blocking)})" if r.blocking else "")
        a = after.get(r.architecture)
        if r.verdict is Verdict.SUPPORTED and (a is None or a.verdict is Verdict.SUPPORTED):
            lines.append(f"  {r.architecture}: already supported, nothing to patch")
        elif result.already_supported or a is None:
            lines.append(f"  {r.architecture}: {b}")
        elif not result.patched:  # no codemod changed a file: there is no "after the patch"
            lines.append(f"  {r.architecture}: {b}; no codemod applies, nothing was patched")
        elif a.verdict is r.verdict and a.blocking == r.blocking:
            lines.append(f"  {r.architecture}: {b}, unchanged by the patch")
        else:
            at = a.verdict.value + (f" ({', '.join(a.blocking)})" if a.blocking else "")
            lines.append(f"  {r.architecture}: {b} -> {at} after the patch")
    if result.invocations:
        lines.append("codemods:")
        for inv in result.invocations:
            for c in inv.changes:
                lines.append(f"  [{inv.codemod}] {inv.path}: {c}")
    for n in result.notes:
        lines.append(f"warning: {n}")
    for p in result.problems:
        lines.append(f"validation: {p}")
    if result.ok and result.patched:
        evaluated, skipped = result.scope()
        lines.append(f"scope: the patch makes the gates evaluated for this run pass ({', '.join(evaluated)}), "
                     "as re-scanned; the re-scan is a check, not a run of the engine")
        if skipped:
            lines.append("not evaluated for this run (neither checked nor passed): "
                         + "; ".join(f"{g} ({why})" for g, why in skipped.items()))
    if result.unfixable:
        lines.append("not auto-fixable:")
        seen = set()
        for u in result.unfixable:
            t = u.text()
            if t not in seen:
                seen.add(t)
                lines.append(f"  {t}")
    if result.after and not result.ok:
        # each reason once: a gate "not auto-fixable" above already says why; unpatched, the
        # per-target line above already names the gates
        explained = {(u.architecture, u.gate) for u in result.unfixable}
        for arch, gates in result.still_failing.items():
            details = [f for f in next(r for r in result.after if r.architecture == arch).findings
                       if f.severity in (Severity.ERROR, Severity.UNKNOWN) and (arch, f.gate) not in explained]
            if not result.patched and not details:
                continue
            what = "still failing after the codemods" if result.patched else "still failing (no codemod applies)"
            shown = [g + (" (not auto-fixable, above)" if (arch, g) in explained else "") for g in gates]
            lines.append(f"{what}: {arch}: {', '.join(shown)}")
            for f in details:
                line = result.original_line(f.path, f.line)
                where = f"{f.path}:{line}" if f.path and line else f.where
                lines.append(f"  {f.gate} {where}: {f.message}")
    return "\n".join(one_line(x) for x in lines)  # a name from the tree never starts a line of its own


def diffstat(result: FixResult) -> str:
    """The size of ``result``'s patch, as ``git diff --stat`` sums it up: ``2 files changed, 14
    insertions(+), 1 deletion(-)``."""
    adds = dels = 0
    for line in result.diff().splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            adds += 1
        elif line.startswith("-") and not line.startswith("---"):
            dels += 1
    return (f"{count(len(result.patched), 'file')} changed, {count(adds, 'insertion')}(+), "
            f"{count(dels, 'deletion')}(-)")
