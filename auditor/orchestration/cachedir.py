"""``eagle-audit cache``: where the on-disk cache is, what it holds per kind, and pruning it.

The cache folder is :func:`auditor.cache.cache_root` (``$EAGLE_AUDIT_CACHE_DIR``, else the user
cache folder). Its kinds, each a subfolder eagle-audit writes:

- ``archives``: release archives of the engines (``archives/vllm-*``, ``archives/sglang-*``,
  sdists and wheels), each with its ``.sha256`` sidecar;
- ``wheels``: library wheels read for their classes (``archives/transformers-*.whl``);
- ``summaries``: module summaries of the index pass (``index/``);
- ``results``: whole scans (``results/``); ``matrix``: release audits of ``matrix`` (``matrix/``).

Anything else in the folder is listed as ``other`` and never deleted. Deleting is refused (one
line, nothing removed) when the cache folder or a kind's folder is a symbolic link, or when a
path to delete does not lie inside the cache folder: nothing outside it is ever removed, and no
link is followed. A file being written by a running eagle-audit (a ``.part`` or ``.tmp`` file
younger than an hour) is left alone.
"""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from auditor.cache import cache_root
from auditor.model.errors import AuditError

#: Kind → (the subfolder it lives in, what it holds), in the order reports list them.
KINDS: dict[str, tuple[str, str]] = {
    "archives": ("archives", "engine release archives"),
    "wheels": ("archives", "transformers wheels"),
    "summaries": ("index", "module summaries"),
    "results": ("results", "whole scans"),
    "matrix": ("matrix", "matrix release audits"),
}

#: Library projects whose wheels the archive folder holds (their files are the ``wheels`` kind).
_LIBRARIES = ("transformers",)

#: How long a file that looks like an unfinished write (``.part``, ``.tmp``) is left alone.
_IN_PROGRESS_SECONDS = 3600

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
          "tib": 1 << 40}


def human_size(n: int) -> str:
    """``n`` bytes for a reader: ``512 bytes``, ``8.0 MiB``, ``1.1 GiB``."""
    if n < 1024:
        return f"{n} bytes"
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"  # pragma: no cover


def parse_size(text: str, option: str = "--max-size") -> int:
    """A size given by the user (``500M``, ``1.5G``, ``2GiB``, ``0``, ``1048576``) in bytes
    (binary units: ``M`` is 2**20).

    Raises:
        AuditError: one line naming ``option`` when ``text`` is not a size.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise AuditError(f"{option} {text!r}: not a size; give bytes or a number with K, M, G or T (500M, 1.5G)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


@dataclass
class Entry:
    """One unit the cache stores and prunes: a file (and its sidecar, for an archive)."""

    kind: str
    paths: list[Path]
    size: int
    mtime: float


@dataclass
class KindUsage:
    """What one kind holds: its ``entries`` (a file and its sidecar count once), their bytes."""

    kind: str
    folder: Path
    what: str
    entries: list[Entry] = field(default_factory=list)
    link: Path | None = None  # the folder is a symbolic link to this (never deleted through)

    @property
    def size(self) -> int:
        """Bytes of every entry of the kind."""
        return sum(e.size for e in self.entries)


@dataclass
class CacheUsage:
    """The cache folder and what it holds: per kind, and the ``other`` entries eagle-audit does
    not own (names and sizes; never deleted)."""

    root: Path
    origin: str
    exists: bool
    kinds: list[KindUsage]
    other: list[tuple[str, int]]
    root_link: Path | None = None

    @property
    def size(self) -> int:
        """Bytes of every kind (the ``other`` entries not included)."""
        return sum(k.size for k in self.kinds)


@dataclass
class PruneResult:
    """What a prune or clear removed: ``removed`` entries per kind, the bytes freed, and the
    usage after."""

    removed: dict[str, int]
    freed: int
    after: CacheUsage


def _tree_size(path: Path) -> int:
    """Bytes of the files under ``path`` (no link followed; an unreadable part counts 0)."""
    total = 0
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    if not stat.S_ISDIR(st.st_mode):
        return st.st_size
    try:
        with os.scandir(path) as it:
            for e in it:
                total += _tree_size(Path(e.path))
    except OSError:
        pass
    return total


def _files(folder: Path, follow: bool) -> list[tuple[Path, os.stat_result]]:
    """The files under ``folder`` (recursively), with their ``lstat``; links are listed as files
    and never followed, except ``folder`` itself when ``follow``."""
    out = []
    try:
        if not follow and folder.is_symlink():
            return []
        with os.scandir(folder) as it:
            items = list(it)
    except OSError:
        return []
    for e in items:
        try:
            st = os.lstat(e.path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            out += _files(Path(e.path), follow=False)
        else:
            out.append((Path(e.path), st))
    return out


def _link_target(path: Path) -> Path | None:
    """Where the symbolic link ``path`` points (None when it is not a link)."""
    try:
        return Path(os.readlink(path)) if path.is_symlink() else None
    except OSError:
        return None


def _kind_of_archive(name: str) -> str:
    """``wheels`` for a library's wheel (and its sidecar), else ``archives``."""
    return "wheels" if any(name.startswith(f"{lib}-") for lib in _LIBRARIES) else "archives"


