"""The Markdown of a gate and a matrix report, and the rich tables that ``--format table`` prints
for them (the SARIF and JUnit forms are in :mod:`auditor.render.ci_formats`)."""

from __future__ import annotations

from auditor.model.outcomes import ReleaseVerdict, UpgradeOutcome
from auditor.render.text import (clean, lines_kept_whole, markdown_text, optional_value, patch_words, print_wrapped,
                                 wrap_message)


def _outcome_word(outcome) -> str:
    """The outcome as the Markdown heading shows it (broken in capitals)."""
    return outcome.value.upper() if outcome is UpgradeOutcome.BROKEN else outcome.value


def _md(text: object) -> str:
    """Text from input made inert in Markdown (see :func:`auditor.render.text.markdown_text`)."""
    return markdown_text(text)


def _gate_heading(report) -> str:
    """The outcome a gate report's heading names: a locally patched tree supports its targets
    "as is" (not natively), so the heading and the cells say the same."""
    if not report.candidate.patched_locally:
        return _outcome_word(report.outcome)
    word = "as is" if report.outcome is UpgradeOutcome.NATIVE else _outcome_word(report.outcome)
    return word + " (a locally patched tree)"


def gate_markdown(report) -> str:
    """A gate report as GitHub-flavoured Markdown (for a job summary): the outcome, a table of
    targets, then the problems, regressions and warnings."""
    patched_tree = report.candidate.patched_locally
    outcome = _gate_heading(report)
    lines = [f"## eagle-audit gate: {outcome}", "", _md(report.message()), ""]
    sides = [f"candidate: **{_md(report.candidate.described)}** (`{_md(report.candidate.source)}`)"]
    if report.current:
        sides.append(f"current: {_md(report.current.described)} (`{_md(report.current.source)}`)")
    if report.codemods:
        written = f", written for {report.codemods_source}" if report.codemods_source else ""
        sides.append(f"codemods: `{_md(report.codemods.name)}` ({_md(', '.join(report.codemods_names) + written)})")
    lines += [" · ".join(sides), ""]
    lines += ["| target | method | current | candidate | with codemods | outcome |", "|---|---|---|---|---|---|"]
    for t in report.targets:
        cand = t.candidate_verdict.value + (f" ({', '.join(t.candidate.blocking)})" if t.candidate and t.candidate.blocking else "")
        patched = optional_value(t.patched_verdict) or "—"
        if t.patched and t.patched.blocking:
            patched += f" ({', '.join(t.patched.blocking)})"
        if t.regression:  # the candidate is where it regressed
            cand += " — regression (supported by the current side)"
        word = "as is" if patched_tree and t.outcome is UpgradeOutcome.NATIVE else t.outcome.value
        current = optional_value(t.current_verdict) or "—"
        lines.append(f"| {_md(t.architecture)} | {_md(t.method)} | {current} | {_md(cand)} | "
                     f"{_md(patched)} | **{word}** |")
    problems = [(t, p) for t in report.targets for p in t.problems]
    if problems:
        lines += ["", "### Why it is broken", ""]
        for t, p in problems:
            cm = ("" if not p.codemod else f" (codemod `{_md(p.codemod)}`)" if report.codemods
                  else " (a codemod fixes it)")
            where = f" `{_md(p.where)}`" if p.where else ""
            hint = f" — {_md(p.hint)}" if p.hint else ""
            lines.append(f"- **{_md(t.architecture)}** `{_md(p.gate)}`{cm}{where}: {_md(p.reason)}{hint}")
    if report.regressions:
        lines += ["", "### Regressions", ""]
        for t in report.regressions:
            lines.append(f"- **{_md(t.architecture)}** ({_md(t.method)}): supported by "
                         f"{_md(report.current.described)}, {t.candidate_verdict.value} in "
                         f"{_md(report.candidate.described)}")
    warned = [(t, f) for t in report.targets for f in t.warnings]
    if warned:
        lines += ["", "### Warnings", ""]
        for t, f in warned:
            lines.append(f"- **{_md(t.architecture)}** `{_md(f.gate)}` ({_md(f.rule)}) `{_md(f.where)}`: "
                         f"{_md(f.message)}")
    if report.next_steps:
        lines += ["", "### Next step", ""]
        for step in report.next_steps:
            command, _, note = step.partition("  (")
            lines.append(f"- {_md(command)}" + (f" ({_md(note)}" if note else ""))
    return clean("\n".join(lines), multiline=True) + "\n"


