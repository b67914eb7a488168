"""Where the ``gate`` and ``matrix`` commands get vLLM releases by version: a listing of the
releases that exist and a fetcher of verified source archives. Both commands take a
:class:`Releases` object, so that a caller (the tests) can inject its own; the default,
:class:`IndexReleases`, is pip's package index through :mod:`auditor.source.fetch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from auditor.source.listing import IndexListing


class Releases(Protocol):
    """What the ``gate`` and ``matrix`` commands need to know about vLLM releases."""

    def listing(self) -> IndexListing:
        """The releases that exist (see :class:`~auditor.source.listing.IndexListing`).

        Raises:
            AuditError: the listing cannot be read.
        """

    def fetch(self, version: str) -> Path:
        """The local path of the verified source archive (``vllm-X.tar.gz``) of ``version``.
        May be called from several threads at once.

        Raises:
            AuditError: the release has no source archive, or it cannot be fetched.
        """


@dataclass
class IndexReleases:
    """The releases of pip's configured package index: :func:`~auditor.source.listing.list_releases`
    (read once per object) and :func:`~auditor.source.fetch.fetch_release` (sha256-checked,
    cached; no network access for an archive already cached). ``progress``: draw download
    progress bars on stderr."""

    progress: bool = False
    #: the distribution whose releases to list and fetch (``vllm``, ``sglang``)
    project: str = "vllm"

    def __post_init__(self) -> None:
        self._listing: IndexListing | None = None

    def listing(self) -> IndexListing:
        """The index's listing for vllm (read on first use).

        Raises:
            SourceError: the index cannot be reached or does not list vllm.
        """
        if self._listing is None:
            from auditor.source.listing import list_releases

            self._listing = list_releases(self.project)
        return self._listing

    def cached(self, version: str) -> bool:
        """Whether :meth:`fetch` answers ``version`` from the cache, with no download
        (:func:`~auditor.source.fetch.archive_cached`)."""
        from auditor.source.fetch import archive_cached

        return archive_cached(version, self.project)

    def fetch(self, version: str) -> Path:
        """The cached, verified ``vllm-<version>.tar.gz`` (downloaded on a miss).

        Raises:
            SourceError: see :func:`~auditor.source.fetch.fetch_release`.
        """
        from auditor.source.fetch import fetch_release

        return fetch_release(version, progress=self.progress, project=self.project)
