"""Every rule's VALID/INVALID examples, run through the real scanner on the minivllm fixture;
plus end-to-end verdicts of the fixture's own architectures, gate by gate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import add_registry_row, audit, make_tree, open_auditor

from auditor.engines.modelfiles import target_facts
from auditor.hf.targets import derive_model_type
from auditor.model.findings import Severity
from rules.base import AuditTarget, Example
from rules.registry import RULES

MODELS_DIR = "vllm/model_executor/models/"


def _cases():
    out = []
    for code, rule in RULES.items():
        if not rule.judges("vllm"):
            continue  # SGLang rules: their examples run over fixtures/minisglang (test_sglang.py)
        for kind in ("VALID", "INVALID"):
            for i, ex in enumerate(getattr(rule, kind)):
                if ex.engine not in (None, "vllm"):
                    continue  # laid over fixtures/minisglang (tests/test_sglang.py)
                out.append(pytest.param(rule, kind, ex, id=f"{code}-{kind}-{i}"))
    return out


CASES = _cases()


def _example_tree(tmp_path: Path, ex: Example) -> Path:
    """minivllm with the example's files laid over it (None keeps the base file), and a
    registry row for the example's architecture when the tree does not register it."""
    folder = make_tree(tmp_path, {p: src for p, src in ex.files.items() if src is not None})
    for p, src in ex.files.items():
        if src is None:
            assert (folder / p).is_file(), f"example keeps {p}, which minivllm does not have"
    for arch, module, cls, table in ex.rows:
        add_registry_row(folder, arch, module, cls, table)
    a = open_auditor(folder)
    if ex.architecture not in a.registry.entries:
        defining = [p for p, src in ex.files.items()
                    if src is not None and p.startswith(MODELS_DIR)
                    and re.search(rf"^class {re.escape(ex.architecture)}\b", src, re.M)]
        assert defining, f"no example file under {MODELS_DIR} defines class {ex.architecture}"
        module = Path(defining[0]).stem
        add_registry_row(folder, ex.architecture, module)
    return folder


def _run_rule(folder: Path, rule_cls, ex: Example):
    a = open_auditor(folder)
    assert ex.architecture in a.registry.entries
    facts = target_facts(a.resolver, a.registry, ex.architecture)
    assert facts.ref is not None, f"{ex.architecture} does not resolve: {facts.unresolved}"
    target = AuditTarget(
        ex.architecture, ex.method, facts,
        model_type=ex.model_type or derive_model_type(ex.architecture),
        text_model_type=ex.text_model_type,
        model_type_source="rule example",
        hf_config=ex.hf_config,
        options=ex.options if ex.options.method != "eagle3" else ex.options.with_method(ex.method),
    )
    rule = rule_cls()
    assert rule.applies(target), f"{rule_cls.CODE} does not apply to method {ex.method}"
    return list(rule.check(a.ctx, target))


def test_rules_have_examples():
    assert CASES, "no rule examples at all"
    # every blocking rule with a fix has at least one INVALID example
    for code, rule in RULES.items():
        if rule.BLOCKING and rule.FIX_AVAILABLE and code != "EA304":
            assert rule.INVALID, f"{code} has no INVALID example"


@pytest.mark.parametrize("rule_cls,kind,ex", CASES)
def test_rule_example(tmp_path, rule_cls, kind, ex):
    folder = _example_tree(tmp_path, ex)
    findings = _run_rule(folder, rule_cls, ex)
    assert all(f.rule == rule_cls.CODE and f.gate == rule_cls.GATE for f in findings)
    if kind == "VALID":
        # a VALID example of a blocking rule may still warn; of a warning rule, says nothing
        bad = [f for f in findings if f.severity in (Severity.ERROR, Severity.UNKNOWN) or not rule_cls.BLOCKING]
        assert bad == [], [f.message for f in bad]
    else:
        expected = ex.expect_severity or Severity.ERROR
        hits = [f for f in findings if f.severity is expected]
        assert hits, f"expected a {expected.value} finding of {rule_cls.CODE}, got {[f.message for f in findings]}"
        for f in hits:
            assert f.message
            if expected is Severity.ERROR:
                assert f.path and f.line, f
                assert (folder / f.path).is_file()


# -- the fixture's own architectures, end to end ---------------------------------------