def _cell(row) -> str:
    """A matrix cell: the verdict, with the blocking gates or the warnings."""
    if row.verdict is ReleaseVerdict.BLOCKED:
        return f"blocked, {patch_words(row.fix_available)}: {', '.join(row.blocking)}"
    if row.verdict is ReleaseVerdict.SUPPORTED:
        w = f" (warnings: {', '.join(dict.fromkeys(row.warnings))})" if row.warnings else ""
        return (f"**supported** ← first native{w}" if row.first_native else f"supported{w}")
    return row.verdict.value


def matrix_legend(report) -> str | None:
    """What the two kinds of blocked cell of a matrix mean, with the ``fix`` command of the run
    (None when no cell is blocked)."""
    rows = [r for r in report.rows if r.verdict is ReleaseVerdict.BLOCKED]
    if not rows:
        return None
    return (f"blocked, {patch_words(True)}: eagle-audit fix patches every blocking gate in that release; blocked, "
            f"{patch_words(False)}: some gate of it cannot be patched there (its release lacks what the fix "
            "needs, or no codemod exists)")


def matrix_markdown(report) -> str:
    """A matrix report (:class:`auditor.orchestration.matrix.MatrixReport`) as Markdown: one row per release,
    one column per architecture (verdict and blocking gates); the first of the releases listed
    with native support is in bold (said so: "among the releases listed"); skipped releases are listed with the reason below the table."""
    archs = report.architectures
    run = report.run_options.describe() if getattr(report, "run_options", None) else ""
    engine = {"vllm": "vLLM", "sglang": "SGLang"}.get(getattr(report, "engine", "vllm"), "vLLM")
    lines = [f"## eagle-audit matrix: {_md(', '.join(report.model))} ({_md(report.method)}"
             f"{', ' + _md(run) if run else ''}), {engine} {_md(report.versions)}", ""]
    lines.append(f"| {engine} | " + " | ".join(_md(a) for a in archs) + " |")
    lines.append("|---" * (len(archs) + 1) + "|")
    by = {(r.release, r.architecture): r for r in report.rows}
    for v in report.releases:
        cells = [_md(_cell(by[(v, a)])) if (v, a) in by else "—" for a in archs]
        first = any(by.get((v, a)) is not None and by[(v, a)].first_native for a in archs)
        lines.append(f"| {'**' + _md(v) + '**' if first else _md(v)} | " + " | ".join(cells) + " |")
    lines.append("")
    legend = matrix_legend(report)
    if legend:
        lines += [_md(legend), ""]
    for a, v in report.first_supported.items():
        lines.append(f"- first with native support for {_md(a)}, among the releases listed: {_md(v or 'none of them')}")
    if len(archs) > 1:
        lines.append(f"- first with native support for all, among the releases listed: "
                     f"{_md(report.first_all_supported or 'none of them')}")
    skipped: dict[str, str] = {}
    for r in report.rows:
        if r.verdict is ReleaseVerdict.SKIPPED:
            skipped.setdefault(r.release, r.reason)
    for v, why in skipped.items():
        lines.append(f"- skipped {_md(v)}: {_md(why)}")
    return clean("\n".join(lines), multiline=True) + "\n"


# -- the same reports as rich tables (``--format table``) --------------------------------------


def _verdict_text(verdict: str, gates: list[str] | tuple[str, ...] = ()):
    """A verdict cell: the verdict in its colour, then each gate on a line of its own (a gate id
    is never cut)."""
    from rich.text import Text

    style = {"supported": "green", "blocked": "red", "unknown": "yellow"}.get(verdict, "")
    t = Text(verdict, style=style)
    for g in gates:
        t.append(f"\n{g}")
    return t


