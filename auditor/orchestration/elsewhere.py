"""Another release, for a dead end: when a gate of the tree audited has no local patch (vLLM 0.16.0
with ``-pp 2``: ``pp-aux-transport``, the release has no transport to patch in), which release
eagle-audit can see passes the targets, or has what ``eagle-audit fix`` needs to patch them.

"Can see" means the release archives already in eagle-audit's cache (verified when they were
fetched; read in place, never fetched here): their audits come from the matrix cache when a
``matrix`` or an earlier dead end already ran them, else at most one release is audited (the
newest). Nothing is hard-coded: the answer is whatever those trees say. Pure: returns objects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from packaging.version import InvalidVersion, Version

from auditor.model.findings import fixable
from auditor.model.options import RunOptions
from auditor.model.results import Verdict

#: The names release archives are cached under (``vllm-0.33.0.tar.gz``, ``sglang-0.5.9.tar.gz``,
#: ``sglang-0.5.11-cp311-…whl``).
_ARCHIVE = re.compile(r"^(?P<project>vllm|sglang)-(?P<version>[^-]+?)(?:\.tar\.gz|-.+\.whl)$")


@dataclass
class OtherRelease:
    """Where the targets are supported or fully patchable, among the cached releases newer than
    the tree audited.

    ``version``: the oldest such release found (None: none of those looked at); ``native``: it
    supports every target as released (else ``fix`` patches every blocking gate there);
    ``looked_at``: the releases whose audits were read, oldest first; ``newer``: how many cached
    releases are newer than the tree."""

    version: str | None
    native: bool = False
    looked_at: list[str] = field(default_factory=list)
    newer: int = 0


def cached_releases(engine: str = "vllm") -> list[tuple[Version, Path]]:
    """The release archives of ``engine`` in eagle-audit's archive cache that were verified when
    fetched (a recorded sha256), oldest first, one per version.

    Returns:
        ``[(version, archive path)]``.
    """
    from auditor.source.digests import recorded_sha256
    from auditor.source.pipconfig import archive_cache_dir

    folder = archive_cache_dir()
    found: dict[Version, Path] = {}
    try:
        names = sorted(p.name for p in folder.iterdir())
    except OSError:
        return []
    for name in names:
        m = _ARCHIVE.match(name)
        if m is None or m["project"] != engine:
            continue
        try:
            v = Version(m["version"])
        except InvalidVersion:
            continue
        path = folder / name
        if v not in found and path.is_file() and not path.is_symlink() and recorded_sha256(path) is not None:
            found[v] = path
    return sorted(found.items())


def _serves(audit) -> bool | None:
    """True: every target is supported; False: some is blocked with no full patch; None: every
    target is supported or fully patchable, some needs the patch (or no target resolved: False)."""
    if audit.unresolved or not audit.results:
        return False
    if all(r.verdict is Verdict.SUPPORTED for r in audit.results):
        return True
    if all(r.verdict is Verdict.SUPPORTED or fixable(r.verdict, r.findings) for r in audit.results):
        return None
    return False


def release_with_a_way(engine: str, after: str | None, names: Sequence[str], method: str,
                       model_type: str | None = None, options: RunOptions | None = None,
                       platform: str = "cuda", audit_newest: bool = True) -> OtherRelease:
    """The oldest cached release newer than ``after`` where ``names`` are supported under the run
    ``options``, or where ``eagle-audit fix`` patches every blocking gate of them.

    The matrix cache is read for every newer cached release first (no audit); when it decides
    none, the newest one is audited (``audit_newest``; its audit is cached for the next time).

    Args:
        engine: ``vllm`` or ``sglang``.
        after: the release of the tree audited (None or not a version: nothing is newer).
        names: the targets as the user named them (architectures or model_types).
        method: the speculative method.
        model_type: ``--model-type``, if given.
        options: the run (pipeline-parallel size, drafter config, …).
        platform: the platform audited.
        audit_newest: audit the newest cached release when no cached audit decides.

    Returns:
        An :class:`OtherRelease` (``version`` None when none of the releases looked at will do).
    """
    from auditor.model.errors import AuditError
    from auditor.orchestration.matrix import audit_release, cached_release_audit

    try:
        base = Version(after) if after else None
    except InvalidVersion:
        base = None
    if base is None or not names:
        return OtherRelease(None)
    newer = [(v, p) for v, p in cached_releases(engine) if v > base and not (v.is_prerelease or v.is_devrelease)]
    out = OtherRelease(None, newer=len(newer))
    names = tuple(names)
    audits = {}
    for v, p in newer:
        hit = cached_release_audit(str(p), names, method, model_type, platform, options)
        if hit is not None:
            audits[v] = hit
    if not any(_serves(a) is not False for a in audits.values()) and audit_newest and newer:
        v, p = newer[-1]
        if v not in audits:
            try:
                audits[v] = audit_release(str(v), str(p), names, method, model_type, True, platform, options)
            except AuditError:
                pass
    out.looked_at = [str(v) for v in sorted(audits)]
    for v in sorted(audits):
        serves = _serves(audits[v])
        if serves is not False:
            out.version, out.native = str(v), bool(serves)
            break
    return out


def without_pp(auditor, specs, method: str, hf_config: dict | None, options: RunOptions) -> str | None:
    """The targets of ``specs`` in ``auditor``'s tree with a pipeline-parallel size of 1 and the
    rest of the run ``options`` kept (re-audited): ``supported`` (every one as it is),
    ``patchable`` (every one supported or patched by ``eagle-audit fix``), else None (also when
    the run has no pipeline parallelism)."""
    import dataclasses

    if options.pipeline_parallel_size <= 1:
        return None
    plain = dataclasses.replace(options, pipeline_parallel_size=1)
    results = [auditor.audit(s, method, hf_config, plain) for s in specs]
    if not results:
        return None
    if all(r.verdict is Verdict.SUPPORTED for r in results):
        return "supported"
    if all(r.verdict is Verdict.SUPPORTED or fixable(r.verdict, r.findings) for r in results):
        return "patchable"
    return None


def codemod_exists(gate: str, engine: str = "vllm") -> bool:
    """Whether eagle-audit has a codemod for ``gate`` on trees of ``engine`` (whether or not it
    can patch a given release: a finding whose ``fix_available`` is False although this is True
    is a gate no local patch fixes in that release)."""
    from rules.registry import codemod_for

    return codemod_for(gate, engine) is not None
