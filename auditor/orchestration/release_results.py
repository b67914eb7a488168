"""Whole-scan results of a release archive or a folder, found before the tree is opened.

A scan of a release archive (``--vllm-version X``, ``--sglang-version X`` or an archive PATH)
is a function of the archive's bytes, the request as the user gave it (targets, methods,
checkpoint config, run options, platform, ``--engine``, ``--transformers``), the tool's code
and, when a verdict read ``transformers``, of the transformers release read. So its report is
cached (the ``results`` kind of :mod:`auditor.cache`) under a key over the archive's verified
sha256 and that request, and consulted before the archive is opened: a hit costs the sha256 of
the archive (none for a fetched release: :func:`auditor.source.fetch.fetch_release` has just
verified it against its recorded digest), not its decompression, index and resolution.

A report whose verdicts read transformers is returned only while the transformers that would be
chosen now is the one it read, with the same files and content
(:func:`auditor.hf.configs.same_transformers`; the choice is made again, as on a cold
run). A report whose verdicts needed a transformers that was not at hand is never stored.

A folder PATH is keyed the same way on its manifest instead of a content hash
(:meth:`auditor.source.folder.FolderSource.manifest`: the file list and every file's size,
mtime, ctime and inode, no file read), which says why that is safe enough. A folder's report is
stored only when every file the scan read is one the manifest covers, and none of them changed in
the two seconds before the manifest was taken.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
from dataclasses import dataclass

from auditor.cache import Store
from auditor.cache import key as cache_key
from auditor.model.results import ScanReport


@dataclass
class _RequirementOnly:
    """Stands for a tree when transformers is chosen again on a hit: all the choice reads of an
    archive is its transformers requirement (an archive never prefers an installed one)."""

    spec: str | None

    def requirement(self, project: str) -> str | None:
        return self.spec if project == "transformers" else None

    def root(self) -> None:
        return None


def archive_sha256(path: str | None, vllm_version: str | None, sglang_version: str | None,
                   progress: bool = False) -> tuple[str, str, str | None] | None:
    """``(sha256, file name, package)`` of the release archive a scan is asked to read, or None
    when it reads no archive (a folder, an installed package), or a release fetched without a
    verified digest. ``package`` is the engine a version option implies (None for a PATH).

    A release is fetched as :func:`auditor.source.fetch.fetch_release` does (verified against its
    recorded sha256, which is returned); an archive PATH is hashed here (not a file larger than
    :data:`auditor.source.archive.MAX_ARCHIVE_BYTES`, nor one that is no archive: opening it
    refuses those).

    Raises:
        AuditError (SourceError): the release cannot be fetched (as opening it would).
    """
    from auditor.source.digests import recorded_sha256
    from auditor.source.fetch import fetch_release

    for version, project in ((vllm_version, "vllm"), (sglang_version, "sglang")):
        if version is not None:
            archive = fetch_release(version, progress=progress, project=project)
            digest = recorded_sha256(archive)
            return (digest, archive.name, project) if digest else None
    if path is None:
        return None
    from auditor.source.archive import MAX_ARCHIVE_BYTES
    from auditor.source.environments import not_a_tree_or_archive

    target = pathlib.Path(path).expanduser()
    try:
        if not target.is_file() or target.stat().st_size > MAX_ARCHIVE_BYTES:
            return None  # a folder; or a file that opening it refuses, unhashed
        if not_a_tree_or_archive(target) is not None:
            return None
        with open(target, "rb") as fh:
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None  # opening it reports why
    return digest, target.name, None


#: A folder whose newest file is younger than this many seconds is not cached by its manifest.
RACY_SECONDS = 2.0


def folder_manifest(path: str | None, package: str | None):
    """``(key, source, age)`` of a folder PATH a scan is asked to read: ``key`` (its manifest,
    package, root and label, see :meth:`auditor.source.folder.FolderSource.manifest`), the
    :class:`auditor.source.folder.FolderSource` (nothing read yet) and the age in seconds of its
    newest entry; None when ``path`` is no folder or opening it will refuse it (opening says why)."""
    if path is None:
        return None
    from auditor.model.errors import AuditError
    from auditor.source.folder import FolderSource

    target = pathlib.Path(path).expanduser()
    try:
        if not target.is_dir():
            return None
        src = FolderSource(target, package=package)
    except (OSError, AuditError):
        return None
    digest, age = src.manifest()
    return ["folder", digest, src.package, str(src.root()), src.label], src, age


class ReleaseResults:
    """The cached report of one request on one release archive (see the module docstring).

    Args:
        archive: ``(sha256, file name, package)`` from :func:`archive_sha256`, or the key of a
            folder from :func:`folder_manifest`.
        request: every input of the scan besides the archive, as given (JSON-able).
        enabled: False (``--no-cache``) turns :meth:`get` into a miss and :meth:`put` into a no-op.
        folder: for a folder, ``(source, age)`` from :func:`folder_manifest`: transformers is
            chosen again for it as for a folder (the one installed beside it or here first), and
            :meth:`put` stores nothing for a folder changed too recently or a scan that read a
            file the manifest does not cover.
    """

    def __init__(self, archive, request: dict, enabled: bool = True, folder=None):
        self.request = request
        self.folder = folder
        self.store = Store("results", enabled)
        self.key = cache_key("release-results", list(archive), request,
                             os.environ.get("EAGLE_AUDIT_TRANSFORMERS"))

    def get(self) -> ScanReport | None:
        """The cached report, or None (a miss, or it read a transformers that is not the one that
        would be chosen now)."""
        import rules.registry  # noqa: F401 (registers the record types a report holds, for decoding)

        entry = self.store.get(self.key, tuple, lambda e: len(e) == 3 and isinstance(e[2], ScanReport))
        if entry is None:
            return None
        state, requirement, report = entry
        if not self._same_transformers(state, requirement):
            return None
        self._valid = (state, requirement)
        return report

    def _same_transformers(self, state: dict | None, requirement: str | None) -> bool:
        """True when ``state`` (what of transformers the cached verdicts read; None: nothing)
        is the transformers that would be chosen now (chosen again, as on a cold run)."""
        if state is None:
            return True
        from auditor.hf.configs import same_transformers, transformers_for_tree

        if self.folder is not None:
            tf, how = transformers_for_tree(self.folder[0], self.request.get("transformers"), prefer_installed=True)
        else:
            tf, how = transformers_for_tree(_RequirementOnly(requirement), self.request.get("transformers"))
        return same_transformers(state, tf, how)

    def put(self, report: ScanReport, auditor) -> None:
        """Store ``report``, computed by ``auditor`` (an
        :class:`auditor.orchestration.scan.Auditor` over the archive), unless its verdicts needed
        a transformers that was not at hand."""
        cacheable, state = auditor.transformers_state()
        if not cacheable:
            return
        if self.folder is not None:
            src, age = self.folder
            if age < RACY_SECONDS or not set(auditor.tree.reads) <= set(src.files()):
                return
        requirement = auditor.tree.source.requirement("transformers") if hasattr(auditor.tree.source,
                                                                                 "requirement") else None
        self.store.put(self.key, (state, requirement, report))
        self._valid = (state, requirement)

    def _rendered_key(self, fmt: str) -> str:
        return cache_key("release-rendered", self.key, fmt)

    def get_rendered(self, fmt: str) -> dict | None:
        """The report rendered in ``fmt`` as a previous run wrote it, with what the exit status
        needs (``{"text", "internal", "supported"}``, see :meth:`put_rendered`), or None. Valid
        under the same conditions as :meth:`get` (the same key, and the transformers it read is
        the one that would be chosen now), without decoding the report."""
        entry = self.store.get(self._rendered_key(fmt), tuple,
                               lambda e: len(e) == 4 and isinstance(e[2], str) and isinstance(e[3], dict))
        if entry is None:
            return None
        state, requirement, text, info = entry
        if not self._same_transformers(state, requirement):
            return None
        return {"text": text, **info}

    def put_rendered(self, fmt: str, text: str, internal: list[str], supported: bool) -> None:
        """Store ``text``, the report of this key rendered in ``fmt`` (a format whose text depends
        on the report alone), with the architectures whose audit failed inside the tool
        (``internal``) and whether every target is supported; only once the report itself was
        found valid or stored here (:meth:`get`, :meth:`put`)."""
        valid = getattr(self, "_valid", None)
        if valid is None:
            return
        self.store.put(self._rendered_key(fmt), (valid[0], valid[1], text,
                                                 {"internal": list(internal), "supported": bool(supported)}))
