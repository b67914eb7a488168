"""What a new user still found on main after the third trial (issue 21, the ux3b round), each
item checked as the user meets it: ``eagle-audit`` run as a subprocess at 80 columns, with its
stdout on a pseudo-terminal (rich lays it out for that terminal) and piped (``COLUMNS=80``),
or in this process where the test must see that no work started. The README items (options
table, install, opening, settings example) are checked in ``tests/test_readme_options.py``,
``tests/test_install.py`` and ``tests/test_cli_settings.py``; the HTML item in
``tests/test_html_report.py``."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from conftest import MINIVLLM
from real import REPO
from clitools import read_until_closed

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "FORCE_COLOR", "NO_COLOR", "TTY_INTERACTIVE")}
    env.update(COLUMNS="80", TERM="xterm")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")  # this checkout's code, from any folder
    env.update(extra)
    return env


def on_a_terminal(*args, cwd: Path = REPO, **extra: str) -> tuple[int, str, str]:
    """``eagle-audit ARGS`` with stdout on a pseudo-terminal of 80 columns (stderr piped): the
    exit code, what the terminal showed (escape sequences and carriage returns removed) and
    stderr."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 80, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "auditor", *map(str, args)], stdout=slave,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=cwd, env=_env(**extra))
    os.close(slave)
    raw = read_until_closed(master)
    err = proc.stderr.read().decode()
    proc.wait(timeout=600)
    os.close(master)
    screen = ANSI.sub("", raw.decode("utf-8", "replace")).replace("\r", "")
    return proc.returncode, screen, err


def piped(*args, cwd: Path = REPO, **extra: str) -> subprocess.CompletedProcess:
    """``eagle-audit ARGS`` with stdout and stderr piped, ``COLUMNS=80``, no colour."""
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=_env(NO_COLOR="1", **extra))


def both(*args, cwd: Path = REPO, **extra: str) -> list[tuple[str, int, list[str]]]:
    """The run on a terminal and piped: ``(how, exit code, stdout lines)``, each line checked to
    fit 80 columns, none cut with an ellipsis, none ending in a space when piped."""
    code, screen, _ = on_a_terminal(*args, cwd=cwd, **extra)
    p = piped(*args, cwd=cwd, **extra)
    out = []
    for how, rc, text in (("terminal", code, screen), ("piped", p.returncode, p.stdout)):
        lines = text.splitlines()
        assert all(len(line) <= 80 for line in lines), (how, [line for line in lines if len(line) > 80])
        assert "…" not in text, how
        if how == "piped":
            assert not [line for line in lines if line.endswith(" ")], "padded lines"
        out.append((how, rc, [line.rstrip() for line in lines]))
    return out


def _blocks(lines: list[str]) -> dict[str, list[str]]:
    """The block per target of a narrow report: ``ARCH: ...`` heading line → its indented lines."""
    out: dict[str, list[str]] = {}
    current = None
    for line in lines:
        m = re.match(r"^(\w+)(?: \(\w+\))?: ", line)
        if m and not line.startswith(" "):
            current = out.setdefault(m.group(1), [line])
        elif current is not None and line.startswith("  "):
            current.append(line)
        else:
            current = None
    return out


# -- 1. scan at 80 columns: the where of every finding, in a block per target ----------------------


def test_scan_at_80_columns_shows_each_where_in_a_block_per_target():
    args = ("scan", MINIVLLM, "-m", "ToyV3ForCausalLM", "-m", "ToyVLForConditionalGeneration", "-m",
            "LlamaForCausalLM", "--no-config", "--no-progress")
    doc = json.loads(piped(*args, "-f", "json").stdout)
    for how, code, lines in both(*args):
        assert code == 1, how
        assert "┏" not in "\n".join(lines)  # the table would have cut a name or a file:line
        blocks = _blocks(lines)
        for r in doc["results"]:
            block = blocks[r["architecture"]]
            assert block[0] == f"{r['architecture']}: eagle3, {r['verdict']}", (how, block)
            for f in r["findings"]:
                where = f"{f['path']}:{f['line']}"
                label = f["gate"] if f["gate"] in r["blocking"] else f"{f['gate']} ({f['severity']})"
                assert f"  {label}: {where}" in block, (how, f, block)
        assert blocks["ToyVLForConditionalGeneration"][1:] == [
            "  allowlist: vllm/config/speculative.py:21", "  interface: vllm/model_executor/models/toy_vl.py:9",
            "  aux-capture: vllm/model_executor/models/toy.py:34", "  image-token: vllm/v1/spec_decode/eagle.py:40"]
    wide = piped(*args, COLUMNS="160")
    assert "where (file:line)" in wide.stdout and "┏" in wide.stdout  # wide enough: the table


