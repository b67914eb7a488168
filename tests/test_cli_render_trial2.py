"""Rendering problems a second new-user trial of issue 12 found (P4, P5, P14-P17), each checked
as the user meets it: ``eagle-audit`` run as a subprocess at ``COLUMNS=80``, piped, on real
releases (vLLM 0.16.0 and 0.33.0, fetched through pip's index and cached).

One module-scoped fixture runs every command (two at a time); each test asserts on its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(*args, cwd: Path = REPO, columns: int = 80) -> subprocess.CompletedProcess:
    """``eagle-audit ARGS`` with stdout and stderr piped, at ``columns`` columns, without colour."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "FORCE_COLOR")}
    env.update(NO_COLOR="1", COLUMNS=str(columns))
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trial2")
    v16 = ["--vllm-version", "0.16.0", "--no-progress"]
    cmds = {
        "scan16": ["scan", "-m", "kimi_k2", *v16],
        "scan16-file": ["scan", "-m", "kimi_k2", *v16, "-o", tmp / "r.txt"],
        "gate33": ["gate", "-m", "kimi_k2", "--candidate-version", "0.33.0", "--no-progress"],
        "gate33-junit": ["gate", "-m", "kimi_k2", "--candidate-version", "0.33.0", "--no-progress", "-f", "junit"],
        "gate16": ["gate", "-m", "kimi_k2", "--candidate-version", "0.16.0", "--no-progress"],
        "fix-mtp": ["fix", "-m", "kimi_k2", "--method", "mtp", *v16],
        **{f"help-{c}": [c, "--help"] for c in ("scan", "explain", "gate", "matrix", "compare", "rules")},
    }
    with ThreadPoolExecutor(2) as pool:
        futures = {k: pool.submit(run, *argv, cwd=tmp) for k, argv in cmds.items()}
        r = {k: f.result() for k, f in futures.items()}
    return SimpleNamespace(r=r, tmp=tmp)


# -- P5: -o help lists only the formats the command writes ---------------------------------------


@pytest.mark.parametrize("command,suffixes,refused", [
    ("scan", [".txt", ".json", ".md", ".sarif", ".xml"], []),
    ("gate", [".txt", ".json", ".md", ".sarif", ".xml"], []),
    ("explain", [".txt", ".json"], [".md", ".sarif", ".xml"]),
    ("matrix", [".txt", ".json", ".md"], [".sarif", ".xml"]),
    ("compare", [".txt", ".json", ".md"], [".sarif", ".xml"]),
    ("rules", [".txt", ".json", ".md"], [".sarif", ".xml"]),
])
def test_output_help_lists_only_the_formats_the_command_writes(cli, command, suffixes, refused):
    p = cli.r[f"help-{command}"]
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.replace("│", " ").split())
    help_o = text.split("--output FILE", 1)[1].split("--format is absent:", 1)[1].split(".", 1)[1]
    listed = "." + help_o.split(" -", 1)[0]
    for s in suffixes:
        assert s in listed, (command, listed)
    for s in refused:
        assert s not in listed, (command, listed)
    # each refused suffix is indeed refused, so the help and the command agree
    for s in refused:
        e = run(command, "-o", f"out{s}", cwd=cli.tmp)
        assert e.returncode == 2 and "Traceback" not in e.stderr, (command, s, e.stderr)


# -- P4: finding details wrap at the width with their indent -------------------------------------


def _finding_block(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("DeepseekV3ForCausalLM (eagle3"))
    return lines[start + 1:next(i for i, line in enumerate(lines) if line.startswith("KimiK25ForConditional"
                                                                                        "Generation (eagle3"))]


