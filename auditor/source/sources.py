"""Read-only access to a vLLM source tree, wherever it lives.

One interface, :class:`TreeSource`, four ways in:

* :class:`FolderSource` -- a folder on disk (``site-packages/vllm``, a git checkout, an
  extracted sdist);
* :class:`ArchiveSource` -- a release archive read in place (``vllm-X.tar.gz`` sdist or
  ``vllm-X-*.whl`` wheel), never extracted to disk;
* :class:`InstalledSource` -- the vLLM installed in the running environment, located
  without importing it;
* :func:`open_source` -- picks one of the above from command-line style arguments
  (``--vllm-version`` fetches the release sdist, see :mod:`auditor.source.fetch`).

Nothing here imports or executes code from the scanned tree: files are only read as
bytes, and the version is parsed statically with :mod:`ast`.

Paths handed out and accepted are POSIX paths relative to the folder that *contains*
the ``vllm/`` package, e.g. ``"vllm/config/speculative.py"``.
"""

from __future__ import annotations

import abc
import ast
import bz2
import email.parser
import gzip
import hashlib
import importlib.metadata
import importlib.util
import io
import lzma
import os
import pathlib
import re
import stat
import tarfile
import zipfile
import zlib
from typing import IO, Callable

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from auditor.model.errors import SourceError
from auditor.source.files import MAX_FILE_BYTES, UnreadableFile, read_regular_file
from auditor.source.progress import progress_bar
from auditor.source.startup import environment_startup_code

__all__ = [
    "TreeSource",
    "FolderSource",
    "ArchiveSource",
    "InstalledSource",
    "UnreadableFile",
    "open_source",
    "library_source",
    "installed_source",
    "environment_site_packages",
    "environment_startup_code",
    "read_regular_file",
    "MAX_FILE_BYTES",
    "MAX_ARCHIVE_BYTES",
    "MAX_PACKAGE_BYTES",
    "MAX_MEMBERS",
]

_PACKAGE = "vllm"
#: The engine packages a tree can hold, in the order they are looked for when a folder or an
#: archive holds several (vLLM first, so that a tree that always read as vLLM still does), each
#: with the sub-folder that marks it when its ``__init__.py`` is absent.
PACKAGES: dict[str, str] = {"vllm": "model_executor", "sglang": "srt"}
#: Library packages an archive may be read for (never audited as trees: their classes are read,
#: e.g. ``transformers``' HF config classes), each with the sub-folder that marks it.
LIBRARIES: dict[str, str] = {"transformers": "models"}
_MARKERS = {**PACKAGES, **LIBRARIES}
#: How each engine is named in messages.
_ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
_VERSION_NAMES = ("__version__", "version")
_DRAIN_CHUNK = 1 << 20

#: Most bytes an archive may decompress to, all members together (vLLM 0.33.0's sdist: 130 MB).
MAX_ARCHIVE_BYTES = 2 << 30

#: Most bytes of ``vllm/**/*.py`` kept in memory from an archive (vLLM 0.33.0: 41 MB).
MAX_PACKAGE_BYTES = 512 << 20

#: Most members an archive may hold (vLLM 0.33.0's sdist: 9 629).
MAX_MEMBERS = 100_000

#: At most this many folders are walked through symbolic links inside a tree (links to links to
#: siblings could otherwise multiply a listing without end).
MAX_LINKED_FOLDERS = 2_000

#: A compiled module's file name: an extension (``llama.so``, ``llama.abi3.so``,
#: ``llama.cpython-311-x86_64-linux-gnu.so``, ``llama.cp311-win_amd64.pyd``), whatever interpreter
#: its tag names, or sourceless bytecode (``llama.pyc``, outside ``__pycache__``).
_COMPILED_MODULE = re.compile(r"^(?P<stem>[A-Za-z_][A-Za-z0-9_]*)(?:(?:\.[^./]+)?\.(?P<ext>so|pyd)|\.(?P<kind>pyc))$")


def _human(n: int) -> str:
    """``2 GiB``, ``8 MiB``, ``1000 bytes``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


# --------------------------------------------------------------------------- helpers


def check_package(package: str | None) -> str | None:
    """Validate a requested engine package name.

    Args:
        package: ``"vllm"``, ``"sglang"`` or None (detect).

    Returns:
        ``package`` unchanged.

    Raises:
        SourceError: for any other name.
    """
    if package is not None and package not in PACKAGES:
        raise SourceError(f"unknown engine {package!r} (one of {', '.join(PACKAGES)})")
    return package


def _valid_relpath(relpath: object, package: str = _PACKAGE) -> bool:
    """Tell whether ``relpath`` is a well-formed ``<package>/**/*.py`` POSIX path.

    Args:
        relpath: the candidate path.
        package: the tree's package (``vllm`` or ``sglang``).

    Returns:
        True for a relative, normalised path under ``<package>/`` ending in ``.py``; False for
        anything else (absolute paths, ``..`` components, backslashes, other files).
    """
    if not isinstance(relpath, str) or "\\" in relpath or "\0" in relpath:
        return False
    if not relpath.startswith(package + "/") or not relpath.endswith(".py"):
        return False
    parts = relpath.split("/")
    return all(part not in ("", ".", "..") for part in parts)


def _version_from_python(source: bytes) -> str | None:
    """Read ``__version__`` from a setuptools-scm style ``_version.py`` without running it.

    Recognises ``__version__ = version = '0.16.0'``, ``__version__ = '0.16.0'``,
    ``__version__: str = '0.16.0'`` and ``version = '0.16.0'`` (``__version__`` wins).

    Args:
        source: the file's bytes.

    Returns:
        The version string, or None when the file does not parse or holds no string
        literal assigned to one of those names.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        value = node.value
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in _VERSION_NAMES:
                found.setdefault(target.id, value.value.strip())
    for name in _VERSION_NAMES:
        if found.get(name):
            return found[name]
    return None


def _version_from_metadata(data: bytes, package: str = _PACKAGE) -> str | None:
    """Read the ``Version:`` header of a ``PKG-INFO`` / ``METADATA`` file.

    Args:
        data: the file's bytes (RFC 822 style headers).

    Returns:
        The version, or None when absent or when the ``Name:`` header names a
        distribution other than ``package`` (vllm by default).
    """
    text = data.decode("utf-8", errors="replace")
    headers = email.parser.HeaderParser().parsestr(text, headersonly=True)
    name = headers.get("Name")
    if name and canonicalize_name(name.strip()) != package:
        return None
    version = headers.get("Version")
    return version.strip() if version and version.strip() else None


def _best_dist_info(names: list[str], package: str = _PACKAGE) -> str | None:
    """Pick the ``<package>-*.dist-info`` / ``*.egg-info`` folder name with the highest version.

    Args:
        names: folder names found next to the package folder.
        package: the distribution (``vllm`` or ``sglang``).

    Returns:
        The chosen folder name, or None when none belongs to ``package``.
    """
    best: tuple[Version, str] | None = None
    for name in names:
        match = re.fullmatch(rf"(?i){re.escape(package)}(?:-([^-]+))?\.(?:dist|egg)-info", name)
        if not match:
            continue
        try:
            key = Version(match.group(1) or "0")
        except InvalidVersion:
            key = Version("0")
        if best is None or key > best[0]:
            best = (key, name)
    return best[1] if best else None