def test_scan_of_the_readme_release_at_80_columns_keeps_every_file_line():
    args = ("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2", "--no-config", "--no-progress")
    doc = json.loads(piped(*args, "-f", "json").stdout)
    for how, code, lines in both(*args):
        assert code == 1, how
        blocks = _blocks(lines)
        assert set(blocks) >= {"DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"}, how
        for r in doc["results"]:
            wheres = [f"  {g}: {f['path']}:{f['line']}" for g in r["blocking"] for f in r["findings"]
                      if f["gate"] == g]
            assert blocks[r["architecture"]][1:1 + len(wheres)] == wheres, (how, blocks[r["architecture"]])


# -- 2. gate at 80 columns: names whole ----------------------------------------------------------


def _codemods(tmp_path: Path, *source) -> Path:
    p = piped("fix", *source, "--no-config", "--no-progress", "--out-dir", tmp_path / "p")
    assert p.returncode == 0, p.stderr
    (cm,) = (tmp_path / "p").glob("*.codemods.json")
    return cm


def test_gate_at_80_columns_never_breaks_a_name(tmp_path):
    cm = _codemods(tmp_path, MINIVLLM, "-m", "ToyVLForConditionalGeneration", "-m", "ToyV3ForCausalLM")
    cm = cm.rename(tmp_path / "both.codemods.json")  # a short name: the codemods line fits 80 columns
    args = ("gate", "--current-version", MINIVLLM, "--candidate-version", MINIVLLM, "--codemods", cm,
            "--no-config", "--no-progress")
    for how, code, lines in both(*args):
        assert code == 0, (how, lines)
        blocks = _blocks(lines)
        assert blocks["ToyVLForConditionalGeneration"] == [
            "ToyVLForConditionalGeneration: eagle3, patched", "  current: blocked",
            "  candidate: blocked: allowlist, interface, aux-capture, image-token", "  with codemods: supported"], how
        assert blocks["ToyV3ForCausalLM"][0] == "ToyV3ForCausalLM: eagle3, patched"
        text = "\n".join(lines)
        assert "ToyVLForCondit\n" not in text and "┏" not in text
    wide = piped(*args, COLUMNS="160")
    rows = [line for line in wide.stdout.splitlines() if line.startswith("│")]
    assert any("ToyVLForConditionalGeneration" in row for row in rows)  # whole, in the table


def test_gate_of_the_kimi_upgrade_at_80_columns(tmp_path):
    cm = _codemods(tmp_path, "--vllm-version", "0.16.0", "-m", "kimi_k2")
    args = ("gate", "-m", "kimi_k2", "--current-version", "0.16.0", "--candidate-version", "0.17.1", "--codemods", cm,
            "--no-config", "--no-progress")
    for how, code, lines in both(*args):
        assert code == 0, (how, lines)
        blocks = _blocks(lines)
        for arch in ("DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"):
            assert blocks[arch][0] == f"{arch}: eagle3, patched" and "  with codemods: supported" in blocks[arch]
        assert blocks["KimiK25ForConditionalGeneration"][2] == (
            "  candidate: blocked: allowlist, interface, aux-capture, image-token")


# -- 5. did you mean: _, - and case set aside -------------------------------------------------------


def test_did_you_mean_sets_underscores_dashes_and_case_aside():
    for typed, meant in (("toyv3", "toy_v3"), ("TOY-VL", "toy_vl"), ("Toy_V3", "toy_v3")):
        p = piped("scan", MINIVLLM, "-m", typed, "--no-config", "--no-progress")
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert re.search(rf"did you mean: {meant}[,?]", p.stderr), (typed, p.stderr)
        ok = piped("scan", MINIVLLM, "-m", meant, "--no-config", "--no-progress")  # the suggestion runs
        assert ok.returncode == 1 and "blocked" in ok.stdout, ok.stderr


def test_qwen3moe_suggests_qwen3_moe_on_a_release():
    for typed in ("qwen3moe", "Qwen3-MoE"):
        p = piped("scan", "--vllm-version", "0.16.0", "-m", typed, "--no-config", "--no-progress")
        assert p.returncode == 2, p.stderr
        assert "did you mean: qwen3_moe, " in p.stderr, p.stderr
    ok = piped("scan", "--vllm-version", "0.16.0", "-m", "qwen3_moe", "--no-config", "--no-progress", "-f", "json")
    assert ok.returncode in (0, 1) and json.loads(ok.stdout)["results"], ok.stderr
    p = piped("scan", "--vllm-version", "0.16.0", "-m", "kimi_k3", "--no-config", "--no-progress")
    assert "did you mean: kimi_k2, kimi_k25?" in p.stderr  # a near name is still offered as before


# -- 7. every argument checked before any fetch or scan --------------------------------------------


