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
import tarfile
import zipfile
import zlib
from typing import IO, Callable

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from auditor.model.errors import SourceError

__all__ = [
    "TreeSource",
    "FolderSource",
    "ArchiveSource",
    "InstalledSource",
    "open_source",
]

_PACKAGE = "vllm"
#: The engine packages a tree can hold, in the order they are looked for when a folder or an
#: archive holds several (vLLM first, so that a tree that always read as vLLM still does), each
#: with the sub-folder that marks it when its ``__init__.py`` is absent.
PACKAGES: dict[str, str] = {"vllm": "model_executor", "sglang": "srt"}
#: How each engine is named in messages.
_ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
_VERSION_NAMES = ("__version__", "version")
_DRAIN_CHUNK = 1 << 20


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
    except (SyntaxError, ValueError):
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


def progress_bar(description: str, total: int | None):
    """Build a transient rich progress bar drawn on stderr.

    Args:
        description: the text shown left of the bar.
        total: the expected number of bytes, or None when unknown.

    Returns:
        A ``(progress, task_id)`` pair; use ``progress`` as a context manager.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = progress.add_task(description, total=total)
    return progress, task


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

    # -- concrete -----------------------------------------------------------------

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
                found = _version_from_python(self.read(version_file))
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
            if package:
                raise SourceError(f"{given} is not a {_ENGINE_NAMES[package]} tree: no {package}/ package found")
            raise SourceError(f"{given} is not a vLLM tree: no vllm/ package found")
        self._files: list[str] | None = None

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
        """List the tree's Python files (see :meth:`TreeSource.files`).

        Returns:
            Sorted ``vllm/**/*.py`` POSIX paths; symlinked folders are not followed.
        """
        if self._files is None:
            found: list[str] = []
            top = self._root / self.package
            for dirpath, dirnames, filenames in os.walk(top):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                rel_dir = pathlib.Path(dirpath).relative_to(self._root).as_posix()
                for name in filenames:
                    if name.endswith(".py") and os.path.isfile(os.path.join(dirpath, name)):
                        found.append(f"{rel_dir}/{name}")
            self._files = sorted(found)
        return list(self._files)

    def _exists(self, relpath: str) -> bool:
        """Check the file on disk (no full listing needed)."""
        return (self._root / relpath).is_file()

    def _read(self, relpath: str) -> bytes:
        """Read the file from disk; KeyError when it is missing."""
        try:
            return (self._root / relpath).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise KeyError(relpath) from None

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
                data = candidate.read_bytes()
            except OSError:
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
        self._wanted = (check_package(package),) if package else tuple(PACKAGES)
        self._zip: zipfile.ZipFile | None = None
        self._members: dict[str, bytes] | None = None  # tar: relpath -> bytes
        self._zip_names: dict[str, str] = {}  # zip: relpath -> member name
        self._meta_bytes: bytes | None = None
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
        else:
            self._load_tar(progress)
        self._files = sorted(self._members if self._members is not None else self._zip_names)

    # -- construction ---------------------------------------------------------------

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
            or None when no such package is found.
        """
        counts: dict[str, int] = {}
        marked: set[str] = set()
        for path in paths:
            parts = path.split("/")
            for depth in (0, 1):
                if len(parts) > depth + 1 and parts[depth] == package:
                    prefix = "/".join(parts[:depth]) + ("/" if depth else "")
                    counts[prefix] = counts.get(prefix, 0) + 1
                    rest = parts[depth + 1 :]
                    if rest == ["__init__.py"] or rest[:1] == [PACKAGES[package]]:
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
            return SourceError(f"{self.path} is not a {_ENGINE_NAMES[pkg]} archive: no {pkg}/ package found")
        return SourceError(f"{self.path} is not a vLLM archive: no vllm/ package found")

    @staticmethod
    def _normalise(name: str) -> str:
        """Normalise an archive member name to a POSIX path without ``./``."""
        name = name.replace("\\", "/")
        while name.startswith("./"):
            name = name[2:]
        return name.lstrip("/")

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

        Raises:
            SourceError: for unreadable, truncated or vllm-less archives.
        """
        py_members: dict[str, bytes] = {}
        metadata: dict[str, bytes] = {}
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
                stream = self._decompressor(fileobj)
                with tarfile.open(fileobj=stream, mode="r|") as tar:
                    for member in tar:
                        if not member.isfile():
                            continue
                        name = self._normalise(member.name)
                        parts = name.split("/")
                        wanted_py = name.endswith(".py") and (
                            parts[0] in self._wanted or (len(parts) > 2 and parts[1] in self._wanted)
                        )
                        wanted_meta = parts[-1] == "PKG-INFO" and len(parts) <= 2
                        if not (wanted_py or wanted_meta):
                            continue
                        extracted = tar.extractfile(member)
                        data = extracted.read() if extracted is not None else b""
                        (py_members if wanted_py else metadata)[name] = data
                # Read to the very end so that a truncated or corrupted compressed
                # stream is detected (tarfile alone stops quietly at a cut).
                while stream.read(_DRAIN_CHUNK):
                    pass
        except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError, ValueError) as exc:
            raise self._error(exc) from None
        finally:
            if bar is not None:
                bar[0].stop()
        prefix = self._pick(list(py_members))
        if prefix is None:
            raise self._missing()
        self._members = {
            name[len(prefix) :]: data
            for name, data in py_members.items()
            if name.startswith(prefix + self.package + "/")
        }
        self._meta_bytes = metadata.get(prefix + "PKG-INFO")

    def _open_zip(self) -> None:
        """Open a wheel / zip and index its Python files (contents are read on demand).

        Raises:
            SourceError: for unreadable or vllm-less archives.
        """
        try:
            self._zip = zipfile.ZipFile(self.path)
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise self._error(exc) from None
        names = {self._normalise(i.filename): i.filename for i in infos if not i.is_dir()}
        prefix = self._pick([n for n in names if n.endswith(".py")])
        if prefix is None:
            self.close()
            raise self._missing()
        self._zip_names = {
            norm[len(prefix) :]: original
            for norm, original in names.items()
            if norm.startswith(prefix + self.package + "/") and norm.endswith(".py")
        }
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
        if meta_name is not None:
            self._meta_bytes = self._zip_read(meta_name)

    def _zip_read(self, member: str) -> bytes:
        """Read one zip member, turning corruption into SourceError."""
        if self._zip is None:
            raise SourceError(f"cannot read archive {self.path}: it was closed")
        try:
            return self._zip.read(member)
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as exc:
            raise self._error(exc) from None

    # -- interface ------------------------------------------------------------------

    def files(self) -> list[str]:
        """List the archive's ``vllm/**/*.py`` files (see :meth:`TreeSource.files`)."""
        return list(self._files)

    def _exists(self, relpath: str) -> bool:
        """Membership test against the archive index."""
        if self._members is not None:
            return relpath in self._members
        return relpath in self._zip_names

    def _read(self, relpath: str) -> bytes:
        """Return the member's bytes; KeyError when absent."""
        if self._members is not None:
            return self._members[relpath]
        return self._zip_read(self._zip_names[relpath])

    def _metadata_version(self) -> str | None:
        """Version from the archive's ``PKG-INFO`` or ``*.dist-info/METADATA``."""
        return _version_from_metadata(self._meta_bytes, self.package) if self._meta_bytes else None

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


def open_source(
    path: str | os.PathLike[str] | None,
    vllm_version: str | None,
    *,
    progress: bool = True,
    sglang_version: str | None = None,
    package: str | None = None,
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
            the tree (a version option implies its package; the installed one defaults to
            vllm).

    Returns:
        A :class:`FolderSource`, :class:`ArchiveSource` or :class:`InstalledSource`; its
        :attr:`TreeSource.package` says which engine it holds.

    Raises:
        SourceError: when more than one of ``path``, ``vllm_version`` and ``sglang_version``
            is given, a version contradicts ``package``, the path does not exist or holds
            no engine tree, the release cannot be fetched, or (with none of them) the
            package is not installed.
    """
    check_package(package)
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

        archive = fetch_release(version, progress=progress, project=pkg)
        return ArchiveSource(archive, progress=progress, package=pkg)
    if path is None:
        return InstalledSource(package or _PACKAGE)
    target = pathlib.Path(path).expanduser()
    if not target.exists():
        raise SourceError(f"{target} does not exist")
    if target.is_dir():
        return FolderSource(target, package=package)
    return ArchiveSource(target, progress=progress, package=package)
