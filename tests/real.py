"""Shared helpers for tests on real vLLM release archives (fetched through pip's index, cached)."""

from __future__ import annotations

import functools
import os
import tomllib
from pathlib import Path

from auditor.index.tree import SummaryCache
from auditor.orchestration.scan import Auditor, make_tree
from auditor.source.fetch import fetch_release
from auditor.source.archive import ArchiveSource

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
            from auditor.source.listing import list_releases

            self._listing = list_releases()
        return self._listing

    def fetch(self, version: str) -> Path:
        """The cached archive of ``version`` (fetched on a miss)."""
        return fetch_release(version, progress=False)

    def auditor(self, version: str) -> Auditor:
        """The session's shared :class:`Auditor` over ``version`` (see :func:`release_auditor`)."""
        return release_auditor(version)


def case_id(case: dict) -> str:
    """A readable test id for an acceptance case: release, architecture, method and run options."""
    release = case.get("sglang") if case.get("engine") == "sglang" else case["vllm"]
    parts = [case.get("engine", "vllm"), release, case["architecture"], case.get("method", "eagle3")]
    if "platform" in case:
        parts.append(case["platform"])
    if "pipeline_parallel_size" in case:
        parts.append(f"pp{case['pipeline_parallel_size']}")
    return "-".join(parts)


def audit_case(case: dict):
    """Audit one acceptance case (``expected.toml`` / ``next.toml`` format) on its real release:
    ``engine`` (``vllm`` or ``sglang``, naming the release under that key), ``architecture``,
    ``method``, and optionally ``model_type``/``text_model_type``, ``platform``,
    ``pipeline_parallel_size``, ``draft_config`` (the drafter's config.json as a table),
    ``parallel_drafting`` and ``num_speculative_tokens``. Returns the :class:`auditor.model.results.TargetResult`."""
    from auditor.hf.targets import resolve_targets
    from auditor.model.options import RunOptions
    from auditor.model.results import TargetSpec

    engine = case.get("engine", "vllm")
    base = release_auditor(case[engine], engine)
    platform = case.get("platform", base.platform)
    a = base if platform == base.platform else _platform_auditor(case[engine], engine, platform)
    if "model_type" in case:
        spec = TargetSpec(case["architecture"], case["model_type"], case.get("text_model_type", case["model_type"]),
                          "case")
    else:
        (spec,) = resolve_targets(a.registry, [case["architecture"]])
    method = case.get("method", "eagle3")
    draft = case.get("draft_config")  # a drafter checkpoint's config.json, inline (a table)
    options = RunOptions(method=method, pipeline_parallel_size=case.get("pipeline_parallel_size", 1),
                         draft_config=dict(draft) if draft is not None else None,
                         draft_config_path="case draft_config" if draft is not None else None,
                         parallel_drafting=case.get("parallel_drafting", False),
                         num_speculative_tokens=case.get("num_speculative_tokens"))
    return a.audit(spec, method, None, options)


@functools.lru_cache(maxsize=None)
def _platform_auditor(version: str, engine: str, platform: str) -> Auditor:
    """The release's auditor for another ``platform`` (the same index, one resolver per platform)."""
    return Auditor(release_auditor(version, engine).tree, platform=platform)


def check_case(case: dict) -> None:
    """Assert that the tool gives ``case`` its verdict, exactly its blocking gates, at least its
    warnings, and a ``file:line`` for every blocking finding."""
    r = audit_case(case)
    assert r.verdict.value == case["verdict"], [f.message for f in r.findings]
    assert set(r.blocking) == set(case["blocking"]), [f.message for f in r.findings]
    gates = {f.gate for f in r.findings if f.severity.value == "warning"}
    assert set(case.get("warnings", [])) <= gates
    for f in r.findings:
        if f.severity.value == "error":
            assert f.path and f.line, f