def _in_process(*args) -> tuple[int, str]:
    """``eagle-audit ARGS`` in this process (:func:`tests.test_hostile.cli`): exit code and stderr."""
    from tests.test_hostile import cli

    run = cli(*args)
    return run.exit_code, run.stderr


def test_bad_arguments_are_refused_before_any_fetch_or_scan(tmp_path, monkeypatch):
    def no_work(*a, **k):
        raise AssertionError("work started before the arguments were checked")

    for target in ("auditor.orchestration.scan.open_tree", "auditor.orchestration.upgrade.open_side",
                   "auditor.orchestration.compare.open_engine_side", "auditor.source.listing.list_releases",
                   "auditor.source.fetch.fetch_release", "auditor.orchestration.releases.IndexReleases.listing"):
        monkeypatch.setattr(target, no_work)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = tmp_path / "out"
    out.mkdir()
    (out / "kimi_k2.vllm-0.16.0.eagle3.patch").write_text("an earlier patch\n")
    cases = [
        (("matrix", "-m", "kimi_k2", "--versions", "0.16.0,foo"),
         "--versions '0.16.0,foo': 'foo' is not a version (expected e.g. 0.16.0,0.18.0 or 0.12.0..0.33.0)"),
        (("matrix", "-m", "kimi_k2", "--versions", "0.18.0..0.16.0"), "the range 0.18.0..0.16.0 is empty"),
        (("gate", "-m", "kimi_k2", "--candidate-version", "0.18.0", "--current-version", "foo"),
         "--current-version foo: 'foo' is neither an existing path nor a vLLM release version"),
        (("compare", "-m", "kimi_k2", "--vllm-version", "0.16.0", "--sglang-version", "foo"),
         "--sglang-version foo: 'foo' is neither an existing path"),
        (("fix", "-m", "kimi_k2", "--vllm-version", "0.16.0", "--out-dir", out),
         f"--out-dir {out}/kimi_k2.vllm-0.16.0.eagle3.patch exists; pass --force to overwrite it"),
        (("fix", "-m", "kimi_k2", "--vllm-version", "0.16.0", "--out-dir", blocker / "sub"),
         f"--out-dir {blocker / 'sub'}: cannot be created ({blocker} is not a folder)"),
    ]
    for args, words in cases:
        code, err = _in_process(*args, "--no-config", "--no-progress")
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and words in lines[0], (args, code, err)
    assert (out / "kimi_k2.vllm-0.16.0.eagle3.patch").read_text() == "an earlier patch\n"
    # a SPEC from the settings file: its file and key are named, still before any work
    (tmp_path / "pyproject.toml").write_text('[tool.eagle-audit]\nmodels = ["kimi_k2"]\nversions = "0.16.0,foo"\n')
    monkeypatch.chdir(tmp_path)
    code, err = _in_process("matrix", "--no-progress")
    assert code == 2 and f"{tmp_path / 'pyproject.toml'} [tool.eagle-audit] versions '0.16.0,foo': 'foo' is not" \
        in err, err


def test_the_users_matrix_typo_fails_at_once_without_the_index():
    """As the user typed it, piped at 80 columns, with a package index that refuses connections:
    the answer is the typo, not a network error."""
    p = piped("matrix", "-m", "kimi_k2", "--versions", "0.16.0,foo", "--no-config", "--no-progress",
              PIP_INDEX_URL="http://127.0.0.1:9/simple/")
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "eagle-audit: error: --versions '0.16.0,foo': 'foo' is not a version (expected e.g. 0.16.0,0.18.0 or "
        "0.12.0..0.33.0)"], p.stderr


# -- 6. matrix says what it will download before it starts -------------------------------------------


def test_matrix_says_how_many_releases_it_downloads_and_their_size(monkeypatch):
    from auditor.model.errors import AuditError
    from auditor.source.listing import IndexListing

    fetched = []

    class Releases:
        def __init__(self, *a, **k):
            pass

        def listing(self):
            return IndexListing(sdists=("0.16.0", "0.17.1", "0.18.0"), known=("0.16.0", "0.17.1", "0.18.0"),
                                sizes=(("0.16.0", 29_000_000), ("0.17.1", 31_000_000), ("0.18.0", 32_500_000)))

        def cached(self, version):
            return version == "0.16.0"

        def fetch(self, version):
            fetched.append(version)
            raise AuditError("not fetched in this test")

    monkeypatch.setattr("auditor.orchestration.matrix.IndexReleases", Releases)
    monkeypatch.setenv("COLUMNS", "80")
    code, err = _in_process("matrix", "-m", "kimi_k2", "--versions", "0.16.0..", "--no-config", "--no-progress",
                            "-j", "1")
    text = " ".join(err.split())
    assert ("eagle-audit matrix: 3 releases to audit (0.16.0 … 0.18.0): 1 in eagle-audit's cache, 2 to download, "
            "about 64 MB (kept in the cache; to see its size or prune it: eagle-audit cache)") in text, err
    assert text.index("3 releases to audit") < text.index("not fetched in this test")  # said before the fetches
    assert all(len(line) <= 80 for line in err.splitlines()), err
    assert code == 2 and sorted(fetched) == ["0.16.0", "0.17.1", "0.18.0"]


