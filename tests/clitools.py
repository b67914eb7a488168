"""Helpers shared by the CLI tests that run ``eagle-audit`` as a subprocess."""

from __future__ import annotations

import os
import subprocess


def read_until_closed(master: int) -> bytes:
    """Everything written to a pseudo-terminal's other side until the child closes it (EIO)."""
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def one_line_error(p: subprocess.CompletedProcess) -> str:
    """The one stderr line of an input error (exit 2, no traceback), without its prefix."""
    assert p.returncode == 2, (p.returncode, p.stdout[-1000:], p.stderr[-1000:])
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0].removeprefix("eagle-audit: error: ")