def gate_table(report, console) -> None:
    """Print a gate report (:class:`auditor.orchestration.upgrade_results.UpgradeReport`) as
    ``--format table`` shows it: the outcome and what it means, the sides compared, a rich table
    of targets (current, candidate and patched verdicts with their blocking gates, the outcome;
    the current and patched columns only when some target has one) when it fits the console
    with every name and gate id whole, else a block of labelled lines per target (never a name
    cut), then why it is broken, the regressions and the warnings. The same content as :func:`gate_markdown`."""
    from rich.table import Table
    from rich.text import Text

    patched_tree = report.candidate.patched_locally
    outcome = _gate_heading(report)
    head = Text("eagle-audit gate: ", style="bold")
    head.append(outcome, style={"broken": "red", "patched": "yellow"}.get(report.outcome.value, "green") + " bold")
    console.print(head)
    print_wrapped(console, Text(clean(report.message())), indent=0, hanging=2)
    print_wrapped(console, Text(clean(f"candidate: {report.candidate.described} ({report.candidate.source})")),
                  indent=0, hanging=2)
    if report.current:
        print_wrapped(console, Text(clean(f"current: {report.current.described} ({report.current.source})")),
                      indent=0, hanging=2)
    if report.codemods:
        written = f", written for {report.codemods_source}" if report.codemods_source else ""
        print_wrapped(console, Text(clean(f"codemods: {report.codemods.name} ({', '.join(report.codemods_names)}"
                                          f"{written})")), indent=0, hanging=2)
    # a column that would say "—" on every row (no current tree, no codemods) is left out; the
    # table is printed when it fits the console with every name whole, else a block per target
    show_current = any(t.current_verdict for t in report.targets)
    show_patched = any(t.patched_verdict for t in report.targets)
    names = [clean(t.architecture) for t in report.targets]
    table = Table()
    table.add_column("target", no_wrap=True)
    table.add_column("method", no_wrap=True)
    if show_current:
        table.add_column("current", no_wrap=True)
    table.add_column("candidate", no_wrap=True)
    if show_patched:
        table.add_column("with codemods", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    blocks = []
    for t, name in zip(report.targets, names):
        cells = [Text(name), t.method]
        lines = []
        if show_current:
            cells.append(_verdict_text(t.current_verdict.value) if t.current_verdict else Text("—"))
            lines.append(("current", t.current_verdict.value if t.current_verdict else "—", ()))
        cand = _verdict_text(t.candidate_verdict.value, t.candidate.blocking if t.candidate else ())
        if t.regression:
            cand.append("\nregression", style="red")
        cells.append(cand)
        lines.append(("candidate", t.candidate_verdict.value + (", a regression" if t.regression else ""),
                      t.candidate.blocking if t.candidate else ()))
        if show_patched:
            cells.append(_verdict_text(t.patched_verdict.value, t.patched.blocking if t.patched else ())
                         if t.patched_verdict else Text("—"))
            lines.append(("with codemods", t.patched_verdict.value if t.patched_verdict else "—",
                          t.patched.blocking if t.patched and t.patched_verdict else ()))
        word = "as is" if patched_tree and t.outcome is UpgradeOutcome.NATIVE else t.outcome.value
        table.add_row(*cells, Text(word, style="bold"))
        blocks.append((name, t.method, word, lines))
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update_width(1 << 20), table).maximum
    if natural <= console.width:
        console.print(table)
    else:  # too narrow for whole names: one block of labelled lines per target
        for name, method, word, lines in blocks:
            print_wrapped(console, [Text(name + ":", style="bold"), Text(f"{method},"), Text(word, style="bold")],
                          indent=0, hanging=2)
            for label, verdict, gates in lines:
                style = {"supported": "green", "blocked": "red", "unknown": "yellow"}.get(verdict.split(",")[0], "")
                pieces = [Text(f"{label}:"), Text(verdict + (":" if gates else ""), style=style)]
                pieces += [Text(g + ("," if i < len(gates) - 1 else "")) for i, g in enumerate(gates)]
                print_wrapped(console, pieces, indent=2, hanging=4)
    problems = [(t, p) for t in report.targets for p in t.problems]
    if problems:
        console.print("why it is broken:", style="bold")
        for t, p in problems:
            cm = ("" if not p.codemod else f" (codemod {p.codemod})" if report.codemods
                  else " (a codemod fixes it)")  # that none were given: said once, by the next step
            where = f" {p.where}" if p.where else ""
            hint = f" — {p.hint}" if p.hint else ""
            print_wrapped(console, Text(clean(f"{t.architecture} {p.gate}{cm}{where}: {p.reason}{hint}")))
    if report.regressions:
        console.print("regressions:", style="bold")
        for t in report.regressions:
            print_wrapped(console, Text(clean(f"{t.architecture} ({t.method}): supported by "
                                              f"{report.current.described}, {t.candidate_verdict.value} in "
                                              f"{report.candidate.described}")))
    warned = [(t, f) for t in report.targets for f in t.warnings]
    if warned:
        console.print("warnings:", style="bold")
        for t, f in warned:
            print_wrapped(console, Text(clean(f"{t.architecture} {f.gate} ({f.rule}) {f.where}: {f.message}")))
    for step in report.next_steps:
        console.print("next step:", style="bold")
        width = None if lines_kept_whole(console) else console.width
        for line in wrap_message("  " + clean(step), width):  # a command starts a line of its own
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def matrix_table(report, console) -> None:
    """Print a matrix report (:class:`auditor.orchestration.matrix.MatrixReport`) as ``--format
    table`` shows it: a rich table with one row per release and one column per architecture (the
    verdict, then each blocking gate or warning on a line of its own; the first release with
    native support in bold), then the first native release per architecture and the skipped
    releases with the reason. The same content as :func:`matrix_markdown`."""
    from rich.table import Table
    from rich.text import Text

    archs = report.architectures
    run = report.run_options.describe() if getattr(report, "run_options", None) else ""
    engine = {"vllm": "vLLM", "sglang": "SGLang"}.get(getattr(report, "engine", "vllm"), "vLLM")
    title = clean(f"eagle-audit matrix: {', '.join(report.model)} ({report.method}{', ' + run if run else ''}), "
                  f"{engine} {report.versions}")
    table = Table(title=Text(title))
    table.add_column(engine, no_wrap=True)
    for a in archs:
        table.add_column(Text(clean(a)), overflow="fold", min_width=9)
    by = {(r.release, r.architecture): r for r in report.rows}
    for v in report.releases:
        cells = []
        for a in archs:
            row = by.get((v, a))
            if row is None:
                cells.append(Text("—"))
            elif row.verdict is ReleaseVerdict.BLOCKED:
                t = _verdict_text("blocked")
                t.append(f"\n{patch_words(row.fix_available)}", style="italic")
                for g in row.blocking:
                    t.append(f"\n{g}")
                cells.append(t)
            elif row.verdict is ReleaseVerdict.SUPPORTED:
                t = _verdict_text("supported")
                if row.first_native:
                    t.stylize("bold")
                    t.append("\n← first native")
                if row.warnings:
                    t.append("\nwarnings:")
                    for w in dict.fromkeys(row.warnings):
                        t.append(f"\n{w}")
                cells.append(t)
            else:
                cells.append(Text(row.verdict.value, style="dim"))
        first = any(by.get((v, a)) is not None and by[(v, a)].first_native for a in archs)
        table.add_row(Text(v, style="bold" if first else ""), *cells)
    console.print(table)
    legend = matrix_legend(report)
    if legend:
        print_wrapped(console, Text(clean(legend)), indent=0, hanging=2)
    for a, v in report.first_supported.items():
        print_wrapped(console, Text(clean(f"first with native support for {a}, among the releases listed: "
                                          f"{v or 'none of them'}")), indent=0, hanging=2)
    if len(archs) > 1:
        print_wrapped(console, Text("first with native support for all, among the releases listed: "
                                    f"{report.first_all_supported or 'none of them'}"), indent=0, hanging=2)
    skipped: dict[str, str] = {}
    for r in report.rows:
        if r.verdict is ReleaseVerdict.SKIPPED:
            skipped.setdefault(r.release, r.reason)
    for v, why in skipped.items():
        console.print(clean(f"skipped {v}: {why}"), markup=False, highlight=False)
