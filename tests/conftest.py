"""Shared fixtures and helpers for the synthetic-tree tests.

- Every test session gets its own cache root (``EAGLE_AUDIT_CACHE_DIR``) so that index pickles
  written by one run can never leak into another; its ``archives`` folder is a symlink to the
  user's real release-archive cache, so tests on real vLLM releases still reuse downloaded
  archives (and keep them for later runs).
- :func:`make_tree` lays a copy of ``fixtures/minivllm`` in a temporary folder with some files
  replaced or deleted; :func:`audit` audits one architecture of such a folder.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import pytest

from auditor.source.fetch import archive_cache_dir

REPO = Path(__file__).resolve().parents[1]
MINIVLLM = REPO / "fixtures" / "minivllm"


@pytest.fixture(scope="session", autouse=True)
def isolated_cache_root(tmp_path_factory):
    """Point ``EAGLE_AUDIT_CACHE_DIR`` at a per-session folder whose ``archives`` entry links to
    the real archive cache (computed before the override, so a user-set variable is honoured)."""
    real_archives = archive_cache_dir()
    real_archives.mkdir(parents=True, exist_ok=True)
    root = tmp_path_factory.mktemp("eagle-audit-cache")
    (root / "archives").symlink_to(real_archives, target_is_directory=True)
    old = os.environ.get("EAGLE_AUDIT_CACHE_DIR")
    os.environ["EAGLE_AUDIT_CACHE_DIR"] = str(root)
    try:
        yield root
    finally:
        if old is None:
            os.environ.pop("EAGLE_AUDIT_CACHE_DIR", None)
        else:
            os.environ["EAGLE_AUDIT_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def releases():
    """The real vLLM releases, shared by the whole test session: a
    :class:`tests.real.SessionReleases` (index listing read once, cached archives, one
    Auditor per release)."""
    from tests.real import SessionReleases

    return SessionReleases()


def make_tree(tmp_path: Path, overrides: dict[str, str | None] | None = None) -> Path:
    """Copy ``fixtures/minivllm`` to ``tmp_path/minivllm`` and apply ``overrides``.

    Args:
        tmp_path: a fresh temporary folder.
        overrides: POSIX path relative to the tree root (``vllm/x/y.py``) → new source text, or
            None to delete the file.

    Returns:
        The folder that contains ``vllm/`` (pass it to the CLI or :func:`audit`).
    """
    dest = Path(tmp_path) / "minivllm"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(MINIVLLM, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for rel, text in (overrides or {}).items():
        p = dest / rel
        if text is None:
            if p.exists():
                p.unlink()
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return dest


def open_auditor(folder: Path | str):
    """An :class:`auditor.orchestration.scan.Auditor` over a folder, without the on-disk index cache."""
    from auditor.orchestration.scan import Auditor, open_tree

    return Auditor(open_tree(str(folder), None, progress=False, use_cache=False))


def audit(folder: Path | str, arch: str, method: str = "eagle3", text_model_type: str | None = None):
    """Audit one architecture of the tree in ``folder``; returns the
    :class:`auditor.orchestration.scan.TargetResult`. ``text_model_type`` acts as ``--model-type``."""
    from auditor.hf.targets import resolve_targets

    a = open_auditor(folder)
    (spec,) = resolve_targets(a.registry, [arch], model_type=text_model_type)
    return a.audit(spec, method)


def add_registry_row(folder: Path, arch: str, module: str, class_name: str | None = None,
                     table: str = "_TEXT_GENERATION_MODELS") -> None:
    """Append ``"arch": (module, class_name)`` to a table of the tree's model registry."""
    reg = Path(folder) / "vllm" / "model_executor" / "models" / "registry.py"
    text = reg.read_text()
    head = f"{table} = {{\n"
    assert head in text, f"{table} not in {reg}"
    row = f'    "{arch}": ("{module}", "{class_name or arch}"),\n'
    reg.write_text(text.replace(head, head + row, 1))


@pytest.fixture
def minivllm(tmp_path) -> Path:
    """A fresh, unmodified copy of the minivllm fixture."""
    return make_tree(tmp_path)


#: Modules of minivllm that the Kimi drift tree does not have.
_DRIFT_DROPS = (
    "vllm/model_executor/models/toy.py",
    "vllm/model_executor/models/toy_vl.py",
    "vllm/transformers_utils/configs/toy_vl.py",
)


@functools.lru_cache(maxsize=None)
def drift_tree() -> Path:
    """The synthetic "Kimi drift" tree (a release where the codemods no longer apply), built
    once per test session: minivllm without its toy models, with
    ``fixtures/kimi_drift_overlay`` laid over it. Returns the folder that contains ``vllm/``."""
    import atexit
    import tempfile

    dest = Path(tempfile.mkdtemp(prefix="eagle-audit-kimi-drift-")) / "kimi_drift"
    atexit.register(shutil.rmtree, dest.parent, ignore_errors=True)
    shutil.copytree(MINIVLLM, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for rel in _DRIFT_DROPS:
        (dest / rel).unlink()
    shutil.copytree(REPO / "fixtures" / "kimi_drift_overlay", dest, dirs_exist_ok=True)
    return dest
