"""A vLLM tree as the analysis sees it: module summaries on demand, cached by file content.

:class:`Tree` wraps a :class:`auditor.sources.TreeSource`. ``tree.module("vllm.x.y")`` returns the
:class:`~auditor.index.ModuleSummary` of that module (or None when the tree has no such module),
building it with :func:`auditor.index.summarize` at most once per process, and at most once per
file content across processes thanks to an on-disk cache keyed on the file's sha256 and the
index format (a cache entry can never be stale: changed bytes are a different key).
:meth:`Tree.prefetch` summarises many modules at once in worker processes.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable, Iterable

from auditor.index import INDEX_FORMAT, ModuleSummary, summarize


def cache_root() -> Path:
    """The user cache folder of eagle-audit (``EAGLE_AUDIT_CACHE_DIR`` overrides it)."""
    env = os.environ.get("EAGLE_AUDIT_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return platformdirs.user_cache_path("eagle-audit")


class SummaryCache:
    """On-disk cache of module summaries, one pickle per (file sha256, index format).

    Entries are written atomically (temporary file + rename). Unreadable entries count as misses.
    Only this tool's own pickles are ever loaded, from the user's cache folder.
    """

    def __init__(self, root: Path | None = None, enabled: bool = True):
        self.enabled = enabled
        self.root = (root or cache_root()) / "index" / f"v{INDEX_FORMAT}"

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / f"{digest}.pkl"

    def get(self, digest: str) -> ModuleSummary | None:
        if not self.enabled:
            return None
        try:
            with open(self._path(digest), "rb") as fh:
                return pickle.load(fh)
        except Exception:
            return None

    def put(self, digest: str, summary: ModuleSummary) -> None:
        if not self.enabled:
            return
        p = self._path(digest)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(summary, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, p)
        except OSError:
            pass  # a read-only cache folder only costs speed


def _summarize_job(args: tuple[str | None, str, bytes | None]) -> tuple[str, ModuleSummary]:
    root, rel, data = args
    if data is None:
        with open(os.path.join(root, rel), "rb") as fh:  # type: ignore[arg-type]
            data = fh.read()
    return rel, summarize(data, rel)


def path_candidates(module: str) -> tuple[str, str]:
    """The two paths a dotted module can live at: ``a/b.py`` and ``a/b/__init__.py``."""
    base = module.replace(".", "/")
    return f"{base}.py", f"{base}/__init__.py"


class Tree:
    """Module summaries of one vLLM tree.

    Args:
        source: the tree (folder, archive, installed package).
        cache: the summary cache; ``SummaryCache(enabled=False)`` disables it.
    """

    def __init__(self, source, cache: SummaryCache | None = None):
        self.source = source
        self.cache = cache if cache is not None else SummaryCache()
        self._by_path: dict[str, ModuleSummary] = {}
        self._files: set[str] | None = None
        self.parse_errors: dict[str, str] = {}

    @property
    def files(self) -> set[str]:
        """Every ``.py`` path of the tree (relative to the folder that contains ``vllm/``)."""
        if self._files is None:
            self._files = set(self.source.files())
        return self._files

    def version(self) -> str | None:
        """The tree's vLLM version as the tree states it, or None."""
        return self.source.version()

    def path_of(self, module: str) -> str | None:
        """Path of a dotted module in this tree, or None when the tree has no such module."""
        for p in path_candidates(module):
            if p in self.files:
                return p
        return None

    def has_module(self, module: str) -> bool:
        return self.path_of(module) is not None

    def _record(self, rel: str, s: ModuleSummary) -> ModuleSummary:
        self._by_path[rel] = s
        if s.error:
            self.parse_errors[rel] = s.error
        return s

    def summary(self, rel: str) -> ModuleSummary:
        """Summary of the module at path ``rel`` (must exist in the tree)."""
        s = self._by_path.get(rel)
        if s is not None:
            return s
        data = self.source.read(rel)
        digest = _digest(data)
        s = self.cache.get(digest)
        if s is None or s.path != rel:
            s = summarize(data, rel)
            self.cache.put(digest, s)
        return self._record(rel, s)

    def module(self, module: str) -> ModuleSummary | None:
        """Summary of a dotted module, or None when the tree has no such module."""
        rel = self.path_of(module)
        return self.summary(rel) if rel else None

    def prefetch(
        self,
        paths: Iterable[str],
        workers: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        """Summarise many modules at once: cache hits are loaded, misses parsed in ``workers``
        processes (default: the CPU count; 1 parses in this process). ``progress(done, total)``
        is called as modules complete."""
        todo = [p for p in paths if p not in self._by_path]
        misses: list[tuple[str, bytes, str]] = []
        total = len(todo)
        done = 0
        for rel in todo:
            data = self.source.read(rel)
            digest = _digest(data)
            s = self.cache.get(digest)
            if s is not None and s.path == rel:
                self._record(rel, s)
                done += 1
            else:
                misses.append((rel, data, digest))
        if progress:
            progress(done, total)
        if not misses:
            return
        workers = workers if workers is not None else (os.cpu_count() or 1)
        root = self.source.root()
        digests = {rel: d for rel, _, d in misses}
        if workers <= 1 or len(misses) < 8:
            results = (_summarize_job((None, rel, data)) for rel, data, _ in misses)
            for rel, s in results:
                self.cache.put(digests[rel], s)
                self._record(rel, s)
                done += 1
                if progress:
                    progress(done, total)
            return
        # Big files first so the two workers finish together.
        misses.sort(key=lambda m: -len(m[1]))
        jobs = [((str(root), rel, None) if root is not None else (None, rel, data)) for rel, data, _ in misses]
        import multiprocessing

        ctx = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as ex:
            for rel, s in ex.map(_summarize_job, jobs, chunksize=4):
                self.cache.put(digests[rel], s)
                self._record(rel, s)
                done += 1
                if progress:
                    progress(done, total)

    def loaded(self) -> dict[str, ModuleSummary]:
        """The summaries built or loaded so far, by path."""
        return dict(self._by_path)


def _digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
