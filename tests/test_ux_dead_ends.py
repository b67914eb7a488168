"""What was still open of issue 21 after its second round, each item as the user meets it:
``eagle-audit`` run as a subprocess at ``COLUMNS=80``, on a pseudo-terminal of 80 columns (stderr)
and piped, on real vLLM releases (fetched through pip's index and cached) and on synthetic trees.

Dead ends with pipeline parallelism (scan, fix, matrix, gate), one line per finding everywhere,
the broken gate's report and next step, file names in suggestions, where values came from,
EA306 with a drafter config, and one wrapping rule on stderr.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import MINIVLLM
from real import REPO, release_auditor
from test_cli_progress import on_a_terminal, piped

KIMI = "KimiK25ForConditionalGeneration"
DSV3 = "DeepseekV3ForCausalLM"


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_INTERACTIVE", "VIRTUAL_ENV")}
    env.update(COLUMNS="80", NO_COLOR="1")
    return env


def run(*args, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """``eagle-audit ARGS`` piped at 80 columns, from ``cwd``, importing this checkout's auditor."""
    env = _env()
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=900, cwd=cwd, env=env)


def fits(text: str, width: int = 80) -> bool:
    """Every line fits ``width``, but for a line that is one word (a path) longer than it: words
    are never cut."""
    return all(len(line) <= width or len(line.split()) == 1 for line in text.splitlines())


def copied_commands(text: str) -> list[str]:
    """Every ``eagle-audit …`` command of ``text`` as a user copies it: its line and the
    continuation lines that follow while a line ends with `` \\``."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.strip().startswith("eagle-audit ") and (i == 0 or not lines[i - 1].endswith("\\")):
            cmd = [line.strip()]
            j = i
            while lines[j].endswith("\\") and j + 1 < len(lines):
                j += 1
                cmd.append(lines[j].strip())
            out.append("\n".join(cmd))
    return out


def run_copied(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """A copied command run by bash, with ``eagle-audit`` being this checkout's."""
    shim = cwd / "bin"
    shim.mkdir(exist_ok=True)
    exe = shim / "eagle-audit"
    exe.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m auditor \"$@\"\n")
    exe.chmod(0o755)
    env = _env()
    env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=900, cwd=cwd, env=env)


# -- dead ends with pipeline parallelism --------------------------------------------------------


