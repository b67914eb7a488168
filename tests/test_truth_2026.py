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


def _with_drafter(tmp_path, doc: dict):
    from auditor.model.options import load_draft_config

    import json
    (tmp_path / "config.json").write_text(json.dumps(doc))
    return load_draft_config(tmp_path)


#: The shape of a Gemma 4 assistant drafter's config.json (transformers' Gemma4AssistantConfig:
#: model_type gemma4_assistant, a gemma4_text text_config narrower than the target's backbone).
GEMMA4_ASSISTANT = {"architectures": ["Gemma4AssistantForCausalLM"], "model_type": "gemma4_assistant",
                    "backbone_hidden_size": 2816, "use_ordered_embeddings": True, "tie_word_embeddings": True,
                    "text_config": {"model_type": "gemma4_text", "hidden_size": 1024, "num_hidden_layers": 4,
                                    "num_kv_shared_layers": 4, "vocab_size": 262144}}


def _audit_with(version: str, arch: str, method: str, options):
    from auditor.hf.targets import resolve_targets
    from tests.real import release_auditor

    a = release_auditor(version)
    (spec,) = resolve_targets(a.registry, [arch])
    return a.audit(spec, method, None, options)


def test_kind5_mtp_drafter_checkpoint_of_its_own_is_judged(tmp_path):
    """vLLM 0.21.0 ``SpeculativeConfig.hf_config_override`` rewrites ``gemma4_assistant`` into
    ``gemma4_mtp`` / ``Gemma4MTPModel`` (registered), and the draft's model config is built from the
    speculative ``model`` with that override: with the assistant's config the Gemma 4 target is
    supported for MTP. Without it the target's own config is judged (gemma4: no branch): blocked,
    with the hint to pass --draft-config. 0.20.1 has no such branch: blocked on the drafter."""
    from auditor.model.options import RunOptions

    dc, path = _with_drafter(tmp_path, GEMMA4_ASSISTANT)
    opts = RunOptions(method="mtp", draft_config=dc, draft_config_path=path)
    r = _audit_with("0.21.0", "Gemma4ForConditionalGeneration", "mtp", opts)
    assert r.verdict.value == "supported", [f.message for f in r.findings]
    assert r.blocking == [] and not _gates(r, "unknown")
    r = _audit_with("0.21.0", "Gemma4ForConditionalGeneration", "mtp", RunOptions(method="mtp"))
    assert (r.verdict.value, r.blocking) == ("blocked", ["mtp-draft"])
    (f,) = [f for f in r.findings if f.gate == "mtp-draft"]
    assert "pass --draft-config" in f.message and f.path == "vllm/config/speculative.py"
    r = _audit_with("0.20.1", "Gemma4ForConditionalGeneration", "mtp", opts)
    assert (r.verdict.value, r.blocking) == ("blocked", ["mtp-draft"])
    (f,) = [f for f in r.findings if f.gate == "mtp-draft"]
    assert "'gemma4_assistant'" in f.message and "drafter checkpoint" in f.message


def test_kind8_parallel_drafting_guard_decided_without_a_token_count():
    """vLLM 0.20.1 ``SpecDecodeBaseProposer.__init__`` calls ``_raise_if_multimodal`` under
    ``needs_extra_input_slots`` (``num_speculative_tokens`` slots with parallel drafting, less the
    one the hidden states fill): true for every count above one, so Gemma 4 with parallel drafting
    is blocked without --num-speculative-tokens, no longer unknown."""
    from auditor.model.options import RunOptions

    r = _audit_with("0.20.1", "Gemma4ForConditionalGeneration", "eagle3", RunOptions(parallel_drafting=True))
    assert r.verdict.value == "blocked", [f.message for f in r.findings]
    assert r.blocking == ["parallel-drafting-mm"] and not _gates(r, "unknown")
    (f,) = [f for f in r.findings if f.gate == "parallel-drafting-mm"]
    assert f.path == "vllm/v1/spec_decode/llm_base_proposer.py" and "_raise_if_multimodal" in f.message
    assert "any number of speculative tokens above one" in f.message