class _CountingReader(io.RawIOBase):
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


class _LimitedReader(io.RawIOBase):
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


# ------------------------------------------------------------------------- interface


class TreeSource(abc.ABC):
    """Read-only view of one vLLM source tree.

    Attributes:
        label: human description used in messages, e.g. ``"vllm-0.16.0.tar.gz"`` or a
            folder path.

    Paths are POSIX paths relative to the folder that contains ``vllm/``. Only
    ``vllm/**/*.py`` files are exposed, whatever the kind of source, so an analysis sees
    the same tree from a folder, an sdist or a wheel. Sources can be used as context
    managers; :meth:`close` releases any open archive.
    """

    label: str
    #: the engine package the tree holds: ``"vllm"`` or ``"sglang"`` (see :data:`PACKAGES`)
    package: str = _PACKAGE

    def __init__(self, label: str) -> None:
        """Initialise the shared caches.

        Args:
            label: the human description of this source.
        """
        self.label = label
        self._fingerprints: dict[str, str] = {}
        self._version_cache: tuple[str | None] | None = None
        #: Per-file (or per-folder) trouble found while listing the tree: tree path → one-line
        #: reason (a folder that cannot be listed, a ``.py`` that is not a regular file or is too
        #: large). The analysis reports these as ``parse_errors``.
        self.problems: dict[str, str] = {}

    # -- abstract -----------------------------------------------------------------

    @abc.abstractmethod
    def files(self) -> list[str]:
        """List the tree's Python files.

        Returns:
            Sorted POSIX paths of every ``*.py`` file under ``vllm/``, relative to the
            folder containing ``vllm/`` (e.g. ``"vllm/config/speculative.py"``).

        Raises:
            SourceError: when the underlying archive turns out to be unreadable.
        """

    @abc.abstractmethod
    def _read(self, relpath: str) -> bytes:
        """Return the bytes of a validated path; raise KeyError when absent."""

    @abc.abstractmethod
    def _metadata_version(self) -> str | None:
        """Return the version from PKG-INFO / dist-info METADATA, or None."""

    def _metadata_bytes(self) -> list[bytes]:
        """The tree's packaging metadata files (``PKG-INFO`` / ``METADATA``) and requirement
        files, for :meth:`requirement`; none by default."""
        return []

    # -- concrete -----------------------------------------------------------------

    def requirement(self, project: str) -> str | None:
        """The version specifier the tree itself requires of ``project`` (``"<5,>=4.56.0"`` for
        ``transformers`` in vLLM 0.16.0), from its ``Requires-Dist`` metadata or, in a source
        checkout, ``requirements/common.txt``; None when the tree does not say. Never raises."""
        from packaging.requirements import InvalidRequirement, Requirement

        want = canonicalize_name(project)
        for data in self._metadata_bytes():
            text = data.decode("utf-8", errors="replace")
            for line in text.splitlines():
                line = line.split("#", 1)[0].strip()
                if line.lower().startswith("requires-dist:"):
                    line = line.split(":", 1)[1].strip()
                if not line or line.startswith("-"):
                    continue
                try:
                    req = Requirement(line)
                except InvalidRequirement:
                    continue
                if canonicalize_name(req.name) == want and (req.marker is None or "extra" not in str(req.marker)):
                    return str(req.specifier)
        return None

    def read(self, relpath: str) -> bytes:
        """Return the bytes of one file of the tree.

        Args:
            relpath: a path as listed by :meth:`files`.

        Returns:
            The file's content.

        Raises:
            KeyError: when the file does not exist in the tree (or ``relpath`` is not a
                ``vllm/**/*.py`` path).
            SourceError: when the archive holding the file is corrupt.
        """
        if not _valid_relpath(relpath, self.package):
            raise KeyError(relpath)
        return self._read(relpath)

    def exists(self, relpath: str) -> bool:
        """Tell whether a file exists in the tree.

        Args:
            relpath: a POSIX path like ``"vllm/config/speculative.py"``.

        Returns:
            True when :meth:`read` would return it, else False.
        """
        return _valid_relpath(relpath, self.package) and self._exists(relpath)

    def _exists(self, relpath: str) -> bool:
        """Default existence test: membership in :meth:`files`."""
        return relpath in self._file_set()

    def _file_set(self) -> frozenset[str]:
        """Memoised set view of :meth:`files`."""
        cached = getattr(self, "_files_set_cache", None)
        if cached is None:
            cached = frozenset(self.files())
            self._files_set_cache = cached
        return cached

    def version(self) -> str | None:
        """Return the tree's vLLM version, read from the tree itself (never imported).

        Looks at ``vllm/_version.py`` first (parsed with :mod:`ast`), then at the
        ``Version:`` line of ``PKG-INFO`` (sdist root) or ``vllm-*.dist-info/METADATA``
        (wheel, site-packages).

        Returns:
            The version string (e.g. ``"0.16.0"``), or None when the tree does not say.
        """
        if self._version_cache is None:
            found = None
            version_file = f"{self.package}/_version.py"
            if self.exists(version_file):
                try:
                    found = _version_from_python(self.read(version_file))
                except KeyError:  # UnreadableFile: the version then comes from the metadata
                    found = None
            if not found:
                found = self._metadata_version()
            self._version_cache = (found,)
        return self._version_cache[0]

    def root(self) -> pathlib.Path | None:
        """Return the real folder that contains ``vllm/``.

        Returns:
            The folder for folder-based sources; None for archives.
        """
        return None

    def fingerprint(self, relpath: str) -> str:
        """Return the sha256 of one file (memoised).

        Args:
            relpath: a path as listed by :meth:`files`.

        Returns:
            The lowercase hex sha256 digest of the file's bytes.

        Raises:
            KeyError: when the file does not exist in the tree.
        """
        digest = self._fingerprints.get(relpath)
        if digest is None:
            digest = hashlib.sha256(self.read(relpath)).hexdigest()
            self._fingerprints[relpath] = digest
        return digest

    def close(self) -> None:
        """Release resources held by the source (open archives). Idempotent."""

    def __enter__(self) -> "TreeSource":
        """Enter a ``with`` block; returns the source itself."""
        return self

    def __exit__(self, *exc_info) -> None:
        """Leave a ``with`` block, calling :meth:`close`."""
        self.close()

    def __repr__(self) -> str:
        """Return ``ClassName('label')``."""
        return f"{type(self).__name__}({self.label!r})"


# --------------------------------------------------------------------------- folders


