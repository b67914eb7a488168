"""The tree the user asked for, from command-line style arguments: :func:`open_source` (a folder,
an archive, a release to fetch, or the installed engine), :func:`release_source` (a fetched
release archive, labelled unverified when no sha256 was recorded) and :func:`library_source`
(a library's archive, such as ``transformers``)."""

from __future__ import annotations

import os
import pathlib

from auditor.model.errors import SourceError
from auditor.source.archive import ArchiveSource
from auditor.source.environments import not_a_tree_or_archive
from auditor.source.folder import FolderSource, installed_source
from auditor.source.sources import ENGINE_NAMES, LIBRARIES, TreeSource, check_package

# -------------------------------------------------------------------------- dispatch


def release_source(archive: pathlib.Path, *, progress: bool = True, package: str | None = None) -> "ArchiveSource":
    """The :class:`ArchiveSource` of a fetched release archive (of the engine ``package``, or
    detected), labelled unverified when no sha256 from the index was recorded for it (fetched
    with ``--allow-unverified``)."""
    from auditor.source.digests import UNVERIFIED, recorded_sha256

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
            raise SourceError(f"--{pkg}-version fetches a {ENGINE_NAMES[pkg]} release, not a {package} tree")
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
