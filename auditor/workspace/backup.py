"""The backups of ``fix --apply``: where they live in the tree (:func:`backup_home`), the backup
folder checked before use (:func:`backup_base`), and a backup written complete before the first
file of the tree is replaced (:func:`write_backup`: the originals and the ``manifest.json``
journal, staged under a temporary name and renamed to the next number) or discarded in one step.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import time
from pathlib import Path

from auditor.workspace.folder import Dir, FileState, FixRefused, sha256_hex

#: Folder that holds the backups of ``fix --apply``: in the folder the user gave (inside
#: ``site-packages/vllm/`` for an installed vLLM, beside ``vllm/`` in a checkout; see :func:`backup_home`).
BACKUP_DIR = ".eagle-audit-backup"

#: Format id of a backup's ``manifest.json``.
BACKUP_FORMAT = "eagle-audit-backup/2"

_STAGING = ".incomplete-"


def _refuse_links(d: Dir) -> None:
    """Refuse a backup folder that holds anything but folders and regular files (a symbolic link
    could point a restore, or the backup itself, outside the tree)."""
    for name in os.listdir(d.fd):
        st = d.lstat(name)
        where = f"{d.label}/{name}"
        if st is None:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise FixRefused(f"the backup holds a symbolic link ({where}); refusing to use it")
        if stat.S_ISDIR(st.st_mode):
            with d.sub(name) as sub:
                _refuse_links(sub)
        elif not stat.S_ISREG(st.st_mode):
            raise FixRefused(f"the backup holds something that is not a file ({where}); refusing to use it")


def backup_base(top: Dir, create: bool, tidy: bool = True) -> Dir | None:
    """The backup folder ``.eagle-audit-backup`` (None when absent and not ``create``), checked:
    a real folder holding only folders and regular files. Leftovers of an apply interrupted
    before its backup was complete (``.incomplete-*``, never referenced by a journal) are removed."""
    import shutil

    st = top.lstat(BACKUP_DIR)
    if st is None and not create:
        return None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise FixRefused(f"{top.label}/{BACKUP_DIR} is a symbolic link or not a folder; refusing to use it")
    base = top.sub(BACKUP_DIR, create=True)
    try:
        _refuse_links(base)
        for name in os.listdir(base.fd) if tidy else ():
            if name.startswith(_STAGING):
                shutil.rmtree(name, dir_fd=base.fd)
    except BaseException:
        base.close()
        raise
    return base


def write_backup(base: Dir, journal: dict, states: dict[str, FileState],
                 originals: dict[str, bytes], patched: dict[str, bytes]) -> str:
    """Write the backup (original bytes + manifest) in a staging folder, then rename it to the
    next number: a numbered backup is always complete.

    Args:
        base: the open backup folder (:func:`backup_base`).
        journal: what the manifest records of the change: ``{"method": str, "targets": [architecture,
            ...], "invocations": [invocation dict, ...]}``.
        states: tree path -> what is at it now (its kind, mode and link are recorded).
        originals: tree path -> the bytes kept in the backup.
        patched: tree path -> the bytes about to be written (their digests are recorded).

    Returns:
        The backup's folder name (its number).

    Raises:
        OSError: the backup could not be written (nothing of it is left behind).
    """
    n = 1 + max(backup_numbers(base), default=0)
    staging = f"{_STAGING}{n}-{secrets.token_hex(4)}"
    try:
        _stage_backup(base, staging, journal, states, originals, patched)
        os.rename(staging, str(n), src_dir_fd=base.fd, dst_dir_fd=base.fd)
    except BaseException:  # a full disk, an unreadable folder: no half-written backup stays behind
        import shutil

        shutil.rmtree(staging, dir_fd=base.fd, ignore_errors=True)
        raise
    base.sync()
    return str(n)


def _stage_backup(base: Dir, staging: str, journal: dict, states: dict[str, FileState],
                  originals: dict[str, bytes], patched: dict[str, bytes]) -> None:
    """Write the originals and the manifest into the new folder ``staging`` of ``base``."""
    with base.sub(staging, create=True, exclusive=True) as sdir:
        with sdir.sub("files", create=True) as files:
            for p in sorted(originals):
                parts = p.split("/")
                with files.walk_to(parts, create=True) as d:
                    d.put(parts[-1], originals[p])
        entries = {}
        for p in sorted(originals):
            st = states[p]
            entries[p] = {"original_sha256": sha256_hex(originals[p]), "patched_sha256": sha256_hex(patched[p]),
                          "kind": st.kind, "mode": st.mode}
            if st.link is not None:
                entries[p]["link"] = st.link
        manifest = {
            "format": BACKUP_FORMAT,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "method": journal["method"],
            "targets": journal["targets"],
            "files": entries,
            "invocations": journal["invocations"],
        }
        sdir.put("manifest.json", json.dumps(manifest, indent=2).encode())
        sdir.sync()


def backup_numbers(base: Dir) -> list[int]:
    """The numbers of the backups in the open backup folder: names made of ASCII digits only (a
    folder named ``²`` or ``٣`` is no backup of this tool, and is left alone)."""
    return [int(d) for d in os.listdir(base.fd) if d.isascii() and d.isdigit()]


def discard_backup(base: Dir, name: str) -> None:
    """Remove the backup ``name``: renamed first to a staging name (one atomic step, so that an
    interruption never leaves a numbered backup without its manifest), then deleted; a leftover
    staging folder is removed by the next apply or revert."""
    import shutil

    gone = f"{_STAGING}{name}-{secrets.token_hex(4)}"
    os.rename(name, gone, src_dir_fd=base.fd, dst_dir_fd=base.fd)
    shutil.rmtree(gone, dir_fd=base.fd, ignore_errors=True)


def backup_home(root: Path, given: Path | None, package: str = "vllm") -> Path:
    """The folder that holds the backup (``.eagle-audit-backup/``) and the lock of ``fix
    --apply``: inside the tree the user gave. ``given`` is the folder as given (None: the
    installed package): the package folder itself (``site-packages/vllm``, or nothing given)
    keeps them inside it, never in ``site-packages/``; a folder that contains ``vllm/`` (a
    checkout) keeps them beside ``vllm/``, in that folder."""
    root = Path(root)
    if given is not None and Path(given).expanduser().resolve() == root.resolve():
        return root
    return root / package


def home_parts(root: Path, home: Path | None) -> list[str]:
    """The components of ``home`` below ``root`` (``[]`` for ``root`` itself).

    Raises:
        FixRefused: ``home`` is not ``root`` or a folder in it.
    """
    if home is None:
        return []
    try:
        parts = list(Path(home).relative_to(Path(root)).parts)
    except ValueError:
        raise FixRefused(f"{home} is not inside {root}; nothing was written") from None
    if any(p in ("", ".", "..") for p in parts):
        raise FixRefused(f"{home} is not inside {root}; nothing was written")
    return parts


def open_home(top: Dir, parts: list[str]) -> Dir:
    """The folder ``parts`` below the open root ``top`` (no symbolic link followed), or a copy
    of ``top`` itself."""
    return top.walk_to(parts + ["-"]) if parts else Dir(os.dup(top.fd), top.label)