def test_archive_cached_reads_the_sidecar_only(tmp_path):
    from auditor.source.fetch import archive_cached

    (tmp_path / "vllm-9.9.9.tar.gz").write_bytes(b"x")
    assert not archive_cached("9.9.9", "vllm", tmp_path)  # no sidecar: fetch_release would verify it first
    (tmp_path / "vllm-9.9.9.tar.gz.sha256").write_text("0" * 64 + "  vllm-9.9.9.tar.gz\n")
    assert archive_cached("9.9.9", "vllm", tmp_path) and not archive_cached("9.9.8", "vllm", tmp_path)
    assert not archive_cached("not-a-version", "vllm", tmp_path)
    # a release given as 9.9 is the 9.9.0 the index files (the new-user trial's --versions 0.16)
    (tmp_path / "vllm-9.9.0.tar.gz").write_bytes(b"x")
    assert not archive_cached("9.9", "vllm", tmp_path)
    (tmp_path / "vllm-9.9.0.tar.gz.sha256").write_text("0" * 64 + "  vllm-9.9.0.tar.gz\n")
    assert archive_cached("9.9", "vllm", tmp_path) and archive_cached("9.9.0", "vllm", tmp_path)
    # the same for a project read as a wheel (SGLang's wheel-only releases)
    wheel = tmp_path / "sglang-9.9.0-py3-none-any.whl"
    wheel.write_bytes(b"x")
    assert not archive_cached("9.9", "sglang", tmp_path)
    (tmp_path / (wheel.name + ".sha256")).write_text("0" * 64 + f"  {wheel.name}\n")
    assert archive_cached("9.9", "sglang", tmp_path) and not archive_cached("9.8", "sglang", tmp_path)


# -- 8. matrix --help explains its exit codes; 11. matrix labels a settings value's source ---------


def test_matrix_help_explains_exit_codes_and_the_codes_are_kept(tmp_path):
    code, screen, _ = on_a_terminal("matrix", "--help")
    p = piped("matrix", "--help")
    for how, text in (("terminal", screen), ("piped", p.stdout)):
        flat = " ".join(text.split())
        assert ("Exit codes: 0 some release listed supports every target (natively); 1 none of them does (every "
                "release has a target blocked, unknown, absent or skipped; --exit-zero turns this into 0); 2 usage "
                "or input error, or a release that could not be fetched or read") in flat, how
        assert "3 internal error" in flat and "--exit-zero" in flat
        assert all(len(line) <= 80 for line in text.splitlines()), how
    base = ("matrix", "-m", "kimi_k2", "--no-config", "--no-progress", "-j", "1", "-f", "json")
    blocked = piped(*base, "--versions", "0.16.0")
    assert blocked.returncode == 1 and json.loads(blocked.stdout)["first_all_supported"] is None, blocked.stderr
    assert piped(*base, "--versions", "0.16.0", "--exit-zero").returncode == 0
    ok = piped(*base, "--versions", "0.16.0,0.18.0")
    assert ok.returncode == 0 and json.loads(ok.stdout)["first_all_supported"] == "0.18.0", ok.stderr


@pytest.mark.full  # the release is named in the settings file it writes: the tier cannot see it
def test_matrix_labels_a_model_type_from_the_settings_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.eagle-audit]\nmodels = ["kimi_k2"]\nmodel-type = "kimi_k2"\nversions = "0.16.0"\n')
    p = piped("matrix", "-j", "1", "--no-progress", "-f", "json", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    messages = [g["message"] for r in json.loads(p.stdout)["rows"] for g in r["gates"] if g["gate"] == "allowlist"]
    assert messages and all("text model_type 'kimi_k2' (pyproject.toml model-type)" in m for m in messages)
    assert "(--model-type)" not in p.stdout
    flag = piped("matrix", "-j", "1", "--no-progress", "-f", "json", "--model-type", "kimi_k2", cwd=tmp_path)
    assert "text model_type 'kimi_k2' (--model-type)" in flag.stdout and "pyproject.toml model-type" not in flag.stdout
    table = piped("matrix", "-j", "1", "--no-progress", cwd=tmp_path)
    assert "eagle-audit: settings: [tool.eagle-audit] of pyproject.toml (it gives models, model-type, versions)" \
        in " ".join(table.stderr.split())
