"""The verified archives of the cache: each archive's sha256, recorded beside it when it was
verified against the index (a ``<file>.sha256`` sidecar) and checked again offline (hashed, or
matched to a stamp recorded when it was hashed), and the files of the cache handled without
raising where a cache folder cannot be written. Below :mod:`auditor.source.fetch` and the tree
sources alike: :func:`recorded_sha256` and :data:`UNVERIFIED` are what a source says of a fetched
archive (:func:`auditor.source.opener.release_source`)."""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import tempfile

#: Environment variable that lets an archive whose index entry has no sha256 be used (set by
#: ``eagle-audit --allow-unverified``; read here so that worker processes see it too).
ALLOW_UNVERIFIED_ENV = "EAGLE_AUDIT_ALLOW_UNVERIFIED"

#: Suffix added to the label of a source read from an archive that could not be verified.
UNVERIFIED = "unverified: the package index publishes no sha256 for it"

_CHUNK = 1 << 20

#: A file changed less than this many seconds before it was looked at may change again within
#: the same timestamp tick unseen: a configuration read then is not stored.
RACY_SECONDS = 2.0


def stat_stamp(path: str) -> list[int] | None:
    """``[size, mtime_ns, ctime_ns, inode, device]`` of ``path`` (symbolic links followed), None
    when it does not exist or cannot be looked at."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def sha256_file(path: pathlib.Path) -> str:
    """Return the sha256 hex digest of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def has_digest(path: pathlib.Path, expected: str) -> bool:
    """True when the file at ``path`` has sha256 ``expected`` (hex).

    The file is hashed, unless this cache folder already recorded (with the ``results`` of
    :mod:`auditor.cache`) that ``path`` had that digest when it had exactly its present
    ``size, mtime_ns, ctime_ns, inode, device``. That is safe for the archives of the private
    cache folder: any write to a file, or a file replaced by another, changes its ctime (and a
    replacement its inode), and no program can set a ctime back, so a file whose stamp is
    unchanged holds the bytes that were hashed. A stamp is recorded only when the file had not
    changed in the two seconds before it was hashed (a write within the same timestamp tick
    would go unseen), and only after the digest matched.
    """
    import time

    from auditor.cache import Store
    from auditor.cache import key as cache_key

    stamp = stat_stamp(str(path))
    if stamp is None:
        return False
    store = Store("results")  # a small derived entry, pruned and cleared with the scan results
    k = cache_key("verified-digest", str(pathlib.Path(path).absolute()), expected)
    if store.get(k, list) == stamp:
        return True
    if sha256_file(path) != expected:
        return False
    if time.time_ns() - max(stamp[1], stamp[2]) > RACY_SECONDS * 1e9 and stat_stamp(str(path)) == stamp:
        store.put(k, stamp)
    return True


def _sidecar(path: pathlib.Path) -> pathlib.Path:
    """Return the ``<file>.sha256`` sidecar path of a cached archive."""
    return path.with_name(path.name + ".sha256")


def recorded_sha256(archive: pathlib.Path) -> str | None:
    """The sha256 of a cached release archive as recorded when :func:`fetch_release` verified
    it (its ``<file>.sha256`` sidecar), read without hashing the archive again.

    Args:
        archive: a path :func:`fetch_release` returned (any path is accepted).

    Returns:
        The hex digest, or None when no valid digest is recorded (an archive that was not
        fetched, was fetched unverified, or a damaged sidecar).
    """
    return read_sidecar(pathlib.Path(archive))


def read_sidecar(path: pathlib.Path) -> str | None:
    """Read the digest recorded in a sidecar (``sha256sum`` format), or None."""
    try:
        text = _sidecar(path).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    token = text.split()[0].lower() if text else ""
    return token if re.fullmatch(r"[0-9a-f]{64}", token) else None


def allow_unverified() -> bool:
    """True when the user opted in to archives the index publishes no sha256 for
    (``--allow-unverified``, i.e. ``EAGLE_AUDIT_ALLOW_UNVERIFIED=1``)."""
    return os.environ.get(ALLOW_UNVERIFIED_ENV, "") not in ("", "0")


def write_sidecar(path: pathlib.Path, digest: str) -> None:
    """Atomically write ``<digest>  <filename>`` next to ``path``; a cache folder that cannot be
    written only costs the offline re-check (nothing is raised, no temporary file is left)."""
    target = _sidecar(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(f"{digest}  {path.name}\n")
        os.replace(tmp, target)
    except OSError:
        unlink_quietly(pathlib.Path(tmp))
    except BaseException:
        unlink_quietly(pathlib.Path(tmp))
        raise


def unlink_quietly(path: pathlib.Path) -> None:
    """Delete a file, ignoring its absence (and a cache folder that cannot be written)."""
    try:
        path.unlink()
    except OSError:
        pass


def private_folder() -> pathlib.Path:
    """A temporary folder for this process (removed at exit): where a download goes when the
    cache folder cannot be written."""
    import atexit
    import shutil

    folder = pathlib.Path(tempfile.mkdtemp(prefix="eagle-audit-archive-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def drop_cached(path: pathlib.Path) -> None:
    """Delete a cached archive and its sidecar."""
    unlink_quietly(path)
    unlink_quietly(_sidecar(path))


def is_file(path: pathlib.Path) -> bool:
    """``path.is_file()``, False when the cache folder cannot even be looked into."""
    try:
        return path.is_file()
    except OSError:
        return False
