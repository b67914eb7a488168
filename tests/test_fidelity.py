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


# -- kind 7: not every registry row is a target -----------------------------------------------


def test_roles_counted_apart_0_33_0():
    a = release_auditor("0.33.0")
    report = a.scan(resolve_targets(a.registry, []), ["eagle3"])
    s = report.summary()
    # 68 rows of _SPECULATIVE_DECODING_MODELS + the Transformers backend's two ...ForMTP rows
    assert (s["targets"], s["drafters"], s["pooling"]) == (278, 70, 67)
    assert s["supported"] + s["blocked"] + s["unknown"] == s["targets"]
    by = {r.architecture: r for r in report.results}
    assert by["Eagle3LlamaForCausalLM"].role == "drafter"
    assert by["LlamaModel"].role == "pooling"  # _EMBEDDING_MODELS: never generates
    assert by["TransformersEmbeddingModel"].role == "pooling"  # is_pooling_model on its MRO
    assert by["TransformersForCausalLM"].role == "target"
    for r in report.results:
        assert (r.role == "target") == (r.verdict.value != "not-a-target"), r.architecture
        if r.role != "target":
            assert r.findings == [] and r.note
    assert set(report.drafters) == {x for x, r in by.items() if r.role == "drafter"}
    assert report.as_dict()["results"][0]["role"] in ("target", "drafter", "pooling")


def test_model_naming_a_drafter_says_what_it_is_0_33_0():
    import os
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "auditor", "scan", "--vllm-version", "0.33.0", "--model",
                        "Eagle3LlamaForCausalLM", "--format", "json", "--no-progress"],
                       capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert p.returncode == 1, p.stderr
    import json

    (row,) = json.loads(p.stdout)["results"]
    assert (row["role"], row["verdict"]) == ("drafter", "not-a-target")
    assert "_SPECULATIVE_DECODING_MODELS" in row["note"] and "not a target" in row["note"]
