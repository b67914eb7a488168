"""A Python package inside a wheel, read in place (no extraction), for sources other than vLLM.

:class:`WheelPackageSource` exposes the ``<package>/**/*.py`` members of a ``.whl`` (a zip) with
the same reading interface as the vLLM sources (``files``, ``read``, ``root``, ``version``), so
that the index machinery can summarise another project's modules (``transformers``' HF config
classes) statically. Member names are validated like any hostile input: only normalised relative
``<package>/...py`` paths are ever listed or read.
"""

from __future__ import annotations

import email.parser
import pathlib
import zipfile

from auditor.model.errors import SourceError


class WheelPackageSource:
    """The ``package`` folder of a wheel, read on demand.

    Args:
        path: the ``.whl`` file.
        package: the top-level package name inside the wheel (``transformers``).
        lazy: open the wheel on first use instead of now (for a wheel whose sha256 was just
            verified: a cached result checked against that digest never opens it).

    Raises:
        SourceError: the file is missing, not a zip, or holds no ``<package>/__init__.py``
            (with ``lazy``, from the first method that reads it).
    """

    def __init__(self, path: str | pathlib.Path, package: str, lazy: bool = False):
        self.path = pathlib.Path(path)
        self.package = package
        self.label = self.path.name
        self._zip: zipfile.ZipFile | None = None
        self._names: dict[str, str] = {}
        self._meta: str | None = None
        if not lazy:
            self._open()

    def _open(self) -> zipfile.ZipFile:
        """Open the wheel and list its package files, once (at construction, or on first use
        with ``lazy``: a wheel whose sha256 was just verified, that a cached result may only
        need to name). Raises SourceError as the class docstring says."""
        if self._zip is not None:
            return self._zip
        try:
            zf = zipfile.ZipFile(self.path)
        except (OSError, zipfile.BadZipFile) as exc:
            raise SourceError(f"cannot read archive {self.path}: {exc}") from None
        names: dict[str, str] = {}
        meta = None
        package = self.package
        for name in zf.namelist():
            rel = name.replace("\\", "/")
            parts = rel.split("/")
            if any(p in ("", ".", "..") for p in parts) or "\0" in rel:
                continue
            if parts[0] == package and rel.endswith(".py"):
                names[rel] = name
            elif len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
                meta = name
        if f"{package}/__init__.py" not in names:
            raise SourceError(f"{self.path} holds no {package} package")
        self._zip, self._names, self._meta = zf, names, meta
        return zf

    def files(self) -> list[str]:
        """Sorted ``<package>/**/*.py`` paths."""
        self._open()
        return sorted(self._names)

    def read(self, relpath: str) -> bytes:
        """The bytes of one listed file; KeyError for anything else."""
        self._open()
        name = self._names.get(relpath)
        if name is None:
            raise KeyError(relpath)
        try:
            return self._open().read(name)
        except (OSError, zipfile.BadZipFile, EOFError) as exc:
            raise SourceError(f"cannot read archive {self.path}: {exc}") from None

    def root(self) -> None:
        """None: the files are not on disk."""
        return None

    def version(self) -> str | None:
        """The ``Version:`` of the wheel's ``*.dist-info/METADATA``, or None."""
        zf = self._open()
        if self._meta is None:
            return None
        text = zf.read(self._meta).decode("utf-8", errors="replace")
        return email.parser.HeaderParser().parsestr(text, headersonly=True).get("Version")
