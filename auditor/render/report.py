"""Rendering of scan reports and class explanations (table, JSON, Markdown). No analysis here.

Every string that comes from the scanned tree (registry keys, class names, paths, messages that
quote them) goes through :func:`clean` before it reaches a terminal or a Markdown document, and
through :func:`rich.markup.escape` where rich would read markup: a tree cannot repaint the screen
or restyle the report.
"""

from __future__ import annotations

import json
import re
import weakref
from typing import TYPE_CHECKING

from auditor.model.results import ScanReport
from auditor.model.wording import count

if TYPE_CHECKING:  # rich is imported by the functions that print, so that JSON never loads it
    from rich.console import Console

_STYLE = {"supported": "green", "blocked": "red", "unknown": "yellow", "not-a-target": "dim"}


def rules_markdown(details: bool = False) -> str:
    """The rule reference as Markdown, generated from the registry table ``rules.registry.TABLE``:
    a table (code, gate, blocks, fix, methods, what), which the README embeds (a test keeps the
    two equal), and with ``details`` one section per rule with its why and how to fix (what
    ``eagle-audit rules --format markdown`` writes)."""
    from rules.registry import RULES

    rows = ["| code | gate | blocks | fix | methods | what |", "|---|---|---|---|---|---|"]
    for code, r in RULES.items():
        rows.append(f"| {code} | `{r.GATE}` | {'yes' if r.BLOCKING else 'warning'} | "
                    f"{'yes' if r.FIX_AVAILABLE else '—'} | {', '.join(r.METHODS)} | {r.SUMMARY} |")
    if details:
        for code, r in RULES.items():
            engines = ", ".join(r.ENGINES)
            rows += ["", f"### {code} `{r.GATE}` ({engines})", "", f"**Why:** {r.WHY}", "",
                     f"**How to fix:** {r.HOW_TO_FIX}"]
    return "\n".join(rows) + "\n"


#: Below this console width ``eagle-audit rules`` prints a list of sections, not a table (a
#: table's text column would be a third of the line).
RULES_TABLE_MIN_WIDTH = 100


def rules_table(console: Console) -> None:
    """Print the rule reference as a rich table: code, gate, blocks, fix, and the why and how to
    fix of each rule. The short columns keep their words whole; the last one wraps (and folds a
    long identifier rather than cutting it). On a console narrower than
    :data:`RULES_TABLE_MIN_WIDTH`: one section per rule instead (its heading, then its why and
    how to fix, wrapped between words), so that no name is broken."""
    from rich.markup import escape
    from rich.table import Table

    from rules.registry import RULES

    if console.width < RULES_TABLE_MIN_WIDTH:
        for i, (code, r) in enumerate(RULES.items()):
            if i:
                console.print()
            print_wrapped(console, f"{code} {r.GATE} ({_engine_names(r)}): {'blocks' if r.BLOCKING else 'warning'}, "
                          f"{'fix available' if r.FIX_AVAILABLE else 'no automatic fix'}; methods "
                          f"{', '.join(r.METHODS)}", indent=0, hanging=2)
            print_wrapped(console, f"Why: {r.WHY}", indent=2, hanging=4)
            print_wrapped(console, f"Fix: {r.HOW_TO_FIX}", indent=2, hanging=4)
        console.print()
        print_wrapped(console, "eagle-audit rules CODE shows one rule with its examples; a terminal of "
                      f"{RULES_TABLE_MIN_WIDTH} columns or more shows the table", indent=0, hanging=2)
        return

    t = Table(show_lines=True)
    t.add_column("code", no_wrap=True)
    t.add_column("gate", no_wrap=True)
    t.add_column("blocks", no_wrap=True)
    t.add_column("fix", no_wrap=True)
    t.add_column("why / how to fix", overflow="fold", ratio=1)
    for code, r in RULES.items():
        t.add_row(code, r.GATE, "yes" if r.BLOCKING else "warning", "yes" if r.FIX_AVAILABLE else "no",
                  f"{escape(r.WHY)}\n[bold]Fix:[/bold] {escape(r.HOW_TO_FIX)}")
    console.print(t)


