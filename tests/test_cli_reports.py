"""Where reports go and how they read (the new-user trial of issue 12, items 1–7, 9, 10, 12, 17,
18, 20): one way to pick a report's format on every command (``--format``, else the ``-o``
suffix, else table; contradictions, unknown suffixes and formats a command does not write are
refused with one line), ``-o -`` is stdout, a missing parent folder is refused before any work,
``table`` is the same rendering on every command (rich on a terminal, a plain table piped or in
a file: never cut, never padded), ``gate`` marks gates it did not evaluate as skipped, and the
top-level help keeps each command's summary whole. Commands run as subprocesses on the synthetic
minivllm/minisglang trees, or on real releases fetched through pip's index and cached."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import MINIVLLM
from real import REPO

MINISGLANG = REPO / "fixtures" / "minisglang"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def run(*args, columns: int | None = 80, tty: bool = False, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """``eagle-audit ARGS --no-config``-free, stdout and stderr piped, ``COLUMNS`` set; ``tty``:
    rich is told stdout is a terminal (``FORCE_COLOR``), as under ``script``."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS", "TTY_INTERACTIVE", "NO_COLOR")}
    if columns:
        env["COLUMNS"] = str(columns)
    if tty:
        env["FORCE_COLOR"] = "1"
    else:
        env["NO_COLOR"] = "1"
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


def one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("eagle-audit: error:"), p.stderr
    return lines[0]


def readable(text: str, width: int = 80, wrapped: bool = True, tty: bool = False) -> list[str]:
    """The lines of ``text`` (ANSI escapes removed), checked: none wider than ``width`` (with
    ``wrapped=False``, as piped: the table's lines only, a message stays on one line), none
    ending with a space unless on a terminal (``tty``), none cut with an ellipsis."""
    lines = [ANSI.sub("", line) for line in text.splitlines()]
    laid = [line for line in lines if wrapped or line[:1] in "┏┃┡│└"]
    assert all(len(line) <= width for line in laid), [line for line in laid if len(line) > width]
    assert tty or not [line for line in lines if line.endswith(" ")], "padded lines"
    assert "…" not in text, [line for line in lines if "…" in line]
    return lines


def column_text(lines: list[str], col: int) -> str:
    """The text of table column ``col`` (0-based), its folded lines joined without a space."""
    out = []
    for line in lines:
        if line.startswith("│"):
            cells = line.strip("│").split("│")
            if len(cells) > col:
                out.append(cells[col].strip())
    return "".join(out)


GATE = ("gate", "--candidate-version", MINIVLLM, "--model", "LlamaForCausalLM", "--no-config", "--no-progress",
        "--no-cache")


# -- 1. -o names the format on every command that writes a report --------------------------------


def test_o_suffix_names_the_format_of_gate_matrix_and_compare(tmp_path):
    p = run(*GATE, "-o", tmp_path / "g.sarif")
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "g.sarif").read_text())["version"] == "2.1.0"
    assert f"wrote {tmp_path / 'g.sarif'}" in p.stderr
    p = run(*GATE, "-o", tmp_path / "g.xml")
    assert p.returncode == 0, p.stderr
    assert ET.fromstring((tmp_path / "g.xml").read_text()).tag == "testsuites"
    p = run("matrix", "-m", "kimi_k2", "--versions", "0.16.0", "--no-config", "--no-progress", "-j", "1",
            "-o", tmp_path / "m.json")
    assert p.returncode == 1, p.stderr  # written; 0.16.0 supports neither target
    doc = json.loads((tmp_path / "m.json").read_text())
    assert [r["verdict"] for r in doc["rows"]] == ["blocked", "blocked"]
    line = one_line_error(run("matrix", "-m", "kimi_k2", "--versions", "0.16.0", "--no-config",
                              "-o", tmp_path / "m.sarif"))
    assert "-o m.sarif names sarif, which this command does not write (--format table|json|markdown|html)" in line
    assert not (tmp_path / "m.sarif").exists()
    p = run("compare", "-m", "LlamaForCausalLM", "--vllm-version", MINIVLLM, "--sglang-version", MINISGLANG,
            "--no-cache", "--no-progress", "-o", tmp_path / "c.json")
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["rows"][0]["engines"]["vllm"]["verdict"] == "supported"
    line = one_line_error(run(*GATE, "-f", "json", "-o", tmp_path / "g2.sarif"))
    assert "--format json contradicts -o g2.sarif (a sarif file name)" in line


