"""A vLLM tree as the analysis sees it: module summaries on demand, cached by file content.

:class:`Tree` wraps a :class:`auditor.source.sources.TreeSource`. ``tree.module("vllm.x.y")`` returns the
:class:`~auditor.index.facts.ModuleSummary` of that module (or None when the tree has no such module),
building it with :func:`auditor.index.summary.summarize` at most once per process, and at most once per
file content across processes thanks to an on-disk cache keyed on the file's sha256, the
extractors and the tool's own code (a cache entry can never be stale: changed bytes are a
different key).
:meth:`Tree.prefetch` summarises many modules at once in worker processes.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Callable, Iterable

from auditor.cache import Store, key
from auditor.index.facts import ModuleSummary
from auditor.index.summary import Extractor, summarize
from auditor.index.syntax import module_name_for
from auditor.source.files import UnreadableFile, read_regular_file


class SummaryCache:
    """On-disk cache of module summaries (the ``index`` kind of :mod:`auditor.cache`): data-only
    entries keyed by the file's sha256, the extractors run and the tool's own code.

    Args:
        root: the cache root (default: :func:`auditor.cache.cache_root`).
        enabled: False disables reads and writes.
    """

    def __init__(self, root: Path | None = None, enabled: bool = True):
        self.enabled = enabled
        self.store = Store("index", enabled, root)

    def get(self, k: str) -> ModuleSummary | None:
        """The cached summary under key ``k``, or None (a miss, or an undecodable entry)."""
        return self.store.get(k, ModuleSummary)

    def put(self, k: str, summary: ModuleSummary) -> None:
        """Store a summary under key ``k`` (atomic; an unwritable cache folder is ignored)."""
        self.store.put(k, summary)


class WorkerFailure(RuntimeError):
    """A summary worker process died (killed, crashed, out of memory) while it held a job: the
    scan stops with this one-line reason (an internal error) instead of waiting on the pool."""


def _abandon(ex: ProcessPoolExecutor) -> None:
    """Stop a process pool that cannot finish cleanly, without waiting on it: cancel what is
    queued and end its worker processes (a pool whose feeder failed to pickle a job never
    completes ``shutdown(wait=True)``)."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.terminate()
        except (OSError, AttributeError):
            pass
    for p in procs:
        try:
            p.join(timeout=2)
        except (OSError, AttributeError, AssertionError):
            pass


def _picklable(obj: object) -> bool:
    """True when ``obj`` can be sent to a worker process (pickled)."""
    import pickle

    try:
        pickle.dumps(obj)
    except Exception:  # PicklingError, AttributeError, TypeError: whatever pickle raises
        return False
    return True


def _summarize_job(args: tuple) -> tuple[str, ModuleSummary]:
    """A worker's job: summarise one file (read from ``root`` when ``data`` is None) and store the
    summary in ``cache`` under ``k`` here, in the worker, so that encoding it is not serial in
    the parent. An unreadable file's summary is never cached, nor one of bytes whose sha256 is
    not ``digest`` (the file changed after the parent read it)."""
    root, rel, data, extractors, cache, k, digest = args
    if data is None:
        try:
            data = read_regular_file(os.path.join(root, rel), rel)  # type: ignore[arg-type]
        except (OSError, UnreadableFile) as exc:
            return rel, unreadable_summary(rel, exc)
        if _digest(data) != digest:  # changed since the parent read it: not stored under its key
            cache = None
    s = summarize(data, rel, extractors)
    if cache is not None:
        cache.put(k, s)
    return rel, s


def unreadable_summary(rel: str, exc: Exception) -> ModuleSummary:
    """The summary of a file that cannot be read: no facts, ``error`` says why (never cached)."""
    module, is_package = module_name_for(rel)
    if isinstance(exc, UnreadableFile):
        why = exc.reason.removeprefix("cannot read: ")
    elif isinstance(exc, OSError):
        why = exc.strerror or str(exc)
    else:
        why = type(exc).__name__
    return ModuleSummary(module=module, path=rel, is_package=is_package, error=f"cannot be read ({why})")


def path_candidates(module: str) -> tuple[str, str]:
    """The two paths a dotted module can live at, in the order Python's path finder tries them:
    the package ``a/b/__init__.py`` first (it wins over a module ``a/b.py`` beside it), then ``a/b.py``."""
    base = module.replace(".", "/")
    return f"{base}/__init__.py", f"{base}.py"


