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


# -- --python, VIRTUAL_ENV, CONDA_PREFIX: another environment's layout ------------------------


def _env(tmp_path: Path, cfg: bytes | None, name: str = "env") -> Path:
    """An environment folder with ``bin/python`` (an empty file, never run) and ``pyvenv.cfg``."""
    env = tmp_path / name
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    if cfg is not None:
        (env / "pyvenv.cfg").write_bytes(cfg)
    return env


@pytest.mark.parametrize("cfg", [
    b"include-system-site-packages = true\nhome = /x\0y/bin\n",          # a NUL: no path at all
    b"include-system-site-packages = true\nhome = " + b"\xff" * 300 + b"\n",
    b"include-system-site-packages = true\nhome = loop/bin\nversion = 3.11\n",
    b"\0" * 70_000,                                                      # larger than any pyvenv.cfg
])
def test_a_hostile_pyvenv_cfg_is_one_line(tmp_path, cfg, monkeypatch):
    env = _env(tmp_path, cfg)
    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    monkeypatch.chdir(tmp_path)
    line = one_line_error(cli("scan", "--python", env / "bin" / "python", "--no-progress"))
    assert "no site-packages folder found" in line, line


def test_an_activated_environment_that_is_a_symlink_loop_is_passed_over(tmp_path, monkeypatch):
    from auditor.source.folder import installed_source

    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        env = {var: str(tmp_path / "loop")}
        try:
            src = installed_source("vllm", environ=env)
        except Exception as exc:  # no vllm here: the one-line error of this environment
            from auditor.model.errors import SourceError

            assert isinstance(exc, SourceError), repr(exc)
            assert f"{var}={tmp_path / 'loop'}" in str(exc)
        else:
            assert "loop" not in src.label


def test_a_planted_pth_or_sitecustomize_never_runs(tmp_path):
    env = _env(tmp_path, b"home = /usr/bin\nversion = 3.11.7\n")
    site = env / "lib" / "python3.11" / "site-packages"
    make_tree(tmp_path)
    (site).mkdir(parents=True)
    (tmp_path / "minivllm" / "vllm").rename(site / "vllm")
    marker = tmp_path / "PWNED"
    payload = f"import os; open({str(marker)!r}, 'w').close()\n"
    (site / "evil.pth").write_text(payload)
    (site / "sitecustomize.py").write_text(payload)
    (site / "vllm" / "__init__.py").write_text(payload)
    r = cli("scan", "--python", env / "bin" / "python", "--no-progress", "--model", "LlamaForCausalLM")
    assert r.exit_code == 0, r.stderr
    assert str(site / "vllm") in r.stderr + r.stdout or "installed vllm" in r.stdout
    assert not marker.exists()


# -- Markdown reports (job summaries, PR comments) -----------------------------------------------

MD_EVIL = "Evil|x\n# Heading\n<img src=https://track.example/p.gif>[click](https://evil.example)&lt;"


def _evil_tree(tmp_path: Path) -> Path:
    root = make_tree(tmp_path)
    reg = root / "vllm/model_executor/models/registry.py"
    head = "_TEXT_GENERATION_MODELS = {\n"
    reg.write_text(reg.read_text().replace(head, head + f"    {MD_EVIL!r}: ('toy', 'ToyV2ForCausalLM'),\n"))
    return root


def _assert_inert_markdown(md: str) -> None:
    """No HTML tag, no link, no heading or table row taken from input."""
    assert "<img" not in md, md
    assert "[click](" not in md and "\\[click\\](" in md, md
    assert "&amp;lt;" in md  # an entity typed in the input is shown as typed
    for line in md.splitlines():
        assert not line.lstrip().startswith(("# Heading", "<img", "[click]")), line


def test_markdown_reports_keep_input_text_inert(tmp_path):
    root = _evil_tree(tmp_path)
    scan = cli("scan", root, "-f", "markdown", "--no-progress", "--no-cache", "--no-config")
    assert scan.exit_code == 1 and "Evil\\|x" in scan.stdout
    _assert_inert_markdown(scan.stdout)
    gate = cli("gate", "--candidate-version", root, "--model", MD_EVIL, "--model-type", "toy", "-f", "markdown",
               "--no-config", "--no-progress")
    assert gate.exit_code == 1 and "## eagle-audit gate: BROKEN" in gate.stdout
    _assert_inert_markdown(gate.stdout)
    assert "\\[click\\]" in gate.stdout  # shown, not a link


