"""Rendering of ``verify`` reports (table, JSON). No analysis here.

The engine's messages and the tree's names pass through :func:`auditor.render.text.clean`
and rich's escape before they reach a terminal.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from auditor.render.text import clean

if TYPE_CHECKING:
    from rich.console import Console

    from auditor.orchestration.verify import VerifyReport, VerifyResult

_STYLE = {"proven": "green", "refused": "red", "broken": "red", "not-lossless": "red", "wrong-capture": "red",
          "inconclusive": "yellow", "platform-limit": "yellow", "crashed": "red", "timeout": "red", "unknown": "yellow"}


def verify_json(report: VerifyReport) -> str:
    """The report as JSON (``engine``, ``settings``, ``results``, ``summary``)."""
    return json.dumps(report.as_dict(), indent=2) + "\n"


def engine_cell(r: VerifyResult) -> str:
    """What the engine did, in a few words (``refused: RuntimeError → interface``)."""
    if r.outcome == "refused" and r.exception:
        return f"refused: {r.exception.get('type')} → {r.exception.get('gate')}"
    if r.outcome == "broken" and r.exception:
        return f"broken without speculation: {r.exception.get('type')} → {r.exception.get('gate')}"
    return r.outcome


def _aux_cell(r: VerifyResult) -> str:
    if r.aux_layers is None:
        return "—"
    matched = ", ".join("/".join(map(str, hits)) or "none" for hits in (r.aux_matches or []))
    return f"{r.aux_layers} → entering [{matched}]"


def _ids_cell(r: VerifyResult) -> str:
    if r.ids_equal is None:
        return "—"
    if r.ids_equal:
        return "equal"
    d = r.divergence or {}
    return f"differ at {d.get('prompt')}:{d.get('position')} (margin {d.get('margin')})"


def verify_table(report: VerifyReport, console: Console) -> None:
    """Print the report: one row per target (scan verdict, what the engine did, the aux layers and
    the layer boundaries their states match, token ids, accepted drafts, wall time), then one line
    per target that did not prove, with the engine's exception, its ``file:line`` and gate. Under
    :data:`NARROW` columns the rows are blocks of labelled lines, wrapped between words."""
    from rich.markup import escape
    from rich.table import Table

    e = report.engine
    console.print(escape(clean(f"{e.get('distribution')} {e.get('version')} — {e.get('python')} ({e.get('how')})"
                               f"{', CPU backend' if e.get('cpu') else ''}")), highlight=False,
                  soft_wrap=console.width >= NARROW)
    if console.width < NARROW:
        _narrow(report, console)
    else:
        t = Table()
        _wide(report, t)
        console.print(t)
    _after_table(report, console)


#: below this many columns the results are a list of targets, not a table (a table would cut
#: the architecture names and the engine cells)
NARROW = 110


def _narrow(report, console) -> None:
    """One block per target, each line wrapped between words at the console's width."""
    from rich.markup import escape

    for r in report.results:
        scan = r.scan_verdict + (f": {', '.join(r.scan_blocking)}" if r.scan_blocking else "")
        accepted = "—" if r.accepted is None else f"{r.accepted}/{r.draft_tokens}" if r.draft_tokens else str(r.accepted)
        agrees = {True: "yes", False: "NO", None: "—"}[r.agrees]
        wall = r.times.get("wall_s")
        style = _STYLE.get(r.outcome, "")
        console.print(escape(clean(r.architecture)), highlight=False, soft_wrap=False)
        console.print(f"  engine: [{style}]{escape(clean(engine_cell(r)))}[/]; agrees with scan: {agrees}",
                      highlight=False, soft_wrap=False)
        for label, value in (("scan", scan), ("aux layers", _aux_cell(r)), ("token ids", _ids_cell(r)),
                             ("accepted", accepted), ("time", f"{wall:.0f} s" if wall else "—")):
            console.print(f"  {label}: {escape(clean(value))}", highlight=False, soft_wrap=False)


def _wide(report, t) -> None:
    """The results table (one row per target)."""
    from rich.markup import escape

    for col, kw in (("architecture", {"no_wrap": True}), ("scan", {}), ("engine", {}), ("agrees", {}),
                    ("aux layers", {}), ("token ids", {}), ("accepted", {}), ("time", {"justify": "right"})):
        t.add_column(col, **kw)
    for r in report.results:
        scan = r.scan_verdict + (f": {', '.join(r.scan_blocking)}" if r.scan_blocking else "")
        style = _STYLE.get(r.outcome, "")
        accepted = "—" if r.accepted is None else f"{r.accepted}/{r.draft_tokens}" if r.draft_tokens else str(r.accepted)
        agrees = {True: "yes", False: "NO", None: "—"}[r.agrees]
        wall = r.times.get("wall_s")
        t.add_row(escape(clean(r.architecture)), escape(clean(scan)), f"[{style}]{escape(clean(engine_cell(r)))}[/]",
                  agrees, escape(_aux_cell(r)), escape(_ids_cell(r)), accepted, f"{wall:.0f} s" if wall else "—")


def _after_table(report, console) -> None:
    """The line per target that did not prove (its exception, ``file:line`` and gate) and the summary."""
    from rich.markup import escape

    for r in report.results:
        if r.outcome == "proven":
            continue
        parts = [f"{r.architecture}: {r.outcome}"]
        reason = r.reason
        if r.exception and reason.startswith("EAGLE-3 refused: "):
            # the exception part below says the type and the gate: keep only what the reason adds
            reason = reason.split("; ", 1)[1] if "; " in reason else ""
        if reason:
            parts.append(reason)
        if r.exception:
            x = r.exception
            parts.append(f"{x.get('type')} at {x.get('where')} ({x.get('function')}), gate {x.get('gate')}: "
                         f"{x.get('message', '')[:300]}")
        # whole on a wide console (one line to grep); wrapped between words on a narrow one
        console.print(escape(clean(" — ".join(parts))), highlight=False, soft_wrap=console.width >= NARROW)
    summary = report.as_dict()["summary"]
    console.print(", ".join(f"{n} {o}" for o, n in summary.items() if n) or "no target", highlight=False)
    if summary.get("proven"):
        s = report.settings
        run = ", ".join(str(x) for x in (f"{s['num_speculative_tokens']} speculative tokens"
                                         if s.get("num_speculative_tokens") else None, s.get("dtype")) if x)
        console.print(escape(
            f"proven means: the engine started EAGLE-3{f' ({run})' if run else ''} on the target with dummy "
            "weights and a shrunk config; its greedy token ids equal those of the same run without speculation; "
            "the drafter was fed the hidden states entering the aux layers shown; and some drafts were accepted, "
            "so the accept path ran (with dummy weights most drafts are rejected: a low count is expected)"),
            highlight=False, soft_wrap=console.width >= NARROW)
