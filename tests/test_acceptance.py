"""Every case of ../shared/acceptance/expected.toml, on the real release archives."""

from __future__ import annotations

import pytest

from auditor.hf.targets import resolve_targets
from rules.allowlist.facts import allowlist_for
from tests.real import case_id, check_case, expected_cases, release_auditor

CASES = expected_cases()


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_expected_case(case):
    check_case(case)


def test_allowlist_points_at_the_list_assignment_0_16_0():
    a = release_auditor("0.16.0")
    (spec,) = resolve_targets(a.registry, ["DeepseekV3ForCausalLM"], model_type="deepseek_v3")
    r = a.audit(spec, "eagle3")
    (f,) = [f for f in r.findings if f.gate == "allowlist"]
    assert f.path == "vllm/config/speculative.py"
    src = a.tree.source.read(f.path).decode().splitlines()
    assert src[f.line - 1].strip().startswith("eagle3_target_supported = [")


def test_kimi_k2_model_type_expands_to_both_architectures_0_16_0():
    a = release_auditor("0.16.0")
    specs = resolve_targets(a.registry, ["kimi_k2"])
    assert [s.architecture for s in specs] == ["DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"]
    results = {s.architecture: a.audit(s, "eagle3") for s in specs}
    assert all(r.verdict.value == "blocked" for r in results.values())
    assert results["KimiK25ForConditionalGeneration"].blocking == ["allowlist", "interface", "aux-capture", "image-token"]
    aux = next(f for f in results["KimiK25ForConditionalGeneration"].findings if f.gate == "aux-capture")
    assert aux.path == "vllm/model_executor/models/deepseek_v2.py"
    src = a.tree.source.read(aux.path).decode().splitlines()
    assert "islice(self.layers" in src[aux.line - 1]


def test_renamed_allowlist_is_found_by_meaning_0_17_1():
    a = release_auditor("0.17.1")
    path, fact = allowlist_for(a.ctx, "eagle3")
    assert fact.list_name == "aux_hidden_states_supported"
    assert "extract_hidden_states" in fact.methods
    assert allowlist_for(a.ctx, "eagle3") is not None
    assert allowlist_for(release_auditor("0.33.0").ctx, "eagle3") is None  # gone from 0.22


def test_protocol_members_are_read_from_the_tree():
    old = release_auditor("0.16.0").facts.protocol("SupportsEagle3")
    new = release_auditor("0.18.0").facts.protocol("SupportsEagle3")
    assert "get_eagle3_aux_hidden_state_layers" in old.members
    assert "get_eagle3_default_aux_hidden_state_layers" not in old.members
    assert "get_eagle3_default_aux_hidden_state_layers" in new.members
    assert "get_eagle3_aux_hidden_state_layers" not in new.members
    assert {"has_own_lm_head", "has_own_embed_tokens", "supports_eagle3", "set_aux_hidden_state_layers"} <= set(new.members)
