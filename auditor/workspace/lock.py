"""What holds a tree still while ``fix --apply`` or ``--revert`` writes it: the lock on the tree
(one writer at a time) and SIGINT/SIGTERM held back until the tree is whole again."""

from __future__ import annotations

import os
import stat
import time
from contextlib import contextmanager
from pathlib import Path

from auditor.workspace.folder import FixRefused

#: Lock file (beside the backup, see :func:`auditor.workspace.backup.backup_home`) held for the whole
#: of an apply or a revert.
LOCK_FILE = ".eagle-audit.lock"

#: Seconds to wait for another apply or revert of the same tree before refusing.
LOCK_TIMEOUT = 10.0


@contextmanager
def tree_lock(root: Path):
    """Hold ``root/.eagle-audit.lock`` (an exclusive ``flock``, the lock ``filelock`` takes) for
    the block. A lock file this call created is removed at the end, while still held; one that was
    there before is left as it was. A waiter that wakes on a lock file removed meanwhile takes the
    lock again on the file now at the path, so two holders never hold different files.

    Raises:
        FixRefused: the lock path is not a regular file, or another apply/revert holds the lock
            for longer than :data:`LOCK_TIMEOUT` seconds.
    """
    import fcntl

    path = root / LOCK_FILE
    deadline = time.monotonic() + LOCK_TIMEOUT
    while True:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise FixRefused(f"{path} is not a regular file (a symbolic link?); nothing was written")
        created = False
        try:
            if st is None:
                try:
                    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
                    created = True
                except FileExistsError:
                    continue  # another one created it first: lock that one
            else:
                try:
                    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue  # removed by its holder meanwhile
        except OSError as exc:
            raise FixRefused(f"cannot lock {path}: {exc.strerror or exc}; nothing was written") from None
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise FixRefused(f"another 'eagle-audit fix' is writing {root} (its lock {path} is held); "
                                         "nothing was written") from None
                    time.sleep(0.05)
            try:
                now = os.lstat(path)
            except FileNotFoundError:
                now = None
            mine = os.fstat(fd)
            same = now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)  # the file was removed (and maybe made again) while waiting: lock what is there now
    try:
        yield
    finally:
        if created:
            try:
                os.unlink(path)
            except OSError:
                pass
        os.close(fd)


class SignalsDeferred:
    """SIGINT and SIGTERM held back for the block (in the main thread, the only one Python runs
    signal handlers in): their handlers only record the signal, :attr:`pending` tells the block
    at the points where it can stop cleanly, and on exit the previous handlers come back and a
    recorded signal is delivered again, to them (Ctrl-C raises KeyboardInterrupt, a default
    SIGTERM ends the process, after the block has put everything back)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.previous: dict[int, object] = {}

    @property
    def pending(self) -> bool:
        """A signal arrived since the block began."""
        return bool(self.received)

    def _record(self, signum, frame) -> None:
        self.received.append(signum)

    def __enter__(self) -> "SignalsDeferred":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is None:  # installed outside Python: could not be put back
                    continue
                self.previous[sig] = signal.signal(sig, self._record)
        return self

    def __exit__(self, *exc) -> None:
        import signal

        for sig, old in self.previous.items():
            signal.signal(sig, old)
        if self.received:
            signal.raise_signal(self.received[0])
