"""Hostile and broken input (issue 11): every promise of the README's "Safety promises" section,
each checked on an input this module builds itself (no binary blobs in the repository).

Conventions: bad input ends with exit 2 and exactly one line on stderr, no traceback; nothing is
ever written outside the tree given (checked by hashing a sentinel folder beside it); no payload
ever runs (checked by the absence of its marker file).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

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
    """sha256 over every path, file content and link target under ``folder``."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(folder)):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
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
        ("fix", str(root), "--model", "ToyV2ForCausalLM", "--model-type", payload, "--out", str(out)),
        ("fix", str(root), "--model", "ToyV2ForCausalLM", "--model-type", payload, "--apply"),
        ("gate", "--candidate", str(root), "--model", "ToyV2ForCausalLM", "--model-type", payload),
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
        r = cli("gate", "--candidate", str(root), "--codemods", str(f))
        assert "is not a model_type" in one_line_error(r)
    # a checkpoint config carrying it
    for cfg in ({"architectures": ["ToyV2ForCausalLM"], "model_type": payload},
                {"architectures": ["ToyV2ForCausalLM"], "model_type": "toy", "text_config": {"model_type": payload}}):
        f = tmp_path / "config.json"
        f.write_text(json.dumps(cfg))
        assert "is not a model_type" in one_line_error(cli("scan", str(root), "--hf-config", str(f)))
    # [tool.eagle-audit]
    proj = tmp_path / "pyproject.toml"
    proj.write_text(f"[tool.eagle-audit]\ntargets = ['ToyV2ForCausalLM']\nmodel-type = {json.dumps(payload)}\n")
    r = cli("gate", "--candidate", str(root), "--config", str(proj))
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