# -- 2. a suffix that names no format ------------------------------------------------------------


def test_scan_o_txt_writes_the_plain_table_and_unknown_suffixes_are_refused(tmp_path):
    scan = ("scan", MINIVLLM, "--model", "ToyV3ForCausalLM", "--no-config", "--no-progress")
    p = run(*scan, "-o", tmp_path / "r.txt", columns=120)
    assert p.returncode == 1, p.stderr
    lines = readable((tmp_path / "r.txt").read_text(), width=120, wrapped=False)
    assert lines[1].startswith("┏") and "blocked" in column_text(lines, 2)
    assert "ToyV3ForCausalLM" in column_text(lines, 0)
    p = run(*scan, "-o", tmp_path / "r80.txt")  # too narrow for the table with its file:line: a block per target
    lines = readable((tmp_path / "r80.txt").read_text())
    assert lines[1:5] == ["ToyV3ForCausalLM: eagle3, blocked", "  allowlist: vllm/config/speculative.py:21",
                          "  interface: vllm/model_executor/models/toy.py:39",
                          "  aux-capture: vllm/model_executor/models/toy.py:34"], lines
    for name in ("r.junit", "report"):
        line = one_line_error(run(*scan, "-o", tmp_path / name))
        assert f"-o {name}: the suffix names no format; use .txt, .json, .md, .sarif, .xml" in line
        assert not (tmp_path / name).exists()
    line = one_line_error(run(*scan, "-o", tmp_path / "r.html"))  # matrix and compare write HTML, scan does not
    assert "-o r.html names html, which this command does not write (--format table|json|markdown|sarif|junit)" in line
    assert not (tmp_path / "r.html").exists()
    p = run(*scan, "-f", "json", "-o", tmp_path / "report")  # --format decides: any file name
    assert p.returncode == 1 and json.loads((tmp_path / "report").read_text())["results"]


# -- 3. explain honours --format -------------------------------------------------------------------


def test_explain_writes_the_format_asked_for(tmp_path):
    p = run("explain", "ToyV3ForCausalLM", MINIVLLM, "-o", tmp_path / "t.txt", "-f", "table")
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "t.txt").read_text()
    assert text.startswith("ToyV3ForCausalLM → vllm.model_executor.models.toy.ToyV3ForCausalLM") and "├── MRO" in text
    p = run("explain", "ToyV3ForCausalLM", MINIVLLM, "-o", tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text())["architecture"] == "ToyV3ForCausalLM"
    line = one_line_error(run("explain", "ToyV3ForCausalLM", MINIVLLM, "-o", tmp_path / "ex.md"))
    assert "-o ex.md names markdown, which this command does not write (--format table|json)" in line
    p = run("explain", "--all", MINIVLLM, "-f", "table")
    assert p.returncode == 0, p.stderr
    assert not p.stdout.lstrip().startswith("[") and "ToyV3ForCausalLM → " in p.stdout
    assert len(json.loads(run("explain", "--all", MINIVLLM, "-f", "json").stdout)) == 6


# -- 4. explain wraps at 80 columns, piped and on a terminal --------------------------------------


def test_explain_at_80_columns_wraps_instead_of_cutting():
    for tty in (False, True):
        p = run("explain", "DeepseekV3ForCausalLM", "--vllm-version", "0.16.0", "--no-progress", tty=tty)
        assert p.returncode == 0, p.stderr
        lines = readable(p.stdout, tty=tty)
        flat = " ".join(" ".join(line.lstrip("│├└─ ") for line in lines).split())
        assert "DeepseekV3ForCausalLM → vllm.model_executor.models.deepseek_v2.DeepseekV3ForCausalLM" in flat
        assert re.search(r"layer loop at line \d+: no layer index; captures aux hidden states: no", flat), flat
        mro = flat[flat.index("MRO"):flat.index("members")]
        assert "vllm/model_executor/models/deepseek_v2.py:" in mro and "vllm/model_executor/models/interfaces.py:" in mro


