"""Reading one file of a scanned tree or an environment from disk, bounded and without blocking.

The lowest layer of :mod:`auditor.source`: :mod:`auditor.source.sources` (trees) and
:mod:`auditor.source.startup` (an environment's start-up code) read through it.
"""

from __future__ import annotations

import os
import stat

from auditor.model.errors import SourceError

__all__ = ["MAX_FILE_BYTES", "UnreadableFile", "read_regular_file"]

#: Largest source file read (vLLM's largest module is about 0.3 MB). A bigger ``.py`` is not
#: read: it becomes a ``parse_errors`` entry and the scan goes on.
MAX_FILE_BYTES = 8 << 20


class UnreadableFile(SourceError, KeyError):
    """One file of the tree cannot be read: not a regular file (a FIFO, a device), larger than
    :data:`MAX_FILE_BYTES`, or refused by the operating system (permissions). Per-file trouble:
    the analysis records it as that file's ``parse_errors`` entry and goes on. It is a
    ``KeyError`` too, so code that treats a missing file as absent treats this one the same way.

    Attributes:
        path: the tree path (``vllm/x/y.py``).
        reason: what went wrong, one line.
    """

    def __init__(self, path: str, reason: str) -> None:
        """Record ``path`` and ``reason``; the message is ``"<path>: <reason>"``."""
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def read_regular_file(path: str | os.PathLike[str], relpath: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """Read a file from disk only if it is a regular file of at most ``limit`` bytes.

    The file is opened non-blocking and checked with ``fstat`` before any read, so a FIFO or a
    device never blocks the tool.

    Args:
        path: the file on disk (symbolic links are followed).
        relpath: its tree path, for messages.
        limit: the largest size read.

    Returns:
        The file's bytes.

    Raises:
        FileNotFoundError: the file does not exist.
        UnreadableFile: not a regular file, too large, or any other OS error (permissions).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnreadableFile(relpath, f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(relpath, "not a regular file (a FIFO, a device or a folder); not read")
        if st.st_size > limit:
            raise UnreadableFile(relpath, f"{st.st_size} bytes, larger than the {limit >> 20} MiB limit for a "
                                          "source file; not read")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise UnreadableFile(relpath, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnreadableFile(relpath, f"larger than the {limit >> 20} MiB limit for a source file; not read")
    return data
