"""True verdicts on the releases people run (issue 9), on the real release archives: the
fidelity cases of ``../shared/acceptance/next.toml`` and one test per kind of fault."""

from __future__ import annotations

import pytest

from auditor.engines.vllm.targets import resolve_targets
from auditor.model.results import TargetSpec
from tests.real import next_cases, release_auditor


def _owned(case: dict) -> bool:
    """The next.toml cases of this issue: not the pipeline-parallel, MTP or SGLang ones (other
    issues own those)."""
    return not ({"pipeline_parallel_size", "engine"} & set(case)) and case.get("method") != "mtp"


FIDELITY = [c for c in next_cases() if _owned(c) and c["method"] == "eagle"]


def _audit(case: dict):
    a = release_auditor(case["vllm"])
    if "model_type" in case:
        spec = TargetSpec(case["architecture"], case["model_type"],
                          case.get("text_model_type", case["model_type"]), "case")
    else:
        (spec,) = resolve_targets(a.registry, [case["architecture"]])
    return a.audit(spec, case["method"])


@pytest.mark.parametrize("case", FIDELITY, ids=[f"{c['vllm']}-{c['architecture']}-{c['method']}" for c in FIDELITY])
def test_next_case(case):
    r = _audit(case)
    assert r.verdict.value == case["verdict"], [f.message for f in r.findings]
    assert set(r.blocking) == set(case["blocking"])
    gates = {f.gate for f in r.findings if f.severity.value == "warning"}
    assert set(case.get("warnings", [])) <= gates


# -- kind 1: EAGLE-1 has no target-side protocol gate ---------------------------------------


def test_eagle1_full_scan_has_no_interface_finding_0_20_0():
    a = release_auditor("0.20.0")
    specs = resolve_targets(a.registry, [])
    report = a.scan(specs, ["eagle"])
    assert len(report.results) == len(specs) > 300
    assert [r.architecture for r in report.results if any(f.gate == "interface" for f in r.findings)] == []
    by = {r.architecture: r for r in report.results}
    for arch in ("Glm4MoeForCausalLM", "Gemma3ForCausalLM"):
        assert by[arch].verdict.value == "supported", [f.message for f in by[arch].findings]
    # eagle3 still checks SupportsEagle3 on the same tree
    (spec,) = resolve_targets(a.registry, ["Gemma3ForCausalLM"])
    assert "interface" in a.audit(spec, "eagle3").blocking
