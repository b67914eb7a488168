"""Shared helpers for tests on real vLLM release archives (fetched through pip's index, cached)."""

from __future__ import annotations

import functools
import os
import tomllib
from pathlib import Path

from auditor.index.tree import SummaryCache
from auditor.orchestration.scan import Auditor, make_tree
from auditor.source.fetch import fetch_release
from auditor.source.sources import ArchiveSource

REPO = Path(__file__).resolve().parents[1]


def expected_cases() -> list[dict]:
    """The public acceptance cases: ``EAGLE_AUDIT_EXPECTED`` if set, else the authoritative
    ``../shared/acceptance/expected.toml`` beside the repo when it is there (CI), else the copy
    kept in ``tests/data/expected.toml`` (a fresh clone)."""
    shared = REPO.parent / "shared" / "acceptance" / "expected.toml"
    default = shared if shared.is_file() else REPO / "tests" / "data" / "expected.toml"
    path = Path(os.environ.get("EAGLE_AUDIT_EXPECTED", default))
    with open(path, "rb") as fh:
        return tomllib.load(fh)["case"]


def next_cases() -> list[dict]:
    """The cases the open issues must make true: ``../shared/acceptance/next.toml`` beside the
    repo when it is there, else the copy in ``tests/data/next.toml``."""
    shared = REPO.parent / "shared" / "acceptance" / "next.toml"
    path = shared if shared.is_file() else REPO / "tests" / "data" / "next.toml"
    with open(path, "rb") as fh:
        return tomllib.load(fh)["case"]


@functools.lru_cache(maxsize=None)
def release_auditor(version: str, engine: str = "vllm") -> Auditor:
    """An :class:`Auditor` over the real release archive of ``version`` of ``engine`` (``vllm``:
    the sdist; ``sglang``: the sdist, else the wheel for this Python), downloaded once, cached,
    sha256-checked; never skipped: a fetch failure fails the test."""
    archive = fetch_release(version, progress=False, project=engine)
    return Auditor(make_tree(ArchiveSource(archive, package=engine), SummaryCache()))


class SessionReleases:
    """The release listing and fetcher the tests inject into ``gate`` and ``matrix`` (an
    :class:`auditor.orchestration.releases.Releases`): pip's index listing, read once per test
    session; archives from :func:`fetch_release` (cached, sha256-checked, never skipped); and
    :meth:`auditor`, one :class:`Auditor` per release shared by every test of the session."""

    def __init__(self) -> None:
        self._listing = None

    def listing(self):
        """The index's listing for vllm (read on first use)."""
        if self._listing is None:
            from auditor.source.fetch import list_releases

            self._listing = list_releases()
        return self._listing

    def fetch(self, version: str) -> Path:
        """The cached archive of ``version`` (fetched on a miss)."""
        return fetch_release(version, progress=False)

    def auditor(self, version: str) -> Auditor:
        """The session's shared :class:`Auditor` over ``version`` (see :func:`release_auditor`)."""
        return release_auditor(version)