def test_llama_is_supported_with_only_a_pp_warning(minivllm):
    r = audit(minivllm, "LlamaForCausalLM")
    assert r.verdict.value == "supported"
    assert r.class_name == "vllm.model_executor.models.llama.LlamaForCausalLM"
    assert r.holder == "vllm.model_executor.models.llama.LlamaModel"
    assert r.text_model_type == "llama"
    assert r.blocking == []
    assert [(f.rule, f.severity.value) for f in r.findings] == [("EA307", "warning")]
    (f,) = r.findings
    line = (minivllm / f.path).read_text().splitlines()[f.line - 1]
    assert "enumerate(islice(self.layers" in line


def test_toy_v3_is_blocked_by_three_gates(minivllm):
    r = audit(minivllm, "ToyV3ForCausalLM", text_model_type="toy")
    assert r.verdict.value == "blocked"
    assert r.blocking == ["allowlist", "interface", "aux-capture"]
    by_gate = {f.gate: f for f in r.findings}
    allow = by_gate["allowlist"]
    assert allow.path == "vllm/config/speculative.py"
    src = (minivllm / allow.path).read_text().splitlines()
    assert src[allow.line - 1].strip().startswith("eagle3_target_supported = [")
    assert allow.data.entries == ["llama", "qwen"]
    iface = by_gate["interface"]
    # the verdict belongs on the base that holds the code, not on the empty subclass
    assert iface.path == "vllm/model_executor/models/toy.py"
    assert "class ToyV2ForCausalLM(" in (minivllm / iface.path).read_text().splitlines()[iface.line - 1]
    assert iface.data.missing == ["get_eagle3_aux_hidden_state_layers", "set_aux_hidden_state_layers",
                                     "supports_eagle3"]
    assert iface.data.code_holder == "vllm.model_executor.models.toy.ToyV2ForCausalLM"
    aux = by_gate["aux-capture"]
    assert "for layer in islice(self.layers" in (minivllm / aux.path).read_text().splitlines()[aux.line - 1]
    assert r.holder == "vllm.model_executor.models.toy.ToyV2Model"


def test_toy_vl_is_blocked_by_four_gates(minivllm):
    r = audit(minivllm, "ToyVLForConditionalGeneration", text_model_type="toy")
    assert r.verdict.value == "blocked"
    assert r.blocking == ["allowlist", "interface", "aux-capture", "image-token"]
    assert r.language_model == "ToyV2ForCausalLM"
    assert r.holder == "vllm.model_executor.models.toy.ToyV2Model"
    img = next(f for f in r.findings if f.gate == "image-token")
    assert img.path == "vllm/v1/spec_decode/eagle.py"
    assert "= target_model.config.image_token_index" in (minivllm / img.path).read_text().splitlines()[img.line - 1]
    assert img.data.candidates == ["media_placeholder_token_id"]
    assert img.data.config_class == "vllm.transformers_utils.configs.toy_vl.ToyVLConfig"
    iface = next(f for f in r.findings if f.gate == "interface")
    assert "has_own_lm_head" in iface.data.missing  # a member of the protocol's protocol base


def test_allowlist_is_substring_match(minivllm):
    for mt, ok in (("qwen3_moe", True), ("llama4_text", True), ("toy", False), ("lla", False)):
        r = audit(minivllm, "LlamaForCausalLM", text_model_type=mt)
        assert ("allowlist" not in r.blocking) is ok, mt


def test_allowlist_found_by_meaning_under_another_name(tmp_path):
    spec = (Path(__file__).resolve().parents[1] / "fixtures/minivllm/vllm/config/speculative.py").read_text()
    renamed = spec.replace("eagle3_target_supported", "aux_hidden_states_supported").replace(
        'self.method == "eagle3"', 'self.method in ("eagle3", "extract_hidden_states")')
    folder = make_tree(tmp_path, {"vllm/config/speculative.py": renamed})
    r = audit(folder, "ToyV3ForCausalLM", text_model_type="toy")
    f = next(f for f in r.findings if f.gate == "allowlist")
    assert f.data.list_name == "aux_hidden_states_supported"


def test_no_allowlist_means_no_allowlist_gate(tmp_path):
    folder = make_tree(tmp_path, {"vllm/config/speculative.py": "class SpeculativeConfig:\n    pass\n"})
    r = audit(folder, "ToyV3ForCausalLM", text_model_type="toy")
    assert r.blocking == ["interface", "aux-capture"]