# -- 5, 10. gate and matrix print a table: the same rendering as scan ------------------------------


def test_gate_table_keeps_target_names_whole_on_a_terminal_and_piped():
    for tty in (True, False):
        p = run("gate", "-m", "kimi_k2", "--candidate-version", "0.16.0", "--no-config", "--no-progress", tty=tty)
        assert p.returncode == 1, p.stderr
        lines = readable(p.stdout, wrapped=tty, tty=tty)
        targets = column_text(lines, 0)
        assert "DeepseekV3ForCausalLM" in targets and "KimiK25ForConditionalGeneration" in targets
        assert "image-token" in column_text(lines, 2)  # candidate (no current tree: no current column)
        assert "|---" not in p.stdout  # a table, not raw Markdown


def test_table_is_one_rendering_and_differs_from_markdown(tmp_path):
    table = run(*GATE, "-f", "table")
    default = run(*GATE)
    markdown = run(*GATE, "-f", "markdown")
    assert table.stdout == default.stdout and table.stdout != markdown.stdout
    assert "┏" in table.stdout and "| target | method |" in markdown.stdout
    readable(table.stdout, wrapped=False)
    matrix = run("matrix", "-m", "kimi_k2", "--versions", "0.16.0", "--no-config", "--no-progress", "-j", "1")
    assert matrix.returncode == 1, matrix.stderr  # no release listed supports every target
    lines = readable(matrix.stdout, wrapped=False)
    assert "┏" in matrix.stdout and "|---" not in matrix.stdout
    assert "allowlist" in column_text(lines, 1)
    for command in ("gate", "matrix", "compare", "explain", "rules"):
        help_text = run(command, "--help").stdout
        assert "[default: table]" not in help_text, command


# -- 6. rules at 80 columns --------------------------------------------------------------------


def test_rules_table_at_80_columns_cuts_nothing():
    """At 80 columns the rules are a list of sections (issue 21: a table's text column was 31
    characters, 434 lines); from 100 columns, the table. Nothing is cut either way."""
    from rules.registry import RULES

    p = run("rules")
    assert p.returncode == 0, p.stderr
    lines = readable(p.stdout)
    assert "┏" not in p.stdout
    text = " ".join(" ".join(lines).split())
    heads = [line for line in lines if line[:2] == "EA"]
    assert [h.split()[0] for h in heads] == list(RULES)
    for code, r in RULES.items():
        assert f"{code} {r.GATE} (" in text
        assert f"Why: {' '.join(r.WHY.split())}" in text, code
        assert f"Fix: {' '.join(r.HOW_TO_FIX.split())}" in text, code
    wide = run("rules", columns=120)
    lines = readable(wide.stdout, width=120)
    gates = [g for g in (c.strip() for c in column_text(lines, 1).split("\n")) if g]
    cells = " ".join(line.strip("│ ").split("│")[-1].strip() for line in lines if line.startswith("│"))
    for code, r in RULES.items():
        assert code in wide.stdout and r.GATE in "".join(gates)
        assert " ".join(r.HOW_TO_FIX.split())[-30:] in " ".join(cells.split()).replace("- ", "-"), code


# -- 7. gate: gates not evaluated are skipped, as in scan ------------------------------------------