def test_kind8_image_token_read_from_a_transformers_that_has_the_config_class():
    """vLLM 0.19.0 requires transformers<5, whose newest release (4.57.6) has no gemma4; but
    ``gemma4_mm.py`` imports ``Gemma4Config`` from ``transformers.models.gemma4``, so Gemma 4 runs
    only with a transformers that has it: read from the newest release, Gemma4Config defines
    ``image_token_id``, not the ``image_token_index`` the proposer's fallback reads
    (``v1/spec_decode/eagle.py``): image-token blocks, no longer unknown."""
    r = _audit("vllm", "0.19.0", "Gemma4ForConditionalGeneration")
    assert r.verdict.value == "blocked", [f.message for f in r.findings]
    assert set(r.blocking) == {"allowlist", "interface", "aux-capture", "image-token"}
    assert not _gates(r, "unknown")
    (f,) = [f for f in r.findings if f.gate == "image-token"]
    assert f.path == "vllm/v1/spec_decode/eagle.py" and f.line and f.data.candidates == ["image_token_id"]
    assert "transformers.models.gemma4, which transformers 4.57.6 lacks" in f.message


def _audit_sglang_with(version: str, arch: str, method: str, options):
    from auditor.hf.targets import resolve_targets
    from tests.real import release_auditor

    a = release_auditor(version, "sglang")
    (spec,) = resolve_targets(a.registry, [arch])
    return a.audit(spec, method, None, options)


def test_kind4_sglang_eagle_method_requires_get_embed_and_head():
    """SGLang runs EAGLE-1 with the same workers as EAGLE-3 (``is_eagle()``): 0.5.10.post1
    ``speculative/eagle_worker.py`` calls ``get_embed_and_head()`` on the target, which
    ``Qwen2MoeForCausalLM`` lacks: ``--method eagle`` is audited (it was refused) and blocked on
    the interface; the EAGLE-3 setter is not required for it (LlamaForCausalLM has both)."""
    from auditor.model.options import RunOptions

    r = _audit_sglang_with("0.5.10.post1", "Qwen2MoeForCausalLM", "eagle", RunOptions(method="eagle"))
    assert (r.verdict.value, r.blocking) == ("blocked", ["interface"]), [f.message for f in r.findings]
    (f,) = [f for f in r.findings if f.gate == "interface"]
    assert f.data.missing == ["get_embed_and_head"] and f.path == "sglang/srt/models/qwen2_moe.py"
    r = _audit_sglang_with("0.5.10.post1", "LlamaForCausalLM", "eagle", RunOptions(method="eagle"))
    assert (r.verdict.value, r.blocking) == ("supported", [])