@pytest.mark.parametrize("key", ["scan16", "scan16-file"])
def test_finding_details_wrap_at_the_width_keeping_their_indent(cli, key):
    p = cli.r[key]
    assert p.returncode == 1, p.stderr
    text = p.stdout if key == "scan16" else (cli.tmp / "r.txt").read_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    block = _finding_block(text)
    heads = [line for line in block if line.startswith("  EA")]
    assert [h.split()[0] for h in heads] == ["EA301", "EA302", "EA303"]
    # every other line of a finding is a continuation, indented 4
    assert all(line.startswith("    ") for line in block if not line.startswith("  EA"))
    joined = " ".join(line.strip() for line in block)
    assert "(fix available)" in joined and joined.count("(fix available)") == 3
    assert "vllm/config/speculative.py:689" in joined
    # the allowlist message is whole, in order
    assert ("text model_type 'kimi_k2' (alias table) is not admitted by the eagle3 allowlist "
            "eagle3_target_supported ['llama', 'qwen',") in joined


# -- P15: gate JUnit lists the warnings the table lists -------------------------------------------


def test_gate_junit_has_a_case_per_warning_the_table_lists(cli):
    table, junit = cli.r["gate33"], cli.r["gate33-junit"]
    assert table.returncode == 0 and junit.returncode == 0, (table.stderr, junit.stderr)
    assert "stale-member (EA306)" in table.stdout
    root = ET.fromstring(junit.stdout)
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    for arch, where in (("DeepseekV3ForCausalLM", "vllm/model_executor/models/deepseek_v2.py:1958"),
                        ("KimiK25ForConditionalGeneration", "vllm/model_executor/models/kimi_k25.py:473")):
        case = cases[(arch, "stale-member")]
        assert case.find("failure") is None and case.find("skipped") is None  # reported, not failing
        out = case.find("system-out").text
        assert out.startswith(f"warning EA306 {where}: ")
        assert "get_eagle3_aux_hidden_state_layers" in out


# -- P16: the gate table keeps architecture names whole; empty columns are left out ---------------


@pytest.mark.parametrize("key", ["gate16", "gate33"])
def test_gate_table_keeps_architecture_names_whole(cli, key):
    p = cli.r[key]
    assert p.returncode == (1 if key == "gate16" else 0), p.stderr
    rows = [line for line in p.stdout.splitlines() if line.startswith(("│", "┃"))]
    cells = [[c.strip() for c in line.strip("│┃").split("│" if line.startswith("│") else "┃")] for line in rows]
    assert cells[0] == ["target", "method", "candidate", "outcome"]  # no current tree, no codemods: no "—" columns
    targets = [c[0] for c in cells[1:] if c[0]]
    assert targets == ["DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"]
    assert all(len(line) <= 80 for line in rows)


# -- P17: fix says each reason once ----------------------------------------------------------------


def test_fix_says_the_mtp_draft_reason_once(cli):
    p = cli.r["fix-mtp"]
    assert p.returncode == 1, p.stderr
    assert p.stdout == ""
    out = " ".join(p.stderr.split())  # the fix report, wrapped at 80 columns (issue 21: one wrapping rule)
    for arch in ("DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"):
        assert out.count(f"and architecture {arch}: vLLM has no MTP draft for this target") == 1, out
        assert f" {arch}: blocked (mtp-draft); no codemod applies, nothing was patched" in out
    assert out.count("to fix by hand:") == 2
    assert "still failing" not in out  # the per-target lines and "not auto-fixable" already say it
    assert out.rstrip().endswith("not fixed: nothing was written")


# -- P14: EA306 says what the dead override costs and what to do ----------------------------------


def test_stale_member_warning_says_the_consequence_and_the_rename(cli):
    p = cli.r["gate33"]
    assert p.returncode == 0, p.stderr
    warnings = " ".join(line.strip() for line in p.stdout.split("warnings:\n", 1)[1].splitlines())
    assert ("KimiK25ForConditionalGeneration stale-member (EA306) vllm/model_executor/models/kimi_k25.py:473: "
            "KimiK25ForConditionalGeneration.get_eagle3_aux_hidden_state_layers is never called by this tree: the "
            "layer choice it returns is ignored; the runner takes the aux hidden state layers from "
            "get_eagle3_default_aux_hidden_state_layers, or the drafter config's eagle_aux_hidden_state_layer_ids "
            "when it lists them. To keep the model's choice, rename the method to "
            "get_eagle3_default_aux_hidden_state_layers") in warnings
    assert "the override is dead" not in warnings
