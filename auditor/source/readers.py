"""Binary streams wrapped for reading an archive in place: one that reports the bytes read (a
progress bar's advance), one that refuses to read past a limit (a decompression bomb)."""

from __future__ import annotations

import io
from typing import IO, Callable

class CountingReader(io.RawIOBase):
    """A read-only file wrapper that reports how many bytes were consumed.

    Args:
        raw: the underlying binary file.
        callback: called with the number of bytes of every successful read.
    """

    def __init__(self, raw: IO[bytes], callback: Callable[[int], object]) -> None:
        """Wrap ``raw``; see the class docstring for the arguments."""
        super().__init__()
        self._raw = raw
        self._callback = callback

    def readable(self) -> bool:
        """Return True: this stream can be read."""
        return True

    def readinto(self, buffer) -> int:
        """Fill ``buffer`` from the wrapped file and report the byte count.

        Args:
            buffer: a writable buffer.

        Returns:
            The number of bytes read (0 at end of file).
        """
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        if n:
            self._callback(n)
        return n


class LimitedReader(io.RawIOBase):
    """A read-only stream that raises ``error`` once more than ``limit`` bytes were read from
    ``raw`` (the decompressed data of an archive: a decompression bomb stops there)."""

    def __init__(self, raw: IO[bytes], limit: int, error: Exception) -> None:
        """Wrap ``raw``; see the class docstring."""
        super().__init__()
        self._raw = raw
        self._left = limit
        self._error = error
        self.consumed = 0

    def readable(self) -> bool:
        """Return True: this stream can be read."""
        return True

    def read(self, size: int = -1) -> bytes:
        """Read up to ``size`` bytes (everything left when negative), counting them."""
        data = self._raw.read(size if size is not None and size >= 0 else self._left + 1)
        self._left -= len(data)
        self.consumed += len(data)
        if self._left < 0:
            raise self._error
        return data

    def readinto(self, buffer) -> int:
        """Fill ``buffer`` (see :meth:`read`)."""
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
