"""The rough edges a third new-user trial (issue 21) found, and two items of issue 19, each checked
as the user meets it: ``eagle-audit`` run as a subprocess (piped, ``COLUMNS=80``, no colour) on
synthetic trees (``fixtures/minivllm`` laid out as a folder, an environment or an archive).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_tree
from tests.clitools import one_line_error

REPO = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "FORCE_COLOR")}
    env.update(NO_COLOR="1", COLUMNS="80")
    env.update(extra)
    return env


def run(*args, cwd: Path = REPO, **extra: str) -> subprocess.CompletedProcess:
    """``eagle-audit ARGS`` with stdout and stderr piped, at 80 columns, without colour."""
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=_env(**extra))




def fake_environment(tmp_path: Path, name: str = "env", with_vllm: bool = True) -> Path:
    """A virtual environment laid out on disk (``pyvenv.cfg``, ``bin/python3.99`` as a script that
    would leave a marker if it ever ran, ``lib/python3.99/site-packages``), holding minivllm's
    ``vllm/`` when ``with_vllm``. Returns its folder."""
    env = tmp_path / name
    site = env / "lib" / "python3.99" / "site-packages"
    site.mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /nowhere/bin\nversion = 3.99.0\n")
    (env / "bin").mkdir()
    exe = env / "bin" / "python3.99"
    exe.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(env / 'RAN'))}\n")
    exe.chmod(0o755)
    if with_vllm:
        tree = make_tree(tmp_path / f"{name}-src")
        (tree / "vllm").rename(site / "vllm")
    return env


# -- 1. wrong paths ------------------------------------------------------------------------------


def test_an_interpreter_as_path_suggests_python_and_the_suggestion_runs(tmp_path):
    env = fake_environment(tmp_path)
    exe = env / "bin" / "python3.99"
    line = one_line_error(run("scan", exe, "--no-progress"))
    assert line == (f"{exe} is a Python interpreter, not an engine tree or a release archive: to audit the vllm "
                    f"(or sglang) installed in its environment, use --python {exe}")
    assert "checksum" not in line
    suggested = line.rsplit("use ", 1)[1].split()  # the copied option still runs
    ok = run("scan", *suggested, "--model", "LlamaForCausalLM", "--no-progress")
    assert ok.returncode == 0, ok.stderr
    assert "supported" in ok.stdout
    assert not (env / "RAN").exists()  # the interpreter was never run


def test_a_file_that_is_neither_tree_nor_archive_says_so(tmp_path):
    plain = tmp_path / "pyproject.toml"
    plain.write_text("[project]\nname = 'x'\n")
    assert one_line_error(run("scan", plain, "--no-progress")) == (
        f"{plain} is neither an engine tree nor a release archive: give a vllm/ (or sglang/) package folder, a "
        "source checkout, or a release archive (.tar.gz, .whl)")
    tree = make_tree(tmp_path)  # the pyproject.toml of a checkout: its folder is the tree
    (tree / "pyproject.toml").write_text("[project]\nname = 'vllm'\n")
    line = one_line_error(run("scan", tree / "pyproject.toml", "--no-progress"))
    assert line.endswith(f"; to audit the tree it belongs to, give its folder: {tree}"), line
    corrupt = tmp_path / "vllm-1.0.tar.gz"  # an archive's name: a corrupt archive, as before
    corrupt.write_bytes(b"not gzip at all" * 10)
    assert one_line_error(run("scan", corrupt, "--no-progress")).startswith(f"cannot read archive {corrupt}: ")


def test_an_environment_folder_as_path_suggests_python(tmp_path):
    env = fake_environment(tmp_path)
    line = one_line_error(run("scan", env, "--no-progress"))
    assert line == (f"{env} is a Python environment, not an engine tree: to audit the vllm (or sglang) installed "
                    f"in it, use --python {env}")
    ok = run("scan", *line.rsplit("use ", 1)[1].split(), "-m", "LlamaForCausalLM", "--no-progress")
    assert ok.returncode == 0, ok.stderr


def test_explain_with_only_a_path_treats_it_as_the_tree(tmp_path):
    tree = make_tree(tmp_path)
    pkg = tree / "vllm"
    assert one_line_error(run("explain", pkg)) == (
        f"explain {pkg}: give the architecture to explain (eagle-audit explain ARCH {pkg}), --model NAME, or --all")
    ok = run("explain", pkg, "--model", "LlamaForCausalLM", "-f", "json")
    assert ok.returncode == 0, ok.stderr
    assert '"architecture": "LlamaForCausalLM"' in ok.stdout
    # a name that is no path on disk stays a name: the repo-id hint, not "does not exist"
    assert "Hugging Face repo id" in one_line_error(run("explain", "moonshotai/Kimi-K2-Instruct", tree))


def test_python_given_as_a_command_is_looked_up_on_path(tmp_path):
    env = fake_environment(tmp_path)
    path = f"{env / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    ok = run("scan", "--python", "python3.99", "-m", "LlamaForCausalLM", "-f", "json", "--no-progress", PATH=path)
    assert ok.returncode == 0, ok.stderr
    assert f"--python python3.99 ({env / 'bin' / 'python3.99'})" in ok.stdout
    assert not (env / "RAN").exists()
    assert one_line_error(run("scan", "--python", "python3.98", "--no-progress", PATH=str(env / "bin"))) == (
        "--python python3.98: no such interpreter or environment folder, and no such command on PATH")


def test_the_default_environment_error_names_the_environments_searched(tmp_path):
    empty = fake_environment(tmp_path, "empty", with_vllm=False)
    line = one_line_error(run("scan", "--no-progress", cwd=tmp_path, VIRTUAL_ENV=str(empty)))
    assert line == (f"no vllm or sglang installed in the activated environment (VIRTUAL_ENV={empty}) nor in "
                    f"eagle-audit's own environment ({sys.prefix}); pass a PATH, --python PYTHON (the interpreter "
                    "or environment folder where it is installed) or --vllm-version X")
    line = one_line_error(run("scan", "--no-progress", cwd=tmp_path))
    assert line.startswith(f"no vllm or sglang installed in eagle-audit's own environment ({sys.prefix}); "), line


# -- 2. rules CODE | GATE --------------------------------------------------------------------------


def _prose(text: str) -> str:
    """The lines of a rules section that are not example code, joined with single spaces."""
    return " ".join(" ".join(line.split()) for line in text.splitlines() if not line.startswith("    "))


def test_rules_of_one_code_show_why_fix_and_examples():
    from rules.registry import RULES

    rule = RULES["EA302"]
    p = run("rules", "EA302")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("EA302 interface (vLLM): blocks, fix available (eagle-audit fix); methods eagle3\n")
    text = _prose(p.stdout)
    assert f"What: {' '.join(rule.SUMMARY.split())}" in text
    assert f"Why: {' '.join(rule.WHY.split())}" in text
    assert f"How to fix: {' '.join(rule.HOW_TO_FIX.split())}" in text
    for kind in ("VALID", "INVALID"):
        for i, ex in enumerate(getattr(rule, kind), 1):
            assert f"{kind} {i}: {ex.architecture}" in text
    assert "INVALID 1: ToyV4ForCausalLM (empty subclass of a class without SupportsEagle3): reports error" in text
    assert "    class ToyV4ForCausalLM(ToyV2ForCausalLM):\n        pass\n" in p.stdout  # the example's code, as written
    assert "EA402" not in p.stdout and "EA301" not in p.stdout
    assert all(len(line) <= 80 for line in p.stdout.splitlines() if not line.startswith("    "))
    assert run("rules", "ea302").stdout == p.stdout


def test_rules_of_a_gate_show_its_vllm_and_sglang_rules():
    import json

    p = run("rules", "interface")
    assert p.returncode == 0, p.stderr
    heads = [line for line in p.stdout.splitlines() if line.startswith("EA")]
    assert [h.split(":")[0] for h in heads] == ["EA302 interface (vLLM)", "EA402 interface (SGLang)"]
    doc = json.loads(run("rules", "interface", "-f", "json").stdout)
    from rules.registry import RULES

    assert [d["code"] for d in doc] == ["EA302", "EA402"]
    for d in doc:
        rule = RULES[d["code"]]
        assert [(e["kind"], e["architecture"]) for e in d["examples"]] == (
            [("VALID", e.architecture) for e in rule.VALID] + [("INVALID", e.architecture) for e in rule.INVALID])
    md = run("rules", "EA302", "-f", "markdown").stdout
    assert md.startswith("## EA302 `interface` (vLLM)\n") and "```python\n" in md


def test_an_unknown_rule_is_one_line_with_close_matches():
    assert one_line_error(run("rules", "interfce")) == (
        "unknown rule 'interfce': neither a rule code (EA302) nor a gate id (interface); did you mean: interface?")
    assert "did you mean: " in one_line_error(run("rules", "EA3O2")) and "EA302" in run("rules", "EA3O2").stderr
    assert one_line_error(run("rules", "nothing-like-it")).endswith("; eagle-audit rules lists them")


# -- 3. eagle-audit cache ------------------------------------------------------------------------


def _cache(tmp_path: Path) -> Path:
    """A cache folder with one engine archive (and sidecar), one transformers wheel (and sidecar),
    two module summaries and a folder eagle-audit does not own; the archive was written 40 days
    ago, the rest now."""
    root = tmp_path / "cache"
    (root / "archives").mkdir(parents=True)
    (root / "index" / "ab").mkdir(parents=True)
    (root / "runtime").mkdir()
    files = {"archives/vllm-9.9.9.tar.gz": 3000, "archives/vllm-9.9.9.tar.gz.sha256": 64,
             "archives/transformers-9.9.9-py3-none-any.whl": 2000,
             "archives/transformers-9.9.9-py3-none-any.whl.sha256": 64,
             "index/ab/ab1.json": 300, "index/ab/ab2.json": 200, "runtime/venv.bin": 5000}
    for rel, size in files.items():
        (root / rel).write_bytes(b"x" * size)
    old = os.path.getmtime(root / "index" / "ab" / "ab1.json") - 40 * 86400
    for rel in ("archives/vllm-9.9.9.tar.gz", "archives/vllm-9.9.9.tar.gz.sha256"):
        os.utime(root / rel, (old, old))
    return root


def test_cache_says_where_it_is_and_its_size_per_kind(tmp_path):
    root = _cache(tmp_path)
    p = run("cache", EAGLE_AUDIT_CACHE_DIR=str(root))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[:2] == ["cache folder (from EAGLE_AUDIT_CACHE_DIR):", f"  {root}"]  # the path whole
    rows = {line.split()[0]: line.split() for line in lines[2:] if line.startswith("  ")}
    assert rows["archives"][1:5] == ["1", "entry", "3.0", "KiB"]  # 3000 + 64 bytes: archive and sidecar
    assert rows["wheels"][1:5] == ["1", "entry", "2.0", "KiB"]
    assert rows["summaries"][1:4] == ["2", "entries", "500"]
    assert rows["total"][1:3] == ["5.5", "KiB"]
    assert ("runtime/ (4.9 KiB): not a kind this eagle-audit writes (the test suite's engine venvs live in "
            "runtime/); not in the total, left alone by prune and clear: remove it by hand") in " ".join(
        " ".join(lines).split())
    assert all(len(line) <= 80 for line in lines[2:])
    empty = run("cache", EAGLE_AUDIT_CACHE_DIR=str(tmp_path / "none"))
    assert empty.returncode == 0 and "does not exist yet" in empty.stdout


def test_cache_prune_by_age_then_by_size_and_clear(tmp_path):
    root = _cache(tmp_path)
    env = {"EAGLE_AUDIT_CACHE_DIR": str(root)}
    p = run("cache", "prune", "--older-than", "30", **env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "removed 1 entry (archives 1): 3.0 KiB freed; the cache holds 2.5 KiB\n"
    assert not (root / "archives" / "vllm-9.9.9.tar.gz").exists()
    assert not (root / "archives" / "vllm-9.9.9.tar.gz.sha256").exists()
    assert (root / "archives" / "transformers-9.9.9-py3-none-any.whl").exists()
    p = run("cache", "prune", "--max-size", "1K", **env)  # the oldest first, until 1 KiB or less is left
    assert p.returncode == 0, p.stderr
    left = sorted(str(f.relative_to(root)) for f in root.rglob("*") if f.is_file())
    assert len(left) < 4 and "runtime/venv.bin" in left
    p = run("cache", "clear", **env)
    assert p.returncode == 0, p.stderr
    assert sorted(str(f.relative_to(root)) for f in root.rglob("*") if f.is_file()) == ["runtime/venv.bin"]
    assert run("cache", "prune", **env).stderr.strip() == (
        "eagle-audit: error: cache prune: give --older-than DAYS or --max-size SIZE (or both)")
    assert one_line_error(run("cache", "prune", "--max-size", "lots", **env)) == (
        "--max-size 'lots': not a size; give bytes or a number with K, M, G or T (500M, 1.5G)")


def test_cache_never_deletes_through_a_link(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "vllm-1.0.tar.gz").write_bytes(b"keep me")
    root = tmp_path / "cache"
    root.mkdir()
    (root / "archives").symlink_to(elsewhere, target_is_directory=True)
    line = one_line_error(run("cache", "clear", EAGLE_AUDIT_CACHE_DIR=str(root)))
    assert line == (f"refusing to delete in {root / 'archives'}: it is a symbolic link (to {elsewhere}), and "
                    "nothing is deleted through a link; nothing was removed")
    assert (elsewhere / "vllm-1.0.tar.gz").read_bytes() == b"keep me"
    linked_root = tmp_path / "linked"
    linked_root.symlink_to(elsewhere, target_is_directory=True)
    assert one_line_error(run("cache", "prune", "--older-than", "0", EAGLE_AUDIT_CACHE_DIR=str(linked_root))) == (
        f"refusing to delete in the cache folder {linked_root}: it is a symbolic link to {elsewhere}; set "
        "EAGLE_AUDIT_CACHE_DIR to the folder itself")
    assert (elsewhere / "vllm-1.0.tar.gz").exists()
    (root / "archives").unlink()  # a link inside a kind is removed as a link: its target stays
    (root / "index" / "ab").mkdir(parents=True)
    (root / "index" / "ab" / "x.json").symlink_to(elsewhere / "vllm-1.0.tar.gz")
    assert run("cache", "clear", EAGLE_AUDIT_CACHE_DIR=str(root)).returncode == 0
    assert not (root / "index" / "ab" / "x.json").is_symlink()
    assert (elsewhere / "vllm-1.0.tar.gz").read_bytes() == b"keep me"


# -- 4. gate names the current settings key -------------------------------------------------------


def _stub_tree(tmp_path: Path) -> Path:
    """minivllm with the EA305 INVALID example (a class that inherits the protocol's stubs) registered."""
    from tests.conftest import add_registry_row
    from rules.registry import RULES

    ex = RULES["EA305"].INVALID[0]
    tree = make_tree(tmp_path, {p: src for p, src in ex.files.items() if src is not None})
    add_registry_row(tree, ex.architecture, "stub")
    return tree


def test_gate_fail_on_warnings_and_sarif_name_the_current_key(tmp_path):
    from auditor.orchestration.config import setting

    allow = setting("allow_warnings")
    assert (allow.key, allow.flag) == ("allow-warnings", "--allow-warning")
    tree = _stub_tree(tmp_path)
    args = ["gate", "-m", "StubForCausalLM", "--model-type", "llama", "--candidate-version", tree, "--no-progress"]
    p = run(*args, "--fail-on-warnings")
    assert p.returncode == 1, p.stderr
    text = " ".join(p.stdout.split())
    assert ("warning EA305 is not allowed: StubForCausalLM.set_aux_hidden_state_layers is the SupportsEagle3 stub: "
            "it passes vLLM's check and does nothing at run time — fix it, or accept it with --allow-warning "
            "stub-member (or stub-member in allow-warnings in [tool.eagle-audit])") in text
    for fmt in ("table", "markdown", "sarif", "junit", "json"):
        out = run(*args, "--fail-on-warnings", "-f", fmt)
        assert "allowed-warnings" not in out.stdout + out.stderr, fmt
    sarif = run(*args, "--allow-warning", "stub-member", "--allow-warning", "pp-relative-index", "-f", "sarif")
    assert sarif.returncode == 0, sarif.stderr
    assert sarif.stdout.count('"justification": "accepted with --allow-warning or allow-warnings in '
                              '[tool.eagle-audit]"') == 3  # two stub members and the relative index
    assert "allowed-warnings" not in sarif.stdout


# -- 5. k in words --------------------------------------------------------------------------------


def test_the_number_of_speculative_tokens_is_said_in_words():
    for n, words in ((3, "3 speculative tokens per step"), (1, "1 speculative token per step")):
        md = run("scan", REPO / "fixtures" / "minivllm", "-m", "LlamaForCausalLM", "--num-speculative-tokens", n,
                 "-f", "markdown", "--no-progress")
        assert md.returncode == 0, md.stderr
        assert md.stdout.splitlines()[0] == f"### eagle-audit: vLLM 0.0.1+mini ({words})"
        table = run("scan", REPO / "fixtures" / "minivllm", "-m", "LlamaForCausalLM", "--num-speculative-tokens", n,
                    "--no-progress")
        assert f"({words})" in table.stdout.splitlines()[0]
        assert "k=" not in md.stdout + table.stdout


# -- 6. --transformers suggestions the tree accepts ------------------------------------------------


@pytest.mark.full  # asks the package index which transformers releases exist
def test_a_missing_transformers_release_suggests_only_releases_the_tree_accepts(tmp_path):
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    tree = make_tree(tmp_path)
    (tree / "requirements").mkdir()
    (tree / "requirements" / "common.txt").write_text("torch\ntransformers >= 4.56.0, < 5\n")
    line = one_line_error(run("scan", tree, "-m", "LlamaForCausalLM", "--transformers", "9.9.9", "--no-progress"))
    head = "--transformers 9.9.9: transformers 9.9.9 is not on the package index ("
    assert line.startswith(head), line
    assert "as a pure-Python wheel; nearest that the tree accepts (transformers<5,>=4.56.0): " in line
    suggested = [Version(v) for v in line.rsplit(": ", 1)[1].split(", ")]
    assert suggested and all(v in SpecifierSet("<5,>=4.56.0") for v in suggested), suggested
    # a tree that states no requirement: the nearest releases of the index, unfiltered
    plain = one_line_error(run("scan", REPO / "fixtures" / "minivllm", "-m", "LlamaForCausalLM", "--transformers",
                               "9.9.9", "--no-progress"))
    assert plain.startswith(head) and "; nearest: " in plain and "accepts" not in plain


# -- 7. issue 19 "Also": old MTP method strings everywhere, and what the table did not check --------


def _mtp_tree(tmp_path: Path) -> Path:
    """minivllm with the EA308 VALID example: a release whose SpeculativeConfig maps the method
    string toy_mtp to mtp, with ToyV3ForCausalLM's registered MTP draft."""
    from tests.conftest import add_registry_row
    from rules.registry import RULES

    ex = RULES["EA308"].VALID[0]
    tree = make_tree(tmp_path, {p: src for p, src in ex.files.items() if src is not None})
    for row in ex.rows:
        add_registry_row(tree, *row)
    return tree


def test_old_mtp_method_strings_are_accepted_by_every_command(tmp_path):
    tree = _mtp_tree(tmp_path)
    target = ["-m", "ToyV3ForCausalLM"]
    scan = run("scan", tree, *target, "--method", "toy_mtp", "--no-progress")
    assert scan.returncode == 0, scan.stderr
    assert ("ToyV3ForCausalLM (mtp): draft ToyMTPModel → vllm.model_executor.models.toy_mtp.ToyMTP"
            in " ".join(scan.stdout.split()))  # wrapped at 80 columns
    fix = run("fix", tree, *target, "--method", "toy_mtp", "--no-progress")
    assert fix.returncode == 0 and "every target is already supported" in fix.stderr, fix.stderr
    gate = run("gate", *target, "--candidate-version", tree, "--method", "toy_mtp", "--no-progress")
    assert gate.returncode == 0 and gate.stdout.startswith("eagle-audit gate: native"), gate.stdout + gate.stderr
    compare = run("compare", *target, "--vllm-version", tree, "--sglang-version", REPO / "fixtures" / "minisglang",
                  "--method", "toy_mtp", "--no-progress")
    assert compare.returncode == 0, compare.stderr
    assert "supports every target: vLLM 0.0.1+mini" in compare.stdout
    # a string this release does not map is accepted by the command line and judged by the tree
    old = run("scan", tree, *target, "--method", "deepseek_mtp", "--no-progress")
    assert old.returncode == 1, old.stderr
    assert "SpeculativeConfig refuses it (use --method mtp)" in " ".join(old.stdout.split())
    assert run("compare", *target, "--vllm-version", tree, "--sglang-version", REPO / "fixtures" / "minisglang",
               "--method", "deepseek_mtp", "--no-progress").returncode == 1  # audited, not refused (2)
    matrix = run("matrix", "-m", "kimi_k2", "--versions", "0.16.0", "--method", "deepseek_mtp", "-f", "json",
                 "--no-progress")
    assert matrix.returncode == 1, matrix.stderr  # audited (blocked), not refused (2)
    assert "mtp-draft" in matrix.stdout


def test_the_table_says_which_gates_were_not_checked_on_every_verdict(tmp_path):
    mini = REPO / "fixtures" / "minivllm"
    p = run("scan", mini, "-m", "LlamaForCausalLM", "--no-progress")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "LlamaForCausalLM: eagle3, supported" in p.stdout.splitlines()  # at 80 columns, a block per target
    assert ("LlamaForCausalLM (eagle3, supported): not checked: pipeline parallelism (-pp N), your drafter "
            "(--draft-config), parallel drafting (--parallel-drafting)") in text
    both = run("scan", mini, "-m", "LlamaForCausalLM", "-m", "ToyVLForConditionalGeneration", "-pp", "2",
               "--no-progress")
    assert ("not checked for any target: your drafter (--draft-config), parallel drafting (--parallel-drafting)"
            in " ".join(both.stdout.split()))
    assert "pipeline parallelism (-pp N)" not in both.stdout
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "model_type": "llama", '
                                         '"eagle_aux_hidden_state_layer_ids": [1, 2]}')
    full = run("scan", mini, "-m", "LlamaForCausalLM", "-pp", "2", "--draft-config", drafter, "--parallel-drafting",
               "--num-speculative-tokens", "3", "--no-progress")
    assert full.returncode in (0, 1), full.stderr
    assert "not checked" not in full.stdout  # every gate of the method was reached
    mtp = run("scan", mini, "-m", "LlamaForCausalLM", "--method", "mtp", "--no-progress")
    assert ("LlamaForCausalLM (mtp, blocked): not checked: pipeline parallelism (-pp N), parallel drafting "
            "(--parallel-drafting)") in " ".join(mtp.stdout.split())


