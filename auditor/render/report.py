"""Rendering of scan reports, the platform differences, comparisons and the cache's usage (table,
JSON, Markdown). No analysis here.

Every string that comes from the scanned tree goes through :func:`auditor.render.text.clean`
before it reaches a terminal or a Markdown document, and through :func:`rich.markup.escape`
where rich would read markup: a tree cannot repaint the screen or restyle the report. The rule
reference is :mod:`auditor.render.rules`, ``explain`` is :mod:`auditor.render.explain`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from auditor.model.results import ScanReport
from auditor.model.wording import count
from auditor.render.text import VERDICT_STYLE, clean, markdown_text, patch_words, print_wrapped

if TYPE_CHECKING:  # rich is imported by the functions that print, so that JSON never loads it
    from rich.console import Console


def scan_table(report: ScanReport, console: Console, verbose: bool = False) -> None:
    """Print a scan: a rich table (architecture, method, verdict, blocking gates, and the
    ``file:line`` of each finding) when the console is wide enough to show it with every name
    and ``file:line`` whole, else the same content as a block per target
    (:func:`_results_blocks`); then each finding under its target (rule, gate, ``file:line``,
    message), then a summary line. A ``role`` column appears when drafters or pooling models are
    shown. In a full
    scan (more than 30 results) without ``verbose``, supported targets without findings,
    drafters, pooling models and warnings are left out of the table."""
    from rich.text import Text

    many = len(report.results) > 30 and not verbose
    shown = []
    for r in report.results:
        findings = [f for f in r.findings if not (many and f.severity.value == "warning")]
        if many and (r.verdict.value == "supported" or r.role != "target") and not findings:
            continue
        shown.append((r, findings))
    from rich.measure import Measurement

    table = _results_table(report, shown, console, where=True)
    natural = Measurement.get(console, console.options.update_width(1 << 20), table).maximum
    if natural > console.width:  # the table would break names or file:line: a block per target
        _results_blocks(report, shown, console)
    else:
        console.print(table)
    for r, findings in shown:
        if r.note:
            note = Text(clean(r.architecture), style="bold")
            note.append(clean(f" ({r.role}): {r.note}"))
            print_wrapped(console, note, indent=0, hanging=2)
        if r.draft_architecture and not many:
            draft = Text(clean(r.architecture), style="bold")
            draft.append(clean(f" ({r.method}): draft {r.draft_architecture} → {r.draft_class or '?'}"))
            print_wrapped(console, draft, indent=0, hanging=2)
        if not findings:
            continue
        heading = Text(clean(r.architecture), style="bold")
        heading.append(clean(f" ({r.method}, {model_types(r)}: {r.model_type_source})"))
        print_wrapped(console, heading, indent=0, hanging=2)
        for f in findings:
            style = {"error": "red", "warning": "yellow", "unknown": "magenta"}[f.severity.value]
            head = [Text(f"{f.rule} {f.gate} {f.severity.value}", style=style), Text(clean(f.where), style="cyan")]
            if f.fix_available:
                head.append(Text("(fix available)", style="dim"))
            print_wrapped(console, head, indent=2, hanging=4)
            print_wrapped(console, Text(clean(f.message)), indent=4, hanging=4)
    if many:
        supported = sorted({r.architecture for r in report.results if r.verdict.value == "supported"})
        print_wrapped(console, Text(f"supported ({len(supported)}): {clean(', '.join(supported) or '-')}"),
                      indent=0, hanging=2)
        print_wrapped(console, Text("(supported targets, drafters, pooling models and warnings are left out of the "
                                    "table in a full scan; --verbose shows all)", style="dim"), indent=0, hanging=1)
    _print_not_checked(report, shown, console)
    print_wrapped(console, Text(summary_line(report)), indent=0, hanging=2)
    if report.transformers:
        print_wrapped(console, Text(clean(f"HF config classes from transformers: {report.transformers['how']}")),
                      indent=0, hanging=2)
    for p, e in sorted(report.parse_errors.items()):
        print_wrapped(console, [Text("does not parse:", style="yellow"), Text(clean(p)), Text(clean(e))],
                      indent=0, hanging=2)
    for line in environment_code_lines(report):
        print_wrapped(console, Text(clean(line), style="yellow"), indent=0, hanging=2)


def environment_code_lines(report: ScanReport) -> list[str]:
    """One warning line per piece of the environment's start-up code outside the tree
    (:attr:`ScanReport.environment_code`): the verdicts assume it changes nothing."""
    return [f"warning: code outside the tree runs when {report.engine} starts in this environment, and the verdicts "
            f"assume it changes nothing: {e['path']}: {e['what']}" for e in report.environment_code]


def not_checked(result, engine: str = "vllm") -> list[str]:
    """What the run did not reach for a target, in the words of the rules (``your drafter
    (--draft-config)``, ``pipeline parallelism (-pp N)``): each gate of ``result.not_evaluated``
    that applies to its method but needs a run option, said once per option, in rule order. Gates
    of other methods are not listed (they are not part of this verdict)."""
    from rules.registry import rule_by_gate

    out: list[str] = []
    if result.role != "target":
        return out
    for gate, why in result.not_evaluated.items():
        try:
            rule = rule_by_gate(gate, engine)
        except KeyError:
            # a gate of another engine the run asks for, not modelled on this one (scan's _unmodelled)
            if "; not modelled on " in why and why not in out:
                out.append(why)
            continue
        # a gate that needs a run option ("needs --draft-config ..."); one that was given but led
        # to no decision (a drafter that is not registered) is that other gate's finding
        if (rule.CHECKED_WITH and result.method in rule.METHODS and why.startswith("needs ")
                and rule.CHECKED_WITH not in out):
            out.append(rule.CHECKED_WITH)
    return out


def _print_not_checked(report: ScanReport, shown: list, console: Console) -> None:
    """The ``not checked`` lines of :func:`scan_table`: once for every target when they all share
    them, else under each target (a bare ``supported`` never hides an unchecked gate)."""
    from rich.text import Text

    per = [(r, not_checked(r, report.engine)) for r, _ in shown if r.role == "target"]
    if not any(items for _, items in per):
        return
    if len(per) > 1 and all(items == per[0][1] for _, items in per):
        print_wrapped(console, Text(f"not checked for any target: {', '.join(per[0][1])}"), indent=0, hanging=2)
        return
    for r, items in per:
        if items:
            head = Text(clean(r.architecture), style="bold")
            head.append(clean(f" ({r.method}, {r.verdict.value}): not checked: {', '.join(items)}"))
            print_wrapped(console, head, indent=0, hanging=2)


def _results_blocks(report: ScanReport, shown: list, console: Console) -> None:
    """The table of :func:`scan_table` on a console too narrow for it: the title, then per target
    a line ``ARCH: method, verdict`` (``ARCH (drafter): method, not audited`` for another role)
    and one indented line per finding, ``gate: file:line`` for a blocking gate (in the order of
    ``blocking``), ``gate (severity): file:line`` for any other. Each line is wrapped between its
    pieces: a name and a ``file:line`` are never cut where they fit the width."""
    from rich.text import Text

    run = run_text(report)
    title = [Text(clean(report.title), style="bold")] + ([Text(f"({run})")] if run else [])
    print_wrapped(console, title + [Text("—"), Text(clean(report.source))], indent=0, hanging=2)
    for r, findings in shown:
        role = f" ({r.role})" if r.role != "target" else ""
        head = [Text(clean(r.architecture) + role + ":", style="bold"),
                Text(f"{r.method},"), Text(_verdict_word(r), style=VERDICT_STYLE[r.verdict.value])]
        print_wrapped(console, head, indent=0, hanging=2)
        errors = [f for f in findings if f.severity.value == "error" and f.gate in r.blocking]
        errors.sort(key=lambda f: r.blocking.index(f.gate))
        for f in errors + [f for f in findings if f not in errors]:
            style = {"error": "red", "warning": "yellow", "unknown": "magenta"}[f.severity.value]
            label = f"{f.gate}:" if f in errors else f"{f.gate} ({f.severity.value}):"
            print_wrapped(console, [Text(label, style=style), Text(clean(f.where or "-"), style="cyan")],
                          indent=2, hanging=4)
        for gate in (g for g in r.blocking if g not in {f.gate for f in errors}):
            print_wrapped(console, Text(f"{gate}: -", style="red"), indent=2, hanging=4)
    console.print()  # the findings follow


def _results_table(report: ScanReport, shown: list, console: Console, where: bool):
    """The table of :func:`scan_table` for the ``shown`` rows (``(result, findings)``), with or
    without the ``where (file:line)`` column."""
    from rich.table import Table
    from rich.text import Text

    title = Text(clean(f"{report.title} — {report.source}"))
    run = run_text(report)
    if run:
        title.append(f" ({run})")
    table = Table(title=title)
    roles = any(r.role != "target" for r, _ in shown)
    rows = [r for r, _ in shown]
    table.add_column("architecture", overflow="fold", min_width=12)
    if roles:
        table.add_column("role", no_wrap=True, min_width=max(len(r.role) for r in rows))
    table.add_column("method", no_wrap=True, min_width=max([len(r.method) for r in rows] + [6]))
    table.add_column("verdict", no_wrap=True, min_width=max([len(_verdict_word(r)) for r in rows] + [7]))
    table.add_column("blocking gates", overflow="fold",
                     min_width=max([len(g) for r in rows for g in r.blocking] + [5]))
    if where:
        table.add_column("where (file:line)", overflow="fold")
    for r, findings in shown:
        cells = [Text(clean(r.architecture))]
        if roles:
            cells.append(Text(r.role, style="" if r.role == "target" else "dim"))
        cells += [r.method, Text(_verdict_word(r), style=VERDICT_STYLE[r.verdict.value]), "\n".join(r.blocking) or "—"]
        if where:
            text = Text()
            # a blocking gate's location sits on the line of its name in "blocking gates" (the
            # name is not repeated); any other finding follows, named with its severity
            errors = [f for f in findings if f.severity.value == "error" and f.gate in r.blocking]
            errors.sort(key=lambda f: r.blocking.index(f.gate))
            for i, f in enumerate(errors + [f for f in findings if f not in errors]):
                style = {"error": "red", "warning": "yellow", "unknown": "magenta"}[f.severity.value]
                if i:
                    text.append("\n")
                if f not in errors:
                    text.append(f"{f.gate} ({f.severity.value}) ", style=style)
                text.append(clean(f.where or "-"), style="cyan")
            cells.append(text if text.plain else "—")
        table.add_row(*cells)
    return table


def _verdict_word(result) -> str:
    """The verdict cell: the verdict of a target, ``not audited`` for a drafter or a pooling model
    (the role column says which)."""
    return "not audited" if result.verdict.value == "not-a-target" else result.verdict.value


def run_text(report: ScanReport) -> str:
    """The run options of a scan that differ from a plain run (``PP=2, draft config …``), from its
    first result; empty for a plain run."""
    for r in report.results:
        if r.run_options is not None:
            return r.run_options.describe()
    return ""


def model_types(r) -> str:
    """The model_types a result was judged with, for its heading: ``text model_type 'llama'``, or
    ``model_type 'kimi_k25', text model_type 'kimi_k2'`` when the HF config's own model_type (the
    one the MTP rewrite tests) differs from its text config's (the one the EAGLE-3 allowlist
    checks)."""
    text = f"text model_type {r.text_model_type!r}"
    return f"model_type {r.model_type!r}, {text}" if r.model_type and r.model_type != r.text_model_type else text


def summary_line(report: ScanReport) -> str:
    """``N targets: a supported, b blocked, c unknown; D drafters and P pooling models not
    audited``; with several methods, ``N targets (M results): …`` (verdicts are counted per
    target and method). Every count agrees with its noun."""
    s = report.summary()
    head = count(s["targets"], "target")
    if len(report.targets) != s["targets"]:
        head += f" ({count(len(report.targets), 'result')})"
    line = f"{head}: {s['supported']} supported, {s['blocked']} blocked, {s['unknown']} unknown"
    if s["drafters"] or s["pooling"]:
        line += f"; {count(s['drafters'], 'drafter')} and {count(s['pooling'], 'pooling model')} not audited"
    return line


def scan_json(report: ScanReport) -> str:
    """The JSON document of a scan (schema: ``auditor/model/schemas/outputs/scan.json``)."""
    from auditor.render.fastjson import dumps_indent2

    return dumps_indent2(report.as_dict())


def scan_markdown(report: ScanReport) -> str:
    """A Markdown table of the scan, for CI job summaries."""
    run = run_text(report)
    out = [f"### eagle-audit: vLLM {markdown_text(report.vllm_version or '?')}"
           + (f" ({markdown_text(run)})" if run else ""), "",
           "| architecture | method | verdict | blocking gates | findings |", "|---|---|---|---|---|"]
    for r in report.results:
        fs = "<br>".join(markdown_text(f"`{f.rule}` {f.gate} `{f.where}`: {f.message}") for f in r.findings)
        if r.draft_architecture:
            draft = markdown_text(f"draft {r.draft_architecture} (`{r.draft_class}`)")
            fs = draft + ("<br>" + fs if fs else "")
        arch = markdown_text(r.architecture)
        out.append(f"| {arch} | {r.method} | **{r.verdict.value}** | {', '.join(r.blocking) or '—'} | {fs or '—'} |")
    out += ["", summary_line(report)]
    out += [f"\n**{markdown_text(line)}**" for line in environment_code_lines(report)]
    return "\n".join(out) + "\n"


def platform_differences_table(diffs: list[dict], console: Console) -> None:
    """Print where verdicts differ between platforms (see
    :func:`auditor.orchestration.scan.platform_differences`): one row per target and method, one
    column per platform (verdict, blocking gates, and the class when it differs)."""
    from rich.table import Table
    from rich.text import Text

    if not diffs:
        console.print("the verdicts are the same on every platform")
        return
    plats = list(diffs[0]["platforms"])
    table = Table(title="where the platforms differ")
    table.add_column("architecture", overflow="fold")
    table.add_column("method", no_wrap=True)
    for p in plats:
        table.add_column(p, overflow="fold")
    for d in diffs:
        classes = {v["class"] for v in d["platforms"].values() if v}
        cells = []
        for p in plats:
            v = d["platforms"][p]
            if v is None:
                cells.append(Text("absent", style="dim"))
                continue
            t = Text(v["verdict"], style=VERDICT_STYLE.get(v["verdict"], ""))
            if v["blocking"]:
                t.append(f" ({', '.join(v['blocking'])})")
            if len(classes) > 1:
                t.append(f"\n{v['class']}", style="cyan")
            cells.append(t)
        table.add_row(d["architecture"], d["method"], *cells)
    console.print(table)


def compare_markdown(report) -> str:
    """A comparison (:class:`auditor.orchestration.compare.CompareReport`) as Markdown: one row per
    target with each engine's verdict and blocking gates, then the reasons per engine, then the
    conclusion (which engine supports every target)."""
    names = [markdown_text(s.name) for s in report.sides]
    lines = ["# eagle-audit compare", "",
             "| target | method | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]
    for r in report.rows:
        cells = [markdown_text(c.verdict + (f", {patch_words(c.fix_available)}" if c.verdict == "blocked" else "")
                               + (f" ({', '.join(c.blocking)})" if c.blocking else "")) for c in r.cells]
        lines.append(f"| {markdown_text(r.architecture)} | {markdown_text(r.method)} | " + " | ".join(cells) + " |")
    for i, side in enumerate(report.sides):
        why = [(r.architecture, c) for r in report.rows for c in [r.cells[i]] if c.reasons]
        if why:
            lines += ["", f"## {markdown_text(side.name)}: why ({markdown_text(side.source)})", ""]
            for arch, c in why:
                lines += [f"- **{markdown_text(arch)}** ({markdown_text(c.verdict)}):"] + [
                    f"  - {markdown_text(x)}" for x in c.reasons]
    for name, per in report.unresolved.items():
        for engine, msg in per.items():
            lines.append(f"- `{markdown_text(name)}` in {markdown_text(engine)}: {markdown_text(msg)}")
    ok = [markdown_text(s.name) for s, good in zip(report.sides, report.supports_all) if good]
    lines += ["", f"**Supports every target:** {', '.join(ok)}" if ok else "**No engine supports every target.**"]
    return "\n".join(lines) + "\n"


def compare_table(report, console: Console) -> None:
    """Print a comparison as a rich table (verdict and blocking gates per engine), the reasons
    under it, and the conclusion."""
    from rich.table import Table
    from rich.text import Text

    # names stay whole when the console has room for the longest one beside the other columns
    # (each verdict and gate id on a line of its own, so a cell is as wide as its longest word)
    names = [clean(r.architecture) for r in report.rows]
    words = [len(w) for r in report.rows for c in r.cells
             for w in [c.verdict, *c.blocking, *([patch_words(c.fix_available)] if c.verdict == "blocked" else [])]]
    cell = max(words + [9])
    method = max([len(r.method) for r in report.rows] + [6])
    others = method + cell * len(report.sides) + 3 * (1 + len(report.sides)) + 4  # padding and borders
    longest = max([len(n) for n in names] + [6])
    table = Table(title="eagle-audit compare")
    table.add_column("target", overflow="fold", min_width=max(6, min(longest, console.width - others)))
    table.add_column("method", no_wrap=True, min_width=method)
    for s in report.sides:
        table.add_column(Text(clean(s.name)), overflow="fold", min_width=cell)
    for r, name in zip(report.rows, names):
        cells = []
        for c in r.cells:
            t = Text(c.verdict, style=VERDICT_STYLE.get(c.verdict, ""))
            if c.verdict == "blocked":
                t.append(f"\n{patch_words(c.fix_available)}", style="italic")
            for g in c.blocking:
                t.append(f"\n{g}")
            cells.append(t)
        table.add_row(Text(name), r.method, *cells)
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update_width(1 << 20), table).maximum
    if natural > console.width:  # the table would cut names or cells: a block per target
        _compare_blocks(report, console)
    else:
        console.print(table)
    for i, side in enumerate(report.sides):
        for r in report.rows:
            c = r.cells[i]
            if c.reasons:  # wrapped as every report line is (the width, or COLUMNS; whole when piped without)
                print_wrapped(console, clean(f"{r.architecture} in {side.name} ({c.verdict}):"), indent=0, hanging=2)
                for x in c.reasons:
                    print_wrapped(console, clean(x), indent=2, hanging=4)
    ok = [s.name for s, good in zip(report.sides, report.supports_all) if good]
    print_wrapped(console, clean(f"supports every target: {', '.join(ok)}") if ok else "no engine supports every target",
                  indent=0, hanging=2)


def _compare_blocks(report, console: Console) -> None:
    """The table of :func:`compare_table` on a console too narrow for it: the title, then per
    target a line ``ARCH: method`` and one indented line per engine, ``SIDE: verdict`` with the
    patch words and the blocking gates, each wrapped between its pieces."""
    from rich.text import Text

    print_wrapped(console, Text("eagle-audit compare", style="bold"), indent=0, hanging=2)
    for r in report.rows:
        print_wrapped(console, [Text(clean(r.architecture) + ":", style="bold"), Text(r.method)], indent=0, hanging=2)
        for side, c in zip(report.sides, r.cells):
            head = c.verdict + (f" ({patch_words(c.fix_available)})" if c.verdict == "blocked" else "")
            words = [Text(clean(side.name) + ":"), Text(head + (":" if c.blocking else ""),
                                                        style=VERDICT_STYLE.get(c.verdict, ""))]
            words += [Text(g + ("," if i + 1 < len(c.blocking) else "")) for i, g in enumerate(c.blocking)]
            print_wrapped(console, words, indent=2, hanging=4)
    console.print()


def print_cache(console: Console, usage) -> None:
    """``eagle-audit cache``: the cache folder (and what set it) on a line of its own, printed
    whole so that it can be copied; then one line per kind with its entries, size and folder, the
    total, the entries eagle-audit does not own, and how to free space (wrapped at the width)."""
    from auditor.orchestration.cachedir import human_size

    link = f", a symbolic link to {usage.root_link}" if usage.root_link is not None else ""
    print_wrapped(console, f"cache folder (from {usage.origin}{link}):", indent=0)
    console.print(clean(f"  {usage.root}"), markup=False, highlight=False, soft_wrap=True)
    if not usage.exists:
        print_wrapped(console, "empty: the folder does not exist yet (it is created on first use)", indent=0)
        return
    width = max(len(k.kind) for k in usage.kinds)
    for k in usage.kinds:
        link = f" (a symbolic link to {k.link}: not followed, nothing counted)" if k.link is not None else ""
        print_wrapped(console, clean(f"{k.kind:<{width}}  {count(len(k.entries), 'entry', 'entries'):>12}  "
                                     f"{human_size(k.size):>10}  {k.folder.name}/{link}: {k.what}"), hanging=6)
    print_wrapped(console, f"{'total':<{width}}  {'':>12}  {human_size(usage.size):>10}")
    for name, size in usage.other:
        print_wrapped(console, clean(f"{name}/ ({human_size(size)}): not a kind this eagle-audit writes (the test "
                                     "suite's engine venvs live in runtime/); not in the total, left alone by prune "
                                     "and clear: remove it by hand when it is not needed"), hanging=6)
    print_wrapped(console, "free space with: eagle-audit cache prune --older-than DAYS | --max-size SIZE, or "
                  "eagle-audit cache clear", indent=0)


def print_prune(console: Console, result) -> None:
    """What ``cache prune`` or ``cache clear`` removed, and what the cache holds after."""
    from auditor.orchestration.cachedir import human_size

    if not result.removed:
        print_wrapped(console, f"nothing to remove; the cache holds {human_size(result.after.size)}", indent=0)
        return
    what = ", ".join(f"{kind} {n}" for kind, n in result.removed.items())
    total = sum(result.removed.values())
    print_wrapped(console, f"removed {count(total, 'entry', 'entries')} ({what}): {human_size(result.freed)} freed; "
                  f"the cache holds {human_size(result.after.size)}", indent=0)