def test_compare_and_matrix_markdown_keep_input_text_inert(tmp_path):
    from types import SimpleNamespace

    from auditor.model.outcomes import ReleaseVerdict
    from auditor.render.upgrade_text import matrix_markdown
    from auditor.render.report import compare_markdown

    cell = SimpleNamespace(verdict="blocked", blocking=["allowlist"], reasons=[MD_EVIL], fix_available=False)
    report = SimpleNamespace(
        sides=[SimpleNamespace(name=MD_EVIL, source=MD_EVIL)],
        rows=[SimpleNamespace(architecture=MD_EVIL, method="eagle3", cells=[cell])],
        unresolved={MD_EVIL: {"vllm": MD_EVIL}}, supports_all=[False])
    _assert_inert_markdown(compare_markdown(report))
    row = SimpleNamespace(release="0.1.0", architecture=MD_EVIL, verdict=ReleaseVerdict.SKIPPED,
                          blocking=[], warnings=[], first_native=False, reason=MD_EVIL)
    report = SimpleNamespace(architectures=[MD_EVIL], model=[MD_EVIL], method="eagle3", versions=MD_EVIL,
                             releases=["0.1.0"], rows=[row], first_supported={MD_EVIL: None},
                             first_all_supported=None, engine="vllm")
    _assert_inert_markdown(matrix_markdown(report))


# -- the printed next-step command -------------------------------------------------------------


def test_the_next_step_fix_command_is_shell_safe_on_a_narrow_terminal(tmp_path, monkeypatch):
    """On a terminal narrower than the command, the command is broken only between words with a
    shell continuation (issue 21: one wrapping rule): the lines copied together are the same
    command (never two halves, never a path with a newline in it)."""
    import io
    import shlex

    from rich.console import Console

    import auditor.cli.console as cli_console

    root = make_tree(tmp_path / "a folder; $(touch x) 'quoted'")
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=40, color_system=None)
    monkeypatch.setattr(cli_console, "err_console", lambda: console)
    r = cli("scan", root, "--model", "ToyV2ForCausalLM", "--no-progress", "--no-config")
    assert r.exit_code == 1
    lines = screen.getvalue().splitlines()
    start = [i for i, line in enumerate(lines) if line.strip().startswith("eagle-audit fix")]
    assert len(start) == 1, screen.getvalue()
    command = []
    for line in lines[start[0]:]:
        command.append(line)
        if not line.endswith("\\"):
            break
    assert len(command) > 1 and all(len(line) <= 40 or len(shlex.split(line.removesuffix("\\"))) == 1
                                    for line in command)  # only a word longer than the line is
    # what the shell does with a backslash-newline between words: the one command
    assert shlex.split("\n".join(command).replace("\\\n", " ")) == [
        "eagle-audit", "fix", str(root), "--model", "ToyV2ForCausalLM", "--method", "eagle3"]


# -- fix --out-dir file names from a hostile release label ---------------------------------------


@pytest.mark.parametrize("version", ["../../../escaped", "/etc/x", "..", "a\0b/..", "9" * 5000, "$(touch PWNED)"])
def test_out_dir_names_stay_in_the_folder_and_keep_the_method(tmp_path, version):
    """The file names hold the release label made safe, and always end with the method (two
    methods never write the same file), however long the label."""
    root = make_tree(tmp_path, {"vllm/_version.py": f"__version__ = {version!r}\n"})
    out = tmp_path / "deep" / "out"
    r = cli("fix", root, "--model", "ToyV2ForCausalLM", "--out-dir", out, "--no-config")
    assert r.exit_code == 0, r.stderr
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 2 and all(len(n) < 255 and not n.startswith(".") for n in names), names
    assert names[0].endswith(".eagle3.codemods.json") and names[1].endswith(".eagle3.patch"), names
    assert names[0].startswith("ToyV2ForCausalLM.vllm-"), names
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["out"]  # nothing beside the out-dir
    assert not (tmp_path / "escaped").exists() and not list(tmp_path.rglob("PWNED"))


# -- fix --revert: a forged manifest -------------------------------------------------------------


def test_a_forged_manifest_mode_never_sets_special_bits(tmp_path):
    """The manifest's ``mode`` of a restored file is a permission mask: set-user-ID, set-group-ID
    and sticky bits written into it are never put on a file of the tree."""
    import json
    import stat

    from auditor.workspace.backup import BACKUP_DIR

    root = make_tree(tmp_path)
    r = cli("fix", root, "--model", "ToyVLForConditionalGeneration", "--model-type", "toy", "--apply", "--no-config")
    assert r.exit_code == 0, r.stderr
    mf = root / BACKUP_DIR / "1" / "manifest.json"
    manifest = json.loads(mf.read_text())
    for entry in manifest["files"].values():
        entry["mode"] = 0o7777
    mf.write_text(json.dumps(manifest))
    r = cli("fix", root, "--revert")
    assert r.exit_code == 0, r.stderr
    for rel in manifest["files"]:
        mode = stat.S_IMODE((root / rel).stat().st_mode)
        assert mode & 0o7000 == 0, (rel, oct(mode))
