"""Hostile and broken input (issue 11): every promise of the README's "Safety promises" section,
each checked on an input this module builds itself (no binary blobs in the repository).

Conventions: bad input ends with exit 2 and exactly one line on stderr, no traceback; nothing is
ever written outside the tree given (checked by hashing a sentinel folder beside it); no payload
ever runs (checked by the absence of its marker file).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import make_tree

INJECTION = 'toy", __import__("os").system("touch {marker}"), "toy'


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str


def cli(*args: str) -> Run:
    """Run ``auditor.cli.main`` in this process (the real entry point, with its exit codes)."""
    from auditor.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return Run(code, out.getvalue(), err.getvalue())


def one_line_error(r) -> str:
    """Assert ``r`` is a refused input: exit 2, one stderr line, no traceback; return the line."""
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    return lines[0]


def tree_hash(folder: Path) -> str:
    """sha256 over every path, file content and link target under ``folder`` (except the empty
    lock file ``fix --apply``/``--revert`` leave beside ``vllm/``)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(folder)):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            if name == ".eagle-audit.lock" and Path(dirpath) == folder:
                continue
            p = Path(dirpath) / name
            h.update(str(p.relative_to(folder)).encode() + b"\0")
            if p.is_symlink():
                h.update(b"L" + os.readlink(p).encode())
            elif p.is_file():
                h.update(b"F" + p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def sentinel(tmp_path) -> Path:
    """A folder beside the tree that nothing may ever touch."""
    s = tmp_path / "sentinel"
    (s / "vllm").mkdir(parents=True)
    (s / "vllm" / "keep.py").write_text("KEEP = 1\n")
    (s / "notes.txt").write_text("do not touch\n")
    return s


# -- 1. text from input is never pasted into source ----------------------------------------


def test_model_type_injection_is_refused_by_scan_fix_and_codemods_file(tmp_path):
    root = make_tree(tmp_path)
    marker = tmp_path / "PWNED"
    payload = INJECTION.format(marker=marker)
    before = tree_hash(root)
    out = tmp_path / "out"
    for args in (
        ("scan", str(root), "--model", "ToyV2ForCausalLM", "--model-type", payload, "--no-progress"),
        ("fix", str(root), "--model", "ToyV2ForCausalLM", "--model-type", payload, "--no-progress"),
        ("fix", str(root), "--model", "ToyV2ForCausalLM", "--model-type", payload, "--out-dir", str(out)),
        ("fix", str(root), "--model", "ToyV2ForCausalLM", "--model-type", payload, "--apply"),
        ("gate", "--candidate-version", str(root), "--model", "ToyV2ForCausalLM", "--model-type", payload),
    ):
        r = cli(*args)
        line = one_line_error(r)
        assert "--model-type" in line and "is not a model_type" in line
        assert r.stdout == ""
    # a codemods file carrying the payload as text_model_type (and as model_type)
    for key in ("text_model_type", "model_type"):
        doc = {"format": "eagle-audit-codemods/1", "method": "eagle3",
               "targets": [{"architecture": "ToyV2ForCausalLM", "model_type": "toy_v2", "text_model_type": "toy_v2",
                            key: payload}],
               "invocations": [{"codemod": "allowlist"}]}
        f = tmp_path / f"evil-{key}.codemods.json"
        f.write_text(json.dumps(doc))
        r = cli("fix", "--codemods", str(f), str(root), "--apply")
        assert "is not a model_type" in one_line_error(r)
        r = cli("gate", "--candidate-version", str(root), "--codemods", str(f))
        assert "is not a model_type" in one_line_error(r)
    # a checkpoint config carrying it
    for cfg in ({"architectures": ["ToyV2ForCausalLM"], "model_type": payload},
                {"architectures": ["ToyV2ForCausalLM"], "model_type": "toy", "text_config": {"model_type": payload}}):
        f = tmp_path / "config.json"
        f.write_text(json.dumps(cfg))
        assert "is not a model_type" in one_line_error(cli("scan", str(root), "--hf-config", str(f)))
    # [tool.eagle-audit]
    proj = tmp_path / "pyproject.toml"
    proj.write_text(f"[tool.eagle-audit]\nmodels = ['ToyV2ForCausalLM']\nmodel-type = {json.dumps(payload)}\n")
    r = cli("gate", "--candidate-version", str(root), "--config", str(proj))
    assert "is not a model_type" in one_line_error(r)
    assert tree_hash(root) == before
    assert not out.exists() and not marker.exists()
    assert not (root / ".eagle-audit-backup").exists()


@pytest.mark.parametrize("mt", ["qwen3_vl_moe", "gpt_oss", "hunyuan_v1_dense", "kimi_k25", "llama4_text",
                                "deepseek_v3", "xlm-roberta", "RefinedWeb"])
def test_real_model_types_are_accepted(mt):
    from auditor.model.inputs import check_model_type

    assert check_model_type(mt, "--model-type") == mt


def test_a_registry_key_shaped_like_code_is_never_written(tmp_path):
    """A model_type derived from a hostile registry key is not written: the gate is not fixable."""
    root = make_tree(tmp_path)
    evil = 'Toy"+__import__("os").getcwd()+"V2ForCausalLM'
    reg = root / "vllm/model_executor/models/registry.py"
    head = "_TEXT_GENERATION_MODELS = {\n"
    reg.write_text(reg.read_text().replace(head, head + f"    {evil!r}: ('toy', 'ToyV2ForCausalLM'),\n"))
    r = cli("fix", str(root), "--model", evil, "--no-progress")
    assert r.exit_code == 1, r.stderr
    assert "is not shaped like a model_type" in r.stderr
    assert r.stdout == ""


# -- 3, 4, 12, 13. --apply / --revert ---------------------------------------------------------

VL = "ToyVLForConditionalGeneration"  # its patch touches four files


def plan(root: Path, model: str = VL):
    """The validated fix of ``model`` on the tree ``root`` (nothing written)."""
    from auditor.hf.targets import resolve_targets
    from auditor.orchestration.fix import plan_fix
    from auditor.render.fix import fix_report
    from tests.conftest import open_auditor

    a = open_auditor(root)
    res = plan_fix(a, resolve_targets(a.registry, [model], "toy"))
    assert res.ok and len(res.patched) >= 2, fix_report(res)
    return res


def snapshot(root: Path, paths) -> dict[str, bytes]:
    return {p: (root / p).read_bytes() for p in paths}


def temps(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".eagle-audit.tmp") or p.name.startswith(".incomplete-")]


def test_a_fix_says_how_it_ended(tmp_path):
    """A patch that validates is FIXED; with no codemod allowed to run it is NOT_FIXED (nothing
    patched, the gates explained); once applied, the same targets are ALREADY_SUPPORTED."""
    from auditor.hf.targets import resolve_targets
    from auditor.orchestration.fix import FixOutcome, plan_fix
    from auditor.workspace.transaction import apply_to_folder
    from tests.conftest import open_auditor

    root = make_tree(tmp_path)
    res = plan(root)
    assert res.outcome is FixOutcome.FIXED and res.failed_inside == []
    a = open_auditor(root)
    none = plan_fix(a, resolve_targets(a.registry, [VL], "toy"), only=set())
    assert none.outcome is FixOutcome.NOT_FIXED and none.patched == {} and none.unfixable
    apply_to_folder(root, res)
    a = open_auditor(root)
    again = plan_fix(a, resolve_targets(a.registry, [VL], "toy"))
    assert again.outcome is FixOutcome.ALREADY_SUPPORTED and again.patched == {}


