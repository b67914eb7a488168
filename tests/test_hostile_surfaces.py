"""Hostile input on the surfaces added with issue 12 and the SGLang fix: ``[tool.eagle-audit]``
settings files, ``--python`` / ``VIRTUAL_ENV`` environment layouts, Markdown reports, the
printed next-step ``fix`` command and backup manifests. Every input is built here; the
conventions are those of :mod:`tests.test_hostile` (bad input: exit 2 and one line on stderr,
never an internal error).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import make_tree
from tests.test_hostile import cli, one_line_error


def _settings(folder: Path, body: bytes | str, name: str = "pyproject.toml") -> Path:
    p = folder / name
    p.write_bytes(body if isinstance(body, bytes) else body.encode())
    return p


# -- [tool.eagle-audit] settings -----------------------------------------------------------------


@pytest.mark.parametrize("body, words", [
    (b'[tool.eagle-audit]\nmodels = ["\xff\xfe"]\n', "not UTF-8"),
    ("[tool.eagle-audit]\nmodels = " + "[" * 5000 + "]" * 5000 + "\n", "nests too deep"),
    ('[tool.eagle-audit]\nhf-config = "a\\u0000b"\n', "NUL"),
    ('[tool.eagle-audit]\ndraft-config = "loop/config.json"\n', "symbolic link"),
    ('[tool.eagle-audit]\ncodemods = "loop"\n', "symbolic link"),
])
def test_a_hostile_settings_file_is_one_line(tmp_path, body, words):
    root = make_tree(tmp_path)
    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    cfg = _settings(tmp_path, body)
    for args in (("scan", root, "--no-progress"), ("fix", root, "--model", "ToyV2ForCausalLM")):
        line = one_line_error(cli(*args, "--config", cfg))
        assert str(cfg) in line and words in line, line


def test_a_settings_file_that_is_no_regular_file_or_too_large_is_refused_unread(tmp_path):
    root = make_tree(tmp_path)
    os.mkfifo(tmp_path / "fifo.toml")
    (tmp_path / "zero.toml").symlink_to("/dev/zero")
    (tmp_path / "dir.toml").mkdir()
    big = _settings(tmp_path, "[tool.eagle-audit]\n" + "# padding\n" * 200_000, "big.toml")
    for name in ("fifo.toml", "zero.toml", "dir.toml"):
        line = one_line_error(cli("scan", root, "--config", tmp_path / name, "--no-progress"))
        assert "not a regular file" in line, line
    assert "larger than the 1 MiB limit" in one_line_error(cli("scan", root, "--config", big, "--no-progress"))


def test_the_nearest_pyproject_is_read_with_the_same_checks(tmp_path, monkeypatch):
    root = make_tree(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    _settings(work, b'[tool.eagle-audit]\nmethods = ["\xff"]\n')
    monkeypatch.chdir(work)
    line = one_line_error(cli("scan", root, "--no-progress"))
    assert "pyproject.toml" in line and "not UTF-8" in line