def test_kind4_sglang_draft_config_is_judged(tmp_path):
    """SGLang 0.5.11: a drafter whose architecture a model module registers (``LlamaForCausalLMEagle3``,
    ``models/llama_eagle3.py`` EntryClass) passes; one no EntryClass lists is blocked by
    ``draft-registry`` at the model registry's refusal (``models/registry.py``); without
    --draft-config the gate is listed as not evaluated."""
    from auditor.model.options import RunOptions

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    good, gpath = _with_drafter(tmp_path / "a", {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama"})
    r = _audit_sglang_with("0.5.11", "LlamaForCausalLM", "eagle3", RunOptions(draft_config=good, draft_config_path=gpath))
    assert (r.verdict.value, r.blocking) == ("supported", []), [f.message for f in r.findings]
    assert "draft-registry" not in r.not_evaluated
    bad, bpath = _with_drafter(tmp_path / "b", {"architectures": ["Qwen3ForCausalLMEagle3"], "model_type": "qwen3"})
    r = _audit_sglang_with("0.5.11", "LlamaForCausalLM", "eagle3", RunOptions(draft_config=bad, draft_config_path=bpath))
    assert (r.verdict.value, r.blocking) == ("blocked", ["draft-registry"]), [f.message for f in r.findings]
    (f,) = [f for f in r.findings if f.gate == "draft-registry"]
    assert f.rule == "EA406" and f.path == "sglang/srt/models/registry.py" and f.line
    r = _audit_sglang_with("0.5.11", "LlamaForCausalLM", "eagle3", RunOptions())
    assert "draft-registry" in r.not_evaluated


def test_kind4_sglang_run_options_it_does_not_model_are_listed():
    """SGLang 0.5.11 with -pp 2 and --parallel-drafting: no SGLang rule models either, so both are
    listed as not evaluated (JSON and the table's 'not checked' line), never dropped silently."""
    from auditor.model.options import RunOptions
    from auditor.render.report import not_checked

    r = _audit_sglang_with("0.5.11", "LlamaForCausalLM", "eagle3",
                           RunOptions(pipeline_parallel_size=2, parallel_drafting=True))
    assert r.verdict.value == "supported"
    assert "not modelled on SGLang trees" in r.not_evaluated["pp-aux-transport"]
    assert "not modelled on SGLang trees" in r.not_evaluated["parallel-drafting-mm"]
    items = not_checked(r, "sglang")
    assert "pipeline parallelism (-pp N) (asked for; not modelled on SGLang trees)" in items
    assert "parallel drafting (--parallel-drafting) (asked for; not modelled on SGLang trees)" in items
    # a plain run asks for neither
    r = _audit_sglang_with("0.5.11", "LlamaForCausalLM", "eagle3", RunOptions())
    assert not any("not modelled" in w for w in r.not_evaluated.values())


def test_kind6_mtp_drafter_embedding_width_guard_warns(tmp_path):
    """vLLM 0.25.1: Gemma 4's MTP draft (``Gemma4MTPModel`` → ``Gemma4MTP`` → its inner
    ``Gemma4MultiTokenPredictor``, ``gemma4_mtp.py``) builds ``embed_tokens`` at ``hidden_size`` and a
    ``pre_projection`` of ``2 * backbone_hidden_size`` over ``cat(embedding, hidden states)``, and
    the proposer's ``_maybe_share_embeddings`` (``llm_base_proposer.py``) keeps the draft's own
    embedding when the widths differ, for MTP drafts too: a warning at the guard, with the
    assistant's widths (MoE backbone 2816, assistant 1024). 0.27.0 runs that check for EAGLE drafts
    only (and Gemma4Proposer shares unconditionally): no warning. The verdict stays supported."""
    from auditor.model.options import RunOptions

    dc, path = _with_drafter(tmp_path, GEMMA4_ASSISTANT)
    opts = RunOptions(method="mtp", draft_config=dc, draft_config_path=path)
    r = _audit_with("0.25.1", "Gemma4ForConditionalGeneration", "mtp", opts)
    assert (r.verdict.value, r.blocking) == ("supported", []), [f.message for f in r.findings]
    (f,) = [f for f in r.findings if f.gate == "draft-embed-width"]
    assert f.severity.value == "warning" and f.rule == "EA316"
    assert f.path == "vllm/v1/spec_decode/llm_base_proposer.py" and f.line
    assert f.data.draft.endswith("gemma4_mtp.Gemma4MultiTokenPredictor")
    assert (f.data.embed_width, f.data.projection_width) == ("self.hidden_size", "self.backbone_hidden_size")
    assert f.data.widths == {"hidden_size": 1024, "backbone_hidden_size": 2816}
    r = _audit_with("0.27.0", "Gemma4ForConditionalGeneration", "mtp", opts)
    assert (r.verdict.value, r.blocking) == ("supported", [])
    assert "draft-embed-width" not in {f.gate for f in r.findings}


def test_kind6_eagle_drafter_without_an_lm_head_warns(tmp_path):
    """vLLM 0.11.2: an EAGLE drafter trained on ``Llama4ForCausalLM`` is rewritten into
    ``EagleLlama4ForCausalLM`` (``llama4_eagle.py``), whose ``__init__`` runs ``nn.Module.__init__``
    and assigns no ``lm_head`` (its ``load_weights`` skips ``lm_head.``); the proposer
    (``v1/spec_decode/eagle.py``, ``EagleProposer.load_model``) reads ``self.model.lm_head`` when
    ``has_own_lm_head`` is set: a warning there. The target's verdict is unchanged (supported).
    0.25.1's EagleLlama4ForCausalLM assigns its own lm_head: no warning."""
    from auditor.model.options import RunOptions

    dc, path = _with_drafter(tmp_path, {"architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text"})
    opts = RunOptions(method="eagle", draft_config=dc, draft_config_path=path)
    r = _audit_with("0.11.2", "Llama4ForConditionalGeneration", "eagle", opts)
    assert (r.verdict.value, r.blocking) == ("supported", []), [f.message for f in r.findings]
    (f,) = [f for f in r.findings if f.gate == "draft-lm-head"]
    assert f.severity.value == "warning" and f.rule == "EA317"
    assert f.path == "vllm/v1/spec_decode/eagle.py" and f.line
    assert f.data.draft == "vllm.model_executor.models.llama4_eagle.EagleLlama4ForCausalLM" and f.data.skips
    assert "nn.Module.__init__" in f.data.via
    r = _audit_with("0.25.1", "Llama4ForConditionalGeneration", "eagle", opts)
    assert "draft-lm-head" not in {f.gate for f in r.findings}, [f.message for f in r.findings]
    # without a drafter config the gate is not evaluated, and says so
    r = _audit_with("0.11.2", "Llama4ForConditionalGeneration", "eagle", RunOptions(method="eagle"))
    assert "draft-lm-head" in r.not_evaluated and "--draft-config" in r.not_evaluated["draft-lm-head"]


def test_kind8_a_transformers_you_name_is_the_one_read():
    """With ``--transformers 4.57.6`` named on the command line, vLLM 0.19.0's Gemma 4 image-token
    gate reads that release (which has no gemma4): unknown, as before; the newest release is read
    only in place of the one picked from the tree's requirement."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    p = subprocess.run([sys.executable, "-m", "auditor", "scan", "--vllm-version", "0.19.0", "-m",
                        "Gemma4ForConditionalGeneration", "--transformers", "4.57.6", "-f", "json", "--no-progress"],
                       capture_output=True, text=True, timeout=600, cwd=Path(__file__).resolve().parents[1])
    assert p.returncode == 1, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    (f,) = [f for f in r["findings"] if f["gate"] == "image-token"]
    assert f["severity"] == "unknown" and "transformers 4.57.6" in f["message"]


def test_cases_in_the_acceptance_format_take_the_drafter_and_parallel_drafting():
    """The acceptance-case format (``tests/real.py`` ``audit_case``) carries ``draft_config``,
    ``parallel_drafting`` and ``num_speculative_tokens``, so kinds 5, 6 and 8 can be written as
    cases: the same verdicts as above."""
    r = _audit("vllm", "0.21.0", "Gemma4ForConditionalGeneration", "mtp", draft_config=GEMMA4_ASSISTANT)
    assert (r.verdict.value, r.blocking) == ("supported", [])
    r = _audit("vllm", "0.25.1", "Gemma4ForConditionalGeneration", "mtp", draft_config=GEMMA4_ASSISTANT)
    assert (r.verdict.value, r.blocking, _gates(r, "warning")) == ("supported", [], {"draft-embed-width"})
    r = _audit("vllm", "0.20.1", "Gemma4ForConditionalGeneration", parallel_drafting=True, num_speculative_tokens=1)
    assert r.verdict.value == "unknown", [f.message for f in r.findings]  # one token: the tree cannot tell
    r = _audit("vllm", "0.20.1", "Gemma4ForConditionalGeneration", parallel_drafting=True)
    assert (r.verdict.value, r.blocking) == ("blocked", ["parallel-drafting-mm"])
