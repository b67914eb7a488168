"""The rule reference, generated from the registry table ``rules.registry.TABLE``: the README's
table (:func:`rules_markdown`), ``eagle-audit rules`` as a table or JSON, and each rule's details
with its examples (text, Markdown, JSON). No analysis here."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from auditor.render.text import clean, print_wrapped

if TYPE_CHECKING:  # rich is imported by the functions that print, so that JSON never loads it
    from rich.console import Console


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
    if o.platform != base.platform:
        out.append(f"--platform {o.platform}")
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



@dataclass
class ExampleFile:
    """How the rule details show one file of an example: ``shown`` is ``base`` (the base tree's
    file, kept), ``full`` (``lines``: the source), ``same`` (the file as an earlier example of the
    rule, ``like``, showed it) or ``changed`` (``lines``: a unified diff from the file as ``like``
    showed it in full)."""

    path: str
    shown: str
    like: str = ""
    lines: list[str] = field(default_factory=list)


def _example_files(rule) -> list[list[ExampleFile]]:
    """Per example of ``rule`` (in :func:`_examples` order), how each of its files is shown, so that
    a file the rule's examples repeat is printed once: in full the first time, then by the name of
    the first example that showed it (``as in VALID 1``), or as a unified diff from the closest
    version shown in full when that is at most half as long as the file. The examples themselves
    (what the tests run) are unchanged; JSON carries every file whole."""
    full: dict[str, list[tuple[str, list[str]]]] = {}  # path -> (example, lines) shown in full
    seen: dict[tuple[str, str], str] = {}  # (path, source) -> the first example that showed it
    out = []
    for kind, i, ex in _examples(rule):
        label, files = f"{kind} {i}", []
        for path, src in ex.files.items():
            if src is None:
                files.append(ExampleFile(path, "base"))
                continue
            if (path, src) in seen:
                files.append(ExampleFile(path, "same", seen[(path, src)]))
                continue
            seen[(path, src)] = label
            lines = src.strip("\n").split("\n")
            diffs = [(like, list(difflib.unified_diff(old, lines, n=1, lineterm=""))[2:])
                     for like, old in full.get(path, [])]
            like, diff = min(diffs, key=lambda d: len(d[1]), default=("", []))
            if diff and 2 * len(diff) <= len(lines):
                files.append(ExampleFile(path, "changed", like, diff))
                continue
            full.setdefault(path, []).append((label, lines))
            files.append(ExampleFile(path, "full", lines=lines))
        out.append(files)
    return out


def _same_lines(rule, files: list[ExampleFile], name) -> list[str]:
    """One line per earlier example whose files an example repeats unchanged, in the order first
    met: ``the 7 files of VALID 1, as shown there`` when they are all of that example's files
    (``the other 6 files``: all but those shown changed from it; three files or more), else ``as in VALID 1: a.py, b.py`` (each
    path through ``name``)."""
    by: dict[str, list[str]] = {}
    for f in files:
        if f.shown == "same":
            by.setdefault(f.like, []).append(f.path)
    if not by:
        return []
    own = {f"{kind} {i}": {p for p, src in ex.files.items() if src is not None} for kind, i, ex in _examples(rule)}
    out = []
    for like, paths in by.items():
        changed = {f.path for f in files if f.shown == "changed" and f.like == like}
        if len(paths) >= 3 and set(paths) | changed == own[like]:
            out.append(f"the {'other ' if changed else ''}{len(paths)} files of {like}, as shown there")
        else:
            out.append(f"as in {like}: {', '.join(name(p) for p in paths)}")
    return out


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
        for (kind, i, ex), files in zip(examples, _example_files(r)):
            note = f" ({ex.note})" if ex.note else ""
            out += [("", False), (f"{kind} {i}: {ex.architecture}{note}: {_expectation(kind, ex)}", False),
                    (f"  with {'; '.join(_example_run(ex))}", False)]
            for f in files:
                if f.shown == "base":
                    out.append((f"  {f.path}: the base tree's file, unchanged", False))
                elif f.shown == "full":
                    out.append((f"  {f.path}:", False))
                    out += [(f"    {line}".rstrip(), True) for line in f.lines]
                elif f.shown == "changed":
                    out.append((f"  {f.path}: as in {f.like}, except:", False))
                    out += [(f"    {line}".rstrip(), True) for line in f.lines]
            out += [(f"  {line}", False) for line in _same_lines(r, files, lambda p: p)]
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
        for (kind, i, ex), files in zip(_examples(r), _example_files(r)):
            note = f" ({ex.note})" if ex.note else ""
            out += [f"### {kind} {i}: `{ex.architecture}`{note}", "",
                    f"{_expectation(kind, ex).capitalize()}; with {'; '.join(_example_run(ex))}.", ""]
            for f in files:
                if f.shown == "base":
                    out += [f"`{f.path}`: the base tree's file, unchanged.", ""]
                elif f.shown == "full":
                    out += [f"`{f.path}`:", "", "```python", *f.lines, "```", ""]
                elif f.shown == "changed":
                    out += [f"`{f.path}`: as in {f.like}, except:", "", "```diff", *f.lines, "```", ""]
            out += [f"{line}.\n" for line in _same_lines(r, files, lambda p: f"`{p}`")]
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