class Tree:
    """Module summaries of one vLLM tree.

    Args:
        source: the tree (folder, archive, installed package).
        cache: the summary cache; ``SummaryCache(enabled=False)`` disables it.
        extractors: the fact extractors to run while summarising (see
            :class:`~auditor.index.summary.Extractor`); their names are part of the cache key.
    """

    def __init__(self, source, cache: SummaryCache | None = None, extractors: tuple[Extractor, ...] = ()):
        self.source = source
        self.cache = cache if cache is not None else SummaryCache()
        self.extractors = tuple(extractors)
        self._salt = key("summary", [e.name for e in self.extractors]).encode()
        self._by_path: dict[str, ModuleSummary] = {}
        self._by_module: dict[str, ModuleSummary] = {}
        #: summaries made by :meth:`summarize_ahead`, not yet read (recorded when first read)
        self._ahead: dict[str, ModuleSummary] = {}
        self._files: set[str] | None = None
        self.parse_errors: dict[str, str] = {}
        #: sha256 of every file whose content the analysis has read, by path: a result computed
        #: from this tree is valid for any tree with the same file list and these contents.
        self.reads: dict[str, str] = {}
        #: the bytes of every file read, by path (one read per file; see :meth:`read`)
        self._data: dict[str, bytes] = {}
        #: why a listed file could not be read, by path (so it is tried once)
        self._unreadable: dict[str, KeyError | OSError] = {}
        #: extractor name -> the paths it applies to (see :meth:`candidates`)
        self._candidates: dict[str, tuple[str, ...]] = {}
        #: for a tree made by :meth:`overlaid`: (the base tree, the paths changed from it)
        self._overlay: tuple[Tree, frozenset[str]] | None = None
        self._unread: dict[str, str] | None = None

    @property
    def files(self) -> set[str]:
        """Every ``.py`` path of the tree (relative to the folder that contains ``vllm/``)."""
        if self._files is None:
            self._files = set(self.source.files())
            self.parse_errors.update(getattr(self.source, "problems", {}))  # e.g. folders that cannot be listed
        return self._files

    def unread_code(self) -> dict[str, str]:
        """Code Python may run from this tree that the analysis cannot read, path → why: a
        folder not listed (``vllm/config/``: a symbolic link out of the tree, a loop, a folder
        that cannot be listed) and a module whose source Python does not import (a compiled
        module beside it, or only a sourceless ``.pyc``). Extension modules with no source
        beside them (``vllm/_C.abi3.so``) are not counted: nothing of the tree is hidden by them.
        Computed once per tree (an overlaid tree keeps its base's)."""
        if self._unread is None:
            files = self.files
            out = dict(getattr(self.source, "unlisted", {}))
            for src, compiled in sorted(getattr(self.source, "compiled", {}).items()):
                if src in files:
                    out[src] = f"Python imports the compiled module {compiled} instead; compiled code is not read"
            self._unread = out
        return self._unread

    def hidden_by(self, path: str) -> tuple[str, str] | None:
        """``(folder, why)`` when ``path`` (a file or folder of the tree) lies under a folder the
        analysis could not list (see :meth:`unread_code`), else None."""
        for folder, why in self.unread_code().items():
            if folder.endswith("/") and (path + "/").startswith(folder):
                return folder, why
        return None

    def version(self) -> str | None:
        """The tree's engine version (vLLM's, or SGLang's) as the tree states it, or None."""
        return self.source.version()

    @property
    def package(self) -> str:
        """The top-level package the tree holds (``vllm`` or ``sglang``): names under it are
        the tree's own, any other name is external."""
        return getattr(self.source, "package", "vllm")

    def path_of(self, module: str) -> str | None:
        """Path of a dotted module in this tree, or None when the tree has no such module."""
        for p in path_candidates(module):
            if p in self.files:
                return p
        return None

    def has_module(self, module: str) -> bool:
        """True when the tree has the dotted module (as ``x.py`` or ``x/__init__.py``)."""
        return self.path_of(module) is not None

    def _load(self, rel: str) -> tuple[bytes, str]:
        """``(bytes, sha256)`` of a file, read from the source once per tree and memoised (the
        digest recorded in :attr:`reads`).

        Raises:
            KeyError: the file is absent, or is listed but cannot be read
                (:class:`~auditor.source.files.UnreadableFile`, recorded as ``"unreadable"`` in
                :attr:`reads`); OSError: reading it failed. Either is raised again, without a
                second read, on every later call.
        """
        data = self._data.get(rel)
        if data is not None:
            return data, self.reads[rel]
        failed = self._unreadable.get(rel)
        if failed is not None:
            raise failed
        try:
            data = self.source.read(rel)
        except (KeyError, OSError) as exc:  # UnreadableFile (a KeyError) included
            self._unreadable[rel] = exc
            if isinstance(exc, UnreadableFile) or rel in self.files:
                self.reads[rel] = "unreadable"  # never matches a digest: a result cache entry is never reused
            raise
        digest = _digest(data)
        self._data[rel] = data
        self.reads[rel] = digest
        return data, digest

    def read(self, rel: str) -> bytes:
        """The bytes of a file, read once per tree (memoised with their digest, which is recorded
        in :attr:`reads`). A listed file that cannot be read
        (:class:`~auditor.source.files.UnreadableFile`) reads as empty and is recorded in
        :attr:`parse_errors`.

        Raises:
            KeyError: the tree has no such file; OSError: it could not be read.
        """
        try:
            return self._load(rel)[0]
        except UnreadableFile as exc:
            self.parse_errors[rel] = exc.reason
            return b""

    def candidates(self, extractor: Extractor) -> tuple[str, ...]:
        """Sorted paths of the modules ``extractor`` applies to (by path and trigger words, see
        :meth:`Extractor.wants <auditor.index.summary.Extractor.wants>`), computed once per tree
        and extractor; a file under its paths that cannot be read is a candidate too."""
        hit = self._candidates.get(extractor.name)
        if hit is None:
            if self._overlay is not None:  # the base's answer for every file not changed here
                base, changed = self._overlay
                out = {p for p in base.candidates(extractor) if p not in changed}
                out |= {p for p in changed if p in self.files and self._applies(extractor, p)}
                hit = tuple(sorted(out))
            else:
                hit = tuple(p for p in sorted(self.files) if self._applies(extractor, p))
            self._candidates[extractor.name] = hit
        return hit

    def _applies(self, extractor: Extractor, p: str) -> bool:
        if not (p.startswith(extractor.prefixes) or p.endswith(extractor.suffixes)):
            return False
        try:
            data = self._load(p)[0]
        except (KeyError, OSError):
            return True  # cannot be read: a candidate whose facts are missing (see unanalysed)
        return extractor.wants(p, data)

    def files_digest(self) -> str:
        """sha256 of the sorted list of the tree's ``.py`` paths (which modules exist)."""
        return hashlib.sha256("\n".join(sorted(self.files)).encode()).hexdigest()

    def summary_key(self, digest: str) -> str:
        """The summary cache key of a file with sha256 ``digest`` under this tree's extractors."""
        return hashlib.sha256(self._salt + digest.encode()).hexdigest()

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
        if rel in self._ahead:
            return self._record(rel, self._ahead.pop(rel))
        try:
            data, digest = self._load(rel)
        except (KeyError, OSError) as exc:  # UnreadableFile (a KeyError) included
            self.reads[rel] = "unreadable"
            return self._record(rel, unreadable_summary(rel, exc))
        s = self.cache.get(self.summary_key(digest))
        if s is None or s.path != rel:
            s = summarize(data, rel, self.extractors)
            self.cache.put(self.summary_key(digest), s)
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

        A job that cannot go to a worker or come back from one (extractors or a result that do
        not pickle), or that raises there, is summarised in this process instead, with the rest
        (never a pool left waiting).

        Raises:
            WorkerFailure: a worker process died while it held a job (killed, crashed); the
                pool's processes are ended first.
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
        failed = False
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
                        data, digest = self._load(rel)
                    except (KeyError, OSError) as exc:  # UnreadableFile included
                        self.reads[rel] = "unreadable"
                        finish(rel, unreadable_summary(rel, exc))
                        continue
                    hit = self.cache.get(self.summary_key(digest))
                    if hit is not None and hit.path == rel:
                        finish(rel, hit)
                    else:
                        batch.append((rel, data, digest))
                if workers <= 1:
                    for rel, data, digest in batch:
                        s = summarize(data, rel, self.extractors)
                        self.cache.put(self.summary_key(digest), s)
                        finish(rel, s)
                    continue
                if batch and ex is None and not _picklable(self.extractors):
                    workers = 1  # a job would never reach a worker (a lambda in an extractor)
                    queue.extendleft(b[0] for b in batch)
                    seen.difference_update(b[0] for b in batch)
                    continue
                if batch and ex is None:
                    import multiprocessing

                    ctx = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
                    ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
                batch.sort(key=lambda m: -len(m[1]))  # big files first: the workers finish together
                store = self.cache if self.cache.enabled else None
                for rel, data, digest in batch:
                    k = self.summary_key(digest)
                    job = (str(root), rel, None) if root is not None else (None, rel, data)
                    fut = ex.submit(_summarize_job, (*job, self.extractors, store, k, digest))
                    pending[fut] = (rel, data, digest)
                    fut.add_done_callback(completed.put)
                if not pending:
                    continue
                fut = completed.get()  # one result at a time, without re-waiting on every future
                job = pending.pop(fut)
                try:
                    rel, s = fut.result()  # the worker stored it in the cache
                except BrokenProcessPool as exc:
                    failed = True
                    raise WorkerFailure(f"a worker process summarising {job[0]} died ({exc}); "
                                        "nothing was audited") from exc
                except Exception:
                    # the job could not reach a worker or its result could not come back (an
                    # object that does not pickle: the executor is then stuck on shutdown), or
                    # it raised there: the rest is summarised here, where the same job either
                    # works or raises its own error
                    failed = True
                    _abandon(ex)
                    ex = None
                    workers = 1
                    for other in list(pending):
                        other.cancel()
                    queue.extendleft(j[0] for j in [job, *pending.values()])
                    seen.difference_update(j[0] for j in [job, *pending.values()])
                    pending.clear()
                    continue
                finish(rel, s)
        finally:
            if gc_was_enabled:
                gc.enable()
            if ex is not None:
                if failed or pending:
                    _abandon(ex)
                else:
                    ex.shutdown(wait=True, cancel_futures=True)

    #: The fewest modules not yet summarised for which :meth:`summarize_ahead` starts worker
    #: processes (fewer are summarised in this process when first read).
    AHEAD_AT_LEAST = 8

    def summarize_ahead(self, paths: Iterable[str]) -> int:
        """Summarise in worker processes, at once, the modules among ``paths`` (paths of this
        tree) that have no summary yet, when there are at least :data:`AHEAD_AT_LEAST` of them;
        a caller that is about to read many summaries one after another calls it first. It
        changes no answer: :meth:`summary` returns the same summaries either way.

        Returns:
            How many modules were summarised (0 when too few were missing).

        Raises:
            WorkerFailure: as :meth:`prefetch`.
        """
        ahead = self._ahead
        missing = sorted({p for p in paths if p not in self._by_path and p not in ahead and p in self.files})
        if len(missing) < self.AHEAD_AT_LEAST:
            return 0
        errors = dict(self.parse_errors)
        self.prefetch(missing)
        # kept aside until read: a module summarised ahead but never read leaves no trace (no
        # parse error of it is reported)
        for p in missing:
            s = self._by_path.pop(p, None)
            if s is not None:
                ahead[p] = s
        self.parse_errors.clear()
        self.parse_errors.update(errors)
        return len(missing)

    def overlaid(self, source, changed: Iterable[str]) -> "Tree":
        """A tree over ``source``, which is this tree with the files ``changed`` replaced or
        added (e.g. patched in memory): its file list is this tree's plus ``changed``, it shares
        this tree's cache and extractors, and it starts with the summaries and bytes already read here
        for every file not in ``changed`` (they are not read again), and with this tree's answer to
        which of them each extractor applies to (:meth:`candidates`).

        Args:
            source: the new tree's source (reads of unchanged files may go to this tree's).
            changed: paths whose content differs from this tree's, or that it lacks.

        Returns:
            The new :class:`Tree`.
        """
        changed = frozenset(changed)
        tree = Tree(source, self.cache, self.extractors)
        tree._files = set(self.files) | changed
        tree._by_path = {p: s for p, s in self._by_path.items() if p not in changed}
        tree._ahead = {p: s for p, s in self._ahead.items() if p not in changed}
        # the bytes already read of the unchanged files, and which modules each extractor applies
        # to among them, are this tree's too
        tree._data = {p: d for p, d in self._data.items() if p not in changed}
        tree.reads.update({p: self.reads[p] for p in tree._data})
        tree._overlay = (self, changed)
        tree._unread = dict(self.unread_code())
        tree.parse_errors.update({p: why for p, why in self.parse_errors.items() if p.endswith("/")})
        return tree


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
