"""The release matrix (the ``matrix`` command). Pure: results are objects, nothing is printed.

:func:`run_matrix` gives one row per release and architecture of a version list or range, read
from the package index (:func:`~auditor.source.listing.list_releases`); releases without a source
archive are listed as ``skipped`` with the reason. Archives are fetched by a thread pool (the cache writes through a
temporary file and an atomic rename, so concurrent fetches of different releases are safe) and
audited as they arrive, in worker processes or in this one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from packaging.version import InvalidVersion, Version

from auditor.cache import Store, cacheable
from auditor.cache import key as cache_key
from auditor.model.options import DEFAULT_PLATFORM
from auditor.hf.targets import load_alias_table
from auditor.model.errors import AuditError
from auditor.model.findings import Severity, fixable
from auditor.model.options import RunOptions
from auditor.model.outcomes import ReleaseVerdict
from auditor.model.results import TargetResult, TargetSpec
from auditor.orchestration.releases import IndexReleases, Releases
from auditor.orchestration.scan import Auditor, make_tree
from auditor.source.digests import recorded_sha256
from auditor.source.listing import IndexListing, nearest_versions

#: ``progress(stage, done, total)``: stage is ``"fetch"`` or ``"audit"``.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class FetchPlan:
    """What a matrix reads before it starts (given to ``run_matrix``'s ``on_plan``): the
    releases to audit, those of them already in the cache, those to download, and the bytes
    the index publishes for the downloads (``None`` when it publishes no size for one of them)."""

    releases: tuple[str, ...]
    cached: tuple[str, ...]
    to_fetch: tuple[str, ...]
    download_bytes: int | None


# -- release listing and version specs ---------------------------------------------------------


@dataclass(frozen=True)
class PlannedRelease:
    """One release of a matrix: its version, and why it is skipped (None: it is read)."""

    version: str
    skip: str | None = None


def _version(text: str, spec: str) -> Version:
    try:
        return Version(text.strip())
    except InvalidVersion:
        raise AuditError(f"--versions {spec!r}: {text.strip()!r} is not a version (expected e.g. "
                         "0.16.0,0.18.0 or 0.12.0..0.33.0)") from None


def check_spec(spec: str) -> list[tuple[str, tuple[Version | None, Version | None] | None]]:
    """The items of a ``--versions`` SPEC, checked for their form alone (no package index is
    read: a SPEC is refused before any fetch): each item with its range bounds ``(lo, hi)`` (None
    for an open end), or None for a single version.

    Raises:
        AuditError: an empty item, a word that is not a version, more than one ``..``, an empty
            range (one line, naming ``--versions``).
    """
    items = [i.strip() for i in spec.split(",")]
    if not spec.strip() or any(not i for i in items):
        raise AuditError(f"--versions {spec!r}: expected a comma-separated list of versions or ranges A..B")
    out: list[tuple[str, tuple[Version | None, Version | None] | None]] = []
    for item in items:
        if ".." not in item:
            _version(item, spec)
            out.append((item, None))
            continue
        lo_text, _, hi_text = item.partition("..")
        if ".." in hi_text:
            raise AuditError(f"--versions {spec!r}: {item!r} has more than one '..'")
        lo = _version(lo_text, spec) if lo_text.strip() else None
        hi = _version(hi_text, spec) if hi_text.strip() else None
        if lo is not None and hi is not None and lo > hi:
            raise AuditError(f"--versions {spec!r}: the range {item} is empty ({lo} > {hi})")
        out.append((item, (lo, hi)))
    return out


def parse_versions(spec: str, listing: IndexListing) -> list[PlannedRelease]:
    """The releases a ``--versions`` SPEC names, in version order, without repeats.

    SPEC is a comma-separated list of versions and inclusive ranges ``A..B`` (``A..``: from A to
    the newest release, ``..B``: up to B). A range covers every release the index lists (final
    releases only, unless an end is itself a pre-release); a listed version the index does not
    know is an error. Releases without a source archive are kept, with the reason they are
    skipped.

    Raises:
        AuditError: a malformed SPEC, an empty range, or a version not on the index.
    """
    known = sorted({Version(v) for v in listing.known})
    sdists = {Version(v) for v in listing.sdists}
    yanked = {Version(v) for v in listing.yanked}
    chosen: list[Version] = []
    for item, bounds in check_spec(spec):
        if bounds is not None:
            lo, hi = bounds
            picked = [v for v in known
                      if (lo is None or v >= lo) and (hi is None or v <= hi)
                      and (not (v.is_prerelease or v.is_devrelease) or v in (lo, hi))]
            if not picked:
                raise AuditError(f"--versions {spec!r}: no release on the index in {item}")
            chosen += picked
        else:
            v = _version(item, spec)
            if v not in known:
                near = ", ".join(str(n) for n in nearest_versions(v, [k for k in known if k in sdists]))
                raise AuditError(f"--versions: vLLM {item} is not on the package index"
                                 + (f"; nearest releases: {near}" if near else ""))
            chosen.append(v)
    out = []
    for v in sorted(set(chosen)):
        if v in sdists:
            out.append(PlannedRelease(str(v)))
        elif v in yanked:
            out.append(PlannedRelease(str(v), "its source archive is yanked on the package index"))
        else:
            out.append(PlannedRelease(str(v), "no source archive (sdist) on the package index, only wheels"))
    return out


# -- matrix ----------------------------------------------------------------------------------


@cacheable
@dataclass
class ReleaseAudit:
    """One release's audit, as a worker returns it (picklable): the results of the names that
    resolved, and each name that did not with the reason."""

    version: str
    source: str
    results: list[TargetResult]
    unresolved: dict[str, str]
    seconds: float


def _release_key(archive: str, names: Sequence[str], method: str, model_type: str | None,
                 platform: str = DEFAULT_PLATFORM, options: RunOptions | None = None,
                 sources: dict[str, str] | None = None) -> str | None:
    """The cache key of the audit of a fetched release archive: the archive's sha256 as recorded
    by :func:`auditor.source.fetch.fetch_release` (which has just verified the file against it),
    the request (with the labels of ``sources``: they are part of the findings' text) and the
    tool's code (:func:`auditor.cache.key`). None when no digest is recorded (an archive that
    was not fetched)."""
    digest = recorded_sha256(Path(archive))
    if digest is None:
        return None
    return cache_key("matrix", digest, list(names), method, model_type, platform,
                     (options or RunOptions()).with_method("").key(), sorted((sources or {}).items()))


def cached_release_audit(archive: str, names: Sequence[str], method: str, model_type: str | None,
                         platform: str = DEFAULT_PLATFORM, options: RunOptions | None = None,
                         sources: dict[str, str] | None = None) -> ReleaseAudit | None:
    """The cached audit of a release archive, or None."""
    k = _release_key(archive, names, method, model_type, platform, options, sources)
    return Store("matrix").get(k, ReleaseAudit) if k is not None else None


def _store_release_audit(archive: str, names, method, model_type, audit: ReleaseAudit,
                         platform: str = DEFAULT_PLATFORM, options: RunOptions | None = None,
                         sources: dict[str, str] | None = None) -> None:
    k = _release_key(archive, names, method, model_type, platform, options, sources)
    if k is not None:
        Store("matrix").put(k, audit)


def audit_release(version: str, archive: str, names: Sequence[str], method: str,
                  model_type: str | None = None, use_cache: bool = True, platform: str = DEFAULT_PLATFORM,
                  options: RunOptions | None = None, sources: dict[str, str] | None = None) -> ReleaseAudit:
    """Audit ``names`` in the release archive ``archive`` (a top-level function, so that a
    process pool can run it) under the run ``options``. ``sources`` says where a
    ``--model-type`` no flag gave came from (:func:`~auditor.orchestration.config.relabel_sources`:
    ``pyproject.toml model-type``). With ``use_cache``, the result is cached per archive sha256
    (see :func:`cached_release_audit`), besides the index and result caches of the scan itself."""
    from auditor.index.tree import SummaryCache
    from auditor.orchestration.config import relabel_sources
    from auditor.source.archive import ArchiveSource

    if use_cache:
        hit = cached_release_audit(archive, names, method, model_type, platform, options, sources)
        if hit is not None:
            return hit
    t0 = time.perf_counter()
    auditor = Auditor(make_tree(ArchiveSource(archive), SummaryCache(enabled=use_cache)), platform=platform)
    specs: list[TargetSpec] = []
    unresolved: dict[str, str] = {}
    for name in names:
        try:
            found = relabel_sources(auditor.engine.resolve_targets(auditor.registry, [name], model_type, None),
                                    sources)
        except AuditError as exc:
            unresolved[name] = str(exc)
            continue
        for s in found:
            if s.architecture not in {x.architecture for x in specs}:
                specs.append(s)
    results = auditor.scan(specs, [method], options=options).results if specs else []
    audit = ReleaseAudit(version, Path(archive).name, results, unresolved, time.perf_counter() - t0)
    if use_cache:
        _store_release_audit(archive, names, method, model_type, audit, platform, options, sources)
    return audit


@dataclass
class MatrixRow:
    """One release and architecture (a cell of the matrix): the verdict (``absent``: not in the
    release's registry; ``skipped``: the release was not read, see ``reason``), the blocking
    gates and the gates of the warnings; ``fix_available``: blocked, and ``eagle-audit fix`` can
    patch every blocking gate; ``gates``: the error, unknown and warning findings with their
    ``file:line`` (:meth:`~auditor.model.findings.Finding.location`)."""

    #: the release of the row (the JSON's ``vllm_version``, whichever engine)
    release: str
    architecture: str
    method: str
    verdict: ReleaseVerdict
    blocking: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reason: str = ""
    first_native: bool = False
    fix_available: bool = False
    gates: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"vllm_version": self.release, "architecture": self.architecture, "method": self.method,
                "verdict": self.verdict.value, "blocking": self.blocking, "warnings": self.warnings,
                "fix_available": self.fix_available, "gates": self.gates,
                "reason": self.reason or None, "first_native": self.first_native}


@dataclass
class MatrixReport:
    """The matrix: rows in release order, then architecture order."""

    model: list[str]
    versions: str
    method: str
    architectures: list[str]
    rows: list[MatrixRow]
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    jobs: int = 1
    #: the run every release was audited for
    run_options: RunOptions | None = None
    #: the engine whose releases the rows are (``vllm``, ``sglang``)
    engine: str = "vllm"

    @property
    def releases(self) -> list[str]:
        return list(dict.fromkeys(r.release for r in self.rows))

    @property
    def first_supported(self) -> dict[str, str | None]:
        """Architecture → the first release that supports it natively (None: none does)."""
        out: dict[str, str | None] = {a: None for a in self.architectures}
        for r in self.rows:
            if r.first_native:
                out[r.architecture] = r.release
        return out

    @property
    def first_all_supported(self) -> str | None:
        """The first release that supports every architecture natively."""
        for v in self.releases:
            rows = [r for r in self.rows if r.release == v]
            if rows and all(r.verdict is ReleaseVerdict.SUPPORTED for r in rows):
                return v
        return None

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "versions": self.versions,
            "method": self.method,
            "architectures": self.architectures,
            "first_supported": self.first_supported,
            "first_all_supported": self.first_all_supported,
            "rows": [r.as_dict() for r in self.rows],
            "errors": [{"vllm_version": v, "error": e} for v, e in sorted(self.errors.items(), key=lambda x: Version(x[0]))],
            "seconds": round(self.seconds, 3),
            "jobs": self.jobs,
            "run_options": self.run_options.as_dict() if self.run_options else None,
            "engine": self.engine,
        }


def _expected_architectures(name: str) -> list[str]:
    """The architectures a name stands for before any tree is read: the alias table's targets
    for a model_type it lists, else the name itself when it looks like an architecture."""
    entry = load_alias_table().get("model_type", {}).get(name)
    if entry:
        return [t["architecture"] for t in entry["targets"]]
    return [name] if name[:1].isupper() else []


def run_matrix(
    names: Sequence[str],
    versions: str,
    *,
    method: str = "eagle3",
    model_type: str | None = None,
    jobs: int | None = None,
    fetch_workers: int = 4,
    use_cache: bool = True,
    releases: Releases | None = None,
    progress: Progress | None = None,
    platform: str = DEFAULT_PLATFORM,
    options: RunOptions | None = None,
    engine: str = "vllm",
    sources: dict[str, str] | None = None,
    on_plan: Callable[[FetchPlan], None] | None = None,
) -> MatrixReport:
    """Audit ``names`` in every release of ``versions`` (see :func:`parse_versions`), as
    ``releases`` lists and fetches them (default: :class:`IndexReleases`, pip's index, for the
    distribution of ``engine``: ``vllm``'s sdists, or ``sglang``'s sdists and wheels), under the
    run ``options`` (pipeline-parallel size, drafter config, …; default: a plain run).
    ``sources`` labels a ``--model-type`` the settings file gave (:func:`audit_release`).
    ``on_plan`` is called once, before anything is fetched, with the :class:`FetchPlan` (how
    many releases, how many to download and their published size; a ``releases`` object without
    a ``cached(version)`` method counts every release as cached).

    Archives are fetched by ``fetch_workers`` threads; each is audited as soon as it is there:
    from the per-archive result cache when it holds it (``use_cache``), else by a pool of
    ``jobs`` worker processes (default: the CPU count; started on the first miss), or in this
    process when ``jobs`` is 1. A release that cannot be fetched or read is kept as
    ``skipped`` with the reason, and listed in ``errors``. An interruption (Ctrl-C) cancels the
    fetches not started, stops those in progress at their next chunk (no ``.part`` file stays),
    ends the worker processes (they ignore SIGINT themselves, so none prints a traceback), then
    propagates.

    Raises:
        AuditError: a bad SPEC, or a name that resolves in none of the releases read.
        KeyboardInterrupt: Ctrl-C, after the cleaning up above.
    """
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed

    releases = releases if releases is not None else IndexReleases(project=engine)
    t0 = time.perf_counter()
    names = list(names)
    if not names:
        raise AuditError("no target: give --model NAME (or models in [tool.eagle-audit], pyproject.toml)")
    check_spec(versions)  # its form, before the index is read
    plan = parse_versions(versions, releases.listing())
    to_read = [p.version for p in plan if p.skip is None]
    if on_plan is not None:
        listing = releases.listing()
        is_cached = getattr(releases, "cached", lambda v: True)
        fetch = tuple(v for v in to_read if not is_cached(v))
        sizes = [getattr(listing, "size", lambda v: None)(v) for v in fetch]
        on_plan(FetchPlan(tuple(to_read), tuple(v for v in to_read if v not in fetch), fetch,
                          None if None in sizes else sum(sizes)))
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(to_read) or 1))
    audits: dict[str, ReleaseAudit] = {}
    errors: dict[str, str] = {}
    done = {"fetch": 0, "audit": 0}

    def tick(stage: str) -> None:
        done[stage] += 1
        if progress:
            progress(stage, done[stage], len(to_read))

    if progress:
        progress("fetch", 0, len(to_read))
        progress("audit", 0, len(to_read))
    from auditor.source.fetch import allow_downloads, stop_downloads

    allow_downloads()
    pool = None
    threads = ThreadPoolExecutor(max(1, min(fetch_workers, len(to_read) or 1)))
    try:
        fetching = {threads.submit(releases.fetch, v): v for v in to_read}
        auditing = {}
        for fut in as_completed(fetching):
            v = fetching[fut]
            try:
                archive = str(fut.result())
            except AuditError as exc:
                errors[v] = str(exc)
                tick("fetch")
                tick("audit")
                continue
            tick("fetch")
            args = (v, archive, tuple(names), method, model_type, use_cache, platform, options, sources)
            hit = cached_release_audit(*args[1:5], platform, options, sources) if use_cache else None
            if hit is not None:
                audits[v] = hit
                tick("audit")
                continue
            if pool is None and jobs > 1:
                import multiprocessing

                # spawn, not fork: the download threads may hold locks at fork time
                pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                           initializer=_leave_interrupts_to_the_parent)
            if pool is None:
                _collect(v, lambda: audit_release(*args), audits, errors)
                tick("audit")
            else:
                auditing[pool.submit(audit_release, *args)] = v
        for fut in as_completed(auditing):
            _collect(auditing[fut], fut.result, audits, errors)
            tick("audit")
    except BaseException:  # Ctrl-C: cancel what has not started, stop what has, and leave nothing behind
        stop_downloads()
        threads.shutdown(wait=True, cancel_futures=True)  # a download stops at its next chunk
        if pool is not None:
            _stop_workers(pool)
            pool = None
        allow_downloads()  # only once every download has stopped (a second Ctrl-C leaves them stopped)
        raise
    finally:
        threads.shutdown(wait=True)  # not in a with block: its exit would wait for every pending download
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    report = _matrix(names, versions, method, plan, audits, errors, time.perf_counter() - t0,
                     jobs if pool is not None else 1, engine=engine)
    report.run_options = (options or RunOptions()).with_method(method).with_platform(platform)
    return report


def _leave_interrupts_to_the_parent() -> None:
    """Worker-process initializer: ignore SIGINT (Ctrl-C reaches the whole process group; the
    parent stops the workers itself, so none prints a KeyboardInterrupt traceback)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop_workers(pool) -> None:
    """Cancel the pending audits of a process pool and end its worker processes now (an audit in
    progress is dropped: the run was interrupted)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        try:
            proc.terminate()
        except (OSError, AttributeError):
            pass
    for proc in procs:
        proc.join(timeout=1)


def _collect(version: str, get: Callable[[], ReleaseAudit], audits: dict, errors: dict) -> None:
    try:
        audits[version] = get()
    except AuditError as exc:
        errors[version] = str(exc)


def _matrix(names, versions, method, plan, audits, errors, seconds, jobs, engine="vllm") -> MatrixReport:
    archs: list[str] = []
    for n in names:
        archs += [a for a in _expected_architectures(n) if a not in archs]
    for v in sorted(audits, key=Version):
        archs += [r.architecture for r in audits[v].results if r.architecture not in archs]
    resolved = {n for a in audits.values() for n in names if n not in a.unresolved}
    unknown = [n for n in names if n not in resolved]
    if audits and unknown:
        first = next(a.unresolved[unknown[0]] for a in audits.values() if unknown[0] in a.unresolved)
        read = ", ".join(sorted(audits, key=Version))
        raise AuditError(f"{unknown[0]!r} is in none of the releases read ({read}): {first}")
    rows: list[MatrixRow] = []
    seen_native: set[str] = set()
    for p in plan:
        a = audits.get(p.version)
        by_arch = {r.architecture: r for r in a.results} if a else {}
        for arch in archs:
            if p.skip or a is None:
                reason = p.skip or f"could not be read: {errors.get(p.version, 'unknown error')}"
                rows.append(MatrixRow(p.version, arch, method, ReleaseVerdict.SKIPPED, reason=reason))
                continue
            r = by_arch.get(arch)
            if r is None:
                rows.append(MatrixRow(p.version, arch, method, ReleaseVerdict.ABSENT,
                                      reason="not in the model registry"))
                continue
            row = MatrixRow(p.version, arch, method, ReleaseVerdict.of(r.verdict), r.blocking,
                            [f.gate for f in r.findings if f.severity is Severity.WARNING],
                            fix_available=fixable(r.verdict, r.findings),
                            gates=[f.location() for f in r.findings])
            if row.verdict is ReleaseVerdict.UNKNOWN:
                row.reason = "; ".join(f.message for f in r.findings if f.severity is Severity.UNKNOWN)
            if row.verdict is ReleaseVerdict.SUPPORTED and arch not in seen_native:
                seen_native.add(arch)
                row.first_native = True
            rows.append(row)
    return MatrixReport(names, versions, method, archs, rows, errors, seconds, jobs, engine=engine)
