"""The rough edges a second new-user trial of issue 12 found in CLI behaviour and messages, each
checked as the user meets it: ``eagle-audit`` run as a subprocess (piped, ``COLUMNS=80``) on real
releases (vLLM 0.16.0, 0.17.1 and 0.33.0, fetched through pip's index and cached) or on the
synthetic minivllm tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from tests.clitools import one_line_error

REPO = Path(__file__).resolve().parents[1]


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "FORCE_COLOR")}
    env.update(NO_COLOR="1", COLUMNS="80")
    return env


def run(*args, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """``eagle-audit ARGS`` with stdout and stderr piped, at 80 columns, without colour."""
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=_env())


def run_closed_reader(*args) -> subprocess.CompletedProcess:
    """``eagle-audit ARGS | head -0``: stdout is a pipe whose reader has already gone, so every
    write fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], stdout=w, stderr=subprocess.PIPE,
                           text=True, timeout=600, cwd=REPO, env=_env())
    finally:
        os.close(w)
    return p


def test_p1_closed_pipe_keeps_the_answers_exit_code_silently():
    for args in (["explain", "--all", "--vllm-version", "0.33.0"],
                 ["matrix", "-m", "kimi_k2", "--versions", "0.16.0,0.33.0", "--no-progress"],
                 ["gate", "-m", "kimi_k2", "--candidate-version", "0.17.1"]):
        answer = run(*args)
        closed = run_closed_reader(*args)
        assert answer.stdout  # the answer has something to write
        assert closed.returncode == answer.returncode, (args, closed.returncode, answer.returncode, closed.stderr)
        assert "Broken pipe" not in closed.stderr and "Traceback" not in closed.stderr
        assert "Exception ignored" not in closed.stderr
    assert run_closed_reader("gate", "-m", "kimi_k2", "--candidate-version", "0.17.1").returncode == 1
    assert run_closed_reader("explain", "--all", "--vllm-version", "0.33.0").returncode == 0


def test_p2_broken_gate_says_one_fix_command_with_the_users_names_once(tmp_path):
    p = run("gate", "-m", "kimi_k2", "--candidate-version", "0.17.1")
    assert p.returncode == 1, p.stderr
    assert p.stdout.count("eagle-audit fix ") == 1
    assert ("next step: eagle-audit fix --vllm-version 0.17.1 --model kimi_k2 --method eagle3 --out-dir eagle-audit"
            in " ".join(p.stdout.replace(" \\\n", " ").split()))  # a shell line continuation joins the command
    command = p.stdout.split("next step:\n", 1)[1].split("\n  (")[0]
    assert all(len(line) <= 80 for line in command.splitlines())  # copied as printed, it runs as one command
    assert "eagle-audit/kimi_k2.vllm-0.17.1.eagle3.codemods.json" in p.stdout.replace("\n", "")
    assert "--model DeepseekV3ForCausalLM" not in p.stdout
    # following it writes one file, and the gate accepts it
    f = run("fix", "--vllm-version", "0.17.1", "--model", "kimi_k2", "--method", "eagle3",
            "--out-dir", tmp_path / "eagle-audit")
    assert f.returncode == 0, f.stderr
    assert [x.name for x in (tmp_path / "eagle-audit").glob("*.codemods.json")] == [
        "kimi_k2.vllm-0.17.1.eagle3.codemods.json"]
    g = run("gate", "-m", "kimi_k2", "--candidate-version", "0.17.1", "--codemods",
            tmp_path / "eagle-audit" / "kimi_k2.vllm-0.17.1.eagle3.codemods.json")
    assert g.returncode == 0, g.stdout[-2000:]
    assert "next step" not in g.stdout


def test_p2_repeated_codemods_is_refused(tmp_path):
    a, b = tmp_path / "a.codemods.json", tmp_path / "b.codemods.json"
    for args in (["gate", "--candidate-version", "0.17.1"], ["fix", "--vllm-version", "0.17.1"]):
        p = run(*args, "--codemods", a, "--codemods", b)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert "--codemods given 2 times (a.codemods.json, b.codemods.json): give one file" in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1


def test_p11_fix_refuses_apply_with_out_dir(tmp_path):
    p = run("fix", tmp_path, "--model", "kimi_k2", "--apply", "--out-dir", tmp_path / "out")
    assert p.returncode == 2, p.stderr
    assert "give one of --out-dir DIR (write the patch and codemods files) or --apply (edit the tree), not both" \
        in p.stderr
    assert not (tmp_path / "out").exists()