# -- 8. narrow terminals ----------------------------------------------------------------------------


def test_compare_keeps_names_and_gate_ids_whole_at_80_columns():
    p = run("compare", "-m", "ToyVLForConditionalGeneration", "-m", "LlamaForCausalLM", "--vllm-version",
            REPO / "fixtures" / "minivllm", "--sglang-version", REPO / "fixtures" / "minisglang", "--no-progress")
    assert p.returncode == 1, p.stderr
    rows = [line for line in p.stdout.splitlines() if line.startswith("│")]
    assert all(len(line) <= 80 for line in p.stdout.splitlines())
    cells = [[c.strip() for c in line.strip("│").split("│")] for line in rows]
    assert [c[0] for c in cells if c[0]] == ["ToyVLForConditionalGeneration", "LlamaForCausalLM"]
    vllm = [c[2] for c in cells if c[2]]
    assert vllm == ["blocked", "a patch exists", "allowlist", "interface", "aux-capture", "image-token",
                    "supported"]  # one gate a line (issue 21: a blocked cell says whether a patch exists)


def test_compare_too_narrow_for_its_table_prints_a_block_per_target():
    """A new user's trial: at 80 columns the compare table of vLLM 0.16.0 and SGLang 0.5.10.post1
    was 83 columns wide and cut by the terminal. When the table does not fit, each target is a
    line and each engine an indented line: verdict, patch words and gates, wrapped between words."""
    p = run("compare", "-m", "ToyVLForConditionalGeneration", "-m", "LlamaForCausalLM", "--vllm-version",
            REPO / "fixtures" / "minivllm", "--sglang-version", REPO / "fixtures" / "minisglang", "--no-progress",
            COLUMNS="56")
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    assert "┏" not in p.stdout and all(len(line) <= 56 for line in lines), p.stdout
    i = lines.index("ToyVLForConditionalGeneration: eagle3")
    block = " ".join(x.strip() for x in lines[i + 1:lines.index("LlamaForCausalLM: eagle3")])
    assert ": blocked (a patch exists): allowlist, interface, aux-capture, image-token" in block, block


