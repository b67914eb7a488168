"""Issue #2 acceptance on real archives: explain, registry aliases, every architecture resolves."""

from __future__ import annotations

from auditor.index.targets import ClassRef
from auditor.orchestration.explain import explain
from tests.real import release_auditor


def test_explain_deepseek_v3_0_16_0():
    info = explain(release_auditor("0.16.0"), "DeepseekV3ForCausalLM")
    assert info["class"] == "vllm.model_executor.models.deepseek_v2.DeepseekV3ForCausalLM"
    assert info["path"] == "vllm/model_executor/models/deepseek_v2.py"
    assert info["empty_subclass"] is True
    assert info["mro"][1] == "vllm.model_executor.models.deepseek_v2.DeepseekV2ForCausalLM"
    assert "vllm.model_executor.models.interfaces.SupportsEagle" in info["mro"]
    assert "vllm.model_executor.models.interfaces.SupportsEagle3" not in info["mro"]
    assert "torch.nn.Module" in info["mro"]
    assert info["mro"][-1] == "object"


def test_registry_alias_deepseek_v32_0_16_0():
    info = explain(release_auditor("0.16.0"), "DeepseekV32ForCausalLM")
    assert info["class"] == "vllm.model_executor.models.deepseek_v2.DeepseekV3ForCausalLM"


def test_explain_kimi_k25_language_model_0_16_0():
    info = explain(release_auditor("0.16.0"), "KimiK25ForConditionalGeneration")
    assert info["class"] == "vllm.model_executor.models.kimi_k25.KimiK25ForConditionalGeneration"
    assert info["language_model"] == "DeepseekV2ForCausalLM"
    assert info["holder"]["class"] == "vllm.model_executor.models.deepseek_v2.DeepseekV2Model"
    assert "vllm.model_executor.models.interfaces.SupportsMultiModal" in info["mro"]


def test_every_architecture_resolves_0_33_0():
    a = release_auditor("0.33.0")
    archs = a.registry.architectures()
    assert len(archs) == 415
    unresolved = [x for x in archs if not isinstance(a.registry.class_ref(x), ClassRef)]
    assert unresolved == []
    errors = [x for x in archs if a.resolver.mro(a.registry.class_ref(x)).error]
    assert errors == []
