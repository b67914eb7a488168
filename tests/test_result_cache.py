"""The whole-scan result caches on synthetic trees: results that read transformers are cached and
re-checked against the transformers at hand, and a release archive's results are found before the
archive is opened."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import MINIVLLM, REPO, add_registry_row, make_tree

from auditor.model.results import TargetSpec
from auditor.orchestration import scan as scan_mod
from auditor.orchestration.scan import Auditor, open_tree

STUB = REPO / "fixtures" / "transformers_stub"

_WRAPPER = '''
from vllm.model_executor.models.interfaces import SupportsMultiModal
from vllm.model_executor.models.llama import LlamaForCausalLM


class ToyVisionForConditionalGeneration(LlamaForCausalLM, SupportsMultiModal):
    pass
'''
SPEC = TargetSpec("ToyVisionForConditionalGeneration", "toy_vision", "llama", "test")


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("EAGLE_AUDIT_CACHE_DIR", str(root))
    return root


@pytest.fixture
def vision_tree(tmp_path):
    folder = make_tree(tmp_path / "t", {"vllm/model_executor/models/wrap.py": _WRAPPER})
    add_registry_row(folder, SPEC.architecture, "wrap")
    stub = tmp_path / "transformers_stub"
    shutil.copytree(STUB, stub, ignore=shutil.ignore_patterns("__pycache__"))
    return folder, stub


def _scan(folder, stub, calls: list):
    a = Auditor(open_tree(str(folder), None, progress=False), transformers=str(stub))
    real = a._scan

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    a._scan = counted
    return a, a.scan([SPEC], ["eagle3"])


def test_a_result_that_read_transformers_is_cached_while_that_transformers_is_unchanged(vision_tree, cache_root):
    folder, stub = vision_tree
    calls: list = []
    a, first = _scan(folder, stub, calls)
    cacheable, state = a.transformers_state()
    assert cacheable and state["reads"], "the image-token verdict reads the config class from transformers"
    assert any(p.endswith("configuration_toy_vision.py") for p in state["reads"])
    _, second = _scan(folder, stub, calls)
    assert calls == [1] and second.as_dict() == first.as_dict()  # answered from the cache
    # a file the verdict read from transformers changes: computed again
    cfg = next(stub.rglob("configuration_toy_vision.py"))
    cfg.write_text(cfg.read_text() + "\n# changed\n")
    _, third = _scan(folder, stub, calls)
    assert calls == [1, 1] and third.as_dict() == first.as_dict()
    # another transformers file appears (the file list is part of what was read): computed again
    (cfg.parent / "extra.py").write_text("X = 1\n")
    _scan(folder, stub, calls)
    assert len(calls) == 3
    _scan(folder, stub, calls)
    assert len(calls) == 3


def test_a_result_that_needed_an_absent_transformers_is_not_cached(vision_tree, cache_root, monkeypatch):
    import auditor.hf.configs as hf

    monkeypatch.setattr(hf, "locate_transformers", lambda *args, **kwargs: None)  # none installed
    monkeypatch.delenv("EAGLE_AUDIT_TRANSFORMERS", raising=False)
    folder, _ = vision_tree
    calls: list = []
    for _ in range(2):
        a = Auditor(open_tree(str(folder), None, progress=False))
        real = a._scan
        a._scan = lambda *args, real=real, **kw: calls.append(1) or real(*args, **kw)
        report = a.scan([SPEC], ["eagle3"])
    (f,) = [f for f in report.targets[0].findings if f.gate == "image-token"]
    assert f.severity.value == "unknown"  # it needed a config class from a transformers not at hand
    assert a.transformers_state() == (False, None) and len(calls) == 2  # so it was not cached


def _archive(tmp_path: Path, name: str = "vllm-0.0.1") -> Path:
    path = tmp_path / f"{name}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        tf.add(MINIVLLM / "vllm", arcname=f"{name}/vllm",
               filter=lambda ti: None if "__pycache__" in ti.name else ti)
    return path


def test_release_results_are_found_before_the_archive_is_opened(tmp_path, cache_root, monkeypatch):
    from auditor.orchestration.release_results import ReleaseResults, archive_sha256
    from auditor.source import archive as archives

    archive = _archive(tmp_path)
    request = {"models": ["LlamaForCausalLM"], "methods": ["eagle3"]}
    key = archive_sha256(str(archive), None, None)
    assert key[1] == archive.name and len(key[0]) == 64
    assert archive_sha256(str(MINIVLLM), None, None) is None  # a folder: no archive to key on
    cache = ReleaseResults(key, request)
    assert cache.get() is None
    a = Auditor(open_tree(str(archive), None, progress=False))
    from auditor.hf.targets import resolve_targets

    report = a.scan(resolve_targets(a.registry, ["LlamaForCausalLM"]), ["eagle3"])
    cache.put(report, a)

    def refuse(*args, **kwargs):
        raise AssertionError("the archive was opened")

    monkeypatch.setattr(archives.ArchiveSource, "__init__", refuse)
    hit = ReleaseResults(archive_sha256(str(archive), None, None), request).get()
    assert hit is not None and hit.as_dict() == report.as_dict()
    assert ReleaseResults(key, {**request, "methods": ["eagle"]}).get() is None  # another request
    # the same name with other bytes is another archive
    archive.write_bytes(archive.read_bytes() + b"\0" * 1024)
    assert ReleaseResults(archive_sha256(str(archive), None, None), request).get() is None
    assert ReleaseResults(key, request, enabled=False).get() is None


def test_the_cli_answers_a_repeated_archive_scan_from_the_release_results(tmp_path, cache_root):
    archive = _archive(tmp_path)
    argv = [sys.executable, "-m", "auditor", "scan", str(archive), "-m", "LlamaForCausalLM", "--format", "json",
            "--exit-zero", "--no-progress"]
    first = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    assert first.returncode == 0, first.stderr
    entries = sorted(p.name for p in (cache_root / "results").rglob("*.json"))
    assert len(entries) == 3  # the tree's results, the release results, and their JSON as written
    second = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    assert second.returncode == 0 and second.stdout == first.stdout


def test_same_transformers_compares_choice_files_and_content(vision_tree, cache_root):
    folder, stub = vision_tree
    a, _ = _scan(folder, stub, [])
    _, state = a.transformers_state()
    tf, how = a.shared["transformers_chosen"]
    assert scan_mod.same_transformers(state, tf, how)
    assert not scan_mod.same_transformers(state, tf, how + " (elsewhere)")
    assert not scan_mod.same_transformers(state, None, how)
    assert not scan_mod.same_transformers({**state, "reads": {**state["reads"], "transformers/gone.py": "0" * 64}},
                                          tf, how)


def _same_size_edit(path: Path) -> None:
    """Change one byte of ``path`` and put its mtime back: only its ctime tells."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[-1:] = b"\n" if data[-1:] != b"\n" else b" "
    path.write_bytes(bytes(data))
    import os

    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def test_folder_results_are_keyed_on_the_manifest_and_found_before_the_tree_is_opened(vision_tree, cache_root,
                                                                                     monkeypatch):
    from auditor.hf.targets import resolve_targets
    from auditor.orchestration import release_results as rr

    folder, stub = vision_tree
    request = {"models": ["LlamaForCausalLM"], "methods": ["eagle3"], "transformers": str(stub)}

    def scan_and_put():
        key, src, age = rr.folder_manifest(str(folder), None)
        cache = rr.ReleaseResults(key, request, folder=(src, age))
        a = Auditor(open_tree(str(folder), None, progress=False), transformers=str(stub))
        report = a.scan(resolve_targets(a.registry, ["LlamaForCausalLM"]), ["eagle3"])
        cache.put(report, a)
        return report

    def lookup():
        key, src, age = rr.folder_manifest(str(folder), None)
        return rr.ReleaseResults(key, request, folder=(src, age)).get()

    assert rr.folder_manifest(str(folder / "vllm" / "__init__.py"), None) is None  # a file: not a folder
    scan_and_put()  # files written just now: a change in the same timestamp tick could go unseen
    assert lookup() is None
    monkeypatch.setattr(rr, "RACY_SECONDS", -1.0)  # as if they were older
    report = scan_and_put()

    def refuse(*args, **kwargs):
        raise AssertionError("an auditor was built")

    with monkeypatch.context() as m:
        m.setattr(scan_mod.Auditor, "__init__", refuse)  # a hit needs no registry, no resolver
        hit = lookup()
    assert hit is not None and hit.as_dict() == report.as_dict()
    # the same size and mtime, other bytes: the ctime differs, so the manifest does
    _same_size_edit(folder / "vllm" / "model_executor" / "models" / "llama.py")
    assert lookup() is None
    report = scan_and_put()
    assert lookup() is not None
    (folder / "vllm" / "model_executor" / "models" / "new_model.py").write_text("X = 1\n")  # a file added
    assert lookup() is None