def test_toy_fixed_by_interface_and_capture_is_supported(tmp_path):
    toy = (Path(__file__).resolve().parents[1] / "fixtures/minivllm/vllm/model_executor/models/toy.py").read_text()
    toy = toy.replace("from .interfaces import SupportsEagle, SupportsPP",
                      "from .interfaces import SupportsEagle, SupportsEagle3, SupportsPP")
    toy = toy.replace("class ToyV2ForCausalLM(nn.Module, SupportsPP, SupportsEagle):",
                      "class ToyV2ForCausalLM(nn.Module, SupportsPP, SupportsEagle, SupportsEagle3):")
    toy = toy.replace(
        "        for layer in islice(self.layers, self.start_layer, self.end_layer):\n",
        "        aux_hidden_states = []\n"
        "        for idx, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer), start=self.start_layer):\n"
        "            if idx in self.aux_hidden_state_layers:\n"
        "                aux_hidden_states.append(hidden_states + residual)\n",
    )
    toy = toy.replace("        return self.norm(hidden_states + residual)\n",
                      "        hidden_states = self.norm(hidden_states + residual)\n"
                      "        if aux_hidden_states:\n"
                      "            return hidden_states, aux_hidden_states\n"
                      "        return hidden_states\n")
    toy = toy.replace(
        "    def forward(self, input_ids, positions, intermediate_tensors=None):\n        return self.model(",
        "    def set_aux_hidden_state_layers(self, layers):\n        self.model.aux_hidden_state_layers = layers\n\n"
        "    def get_eagle3_aux_hidden_state_layers(self):\n        return (1, 2)\n\n"
        "    def forward(self, input_ids, positions, intermediate_tensors=None):\n        return self.model(",
    )
    folder = make_tree(tmp_path, {"vllm/model_executor/models/toy.py": toy})
    r = audit(folder, "ToyV3ForCausalLM", text_model_type="qwen_toy")
    assert r.verdict.value == "supported", [f.message for f in r.findings]
    assert r.findings == []  # absolute index: no pp-relative warning either


def test_inherited_protocol_stubs_warn(tmp_path):
    """Declaring SupportsEagle3 without overriding its stub methods passes the interface gate
    (as vLLM's isinstance does) but is reported as a stub-member warning."""
    toy = (Path(__file__).resolve().parents[1] / "fixtures/minivllm/vllm/model_executor/models/toy.py").read_text()
    toy = toy.replace("from .interfaces import SupportsEagle, SupportsPP",
                      "from .interfaces import SupportsEagle, SupportsEagle3, SupportsPP")
    toy = toy.replace("class ToyV2ForCausalLM(nn.Module, SupportsPP, SupportsEagle):",
                      "class ToyV2ForCausalLM(nn.Module, SupportsPP, SupportsEagle3):")
    folder = make_tree(tmp_path, {"vllm/model_executor/models/toy.py": toy})
    r = audit(folder, "ToyV3ForCausalLM", text_model_type="llama_toy")
    assert "interface" not in r.blocking
    stubs = sorted(f.data.member for f in r.findings if f.gate == "stub-member")
    assert stubs == ["get_eagle3_aux_hidden_state_layers", "set_aux_hidden_state_layers"]
    assert r.blocking == ["aux-capture"]


def test_stale_member_warns_when_runtime_uses_a_new_name(tmp_path):
    root = Path(__file__).resolve().parents[1] / "fixtures/minivllm/vllm"
    iface = (root / "model_executor/models/interfaces.py").read_text().replace(
        "def get_eagle3_aux_hidden_state_layers", "def get_eagle3_default_aux_hidden_state_layers")
    runner = (root / "v1/worker/gpu_model_runner.py").read_text().replace(
        "get_eagle3_aux_hidden_state_layers", "get_eagle3_default_aux_hidden_state_layers")
    folder = make_tree(tmp_path, {"vllm/model_executor/models/interfaces.py": iface,
                                  "vllm/v1/worker/gpu_model_runner.py": runner})
    r = audit(folder, "LlamaForCausalLM")
    stale = [f for f in r.findings if f.gate == "stale-member"]
    assert [f.data.member for f in stale] == ["get_eagle3_aux_hidden_state_layers"]
    assert stale[0].severity is Severity.WARNING
    # the protocol's own stub of the new name is inherited: supported, with a stub warning
    assert r.verdict.value == "supported"
    assert any(f.gate == "stub-member" and f.data.member == "get_eagle3_default_aux_hidden_state_layers"
               for f in r.findings)


