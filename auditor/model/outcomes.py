"""Outcomes of the commands that compare releases: the ``gate`` command's outcome per target
(:class:`UpgradeOutcome`) and a target's verdict in one release (:class:`ReleaseVerdict`, a cell
of the ``matrix``).

Both are :class:`enum.StrEnum`: a member is equal to, hashes like and formats as its string
value, so JSON documents and messages carry exactly the strings they always did.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Iterable

from auditor.cache import cacheable
from auditor.model.findings import Verdict


@cacheable
class UpgradeOutcome(StrEnum):
    """What the ``gate`` command says of a candidate release for one target (and, as the worst
    of them, for the whole run)."""

    NATIVE = "native"  #: the candidate supports the target without patches
    PATCHED = "patched"  #: the user's codemods apply and the patched candidate re-scans as supported
    BROKEN = "broken"  #: neither: a gate still blocks (or a warning that is not allowed)

    @classmethod
    def worst(cls, outcomes: Iterable["UpgradeOutcome"]) -> "UpgradeOutcome":
        """``BROKEN`` if any outcome is broken, else ``PATCHED`` if any is patched, else
        ``NATIVE`` (also for no outcome at all)."""
        seen = set(outcomes)
        for o in (cls.BROKEN, cls.PATCHED):
            if o in seen:
                return o
        return cls.NATIVE


@cacheable
class ReleaseVerdict(StrEnum):
    """A target's verdict in one release: a scan's :class:`~auditor.model.findings.Verdict`,
    or ``ABSENT`` (the release's model registry does not have the architecture), or
    ``SKIPPED`` (the release was not read: no source archive, or it could not be fetched).
    The ``matrix`` has one per cell; the ``gate`` reports the first four for its current and
    candidate releases."""

    SUPPORTED = "supported"
    BLOCKED = "blocked"
    UNKNOWN = "unknown"
    ABSENT = "absent"
    SKIPPED = "skipped"

    @classmethod
    def of(cls, verdict: Verdict | None) -> "ReleaseVerdict":
        """The release verdict of a scan's verdict; None (no result: not in the registry) is
        ``ABSENT``."""
        return cls.ABSENT if verdict is None else cls(verdict.value)
