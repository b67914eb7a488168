"""Issue 19: true verdicts on the 2026 reports, one regression test per kind, each on the real
release archive the kind's public example names (fetched through pip's index, cached), asserting
the exact verdict and the exact blocking gates."""

from __future__ import annotations

from tests.real import audit_case


def _audit(engine: str, version: str, arch: str, method: str = "eagle3", **extra):
    return audit_case({"engine": engine, engine: version, "architecture": arch, "method": method, **extra})


def _gates(r, severity: str) -> set[str]:
    return {f.gate for f in r.findings if f.severity.value == severity}


def test_kind1_forward_delegating_to_super_is_followed():
    """vLLM 0.16.0 ``MistralModel.forward`` returns ``super().forward(...)``; ``LlamaModel.forward``
    captures: the Mistral-3 wrapper is blocked by the allowlist only."""
    r = _audit("vllm", "0.16.0", "Mistral3ForConditionalGeneration")
    assert r.verdict.value == "blocked", [f.message for f in r.findings]
    assert set(r.blocking) == {"allowlist"}, [f.message for f in r.findings]
    assert "aux-capture" not in _gates(r, "error") | _gates(r, "unknown")


def test_kind1_language_model_class_passed_through_super_init():
    """SGLang 0.5.11 ``Qwen3VLMoeForConditionalGeneration.__init__`` hands its own default
    ``language_model_cls=Qwen3MoeLLMModel`` to ``Qwen3VLForConditionalGeneration.__init__``, which
    builds ``self.model = language_model_cls(...)``: followed, no longer unknown."""
    r = _audit("sglang", "0.5.11", "Qwen3VLMoeForConditionalGeneration")
    assert r.verdict.value == "supported", [f.message for f in r.findings]
    assert set(r.blocking) == set()
    assert not _gates(r, "unknown")


def test_kind2_capture_that_the_method_setter_never_sets():
    """SGLang 0.5.11 Qwen3.5: the EAGLE-3 setter writes ``layers_to_capture``; the forward tests
    ``_is_layer_to_capture``, which only ``set_dflash_layers_to_capture`` sets: blocked."""
    r = _audit("sglang", "0.5.11", "Qwen3_5ForConditionalGeneration")
    assert r.verdict.value == "blocked", [f.message for f in r.findings]
    assert set(r.blocking) == {"aux-capture"}
    (f,) = [f for f in r.findings if f.gate == "aux-capture"]
    assert "_is_layer_to_capture" in f.message and "set_dflash_layers_to_capture" in f.message
    assert f.path == "sglang/srt/models/qwen3_5.py" and f.line


def test_kind3_worker_chosen_through_a_registry():
    """SGLang 0.5.5.post2 picks the EAGLE worker through ``register_speculative_algorithm("EAGLE",
    worker_cls=_create_eagle_worker)`` (``speculative/spec_info.py``); ``EAGLEWorker.__init__``
    calls ``get_embed_and_head()``, which MiniMax-M2 lacks: blocked on the interface."""
    r = _audit("sglang", "0.5.5.post2", "MiniMaxM2ForCausalLM")
    assert r.verdict.value == "blocked", [f.message for f in r.findings]
    assert set(r.blocking) == {"interface"}
    (f,) = [f for f in r.findings if f.gate == "interface"]
    assert "get_embed_and_head" in f.message and "sglang/srt/speculative/eagle_worker.py" in f.message


def test_kind1_holder_assigned_in_a_helper_init_calls():
    """vLLM 0.33.0 ``InklingForCausalLM.__init__`` calls ``self._build(...)``, which assigns
    ``self.model = InklingModel(...)`` (``vllm/models/inkling/nvidia/model.py``): the holder is
    found and its forward (a slice loop with no layer index) blocks aux-capture, no longer unknown."""
    r = _audit("vllm", "0.33.0", "InklingForCausalLM")
    assert r.verdict.value == "blocked", [f.message for f in r.findings]
    assert set(r.blocking) == {"aux-capture", "embed-sharing", "interface"}
    (f,) = [f for f in r.findings if f.gate == "aux-capture"]
    assert f.severity.value == "error" and f.path == "vllm/models/inkling/nvidia/model.py"
    assert r.holder.endswith("InklingModel")
