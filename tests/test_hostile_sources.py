"""Sources under hostile conditions (issue 20, "The write path"): Ctrl-C during ``matrix`` while
releases download, a text file named ``.whl``. Each test builds its own input (a PEP 503 index in
a folder, a fake wheel) and checks the exit code, the message and that nothing is left behind.
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading

import pytest

from tests.conftest import MINIVLLM
from tests.test_hostile import _tar, cli, one_line_error

VERSIONS = ("9.9.1", "9.9.2", "9.9.3", "9.9.4", "9.9.5", "9.9.6", "9.9.7", "9.9.8")


@pytest.fixture
def many_releases(tmp_path, monkeypatch):
    """A PEP 503 index in a folder listing minivllm as eight vllm releases (with sha256); pip's
    PIP_INDEX_URL points at it and the cache is isolated. Returns the cache's archive folder."""
    files = tmp_path / "files"
    files.mkdir()
    links = []
    for version in VERSIONS:
        archive = _tar(files / f"vllm-{version}.tar.gz", [], base=MINIVLLM / "vllm", prefix=f"vllm-{version}")
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        links.append(f'<a href="../../files/{archive.name}#sha256={digest}">{archive.name}</a>')
    page = tmp_path / "index" / "vllm"
    page.mkdir(parents=True)
    (page / "index.html").write_text("<html><body>" + "\n".join(links) + "</body></html>\n")
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "index").as_uri())
    monkeypatch.setenv("EAGLE_AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "archives"


def test_ctrl_c_during_matrix_cancels_the_downloads_and_leaves_no_part_file(many_releases, monkeypatch):
    """Ctrl-C arrives while the first downloads are in progress (each holds its first chunk
    until the interruption has asked every download to stop): the pending ones never start, the
    running ones stop at their next chunk, one line is printed, the exit code is 130."""
    from auditor.source import fetch

    # Ctrl-C as a fresh process gets it, whatever handler an earlier test of this process left
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    monkeypatch.setattr(fetch, "_CHUNK", 256)  # many chunks per archive
    real_write = fetch._write
    started: list[str] = []
    sent = threading.Lock()

    def write(out, chunk, folder):
        real_write(out, chunk, folder)
        started.append(threading.current_thread().name)
        if sent.acquire(blocking=False):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, delivered to the main thread
        assert fetch._STOP.wait(timeout=120), "the interruption never stopped the downloads"

    monkeypatch.setattr(fetch, "_write", write)
    r = cli("matrix", "--model", "LlamaForCausalLM", "--versions", ",".join(VERSIONS), "--no-progress",
            "--no-cache")
    signal.signal(signal.SIGINT, previous)
    assert r.exit_code == 130, (r.exit_code, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert lines[-1] == "eagle-audit: interrupted", r.stderr
    # before it: only what the matrix said it would download (issue 21, ux3b)
    assert " ".join(lines[:-1]).startswith(f"eagle-audit matrix: {len(VERSIONS)} releases to audit "), r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    left = sorted(p.name for p in many_releases.iterdir()) if many_releases.exists() else []
    assert not [n for n in left if n.endswith(".part")], left
    assert not [n for n in left if n.endswith(".tar.gz")], left  # none completed, the pending never began
    assert 1 <= len(set(started)) <= 4  # only the downloads already running had begun
    assert not fetch._STOP.is_set()  # the next run may download again
    monkeypatch.setattr(fetch, "_write", real_write)
    r = cli("matrix", "--model", "LlamaForCausalLM", "--versions", "9.9.1", "--no-progress", "--no-cache")
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("content, words", [
    (b"this is a text file, not a wheel\n", "a text file, not a zip archive"),
    (b"", "an empty file"),
    (b"PK\x03\x04 truncated", "a truncated or damaged zip archive"),
    (bytes(range(256)) * 4, "binary data, not a zip archive"),
])
def test_a_file_named_whl_that_is_no_zip_is_reported_as_such(tmp_path, content, words):
    wheel = tmp_path / "vllm-0.1.0-py3-none-any.whl"
    wheel.write_bytes(content)
    for args in (("scan", wheel), ("fix", wheel, "--model", "ToyV3ForCausalLM")):
        line = one_line_error(cli(*args))
        assert "is not a wheel" in line and words in line, line
        assert "truncated header" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == [wheel.name]
