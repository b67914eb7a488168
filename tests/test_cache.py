"""The one cache (auditor/cache.py): data-only entries, private folder, keys that cover every
input and the tool's own code."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
import subprocess
import sys

import pytest

from auditor import cache
from auditor.index.summary import summarize
from auditor.index.tree import SummaryCache
from auditor.model.findings import Finding, Severity, Verdict
from auditor.orchestration.scan import make_tree
from auditor.source.folder import FolderSource
from tests.conftest import MINIVLLM, REPO


def test_round_trip_of_summaries_and_findings():
    src = b"class A(B):\n    x: int = 1\n    def forward(self):\n        for i, l in enumerate(self.layers):\n            pass\n"
    s = summarize(src, "vllm/model_executor/models/a.py")
    assert cache.decode(cache.encode(s)) == s
    f = Finding("EA301", "allowlist", Severity.ERROR, "m", "p.py", 3, True, {"entries": ["a"], "k": (1, 2)})
    back = cache.decode(cache.encode([f, Verdict.BLOCKED, {("a", 1): {1, 2}}, frozenset({"x"})]))
    assert back == [f, Verdict.BLOCKED, {("a", 1): {1, 2}}, frozenset({"x"})]
    assert back[1] is Verdict.BLOCKED


@pytest.mark.parametrize("payload", [
    b'{"@": "os.system", "command": "touch MARKER"}',            # a class that is not ours
    b'{"@": "auditor.index.facts.ModuleSummary", "module": 1}',    # ours, wrong fields
    b'{"@e": "subprocess.Popen", "v": "x"}',
    b"not json at all",
])
def test_foreign_entries_are_misses(tmp_path, payload):
    store = cache.Store("index", root=tmp_path)
    store.put("ab" * 32, {"ok": 1})
    store.path("ab" * 32).write_bytes(payload)
    assert store.get("ab" * 32) is None


def test_a_pickle_planted_in_the_cache_never_runs(tmp_path, monkeypatch):
    """Seed every summary key of a scan with a pickle whose loading would create a marker file:
    the scan still works, and nothing ran."""
    root = tmp_path / "cache"
    marker = tmp_path / "MARKER"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    tree = make_tree(FolderSource(MINIVLLM), SummaryCache(root=root))
    for rel in sorted(tree.files):
        digest = __import__("hashlib").sha256((MINIVLLM / rel).read_bytes()).hexdigest()
        p = tree.cache.store.path(tree.summary_key(digest))
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(pickle.dumps(Payload()))
    for rel in sorted(tree.files):
        assert tree.summary(rel).path == rel
    assert not marker.exists()


def test_cache_folders_are_private(tmp_path):
    store = cache.Store("results", root=tmp_path / "root")
    store.put("cd" * 32, [1, 2])
    for folder in (tmp_path / "root", tmp_path / "root" / "results", store.path("cd" * 32).parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert store.get("cd" * 32) == [1, 2]


def test_unwritable_cache_costs_speed_only(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    store = cache.Store("index", root=blocker / "cache")
    store.put("ef" * 32, {"a": 1})  # no exception
    assert store.get("ef" * 32) is None
    assert blocker.read_text() == "a file where the cache folder should be"
    assert [p.name for p in tmp_path.iterdir()] == ["not-a-folder"]


def _scan_json(env, tree, *extra):
    p = subprocess.run([sys.executable, "-m", "auditor", "scan", str(tree), "--model", "LlamaForCausalLM",
                        "--format", "json", "--model-type", "deepseek_v3", "--exit-zero", *extra],
                       capture_output=True, text=True, env=env, cwd=env["PWD"])
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_editing_a_rule_message_shows_without_no_cache(tmp_path):
    """A copy of the tool, scanned twice with one cache: after an edit of a rule's message the
    second scan reports the new message (the cache key covers the tool's own code)."""
    code = tmp_path / "code"
    for pkg in ("auditor", "rules"):
        shutil.copytree(REPO / pkg, code / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    tree = tmp_path / "tree"
    shutil.copytree(MINIVLLM, tree)
    env = dict(os.environ, PYTHONPATH=str(code), EAGLE_AUDIT_CACHE_DIR=str(tmp_path / "cache"), PWD=str(code))
    first = _scan_json(env, tree)
    msg = [f["message"] for f in first["results"][0]["findings"] if f["gate"] == "allowlist"][0]
    assert "is not admitted by the" in msg
    rule = code / "rules" / "allowlist" / "rule.py"
    rule.write_text(rule.read_text().replace("is not admitted by the", "is refused by the"))
    second = _scan_json(env, tree)
    msg2 = [f["message"] for f in second["results"][0]["findings"] if f["gate"] == "allowlist"][0]
    assert "is refused by the" in msg2


def test_result_cache_sees_a_new_version_file(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(MINIVLLM, tree)
    env = dict(os.environ, EAGLE_AUDIT_CACHE_DIR=str(tmp_path / "cache"), PWD=str(REPO))
    before = _scan_json(env, tree)["vllm_version"]
    (tree / "vllm" / "_version.py").write_text("__version__ = version = '9.9.9'\n")
    assert _scan_json(env, tree)["vllm_version"] == "9.9.9" != before