def test_revert_refuses_manifest_paths_outside_the_tree(tmp_path, sentinel):
    from auditor.workspace.backup import BACKUP_DIR

    root = make_tree(tmp_path)
    assert cli("fix", root, "--model", VL, "--model-type", "toy", "--apply").exit_code == 0
    bdir = root / BACKUP_DIR / "1"
    manifest = json.loads((bdir / "manifest.json").read_text())
    good = dict(manifest["files"])
    some = next(iter(good.values()))
    keep = (sentinel / "vllm" / "keep.py").read_bytes()
    # a backup copy whose sha256 matches, for a forger who also writes the copy
    (bdir / "files" / "vllm" / "evil").mkdir()
    (bdir / "files" / "vllm" / "evil" / "keep.py").write_bytes(keep)
    (root / "vllm" / "evil").symlink_to(sentinel / "vllm", target_is_directory=True)
    sentinel_hash = tree_hash(sentinel)
    entry = dict(some, original_sha256=hashlib.sha256(keep).hexdigest(),
                 patched_sha256=hashlib.sha256(keep).hexdigest())
    for forged, expected in (
        ("../sentinel/vllm/keep.py", "has the wrong form"),
        ("vllm/../../sentinel/vllm/keep.py", "not a path inside the tree"),
        (str(sentinel / "vllm/keep.py"), "has the wrong form"),
        ("vllm\\..\\..\\sentinel\\vllm\\keep.py", "has the wrong form"),
        ("vllm/evil/keep.py", "symbolic link"),
        ("vllm/./keep.py", "not a path inside the tree"),
    ):
        manifest["files"] = {**good, forged: entry}
        (bdir / "manifest.json").write_text(json.dumps(manifest))
        tree_before = tree_hash(root)
        line = one_line_error(cli("fix", root, "--revert"))
        assert expected in line, line
        assert tree_hash(sentinel) == sentinel_hash
        assert tree_hash(root) == tree_before
    # a manifest that is not one
    for bad in ("[]", '{"format": "eagle-audit-backup/2", "files": {"vllm/x.py": {"original_sha256": 1}}}',
                "[" * 100000, '{"format": "x"}'):
        (bdir / "manifest.json").write_text(bad)
        line = one_line_error(cli("fix", root, "--revert"))
        assert "unreadable" in line
    assert tree_hash(sentinel) == sentinel_hash


def test_a_symlinked_backup_folder_is_refused(tmp_path, sentinel):
    from auditor.workspace.backup import BACKUP_DIR

    root = make_tree(tmp_path)
    before = tree_hash(root)
    sentinel_hash = tree_hash(sentinel)
    # the backup folder itself is a link: apply would write its backup through it
    (root / BACKUP_DIR).symlink_to(sentinel, target_is_directory=True)
    r = cli("fix", root, "--model", VL, "--model-type", "toy", "--apply")
    assert "symbolic link" in one_line_error(r)
    assert "symbolic link" in one_line_error(cli("fix", root, "--revert"))
    assert tree_hash(sentinel) == sentinel_hash
    (root / BACKUP_DIR).unlink()
    assert tree_hash(root) == before
    # a symlinked folder inside a real backup
    assert cli("fix", root, "--model", VL, "--model-type", "toy", "--apply").exit_code == 0
    files = root / BACKUP_DIR / "1" / "files"
    (files / "vllm").rename(tmp_path / "moved")
    (files / "vllm").symlink_to(sentinel / "vllm", target_is_directory=True)
    after_apply = tree_hash(root)
    assert "symbolic link" in one_line_error(cli("fix", root, "--revert"))
    assert "symbolic link" in one_line_error(cli("fix", root, "--model", "ToyV3ForCausalLM", "--model-type", "toy",
                                                 "--apply"))
    assert tree_hash(root) == after_apply and tree_hash(sentinel) == sentinel_hash


def test_a_symlinked_folder_in_the_tree_is_never_written_through(tmp_path, sentinel):
    from auditor.workspace.folder import FixRefused
    from auditor.workspace.transaction import apply_to_folder

    root = make_tree(tmp_path)
    res = plan(root)
    # after planning, vllm/config becomes a link to a folder outside the tree with the same files
    outside = sentinel / "config"
    (root / "vllm" / "config").rename(outside)
    (root / "vllm" / "config").symlink_to(outside, target_is_directory=True)
    sentinel_hash = tree_hash(sentinel)
    with pytest.raises(FixRefused, match="symbolic link"):
        apply_to_folder(root, res)
    assert tree_hash(sentinel) == sentinel_hash


def test_an_edit_made_after_planning_is_never_lost(tmp_path):
    from auditor.workspace.folder import FileChanged
    from auditor.workspace.transaction import apply_to_folder

    root = make_tree(tmp_path)
    res = plan(root)
    target = root / "vllm/model_executor/models/toy.py"
    target.write_text(target.read_text() + "# edited after planning\n")
    with pytest.raises(FileChanged, match="toy.py changed since the diff"):
        apply_to_folder(root, res)
    assert target.read_text().endswith("# edited after planning\n")


def test_an_edit_made_while_writing_is_never_lost(tmp_path, monkeypatch):
    """The hash is compared right before each rename: an edit landing between the first file and
    the second stops the apply, keeps the edit and restores the first file."""
    from auditor.workspace import folder, transaction
    from auditor.workspace.backup import BACKUP_DIR
    from auditor.workspace.folder import FileChanged

    root = make_tree(tmp_path)
    res = plan(root)
    paths = sorted(res.patched)
    before = snapshot(root, paths)
    victim = paths[1]
    real_put = folder.Dir.put

    def put(self, name, data=None, **kw):
        if kw.get("shown") == victim:  # a write into the tree, not into the backup
            with open(root / victim, "a") as fh:
                fh.write("# edited during the apply\n")
        return real_put(self, name, data, **kw)

    monkeypatch.setattr(folder.Dir, "put", put)
    with pytest.raises(FileChanged, match=f"{victim} changed while the patch was being written") as info:
        transaction.apply_to_folder(root, res)
    assert "restored" in str(info.value)
    assert (root / victim).read_bytes() == before[victim] + b"# edited during the apply\n"
    assert {p: b for p, b in snapshot(root, paths).items() if p != victim} == {
        p: b for p, b in before.items() if p != victim}
    assert not (root / BACKUP_DIR / "1").exists() and not temps(root)


def test_two_concurrent_applies_never_undo_each_other(tmp_path):
    import threading

    from auditor.workspace.folder import FixRefused
    from auditor.workspace.transaction import apply_to_folder

    root = make_tree(tmp_path)
    plans = [plan(root), plan(root, "ToyV3ForCausalLM")]
    barrier = threading.Barrier(2)
    outcomes: list[object] = [None, None]

    def run(i):
        barrier.wait()
        try:
            outcomes[i] = apply_to_folder(root, plans[i])
        except FixRefused as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [i for i in range(2) if isinstance(outcomes[i], Path)]
    assert len(won) == 1, outcomes
    lost = outcomes[1 - won[0]]
    assert "changed since the diff was computed" in str(lost)
    for p, text in plans[won[0]].patched.items():
        assert (root / p).read_text() == text


def test_the_tree_lock_is_held(tmp_path, monkeypatch):
    from filelock import FileLock

    from auditor.workspace import backup, folder, lock, transaction

    root = make_tree(tmp_path)
    res = plan(root)
    monkeypatch.setattr(lock, "LOCK_TIMEOUT", 0.2)
    with FileLock(str(root / lock.LOCK_FILE)):
        with pytest.raises(folder.FixRefused, match="another 'eagle-audit fix' is writing"):
            transaction.apply_to_folder(root, res)
    assert not (root / backup.BACKUP_DIR).exists()