def test_scan_and_fix_with_pp_name_a_release_that_has_a_way_and_it_works(tmp_path):
    release_auditor("0.33.0")  # a release with the transport is in the cache, as after the suite's other tests
    fix = run("fix", "--vllm-version", "0.16.0", "-m", "kimi_k2", "-pp", "2", "--no-config", "--no-progress",
              cwd=tmp_path)
    assert fix.returncode == 1 and "not fixed: nothing was written" in fix.stderr
    assert fits(fix.stderr), [line for line in fix.stderr.splitlines() if len(line) > 80]
    m = re.search(r"next step \(vLLM (\d+\.\d+\.\d+), [^)]*has what the patch needs with this run\): eagle-audit fix "
                  r"--vllm-version (\d+\.\d+\.\d+) --model kimi_k2 --method eagle3 \\ --pipeline-parallel-size 2",
                  " ".join(fix.stderr.split()))
    assert m and m.group(1) == m.group(2), fix.stderr
    assert tuple(map(int, m.group(1).split("."))) > (0, 16, 0)
    commands = copied_commands(fix.stderr)
    other = [c for c in commands if f"--vllm-version {m.group(1)}" in c]
    assert other and "--pipeline-parallel-size 2" in other[0], commands
    # scan reads what fix found from the cache (it audits no other release itself), on a terminal
    code, _, screen = on_a_terminal("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2", "-pp", "2", "--no-config")
    assert code == 1, screen[-3000:]
    joined = " ".join(screen.split())
    assert (f"next step (vLLM {m.group(1)}, " in joined and f"eagle-audit fix --vllm-version {m.group(1)} --model "
            "kimi_k2 --method eagle3 \\ --pipeline-parallel-size 2") in joined, joined
    assert ("next step (without pipeline parallelism, every gate has a patch in vLLM 0.16.0): eagle-audit fix "
            "--vllm-version 0.16.0 --model kimi_k2 --method eagle3") in joined
    assert fits(screen)
    # the same scan again comes from the result cache, whose targets were never resolved: the dead
    # end's steps resolve them (this raised TypeError, exit 3, whenever the cache held the report)
    code, _, again = on_a_terminal("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2", "-pp", "2", "--no-config")
    assert code == 1, again[-3000:]
    assert "next step (without pipeline parallelism" in " ".join(again.split())
    # the release named is no guess: fix writes a validated patch there with -pp 2
    done = run_copied(other[0], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("--- a/") and "[pp-aux-transport]" in done.stderr
    plain = [c for c in commands if "--vllm-version 0.16.0" in c]
    assert plain and "pipeline-parallel" not in plain[0]
    assert run_copied(plain[0], tmp_path).returncode == 0


def test_matrix_cells_tell_a_patch_from_no_local_patch(tmp_path):
    args = ("matrix", "-m", "kimi_k2", "--versions", "0.16.0,0.33.0", "-pp", "2", "--no-config", "--no-progress",
            "-j", "1")
    table = run(*args)
    assert table.returncode == 1, table.stderr  # no release listed supports the targets with -pp 2
    assert fits(table.stdout) and fits(table.stderr)
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in table.stdout.splitlines()
            if line.startswith("│")]
    first = {r[0]: i for i, r in enumerate(rows) if r[0]}
    assert rows[first["0.16.0"] + 1][1:] == ["no local patch", "no local patch"]
    assert rows[first["0.33.0"] + 1][1:] == ["a patch exists", "a patch exists"]
    assert "blocked, a patch exists: eagle-audit fix patches every blocking gate" in " ".join(table.stdout.split())
    md = run(*args, "-f", "markdown").stdout
    assert f"| 0.33.0 | blocked, a patch exists: pp-aux-transport | blocked, a patch exists: pp-aux-transport |" in md
    assert "| 0.16.0 | blocked, no local patch: allowlist, interface, aux-capture, pp-aux-transport |" in md
    doc = json.loads(run(*args, "-f", "json").stdout)
    assert {(r["vllm_version"], r["fix_available"]) for r in doc["rows"]} == {("0.16.0", False), ("0.33.0", True)}
    html = run(*args, "-o", tmp_path / "m.html")
    page = (tmp_path / "m.html").read_text()
    assert html.returncode == 1 and 'data-release="0.16.0"' in page
    kinds = dict(re.findall(r'data-release="([^"]+)" data-target="[^"]+" data-verdict="[^"]+" data-kind="([^"]+)"',
                            page))
    assert kinds == {"0.16.0": "blocked-no-patch", "0.33.0": "blocked-patch"}
    assert "blocked, no local patch" in page


