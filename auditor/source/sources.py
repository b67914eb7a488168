"""What every source of a tree shares: the :class:`TreeSource` interface (read-only access to a vLLM
or SGLang source tree, wherever it lives), the engine packages a tree can hold, and how a tree's
version is read from its own files.

The ways in, each a module of :mod:`auditor.source`:

* :class:`~auditor.source.folder.FolderSource` -- a folder on disk (``site-packages/vllm``, a git
  checkout, an extracted sdist); :class:`~auditor.source.folder.InstalledSource` and
  :func:`~auditor.source.folder.installed_source` -- the engine installed in an environment,
  located without importing it (:mod:`auditor.source.environments`: how an environment is laid out);
* :class:`~auditor.source.archive.ArchiveSource` -- a release archive read in place
  (``vllm-X.tar.gz`` sdist or ``vllm-X-*.whl`` wheel), never extracted to disk;
* :func:`~auditor.source.opener.open_source` -- picks one of the above from command-line style
  arguments (``--vllm-version`` fetches the release sdist, see :mod:`auditor.source.fetch`).

Nothing here imports or executes code from the scanned tree: files are only read as
bytes, and the version is parsed statically with :mod:`ast`.

Paths handed out and accepted are POSIX paths relative to the folder that *contains*
the ``vllm/`` package, e.g. ``"vllm/config/speculative.py"``.
"""

from __future__ import annotations

import abc
import ast
import email.parser
import hashlib
import pathlib
import re

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from auditor.model.errors import SourceError

#: The engine package a tree is taken to hold when nothing says otherwise.
DEFAULT_PACKAGE = "vllm"
#: The engine packages a tree can hold, in the order they are looked for when a folder or an
#: archive holds several (vLLM first, so that a tree that always read as vLLM still does), each
#: with the sub-folder that marks it when its ``__init__.py`` is absent.
PACKAGES: dict[str, str] = {"vllm": "model_executor", "sglang": "srt"}
#: Library packages an archive may be read for (never audited as trees: their classes are read,
#: e.g. ``transformers``' HF config classes), each with the sub-folder that marks it.
LIBRARIES: dict[str, str] = {"transformers": "models"}
#: Every package a source may read (engines and libraries), with its marker sub-folder.
MARKERS = {**PACKAGES, **LIBRARIES}
#: How each engine is named in messages.
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
_VERSION_NAMES = ("__version__", "version")

#: A compiled module's file name: an extension (``llama.so``, ``llama.abi3.so``,
#: ``llama.cpython-311-x86_64-linux-gnu.so``, ``llama.cp311-win_amd64.pyd``), whatever interpreter
#: its tag names, or sourceless bytecode (``llama.pyc``, outside ``__pycache__``).
COMPILED_MODULE = re.compile(r"^(?P<stem>[A-Za-z_][A-Za-z0-9_]*)(?:(?:\.[^./]+)?\.(?P<ext>so|pyd)|\.(?P<kind>pyc))$")


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


def _valid_relpath(relpath: object, package: str = DEFAULT_PACKAGE) -> bool:
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


def version_from_metadata(data: bytes, package: str = DEFAULT_PACKAGE) -> str | None:
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


def best_dist_info(names: list[str], package: str = DEFAULT_PACKAGE) -> str | None:
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


def is_package_folder(folder: pathlib.Path, package: str = DEFAULT_PACKAGE) -> bool:
    """Tell whether ``folder`` looks like the ``package`` package folder.

    Args:
        folder: the candidate ``.../vllm`` (or ``.../sglang``) folder.
        package: the package it should be.

    Returns:
        True when it holds ``__init__.py`` or the package's marker sub-folder
        (``model_executor/`` for vllm, ``srt/`` for sglang).
    """
    return (folder / "__init__.py").is_file() or (folder / PACKAGES[package]).is_dir()


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
    package: str = DEFAULT_PACKAGE

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
