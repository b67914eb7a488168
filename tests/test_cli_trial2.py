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