def test_rules_is_a_list_of_sections_at_80_columns_and_a_table_when_wide():
    narrow = run("rules")
    assert narrow.returncode == 0 and "┏" not in narrow.stdout
    assert narrow.stdout.startswith("EA301 allowlist (vLLM): blocks, fix available; methods eagle3\n  Why: ")
    assert all(len(line) <= 80 for line in narrow.stdout.splitlines())
    wide = run("rules", COLUMNS="120")
    assert wide.returncode == 0 and wide.stdout.startswith("┏")


def test_a_copied_next_step_command_still_runs(tmp_path):
    """gate's next step, wrapped at 80 columns with shell continuations, run as copied into a
    shell; then the gate again with the codemods file it names."""
    tree = _stub_tree(tmp_path)
    gate = ["gate", "-m", "StubForCausalLM", "--candidate-version", tree, "--no-progress"]
    p = run(*gate, cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    start = lines.index("next step:") + 1
    command = []
    for line in lines[start:]:
        command.append(line.strip())
        if not line.endswith("\\"):
            break
    assert command[0].startswith("eagle-audit fix ") and len(command) > 1  # wrapped, with continuations
    # a line may pass 80 columns only when it is one word that cannot be broken (a long temp path)
    assert all(len(line) <= 80 or len(line.rstrip("\\").split()) == 1
               for line in lines[start:start + len(command)]), lines[start:start + len(command)]
    env = _env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    copied = subprocess.run(["bash", "-c", "\n".join(command)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert copied.returncode == 0, copied.stderr
    codemods = tmp_path / "eagle-audit" / "StubForCausalLM.vllm-0.0.1+mini.eagle3.codemods.json"
    assert codemods.is_file()
    assert f"then rerun this gate with --codemods {codemods.relative_to(tmp_path)}" in " ".join(
        " ".join(lines[start:]).split())
    again = run(*gate, "--codemods", codemods.relative_to(tmp_path), cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.startswith("eagle-audit gate: patched"), again.stdout + again.stderr