def test_gate_with_pp_never_names_a_codemod_beside_no_local_patch(tmp_path):
    release_auditor("0.33.0")
    args = ("gate", "-m", "kimi_k2", "--candidate-version", "0.18.0", "-pp", "2", "--no-config", "--no-progress")
    p = run(*args, cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    text = " ".join(p.stdout.split())
    assert "(codemod pp-aux-transport)" not in text and "no codemod exists" not in text
    assert text.count("no local patch: its codemod cannot patch this release") == 2
    assert fits(p.stdout)
    (command,) = copied_commands(p.stdout.split("next step:")[1])
    assert "--pipeline-parallel-size 2" in command and "--vllm-version 0.18.0" not in command
    doc = json.loads(run(*args, "-f", "json", cwd=tmp_path).stdout)
    problems = [pr for t in doc["targets"] for pr in t["problems"]]
    assert problems and all(pr["codemod"] is None for pr in problems)


def test_scan_and_fix_cite_a_finding_at_the_same_line(tmp_path):
    doc = json.loads(run("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2", "-pp", "2", "-f", "json",
                         "--no-config").stdout)
    (where,) = {f"{f['path']}:{f['line']}" for r in doc["results"] for f in r["findings"]
                if f["gate"] == "pp-aux-transport"}
    fix = run("fix", "--vllm-version", "0.16.0", "-m", "kimi_k2", "-pp", "2", "--no-config", "--no-progress",
              cwd=tmp_path)
    cited = set(re.findall(r"pp-aux-transport \((vllm/[^)]+:\d+)\)", " ".join(fix.stderr.split())))
    assert cited == {where}, (cited, where)


# -- the broken gate's report and next step; file names --------------------------------------------


def test_a_broken_gate_says_once_that_no_codemods_were_given_and_points_at_your_file(tmp_path):
    args = ("gate", "-m", "kimi_k2", "--candidate-version", "0.17.1", "--no-config", "--no-progress")
    p = run(*args, cwd=tmp_path)
    assert p.returncode == 1
    text = " ".join(p.stdout.split())
    assert text.count("no codemods were given") == 1 and text.count("(a codemod fixes it)") == 7
    assert fits(p.stdout)
    (command,) = copied_commands(p.stdout.split("next step:")[1])
    done = run_copied(command, tmp_path)
    assert done.returncode == 0, done.stderr
    written = sorted(x.name for x in (tmp_path / "eagle-audit").glob("*.codemods.json"))
    assert written == ["kimi_k2.vllm-0.17.1.eagle3.codemods.json"]
    assert f"then rerun this gate with --codemods eagle-audit/{written[0]}" in text
    again = run(*args, cwd=tmp_path)
    assert ("rerun this gate with --codemods eagle-audit/kimi_k2.vllm-0.17.1.eagle3.codemods.json (no codemods "
            "were given") in " ".join(again.stdout.split())


def test_suggested_file_names_are_the_ones_fix_writes(tmp_path):
    p = run("fix", "--vllm-version", "0.16.0", "-m", "kimi_k2", "--out-dir", "eagle-audit", "--no-config",
            "--no-progress", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    (written,) = [f"eagle-audit/{x.name}" for x in (tmp_path / "eagle-audit").glob("*.codemods.json")]
    for command in ("gate", "fix"):
        assert written in run(command, "--help").stdout.split(), command
    readme = (REPO / "README.md").read_text()
    assert readme.count(written) >= 3 and "patches/" not in readme
    gate = run("gate", "-m", "kimi_k2", "--candidate-version", "0.16.0", "--no-config", "--no-progress", cwd=tmp_path)
    assert f"rerun this gate with --codemods {written}" in " ".join(gate.stdout.split())
    compare = run("compare", "-m", "kimi_k2", "--vllm-version", "0.16.0", "--sglang-version", "0.5.9",
                  "--no-config", "--no-progress", cwd=tmp_path)
    named = re.findall(r"(eagle-audit/\S+\.codemods\.json)", " ".join(compare.stderr.split()))
    assert named and all(n.endswith(".vllm-0.16.0.eagle3.codemods.json") or ".sglang-" in n for n in named), named


def test_scan_with_hf_config_suggests_fix_with_hf_config_and_it_runs(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"architectures": ["ToyV3ForCausalLM"], "model_type": "toyfamily"}))
    p = run("scan", MINIVLLM, "--hf-config", ckpt, "--no-config", "--no-progress", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    (command,) = copied_commands(p.stderr)
    assert f"--hf-config {ckpt}" in " ".join(command.replace("\\\n", " ").split())
    done = run_copied(command, tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("--- a/"), done.stderr


# -- where values came from; EA306 with a drafter config --------------------------------------------


def test_a_value_from_the_settings_file_is_labelled_with_the_file_and_key(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.eagle-audit]\nmodels = ["ToyV3ForCausalLM"]\n'
                                             'model-type = "toyfamily"\n')
    p = run("scan", MINIVLLM, "--no-progress", cwd=tmp_path)
    assert p.returncode == 1
    assert "(pyproject.toml model-type)" in p.stdout and "(--model-type)" not in p.stdout
    said = [line for line in p.stderr.splitlines() if line.startswith("eagle-audit: settings:")]
    assert len(said) == 1 and said[0].startswith("eagle-audit: settings: [tool.eagle-audit] of pyproject.toml")
    assert fits(p.stderr)
    flag = run("scan", MINIVLLM, "--model-type", "toyfamily", "--no-progress", cwd=tmp_path)
    assert "(--model-type)" in flag.stdout and "(it gives models)" in " ".join(flag.stderr.split())
    quiet = run("scan", MINIVLLM, "-m", "ToyV3ForCausalLM", "--no-config", "--no-progress", cwd=tmp_path)
    assert "settings:" not in quiet.stderr


def test_stale_member_is_not_shown_when_the_drafter_config_decides_the_layers(tmp_path):
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
                                                     "eagle_aux_hidden_state_layer_ids": [1, 2]}))
    base = ("scan", "--vllm-version", "0.18.0", "-m", "kimi_k2", "-v", "--no-config", "--no-progress")
    without = run(*base)
    assert without.stdout.count("EA306 stale-member") == 2
    withd = run(*base, "--draft-config", drafter)
    assert "stale-member" not in withd.stdout, withd.stdout


# -- one wrapping rule --------------------------------------------------------------------------------


