"""A vLLM tree as the analysis sees it: module summaries on demand, cached by file content.

:class:`Tree` wraps a :class:`auditor.source.sources.TreeSource`. ``tree.module("vllm.x.y")`` returns the
:class:`~auditor.index.summary.ModuleSummary` of that module (or None when the tree has no such module),
building it with :func:`auditor.index.summary.summarize` at most once per process, and at most once per
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

from auditor.index.summary import INDEX_FORMAT, ModuleSummary, module_name_for, summarize
from auditor.source.sources import UnreadableFile, read_regular_file


def cache_root() -> Path:
    """The user cache folder of eagle-audit (``EAGLE_AUDIT_CACHE_DIR`` overrides it)."""
    env = os.environ.get("EAGLE_AUDIT_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return platformdirs.user_cache_path("eagle-audit")


def load_cached(path: Path) -> object | None:
    """The object pickled at ``path`` by :func:`store_cached`, or None (absent or unreadable).
    Only this tool's own cache files, under the user cache folder, are ever loaded."""
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except Exception:
        return None


def store_cached(path: Path, obj: object) -> None:
    """Pickle ``obj`` to ``path`` atomically (temporary file + rename). A cache folder that
    cannot be written only costs speed: errors are swallowed and no temporary file is left."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


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
        """The cached summary for a file sha256, or None (a miss, or an unreadable entry)."""
        if not self.enabled:
            return None
        s = load_cached(self._path(digest))
        return s if isinstance(s, ModuleSummary) else None

    def put(self, digest: str, summary: ModuleSummary) -> None:
        """Store a summary under a file sha256 (atomic; a read-only cache folder is ignored)."""
        if self.enabled:
            store_cached(self._path(digest), summary)


def _summarize_job(args: tuple[str | None, str, bytes | None]) -> tuple[str, ModuleSummary]:
    root, rel, data = args
    if data is None:
        try:
            data = read_regular_file(os.path.join(root, rel), rel)  # type: ignore[arg-type]
        except (OSError, UnreadableFile) as exc:
            return rel, unreadable_summary(rel, exc)
    return rel, summarize(data, rel)


def unreadable_summary(rel: str, exc: Exception) -> ModuleSummary:
    """The summary of a file that cannot be read: no facts, ``error`` says why (never cached)."""
    module, is_package = module_name_for(rel)
    reason = exc.reason if isinstance(exc, UnreadableFile) else f"cannot read: {exc}"
    return ModuleSummary(module=module, path=rel, is_package=is_package, error=reason)


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
        self._by_module: dict[str, ModuleSummary] = {}
        self._files: set[str] | None = None
        self.parse_errors: dict[str, str] = {}
        #: sha256 of every file whose content the analysis has read, by path: a result computed
        #: from this tree is valid for any tree with the same file list and these contents.
        self.reads: dict[str, str] = {}

    @property
    def files(self) -> set[str]:
        """Every ``.py`` path of the tree (relative to the folder that contains ``vllm/``)."""
        if self._files is None:
            self._files = set(self.source.files())
            self.parse_errors.update(getattr(self.source, "problems", {}))  # e.g. folders that cannot be listed
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
        """True when the tree has the dotted module (as ``x.py`` or ``x/__init__.py``)."""
        return self.path_of(module) is not None

    def read(self, rel: str) -> bytes:
        """The bytes of a file, recording their digest in :attr:`reads`. A listed file that cannot
        be read (:class:`~auditor.source.sources.UnreadableFile`) reads as empty and is recorded in
        :attr:`parse_errors`."""
        try:
            data = self.source.read(rel)
        except UnreadableFile as exc:
            self.parse_errors[rel] = exc.reason
            self.reads[rel] = "unreadable"  # never matches a digest: a result cache entry is never reused
            return b""
        self.reads[rel] = _digest(data)
        return data

    def files_digest(self) -> str:
        """sha256 of the sorted list of the tree's ``.py`` paths (which modules exist)."""
        import hashlib

        return hashlib.sha256("\n".join(sorted(self.files)).encode()).hexdigest()

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
        try:
            data = self.source.read(rel)
        except UnreadableFile as exc:
            self.reads[rel] = "unreadable"
            return self._record(rel, unreadable_summary(rel, exc))
        digest = _digest(data)
        self.reads[rel] = digest
        s = self.cache.get(digest)
        if s is None or s.path != rel:
            s = summarize(data, rel)
            self.cache.put(digest, s)
        return self._record(rel, s)

    def module(self, module: str) -> ModuleSummary | None:
        """Summary of a dotted module, or None when the tree has no such module."""
        s = self._by_module.get(module)
        if s is not None:
            return s
        rel = self.path_of(module)
        if rel is None:
            return None
        s = self.summary(rel)
        self._by_module[module] = s
        return s

    def prefetch(
        self,
        paths: Iterable[str],
        workers: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        expand: Callable[[ModuleSummary], Iterable[str]] | None = None,
    ) -> None:
        """Summarise many modules at once: cache hits are loaded, misses parsed in ``workers``
        worker processes (default: the CPU count; 1 parses in this process).

        ``expand(summary)`` may name more paths to summarise as each module completes (for
        example the modules it imports); they join the same pool without waiting for the rest.
        ``progress(done, total)`` is called as modules complete.
        """
        import queue
        from collections import deque

        completed: queue.SimpleQueue = queue.SimpleQueue()

        queue = deque(sorted(set(paths), key=lambda p: p))
        seen: set[str] = set()
        workers = workers if workers is not None else (os.cpu_count() or 1)
        root = self.source.root()
        ex = None
        pending: dict = {}
        done = 0

        def finish(rel: str, s: ModuleSummary) -> None:
            nonlocal done
            self._record(rel, s)
            done += 1
            if expand is not None:
                for q in expand(s):
                    if q not in seen and q not in self._by_path:
                        queue.append(q)
            if progress:
                progress(done, len(seen))

        import gc

        gc_was_enabled = gc.isenabled()
        gc.disable()  # summaries hold no reference cycles; collecting while loading them is waste
        try:
            while queue or pending:
                batch = []
                while queue:
                    rel = queue.popleft()
                    if rel in seen:
                        continue
                    seen.add(rel)
                    if rel in self._by_path:
                        finish(rel, self._by_path[rel])
                        continue
                    try:
                        data = self.source.read(rel)
                    except UnreadableFile as exc:
                        self.reads[rel] = "unreadable"
                        finish(rel, unreadable_summary(rel, exc))
                        continue
                    digest = _digest(data)
                    self.reads[rel] = digest
                    hit = self.cache.get(digest)
                    if hit is not None and hit.path == rel:
                        finish(rel, hit)
                    else:
                        batch.append((rel, data, digest))
                if workers <= 1:
                    for rel, data, digest in batch:
                        s = summarize(data, rel)
                        self.cache.put(digest, s)
                        finish(rel, s)
                    continue
                if batch and ex is None:
                    import multiprocessing

                    ctx = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
                    ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
                batch.sort(key=lambda m: -len(m[1]))  # big files first: the workers finish together
                for rel, data, digest in batch:
                    job = (str(root), rel, None) if root is not None else (None, rel, data)
                    fut = ex.submit(_summarize_job, job)
                    pending[fut] = digest
                    fut.add_done_callback(completed.put)
                if not pending:
                    continue
                fut = completed.get()  # one result at a time, without re-waiting on every future
                digest = pending.pop(fut)
                rel, s = fut.result()
                self.cache.put(digest, s)
                finish(rel, s)
        finally:
            if gc_was_enabled:
                gc.enable()
            if ex is not None:
                ex.shutdown(wait=True, cancel_futures=True)

    def loaded(self) -> dict[str, ModuleSummary]:
        """The summaries built or loaded so far, by path."""
        return dict(self._by_path)


def _digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
