"""Shared fixtures and helpers for the synthetic-tree tests, and the two test tiers.

- **Tiers.** Every test gets one marker, assigned here by what it uses (:func:`tier_of`):
  ``full`` when it reads real releases (the ``releases`` fixture, the helpers of
  :mod:`tests.real`, ``fetch_release``, a ``--vllm-version``-style option, ...), needs the
  network, or lives in ``tests/runtime``; else ``fast``. ``python -m pytest -q -m fast`` runs the
  fast tier, ``-m full`` the rest, and no ``-m`` both. A fast test runs with no release archive
  and no package index in reach (:func:`fast_tier_guard`), so a test that needs one and was
  not recognised fails loudly instead of slowing the fast tier down; ``@pytest.mark.full`` on
  a test puts it in the full tier by hand.

- Every test session gets its own cache root (``EAGLE_AUDIT_CACHE_DIR``) so that index pickles
  written by one run can never leak into another; its ``archives`` folder is a symlink to the
  user's real release-archive cache, so tests on real vLLM releases still reuse downloaded
  archives (and keep them for later runs).
- :func:`make_tree` lays a copy of ``fixtures/minivllm`` in a temporary folder with some files
  replaced or deleted; :func:`audit` audits one architecture of such a folder.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from auditor.source.pipconfig import archive_cache_dir

REPO = Path(__file__).resolve().parents[1]
MINIVLLM = REPO / "fixtures" / "minivllm"


@pytest.fixture(scope="session", autouse=True)
def isolated_cache_root(tmp_path_factory):
    """Point ``EAGLE_AUDIT_CACHE_DIR`` at a per-session folder (per run, shared by the workers of
    ``pytest -n``) whose ``archives`` entry links to the real archive cache (computed before the
    override, so a user-set variable is honoured)."""
    real_archives = archive_cache_dir()
    real_archives.mkdir(parents=True, exist_ok=True)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # the workers of one ``-n`` run share one root (each entry is written atomically), so a
        # release's summaries are computed by one worker, not by each
        root = tmp_path_factory.getbasetemp().parent / "eagle-audit-cache"
        root.mkdir(exist_ok=True)
    else:
        root = tmp_path_factory.mktemp("eagle-audit-cache")
    try:
        (root / "archives").symlink_to(real_archives, target_is_directory=True)
    except FileExistsError:  # the other worker made it
        pass
    old = os.environ.get("EAGLE_AUDIT_CACHE_DIR")
    os.environ["EAGLE_AUDIT_CACHE_DIR"] = str(root)
    try:
        yield root
    finally:
        if old is None:
            os.environ.pop("EAGLE_AUDIT_CACHE_DIR", None)
        else:
            os.environ["EAGLE_AUDIT_CACHE_DIR"] = old


#: Names whose use puts a test in the full tier: the real-release helpers and the fetchers.
FULL_NAMES = frozenset({
    "real", "release_auditor", "audit_case", "check_case", "expected_cases", "next_cases", "SessionReleases",
    "fetch_release", "fetch_newest_wheel", "list_releases", "list_sdist_versions", "check_wheel_release",
    "archive_cache_dir", "engine_venv", "IndexReleases",
})
#: Fixtures that are real releases (or the runtime venv).
FULL_FIXTURES = frozenset({"releases", "engine_venv"})
#: The autouse fixtures of this file: every test uses them, they say nothing of its tier.
INFRA_FIXTURES = frozenset({"isolated_cache_root", "fast_tier_guard", "fast_cache_root", "session_bytecode"})
#: Text in a test's string constants that names a real release (a CLI argument, an archive name).
FULL_TEXT = ("--vllm-version", "--sglang-version", "--versions", "--candidate-version", "--current-version",
             "--candidate", "--current", "vllm-0.", "sglang-0.", "transformers-4.", "transformers-5.")


def _ours(code) -> bool:
    """True for the code of a test module or helper of this folder (not a library's, nor this
    file's: its tier rules name everything of the full tier)."""
    return code.co_filename.startswith(str(REPO / "tests")) and code.co_filename != __file__


def _value_names_full(value, depth: int = 0) -> bool:
    """True for a string (or a tuple, list, set or dict of them, nested) naming a real release."""
    if isinstance(value, str):
        return any(t in value for t in FULL_TEXT)
    if depth < 4 and isinstance(value, (tuple, list, set, frozenset)):
        return any(_value_names_full(v, depth + 1) for v in value)
    if depth < 4 and isinstance(value, dict):
        return any(_value_names_full(v, depth + 1) for v in (*value.keys(), *value.values()))
    return False


def _code_uses_full(code, module_globals: dict, seen: set) -> bool:
    """True when a code object (its nested functions and classes, and the functions of its own
    module it calls, transitively) names something of the full tier."""
    if code in seen:
        return False
    seen.add(code)
    for name in code.co_names + code.co_varnames:
        if name in FULL_NAMES:
            return True
    for const in code.co_consts:
        if _value_names_full(const):
            return True
        if hasattr(const, "co_code") and _code_uses_full(const, module_globals, seen):
            return True
    for name in code.co_names:
        obj = module_globals.get(name)
        if _value_names_full(obj):  # a module constant: ``ARGS = ("--vllm-version", "0.16.0")``
            return True
        func = getattr(obj, "__wrapped__", obj)
        inner = getattr(func, "__code__", None)
        if inner is not None and _ours(inner) and \
                _code_uses_full(inner, getattr(func, "__globals__", module_globals), seen):
            return True
    return False


#: A parameter that is a release version (``0.18.0``, ``0.5.10.post1``).
_VERSION = re.compile(r"\d+\.\d+\.\d+(\.post\d+)?")


def _params_use_full(item) -> bool:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    values = callspec.params.values()
    return any(_value_names_full(v) or _value_names_full(repr(v)) or _VERSION.fullmatch(str(v)) for v in values)


def tier_of(item) -> str:
    """``"full"`` or ``"fast"`` for a collected test: full when it is marked ``full``, lives in
    ``tests/runtime``, uses a fixture of :data:`FULL_FIXTURES`, or its function, a fixture it
    uses, or a parameter names something of :data:`FULL_NAMES` / :data:`FULL_TEXT`."""
    if item.get_closest_marker("full") is not None:
        return "full"
    path = Path(str(item.fspath)).resolve()
    if (REPO / "tests" / "runtime") in path.parents:
        return "full"
    names = set(getattr(item, "fixturenames", ()))
    if names & FULL_FIXTURES:
        return "full"
    seen: set = set()
    func = getattr(item, "function", None)
    if func is not None and _code_uses_full(func.__code__, func.__globals__, seen):
        return "full"
    info = getattr(item, "_fixtureinfo", None)
    for name in names - INFRA_FIXTURES:
        for fdef in (info.name2fixturedefs.get(name, ()) if info else ()):
            f = getattr(fdef.func, "__wrapped__", fdef.func)
            code = getattr(f, "__code__", None)
            if code is not None and _ours(code) and _code_uses_full(code, f.__globals__, seen):
                return "full"
    return "full" if _params_use_full(item) else "fast"


#: the terminal variables of the process that ran pytest, handed to its xdist workers
_TERMINAL_ENV = "EAGLE_AUDIT_TESTS_TERMINAL"


def _terminal_as_run() -> None:
    """Give an xdist worker the ``COLUMNS`` and ``LINES`` of the ``pytest`` command (or none).

    pytest-xdist starts its workers with ``COLUMNS=80`` and ``LINES=24`` in their environment,
    and every command line a test starts inherits them: a report that is kept whole when piped
    without ``COLUMNS`` is then wrapped at 80 columns, on some runs and not others. The controller
    records its own values before the workers start; each worker puts them back."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        os.environ[_TERMINAL_ENV] = json.dumps({k: os.environ.get(k, "") for k in ("COLUMNS", "LINES")})
        return
    recorded = os.environ.get(_TERMINAL_ENV)
    if recorded is None:
        return
    for key, value in json.loads(recorded).items():
        if value:
            os.environ[key] = value
        else:
            os.environ.pop(key, None)


def pytest_configure(config):
    """Declare the two tier markers; give an xdist worker the terminal of the ``pytest`` command."""
    _terminal_as_run()
    config.addinivalue_line("markers", "fast: needs no network and no release archive (assigned by tests/conftest.py)")
    config.addinivalue_line("markers", "full: real releases, the network or the runtime tier (assigned by "
                                       "tests/conftest.py, or by hand)")


def pytest_collection_modifyitems(config, items):
    """Mark every collected test ``fast`` or ``full`` (see :func:`tier_of`)."""
    for item in items:
        item.add_marker(tier_of(item))


@pytest.fixture(scope="session")
def fast_cache_root(tmp_path_factory):
    """The cache root of the fast tests: like the session's, but with no ``archives`` link."""
    return tmp_path_factory.mktemp("eagle-audit-cache-fast")


@pytest.fixture(autouse=True)
def fast_tier_guard(request, monkeypatch):
    """For a ``fast`` test: no release archive and no package index in reach (an empty cache root
    and an index address that refuses connections, for this process and the ones it starts)."""
    if request.node.get_closest_marker("fast") is None:
        yield
        return
    monkeypatch.setenv("EAGLE_AUDIT_CACHE_DIR", str(request.getfixturevalue("fast_cache_root")))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")
    yield


@pytest.fixture(scope="session", autouse=True)
def session_bytecode(tmp_path_factory):
    """The ``eagle-audit`` subprocesses the tests start reuse compiled bytecode: one private
    ``PYTHONPYCACHEPREFIX`` per session (nothing is written beside any source), also where
    ``PYTHONDONTWRITEBYTECODE`` is set, which would make every subprocess compile the tool again."""
    saved = {k: os.environ.get(k) for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(tmp_path_factory.mktemp("pycache"))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
