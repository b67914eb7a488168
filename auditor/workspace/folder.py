"""The folders of a tree as the writes of ``fix --apply`` and ``--revert`` reach them: one component at
a time, never through a symbolic link, each file replaced atomically through its folder's descriptor.

Every folder on the way to a file is opened with ``O_NOFOLLOW``, and each file is written to a
temporary file in its folder and renamed over the target through that folder's descriptor
(:meth:`Dir.put`), after checking that its content still has the hash it was planned from.
Nothing here knows what a fix is: the callers (:mod:`auditor.workspace.transaction`) give paths
and bytes.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from auditor.model.errors import AuditError


class FixRefused(AuditError):
    """``--apply`` / ``--revert`` refused to write (nothing was written)."""


_TMP_SUFFIX = ".eagle-audit.tmp"
_MAX_FILE_BYTES = 64 << 20


class FileChanged(FixRefused):
    """A file no longer has the content the patch (or the revert) was planned from."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path


def sha256_hex(data: bytes) -> str:
    """The sha256 digest of ``data``, as 64 lowercase hex digits (how a backup's manifest names a
    file's content)."""
    return hashlib.sha256(data).hexdigest()


def tree_parts(rel: object) -> list[str]:
    """The components of a tree path ``<engine package>/**/*.py`` (``vllm/``, ``sglang/``; as
    listed by a source or a manifest).

    Raises:
        FixRefused: anything else (absolute, ``..``, ``.``, empty components, backslashes, NUL).
    """
    from auditor.engines.catalog import ENGINES

    packages = tuple(f"{e.package}/" for e in ENGINES.values())
    ok = isinstance(rel, str) and "\\" not in rel and "\0" not in rel and rel.startswith(packages) \
        and rel.endswith(".py") and len(rel) <= 1024
    parts = rel.split("/") if ok else []
    if not ok or any(p in ("", ".", "..") for p in parts):
        shown = repr(rel)[:120]
        where = " or ".join(f"{p}**/*.py" for p in packages)
        raise FixRefused(f"{shown} is not a path inside the tree ({where}); nothing was written")
    return parts


@dataclass
class FileState:
    """What is at a path now: a regular ``file`` or a ``symlink`` (with its ``link`` text),
    the bytes read (through the link for a symlink; None when it dangles) and the permission bits."""

    kind: str
    data: bytes | None
    mode: int
    link: str | None = None