def _killed_apply(root: Path, res, kill_at: int) -> int:
    """Run apply_to_folder in a forked child that dies like SIGKILL (no cleanup at all) at its
    ``kill_at``-th file write (backup copies, manifest and tree files all count). Returns the
    number of writes the apply makes when not killed (kill_at=-1)."""
    from auditor.workspace import folder, transaction

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        count = [0]
        real_put = folder.Dir.put

        def put(self, *a, **kw):
            if count[0] == kill_at:
                os._exit(137)
            count[0] += 1
            return real_put(self, *a, **kw)

        folder.Dir.put = put
        try:
            transaction.apply_to_folder(root, res)
        finally:
            os.write(w, str(count[0]).encode())
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        out = fh.read()
    os.waitpid(pid, 0)
    return int(out) if out else -1


def test_an_apply_killed_at_any_point_is_reverted_completely(tmp_path):
    """The backup and its manifest (the journal) are complete before the first file is replaced:
    wherever the process dies, --revert restores every file, and no temporary file remains."""
    from auditor.workspace.backup import BACKUP_DIR

    root = make_tree(tmp_path)
    res = plan(root)
    pristine = tree_hash(root)
    writes = _killed_apply(root, res, -1)
    assert writes == 2 * len(res.patched) + 1  # backup copies, manifest, tree files
    assert cli("fix", root, "--revert").exit_code == 0
    assert tree_hash(root) == pristine
    for kill_at in range(writes):
        _killed_apply(root, res, kill_at)
        if kill_at <= len(res.patched):  # died while writing the backup: nothing was replaced
            assert not (root / BACKUP_DIR / "1").exists()
            r = cli("fix", root, "--revert")
            assert "no backup" in one_line_error(r)
        else:
            assert (root / BACKUP_DIR / "1" / "manifest.json").is_file()
            r = cli("fix", root, "--revert")
            assert r.exit_code == 0, r.stderr
        assert not temps(root), kill_at
        assert tree_hash(root) == pristine, kill_at


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError(28, "No space left on device")])
def test_an_interrupted_or_failing_apply_restores_what_it_wrote(tmp_path, monkeypatch, failure):
    from auditor.workspace import folder, transaction

    root = make_tree(tmp_path)
    res = plan(root)
    pristine = tree_hash(root)
    real_put = folder.Dir.put
    seen = []

    def put(self, name, data=None, **kw):
        if kw.get("shown"):
            seen.append(name)
            if len(seen) == 2:
                raise failure
        return real_put(self, name, data, **kw)

    monkeypatch.setattr(folder.Dir, "put", put)
    expected = KeyboardInterrupt if failure is KeyboardInterrupt else folder.FixRefused
    with pytest.raises(expected) as info:
        transaction.apply_to_folder(root, res)
    if expected is folder.FixRefused:
        assert "No space left on device" in str(info.value) and "1 file already written was restored" in str(info.value)
    assert tree_hash(root) == pristine  # no backup left, no temporary file
    assert not temps(root)


def test_revert_restores_symlinks_and_written_files_follow_the_umask(tmp_path):
    from auditor.workspace.backup import BACKUP_DIR

    root = make_tree(tmp_path)
    toy = root / "vllm/model_executor/models/toy.py"
    shared = root / "shared" / "toy.py"
    shared.parent.mkdir()
    toy.rename(shared)
    toy.symlink_to(Path("../../../shared/toy.py"))
    spec = root / "vllm/config/speculative.py"
    spec.chmod(0o640)
    pristine = tree_hash(root)
    old = os.umask(0o027)
    try:
        r = cli("fix", root, "--model", VL, "--model-type", "toy", "--apply")
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.stderr
    assert not toy.is_symlink() and "SupportsEagle3" in toy.read_text()
    assert shared.read_text() == (tmp_path / "minivllm/shared/toy.py").read_text()  # the link target untouched
    assert "SupportsEagle3" not in shared.read_text()
    assert (spec.stat().st_mode & 0o777) == 0o640  # a patched file keeps its permissions
    backup = root / BACKUP_DIR / "1"
    for f in [backup / "manifest.json", *[p for p in (backup / "files").rglob("*") if p.is_file()]]:
        assert (f.stat().st_mode & 0o777) == 0o640, f  # 0o666 under umask 027
    assert cli("fix", root, "--revert").exit_code == 0
    assert not (root / ".eagle-audit.lock").exists()  # the lock file the tool created is gone
    assert toy.is_symlink() and os.readlink(toy) == "../../../shared/toy.py"
    assert tree_hash(root) == pristine


# -- 5. an internal error is not a verdict ----------------------------------------------------


def test_an_internal_error_has_its_own_exit_code_and_one_line(monkeypatch):
    from auditor.orchestration.scan import Auditor
    from tests.conftest import MINIVLLM

    def boom(self, *a, **k):
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(Auditor, "scan", boom)
    monkeypatch.delenv("EAGLE_AUDIT_DEBUG", raising=False)
    r = cli("scan", MINIVLLM, "--model", "LlamaForCausalLM", "--no-progress")
    assert r.exit_code == 3 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert "internal error: ZeroDivisionError: division by zero second line" in line
    assert "please report it" in line and "--debug" in line
    r = cli("--debug", "scan", MINIVLLM, "--model", "LlamaForCausalLM", "--no-progress")
    assert r.exit_code == 3
    assert "Traceback (most recent call last)" in r.stderr and "in boom" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("eagle-audit: internal error:")


# -- 6, 7, 13. per-file trouble stays per file; archives -------------------------------------


@pytest.fixture
def alarm():
    """Fail (instead of hanging the suite) when a test blocks for more than 120 s."""
    import signal

    def timeout(signum, frame):
        raise TimeoutError("the tool blocked")

    old = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def add_rows(root: Path, rows: dict[str, str]) -> None:
    """Register ``arch → module`` rows (class name = arch) in the tree's registry."""
    reg = root / "vllm/model_executor/models/registry.py"
    head = "_TEXT_GENERATION_MODELS = {\n"
    extra = "".join(f"    {a!r}: ({m!r}, {a!r}),\n" for a, m in rows.items())
    reg.write_text(reg.read_text().replace(head, head + extra, 1))