def test_stderr_of_every_command_fits_80_columns_on_a_terminal_and_piped(tmp_path):
    for args in (("fix", "--vllm-version", "0.16.0", "-m", "kimi_k2", "-pp", "2", "--no-config"),
                 ("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2", "--no-config"),
                 ("compare", "-m", "kimi_k2", "--vllm-version", "0.16.0", "--sglang-version", "0.5.9", "--no-config")):
        code, _, screen = on_a_terminal(*args)
        assert code == 1 and "next step" in screen
        assert fits(screen), [line for line in screen.splitlines() if len(line) > 80 and len(line.split()) > 1]
        p = piped(*args, "--no-progress")
        assert fits(p.stderr), [line for line in p.stderr.splitlines() if len(line) > 80 and len(line.split()) > 1]
        for command in copied_commands(p.stderr):
            assert command.splitlines()[0].startswith("eagle-audit ")  # a command starts a line of its own


def test_the_wide_table_does_not_repeat_the_gate_in_where():
    args = ("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2", "--no-config", "--no-progress")
    p = subprocess.run([sys.executable, "-m", "auditor", *args], capture_output=True, text=True, timeout=600,
                       cwd=REPO, env={**_env(), "COLUMNS": "200"})
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in p.stdout.splitlines() if line.startswith("│")]
    doc = json.loads(run(*args, "-f", "json").stdout)
    first = doc["results"][0]
    errors = [f for f in first["findings"] if f["severity"] == "error"]
    assert [r[3] for r in rows[:len(errors)]] == [f["gate"] for f in errors]
    assert [r[4] for r in rows[:len(errors)]] == [f"{f['path']}:{f['line']}" for f in errors]


def test_wrap_message_keeps_a_command_whole_as_shell_words():
    import shlex

    from auditor.render.text import wrap_message

    cmd = ("eagle-audit fix --vllm-version 0.16.0 --model 'a b' --model DeepseekV3ForCausalLM --method eagle3 "
           "--pipeline-parallel-size 2 --hf-config /some/long/path/to/a/checkpoint/folder")
    lines = wrap_message(f"next step (2 blocked targets with a fix available): {cmd}  (prints the patch; --out-dir "
                         "DIR writes it, --apply edits a folder tree)", 80)
    assert all(len(line) <= 80 for line in lines), lines
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("eagle-audit fix "))
    end = next(i for i in range(start, len(lines)) if not lines[i].endswith("\\"))
    assert shlex.split(" ".join(line.removesuffix("\\") for line in lines[start:end + 1])) == shlex.split(cmd)
    assert lines[end + 1].strip().startswith("(prints the patch;")
    # a line that names a command but is not one is prose: never shell-quoted
    summary = "eagle-audit gate: broken: vLLM 0.16.0 is broken for A [eagle3]: allowlist; B [eagle3]: interface."
    assert wrap_message(summary, None) == [summary]
    assert " ".join(wrap_message(summary, 40)).split() == summary.split()
    assert wrap_message("short line", None) == ["short line"]


def test_a_model_name_given_as_path_says_how_to_name_a_target(tmp_path):
    # `eagle-audit scan kimi_k2`: kimi_k2 is read as PATH
    for args in (("scan", "kimi_k2"), ("scan", "kimi_k2", "--vllm-version", "0.16.0"), ("fix", "kimi_k2")):
        p = run(*args, "--no-progress", cwd=tmp_path)
        assert p.returncode == 2, (args, p.stderr)
        (line,) = p.stderr.strip().splitlines()
        assert "kimi_k2 was read as PATH" in line and "--model kimi_k2" in line, line
    # a real path that does not exist gets no such hint
    p = run("scan", str(tmp_path / "nowhere"), "--no-progress", cwd=tmp_path)
    assert p.returncode == 2 and "does not exist" in p.stderr and "read as PATH" not in p.stderr


def test_an_archive_given_to_vllm_version_is_pointed_to_path(tmp_path):
    p = run("scan", "--vllm-version", str(tmp_path / "vllm-0.16.0.tar.gz"), "--no-progress", cwd=tmp_path)
    assert p.returncode == 2
    assert "is not a valid vLLM version" in p.stderr and "given as PATH" in p.stderr, p.stderr


def test_explain_of_a_gate_points_to_rules(tmp_path):
    for name, what in (("interface", "gate"), ("EA301", "rule")):
        p = run("explain", name, str(MINIVLLM), "--no-progress", cwd=tmp_path)
        assert p.returncode == 2, p.stderr
        assert f"{name} is a {what}: eagle-audit rules {name} explains it" in p.stderr, p.stderr