class FolderSource(TreeSource):
    """A vLLM (or SGLang) tree in a folder on disk, read lazily.

    Args:
        path: either the package folder itself (e.g. ``site-packages/vllm``, recognised by
            its ``__init__.py``), or a folder containing ``vllm/`` or ``sglang/`` (a git
            checkout root, an extracted sdist).
        label: optional description for messages; defaults to ``path`` as given.
        package: the engine package to read (``vllm`` or ``sglang``); None detects it, vLLM
            first when the folder holds both.

    Raises:
        SourceError: when ``path`` does not exist, is not a folder, or holds no engine
            package (no ``<package>/__init__.py`` and no marker sub-folder, see
            :data:`PACKAGES`).
    """

    def __init__(self, path: str | os.PathLike[str], *, label: str | None = None,
                 package: str | None = None) -> None:
        """Locate the folder containing the package; see the class docstring."""
        given = pathlib.Path(path).expanduser()
        super().__init__(label if label is not None else str(given))
        check_package(package)
        try:
            if not given.exists():
                raise SourceError(f"{given} does not exist")
            if not given.is_dir():
                raise SourceError(f"{given} is not a folder")
            resolved = given.resolve()
            for pkg in ([package] if package else list(PACKAGES)):
                if self._is_package(resolved / pkg, pkg):
                    self._root, self.package = resolved, pkg
                    break
                if resolved.name == pkg and self._is_package(resolved, pkg):
                    self._root, self.package = resolved.parent, pkg
                    break
            else:
                if is_environment(resolved):
                    import shlex

                    raise SourceError(f"{given} is a Python environment, not an engine tree: to audit the "
                                      f"{package or 'vllm (or sglang)'} installed in it, use --python "
                                      f"{shlex.quote(str(given))}")
                if package:
                    raise SourceError(f"{given} is not a {_ENGINE_NAMES[package]} tree: no {package}/ package found")
                raise SourceError(f"{given} is not a vLLM tree: no vllm/ package found")
        except OSError as exc:
            raise SourceError(f"cannot read {exc.filename or given}: {exc.strerror or exc}") from None
        self._files: list[str] | None = None
        #: for an installed engine: the environment's start-up code outside the tree (see
        #: :func:`environment_startup_code`); empty for a tree given as a folder or an archive
        self.startup_code: list[dict] = []
        #: compiled modules Python imports instead of a source: the ``.py`` path → the compiled file
        self.compiled: dict[str, str] = {}
        #: folders Python may import from that were not listed (a link out of the tree, a folder
        #: that cannot be listed): ``vllm/config/`` → why
        self.unlisted: dict[str, str] = {}

    @staticmethod
    def _is_package(folder: pathlib.Path, package: str = _PACKAGE) -> bool:
        """Tell whether ``folder`` looks like the ``package`` package folder.

        Args:
            folder: the candidate ``.../vllm`` (or ``.../sglang``) folder.
            package: the package it should be.

        Returns:
            True when it holds ``__init__.py`` or the package's marker sub-folder
            (``model_executor/`` for vllm, ``srt/`` for sglang).
        """
        return (folder / "__init__.py").is_file() or (folder / PACKAGES[package]).is_dir()

    def files(self) -> list[str]:
        """List the tree's Python files (see :meth:`TreeSource.files`), as Python's import system
        would find them.

        A symbolic link to a folder is followed when its target lies inside the tree (under the
        real folder given, or the real package folder): Python imports through it, so its
        modules are listed under the link's name. One that leads outside the tree, loops back to
        a folder above it, or comes after :data:`MAX_LINKED_FOLDERS` followed folders is not
        walked: it is recorded in :attr:`problems` (``vllm/config/``), and the analysis treats
        what it may hold as unknown. A compiled module (an extension ``llama.abi3.so``,
        ``llama.cpython-311-….so``, ``llama.pyd``, or a sourceless ``llama.pyc`` with no
        ``llama.py``) is recorded in :attr:`compiled`: Python imports it rather than the source
        beside it, so that source (or, for a ``.pyc``, the module itself) reads as
        :class:`UnreadableFile`. A folder that cannot be listed is recorded in :attr:`problems`.

        Returns:
            Sorted ``vllm/**/*.py`` POSIX paths (sourceless ``.pyc`` modules as their ``.py`` path).
        """
        if self._files is None:
            found: list[str] = []
            top = self._root / self.package
            try:
                inside = {os.path.realpath(self._root), os.path.realpath(top)}
            except OSError:
                inside = {str(self._root)}
            budget = [MAX_LINKED_FOLDERS]

            def within(real: str) -> bool:
                return any(real == base or real.startswith(base.rstrip(os.sep) + os.sep) for base in inside)

            def walk(folder: pathlib.Path, rel_dir: str, above: frozenset[str]) -> None:
                try:
                    with os.scandir(folder) as it:
                        entries = sorted(it, key=lambda e: e.name)
                except OSError as exc:
                    self.problems[rel_dir + "/"] = self.unlisted[rel_dir + "/"] = \
                        f"cannot list the folder: {exc.strerror or exc}"
                    return
                names = {e.name for e in entries}
                for e in entries:
                    try:
                        is_dir = e.is_dir()  # follows a link
                    except OSError:
                        is_dir = False
                    rel = f"{rel_dir}/{e.name}"
                    if is_dir:
                        # __pycache__, and folders no import can name (.git, .eagle-audit-backup)
                        if e.name == "__pycache__" or e.name.startswith("."):
                            continue
                        real = os.path.realpath(e.path)
                        if e.is_symlink():
                            if not within(real):
                                self.problems[rel + "/"] = self.unlisted[rel + "/"] = (
                                    f"a symbolic link to {real}, a folder outside the tree: not read, though Python "
                                    "imports from it")
                                continue
                            if real in above or real == top_real or top_real.startswith(real.rstrip(os.sep) + os.sep):
                                # its files are listed under their own names already
                                self.problems[rel + "/"] = ("a symbolic link to a folder above it (a loop): "
                                                            "its modules are read under their own names only")
                                continue
                            if budget[0] <= 0:
                                self.problems[rel + "/"] = self.unlisted[rel + "/"] = (
                                    f"a symbolic link to a folder, after {MAX_LINKED_FOLDERS} folders reached "
                                    "through links: not read")
                                continue
                            budget[0] -= 1
                        walk(pathlib.Path(e.path), rel, above | {real})
                    elif e.name.endswith(".py"):
                        # every *.py that is not a folder is listed; one that cannot be read (a FIFO,
                        # a device, too large, no permission) says so when it is read
                        found.append(rel)
                    else:
                        m = _COMPILED_MODULE.match(e.name)
                        if m is None:
                            continue
                        source = f"{rel_dir}/{m['stem']}.py"
                        if m["kind"] == "pyc":
                            if f"{m['stem']}.py" in names:
                                continue  # the source comes before the bytecode in Python's search
                            found.append(source)
                        if source not in self.compiled or m["kind"] != "pyc":
                            self.compiled[source] = rel

            top_real = os.path.realpath(top)
            walk(top, self.package, frozenset({top_real}))
            self._files = sorted(set(found))
        return list(self._files)

    def manifest(self) -> tuple[str, float]:
        """A digest of everything a scan of this folder can read, from the file system's metadata
        only (no file is read), and the age in seconds of its newest entry.

        It covers the package and root, the sorted list of ``.py`` files (:meth:`files`: a file
        added or removed changes it), for each its ``size, mtime_ns, ctime_ns, inode, device``
        (symbolic links followed, as reads follow them; an error instead when it cannot be looked
        at), the folders that cannot be listed or were not walked, the compiled modules (an
        ``llama.abi3.so`` beside ``llama.py``), the names of the root's entries (the
        ``*.dist-info`` found there) and the same stamp of every metadata file version and
        requirement are read from (``PKG-INFO``, ``requirements/common.txt``, each
        ``*.dist-info/METADATA`` and ``*.egg-info/PKG-INFO``).

        Why that is safe enough to key a cached scan on: a write to a file changes its mtime and
        its ctime, and no program can set a ctime back (``utime`` sets only mtime and atime, and
        itself moves ctime), so a file edited in place, truncated, replaced by a rename (a new
        inode) or swapped for a link to another file changes its stamp. What it cannot see is a
        write in the same timestamp tick as the stamp was taken, after it: callers do not store
        a result keyed on a manifest whose newest entry is younger than a couple of seconds
        (the age returned). Release archives are not keyed this way: their verified sha256 is
        their key (:mod:`auditor.orchestration.release_results`).
        """
        import hashlib
        import time

        def stamp(p: str) -> str:
            nonlocal newest
            try:
                st = os.stat(p)
            except OSError as exc:
                return f"error {exc.strerror or type(exc).__name__}"
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
            return (f"{st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {st.st_dev} "
                    f"{stat.S_IFMT(st.st_mode)}")

        newest = 0
        root = str(self._root)
        rows: list[str] = [self.package, root]
        rows += [f"{rel}\t{stamp(os.path.join(root, rel))}" for rel in self.files()]
        rows.append(repr(sorted(self.problems.items())))
        # compiled modules beside a source, and folders not walked (a link out of the tree): a
        # .so added beside a .py changes what Python imports, not the list of .py files
        rows.append(repr(sorted(self.compiled.items())))
        rows.append(repr(sorted(self.unlisted.items())))
        try:
            names = sorted(p.name for p in self._root.iterdir())
        except OSError as exc:
            names = [f"unlistable: {exc.strerror}"]
        rows.append(repr(names))
        meta = ["PKG-INFO", "requirements/common.txt"]
        meta += [f"{n}/METADATA" for n in names if n.endswith(".dist-info")]
        meta += [f"{n}/PKG-INFO" for n in names if n.endswith(".egg-info")]
        rows += [f"{m}\t{stamp(os.path.join(root, m))}" for m in meta]
        digest = hashlib.sha256("\n".join(rows).encode("utf-8", "surrogateescape")).hexdigest()
        age = (time.time_ns() - newest) / 1e9 if newest else float("inf")
        return digest, age

    def _exists(self, relpath: str) -> bool:
        """Check the file on disk (no full listing needed). A file the OS will not let us look
        at counts as existing: reading it then says why it cannot be read."""
        try:
            return not stat.S_ISDIR(os.stat(self._root / relpath).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError:
            return True

    def _read(self, relpath: str) -> bytes:
        """Read the file from disk; KeyError when it is missing, :class:`UnreadableFile` when it
        is not a regular file, is too large or cannot be read (or is shadowed by a compiled module:
        see :meth:`files`)."""
        if self._files is None:
            self.files()
        compiled = self.compiled.get(relpath)
        if compiled is not None:
            raise UnreadableFile(relpath, f"Python imports the compiled module {compiled} instead; compiled code is "
                                          "not read")
        try:
            return read_regular_file(self._root / relpath, relpath)
        except (FileNotFoundError, NotADirectoryError):
            if self._files is not None and relpath in self._files:
                what = "a symbolic link to nothing" if os.path.islink(self._root / relpath) else "gone"
                raise UnreadableFile(relpath, f"listed, but {what} when read") from None
            raise KeyError(relpath) from None

    def _metadata_bytes(self) -> list[bytes]:
        """``PKG-INFO`` at the root, a vllm ``*.dist-info/METADATA`` next to the package, and a
        checkout's ``requirements/common.txt``, those that exist."""
        out = []
        try:
            names = [p.name for p in self._root.iterdir() if p.is_dir()]
        except OSError:
            names = []
        info = _best_dist_info(names)
        cands = [self._root / "PKG-INFO", self._root / "requirements" / "common.txt"]
        if info:
            cands.insert(1, self._root / info / ("METADATA" if info.endswith(".dist-info") else "PKG-INFO"))
        for c in cands:
            try:  # a FIFO or a device named PKG-INFO must never block the tool
                out.append(read_regular_file(c, str(c.relative_to(self._root)), limit=1 << 20))
            except (OSError, UnreadableFile):
                continue
        return out

    def _metadata_version(self) -> str | None:
        """Read ``PKG-INFO`` at the root, else a vllm ``*.dist-info/METADATA`` or
        ``*.egg-info/PKG-INFO`` next to the package."""
        candidates = [self._root / "PKG-INFO"]
        try:
            names = [p.name for p in self._root.iterdir() if p.is_dir()]
        except OSError:
            names = []
        info = _best_dist_info(names, self.package)
        if info:
            leaf = "METADATA" if info.endswith(".dist-info") else "PKG-INFO"
            candidates.append(self._root / info / leaf)
        for candidate in candidates:
            try:
                data = read_regular_file(candidate, candidate.name, 1 << 20)
            except (OSError, UnreadableFile):
                continue
            version = _version_from_metadata(data, self.package)
            if version:
                return version
        return None

    def root(self) -> pathlib.Path:
        """Return the real (resolved) folder that contains ``vllm/``."""
        return self._root


class InstalledSource(FolderSource):
    """The vLLM (or SGLang) installed in the current environment, located without importing it.

    Uses ``importlib.util.find_spec(package)`` (for a top-level name this only searches
    ``sys.path``; the package is not executed) to find the folder, and
    ``importlib.metadata.version(package)`` for the version when the distribution
    metadata is available (falling back to the tree itself).

    Args:
        package: ``vllm`` (default) or ``sglang``.

    Raises:
        SourceError: when no such package can be found in this environment.
    """

    def __init__(self, package: str = _PACKAGE) -> None:
        """Locate the installed package; see the class docstring."""
        check_package(package)
        folder = self._locate(package)
        super().__init__(folder, label=f"installed {package} ({folder})", package=package)
        self.startup_code = environment_startup_code([self._root], package)

    @staticmethod
    def _locate(package: str = _PACKAGE) -> pathlib.Path:
        """Find the folder of the installed package.

        Returns:
            The ``.../vllm`` (or ``.../sglang``) package folder.

        Raises:
            SourceError: when the package is not installed.
        """
        missing = SourceError(
            f"no {package} installed in this environment; pass a PATH or --{package}-version"
        )
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            raise missing from None
        if spec is None:
            raise missing
        locations = list(spec.submodule_search_locations or [])
        if spec.origin and spec.origin not in ("namespace", "built-in", "frozen"):
            locations.insert(0, os.path.dirname(spec.origin))
        for location in locations:
            folder = pathlib.Path(location)
            if FolderSource._is_package(folder, package):
                return folder
        raise missing

    def version(self) -> str | None:
        """Return the installed distribution's version, else the tree's own.

        Returns:
            ``importlib.metadata.version("vllm")`` when the metadata exists, otherwise
            what :meth:`TreeSource.version` reads from the tree; None if neither says.
        """
        if self._version_cache is None:
            try:
                found = importlib.metadata.version(self.package)
            except importlib.metadata.PackageNotFoundError:
                found = None
            if found:
                self._version_cache = (found,)
        return super().version()


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
        if any(FolderSource._is_package(parent / pkg, pkg) or (parent.resolve().name == pkg
                                                                and FolderSource._is_package(parent, pkg))
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


def _same_environment(prefix: str) -> bool:
    """True when ``prefix`` is the environment this process runs in."""
    import sys

    try:
        return pathlib.Path(prefix).resolve() == pathlib.Path(sys.prefix).resolve()
    except (OSError, RuntimeError, ValueError):  # RuntimeError: a symbolic-link loop (Python < 3.13)
        return False


def _find_in_folders(folders: list[pathlib.Path], packages: tuple[str, ...]) -> tuple[pathlib.Path, str] | None:
    """The first ``<folder>/<package>`` that is a package folder, for each package in order."""
    for pkg in packages:
        for folder in folders:
            if FolderSource._is_package(folder / pkg, pkg):
                return folder / pkg, pkg
    return None


def installed_source(package: str | None = None, python: str | os.PathLike[str] | None = None,
                     environ: dict[str, str] | None = None) -> "FolderSource":
    """The engine package installed in an environment, located without importing it.

    In order: the environment of ``python`` (``--python``; see
    :func:`environment_site_packages`: its layout is read, the interpreter is not run); else the
    environment the user activated (``VIRTUAL_ENV``, else ``CONDA_PREFIX``: so that eagle-audit
    installed on its own, e.g. with pipx, audits the vllm of the user's activated venv), when it
    is not the one this process runs in; else this process's own (:class:`InstalledSource`).

    Args:
        package: ``vllm`` or ``sglang``; None looks for vllm, then sglang.
        python: an interpreter or environment folder, or None.
        environ: the environment variables (default ``os.environ``).

    Returns:
        A :class:`FolderSource` whose label says where the package was found.

    Raises:
        SourceError: ``python`` names no environment, or no such package is installed there
            (the message names the folders searched).
    """
    check_package(package)
    wanted = (package,) if package else tuple(PACKAGES)
    names = " or ".join(wanted)
    if python is not None:
        folders = environment_site_packages(python)
        found = _find_in_folders(folders, wanted)
        command = on_path(str(python)) if not pathlib.Path(python).expanduser().exists() else None
        shown = f"{python} ({command})" if command is not None else str(python)  # found on PATH
        if found is None:
            raise SourceError(f"--python {shown}: no {names} installed in that environment (searched "
                              f"{', '.join(map(str, folders))})")
        src = FolderSource(found[0], label=f"installed {found[1]} ({found[0]}, --python {shown})", package=found[1])
        src.startup_code = environment_startup_code(folders, found[1])
        return src
    env = os.environ if environ is None else environ
    searched = None
    for var in ACTIVE_ENV_VARIABLES:
        prefix = env.get(var)
        if not prefix or _same_environment(prefix):
            continue
        try:
            folders = environment_site_packages(prefix)
        except SourceError:
            folders = []
        found = _find_in_folders(folders, wanted)
        if found is not None:
            src = FolderSource(found[0], label=f"installed {found[1]} ({found[0]}, {var})", package=found[1])
            src.startup_code = environment_startup_code(folders, found[1])
            return src
        searched = f"{var}={prefix}"
        break  # the activated environment has none: this process's own environment is tried
    for pkg in wanted:
        try:
            return InstalledSource(pkg)
        except SourceError:
            continue
    import sys

    own = f"eagle-audit's own environment ({sys.prefix})"
    active = [f"{var}={env[var]}" for var in ACTIVE_ENV_VARIABLES if env.get(var) and _same_environment(env[var])]
    if active:  # the activated environment is this one
        own = f"the activated environment ({active[0]}), which is eagle-audit's own"
    where = f"the activated environment ({searched}) nor in {own}" if searched is not None else own
    raise SourceError(f"no {names} installed in {where}; pass a PATH, --python PYTHON (the interpreter or "
                      f"environment folder where it is installed) or --{wanted[0]}-version X")


# -------------------------------------------------------------------------- archives


class ArchiveSource(TreeSource):
    """A vLLM release archive read in place, never extracted to disk.

    * ``vllm-X.tar.gz`` (sdist): one sequential pass loads every ``vllm/**/*.py`` member
      and ``PKG-INFO`` into memory; the ``vllm-X/`` prefix is stripped so paths start at
      ``vllm/``.
    * ``vllm-X-*.whl`` (wheel, a zip): files are read on demand by random access; the
      version comes from ``vllm-X.dist-info/METADATA`` when ``_version.py`` is absent.

    Other tar/zip archives whose ``vllm/`` package sits at the top or one folder down
    (e.g. a source snapshot) are accepted the same way, and so are SGLang archives
    (``sglang-X.tar.gz``, ``sglang-X-*.whl``) holding an ``sglang/`` package.

    Args:
        path: the archive file.
        progress: draw a transient progress bar on stderr while reading a tarball.
        package: the engine package to read (``vllm`` or ``sglang``); None detects it
            (vLLM first when the archive holds both).

    Raises:
        SourceError: when the file is missing, is not a readable tar/zip archive
            (corrupt, truncated), or holds no engine package.
    """

    def __init__(self, path: str | os.PathLike[str], *, progress: bool = False,
                 package: str | None = None) -> None:
        """Open and index the archive; see the class docstring."""
        self.path = pathlib.Path(path).expanduser()
        super().__init__(self.path.name)
        self._wanted = ((package if package in LIBRARIES else check_package(package),) if package
                        else tuple(PACKAGES))
        self._zip: zipfile.ZipFile | None = None
        self._members: dict[str, bytes] | None = None  # tar: relpath -> bytes
        self._zip_names: dict[str, str] = {}  # zip: relpath -> member name
        self._meta_bytes: bytes | None = None
        self._unreadable: dict[str, str] = {}  # relpath -> why it is listed but not read
        self._compiled_members: list[str] = []
        #: compiled modules Python imports instead of a source: the ``.py`` path → the compiled member
        self.compiled: dict[str, str] = {}
        if not self.path.exists():
            raise SourceError(f"{self.path} does not exist")
        if not self.path.is_file():
            raise SourceError(f"{self.path} is not a file")
        try:
            is_zip = zipfile.is_zipfile(self.path)
        except OSError as exc:
            raise self._error(exc) from None
        if is_zip:
            self._open_zip()
        elif self.path.name.lower().endswith((".whl", ".zip")):  # never read as a tarball by its misfortune
            raise self._error(f"it is not a {'wheel' if self.path.suffix.lower() == '.whl' else 'zip file'} "
                              f"({self._kind_of_content()})")
        else:
            self._load_tar(progress)
        listed = set(self._members if self._members is not None else self._zip_names) | set(self._unreadable)
        self._mark_compiled(listed)
        self._files = sorted(listed)

    def _mark_compiled(self, listed: set[str]) -> None:
        """Record the compiled modules Python imports instead of a source (as a folder does, see
        :meth:`FolderSource.files`): the source beside an extension module, or a sourceless
        ``.pyc``'s module path, is listed but reads as :class:`UnreadableFile`. Adds to ``listed``."""
        for rel in sorted(self._compiled_members):
            folder, _, name = rel.rpartition("/")
            m = _COMPILED_MODULE.match(name)
            source = f"{folder}/{m['stem']}.py"
            if m["kind"] == "pyc":
                if source in listed and source not in self.compiled:
                    continue  # the source comes before the bytecode in Python's search
            elif source not in listed and source not in self.compiled:
                self.compiled[source] = rel  # an extension with no source beside it hides nothing
                continue
            if source not in self.compiled or m["kind"] != "pyc":
                self.compiled[source] = rel
            listed.add(source)
            self._unreadable[source] = (f"Python imports the compiled module {self.compiled[source]} instead; "
                                        "compiled code is not read")

    # -- construction ---------------------------------------------------------------

    def _kind_of_content(self) -> str:
        """What the first bytes of a file that is no zip archive look like, for a message: an
        empty file, text, a truncated or damaged zip (its signature without the rest), or data."""
        try:
            with open(self.path, "rb") as fh:
                head = fh.read(512)
        except OSError as exc:
            return f"unreadable: {exc.strerror or exc}"
        if not head:
            return "an empty file"
        if head.startswith(b"PK"):
            return "a truncated or damaged zip archive"
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            return "binary data, not a zip archive"
        printable = all(c.isprintable() or c in "\n\r\t" for c in text)
        return "a text file, not a zip archive" if printable else "binary data, not a zip archive"

    def _error(self, reason: object) -> SourceError:
        """Build the 'cannot read archive' error.

        Args:
            reason: the underlying exception or text.

        Returns:
            A SourceError naming the archive and the reason.
        """
        text = str(reason).strip() or type(reason).__name__
        return SourceError(f"cannot read archive {self.path}: {text}")

    @staticmethod
    def _pick_prefix(paths: list[str], package: str = _PACKAGE) -> str | None:
        """Choose where the ``package`` package starts inside an archive.

        Args:
            paths: normalised member paths.
            package: ``vllm`` or ``sglang``.

        Returns:
            ``""`` when ``<package>/`` is at the top, ``"<folder>/"`` when one level down,
            ``"<folder>/src/"`` in an sdist of the ``src/`` layout, or None when no such package
            is found.
        """
        counts: dict[str, int] = {}
        marked: set[str] = set()
        for path in paths:
            parts = path.split("/")
            for depth in (0, 1, 2):
                if depth == 2 and parts[1:2] != ["src"]:
                    continue
                if len(parts) > depth + 1 and parts[depth] == package:
                    prefix = "/".join(parts[:depth]) + ("/" if depth else "")
                    counts[prefix] = counts.get(prefix, 0) + 1
                    rest = parts[depth + 1 :]
                    if rest == ["__init__.py"] or rest[:1] == [_MARKERS[package]]:
                        marked.add(prefix)
        if not marked:
            return None
        return max(sorted(marked), key=lambda p: (counts[p], -len(p)))

    def _pick(self, paths: list[str]) -> str | None:
        """Pick the package (stored in :attr:`package`) and its prefix among the wanted ones."""
        for pkg in self._wanted:
            prefix = self._pick_prefix(paths, pkg)
            if prefix is not None:
                self.package = pkg
                return prefix
        return None

    def _missing(self) -> SourceError:
        """The 'no package found' error for this archive."""
        if len(self._wanted) == 1:
            pkg = self._wanted[0]
            return SourceError(f"{self.path} is not a {_ENGINE_NAMES.get(pkg, pkg)} archive: no {pkg}/ package found")
        return SourceError(f"{self.path} is not a vLLM archive: no vllm/ package found")

    def _refuse(self, why: str) -> SourceError:
        """Build the one-line refusal of an archive the tool will not read."""
        return SourceError(f"refusing archive {self.path}: {why}")

    def _check_layout(self, files: set[str], names: set[str]) -> None:
        """Refuse an archive where a file member sits where another member (of ``names``) needs
        a folder (``a.py`` and ``a.py/b.py``): no extraction can lay both out."""
        for name in names:
            parts = name.split("/")
            for i in range(1, len(parts)):
                if "/".join(parts[:i]) in files:
                    raise self._refuse(f"member {'/'.join(parts[:i])!r} is a file, but {name!r} needs it to be a "
                                       "folder")

    def _member_path(self, name: str) -> str:
        """The path a standard extraction gives member ``name``: the name itself, without the
        leading ``./`` some tools write and a folder's trailing ``/`` (``""`` for the top folder).

        Raises:
            SourceError: names that extraction tools treat differently or that would land
                outside the destination: absolute, with ``..``, ``.`` or empty components
                (``a//b``), a backslash or a NUL.
        """
        shown = repr(name) if len(name) <= 120 else repr(name[:117] + "...")
        if "\\" in name:
            raise self._refuse(f"member {shown} has a backslash in its name (tools disagree on where it goes)")
        if "\0" in name:
            raise self._refuse(f"member {shown} has a NUL in its name")
        if name.startswith("/"):
            raise self._refuse(f"member {shown} has an absolute name")
        rest = name
        while rest.startswith("./"):
            rest = rest[2:]
        rest = rest.removesuffix("/")
        if rest in ("", "."):
            return ""
        parts = rest.split("/")
        if ".." in parts:
            raise self._refuse(f"member {shown} has '..' in its name")
        if "" in parts or "." in parts:
            raise self._refuse(f"member {shown} has an empty or '.' component in its name")
        return rest

    @staticmethod
    def _decompressor(fileobj: IO[bytes]) -> IO[bytes]:
        """Wrap a tarball in the decompressor its magic bytes call for.

        Unlike tarfile's own stream decompression, these readers raise ``EOFError`` on
        a truncated stream and check the gzip CRC.

        Args:
            fileobj: the raw archive file, positioned at its start (must support peek
                or seek back).

        Returns:
            A binary stream of the uncompressed tar data.
        """
        if hasattr(fileobj, "peek"):
            magic = fileobj.peek(6)[:6]
        else:
            magic = fileobj.read(6)
            fileobj.seek(0)
        if magic[:2] == b"\x1f\x8b":
            return gzip.GzipFile(fileobj=fileobj, mode="rb")
        if magic[:3] == b"BZh":
            return bz2.BZ2File(fileobj)
        if magic[:6] == b"\xfd7zXZ\x00":
            return lzma.LZMAFile(fileobj)
        return fileobj

    def _load_tar(self, progress: bool) -> None:
        """Read a tarball sequentially, keeping candidate files in memory.

        The archive is read as a standard extraction would lay it out, or refused: absolute
        names, ``..``, backslashes, duplicate names, links and special files (devices, FIFOs)
        are refused, as are more than :data:`MAX_MEMBERS` members or more than
        :data:`MAX_ARCHIVE_BYTES` of decompressed data. A ``.py`` member larger than
        :data:`MAX_FILE_BYTES` is listed but not loaded (reading it raises
        :class:`UnreadableFile`).

        Raises:
            SourceError: for unreadable, truncated, refused or vllm-less archives.
        """
        py_members: dict[str, bytes] = {}
        oversized: dict[str, str] = {}
        compiled_names: list[str] = []  # members named like a compiled module (llama.abi3.so)
        metadata: dict[str, bytes] = {}
        seen: set[str] = set()
        folders: set[str] = set()
        kept = 0
        ends: tuple[int, str, int] = (0, "", 0)  # where the last member's data must end, its name and size
        total = self.path.stat().st_size
        bar = progress_bar(f"reading {self.path.name}", total) if progress else None
        try:
            with open(self.path, "rb") as raw:
                if bar is not None:
                    progress_obj, task = bar
                    progress_obj.start()
                    fileobj: IO[bytes] = io.BufferedReader(
                        _CountingReader(raw, lambda n: progress_obj.advance(task, n)),
                        buffer_size=1 << 20,
                    )
                else:
                    fileobj = raw
                stream = _LimitedReader(self._decompressor(fileobj), MAX_ARCHIVE_BYTES, self._refuse(
                    f"it decompresses to more than {_human(MAX_ARCHIVE_BYTES)}"))
                with tarfile.open(fileobj=stream, mode="r|") as tar:
                    for count, member in enumerate(tar, 1):
                        if count > MAX_MEMBERS:
                            raise self._refuse(f"more than {MAX_MEMBERS} members")
                        name = self._member_path(member.name)
                        if name in seen and not (member.isdir() and name in folders):  # a folder may repeat
                            raise self._refuse(f"member {name!r} appears twice (extraction keeps only one)")
                        seen.add(name)
                        ends = max(ends, (member.offset_data + member.size, name, member.size))
                        if ends[0] > MAX_ARCHIVE_BYTES:  # refused before tarfile skips (reads) that much
                            raise self._refuse(f"member {name!r} declares {member.size} bytes: it decompresses to "
                                               f"more than {_human(MAX_ARCHIVE_BYTES)}")
                        if member.isdir() or not name:
                            folders.add(name)
                            continue
                        if member.name.endswith("/"):
                            raise self._refuse(f"member {name!r} is a file whose name ends with '/'")
                        if not member.isfile():
                            kind = ("a symbolic link" if member.issym() else "a hard link" if member.islnk()
                                    else "a special file")
                            raise self._refuse(f"member {name!r} is {kind}; archives with links or special files "
                                               "are not read")
                        parts = name.split("/")
                        wanted_py = name.endswith(".py") and "__pycache__" not in parts and (
                            parts[0] in self._wanted or (len(parts) > 2 and parts[1] in self._wanted)
                            or (len(parts) > 3 and parts[1] == "src" and parts[2] in self._wanted)
                        )
                        wanted_meta = parts[-1] == "PKG-INFO" and len(parts) <= 2
                        if not (wanted_py or wanted_meta):
                            if "__pycache__" not in parts and _COMPILED_MODULE.match(parts[-1]):
                                compiled_names.append(name)  # listed, never read (see _mark_compiled)
                            continue
                        if member.size > MAX_FILE_BYTES:
                            oversized[name] = (f"{member.size} bytes, larger than the {MAX_FILE_BYTES >> 20} MiB "
                                               "limit for a source file; not read")
                            continue
                        kept += member.size
                        if kept > MAX_PACKAGE_BYTES:
                            raise self._refuse(f"its {'/'.join(self._wanted)}/ package is larger than "
                                               f"{_human(MAX_PACKAGE_BYTES)}")
                        extracted = tar.extractfile(member)
                        data = extracted.read() if extracted is not None else b""
                        (py_members if wanted_py else metadata)[name] = data
                # Read to the very end so that a truncated or corrupted compressed
                # stream is detected (tarfile alone stops quietly at a cut).
                while stream.read(_DRAIN_CHUNK):
                    pass
                if stream.consumed < ends[0]:  # tarfile skips a member it was not asked to read
                    raise self._refuse(f"member {ends[1]!r} declares {ends[2]} bytes, past the end of the archive "
                                       "(truncated or forged)")
        except SourceError:
            raise
        except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError, ValueError) as exc:
            raise self._error(exc) from None
        except MemoryError:
            raise self._refuse("it does not fit in memory") from None
        finally:
            if bar is not None:
                bar[0].stop()
        self._check_layout(seen - folders, seen)
        prefix = self._pick(list(py_members) + list(oversized))
        if prefix is None:
            raise self._missing()
        self._members = {
            name[len(prefix) :]: data
            for name, data in py_members.items()
            if name.startswith(prefix + self.package + "/")
        }
        self._unreadable = {
            name[len(prefix) :]: why
            for name, why in oversized.items()
            if name.startswith(prefix + self.package + "/")
        }
        self._compiled_members = [n[len(prefix):] for n in compiled_names if n.startswith(prefix + self.package + "/")]
        top = prefix.removesuffix("src/") if prefix.endswith("/src/") else prefix  # src layout: PKG-INFO above src/
        self._meta_bytes = metadata.get(top + "PKG-INFO")

    def _open_zip(self) -> None:
        """Open a wheel / zip and index its Python files (contents are read on demand).

        Refused like a tarball (absolute names, ``..``, backslashes, duplicates, links, too many
        members, a package larger than :data:`MAX_PACKAGE_BYTES`), and also for encrypted
        members or compression methods Python cannot read. A ``.py`` member declaring more than
        :data:`MAX_FILE_BYTES` is listed but not read (reading it raises :class:`UnreadableFile`;
        a member that decompresses beyond its declared size fails its CRC check).

        Raises:
            SourceError: for unreadable, refused or vllm-less archives.
        """
        try:
            self._zip = zipfile.ZipFile(self.path)
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise self._error(exc) from None
        except MemoryError:
            raise self._refuse("it does not fit in memory") from None
        try:
            names = self._index_zip(infos)
        except BaseException:
            self.close()
            raise
        prefix = self._pick([n for n in names if n.endswith(".py")])
        if prefix is None:
            self.close()
            raise self._missing()
        self._zip_names = {
            norm[len(prefix) :]: original
            for norm, original in names.items()
            if norm.startswith(prefix + self.package + "/") and norm.endswith(".py")
            and "__pycache__" not in norm.split("/")
        }
        self._compiled_members = [
            norm[len(prefix):] for norm in names
            if norm.startswith(prefix + self.package + "/") and "__pycache__" not in norm.split("/")
            and _COMPILED_MODULE.match(norm.rsplit("/", 1)[-1])]
        sizes = {i.filename: i.file_size for i in infos}
        self._unreadable = {
            rel: (f"{sizes[original]} bytes, larger than the {MAX_FILE_BYTES >> 20} MiB limit for a source file; "
                  "not read")
            for rel, original in self._zip_names.items() if sizes[original] > MAX_FILE_BYTES
        }
        if sum(sizes[o] for r, o in self._zip_names.items() if r not in self._unreadable) > MAX_PACKAGE_BYTES:
            self.close()
            raise self._refuse(f"its {self.package}/ package is larger than {_human(MAX_PACKAGE_BYTES)}")
        meta_name = names.get(prefix + "PKG-INFO")
        if meta_name is None:
            tops = {
                n[len(prefix) :].split("/", 1)[0]
                for n in names
                if n.startswith(prefix) and "/" in n[len(prefix) :]
            }
            info = _best_dist_info(sorted(tops), self.package)
            if info and info.endswith(".dist-info"):
                meta_name = names.get(f"{prefix}{info}/METADATA")
        if meta_name is not None and sizes[meta_name] <= MAX_FILE_BYTES:
            self._meta_bytes = self._zip_read(meta_name)

    def _index_zip(self, infos: list[zipfile.ZipInfo]) -> dict[str, str]:
        """Check every member (see :meth:`_open_zip`); return extracted path → member name for
        the files."""
        if len(infos) > MAX_MEMBERS:
            raise self._refuse(f"more than {MAX_MEMBERS} members")
        names: dict[str, str] = {}
        seen: set[str] = set()
        readable = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
        folders: set[str] = set()
        for info in infos:
            norm = self._member_path(info.filename)
            if norm in seen and not (info.is_dir() and norm in folders):  # a folder may repeat
                raise self._refuse(f"member {norm!r} appears twice (extraction keeps only one)")
            seen.add(norm)
            kind = stat.S_IFMT(info.external_attr >> 16)
            if info.is_dir() or not norm:
                folders.add(norm)
                continue
            if kind not in (0, stat.S_IFREG):
                what = "a symbolic link" if kind == stat.S_IFLNK else "a special file"
                raise self._refuse(f"member {norm!r} is {what}; archives with links or special files are not read")
            if info.flag_bits & 0x1:
                raise self._refuse(f"member {norm!r} is encrypted")
            if info.compress_type not in readable:
                raise self._refuse(f"member {norm!r} uses compression method {info.compress_type}, which "
                                   "Python's zipfile cannot read")
            names[norm] = info.filename
        self._check_layout(set(names), seen)
        return names

    def _zip_read(self, member: str) -> bytes:
        """Read one zip member, turning corruption into SourceError."""
        if self._zip is None:
            raise SourceError(f"cannot read archive {self.path}: it was closed")
        try:
            return self._zip.read(member)
        except (zipfile.BadZipFile, zlib.error, lzma.LZMAError, OSError, EOFError, ValueError, RuntimeError,
                NotImplementedError) as exc:
            raise self._error(exc) from None

    # -- interface ------------------------------------------------------------------

    def files(self) -> list[str]:
        """List the archive's ``vllm/**/*.py`` files (see :meth:`TreeSource.files`)."""
        return list(self._files)

    def _exists(self, relpath: str) -> bool:
        """Membership test against the archive index."""
        if relpath in self._unreadable:
            return True
        if self._members is not None:
            return relpath in self._members
        return relpath in self._zip_names

    def _read(self, relpath: str) -> bytes:
        """Return the member's bytes; KeyError when absent, :class:`UnreadableFile` when too large."""
        if relpath in self._unreadable:
            raise UnreadableFile(relpath, self._unreadable[relpath])
        if self._members is not None:
            return self._members[relpath]
        return self._zip_read(self._zip_names[relpath])

    def _metadata_version(self) -> str | None:
        """Version from the archive's ``PKG-INFO`` or ``*.dist-info/METADATA``."""
        return _version_from_metadata(self._meta_bytes, self.package) if self._meta_bytes else None

    def _metadata_bytes(self) -> list[bytes]:
        """The archive's ``PKG-INFO`` or ``*.dist-info/METADATA``."""
        return [self._meta_bytes] if self._meta_bytes else []

    def close(self) -> None:
        """Close the wheel's zip file, if any. Idempotent."""
        if self._zip is not None:
            self._zip.close()
            self._zip = None

    def __del__(self) -> None:
        """Close the zip file when the source is garbage-collected."""
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


# -------------------------------------------------------------------------- dispatch


def release_source(archive: pathlib.Path, *, progress: bool = True, package: str | None = None) -> "ArchiveSource":
    """The :class:`ArchiveSource` of a fetched release archive (of the engine ``package``, or
    detected), labelled unverified when no sha256 from the index was recorded for it (fetched
    with ``--allow-unverified``)."""
    from auditor.source.fetch import UNVERIFIED, recorded_sha256

    source = ArchiveSource(archive, progress=progress, package=package)
    if recorded_sha256(archive) is None:
        source.label = f"{source.label} ({UNVERIFIED})"
    return source


def library_source(path: str | os.PathLike[str], package: str) -> ArchiveSource:
    """The ``package`` folder of a library's wheel or sdist (``transformers-X-py3-none-any.whl``,
    ``transformers-X.tar.gz``, also of the ``src/`` layout), read in place like a release archive
    and refused on the same grounds.

    Args:
        path: the archive file.
        package: a library of :data:`LIBRARIES` (``transformers``).

    Returns:
        An :class:`ArchiveSource` whose files are ``<package>/**/*.py``; its version comes from
        the archive's ``PKG-INFO`` or ``*.dist-info/METADATA``.

    Raises:
        SourceError: ``package`` is not a known library, or the archive is missing, unreadable,
            refused, or holds no ``<package>/`` package.
    """
    if package not in LIBRARIES:
        raise SourceError(f"unknown library {package!r} (one of {', '.join(LIBRARIES)})")
    return ArchiveSource(path, progress=False, package=package)


def open_source(
    path: str | os.PathLike[str] | None,
    vllm_version: str | None,
    *,
    progress: bool = True,
    sglang_version: str | None = None,
    package: str | None = None,
    python: str | os.PathLike[str] | None = None,
) -> TreeSource:
    """Open the tree the user asked for: a vLLM tree, or an SGLang tree.

    Args:
        path: a folder (``site-packages/vllm``, a checkout, an extracted sdist) or an
            archive (``vllm-X.tar.gz`` / ``vllm-X-*.whl``, ``sglang-X.tar.gz`` /
            ``sglang-X-*.whl``); None to use a version or the installed package.
        vllm_version: a released vLLM version to fetch as an sdist from the package index
            configured for pip (see :func:`auditor.source.fetch.fetch_release`); cached.
        progress: show transient progress bars on stderr for downloads/archive reads.
        sglang_version: a released SGLang version to fetch (its sdist when the index has
            one, else the wheel for this platform's Python); cached.
        package: the engine package to read (``vllm``, ``sglang``); None detects it from
            the tree (a version option implies its package; an installed one is looked for as
            vllm, then sglang).
        python: with no path and no version, the interpreter (or environment folder) whose
            installed engine to read (``--python``; see :func:`installed_source`).

    Returns:
        A :class:`FolderSource`, :class:`ArchiveSource` or an installed package's folder; its
        :attr:`TreeSource.package` says which engine it holds.

    Raises:
        SourceError: when more than one of ``path``, ``vllm_version`` and ``sglang_version``
            is given, a version contradicts ``package``, the path does not exist or holds
            no engine tree, the release cannot be fetched, or (with none of them) the
            package is not installed (in the environment of ``python``, the activated one or
            this one), or ``python`` is given with a path or a version.
    """
    check_package(package)
    if python is not None and (vllm_version is not None or sglang_version is not None):
        raise SourceError("--python locates an installed engine: give it without a release version")
    given = [n for n, v in (("a PATH", path), ("--vllm-version", vllm_version),
                            ("--sglang-version", sglang_version)) if v is not None]
    if len(given) > 1:
        raise SourceError(f"pass either {' or '.join(given)}, not both")
    for version, pkg in ((vllm_version, "vllm"), (sglang_version, "sglang")):
        if version is None:
            continue
        if package not in (None, pkg):
            raise SourceError(f"--{pkg}-version fetches a {_ENGINE_NAMES[pkg]} release, not a {package} tree")
        from auditor.source.fetch import fetch_release

        return release_source(fetch_release(version, progress=progress, project=pkg), progress=progress,
                              package=pkg)
    if path is None:
        return installed_source(package, python)
    if python is not None:
        raise SourceError("--python locates an installed engine: give it without a PATH")
    target = pathlib.Path(path).expanduser()
    try:
        if not target.exists():
            raise SourceError(f"{target} does not exist")
        is_dir = target.is_dir()
    except OSError as exc:
        raise SourceError(f"cannot read {target}: {exc.strerror or exc}") from None
    if is_dir:
        return FolderSource(target, package=package)
    why = not_a_tree_or_archive(target)
    if why is not None:
        raise SourceError(why)
    return ArchiveSource(target, progress=progress, package=package)
