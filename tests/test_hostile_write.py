"""The write path of ``fix --apply`` / ``fix --revert`` under hostile conditions (issue 20, "The
write path"): signals between two file writes, a damaged or forged backup, a full disk, the lock
file, and names and paths that would forge lines of the report or break the printed undo command.
Each test builds its own tree from ``fixtures/minivllm`` and checks the exit code, the tree's
content afterwards (hashed) and that nothing is left behind.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import make_tree
from tests.test_hostile import VL, cli, one_line_error, plan, temps, tree_hash

APPLY = ("--model", VL, "--model-type", "toy", "--apply", "--no-config")
LOCK = ".eagle-audit.lock"
BACKUP = ".eagle-audit-backup"


def leftovers(root: Path) -> list[Path]:
    """Whatever an apply or a revert may leave behind: temporary files, staging folders, the lock."""
    return temps(root) + [p for p in (root / LOCK, root / BACKUP) if os.path.lexists(p)]


def refused_write(r) -> str:
    """Assert ``r`` is an apply refused at the write (exit 2, its report, then one error line, no
    traceback); return that line."""
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("eagle-audit: error:"), r.stderr
    return line


@pytest.fixture
def sentinel(tmp_path) -> Path:
    s = tmp_path / "sentinel"
    s.mkdir()
    (s / "keep.py").write_text("KEEP = 1\n")
    return s


# -- signals ------------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_between_two_file_writes_of_an_apply_leaves_the_tree_original(tmp_path, monkeypatch, signum):
    from auditor.workspace import folder

    root = make_tree(tmp_path)
    pristine = tree_hash(root)
    real_put = folder.Dir.put
    written = []

    def put(self, name, data=None, **kw):
        real_put(self, name, data, **kw)
        if kw.get("shown"):
            written.append(kw["shown"])
            if len(written) == 1:  # the first file of the tree is replaced: stop here
                os.kill(os.getpid(), signum)

    monkeypatch.setattr(folder.Dir, "put", put)
    old = signal.getsignal(signal.SIGTERM)
    try:
        r = cli("fix", root, *APPLY)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert r.exit_code == 130, r.stderr
    assert r.stderr.strip().splitlines()[-1] == "eagle-audit: interrupted" and "Traceback" not in r.stderr
    assert tree_hash(root) == pristine and not leftovers(root)
    assert "no backup" in one_line_error(cli("fix", root, "--revert"))  # nothing to undo
    assert tree_hash(root) == pristine and not leftovers(root)


def _signalled_apply(root: Path, res, signum: int, at: int) -> int:
    """Run ``apply_to_folder`` in a forked child whose ``at``-th file write (backup copies,
    manifest, tree files) is followed by the signal ``signum`` sent to itself, SIGTERM handled as
    the command line handles it. Returns the child's exit status (130: interrupted, 0: done), or
    with ``at=-1`` the number of writes an apply makes."""
    from auditor.workspace import folder, transaction

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        code, writes = 1, [0]
        try:
            def interrupt(s, f):
                raise KeyboardInterrupt

            signal.signal(signal.SIGTERM, interrupt)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            real_put = folder.Dir.put

            def put(self, *a, **kw):
                real_put(self, *a, **kw)
                if writes[0] == at:
                    os.kill(os.getpid(), signum)
                writes[0] += 1

            folder.Dir.put = put
            transaction.apply_to_folder(root, res)
            code = 0
        except KeyboardInterrupt:
            code = 130
        finally:
            os.write(w, str(writes[0]).encode())
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as fh:
        out = fh.read()
    _, status = os.waitpid(pid, 0)
    return int(out) if at == -1 else os.waitstatus_to_exitcode(status)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_apply_signalled_after_any_write_is_all_or_nothing(tmp_path, signum):
    """Whichever write the signal follows (a backup copy, the manifest, a tree file, the last
    one), the apply is undone completely: the tree is original and nothing is left behind."""
    root = make_tree(tmp_path)
    res = plan(root)
    pristine = tree_hash(root)
    writes = _signalled_apply(root, res, signum, -1)
    assert writes == 2 * len(res.patched) + 1
    assert cli("fix", root, "--revert").exit_code == 0 and tree_hash(root) == pristine
    for at in range(writes):
        assert _signalled_apply(root, res, signum, at) == 130, at
        assert tree_hash(root) == pristine, at
        assert not leftovers(root), (at, leftovers(root))


def test_a_revert_signalled_between_two_restores_still_restores_every_file(tmp_path, monkeypatch):
    from auditor.workspace import folder

    root = make_tree(tmp_path)
    pristine = tree_hash(root)
    assert cli("fix", root, *APPLY).exit_code == 0
    real_put = folder.Dir.put
    seen = []

    def put(self, name, data=None, **kw):
        real_put(self, name, data, **kw)
        seen.append(name)
        if len(seen) == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(folder.Dir, "put", put)
    old = signal.getsignal(signal.SIGTERM)
    try:
        r = cli("fix", root, "--revert")
    finally:
        signal.signal(signal.SIGTERM, old)
    assert r.exit_code == 130 and "interrupted" in r.stderr
    assert len(seen) > 1  # the revert went on to the end, then the signal took effect
    assert tree_hash(root) == pristine and not leftovers(root)


# -- damaged and forged backups ------------------------------------------------------------------


@pytest.mark.parametrize("junk", ["²", "٣", "1x", "-1"])
def test_a_backup_folder_named_like_no_number_is_no_backup(tmp_path, junk):
    root = make_tree(tmp_path)
    pristine = tree_hash(root)
    (root / BACKUP / junk).mkdir(parents=True)
    (root / BACKUP / junk / "manifest.json").write_text("{}")
    line = one_line_error(cli("fix", root, "--revert"))
    assert "no backup" in line
    r = cli("fix", root, *APPLY)
    assert r.exit_code == 0, r.stderr
    assert (root / BACKUP / "1" / "manifest.json").is_file()
    assert cli("fix", root, "--revert").exit_code == 0
    assert sorted(p.name for p in (root / BACKUP).iterdir()) == [junk]  # left alone, never used
    (root / BACKUP / junk / "manifest.json").unlink()
    (root / BACKUP / junk).rmdir()
    (root / BACKUP).rmdir()
    assert tree_hash(root) == pristine and not leftovers(root)


def _forge(root: Path, entry_for) -> dict:
    """Apply, then rewrite every manifest entry with ``entry_for(path, entry)``; returns the manifest."""
    assert cli("fix", root, *APPLY).exit_code == 0
    mf = root / BACKUP / "1" / "manifest.json"
    manifest = json.loads(mf.read_text())
    manifest["files"] = {p: entry_for(p, dict(e)) for p, e in manifest["files"].items()}
    mf.write_text(json.dumps(manifest))
    return manifest


@pytest.mark.parametrize("how", ["absolute", "relative", "through-a-linked-folder"])
def test_a_forged_manifest_never_plants_a_link_to_outside_the_tree(tmp_path, sentinel, how):
    root = make_tree(tmp_path)
    target = sentinel / "keep.py"

    def link_for(p: str) -> str:
        depth = p.count("/")
        return {"absolute": str(target),
                "relative": "../" * depth + "../sentinel/keep.py",
                "through-a-linked-folder": "../" * (depth - 1) + "escape/keep.py"}[how]

    manifest = _forge(root, lambda p, e: dict(e, kind="symlink", link=link_for(p)))
    # the forger also links a folder out of the tree (after the apply: a tree holding such a link
    # is not fully read, so its targets are unknown and fix would not patch it)
    (root / "vllm" / "escape").symlink_to(sentinel, target_is_directory=True)
    after_apply = tree_hash(root)
    line = one_line_error(cli("fix", root, "--revert"))
    assert "outside the tree" in line, line
    assert tree_hash(root) == after_apply
    assert not any((root / p).is_symlink() for p in manifest["files"])
    assert target.read_text() == "KEEP = 1\n"


def test_apply_refuses_a_file_linked_to_outside_the_tree(tmp_path, sentinel):
    root = make_tree(tmp_path)
    toy = root / "vllm/model_executor/models/toy.py"
    (sentinel / "toy.py").write_bytes(toy.read_bytes())
    toy.unlink()
    toy.symlink_to(sentinel / "toy.py")
    before, outside = tree_hash(root), tree_hash(sentinel)
    line = refused_write(cli("fix", root, *APPLY))  # the plan is reported, then the write is refused
    assert "outside the tree" in line and "nothing was written" in line
    assert tree_hash(root) == before and tree_hash(sentinel) == outside and not leftovers(root)


def test_a_manifest_above_4_mib_is_refused_unread(tmp_path):
    from auditor.model.inputs import MAX_JSON_BYTES

    root = make_tree(tmp_path)
    assert cli("fix", root, *APPLY).exit_code == 0
    mf = root / BACKUP / "1" / "manifest.json"
    text = mf.read_text()
    mf.write_text(text[:-1] + " " * (MAX_JSON_BYTES + (1 << 20)) + "}")  # valid JSON, 5 MiB
    after_apply = tree_hash(root)
    line = one_line_error(cli("fix", root, "--revert"))
    assert "4 MiB" in line and "nothing was restored" in line
    assert tree_hash(root) == after_apply


# -- a full disk -----------------------------------------------------------------------------------


def test_an_apply_that_fills_the_disk_while_writing_the_backup_leaves_nothing(tmp_path, monkeypatch):
    from auditor.workspace import folder

    root = make_tree(tmp_path)
    res = plan(root)
    pristine = tree_hash(root)
    real_put = folder.Dir.put
    for fail_at in range(len(res.patched) + 1):  # each backup copy, then the manifest
        calls = [0]

        def put(self, name, data=None, **kw):
            if not kw.get("shown"):  # a write into the backup
                if calls[0] == fail_at:
                    raise OSError(errno.ENOSPC, "No space left on device")
                calls[0] += 1
            return real_put(self, name, data, **kw)

        monkeypatch.setattr(folder.Dir, "put", put)
        line = refused_write(cli("fix", root, *APPLY))
        assert "No space left on device" in line and "not changed" in line
        assert tree_hash(root) == pristine, fail_at
        assert not leftovers(root), (fail_at, leftovers(root))  # no .incomplete-*, no backup folder


# -- the lock file -----------------------------------------------------------------------------------


def test_the_lock_file_is_removed_when_the_tool_made_it_and_kept_otherwise(tmp_path):
    root = make_tree(tmp_path)
    pristine = tree_hash(root)
    assert cli("fix", root, *APPLY).exit_code == 0
    assert not (root / LOCK).exists()
    assert cli("fix", root, "--revert").exit_code == 0
    assert not (root / LOCK).exists() and tree_hash(root) == pristine and not leftovers(root)
    (root / LOCK).write_text("")  # someone else's (or an older eagle-audit's) lock file
    assert cli("fix", root, *APPLY).exit_code == 0
    assert cli("fix", root, "--revert").exit_code == 0
    assert (root / LOCK).is_file()


# -- reports and the printed undo command --------------------------------------------------------------


def test_a_name_with_a_raw_newline_never_forges_a_line_of_the_fix_report(tmp_path):
    root = make_tree(tmp_path)
    reg = root / "vllm/model_executor/models/registry.py"
    evil = "Evil\\nforged: supported"
    reg.write_text(reg.read_text().replace("_TEXT_GENERATION_MODELS = {\n", "_TEXT_GENERATION_MODELS = {\n"
                                           f'    "{evil}": ("toy", "ToyV3ForCausalLM"),\n', 1))
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"architectures": ["Evil\nforged: supported"], "model_type": "toy"}))
    before = tree_hash(root)
    for args in (("fix", root, "--hf-config", cfg, "--no-cache"),
                 ("fix", root, "--model", "Evil\nforged: supported", "--model-type", "toy", "--no-cache")):
        r = cli(*args)
        assert r.exit_code == 0, r.stderr
        lines = r.stderr.splitlines()
        assert not any(x.startswith("forged") for x in lines), r.stderr
        assert any("Evil\\x0aforged: supported: blocked" in x for x in lines), r.stderr
    assert tree_hash(root) == before


def test_the_printed_undo_command_names_a_path_with_a_newline_exactly(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "2000")  # one line per item of the report, whatever the length of tmp_path
    root = make_tree(tmp_path / "my trees\nwith 'quotes'")
    pristine = tree_hash(root)
    r = cli("fix", root, *APPLY)
    assert r.exit_code == 0, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if "undo with:" in x]
    command = line.split("undo with: ", 1)[1]
    assert command.startswith("eagle-audit fix --revert ")
    word = command.removeprefix("eagle-audit fix --revert ")
    shell = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, check=True)
    assert shell.stdout == str(root)  # the shell reads back the very path
    assert cli("fix", shell.stdout, "--revert").exit_code == 0
    assert tree_hash(root) == pristine and not leftovers(root)


def test_a_failed_restore_names_a_quoted_revert_command(tmp_path, monkeypatch):
    """When even the restoring of an interrupted apply fails, the message's revert command is
    quoted for the shell as the undo command is."""
    from auditor.workspace import folder, transaction

    root = make_tree(tmp_path / "a b\nc")
    res = plan(root)
    real_put = folder.Dir.put
    seen = []

    def put(self, name, data=None, **kw):
        if kw.get("shown"):
            seen.append(name)
            if len(seen) >= 2:
                raise OSError(errno.EIO, "Input/output error")
        return real_put(self, name, data, **kw)

    monkeypatch.setattr(folder.Dir, "put", put)
    with pytest.raises(folder.FixRefused) as info:
        transaction.apply_to_folder(root, res)
    assert f"run eagle-audit fix --revert $'{tmp_path}/a b\\x0ac/minivllm'" in str(info.value)
    monkeypatch.setattr(folder.Dir, "put", real_put)
    assert cli("fix", root, "--revert").exit_code == 0
    assert not leftovers(root)
    assert hashlib.sha256((root / sorted(res.patched)[0]).read_bytes()).hexdigest() == \
        hashlib.sha256(res.originals[sorted(res.patched)[0]].encode()).hexdigest()