def pathological_tree(tmp_path: Path, monkeypatch) -> tuple[Path, dict[str, str]]:
    """minivllm plus one module per kind of per-file trouble, each registered as a target.
    Returns the root and path → the words its parse error must contain."""
    models = "vllm/model_executor/models/"
    root = make_tree(tmp_path, {
        models + "deep.py": "x = " + " + ".join(["a"] * 50000) + "\n",
        models + "calls.py": "x = a" + "()" * 2500 + "\n",
        models + "parens.py": "x = " + "f(" * 2500 + ")" * 2500 + "\n",
        models + "big.py": "# padding\n" * ((9 << 20) // 10) + "class BigForCausalLM: pass\n",
        models + "secret.py": "class SecretForCausalLM: pass\n",
        # no version literal: the version then comes from PKG-INFO, a FIFO below (the module stays,
        # since vllm/__init__.py imports __version__ from it: without it, vllm cannot be imported)
        "vllm/_version.py": "__version__ = str()\n",
    })
    os.mkfifo(root / models / "fifo.py")
    os.mkfifo(root / "PKG-INFO")
    (root / models / "dangling.py").symlink_to(root / "nowhere.py")
    add_rows(root, {"DeepForCausalLM": "deep", "CallsForCausalLM": "calls", "ParensForCausalLM": "parens",
                    "BigForCausalLM": "big", "SecretForCausalLM": "secret", "FifoForCausalLM": "fifo",
                    "DanglingForCausalLM": "dangling"})
    # the suite may run as root, for whom no permission bit stops a read: deny it at the OS call
    import auditor.source.folder as folder_source

    real_open = os.open
    secret = str(root / models / "secret.py")

    def deny(path, flags, *a, **k):
        if str(path) == secret:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(folder_source.os, "open", deny)
    return root, {
        models + "deep.py": "nested too deeply", models + "calls.py": "nested too deeply",
        models + "parens.py": "too many nested parentheses", models + "big.py": "larger than the 8 MiB limit",
        models + "secret.py": "Permission denied", models + "fifo.py": "not a regular file",
        models + "dangling.py": "symbolic link to nothing",
    }


def test_per_file_trouble_stays_per_file(tmp_path, monkeypatch, alarm):
    root, expected = pathological_tree(tmp_path, monkeypatch)
    r = cli("scan", root, "-f", "json", "--no-progress", "--no-cache")
    assert r.exit_code == 1, r.stderr  # the toys are blocked: a verdict, not a crash
    doc = json.loads(r.stdout)
    errors = {e["path"]: e["error"] for e in doc["parse_errors"]}
    for path, words in expected.items():
        assert words in errors.get(path, ""), (path, errors)
    verdicts = {x["architecture"]: x["verdict"] for x in doc["results"]}
    assert verdicts["LlamaForCausalLM"] == "supported" and verdicts["ToyV3ForCausalLM"] == "blocked"
    for arch in ("DeepForCausalLM", "BigForCausalLM", "SecretForCausalLM", "FifoForCausalLM"):
        assert verdicts[arch] == "unknown", (arch, verdicts[arch])
    assert doc["vllm_version"] is None  # PKG-INFO is a FIFO: not read, and the scan did not hang


def test_an_unreadable_models_folder_is_named_as_such(tmp_path, monkeypatch):
    root = make_tree(tmp_path)
    models = str(root / "vllm" / "model_executor" / "models")
    real_scandir = os.scandir

    def deny(path="."):
        if str(path) == models:
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", deny)
    line = one_line_error(cli("scan", root, "--no-cache"))
    assert "cannot read the model registry" in line and "Permission denied" in line
    assert "vllm/model_executor/models/" in line


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], base: Path | None = None,
         prefix: str = "vllm-0.0.1") -> Path:
    """A .tar.gz with minivllm (or ``base``) under ``prefix/`` followed by ``members``."""
    from tests.conftest import MINIVLLM

    with tarfile.open(path, "w:gz") as tf:
        tf.add(base or MINIVLLM / "vllm", arcname=f"{prefix}/vllm",
               filter=lambda ti: None if "__pycache__" in ti.name else ti)
        for ti, data in members:
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    return path


def _member(name: str, data: bytes = b"x = 1\n", kind: bytes = tarfile.REGTYPE, link: str = "") -> tuple:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.linkname = link
    ti.size = len(data) if kind == tarfile.REGTYPE else 0
    return ti, (data if kind == tarfile.REGTYPE else None)


SPEC = "vllm-0.0.1/vllm/config/speculative.py"


@pytest.mark.parametrize("member,words", [
    (_member("vllm-0.0.1/../evil.py"), "'..'"),
    (_member("/vllm-0.0.1/vllm/evil.py"), "absolute name"),
    (_member("vllm-0.0.1\\vllm\\config\\speculative.py"), "backslash"),
    (_member(SPEC, b"eagle3_target_supported = []\n"), "appears twice"),
    (_member("./" + SPEC), "appears twice"),
    (_member("vllm-0.0.1/vllm/evil.py", kind=tarfile.SYMTYPE, link="/etc/passwd"), "symbolic link"),
    (_member("vllm-0.0.1/vllm/evil.py", kind=tarfile.LNKTYPE, link=SPEC), "hard link"),
    (_member("vllm-0.0.1/vllm/evil.py", kind=tarfile.FIFOTYPE), "special file"),
    (_member("vllm-0.0.1/docs/x", kind=tarfile.CHRTYPE), "special file"),
    (_member("vllm-0.0.1//vllm/x.py"), "empty or '.' component"),
    (_member("vllm-0.0.1/vllm/./x.py"), "empty or '.' component"),
    (_member(SPEC + "/x.py"), "needs it to be a folder"),
])
def test_a_tar_that_extraction_would_lay_out_differently_is_refused(tmp_path, member, words):
    archive = _tar(tmp_path / "vllm-0.0.1.tar.gz", [member])
    line = one_line_error(cli("scan", archive, "--no-cache"))
    assert line.startswith("eagle-audit: error: refusing archive") and words in line, line


def _zip(path: Path, extra: list[tuple[zipfile.ZipInfo, bytes]], base: Path | None = None) -> Path:
    """A wheel-like zip of minivllm (or the tree ``base``) with ``extra`` members appended."""
    from tests.conftest import MINIVLLM

    base = base or MINIVLLM
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted((base / "vllm").rglob("*.py")):
            zf.write(p, "vllm/" + p.relative_to(base / "vllm").as_posix())
        for info, data in extra:
            zf.writestr(info, data)
    return path


def _zinfo(name: str, attr: int = 0) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = attr << 16
    return info


def _patch_header(archive: Path, name: str, local: int, central: int, value: int) -> None:
    """Set a 16-bit field of member ``name`` in its local header (offset ``local``) and its central
    directory entry (offset ``central``): zipfile itself refuses to write such members."""
    import struct

    data = bytearray(archive.read_bytes())
    raw = name.encode()
    for sig, field in ((b"PK\x03\x04", local), (b"PK\x01\x02", central)):
        i = data.find(sig)
        while i != -1:
            name_at = i + (30 if sig == b"PK\x03\x04" else 46)
            if data[name_at:name_at + len(raw)] == raw:
                struct.pack_into("<H", data, i + field, value)
            i = data.find(sig, i + 4)
    archive.write_bytes(bytes(data))


