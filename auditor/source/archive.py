"""A release archive read in place (:class:`ArchiveSource`: a ``vllm-X.tar.gz`` sdist, a
``vllm-X-*.whl`` wheel, an SGLang or ``transformers`` archive), never extracted to disk, and
refused past the limits below (a decompression bomb, a huge member count, links out of it)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import pathlib
import stat
import tarfile
import zipfile
import zlib
from typing import IO

from auditor.model.errors import SourceError
from auditor.source.files import MAX_FILE_BYTES, UnreadableFile
from auditor.source.progress import progress_bar
from auditor.source.readers import CountingReader, LimitedReader
from auditor.source.sources import (
    COMPILED_MODULE, DEFAULT_PACKAGE, ENGINE_NAMES, LIBRARIES, MARKERS, PACKAGES, TreeSource,
    best_dist_info, check_package, version_from_metadata
)

_DRAIN_CHUNK = 1 << 20


#: Most bytes an archive may decompress to, all members together (vLLM 0.33.0's sdist: 130 MB).
MAX_ARCHIVE_BYTES = 2 << 30

#: Most bytes of ``vllm/**/*.py`` kept in memory from an archive (vLLM 0.33.0: 41 MB).
MAX_PACKAGE_BYTES = 512 << 20

#: Most members an archive may hold (vLLM 0.33.0's sdist: 9 629).
MAX_MEMBERS = 100_000


def _human(n: int) -> str:
    """``2 GiB``, ``8 MiB``, ``1000 bytes``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


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
            m = COMPILED_MODULE.match(name)
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
    def _pick_prefix(paths: list[str], package: str = DEFAULT_PACKAGE) -> str | None:
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
                    if rest == ["__init__.py"] or rest[:1] == [MARKERS[package]]:
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
            return SourceError(f"{self.path} is not a {ENGINE_NAMES.get(pkg, pkg)} archive: no {pkg}/ package found")
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
                        CountingReader(raw, lambda n: progress_obj.advance(task, n)),
                        buffer_size=1 << 20,
                    )
                else:
                    fileobj = raw
                stream = LimitedReader(self._decompressor(fileobj), MAX_ARCHIVE_BYTES, self._refuse(
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
                            if "__pycache__" not in parts and COMPILED_MODULE.match(parts[-1]):
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
        except EOFError as exc:  # gzip/xz/bz2: "Compressed file ended before the end-of-stream marker..."
            raise self._error(f"it is truncated: the compressed data ends early ({exc})") from None
        except (tarfile.TarError, zlib.error, lzma.LZMAError, OSError, ValueError) as exc:
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
            and COMPILED_MODULE.match(norm.rsplit("/", 1)[-1])]
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
            info = best_dist_info(sorted(tops), self.package)
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
        return version_from_metadata(self._meta_bytes, self.package) if self._meta_bytes else None

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