def cache_usage() -> CacheUsage:
    """What the cache folder holds, per kind (read only: nothing is created or changed).

    Returns:
        The :class:`CacheUsage` of :func:`auditor.cache.cache_root`; a kind whose folder is a
        link is not followed: it counts nothing and is marked (see :attr:`KindUsage.link`), so
        that no file outside the cache folder is counted as the cache's.
    """
    root = cache_root()
    origin = "EAGLE_AUDIT_CACHE_DIR" if os.environ.get("EAGLE_AUDIT_CACHE_DIR") else "the user cache folder"
    kinds = {k: KindUsage(k, root / sub, what) for k, (sub, what) in KINDS.items()}
    for sub in dict.fromkeys(sub for sub, _ in KINDS.values()):
        folder = root / sub
        link = _link_target(folder)
        owners = [k for k, (s, _) in KINDS.items() if s == sub]
        for k in owners:
            kinds[k].link = link
        by_name: dict[tuple[str, str], Entry] = {}
        for path, st in _files(folder, follow=False):  # a kind folder that is a link is not measured
            if sub == "archives":
                base = path.name.removesuffix(".sha256")
                kind = _kind_of_archive(base.lstrip("."))
                unit = (kind, str(path.with_name(base)))
            else:
                kind, unit = owners[0], (owners[0], str(path))
            entry = by_name.setdefault(unit, Entry(kind, [], 0, 0.0))
            entry.paths.append(path)
            entry.size += st.st_size
            entry.mtime = max(entry.mtime, st.st_mtime)
        for entry in by_name.values():
            kinds[entry.kind].entries.append(entry)
    other = []
    known = {sub for sub, _ in KINDS.values()}
    try:
        with os.scandir(root) as it:
            names = sorted(e.name for e in it)
    except OSError:
        names = []
    for name in names:
        if name not in known:
            other.append((name, _tree_size(root / name)))
    return CacheUsage(root, origin, root.is_dir(), list(kinds.values()), other, _link_target(root))


def _refuse_links(usage: CacheUsage) -> None:
    """Refuse (AuditError, nothing removed) a cache folder or kind folder that is a link."""
    if usage.root_link is not None:
        raise AuditError(f"refusing to delete in the cache folder {usage.root}: it is a symbolic link to "
                         f"{usage.root_link}; set EAGLE_AUDIT_CACHE_DIR to the folder itself")
    for k in usage.kinds:
        if k.link is not None:  # not listed through (cache_usage does not follow it): refused whatever it holds
            raise AuditError(f"refusing to delete in {k.folder}: it is a symbolic link (to {k.link}), and nothing "
                             "is deleted through a link; nothing was removed")


def _inside(path: Path, root: Path) -> bool:
    """True when ``path`` (not followed if it is a link) lies inside ``root``."""
    try:
        real_parent = path.parent.resolve(strict=True)
        real_root = root.resolve(strict=True)
    except (OSError, RuntimeError):
        return False
    return real_parent == real_root or real_root in real_parent.parents


def _remove(entries: list[Entry], root: Path, now: float) -> tuple[dict[str, int], int]:
    """Unlink the files of ``entries`` (never a folder, never through a link); a file that looks
    like a write in progress is kept. Returns the entries removed per kind and the bytes freed."""
    removed: dict[str, int] = {}
    freed = 0
    for entry in entries:
        done = False
        for path in entry.paths:
            if path.name.endswith((".part", ".tmp")) and now - entry.mtime < _IN_PROGRESS_SECONDS:
                continue
            if not _inside(path, root):
                raise AuditError(f"refusing to delete {path}: it is not inside the cache folder {root}")
            try:
                st = os.lstat(path)
                if stat.S_ISDIR(st.st_mode):
                    continue
                os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise AuditError(f"cannot delete {path}: {exc.strerror or exc}") from None
            freed += st.st_size
            done = True
        if done:
            removed[entry.kind] = removed.get(entry.kind, 0) + 1
    _drop_empty_folders(root)
    return removed, freed


def _drop_empty_folders(root: Path) -> None:
    """Remove the empty sub-folders of the summary-like kinds (``index/ab/``), never a link."""
    for sub in dict.fromkeys(s for s, _ in KINDS.values()):
        folder = root / sub
        if folder.is_symlink() or not folder.is_dir():
            continue
        for child in sorted(folder.iterdir(), reverse=True):
            try:
                if child.is_dir() and not child.is_symlink() and not any(child.iterdir()):
                    child.rmdir()
            except OSError:
                continue


def prune(older_than_days: float | None = None, max_size: int | None = None, *, now: float | None = None) -> PruneResult:
    """Remove cache entries: those last written more than ``older_than_days`` ago, then the
    oldest ones until the kinds hold at most ``max_size`` bytes.

    Raises:
        AuditError: neither limit is given, a limit is negative, or the cache folder or a kind's
            folder is a symbolic link (nothing removed).
    """
    if older_than_days is None and max_size is None:
        raise AuditError("cache prune: give --older-than DAYS or --max-size SIZE (or both)")
    if (older_than_days is not None and older_than_days < 0) or (max_size is not None and max_size < 0):
        raise AuditError("cache prune: --older-than and --max-size take numbers of zero or more")
    now = time.time() if now is None else now
    usage = cache_usage()
    _refuse_links(usage)
    entries = sorted((e for k in usage.kinds for e in k.entries), key=lambda e: e.mtime)
    doomed = []
    if older_than_days is not None:
        cutoff = now - older_than_days * 86400
        doomed = [e for e in entries if e.mtime < cutoff]
    if max_size is not None:
        left = sum(e.size for e in entries if e not in doomed)
        for e in entries:
            if left <= max_size:
                break
            if e not in doomed:
                doomed.append(e)
                left -= e.size
    removed, freed = _remove(doomed, usage.root, now)
    return PruneResult(removed, freed, cache_usage())


def clear(*, now: float | None = None) -> PruneResult:
    """Remove every entry of every kind (the ``other`` entries stay).

    Raises:
        AuditError: the cache folder or a kind's folder is a symbolic link (nothing removed).
    """
    now = time.time() if now is None else now
    usage = cache_usage()
    _refuse_links(usage)
    removed, freed = _remove([e for k in usage.kinds for e in k.entries], usage.root, now)
    return PruneResult(removed, freed, cache_usage())
