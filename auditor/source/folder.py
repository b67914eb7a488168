"""A tree in a folder on disk (:class:`FolderSource`: ``site-packages/vllm``, a git checkout, an
extracted sdist), and the engine installed in an environment (:class:`InstalledSource`,
:func:`installed_source`), located without importing it. Nothing in the folder is imported or
executed: files are read as bytes."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import pathlib
import stat

from auditor.model.errors import SourceError
from auditor.source.environments import (
    ACTIVE_ENV_VARIABLES, environment_site_packages, find_in_folders, is_environment, on_path,
    same_environment
)
from auditor.source.files import UnreadableFile, read_regular_file
from auditor.source.sources import (
    COMPILED_MODULE, DEFAULT_PACKAGE, ENGINE_NAMES, PACKAGES, TreeSource, best_dist_info, check_package,
    is_package_folder, version_from_metadata
)
from auditor.source.startup import environment_startup_code

#: At most this many folders are walked through symbolic links inside a tree (links to links to
#: siblings could otherwise multiply a listing without end).
MAX_LINKED_FOLDERS = 2_000

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
                if is_package_folder(resolved / pkg, pkg):
                    self._root, self.package = resolved, pkg
                    break
                if resolved.name == pkg and is_package_folder(resolved, pkg):
                    self._root, self.package = resolved.parent, pkg
                    break
            else:
                if is_environment(resolved):
                    import shlex

                    raise SourceError(f"{given} is a Python environment, not an engine tree: to audit the "
                                      f"{package or 'vllm (or sglang)'} installed in it, use --python "
                                      f"{shlex.quote(str(given))}")
                if package:
                    raise SourceError(f"{given} is not a {ENGINE_NAMES[package]} tree: no {package}/ package found")
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
                        m = COMPILED_MODULE.match(e.name)
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
        info = best_dist_info(names)
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
        info = best_dist_info(names, self.package)
        if info:
            leaf = "METADATA" if info.endswith(".dist-info") else "PKG-INFO"
            candidates.append(self._root / info / leaf)
        for candidate in candidates:
            try:
                data = read_regular_file(candidate, candidate.name, 1 << 20)
            except (OSError, UnreadableFile):
                continue
            version = version_from_metadata(data, self.package)
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

    def __init__(self, package: str = DEFAULT_PACKAGE) -> None:
        """Locate the installed package; see the class docstring."""
        check_package(package)
        folder = self._locate(package)
        super().__init__(folder, label=f"installed {package} ({folder})", package=package)
        self.startup_code = environment_startup_code([self._root], package)

    @staticmethod
    def _locate(package: str = DEFAULT_PACKAGE) -> pathlib.Path:
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
            if is_package_folder(folder, package):
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
        found = find_in_folders(folders, wanted)
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
        if not prefix or same_environment(prefix):
            continue
        try:
            folders = environment_site_packages(prefix)
        except SourceError:
            folders = []
        found = find_in_folders(folders, wanted)
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
    active = [f"{var}={env[var]}" for var in ACTIVE_ENV_VARIABLES if env.get(var) and same_environment(env[var])]
    if active:  # the activated environment is this one
        own = f"the activated environment ({active[0]}), which is eagle-audit's own"
    where = f"the activated environment ({searched}) nor in {own}" if searched is not None else own
    raise SourceError(f"no {names} installed in {where}; pass a PATH, --python PYTHON (the interpreter or "
                      f"environment folder where it is installed) or --{wanted[0]}-version X")