def test_gate_junit_and_json_mark_gates_not_evaluated(tmp_path):
    p = run(*GATE, "-f", "junit")
    assert p.returncode == 0, p.stderr
    root = ET.fromstring(p.stdout)
    cases = {c.get("name"): c for c in root.iter("testcase")}
    for gate in ("mtp-draft", "draft-registry", "aux-layers"):
        skipped = cases[gate].find("skipped")
        assert skipped is not None and skipped.get("message", "").startswith("not evaluated: "), gate
    assert cases["allowlist"].find("skipped") is None
    suite = next(root.iter("testsuite"))
    assert int(suite.get("skipped")) >= 3
    doc = json.loads(run(*GATE, "-f", "json").stdout)
    skipped = {n["gate"]: n["reason"] for n in doc["targets"][0]["not_evaluated"]}
    assert "mtp-draft" in skipped and "draft-registry" in skipped and "allowlist" not in skipped
    assert "--draft-config" in skipped["draft-registry"]


# -- 9. matrix counts releases and targets ---------------------------------------------------------


def test_matrix_summary_counts_releases_and_targets():
    p = run("matrix", "-m", "kimi_k2", "--versions", "0.16.0", "--no-config", "--no-progress", "-j", "1",
            "-f", "json")
    assert p.returncode == 1, p.stderr  # 0.16.0 supports neither target
    assert re.search(r"^eagle-audit matrix: 1 release × 2 targets in ", p.stderr, re.M), p.stderr
    assert "rows" not in p.stderr.splitlines()[-1]


# -- 12. the top-level help ----------------------------------------------------------------------


def test_top_level_help_keeps_command_summaries_whole():
    p = run("--help")
    commands = p.stdout[p.stdout.index("Commands:"):].splitlines()[1:]
    assert [c.split()[0] for c in commands if re.match(r"  \w", c)] == [
        "scan", "verify", "explain", "rules", "fix", "gate", "matrix", "compare", "cache"]
    assert not [c for c in commands if c.rstrip().endswith("...")], commands
    assert all(len(c) <= 80 for c in commands)


# -- 17, 18. -o - and a missing folder -----------------------------------------------------------


def test_o_dash_is_stdout(tmp_path):
    for args in (("scan", MINIVLLM, "--model", "LlamaForCausalLM", "-f", "json"), (*GATE, "-f", "json"),
                 ("rules", "-f", "json"), ("explain", "LlamaForCausalLM", MINIVLLM, "-f", "json")):
        p = run(*args, "-o", "-", cwd=tmp_path)
        assert p.returncode == 0, (args, p.stderr)
        assert json.loads(p.stdout) and "wrote" not in p.stderr
        assert not (tmp_path / "-").exists()


def test_a_missing_parent_folder_is_refused_before_any_work(tmp_path):
    target = tmp_path / "nonexistent" / "dir" / "r.json"
    for args in (("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2"), ("gate", "--candidate-version", "0.16.0",
                 "-m", "kimi_k2"), ("matrix", "--versions", "0.16.0", "-m", "kimi_k2"), ("rules",),
                 ("compare", "-m", "kimi_k2", "--vllm-version", "0.16.0", "--sglang-version", "0.5.9"),
                 ("explain", "kimi_k2", "--vllm-version", "0.16.0")):
        line = one_line_error(run(*args, "--no-progress", "-o", target) if args[0] != "rules" else run(*args, "-o", target))
        assert f"cannot be created: the folder {target.parent} does not exist" in line, (args, line)
    assert not (tmp_path / "nonexistent").exists()


# -- 20. README: -o on every command that writes a report; rules Markdown has why and how to fix ----


def test_rules_markdown_has_why_and_how_to_fix_and_o_writes_it(tmp_path):
    from rules.registry import RULES

    p = run("rules", "-o", tmp_path / "rules.md")
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "rules.md").read_text()
    for code, r in RULES.items():
        section = text[text.index(f"### {code} `{r.GATE}`"):]
        assert f"**Why:** {r.WHY}" in section and f"**How to fix:** {r.HOW_TO_FIX}" in section
    readme = (REPO / "README.md").read_text()
    claim = re.search(r"`-o/--output FILE` \(([^)]*)\)", readme).group(1)
    for command in ("scan", "explain", "gate", "matrix", "compare", "rules"):
        assert command in claim
        assert "-o, --output FILE" in run(command, "--help").stdout, command
    assert "fix" not in claim.replace("suffix", "")