def test_p12_fix_help_lists_sglang_version_beside_vllm_version_and_every_method():
    p = run("fix", "--help")
    assert p.returncode == 0
    options = [line.split()[0] for line in p.stdout.splitlines() if line.startswith("  --")]
    assert options.index("--sglang-version") == options.index("--vllm-version") + 1, options
    text = " ".join(p.stdout.split())
    assert "every EAGLE-3 gate" not in text
    assert "every gate of the method (EAGLE-3 unless --method says eagle or mtp)" in text




def test_p6_explain_suggests_close_names_like_scan():
    explain = one_line_error(run("explain", "kimi_k3", "--vllm-version", "0.16.0"))
    scan = one_line_error(run("scan", "-m", "kimi_k3", "--vllm-version", "0.16.0", "--no-progress"))
    assert explain == scan == ("unknown model 'kimi_k3': not an architecture in this tree's registry nor a known "
                               "model_type; did you mean: kimi_k2, kimi_k25?")


def test_p8_a_hugging_face_repo_id_gets_a_hint_and_suggestions():
    for args in (["scan", "-m", "moonshotai/Kimi-K2-Instruct", "--vllm-version", "0.16.0", "--no-progress"],
                 ["explain", "moonshotai/Kimi-K2-Instruct", "--vllm-version", "0.16.0"]):
        assert one_line_error(run(*args)) == (
            "unknown model 'moonshotai/Kimi-K2-Instruct': a Hugging Face repo id, and eagle-audit reads no hub; "
            "give the checkpoint's config.json (or its folder) with --hf-config, or its model_type or architecture "
            "with --model; did you mean: kimi_k2, kimi_k25?")


def test_p10_a_release_with_only_wheels_says_a_downloaded_wheel_is_a_path():
    msg = one_line_error(run("gate", "-m", "kimi_k2", "--candidate-version", "0.15.0"))
    assert "vLLM 0.15.0 has no source archive (sdist) on the package index" in msg and "only wheels" in msg
    assert ("only wheels; download its wheel (pip download vllm==0.15.0 --no-deps --only-binary :all:) and give "
            "the .whl file as the PATH, or pick another release; nearest releases with an sdist: 0.14.0, ") in msg


def test_p13_readme_explain_synopsis_names_sglang_version():
    readme = (REPO / "README.md").read_text()
    synopsis = [line for line in readme.splitlines() if line.startswith("eagle-audit explain ")]
    assert len(synopsis) == 2 and all("--sglang-version X" in line for line in synopsis)
    p = run("explain", "--help")
    assert "--sglang-version" in p.stdout


def test_p7_settings_errors_name_the_file_and_key_in_one_format(tmp_path):
    cases = {
        'models = ["kimi_k3"]': "models: unknown model 'kimi_k3': not an architecture in this tree's registry nor "
                                "a known model_type; did you mean: kimi_k2, kimi_k25?",
        'num-speculative-tokens = "3"': "num-speculative-tokens: '3' is not of type 'integer'",
        'draft-config = "nope.json"': f"draft-config: no such file: {tmp_path / 'nope.json'}",
        'modls = ["kimi_k2"]': "modls: not a setting; did you mean 'models'?",
    }
    for body, reason in cases.items():
        (tmp_path / "pyproject.toml").write_text(f"[tool.eagle-audit]\n{body}\n")
        msg = one_line_error(run("scan", "--vllm-version", "0.16.0", "--no-progress", cwd=tmp_path))
        assert msg == f"{tmp_path / 'pyproject.toml'} [tool.eagle-audit] {reason}", msg
    (tmp_path / "pyproject.toml").write_text('[tool.eagle-audit]\nmodels = ["kimi_k3"]\n')
    for args in (["explain"], ["fix"]):
        assert one_line_error(run(*args, "--vllm-version", "0.16.0", cwd=tmp_path)).startswith(
            f"{tmp_path / 'pyproject.toml'} [tool.eagle-audit] models: unknown model 'kimi_k3'")
    # the flag is the user's own word: no file is blamed
    assert one_line_error(run("scan", "--vllm-version", "0.16.0", "-m", "kimi_k4", "--no-progress", cwd=tmp_path)
                          ).startswith("unknown model 'kimi_k4'")
