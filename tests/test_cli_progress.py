"""Progress on ``gate`` and ``fix`` (issue 21): on a terminal, one line on stderr names the stage
in progress — ``gate``: scanning the candidate, scanning the current release, replaying the
codemods; ``fix``: scanning the targets, planning and applying the codemods, validating (the
in-memory re-scan) — and is gone when the report comes. Piped (or ``--no-progress``), nothing
of it is written. Run on a pseudo-terminal of 80 columns, and piped."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

from conftest import MINIVLLM
from real import REPO
from clitools import read_until_closed

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def on_a_terminal(*args, cwd: Path = REPO, columns: int = 80) -> tuple[int, str, str]:
    """Run ``eagle-audit ARGS`` with stderr on a pseudo-terminal of ``columns`` columns (stdout
    piped): the exit code, stdout, and what the terminal showed (escape sequences removed)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_INTERACTIVE")}
    env.update(TERM="xterm", COLUMNS=str(columns))
    proc = subprocess.Popen([sys.executable, "-m", "auditor", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(slave)
    raw = read_until_closed(master)
    out = proc.stdout.read().decode()
    proc.wait(timeout=300)
    os.close(master)
    return proc.returncode, out, ANSI.sub("\n", raw.decode("utf-8", "replace"))


def piped(*args, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_INTERACTIVE")}
    env["COLUMNS"] = "80"
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


def _progress_lines(screen: str, title: str) -> list[str]:
    """The progress lines the terminal showed (spinner, title and stage, stages done), each
    checked to fit the 80 columns whole. A progress line is indented by the spinner's column; the
    report that follows starts at column 0 (its first line names the scanned path, whose length
    depends on where the checkout is, so it is not one of these)."""
    lines = [line for line in screen.split("\n") if line.startswith(" ") and line.strip().startswith(title)]
    assert all(len(line) <= 80 and not line.rstrip().endswith("…") for line in lines), lines
    return lines


def _codemods(tmp_path: Path) -> Path:
    p = piped("fix", MINIVLLM, "-m", "ToyV3ForCausalLM", "--no-config", "--no-progress", "--out-dir", tmp_path / "p")
    assert p.returncode == 0, p.stderr
    (cm,) = (tmp_path / "p").glob("*.codemods.json")
    return cm


def test_gate_names_each_stage_on_a_terminal_and_nothing_piped(tmp_path):
    cm = _codemods(tmp_path)
    args = ("gate", "-m", "ToyV3ForCausalLM", "--current-version", MINIVLLM, "--candidate-version", MINIVLLM,
            "--codemods", cm, "--no-config")
    code, out, screen = on_a_terminal(*args)
    assert code == 0 and out.startswith("eagle-audit gate: patched"), screen
    for stage in ("eagle-audit gate: scanning the candidate", "eagle-audit gate: scanning the current release",
                  "eagle-audit gate: replaying the codemods, re-scanning the candidate"):
        assert stage in screen, screen
    assert "0/3" in screen and "0/?" not in screen
    assert _progress_lines(screen, "eagle-audit gate: ")
    p = piped(*args)
    assert p.returncode == 0 and "scanning the candidate" not in p.stderr and "\x1b" not in p.stderr, p.stderr


def test_fix_names_its_validation_while_it_re_scans(tmp_path):
    code, out, screen = on_a_terminal("fix", MINIVLLM, "-m", "ToyV3ForCausalLM", "--no-config")
    assert code == 0 and out.startswith("--- a/"), screen
    for stage in ("eagle-audit fix: scanning the targets", "eagle-audit fix: planning and applying the codemods",
                  "eagle-audit fix: validating: re-scanning the patch in memory (1 target)"):
        assert stage in screen, screen
    assert _progress_lines(screen, "eagle-audit fix: ")
    p = piped("fix", MINIVLLM, "-m", "ToyV3ForCausalLM", "--no-config")
    assert p.returncode == 0 and "validating" not in p.stderr, p.stderr
    code, _, screen = on_a_terminal("fix", MINIVLLM, "-m", "ToyV3ForCausalLM", "--no-config", "--no-progress")
    assert code == 0 and "validating" not in screen