def test_pip_configuration_is_read_again_when_a_file_pip_consults_changes(tmp_path, cache_root, monkeypatch):
    import pip._internal.configuration as pipconf

    from auditor.source import digests, pipconfig

    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = file:///a/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.setattr(digests, "RACY_SECONDS", -1.0)
    assert pipconfig.pip_config_memo()[0]["global.index-url"] == "file:///a/simple"
    real = pipconf.Configuration

    class Refused:
        def __init__(self, *args, **kwargs):
            raise AssertionError("pip's configuration was read again")

    monkeypatch.setattr(pipconf, "Configuration", Refused)
    assert pipconfig.pip_config_memo()[0]["global.index-url"] == "file:///a/simple"  # from the memo
    monkeypatch.setattr(pipconf, "Configuration", real)
    conf.write_text("[global]\nindex-url = file:///b/simple\n")  # same size
    assert pipconfig.pip_config_memo()[0]["global.index-url"] == "file:///b/simple"


def test_a_cached_archive_is_hashed_again_once_its_stamp_changes(tmp_path, cache_root, monkeypatch):
    import hashlib

    from auditor.source import digests

    monkeypatch.setattr(digests, "RACY_SECONDS", -1.0)
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(b"x" * 4096)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert digests.has_digest(archive, digest) and digests.has_digest(archive, digest)
    assert not digests.has_digest(archive, "0" * 64)
    _same_size_edit(archive)
    assert not digests.has_digest(archive, digest)


def test_a_rendered_report_is_answered_with_its_exit_status_and_not_for_another_format(tmp_path, cache_root):
    archive = _archive(tmp_path)
    base = [sys.executable, "-m", "auditor", "scan", str(archive), "--no-progress"]
    runs = {}
    for fmt in ("json", "junit", "json", "junit", "markdown"):
        p = subprocess.run([*base, "--format", fmt], capture_output=True, text=True, cwd=REPO)
        runs.setdefault(fmt, []).append((p.returncode, p.stdout))
    assert runs["json"][0] == runs["json"][1] and runs["junit"][0] == runs["junit"][1]
    assert runs["json"][0][0] == 1  # the mini tree has blocked targets: the same exit status from the cache
    assert runs["junit"][0][1] != runs["json"][0][1] and "| architecture |" in runs["markdown"][0][1]
    p = subprocess.run([*base, "--format", "json", "--exit-zero"], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0 and p.stdout == runs["json"][0][1]
