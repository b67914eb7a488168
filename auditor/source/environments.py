"""How a Python environment is laid out on disk, looked at by name only (nothing is run): its
``pyvenv.cfg``, its interpreters and its package folders (``site-packages``), and a file given as a
tree that is neither a tree nor an archive (an interpreter, a file inside a checkout)."""

from __future__ import annotations

import os
import pathlib
import re
import stat

from auditor.model.errors import SourceError
from auditor.source.files import UnreadableFile, read_regular_file
from auditor.source.sources import PACKAGES, is_package_folder

# ------------------------------------------------------------------- other environments

#: Environment variables that name the environment the user activated, in the order they are
#: honoured (a virtual environment, else a conda environment).
ACTIVE_ENV_VARIABLES = ("VIRTUAL_ENV", "CONDA_PREFIX")


def _pyvenv_cfg(prefix: pathlib.Path) -> dict[str, str] | None:
    """The ``key = value`` lines of ``prefix/pyvenv.cfg`` (keys lower-cased), or None when the
    file is absent or cannot be read (a FIFO or an oversized file is never read)."""
    try:
        data = read_regular_file(prefix / "pyvenv.cfg", "pyvenv.cfg", limit=64 << 10)
    except (OSError, UnreadableFile):
        return None
    out = {}
    for line in data.decode("utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def _python_version_of(cfg: dict[str, str] | None, interpreter: pathlib.Path | None) -> str | None:
    """``X.Y`` of an environment: its ``pyvenv.cfg`` ``version_info``/``version``, else the name
    of the interpreter the path resolves to (``python3.11``); None when neither says."""
    for key in ("version_info", "version"):
        m = re.match(r"(\d+)\.(\d+)", (cfg or {}).get(key, ""))
        if m:
            return f"{m.group(1)}.{m.group(2)}"
    if interpreter is not None:
        try:
            name = interpreter.resolve().name
        except (OSError, RuntimeError):  # RuntimeError: a symbolic-link loop (Python < 3.13)
            name = interpreter.name
        m = re.fullmatch(r"python(\d+)\.(\d+)t?(?:\.exe)?", name)
        if m:
            return f"{m.group(1)}.{m.group(2)}"
    return None


def _site_folders(prefix: pathlib.Path, version: str | None) -> list[pathlib.Path]:
    """The package folders of the environment at ``prefix`` that exist, in import order:
    ``lib/pythonX.Y/site-packages`` (and ``lib64``, Debian's ``dist-packages``), or
    ``Lib/site-packages`` on Windows. With no known version, every ``lib/python3.*`` is tried."""
    libs = [f"python{version}"] if version else None
    out: list[pathlib.Path] = []
    for lib in ("lib", "lib64", "local/lib"):
        base = prefix / lib
        names = libs
        if names is None:
            try:
                names = sorted((p.name for p in base.iterdir() if re.fullmatch(r"python3\.\d+t?", p.name)),
                               reverse=True)
            except (OSError, ValueError):  # ValueError: a NUL in a path read from pyvenv.cfg
                continue
        for name in names:
            for leaf in ("site-packages", "dist-packages"):
                out.append(base / name / leaf)
    out.append(prefix / "Lib" / "site-packages")
    seen: list[pathlib.Path] = []
    for folder in out:
        try:
            if folder.is_dir() and folder.resolve() not in [f.resolve() for f in seen]:
                seen.append(folder)
        except (OSError, RuntimeError, ValueError):  # RuntimeError: a symbolic-link loop (Python < 3.13)
            continue
    return seen


def _has_separator(text: str) -> bool:
    """True when ``text`` is written as a path (it holds a folder separator)."""
    return "/" in text or os.sep in text or (os.altsep is not None and os.altsep in text)


def on_path(command: str) -> pathlib.Path | None:
    """The executable ``command`` names on ``PATH`` (``--python python3``), as the shell would
    find it (:func:`shutil.which`; nothing is run), or None when ``command`` is written as a path
    or is not found there."""
    import shutil

    if not command or _has_separator(command) or "\0" in command:
        return None
    found = shutil.which(command)
    return pathlib.Path(found) if found else None


#: File names of Python interpreters (``python``, ``python3.11``, ``python3.13t``, ``pypy3``).
_INTERPRETER_NAME = re.compile(r"(?:python|pypy)(?:\d+(?:\.\d+)*)?t?(?:\.exe)?", re.IGNORECASE)


def is_interpreter(path: pathlib.Path) -> bool:
    """True when the file ``path`` is named like a Python interpreter, or sits in the ``bin/``
    (``Scripts/``) folder of an environment (a ``pyvenv.cfg`` or ``conda-meta/`` above it). Only
    names are looked at: the file is never read nor run."""
    if _INTERPRETER_NAME.fullmatch(path.name):
        return True
    try:
        return path.parent.name in ("bin", "Scripts") and is_environment(path.parent.parent)
    except (OSError, ValueError):
        return False


def is_environment(folder: pathlib.Path) -> bool:
    """True when ``folder`` is laid out as a Python environment: a venv (``pyvenv.cfg``), a conda
    prefix (``conda-meta/``), or a prefix with ``bin/python*`` (``Scripts/python.exe``) and a
    ``lib/python3.*`` folder. Only names are looked at."""
    try:
        if (folder / "pyvenv.cfg").is_file() or (folder / "conda-meta").is_dir():
            return True
        has_python = any(_INTERPRETER_NAME.fullmatch(p.name) for sub in ("bin", "Scripts") if (folder / sub).is_dir()
                         for p in (folder / sub).iterdir())
        return has_python and bool(_site_folders(folder, None))
    except (OSError, RuntimeError, ValueError):
        return False


#: Magic bytes of the archive formats read in place (zip, gzip, bzip2, xz), and the suffixes
#: that name an archive.
_ARCHIVE_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
_ARCHIVE_SUFFIXES = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


def not_a_tree_or_archive(path: pathlib.Path) -> str | None:
    """Why the regular file ``path`` is neither an engine tree nor a release archive, or None when
    it may be an archive (an archive's suffix or magic bytes: a corrupt one is then reported by
    :class:`ArchiveSource` as such). Reads at most its first 512 bytes, never runs it.

    Returns:
        A one-line message for the user: an interpreter is pointed at ``--python``, a file
        inside a tree (``pyproject.toml`` of a checkout) at its folder.
    """
    import shlex

    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None  # a FIFO or device: ArchiveSource says it is not a file
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError:
        return None  # ArchiveSource reports the read error
    if head.startswith(_ARCHIVE_MAGIC) or head[257:262] == b"ustar":
        return None
    if path.name.lower().endswith(_ARCHIVE_SUFFIXES):
        return None
    if is_interpreter(path):
        return (f"{path} is a Python interpreter, not an engine tree or a release archive: to audit the vllm (or "
                f"sglang) installed in its environment, use --python {shlex.quote(str(path))}")
    hint = ""
    parent = path.parent if path.parent != pathlib.Path("") else pathlib.Path(".")
    try:
        if any(is_package_folder(parent / pkg, pkg) or (parent.resolve().name == pkg
                                                                and is_package_folder(parent, pkg))
               for pkg in PACKAGES):
            hint = f"; to audit the tree it belongs to, give its folder: {shlex.quote(str(parent))}"
    except (OSError, ValueError):
        pass
    return (f"{path} is neither an engine tree nor a release archive: give a vllm/ (or sglang/) package folder, "
            f"a source checkout, or a release archive (.tar.gz, .whl){hint}")


def environment_site_packages(python: str | os.PathLike[str]) -> list[pathlib.Path]:
    """The package folders (``site-packages``) of a Python environment, derived from its layout
    alone: the interpreter is never run, so nothing of that environment (``sitecustomize``,
    ``.pth`` files, the packages themselves) can execute.

    ``python`` is an interpreter (``.venv/bin/python``, ``/usr/bin/python3``,
    ``env\\Scripts\\python.exe``) or an environment folder (``.venv``, a conda prefix). The
    environment's prefix is the folder above ``bin/`` (``Scripts/``) as the path is written (a
    venv's ``bin/python`` is a link to its base interpreter, so the link is not followed first);
    when that prefix has no ``pyvenv.cfg`` and no package folder, the link is followed. Its Python
    version comes from ``pyvenv.cfg`` or the interpreter's file name. A venv created with
    ``include-system-site-packages = true`` also gets its base's folders (``home`` in
    ``pyvenv.cfg``), after its own. The user site (``~/.local``) is not included.

    Returns:
        The existing package folders, in import order.

    Raises:
        SourceError: ``python`` does not exist, or no package folder is found for it.
    """
    given = pathlib.Path(python).expanduser()
    try:
        if not given.exists():
            found = on_path(str(python))
            if found is None:
                raise SourceError(f"--python {python}: no such interpreter or environment folder"
                                  + ("" if _has_separator(str(python)) else ", and no such command on PATH"))
            given = found
        is_dir = given.is_dir()
    except OSError as exc:
        raise SourceError(f"--python {python}: {exc.strerror or exc}") from None
    absolute = pathlib.Path(os.path.abspath(given))
    interpreter = None if is_dir else absolute

    def prefix_of(exe: pathlib.Path) -> pathlib.Path:
        return exe.parent.parent if exe.parent.name in ("bin", "Scripts") else exe.parent

    prefixes = [absolute] if is_dir else [prefix_of(absolute)]
    if interpreter is not None:
        try:
            real = prefix_of(interpreter.resolve())
        except (OSError, RuntimeError):  # RuntimeError: a symbolic-link loop (Python < 3.13)
            real = prefixes[0]
        if real != prefixes[0]:
            prefixes.append(real)
    for prefix in prefixes:
        cfg = _pyvenv_cfg(prefix)
        version = _python_version_of(cfg, interpreter)
        folders = _site_folders(prefix, version)
        if cfg is None and not folders:
            continue  # not an environment: try where the interpreter's link leads
        if cfg is not None and cfg.get("include-system-site-packages", "").lower() == "true" \
                and cfg.get("home") and "\0" not in cfg["home"]:
            base = pathlib.Path(cfg["home"])
            folders += [f for f in _site_folders(prefix_of(base / "python"), version) if f not in folders]
        if folders:
            return folders
        break
    raise SourceError(f"--python {python}: no site-packages folder found in {prefixes[0]} "
                      "(expected lib/pythonX.Y/site-packages)")


def same_environment(prefix: str) -> bool:
    """True when ``prefix`` is the environment this process runs in."""
    import sys

    try:
        return pathlib.Path(prefix).resolve() == pathlib.Path(sys.prefix).resolve()
    except (OSError, RuntimeError, ValueError):  # RuntimeError: a symbolic-link loop (Python < 3.13)
        return False


def find_in_folders(folders: list[pathlib.Path], packages: tuple[str, ...]) -> tuple[pathlib.Path, str] | None:
    """The first ``<folder>/<package>`` that is a package folder, for each package in order."""
    for pkg in packages:
        for folder in folders:
            if is_package_folder(folder / pkg, pkg):
                return folder / pkg, pkg
    return None