class Dir:
    """An open folder of the tree, reached from the root one component at a time without following
    symbolic links. Reads and writes go through its descriptor, so a folder swapped for a link
    midway can never redirect a write outside the tree."""

    _FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW

    def __init__(self, fd: int, label: str):
        self.fd = fd
        self.label = label

    @classmethod
    def open_root(cls, root: Path) -> "Dir":
        """The tree root itself (the folder that contains ``vllm/``)."""
        try:
            return cls(os.open(root, os.O_RDONLY | os.O_DIRECTORY), str(root))
        except OSError as exc:
            raise FixRefused(f"cannot open {root}: {exc.strerror or exc}; nothing was written") from None

    def close(self) -> None:
        """Close the folder's descriptor (a second call does nothing)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "Dir":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def sub(self, name: str, create: bool = False, exclusive: bool = False) -> "Dir":
        """The sub-folder ``name`` (created with umask permissions when ``create``).

        Raises:
            FixRefused: ``name`` is a symbolic link or not a folder (or ``exclusive`` and it exists).
        """
        label = f"{self.label}/{name}"
        try:
            if create:
                try:
                    os.mkdir(name, 0o777, dir_fd=self.fd)
                except FileExistsError:
                    if exclusive:
                        raise
            return Dir(os.open(name, self._FLAGS, dir_fd=self.fd), label)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST):
                raise FixRefused(f"{label} is a symbolic link or not a folder; refusing to write through it") from None
            raise

    def walk_to(self, parts: list[str], create: bool = False) -> "Dir":
        """The folder holding ``parts[-1]`` (each of ``parts[:-1]`` opened without following links)."""
        cur = Dir(os.dup(self.fd), self.label)
        for name in parts[:-1]:
            try:
                nxt = cur.sub(name, create=create)
            finally:
                cur.close()
            cur = nxt
        return cur

    def lstat(self, name: str) -> os.stat_result | None:
        """The ``lstat`` of ``name`` in this folder (a link is not followed); None when nothing is there."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def read(self, name: str, follow: bool = False) -> bytes:
        """The bytes of the regular file ``name`` (a symlink is refused unless ``follow``).

        Raises:
            FixRefused: not a regular file, or larger than any source file.
            OSError: missing or unreadable.
        """
        flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
        try:
            fd = os.open(name, flags, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise FixRefused(f"{self.label}/{name} is a symbolic link; refusing to use it") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise FixRefused(f"{self.label}/{name} is not a regular file; refusing to use it")
            if st.st_size > _MAX_FILE_BYTES:
                raise FixRefused(f"{self.label}/{name} is larger than {_MAX_FILE_BYTES >> 20} MiB; refusing to use it")
            with os.fdopen(fd, "rb", closefd=False) as fh:
                return fh.read(_MAX_FILE_BYTES + 1)
        finally:
            os.close(fd)

    def state(self, name: str) -> FileState | None:
        """What is at ``name`` now (None when nothing is).

        Raises:
            FixRefused: something other than a regular file or a symbolic link (a folder, a FIFO).
        """
        st = self.lstat(name)
        if st is None:
            return None
        if stat.S_ISLNK(st.st_mode):
            link = os.readlink(name, dir_fd=self.fd)
            try:
                data = self.read(name, follow=True)
                mode = stat.S_IMODE(os.stat(name, dir_fd=self.fd).st_mode)
            except (OSError, FixRefused):
                data, mode = None, 0o666 & ~current_umask()
            return FileState("symlink", data, mode, link)
        if not stat.S_ISREG(st.st_mode):
            raise FixRefused(f"{self.label}/{name} is not a regular file; refusing to write it")
        return FileState("file", self.read(name), stat.S_IMODE(st.st_mode))

    def put(self, name: str, data: bytes | None = None, *, link: str | None = None, mode: int | None = None,
            expect: set[str] | None = None, shown: str | None = None) -> None:
        """Replace ``name`` atomically with ``data`` (or a symbolic link to ``link``).

        The new file is written next to it under a temporary name (permissions: ``mode``, else
        those the umask gives), then renamed over ``name``. With ``expect``, the current content
        must have one of those sha256 digests right before the rename, else nothing changes and
        :class:`FileChanged` names ``shown``. The temporary file never survives a failure.
        """
        tmp = f".{name}.{secrets.token_hex(6)}{_TMP_SUFFIX}"
        try:
            if link is not None:
                os.symlink(link, tmp, dir_fd=self.fd)
            else:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666, dir_fd=self.fd)
                try:
                    if mode is not None:
                        os.fchmod(fd, mode)
                    with os.fdopen(fd, "wb", closefd=False) as fh:
                        fh.write(data or b"")
                        fh.flush()
                        os.fsync(fh.fileno())
                finally:
                    os.close(fd)
            if expect is not None:
                now = self.state(name)
                if now is None or now.data is None or sha256_hex(now.data) not in expect:
                    who = shown or f"{self.label}/{name}"
                    raise FileChanged(who, f"{who} changed while eagle-audit was writing it")
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=self.fd)
            except OSError:
                pass
            raise

    def clean_temps(self, name: str) -> None:
        """Remove temporary files left beside ``name`` by an interrupted write."""
        for entry in os.listdir(self.fd):
            if entry.startswith(f".{name}.") and entry.endswith(_TMP_SUFFIX):
                try:
                    os.unlink(entry, dir_fd=self.fd)
                except OSError:
                    pass

    def sync(self) -> None:
        """``fsync`` the folder itself, so that its renames are on disk (a failure is ignored)."""
        try:
            os.fsync(self.fd)
        except OSError:
            pass


def current_umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