def rules_json() -> str:
    """Every rule as JSON: ``[{code, gate, name, summary, blocking, fix_available, methods,
    engines, why, how_to_fix}]``, from the registry table."""
    from rules.registry import RULES

    return json.dumps([{"code": code, "gate": r.GATE, "name": r.NAME, "summary": r.SUMMARY,
                        "blocking": r.BLOCKING, "fix_available": r.FIX_AVAILABLE, "methods": list(r.METHODS),
                        "engines": list(r.ENGINES),
                        "why": r.WHY, "how_to_fix": r.HOW_TO_FIX} for code, r in RULES.items()], indent=2)


def _engine_names(rule) -> str:
    """The engines a rule judges, as the reports name them (vLLM, SGLang)."""
    from auditor.engines.catalog import ENGINES

    return ", ".join(ENGINES[e].display if e in ENGINES else e for e in rule.ENGINES)


def _example_run(ex) -> list[str]:
    """What an example assumes beyond its files: the method, the text model_type it is audited
    with, and the run options and checkpoint configs that differ from the defaults."""
    from auditor.model.options import RunOptions

    out = [f"method {ex.method}", f"text model_type {ex.text_model_type}"]
    base = RunOptions()
    o = ex.options
    if o.pipeline_parallel_size != base.pipeline_parallel_size:
        out.append(f"--pipeline-parallel-size {o.pipeline_parallel_size}")
    if o.parallel_drafting:
        out.append("--parallel-drafting")
    if o.num_speculative_tokens is not None:
        out.append(f"--num-speculative-tokens {o.num_speculative_tokens}")
    if o.draft_config is not None:
        out.append(f"--draft-config {json.dumps(o.draft_config, sort_keys=True)}")
    if ex.hf_config is not None:
        out.append(f"--hf-config {json.dumps(ex.hf_config, sort_keys=True)}")
    out += [f"registry row {arch} -> {module}.{cls} ({table})" for arch, module, cls, table in ex.rows]
    return out


def _examples(rule):
    """``(kind, number, example)`` of a rule's VALID then INVALID examples (numbered from 1)."""
    for kind in ("VALID", "INVALID"):
        for i, ex in enumerate(getattr(rule, kind), 1):
            yield kind, i, ex


def _expectation(kind: str, ex) -> str:
    """What the scanner reports on an example (as ``tests/test_rule_examples.py`` checks it)."""
    if ex.expect_severity is None:
        return "passes (no finding)"
    return f"reports {ex.expect_severity.value}"


def _rule_detail_lines(rules) -> list[tuple[str, bool]]:
    """The lines of :func:`print_rule_details`, each with True for a line of example code (kept
    as written, never wrapped)."""
    out: list[tuple[str, bool]] = []
    for r in rules:
        if out:
            out.append(("", False))
        prose = [f"{r.CODE} {r.GATE} ({_engine_names(r)}): {'blocks' if r.BLOCKING else 'warning'}, "
                 f"{'fix available (eagle-audit fix)' if r.FIX_AVAILABLE else 'no automatic fix'}; "
                 f"methods {', '.join(r.METHODS)}",
                 "", f"What: {r.SUMMARY}", "", f"Why: {r.WHY}", "", f"How to fix: {r.HOW_TO_FIX}"]
        if r.REQUIRES:
            prose += ["", f"Evaluated only with {r.REQUIRES}."]
        examples = list(_examples(r))
        if not examples:
            prose += ["", "Examples: none yet."]
        out += [(line, False) for line in prose]
        for kind, i, ex in examples:
            note = f" ({ex.note})" if ex.note else ""
            out += [("", False), (f"{kind} {i}: {ex.architecture}{note}: {_expectation(kind, ex)}", False),
                    (f"  with {'; '.join(_example_run(ex))}", False)]
            for path, src in ex.files.items():
                if src is None:
                    out.append((f"  {path}: the base tree's file, unchanged", False))
                    continue
                out.append((f"  {path}:", False))
                out += [(f"    {line}".rstrip(), True) for line in src.strip("\n").split("\n")]
            if not ex.files:
                out.append(("  the base tree, unchanged", False))
    return [(clean(line), code) for line, code in out]


def rule_details_text(rules) -> str:
    """One section per rule of ``rules`` (``eagle-audit rules EA302``) as plain text, each line
    whole: code, gate, engines, whether it blocks and has a fix, the methods, what it checks,
    why, how to fix, and each VALID/INVALID example (the files laid over the synthetic base tree,
    the architecture audited, what it assumes and what the scanner reports on it)."""
    return "\n".join(line for line, _ in _rule_detail_lines(rules)) + "\n"