@pytest.mark.parametrize("case,words", [
    ("link", "symbolic link"), ("encrypted", "encrypted"), ("method", "compression method 99"),
    ("duplicate", "appears twice"), ("dotdot", "'..'"), ("backslash", "backslash"),
])
def test_a_wheel_with_links_encryption_or_odd_members_is_refused(tmp_path, case, words):
    import warnings

    whl = tmp_path / "vllm-0.0.1-py3-none-any.whl"
    extra = {
        "link": [(_zinfo("vllm/evil.py", stat.S_IFLNK | 0o777), b"/etc/passwd")],
        "encrypted": [(_zinfo("vllm/evil.py"), b"x = 1\n")],
        "method": [(_zinfo("vllm/evil.py"), b"x = 1\n")],
        "duplicate": [(_zinfo("vllm/config/speculative.py"), b"x = 1\n")],
        "dotdot": [(_zinfo("vllm/../../evil.py"), b"x = 1\n")],
        "backslash": [(_zinfo("vllm\\config\\speculative.py"), b"x = 1\n")],
    }[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name it is asked to write
        _zip(whl, extra)
    if case == "method":
        _patch_header(whl, "vllm/evil.py", 8, 10, 99)  # compression method
    if case == "encrypted":
        _patch_header(whl, "vllm/evil.py", 6, 8, 0x1)  # general purpose flags: encrypted
    line = one_line_error(cli("scan", whl, "--no-cache"))
    assert line.startswith("eagle-audit: error: refusing archive") and words in line, line


def test_decompression_bombs_and_member_counts_are_bounded(tmp_path, monkeypatch):
    import auditor.source.archive as archives

    # a header that declares 20 GB for a package file, followed by almost nothing (4.7 KB today)
    ti = tarfile.TarInfo("vllm-0.0.1/vllm/model_executor/models/huge.py")
    ti.size = 20 << 30
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        tf.add(Path(__file__).parents[1] / "fixtures/minivllm/vllm", arcname="vllm-0.0.1/vllm",
               filter=lambda t: None if "__pycache__" in t.name else t)
        end = tf.offset  # before the end-of-archive blocks
    body = buf.getvalue()[:end] + ti.tobuf() + b"x = 1\n"
    bomb = tmp_path / "bomb.tar.gz"
    bomb.write_bytes(gzip.compress(body))
    line = one_line_error(cli("scan", bomb, "--no-cache"))
    assert "huge.py' declares 21474836480 bytes: it decompresses to more than 2 GiB" in line, line
    # limits on total decompressed size, member count and package size (lowered to test them)
    big = _tar(tmp_path / "big.tar.gz", [_member("vllm-0.0.1/docs/zeros.bin", b"\0" * (3 << 20))])
    monkeypatch.setattr(archives, "MAX_ARCHIVE_BYTES", 2 << 20)
    assert "decompresses to more than" in one_line_error(cli("scan", big, "--no-cache"))
    monkeypatch.undo()
    many = _tar(tmp_path / "many.tar.gz", [_member(f"vllm-0.0.1/docs/{i}.txt") for i in range(60)])
    monkeypatch.setattr(archives, "MAX_MEMBERS", 50)
    assert "more than 50 members" in one_line_error(cli("scan", many, "--no-cache"))
    monkeypatch.setattr(archives, "MAX_PACKAGE_BYTES", 1000)
    monkeypatch.setattr(archives, "MAX_MEMBERS", 10 ** 6)
    assert "package is larger than" in one_line_error(cli("scan", many, "--no-cache"))


def test_an_oversized_archive_member_is_a_parse_error(tmp_path):
    toy = "vllm/model_executor/models/toy.py"
    root = make_tree(tmp_path, {toy: "# padding\n" * ((9 << 20) // 10)})
    for archive in (_tar(tmp_path / "vllm-0.0.1.tar.gz", [], base=root / "vllm"),
                    _zip(tmp_path / "vllm-0.0.1-py3-none-any.whl", [], base=root)):
        r = cli("scan", archive, "-f", "json", "--model", "ToyV3ForCausalLM", "--no-cache")
        doc = json.loads(r.stdout)
        errors = {e["path"]: e["error"] for e in doc["parse_errors"]}
        assert "larger than the 8 MiB limit" in errors[toy], errors
        assert r.exit_code == 1 and doc["results"][0]["verdict"] != "supported"


# -- 8. output paths are checked before the work ----------------------------------------------


def _read_only_folder(tmp_path: Path) -> Path:
    """A folder where no file can be created, whoever runs the suite (root ignores mode bits, but
    not a read-only sysfs)."""
    if os.geteuid() == 0:
        return Path("/sys")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    return ro


def test_bad_output_paths_fail_before_the_work(tmp_path, monkeypatch):
    from tests.conftest import MINIVLLM

    def no_work(*a, **k):
        raise AssertionError("the work started before the output path was checked")

    from auditor.orchestration.scan import open_tree

    monkeypatch.setattr("auditor.orchestration.scan.open_tree", no_work)
    monkeypatch.setattr("auditor.orchestration.upgrade.open_side", no_work)
    monkeypatch.setattr("auditor.orchestration.matrix.run_matrix", no_work)
    existing = tmp_path / "report.json"
    existing.write_text("keep me\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    ro = _read_only_folder(tmp_path)
    cases = [
        (["-o", tmp_path], "is a folder"),
        (["-o", ro / "report.json"], "cannot write in"),
        (["-o", existing], "exists; pass --force"),
        (["-o", blocker / "sub" / "report.json"], "cannot be created"),
    ]
    for extra, words in cases:
        for cmd in (["scan", MINIVLLM, "-f", "json"], ["explain", "LlamaForCausalLM", MINIVLLM],
                    ["gate", "--candidate-version", MINIVLLM, "--model", "LlamaForCausalLM", "-f", "json"],
                    ["matrix", "--model", "LlamaForCausalLM", "--versions", "0.16.0", "-f", "json"]):
            line = one_line_error(cli(*cmd, *extra))
            assert words in line, (cmd, extra, line)
    assert existing.read_text() == "keep me\n"
    for summary in (tmp_path, ro / "summary.md"):
        line = one_line_error(cli("gate", "--candidate-version", MINIVLLM, "--model", "LlamaForCausalLM",
                                  "--summary", summary))
        assert "--summary" in line
    # fix --out-dir: a file instead of a folder, an existing patch (its name carries the tree's release, so
    # the tree is opened first: the work that must not start is the planning)
    assert "is not a folder" in one_line_error(cli("fix", MINIVLLM, "--model", "ToyV3ForCausalLM", "--out-dir", blocker))
    from auditor.orchestration import scan as scan_module

    monkeypatch.setattr(scan_module, "open_tree", open_tree)
    monkeypatch.setattr("auditor.orchestration.fix.plan_fix", no_work)
    (tmp_path / "out").mkdir()
    old = tmp_path / "out" / "ToyV3ForCausalLM.vllm-0.0.1+mini.eagle3.patch"
    old.write_text("old patch\n")
    line = one_line_error(cli("fix", MINIVLLM, "--model", "ToyV3ForCausalLM", "--out-dir", tmp_path / "out"))
    assert "ToyV3ForCausalLM.vllm-0.0.1+mini.eagle3.patch exists; pass --force" in line
    assert old.read_text() == "old patch\n"


def test_outputs_follow_the_umask_and_force_overwrites(tmp_path):
    from tests.conftest import MINIVLLM

    report = tmp_path / "new" / "report.json"
    report.parent.mkdir()
    old = os.umask(0o027)
    try:
        r = cli("scan", MINIVLLM, "--model", "LlamaForCausalLM", "-f", "json", "-o", report)
        assert r.exit_code == 0, r.stderr
        assert (report.stat().st_mode & 0o777) == 0o640
        out = tmp_path / "patches"
        r = cli("fix", MINIVLLM, "--model", "ToyV3ForCausalLM", "--model-type", "toy", "--out-dir", out)
        assert r.exit_code == 0, r.stderr
        for f in out.iterdir():
            assert (f.stat().st_mode & 0o777) == 0o640, f
        r = cli("fix", MINIVLLM, "--model", "ToyV3ForCausalLM", "--model-type", "toy", "--out-dir", out, "--force")
        assert r.exit_code == 0, r.stderr
    finally:
        os.umask(old)
    report.chmod(0o604)
    r = cli("scan", MINIVLLM, "--model", "LlamaForCausalLM", "-f", "json", "-o", report, "--force")
    assert r.exit_code == 0 and json.loads(report.read_text())["results"][0]["verdict"] == "supported"
    assert (report.stat().st_mode & 0o777) == 0o604  # an overwritten file keeps its permissions
    assert [p.name for p in report.parent.iterdir()] == ["report.json"]  # no temporary file left


# -- 9. every JSON input is validated against its schema --------------------------------------


def _json_cases(tmp_path: Path) -> dict[str, tuple[object, str]]:
    return {
        "architectures-string": ({"architectures": "ToyV2ForCausalLM"}, "architectures: 'ToyV2ForCausalLM' is not of type"),
        "architectures-numbers": ({"architectures": ["ToyV2ForCausalLM", 2]}, "architectures[1]: 2 is not of type 'string'"),
        "model_type-list": ({"architectures": ["ToyV2ForCausalLM"], "model_type": ["toy"]}, "model_type: ['toy'] is not"),
        "text_config-string": ({"architectures": ["ToyV2ForCausalLM"], "text_config": "toy"}, "text_config: 'toy' is not"),
        "not-an-object": (["ToyV2ForCausalLM"], "is not of type 'object'"),
        "deep": ({"architectures": ["ToyV2ForCausalLM"], "x": json.loads("[" * 40 + "]" * 40)}, "nests deeper than 32"),
    }


def test_hf_config_is_validated(tmp_path, alarm):
    from tests.conftest import MINIVLLM

    for name, (doc, words) in _json_cases(tmp_path).items():
        f = tmp_path / f"{name}.json"
        f.write_text(json.dumps(doc))
        line = one_line_error(cli("scan", MINIVLLM, "--hf-config", f))
        assert line.startswith(f"eagle-audit: error: --hf-config {f}") and words in line, (name, line)
    raw = {"recursion": ("[" * 100000, "nests deeper than 32"), "not-json": ("{architectures", "cannot read"),
           "huge": (" " * (5 << 20) + "{}", "larger than the 4 MiB limit")}
    for name, (text, words) in raw.items():
        f = tmp_path / f"{name}.json"
        f.write_text(text)
        assert words in one_line_error(cli("scan", MINIVLLM, "--hf-config", f)), name
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert "not a regular file" in one_line_error(cli("scan", MINIVLLM, "--hf-config", fifo))
    # no architectures and no --model: refused, never "0 results" and exit 0
    for doc in ({"model_type": "toy"}, {"architectures": [], "model_type": "toy"}, {"architectures": None}):
        f = tmp_path / "noarch.json"
        f.write_text(json.dumps(doc))
        r = cli("scan", MINIVLLM, "--hf-config", f, "-f", "json")
        assert "names no architectures" in one_line_error(r) and r.stdout == ""
        r = cli("scan", MINIVLLM, "--hf-config", f, "--model", "ToyV3ForCausalLM", "-f", "json")
        assert r.exit_code == 1 and len(json.loads(r.stdout)["results"]) == 1


def test_codemods_files_are_validated(tmp_path):
    from tests.conftest import MINIVLLM

    good = {"format": "eagle-audit-codemods/1", "method": "eagle3",
            "targets": [{"architecture": "ToyV3ForCausalLM", "model_type": "toy_v3", "text_model_type": "toy"}],
            "invocations": [{"codemod": "allowlist"}]}
    cases = {
        "format": ({**good, "format": "eagle-audit-codemods/9"}, "not an eagle-audit codemods file"),
        "method": ({**good, "method": "medusa"}, "method: 'medusa' is not one of"),
        "targets-object": ({**good, "targets": {"architecture": "X"}}, "targets:"),
        "no-invocations": ({k: v for k, v in good.items() if k != "invocations"}, "'invocations' is a required property"),
        "architecture-number": ({**good, "targets": [{"architecture": 3}]}, "targets[0].architecture: 3 is not of type"),
        "unknown-codemod": ({**good, "invocations": [{"codemod": "rm-rf"}]}, "unknown codemod 'rm-rf'"),
        "codemod-shape": ({**good, "invocations": [{"codemod": "../x"}]}, "has the wrong form"),
        "deep": ({**good, "source": json.loads("[" * 40 + "]" * 40)}, "nests deeper than 32"),
    }
    for name, (doc, words) in cases.items():
        f = tmp_path / f"{name}.codemods.json"
        f.write_text(json.dumps(doc))
        for cmd in (["fix", MINIVLLM, "--codemods", f], ["gate", "--candidate-version", MINIVLLM, "--codemods", f]):
            line = one_line_error(cli(*cmd))
            assert words in line, (name, cmd, line)
    f = tmp_path / "good.codemods.json"
    f.write_text(json.dumps(good))
    r = cli("fix", MINIVLLM, "--codemods", f)
    assert r.exit_code == 1 and "does not include the interface codemod" in r.stderr  # read, then re-planned


# -- 10. release fetching ----------------------------------------------------------------------


@pytest.fixture
def file_index(tmp_path, monkeypatch):
    """A PEP 503 index in a folder (file:// URL) listing minivllm as vllm 9.9.7 without a sha256
    and as 9.9.9 with one; pip's PIP_INDEX_URL points at it and the cache is isolated."""
    from tests.conftest import MINIVLLM

    files = tmp_path / "files"
    files.mkdir()
    links = []
    for version, with_hash in (("9.9.7", False), ("9.9.9", True)):
        archive = _tar(files / f"vllm-{version}.tar.gz", [], base=MINIVLLM / "vllm", prefix=f"vllm-{version}")
        frag = f"#sha256={hashlib.sha256(archive.read_bytes()).hexdigest()}" if with_hash else ""
        links.append(f'<a href="../../files/{archive.name}{frag}">{archive.name}</a>')
    page = tmp_path / "index" / "vllm"
    page.mkdir(parents=True)
    (page / "index.html").write_text("<html><body>" + "\n".join(links) + "</body></html>\n")
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "index").as_uri())
    monkeypatch.setenv("EAGLE_AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EAGLE_AUDIT_ALLOW_UNVERIFIED", raising=False)
    return tmp_path


def test_an_archive_without_a_published_sha256_is_refused_unless_allowed(file_index):
    line = one_line_error(cli("scan", "--vllm-version", "9.9.7", "--model", "LlamaForCausalLM", "--no-progress"))
    assert "publishes no sha256 for vllm-9.9.7.tar.gz" in line and "--allow-unverified" in line
    r = cli("--allow-unverified", "scan", "--vllm-version", "9.9.7", "--model", "LlamaForCausalLM", "-f", "json",
            "--no-progress")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["source"] == "vllm-9.9.7.tar.gz (unverified: the package index publishes no sha256 " \
                                             "for it)"
    assert r.stderr.startswith("eagle-audit: warning: vllm-9.9.7.tar.gz (unverified")
    for args in (("explain", "LlamaForCausalLM", "--vllm-version", "9.9.7"),
                 ("fix", "--vllm-version", "9.9.7", "--model", "ToyV3ForCausalLM", "--model-type", "toy"),
                 ("gate", "--candidate-version", "9.9.7", "--model", "LlamaForCausalLM")):
        r = cli("--allow-unverified", *args, "--no-progress")
        assert r.exit_code == 0, (args, r.stderr)
        assert r.stderr.startswith("eagle-audit: warning: vllm-9.9.7.tar.gz (unverified"), (args, r.stderr)
        if args[0] == "fix":
            assert "eagle-audit fix: vllm-9.9.7.tar.gz (unverified" in r.stderr
    archives = file_index / "cache" / "archives"
    assert not (archives / "vllm-9.9.7.tar.gz.sha256").exists()  # never trusted offline later
    r = cli("scan", "--vllm-version", "9.9.9", "--model", "LlamaForCausalLM", "-f", "json", "--no-progress")
    assert r.exit_code == 0 and json.loads(r.stdout)["source"] == "vllm-9.9.9.tar.gz" and r.stderr == ""
    assert (archives / "vllm-9.9.9.tar.gz.sha256").is_file()


def test_a_read_only_cache_folder_means_no_caching(file_index, monkeypatch):
    ro = _read_only_folder(file_index)
    monkeypatch.setenv("EAGLE_AUDIT_CACHE_DIR", str(ro / "eagle-audit-cache"))
    r = cli("scan", "--vllm-version", "9.9.9", "--model", "ToyV3ForCausalLM", "--model-type", "toy", "-f", "json",
            "--no-progress")
    assert r.exit_code == 1 and r.stderr == "", r.stderr
    assert json.loads(r.stdout)["results"][0]["verdict"] == "blocked"


@pytest.mark.parametrize("version", ["0.16.0\x1b[2J\x1b[31m", "9" * 10000, "0.16.0; touch x", "../../etc/passwd",
                                     "", "0.16.0\n0.17.0"])
def test_odd_vllm_versions_get_one_line(version, file_index):
    line = one_line_error(cli("scan", "--vllm-version", version))
    assert "is not a valid vLLM version" in line and len(line) < 160 and "\x1b" not in line


# -- 11. strings from the tree cannot drive the terminal --------------------------------------


def test_control_characters_from_the_tree_are_neutralised(tmp_path):
    import xml.etree.ElementTree as ET

    root = make_tree(tmp_path)
    evil = "Toy\x1b[2J\x1b[31m[red]V2\u202eForCausalLM\r"
    reg = root / "vllm/model_executor/models/registry.py"
    head = "_TEXT_GENERATION_MODELS = {\n"
    reg.write_text(reg.read_text().replace(head, head + f"    {evil!r}: ('toy', 'ToyV2ForCausalLM'),\n"))
    runs = {fmt: cli("scan", root, "-f", fmt, "--no-progress", "--no-cache")
            for fmt in ("table", "markdown", "junit", "json", "sarif")}
    runs["explain"] = cli("explain", evil, root)
    runs["fix"] = cli("fix", root, "--model", evil, "--model-type", "toy")
    runs["gate"] = cli("gate", "--candidate-version", root, "--model", evil, "--model-type", "toy")
    runs["error"] = cli("scan", root, "--model", "Nope\x1b[2J\u202e")
    for name, r in runs.items():
        for stream in (r.stdout, r.stderr):
            assert not any(c in stream for c in "\x1b\u202e\r"), (name, stream[:500])
    table = runs["table"].stdout
    assert "Toy\\x1b[2J\\x1b[31m[red]V2\\u202eForCausalLM\\x0d" in table  # shown, escaped, not markup
    assert runs["explain"].exit_code == 0 and "[red]V2" in runs["explain"].stdout
    ET.fromstring(runs["junit"].stdout)  # well-formed XML (control characters are not allowed in XML 1.0)
    assert evil in {x["architecture"] for x in json.loads(runs["json"].stdout)["results"]}  # JSON escapes by itself
    assert "Nope\\x1b[2J\\u202e" in runs["error"].stderr


# -- property tests: generated modules and archive member lists --------------------------------


_BASES = st.sampled_from(["nn.Module", "LlamaForCausalLM", "ToyV2ForCausalLM", "SupportsEagle3", "SupportsPP",
                          "GenModel", "GenForCausalLM", "Missing", "object", "interfaces.SupportsEagle3"])
_MEMBERS = st.sampled_from([
    "pass",
    "model_cls = GenModel",
    "def __init__(self, vllm_config=None, prefix=''):\n        super().__init__()\n        self.model = GenModel()",
    "def __init__(self, vllm_config=None, prefix=''):\n        self.model = self.model_cls()",
    "def __init__(self):\n        self.language_model = init_vllm_registered_model(architectures=['LlamaForCausalLM'])",
    "def forward(self, x):\n        for i, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer)):\n"
    "            x = layer(x)\n        return x",
    "def forward(self, x):\n        aux = []\n        for idx, layer in enumerate(self.layers[self.start_layer:self.end_layer]):\n"
    "            if idx in self.aux_hidden_state_layers:\n                aux.append(x)\n            x = layer(x)\n"
    "        return x, aux",
    "def get_eagle3_aux_hidden_state_layers(self):\n        ...",
    "def set_aux_hidden_state_layers(self, layers):\n        self.model.aux_hidden_state_layers = layers",
    "supports_eagle3 = True",
    "image_token_index = 3",
])
_MODULE_LINES = st.sampled_from([
    "from torch import nn", "from itertools import islice", "from .llama import LlamaForCausalLM",
    "from .toy import ToyV2ForCausalLM", "from .interfaces import SupportsEagle3, SupportsPP",
    "from . import interfaces", "from .gen import GenForCausalLM", "from .missing import Missing", "from . import *",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .toy import ToyV2ForCausalLM",
    "def __getattr__(name):\n    return globals()[name]", "GenForCausalLM = as_seq_cls_model(LlamaForCausalLM)",
    "class GenModel(GenModel):\n    pass", "try:\n    from .llama import LlamaModel as GenModel\nexcept ImportError:\n    pass",
    "Gen = {'a': (1, 2), **{}}",
])


@st.composite
def _modules(draw) -> bytes:
    """A module source aimed at what the analysis reads (classes, bases, layer loops, protocol
    members, imports), with some pathological shapes and some plain garbage."""
    lines = draw(st.lists(_MODULE_LINES, max_size=5))
    for name in draw(st.lists(st.sampled_from(["GenForCausalLM", "GenModel", "GenVLForConditionalGeneration"]),
                              min_size=1, max_size=3)):
        bases = draw(st.lists(_BASES, max_size=3))
        body = draw(st.lists(_MEMBERS, min_size=1, max_size=4))
        deco = draw(st.sampled_from(["", "@support_torch_compile\n", "@dataclass\n"]))
        lines.append(f"{deco}class {name}({', '.join(bases)}):\n    " + "\n    ".join(body))
    kind = draw(st.sampled_from(["plain"] * 6 + ["deep-sum", "deep-parens", "deep-calls", "garbage", "bytes"]))
    if kind == "deep-sum":
        lines.append("x = " + " + ".join(["a"] * draw(st.integers(1000, 60000))))
    elif kind == "deep-parens":
        n = draw(st.integers(50, 300))
        lines.append("x = " + "(" * n + "1" + ")" * n)
    elif kind == "deep-calls":
        lines.append("x = f" + "()" * draw(st.integers(100, 3000)))
    elif kind == "garbage":
        lines.insert(draw(st.integers(0, len(lines))), draw(st.text(max_size=40)))
    source = "\n\n".join(lines) + "\n"
    data = source.encode("utf-8", "surrogatepass")
    if kind == "bytes":
        data = draw(st.binary(max_size=20)) + data
    return data


def _scan_dict(source) -> dict:
    """The full scan of a source as plain data (the label aside), or the error it ends with."""
    from auditor.hf.targets import resolve_targets
    from auditor.index.tree import SummaryCache
    from auditor.model.errors import AuditError
    from auditor.orchestration.scan import Auditor, make_tree

    try:
        a = Auditor(make_tree(source, SummaryCache(enabled=False)))
        doc = a.scan(resolve_targets(a.registry, []), ["eagle3", "eagle"]).as_dict()
    except AuditError as exc:  # e.g. a registry that no longer parses: the same on both sides
        return {"error": str(exc)}
    doc.pop("source")
    return doc


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(modules=st.lists(_modules(), min_size=1, max_size=2))
def test_property_scan_never_crashes_and_a_folder_scans_like_its_archive(modules):
    import tempfile

    from auditor.source.archive import ArchiveSource
    from auditor.source.folder import FolderSource

    with tempfile.TemporaryDirectory() as tmp:
        root = make_tree(Path(tmp))
        names = ["gen", "gen_vl"][: len(modules)]
        for name, data in zip(names, modules):
            (root / "vllm/model_executor/models" / f"{name}.py").write_bytes(data)
        add_rows(root, {"GenForCausalLM": "gen", "GenModelForCausalLM": names[-1],
                        "GenVLForConditionalGeneration": names[-1]})
        archive = _tar(Path(tmp) / "vllm-0.0.1.tar.gz", [], base=root / "vllm")
        folder = _scan_dict(FolderSource(root))
        assert folder == _scan_dict(ArchiveSource(archive))
        if "error" not in folder:
            verdicts = {r["architecture"]: r["verdict"] for r in folder["results"]}
            assert verdicts["LlamaForCausalLM"] == "supported"  # trouble in one module stays there


_BENIGN = ["vllm", "model_executor", "models", "sub", "x.py", "a.py", "b.py", "__init__.py", "__pycache__",
           "PKG-INFO", "é.py", "n\nl.py", "_version.py"]
_HOSTILE = [".", "", "..", "d\\e.py"]
_PIECES = st.sampled_from(_BENIGN * 6 + _HOSTILE)


@st.composite
def _member_lists(draw) -> list[tuple[str, bytes, bytes | None]]:
    """Members laid over minivllm's archive: names from a small alphabet that includes the hostile
    pieces ('..', '', '.', backslashes, absolute paths) now and then, all kinds of members, repeats."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        parts = draw(st.lists(_PIECES, min_size=1, max_size=4))
        lead = draw(st.sampled_from(["vllm-0.0.1/vllm/"] * 6 + ["vllm-0.0.1/", "vllm-0.0.1/vllm/model_executor/models/",
                                     "/", "./vllm-0.0.1/vllm/", "vllm-0.0.1//vllm/"]))
        kind = draw(st.sampled_from([tarfile.REGTYPE] * 12 + [tarfile.DIRTYPE] * 3 + [
            tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE]))
        body = draw(st.sampled_from([b"x = 1\n", b"class A(B): pass\n", b"def (\n", b"\xff\xfe", b"",
                                     b"__version__ = '1.2.3'\n"]))
        out.append((lead + "/".join(parts), kind, body))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(members=_member_lists(), as_zip=st.booleans())
def test_property_an_archive_reads_as_its_extraction_or_is_refused(members, as_zip):
    """Random member lists, in a .tar.gz or a wheel (zip): the archive is refused with one line,
    or the tool sees exactly the files a standard extraction (tarfile's 'data' filter, zipfile's
    extractall) lays out."""
    import tempfile
    import warnings

    from auditor.model.errors import SourceError
    from auditor.source.archive import ArchiveSource
    from auditor.source.folder import FolderSource

    with tempfile.TemporaryDirectory() as tmp:
        if as_zip:
            extra = []
            for name, kind, body in members:
                name = name.removeprefix("vllm-0.0.1/").removeprefix("./vllm-0.0.1/")
                mode = {tarfile.SYMTYPE: stat.S_IFLNK, tarfile.FIFOTYPE: stat.S_IFIFO,
                        tarfile.DIRTYPE: stat.S_IFDIR}.get(kind, stat.S_IFREG)
                extra.append((_zinfo(name + ("/" if kind == tarfile.DIRTYPE else ""), mode | 0o644), body))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # duplicate names
                archive = _zip(Path(tmp) / "vllm-0.0.1-py3-none-any.whl", extra)
        else:
            extra = []
            for name, kind, body in members:
                ti = tarfile.TarInfo(name)
                ti.type = kind
                if kind == tarfile.REGTYPE:
                    ti.size = len(body)
                else:
                    ti.linkname = "vllm-0.0.1/vllm/__init__.py" if kind == tarfile.LNKTYPE else "x.py"
                extra.append((ti, body if kind == tarfile.REGTYPE else None))
            archive = _tar(Path(tmp) / "vllm-0.0.1.tar.gz", extra)
        try:
            src = ArchiveSource(archive)
        except SourceError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(("refusing archive", "cannot read archive"))
            return
        dest = Path(tmp) / "x"
        if as_zip:
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(dest)
            folder = FolderSource(dest)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(dest, filter="data")
            folder = FolderSource(dest / "vllm-0.0.1")
        assert src.files() == folder.files()
        for rel in src.files():
            assert src.read(rel) == folder.read(rel), rel
        assert src.version() == folder.version()
        src.close()


# -- promises of the README not covered above ----------------------------------------------------


def test_no_code_from_the_tree_runs_and_archives_are_never_extracted(tmp_path, monkeypatch):
    """Planted module code (module level, class bodies, __init__ files, the version file) never
    runs under scan, explain, fix or gate, from a folder, a .tar.gz or a wheel; and no archive is
    ever extracted to disk."""
    marker = tmp_path / "PWNED"
    plant = f"open({str(marker)!r}, 'w').write('ran')\nimport os\nos.system('touch {marker}')\n"
    models = "vllm/model_executor/models/"
    from tests.conftest import MINIVLLM

    root = make_tree(tmp_path, {
        models + "evil.py": plant + "class EvilForCausalLM:\n    " + plant.replace("\n", "\n    ") + "\n",
        models + "__init__.py": (MINIVLLM / models / "__init__.py").read_text() + plant,
        "vllm/__init__.py": (MINIVLLM / "vllm/__init__.py").read_text() + plant,
        "vllm/_version.py": "__version__ = '0.0.1'\n" + plant,
    })
    add_rows(root, {"EvilForCausalLM": "evil"})
    archives = [_tar(tmp_path / "vllm-0.0.1.tar.gz", [], base=root / "vllm"),
                _zip(tmp_path / "vllm-0.0.1-py3-none-any.whl", [], base=root)]

    def never(*a, **k):
        raise AssertionError("an archive was extracted")

    for cls in (tarfile.TarFile, zipfile.ZipFile):
        monkeypatch.setattr(cls, "extract", never)
        monkeypatch.setattr(cls, "extractall", never)
    for tree in (root, *archives):
        for args in (("scan", tree, "-f", "json"), ("explain", "EvilForCausalLM", tree),
                     ("fix", tree, "--model", "ToyV3ForCausalLM", "--model-type", "toy"),
                     ("gate", "--candidate-version", tree, "--model", "EvilForCausalLM")):
            r = cli(*args, "--no-cache") if args[0] != "gate" else cli(*args)
            assert r.exit_code in (0, 1), (args, r.stderr)
    assert not marker.exists()


def test_sigterm_during_an_apply_restores_what_it_wrote(tmp_path, monkeypatch):
    import signal

    from auditor.workspace import folder

    root = make_tree(tmp_path)
    pristine = tree_hash(root)
    real_put = folder.Dir.put
    seen = []

    def put(self, name, data=None, **kw):
        if kw.get("shown"):
            seen.append(name)
            if len(seen) == 2:
                os.kill(os.getpid(), signal.SIGTERM)
        return real_put(self, name, data, **kw)

    monkeypatch.setattr(folder.Dir, "put", put)
    old = signal.getsignal(signal.SIGTERM)
    try:
        r = cli("fix", root, "--model", VL, "--model-type", "toy", "--apply")
    finally:
        signal.signal(signal.SIGTERM, old)
    assert r.exit_code == 130 and "interrupted" in r.stderr
    # SIGTERM is held back while the tree is written: the second write completes, then both are restored
    assert seen[2:] == seen[1::-1]
    assert tree_hash(root) == pristine and not temps(root)
