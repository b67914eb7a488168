"""The rough edges a new-user trial of issue 12 found in settings, messages and next steps, each
checked as the user meets it: ``eagle-audit`` run as a subprocess on real releases (vLLM 0.16.0
and 0.33.0, SGLang 0.5.9; fetched through pip's index and cached) or on the synthetic minivllm
tree, in throwaway project folders with a ``pyproject.toml`` written here.

One module-scoped fixture prepares every input and runs every command (two at a time); each
test then asserts on its own command(s).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import MINIVLLM
from tests.clitools import one_line_error

REPO = Path(__file__).resolve().parents[1]
COMMANDS = ("scan", "explain", "fix", "gate", "matrix", "compare", "rules")


def run(*args, cwd: Path = REPO, columns: int = 80) -> subprocess.CompletedProcess:
    """``eagle-audit ARGS`` with stdout and stderr piped, at ``columns`` columns, without colour."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "FORCE_COLOR")}
    env.update(NO_COLOR="1", COLUMNS=str(columns))
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=env)




def readme_settings_block() -> str:
    """The README's ``[tool.eagle-audit]`` block, as a user copies it."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("<!-- settings:begin", 1)[1].split("\n", 1)[1].split("<!-- settings:end -->")[0]
    return block.strip().removeprefix("```toml").removesuffix("```").strip() + "\n"


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trial")
    # projects: a settings file for compare, one with a path that does not exist, the README's block
    compare_proj = tmp / "compare"
    compare_proj.mkdir()
    (compare_proj / "pyproject.toml").write_text('[tool.eagle-audit]\nmodels = ["kimi_k2"]\nmethods = ["mtp"]\n')
    bad = tmp / "bad"
    bad.mkdir()
    (bad / "pyproject.toml").write_text('[tool.eagle-audit]\nmodels = ["kimi_k2"]\ndraft-config = "drafter"\n')
    bad_codemods = tmp / "badcodemods"
    bad_codemods.mkdir()
    (bad_codemods / "pyproject.toml").write_text('[tool.eagle-audit]\nmodels = ["kimi_k2"]\n'
                                                 'codemods = "nope.codemods.json"\ncandidate-version = "0.16.0"\n')
    bad_versions = tmp / "badversions"
    bad_versions.mkdir()
    (bad_versions / "pyproject.toml").write_text('[tool.eagle-audit]\nmodels = ["kimi_k2"]\nversions = "0.16.0..0.12.0"\n')
    readme_proj = tmp / "readme"
    readme_proj.mkdir()
    (readme_proj / "pyproject.toml").write_text(readme_settings_block())
    empty = tmp / "empty"
    empty.mkdir()
    # a minivllm copy and a checkpoint config.json naming one of its architectures
    tree = tmp / "minivllm"
    shutil.copytree(MINIVLLM, tree, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    ckpt = tmp / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"architectures": ["ToyV3ForCausalLM"], "model_type": "toyfamily"}))

    v16 = ["--vllm-version", "0.16.0", "--no-progress"]
    sides = ["--vllm-version", "0.16.0", "--sglang-version", "0.5.9", "--no-progress"]
    cmds = {
        "matrix": (["matrix", "-m", "kimi_k2", "--versions", "0.16.0,0.33.0", "-j", "1", "--no-progress"], empty),
        "fix-mtp": (["fix", "-m", "kimi_k2", "--method", "mtp", *v16], empty),
        "explain-all-arch": (["explain", "DeepseekV3ForCausalLM", "--all", *v16], empty),
        "explain-all-model": (["explain", "--all", "-m", "kimi_k2", *v16], empty),
        "compare-settings": (["compare", *sides, "-f", "json"], compare_proj),
        "compare-no-config": (["compare", *sides, "--no-config"], compare_proj),
        "compare-config": (["compare", *sides, "--config", compare_proj / "pyproject.toml", "-f", "json"], empty),
        "compare-eagle3": (["compare", "-m", "kimi_k2", *sides, "--method", "eagle3"], empty),
        "bad-draft": (["scan", *v16], bad),
        "bad-draft-flag": (["scan", *v16, "--draft-config", "drafter"], bad),
        "bad-draft-fix": (["fix", *v16], bad),
        "bad-codemods": (["gate"], bad_codemods),
        "bad-versions": (["matrix", "-j", "1", "--no-progress"], bad_versions),
        "readme-scan": (["scan", *v16, "-f", "json"], readme_proj),
        "readme-gate": (["gate", "-f", "json", "--no-progress"], readme_proj),
        "tf-missing": (["scan", "-m", "kimi_k2", *v16, "--transformers", "9.9.9"], empty),
        "tf-unneeded": (["scan", "-m", "kimi_k2", *v16, "--transformers", "4.57.6", "-f", "json"], empty),
        "gate-no-target": (["gate", "--candidate-version", "0.16.0", "--no-progress"], empty),
        "gate-broken": (["gate", "-m", "kimi_k2", "--candidate-version", "0.16.0", "-f", "json", "--no-progress"],
                        empty),
        "format-yaml": (["scan", "-f", "yaml"], empty),
        "fix-hf-config": (["fix", tree, "--hf-config", ckpt, "--no-progress"], empty),
        **{f"help-{c}": ([c, "--help"], empty) for c in COMMANDS},
    }
    with ThreadPoolExecutor(2) as pool:
        futures = {k: pool.submit(run, *argv, cwd=cwd) for k, (argv, cwd) in cmds.items()}
        # explain's tree, wide enough that no line is cut (the width is another test's subject)
        futures["explain-mini"] = pool.submit(run, "explain", "LlamaForCausalLM", tree, "--no-progress", columns=200)
        r = {k: f.result() for k, f in futures.items()}
    return SimpleNamespace(r=r, tmp=tmp, bad=bad, bad_codemods=bad_codemods, bad_versions=bad_versions)


# -- item 8: the first native release is first among those listed ------------------------------


def test_matrix_says_first_among_the_releases_listed(cli):
    p = cli.r["matrix"]
    assert p.returncode == 0, p.stderr
    out = " ".join(p.stdout.split())  # wrapped at 80 columns (issue 21: one wrapping rule)
    assert "first with native support for all, among the releases listed: 0.33.0" in out
    assert "first with native support for DeepseekV3ForCausalLM, among the releases listed: 0.33.0" in out
    assert "first release with native support" not in p.stdout
    assert "first of the releases listed" in " ".join(cli.r["help-matrix"].stdout.split())


# -- item 11: fix with nothing to patch ------------------------------------------------------


def test_fix_with_no_codemod_never_speaks_of_after_the_patch(cli):
    p = cli.r["fix-mtp"]
    assert p.returncode == 1, p.stderr
    assert "after the patch" not in p.stderr and "after the codemods" not in p.stderr
    assert " DeepseekV3ForCausalLM: blocked (mtp-draft); no codemod applies, nothing was patched" in " ".join(
        p.stderr.split())  # wrapped at 80 columns (issue 21)
    assert "still failing" not in p.stderr  # "not auto-fixable" says why, once (trial 2, P17)
    assert p.stderr.rstrip().endswith("not fixed: nothing was written")
    assert p.stdout == ""


# -- item 13: explain --all with an ARCH -----------------------------------------------------


def test_explain_all_refuses_an_architecture(cli):
    assert one_line_error(cli.r["explain-all-arch"]).startswith("--all takes no ARCH: it explains every architecture")
    assert one_line_error(cli.r["explain-all-model"]).startswith("--all takes no --model")


# -- item 14: compare reads [tool.eagle-audit] -----------------------------------------------


def test_compare_reads_the_settings_file(cli):
    doc = json.loads(cli.r["compare-settings"].stdout)
    assert cli.r["compare-settings"].returncode == 1
    assert [(r["architecture"], r["method"]) for r in doc["rows"]] == [
        ("DeepseekV3ForCausalLM", "mtp"), ("KimiK25ForConditionalGeneration", "mtp")]
    assert doc["rows"][0]["engines"]["sglang"]["verdict"] == "supported"
    assert doc["rows"][0]["engines"]["vllm"]["blocking"] == ["mtp-draft"]
    # --config FILE names it from elsewhere; --no-config reads none
    assert json.loads(cli.r["compare-config"].stdout)["rows"] == doc["rows"]
    assert one_line_error(cli.r["compare-no-config"]) == "give --model NAME (or models in [tool.eagle-audit], pyproject.toml)"
    helptext = cli.r["help-compare"].stdout
    assert "--config FILE" in helptext and "--no-config" in helptext and "--hf-config" in helptext


def test_rules_reads_no_settings_and_the_readme_says_so(cli):
    assert "--config" not in cli.r["help-rules"].stdout
    readme = (REPO / "README.md").read_text()
    assert "| `--no-config` | every command but `verify`, `rules`, `cache` |" in readme  # generated (ux3b)
    assert ("The commands that audit (`scan`, `explain`, `fix`, `gate`, `matrix`, `compare`; not `rules`, `cache` or "
            "`verify`) read") in readme
    for c in COMMANDS:
        if c != "rules":
            assert "--no-config" in cli.r[f"help-{c}"].stdout, c


# -- item 15: a bad setting is blamed on the file and the key --------------------------------


def test_a_bad_setting_names_the_file_and_the_key(cli):
    where = f"{cli.bad / 'pyproject.toml'} [tool.eagle-audit]"
    assert one_line_error(cli.r["bad-draft"]) == f"{where} draft-config: no such file: {cli.bad / 'drafter'}"
    assert one_line_error(cli.r["bad-draft-fix"]) == f"{where} draft-config: no such file: {cli.bad / 'drafter'}"
    # the flag, when given, is blamed as the flag
    assert one_line_error(cli.r["bad-draft-flag"]) == "--draft-config: no such file: drafter"
    where = f"{cli.bad_codemods / 'pyproject.toml'} [tool.eagle-audit]"
    assert one_line_error(cli.r["bad-codemods"]) == (f"{where} codemods: no such file: "
                                                     f"{cli.bad_codemods / 'nope.codemods.json'}")
    where = f"{cli.bad_versions / 'pyproject.toml'} [tool.eagle-audit]"
    assert one_line_error(cli.r["bad-versions"]).startswith(f"{where} versions '0.16.0..0.12.0': the range")


def test_the_readme_settings_block_runs_as_copied(cli):
    block = readme_settings_block()
    assert re.search(r"^# draft-config = ", block, re.M) and re.search(r"^# hf-config = ", block, re.M)
    scan = cli.r["readme-scan"]
    assert scan.returncode == 1, scan.stderr  # kimi_k2 is blocked on 0.16.0: the answer, not an error
    doc = json.loads(scan.stdout)
    assert [r["architecture"] for r in doc["results"]] == ["DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"]
    assert doc["results"][0]["run_options"]["num_speculative_tokens"] == 3
    gate = cli.r["readme-gate"]
    assert gate.returncode in (0, 1), gate.stderr
    doc = json.loads(gate.stdout)
    assert doc["candidate"]["vllm_version"] == "0.18.0" and doc["current"]["vllm_version"] == "0.16.0"


# -- item 16: --transformers with a version that does not exist ------------------------------


def test_a_transformers_version_not_on_the_index_is_refused_up_front(cli):
    msg = one_line_error(cli.r["tf-missing"])
    assert msg.startswith("--transformers 9.9.9: transformers 9.9.9 is not on the package index")
    # only releases vLLM 0.16.0's own requirement accepts (issue 21: it suggested 5.22.0 for a tree needing <5)
    assert "; nearest that the tree accepts (transformers<5,>=4.56.0): " in msg
    assert all(v.startswith("4.") for v in msg.rsplit(": ", 1)[1].split(", ")), msg
    # a version that exists is read only when a verdict needs it: kimi_k2's verdicts do not
    p = cli.r["tf-unneeded"]
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["transformers"] is None


# -- item 19: the smaller ones ---------------------------------------------------------------


def test_messages_name_the_models_setting(cli):
    msg = one_line_error(cli.r["gate-no-target"])
    assert "models in [tool.eagle-audit]" in msg and "targets in" not in msg


def test_usage_lines_show_one_pair_of_brackets(cli):
    assert cli.r["help-scan"].stdout.startswith("Usage: eagle-audit scan [OPTIONS] [PATH]\n")
    assert cli.r["help-explain"].stdout.startswith("Usage: eagle-audit explain [OPTIONS] [ARCH] [PATH]\n")
    assert cli.r["help-fix"].stdout.startswith("Usage: eagle-audit fix [OPTIONS] [PATH]\n")
    for c in COMMANDS:
        assert "[[" not in cli.r[f"help-{c}"].stdout, c


def test_a_bad_choice_has_no_value_error_prefix(cli):
    msg = one_line_error(cli.r["format-yaml"])
    assert "Value error" not in msg
    assert msg.startswith("Invalid value for '--format' / '-f': 'yaml' is not one of 'table', 'json'")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_lists_exit_code_3(cli, command):
    text = " ".join(cli.r[f"help-{command}"].stdout.split())
    assert "Exit codes: 0 " in text and "3 internal error" in text


def test_explain_says_yes_or_no(cli):
    p = cli.r["explain-mini"]
    assert p.returncode == 0, p.stderr
    assert "captures aux hidden states: yes" in p.stdout and "returns aux hidden states: yes" in p.stdout
    assert "True" not in p.stdout and "False" not in p.stdout


def test_fix_takes_hf_config_like_scan(cli):
    assert "--hf-config FILE|DIR" in cli.r["help-fix"].stdout
    p = cli.r["fix-hf-config"]
    assert p.returncode == 0, p.stderr
    # the checkpoint names the target and its model_type: the allowlist patch admits that model_type
    assert "ToyV3ForCausalLM: blocked (allowlist, interface, aux-capture) -> supported after the patch" in " ".join(
        p.stderr.split())
    assert "+" in p.stdout and "toyfamily" in p.stdout


# -- item 21: next steps ---------------------------------------------------------------------


def test_compare_without_a_winner_says_who_supports_what_and_the_commands(cli):
    p = cli.r["compare-eagle3"]
    assert p.returncode == 1, p.stderr
    err = p.stderr.splitlines()
    assert "vLLM 0.16.0 supports none of the targets" in err
    assert "SGLang 0.5.9 supports DeepseekV3ForCausalLM" in err
    flat = " ".join(p.stderr.replace(" \\\n", " ").split())  # wrapped at 80 columns, commands with continuations
    assert ("next step (vLLM 0.16.0: 2 blocked targets with a fix available): eagle-audit fix --vllm-version 0.16.0 "
            "--model DeepseekV3ForCausalLM --model KimiK25ForConditionalGeneration --method eagle3 --out-dir "
            "eagle-audit") in flat
    assert ("next step (SGLang 0.5.9: 1 blocked target with a fix available): eagle-audit fix "
            "--sglang-version 0.5.9 --model KimiK25ForConditionalGeneration --method eagle3") in flat
    # no fix at all (mtp): the matrix command that finds a later release
    settings = cli.r["compare-settings"]
    assert "--versions 0.16.0.. --method mtp" not in settings.stderr  # JSON: nothing mixed in
    mtp = run("compare", "-m", "DeepseekV3ForCausalLM", "--vllm-version", "0.16.0", "--sglang-version", "0.5.9",
              "--method", "mtp", "--no-progress", "--no-config", "-f", "markdown")
    assert mtp.returncode == 0, mtp.stderr  # SGLang supports it: no next step needed
    assert "next step" not in mtp.stderr


def test_a_broken_gate_gives_the_exact_fix_command(cli):
    p = cli.r["gate-broken"]
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    # each reason names its codemod; that none were given is said once, by the next step (issue 21)
    assert {pr["codemod"] for t in doc["targets"] for pr in t["problems"]} == {
        "allowlist", "interface", "aux-capture", "image-token"}
    assert not any(pr.get("hint") for t in doc["targets"] for pr in t["problems"])
    assert doc["next_steps"] == [
        "eagle-audit fix --vllm-version 0.16.0 --model kimi_k2 --method eagle3 --out-dir eagle-audit  (no codemods "
        "were given (--codemods): this writes them to eagle-audit/kimi_k2.vllm-0.16.0.eagle3.codemods.json; then "
        "rerun this gate with --codemods eagle-audit/kimi_k2.vllm-0.16.0.eagle3.codemods.json)"]
