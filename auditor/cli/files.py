"""Output paths: refused before any work when they cannot be written, and the report format an
``-o`` suffix names."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

from auditor.cli.console import fail
from auditor.render.registry import SUFFIX_FORMATS


def stdout_dash(value: Optional[Path]) -> Optional[Path]:
    """``-o -``: standard output (no file named ``-``)."""
    return None if value is not None and str(value) == "-" else value


def report_format(fmt: Optional[Enum], output: Optional[Path], choices: type[Enum]) -> Enum:
    """The format of a report, the same way on every command: ``--format``, else the one the
    ``-o`` suffix names (:data:`SUFFIX_FORMATS`), else ``table``.

    Args:
        fmt: the ``--format`` given (None: absent).
        output: the ``-o`` file (None: stdout).
        choices: the command's format enum (its values are the formats it writes).

    Returns:
        The member of ``choices`` to write.

    Refused (exit 2, one line, before any work): a suffix naming a format the command does not
    write, a ``--format`` that contradicts the suffix, and without ``--format`` a suffix that
    names no format (``-o report``, ``-o r.junit``).
    """
    known = [c.value for c in choices]
    if output is None:
        return fmt if fmt is not None else choices("table")
    suffix = output.suffix.lower()
    by_suffix = SUFFIX_FORMATS.get(suffix)
    if by_suffix is not None and by_suffix not in known:
        fail(f"-o {output.name} names {by_suffix}, which this command does not write (--format {'|'.join(known)})")
    if fmt is None:
        if by_suffix is None:
            names = ", ".join(s for s, f in SUFFIX_FORMATS.items() if f in known and s != ".markdown")
            fail(f"-o {output.name}: the suffix names no format; use {names} or give --format {'|'.join(known)}")
        return choices(by_suffix)
    if by_suffix is not None and fmt.value != by_suffix:
        fail(f"--format {fmt.value} contradicts -o {output.name} (a {by_suffix} file name)")
    return fmt


def check_output(path: Optional[Path], label: str, force: bool, append: bool = False,
                 make_folders: bool = False) -> None:
    """Refuse, before any work, an output path that cannot be written (exit 2, one line): a
    folder, an existing file without ``--force`` (unless ``append``), a folder on the way that is
    a file, a parent folder that does not exist (unless ``make_folders``: ``fix --out-dir``
    creates its folder), or a folder where no file can be created (tested by creating and
    removing one)."""
    if path is None:
        return
    import os
    import stat
    import tempfile

    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as exc:
        fail(f"{label} {path}: {exc.strerror or exc}")
    if st is not None and stat.S_ISDIR(st.st_mode):
        fail(f"{label} {path} is a folder; name a file")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return  # a FIFO or a device such as /dev/stdout: written directly
    if st is not None and not append and not force:
        fail(f"{label} {path} exists; pass --force to overwrite it")
    if st is not None and append:
        try:
            with open(path, "ab"):
                pass
        except OSError as exc:
            fail(f"{label} {path}: cannot write: {exc.strerror or exc}")
        return
    folder = path.parent
    while True:  # the nearest folder that exists: the missing ones will be created in it
        try:
            fst = os.stat(folder)
        except (FileNotFoundError, NotADirectoryError):
            if folder == folder.parent:
                fail(f"{label} {path}: cannot be created")
            if not make_folders and folder == path.parent and _is_missing(folder):
                fail(f"{label} {path}: cannot be created: the folder {folder} does not exist")
            folder = folder.parent
            continue
        except OSError as exc:
            fail(f"{label} {path}: {exc.strerror or exc}")
        break
    if not stat.S_ISDIR(fst.st_mode):
        fail(f"{label} {path}: cannot be created ({folder} is not a folder)")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".eagle-audit-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        fail(f"{label} {path}: cannot write in {folder}: {exc.strerror or exc}")


def check_folder(folder: Path, label: str) -> None:
    """Refuse, before any work, a folder to create whose way goes through a file (exit 2, one
    line: ``--out-dir a/b: cannot be created (a is not a folder)``)."""
    import os
    import stat

    for up in (folder, *folder.parents):
        try:
            st = os.stat(up)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            fail(f"{label} {folder}: {exc.strerror or exc}")
        if not stat.S_ISDIR(st.st_mode):
            fail(f"{label} {folder}: cannot be created ({up} is not a folder)")
        return


def _is_missing(folder: Path) -> bool:
    """True when nothing exists at ``folder`` and every folder above it that exists is a folder
    (a path through a file is reported as such)."""
    import os
    import stat

    for up in folder.parents:
        try:
            return stat.S_ISDIR(os.stat(up).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return False
    return True