def test_image_token_branch_naming_the_target_passes(tmp_path):
    eagle = (Path(__file__).resolve().parents[1] / "fixtures/minivllm/vllm/v1/spec_decode/eagle.py").read_text()
    eagle = eagle.replace('in ["PixtralForConditionalGeneration"]',
                          'in ["PixtralForConditionalGeneration", "ToyVLForConditionalGeneration"]')
    folder = make_tree(tmp_path, {"vllm/v1/spec_decode/eagle.py": eagle})
    r = audit(folder, "ToyVLForConditionalGeneration", text_model_type="toy")
    assert "image-token" not in r.blocking
    assert not any(f.gate == "image-token" for f in r.findings)


def test_image_token_config_with_the_attribute_passes(tmp_path):
    cfg = (Path(__file__).resolve().parents[1]
           / "fixtures/minivllm/vllm/transformers_utils/configs/toy_vl.py").read_text()
    cfg = cfg.replace("media_placeholder_token_id", "image_token_index")
    folder = make_tree(tmp_path, {"vllm/transformers_utils/configs/toy_vl.py": cfg})
    r = audit(folder, "ToyVLForConditionalGeneration", text_model_type="toy")
    assert not any(f.gate == "image-token" for f in r.findings)


def test_image_token_unknown_without_an_in_tree_config(tmp_path):
    folder = make_tree(tmp_path, {"vllm/transformers_utils/config.py":
                                  "class LazyConfigDict(dict):\n    pass\n\n_CONFIG_REGISTRY = LazyConfigDict()\n"})
    r = audit(folder, "ToyVLForConditionalGeneration", text_model_type="toy")
    (img,) = [f for f in r.findings if f.gate == "image-token"]
    assert img.severity is Severity.UNKNOWN
    assert "--hf-config" in img.message


def test_holder_unknown_when_language_model_comes_from_checkpoint(tmp_path):
    vl = (Path(__file__).resolve().parents[1] / "fixtures/minivllm/vllm/model_executor/models/toy_vl.py").read_text()
    vl = vl.replace('            architectures=["ToyV2ForCausalLM"],\n', "")
    folder = make_tree(tmp_path, {"vllm/model_executor/models/toy_vl.py": vl})
    r = audit(folder, "ToyVLForConditionalGeneration", text_model_type="llama")
    (aux,) = [f for f in r.findings if f.gate == "aux-capture"]
    assert aux.severity is Severity.UNKNOWN
    assert "checkpoint" in aux.message
    assert r.language_model is None


def test_init_model_override_in_subclass_is_followed(tmp_path):
    """``self.model = self._init_model(...)``: a subclass overriding ``_init_model`` changes the holder."""
    sub = (
        "from itertools import islice\n\n"
        "from torch import nn\n\n"
        "from .llama import LlamaForCausalLM, LlamaModel\n\n\n"
        "class PlainModel(LlamaModel):\n"
        "    def forward(self, input_ids, positions, intermediate_tensors=None):\n"
        "        hidden_states = self.embed_tokens(input_ids)\n"
        "        for layer in islice(self.layers, self.start_layer, self.end_layer):\n"
        "            hidden_states, _ = layer(positions, hidden_states, None)\n"
        "        return hidden_states\n\n\n"
        "class PlainForCausalLM(LlamaForCausalLM):\n"
        "    def _init_model(self, vllm_config=None, prefix=''):\n"
        "        return PlainModel(vllm_config=vllm_config, prefix=prefix)\n"
    )
    folder = make_tree(tmp_path, {"vllm/model_executor/models/plain.py": sub})
    add_registry_row(folder, "PlainForCausalLM", "plain")
    r = audit(folder, "PlainForCausalLM", text_model_type="llama")
    assert r.holder == "vllm.model_executor.models.plain.PlainModel"
    assert r.blocking == ["aux-capture"]


def test_unresolvable_architecture_is_unknown(tmp_path):
    folder = make_tree(tmp_path)
    add_registry_row(folder, "GhostForCausalLM", "ghost")
    r = audit(folder, "GhostForCausalLM", text_model_type="llama")
    assert r.verdict.value == "unknown"
    assert [f.rule for f in r.findings] == ["EA300"]
    assert "ghost" in r.findings[0].message


def test_annotation_only_protocol_member_is_satisfied_by_inheriting(tmp_path):
    iface = (Path(__file__).resolve().parents[1]
             / "fixtures/minivllm/vllm/model_executor/models/interfaces.py").read_text()
    iface = iface.replace("    has_own_lm_head: bool = False\n", "    has_own_lm_head: bool\n")
    folder = make_tree(tmp_path, {"vllm/model_executor/models/interfaces.py": iface})
    r = audit(folder, "LlamaForCausalLM")
    assert "interface" not in r.blocking, [f.message for f in r.findings]