def print_rule_details(console: Console, rules) -> None:
    """Print :func:`rule_details_text` on ``console``: prose lines wrapped at its width between
    words (continuations indented two more spaces, see :func:`print_wrapped`), example code as
    written."""
    for line, code in _rule_detail_lines(rules):
        if code or not line:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
            continue
        indent = len(line) - len(line.lstrip(" "))
        print_wrapped(console, line.lstrip(" "), indent=indent, hanging=indent + 2)


def rule_details_markdown(rules) -> str:
    """The sections of :func:`rule_details_text` as Markdown: a heading per rule, its why and how
    to fix, and each example's files in fenced code blocks."""
    out: list[str] = []
    for r in rules:
        out += [f"## {r.CODE} `{r.GATE}` ({_engine_names(r)})", "",
                f"{'Blocks' if r.BLOCKING else 'Warning'}; {'fix available' if r.FIX_AVAILABLE else 'no automatic fix'}; "
                f"methods {', '.join(r.METHODS)}.", "", f"**What:** {r.SUMMARY}", "", f"**Why:** {r.WHY}", "",
                f"**How to fix:** {r.HOW_TO_FIX}", ""]
        for kind, i, ex in _examples(r):
            note = f" ({ex.note})" if ex.note else ""
            out += [f"### {kind} {i}: `{ex.architecture}`{note}", "",
                    f"{_expectation(kind, ex).capitalize()}; with {'; '.join(_example_run(ex))}.", ""]
            for path, src in ex.files.items():
                if src is None:
                    out += [f"`{path}`: the base tree's file, unchanged.", ""]
                else:
                    out += [f"`{path}`:", "", "```python", src.strip("\n"), "```", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def rule_details_json(rules) -> str:
    """The rules of ``rules`` as JSON: the fields of :func:`rules_json` plus ``requires`` and
    ``examples`` (``kind``, ``architecture``, ``note``, ``method``, ``text_model_type``,
    ``expect_severity``, ``files``: path → source, null for the base tree's file)."""
    return json.dumps([{
        "code": r.CODE, "gate": r.GATE, "name": r.NAME, "summary": r.SUMMARY, "blocking": r.BLOCKING,
        "fix_available": r.FIX_AVAILABLE, "methods": list(r.METHODS), "engines": list(r.ENGINES), "why": r.WHY,
        "how_to_fix": r.HOW_TO_FIX, "requires": r.REQUIRES or None,
        "examples": [{"kind": kind, "architecture": ex.architecture, "note": ex.note, "method": ex.method,
                      "text_model_type": ex.text_model_type,
                      "expect_severity": ex.expect_severity.value if ex.expect_severity else None,
                      "files": dict(ex.files)} for kind, _, ex in _examples(r)],
    } for r in rules], indent=2)

# C0 and C1 controls, DEL, and the Unicode format characters that reorder or hide text
# (bidirectional overrides and isolates, line and paragraph separators).
_BIDI = r"\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f" + _BIDI + "]")
_CONTROL_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + "]")


def patch_words(fix_available: bool) -> str:
    """How a blocked cell of a matrix or a comparison says whether ``eagle-audit fix`` can patch
    every blocking gate of it: ``a patch exists`` or ``no local patch`` (the same words in the
    table, Markdown and HTML reports)."""
    return "a patch exists" if fix_available else "no local patch"


def clean(text: object, multiline: bool = False) -> str:
    """``text`` with every control character shown as an escape (``ESC`` becomes ``\\x1b``,
    a right-to-left override ``\\u202e``), so that printing it cannot move the cursor, clear the
    screen, change colours or reorder what the reader sees.

    Args:
        text: any value (``str()`` of it is cleaned).
        multiline: keep newlines and tabs (for reports and diffs); otherwise they are escaped too.

    Returns:
        The neutralised text.
    """
    pattern = _CONTROL_TEXT if multiline else _CONTROL_LINE
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                       else f"\\u{ord(m.group()):04x}", str(text))


