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

    Raises:
        SourceError: the file is missing, not a zip, or holds no ``<package>/__init__.py``.
    """

    def __init__(self, path: str | pathlib.Path, package: str):
        self.path = pathlib.Path(path)
        self.package = package
        self.label = self.path.name
        try:
            self._zip = zipfile.ZipFile(self.path)
        except (OSError, zipfile.BadZipFile) as exc:
            raise SourceError(f"cannot read archive {self.path}: {exc}") from None
        self._names: dict[str, str] = {}
        meta = None
        for name in self._zip.namelist():
            rel = name.replace("\\", "/")
            parts = rel.split("/")
            if any(p in ("", ".", "..") for p in parts) or "\0" in rel:
                continue
            if parts[0] == package and rel.endswith(".py"):
                self._names[rel] = name
            elif len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
                meta = name
        if f"{package}/__init__.py" not in self._names:
            raise SourceError(f"{self.path} holds no {package} package")
        self._meta = meta

    def files(self) -> list[str]:
        """Sorted ``<package>/**/*.py`` paths."""
        return sorted(self._names)

    def read(self, relpath: str) -> bytes:
        """The bytes of one listed file; KeyError for anything else."""
        name = self._names.get(relpath)
        if name is None:
            raise KeyError(relpath)
        try:
            return self._zip.read(name)
        except (OSError, zipfile.BadZipFile, EOFError) as exc:
            raise SourceError(f"cannot read archive {self.path}: {exc}") from None

    def root(self) -> None:
        """None: the files are not on disk."""
        return None

    def version(self) -> str | None:
        """The ``Version:`` of the wheel's ``*.dist-info/METADATA``, or None."""
        if self._meta is None:
            return None
        text = self._zip.read(self._meta).decode("utf-8", errors="replace")
        return email.parser.HeaderParser().parsestr(text, headersonly=True).get("Version")