#: What :func:`markdown_text` replaces: the table's cell separator, and what opens an HTML tag, an
#: entity or a link.
_MARKDOWN = str.maketrans({"|": "\\|", "[": "\\[", "]": "\\]", "<": "&lt;", ">": "&gt;", "&": "&amp;"})


def markdown_text(text: object) -> str:
    """``text`` (anything taken from input: a name, a path, a message) made inert in GitHub-flavoured
    Markdown, for job summaries and PR comments: one line (controls and newlines escaped as by
    :func:`clean`), ``|`` escaped for table cells, ``<``, ``>`` and ``&`` as entities (no HTML tag
    or entity), ``[`` and ``]`` escaped (no link or image). Inside a code span the entities show
    as typed."""
    return clean(text).translate(_MARKDOWN)


def _clean_all(value):
    """A copy of a JSON-like value with every string cleaned (for explanations)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {k: _clean_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean_all(v) for v in value]
    return value


#: Consoles whose report lines are printed whole (piped without ``COLUMNS``): see :func:`keep_lines_whole`.
_WHOLE_LINES: "weakref.WeakSet" = weakref.WeakSet()


def shell_lines(command: str, width: int, indent: int = 2) -> list[str]:
    """``command`` (shell-quoted) laid out in lines of at most ``width`` columns where its words
    allow, the first indented by ``indent`` spaces, each but the last ending with `` \\`` (a shell
    line continuation: the lines copied together still run as one command), continuation lines
    indented two more spaces. A word is never cut; a command that cannot be split as shell words
    is returned whole on one line."""
    import shlex

    try:
        words = [shlex.quote(w) for w in shlex.split(command)]
    except ValueError:
        return [" " * indent + command]
    if not words:
        return []
    lines = [" " * indent + words[0]]
    for w in words[1:]:
        if len(lines[-1]) + 1 + len(w) + 2 <= width:
            lines[-1] += " " + w
        else:
            lines[-1] += " \\"
            lines.append(" " * (indent + 2) + w)
    return lines


#: Where a command to copy starts inside a message line: after ``: `` (``next step (…): eagle-audit
#: fix …``, ``undo with: eagle-audit fix --revert …``) or at the start of the line.
_COMMAND = re.compile(r"(?:(?<=: )|(?<![^ ]))(?=eagle-audit (?:scan|fix|gate|matrix|compare|explain|rules|cache|verify) )")


def _wrap_prose(text: str, width: int, indent: int, hanging: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text.strip(), width, initial_indent=" " * indent, subsequent_indent=" " * hanging,
                         break_long_words=False, break_on_hyphens=False) or [" " * indent]


def wrap_message(text: str, width: int | None) -> list[str]:
    """The one wrapping rule of every command's messages on stderr (and of a report's next steps):
    each line of ``text`` wrapped between words at ``width`` (None: lines kept whole, as for a log
    or a pipe without ``COLUMNS``), continuations indented two spaces more than the line; a word
    (a path, a ``file:line``) is never cut. A command to copy (see :data:`_COMMAND`) in a line too
    long for ``width`` starts a line of its own and is laid out by :func:`shell_lines` (shell
    continuations, so that the lines copied together still run); a note after it (two spaces, then
    ``(``) follows on lines of its own. A line that starts with a command always has its note on a
    line of its own, so that the command's line is copied alone.

    Args:
        text: the message, one or more lines (already cleaned of control characters).
        width: the columns to fit, or None.

    Returns:
        The lines to print.
    """
    out: list[str] = []
    room = width or 10**6
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        m = _COMMAND.match(line, indent) or _COMMAND.search(line, indent)
        if m is None:
            out += [line] if len(line) <= room else _wrap_prose(line, room, indent, indent + 2)
            continue
        prose, rest = line[:m.start()], line[m.start():]
        command, sep, note = rest.partition("  (")
        if prose.strip() and len(line) <= room:
            out.append(line)  # it fits (or a log's line, kept whole): the command is copied from it as it is
            continue
        # a command that starts the line, or a line too long: the command on lines of its own,
        # runnable as copied, its note after it
        if prose.strip():
            out += _wrap_prose(prose, room, indent, indent + 2)
            out += shell_lines(command, room, indent + 2)
        else:
            out += shell_lines(command, room, indent)
        if sep:
            at = indent + 2 if prose.strip() else indent
            out += _wrap_prose("(" + note, room, at, at + 1)
    return out


def lines_kept_whole(console: Console) -> bool:
    """Whether ``console`` prints report lines whole (see :func:`keep_lines_whole`)."""
    return console in _WHOLE_LINES


def keep_lines_whole(console: Console) -> Console:
    """Mark ``console`` so that :func:`print_wrapped` prints each report line whole, on one line
    (the tables still fit the console's width). Returns ``console``."""
    _WHOLE_LINES.add(console)
    return console


def print_wrapped(console: Console, units, indent: int = 2, hanging: int = 4) -> None:
    """Print one report line wrapped at the console's width (a terminal's, or ``COLUMNS``): the
    first line indented by ``indent`` spaces, each continuation by ``hanging``; nothing is cut. On
    a console marked by :func:`keep_lines_whole`, the line is printed whole.

    Args:
        console: the rich console printed on.
        units: a :class:`rich.text.Text` or str (wrapped between words; a word longer than the
            line folds), or a list of them: pieces kept whole on one line when they fit (a
            ``file:line``, ``(fix available)``), joined by spaces.
    """
    from rich.text import Text

    pieces = [u if isinstance(u, Text) else Text(u) for u in (units if isinstance(units, list) else [units])]
    whole = Text(" ").join(pieces)
    if console in _WHOLE_LINES:
        console.print(Text(" " * indent) + whole, soft_wrap=True, highlight=False)
        return
    first, rest = max(console.width - indent, 20), max(console.width - hanging, 20)
    lines: list = []
    line = None
    for piece in (pieces if len(pieces) > 1 else [whole]):
        room = rest if lines else first
        if line is not None and line.cell_len + 1 + piece.cell_len <= room:
            line.append(" ")
            line.append_text(piece)
            continue
        if line is not None:
            lines.append(line)
        line = piece.copy()
    lines.append(line)
    out: list = []
    for line in lines:  # a line still too long (one piece, or the whole text) wraps between words
        room = rest if out else first
        if line.cell_len <= room:
            out.append(line)
            continue
        head = line.wrap(console, room, overflow="fold")[0]
        out.append(head)
        tail = line[len(head.plain):]
        tail = tail[len(tail.plain) - len(tail.plain.lstrip(" ")):]
        if tail.plain:
            out += list(tail.wrap(console, rest, overflow="fold"))
    for i, line in enumerate(out):
        console.print(Text(" " * (hanging if i else indent)) + line, soft_wrap=True, highlight=False)


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
                Text(f"{r.method},"), Text(_verdict_word(r), style=_STYLE[r.verdict.value])]
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
        cells += [r.method, Text(_verdict_word(r), style=_STYLE[r.verdict.value]), "\n".join(r.blocking) or "—"]
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
            t = Text(v["verdict"], style=_STYLE.get(v["verdict"], ""))
            if v["blocking"]:
                t.append(f" ({', '.join(v['blocking'])})")
            if len(classes) > 1:
                t.append(f"\n{v['class']}", style="cyan")
            cells.append(t)
        table.add_row(d["architecture"], d["method"], *cells)
    console.print(table)


def _escape_all(value):
    """A copy of a JSON-like value with every string markup-escaped (for rich)."""
    from rich.markup import escape

    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return {k: _escape_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape_all(v) for v in value]
    return value


def explain_tree(info: dict, console: Console) -> None:
    """Print an explanation (see :func:`auditor.orchestration.explain.explain`) as a rich tree,
    each label wrapped at the console's width (a long name folds; nothing is cut). Every string
    of ``info`` is cleaned and markup-escaped first."""
    from rich.text import Text
    from rich.tree import Tree as RichTree

    info = _escape_all(_clean_all(info))
    head = f"[bold]{info['architecture']}[/bold] → {info['class']}  [cyan]{info['path']}:{info['line']}[/cyan]"
    if info.get("empty_subclass"):
        head += "  [yellow](empty subclass)[/yellow]"
    root = RichTree(head)
    mro = root.add("MRO")
    for e in info["mro_detail"]:
        label = e["name"]
        tags = []
        if e.get("path"):
            label += f"  [cyan]{e['path']}:{e['line']}[/cyan]"
        else:
            tags.append("external")
        if e.get("empty"):
            tags.append("empty")
        if e.get("protocol"):
            tags.append("protocol")
        if tags:
            label += "  [dim](" + ", ".join(tags) + ")[/dim]"
        mro.add(label)
    for err in info.get("mro_problems", []):
        root.add(f"[red]{err}[/red]")
    for pname, members in info.get("protocols", {}).items():
        node = root.add(f"{pname} members")
        for m, src in members.items():
            node.add(f"{m}: " + (f"[green]{src}[/green]" if src else "[red]missing[/red]"))
    h = info.get("holder")
    if h:
        node = root.add(f"holder model: {h.get('class') or '[yellow]unknown[/yellow]'}")
        node.add(f"found via {h['via']}")
        if h.get("unknown"):
            node.add(f"[yellow]{h['unknown']}[/yellow]")
        if h.get("forward"):
            fw = h["forward"]
            fnode = node.add(f"forward: {fw['defined_in']}  [cyan]{fw['path']}:{fw['line']}[/cyan]")
            for lp in fw["loops"]:
                if lp["index_var"] is None:
                    idx = "no layer index"
                else:
                    start = f", start={lp['enumerate_start']}" if lp.get("enumerate_start") else ""
                    idx = f"layer index {lp['index_var']!r} from {lp['index_kind']}{start}"
                fnode.add(f"layer loop at line {lp['line']}: {idx}; captures aux hidden states: "
                          f"{_yes_no(lp['captures'])}")
            fnode.add(f"returns aux hidden states: {_yes_no(fw['returns_aux'])}")
    if info.get("language_model"):
        root.add(f"language model architecture: {info['language_model']}")
    if info.get("engine") == "sglang" and info.get("resolved"):
        _explain_sglang(info, root)
    if info.get("branches"):
        node = root.add(f"import-time branches followed (platform {info.get('platform')})")
        for b in info["branches"]:
            where = f"  [cyan]{b['path']}:{b['line']}[/cyan]" if b.get("line") else ""
            node.add(Text.from_markup(f"{b['name']} in {b['module']}: {b['branch']}{where}"))  # escaped above
    console.print(root, soft_wrap=False)  # wrapped at the console's width (piped: COLUMNS), never cropped


def _yes_no(value) -> str:
    """A yes/no fact of an explanation in words: ``yes``, ``no``, or ``unknown`` for None."""
    return "unknown" if value is None else ("yes" if value else "no")


def _explain_sglang(info: dict, root) -> None:
    """The SGLang parts of an explanation: the runner's call, the setter, its trace, the forward
    (``info`` is already cleaned and markup-escaped by :func:`explain_tree`)."""
    reg = info["registered_in"]
    root.add(f"registered by EntryClass  [cyan]{reg['path']}:{reg['line']}[/cyan]")
    for c in info.get("runner", [])[:1]:
        root.add(f"runner calls model.{c['name']}(...)  [cyan]{c['path']}:{c['line']}[/cyan]"
                 + ("  (after hasattr)" if c["checks_hasattr"] else ""))
    st = info.get("setter")
    if st:
        root.add(f"setter: [green]{st['defined_in']}.{st['name']}[/green]  [cyan]{st['path']}:{st['line']}[/cyan]")
    else:
        root.add("setter: [red]missing[/red]")
    cap = info["capture"]
    node = root.add(f"capturing model: {cap.get('holder') or '[yellow]unknown[/yellow]'}")
    if cap.get("via"):
        node.add(f"found via {cap['via']}")
    for p in cap.get("problems", []):
        node.add(f"[red]{p['message']}[/red]")
    fw = cap.get("forward")
    if fw:
        fnode = node.add(f"forward: {fw['defined_in']}  [cyan]{fw['path']}:{fw['line']}[/cyan]")
        for lp in fw["loops"]:
            fnode.add(f"layer loop at line {lp['line']}: captures aux hidden states: {_yes_no(lp['captures'])}")
        fnode.add(f"returns aux hidden states: {_yes_no(fw['returns_aux'])}")


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
            t = Text(c.verdict, style=_STYLE.get(c.verdict, ""))
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
                                                        style=_STYLE.get(c.verdict, ""))]
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
        print_wrapped(console, clean(f"{name}/ ({human_size(size)}): not a kind this eagle-audit writes; left alone "
                                     "by prune and clear"), hanging=6)
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
