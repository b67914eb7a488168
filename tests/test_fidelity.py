"""True verdicts on the releases people run (issue 9), on the real release archives: the
fidelity cases of ``../shared/acceptance/next.toml`` and one test per kind of fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.hf.targets import resolve_targets
from auditor.model.results import TargetSpec
from auditor.orchestration.scan import Auditor
from tests.real import release_auditor


def _auditor(version: str, platform: str = "cuda") -> Auditor:
    """The release's auditor for ``platform`` (one index per release, one resolver per platform)."""
    base = release_auditor(version)
    return base if platform == base.platform else Auditor(base.tree, platform=platform)


def _audit(case: dict):
    a = _auditor(case["vllm"], case.get("platform", "cuda"))
    if "model_type" in case:
        spec = TargetSpec(case["architecture"], case["model_type"],
                          case.get("text_model_type", case["model_type"]), "case")
    else:
        (spec,) = resolve_targets(a.registry, [case["architecture"]])
    return a.audit(spec, case["method"])


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
    # unknown is at most 3 % of the targets, and each unknown names what is missing (8 of 278: the
    # generic Transformers-backend classes, whose inner model transformers builds from the
    # checkpoint's model_type, are unknown without --hf-config)
    unknown = [r for r in report.targets if r.verdict.value == "unknown"]
    assert len(unknown) <= 0.03 * s["targets"], sorted(r.architecture for r in unknown)
    for r in unknown:
        for f in r.findings:
            if f.severity.value == "unknown":
                assert "--hf-config" in f.message or "--transformers" in f.message, f.message


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


# -- kind 2: platform-split packages ----------------------------------------------------------


@pytest.mark.parametrize("platform,deepseek_v4,kimi_linear", [
    ("cuda", "vllm.models.deepseek_v4.nvidia.model.DeepseekV4ForCausalLM",
     "vllm.models.kimi_k3.nvidia.model.KimiLinearForCausalLM"),
    ("rocm", "vllm.models.deepseek_v4.amd.model.DeepseekV4ForCausalLM",
     "vllm.models.kimi_k3.amd.linear.KimiLinearForCausalLM"),
    ("xpu", "vllm.models.deepseek_v4.xpu.model.DeepseekV4ForCausalLM",
     "vllm.models.kimi_k3.amd.linear.KimiLinearForCausalLM"),
    ("cpu", "vllm.models.deepseek_v4.cpu.model.DeepseekV4ForCausalLM",
     "vllm.models.kimi_k3.nvidia.model.KimiLinearForCausalLM"),
])
def test_platform_split_packages_bind_the_platform_branch_0_33_0(platform, deepseek_v4, kimi_linear):
    a = _auditor("0.33.0", platform)
    specs = resolve_targets(a.registry, ["DeepseekV4ForCausalLM", "KimiLinearForCausalLM"])
    r = {s.architecture: a.audit(s, "eagle3") for s in specs}
    assert r["DeepseekV4ForCausalLM"].class_name == deepseek_v4
    assert r["KimiLinearForCausalLM"].class_name == kimi_linear
    # the ROCm/XPU Kimi-Linear (amd/linear.py) lacks SupportsEagle3; the CUDA one has it. On the CPU
    # its model_type uses MLA, and the CPU platform forces the MLA block size unless the CPU has AMX
    # tiles (platform-block-size: unknown, the only gate left undecided)
    kimi = r["KimiLinearForCausalLM"]
    if platform == "cpu":
        assert kimi.verdict.value == "unknown" and kimi.blocking == []
        assert {f.gate for f in kimi.findings if f.severity.value == "unknown"} == {"platform-block-size"}
    else:
        assert kimi.verdict.value == ("supported" if "nvidia" in kimi_linear else "blocked")


def test_explain_says_which_branch_it_followed_0_33_0():
    from auditor.orchestration.explain import explain

    info = explain(_auditor("0.33.0", "rocm"), "KimiLinearForCausalLM")
    assert info["platform"] == "rocm"
    (b,) = [b for b in info["branches"] if b["name"] == "KimiLinearForCausalLM" and b["module"] == "vllm.models.kimi_k3"]
    assert b["branch"] == "not (current_platform.device_type == 'tpu') and current_platform.is_rocm()"
    assert b["path"] == "vllm/models/kimi_k3/__init__.py"
    src = release_auditor("0.33.0").tree.source.read(b["path"]).decode().splitlines()
    assert "from .amd.linear import KimiLinearForCausalLM" in src[b["line"] - 1]
    cuda = explain(_auditor("0.33.0"), "KimiLinearForCausalLM")
    (b,) = [b for b in cuda["branches"] if b["name"] == "KimiLinearForCausalLM" and b["module"] == "vllm.models.kimi_k3"]
    assert b["branch"].endswith("not (current_platform.is_rocm()) and not (current_platform.is_xpu())")


def test_scan_platform_all_shows_where_verdicts_differ_0_33_0():
    import json
    import os
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "auditor", "scan", "--vllm-version", "0.33.0", "--platform", "all",
                        "-m", "KimiLinearForCausalLM", "-m", "DeepseekV4ForCausalLM", "-m", "LlamaForCausalLM",
                        "--format", "json", "--no-progress"],
                       capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["platform"] == "all" and list(doc["reports"]) == ["cuda", "rocm", "xpu", "cpu"]
    assert {r["platform"] for r in doc["reports"].values()} == {"cuda", "rocm", "xpu", "cpu"}
    diffs = {d["architecture"]: d["platforms"] for d in doc["differences"]}
    assert set(diffs) == {"KimiLinearForCausalLM", "DeepseekV4ForCausalLM"}  # Llama is the same everywhere
    kimi = diffs["KimiLinearForCausalLM"]
    assert kimi["cuda"]["verdict"] == "supported" and kimi["rocm"]["verdict"] == "blocked"
    assert kimi["rocm"]["blocking"] == ["interface"]


_PLATFORM_PKG = {
    "vllm/platforms/__init__.py": "current_platform = None\n",
    "vllm/models/__init__.py": "",
    "vllm/models/plat/__init__.py": '''from typing import TYPE_CHECKING

from vllm.platforms import current_platform

if TYPE_CHECKING:
    from .nv import PlatForCausalLM
elif current_platform.device_type == "tpu":
    pass
elif current_platform.is_rocm():
    from .amd import PlatForCausalLM  # type: ignore[assignment]
else:
    from .nv import PlatForCausalLM

if TYPE_CHECKING or not current_platform.is_rocm():
    from .nv import OtherForCausalLM
else:
    from .amd import OtherForCausalLM

if current_platform.is_unknown_thing():
    from .amd import Undecided
else:
    from .nv import Undecided
''',
    "vllm/models/plat/nv.py": "class PlatForCausalLM:\n    pass\n\n\nclass OtherForCausalLM:\n    pass\n\n\nclass Undecided:\n    pass\n",
    "vllm/models/plat/amd.py": "class PlatForCausalLM:\n    pass\n\n\nclass OtherForCausalLM:\n    pass\n\n\nclass Undecided:\n    pass\n",
}


def test_conditional_bindings_follow_the_platform(tmp_path):
    from conftest import make_tree, open_auditor

    from auditor.engines.vllm.platforms import platform_conditions
    from auditor.index.conditions import evaluate_condition
    from auditor.index.resolve import Resolver

    tree = open_auditor(make_tree(tmp_path, _PLATFORM_PKG)).tree
    for plat, want in (("cuda", "nv"), ("rocm", "amd"), ("xpu", "nv"), ("cpu", "nv")):
        r = Resolver(tree, platform_conditions(plat))
        for name in ("PlatForCausalLM", "OtherForCausalLM"):
            assert r.resolve_name("vllm.models.plat", name).module == f"vllm.models.plat.{want}", (plat, name)
        # a test the platform data cannot decide keeps the default: the first conditional binding
        assert r.resolve_name("vllm.models.plat", "Undecided").module == "vllm.models.plat.amd"
    # without conditions (the index alone) nothing is evaluated: the first branch, as before
    assert Resolver(tree).resolve_name("vllm.models.plat", "PlatForCausalLM").module == "vllm.models.plat.amd"
    cuda = platform_conditions("cuda")
    assert evaluate_condition("TYPE_CHECKING or not current_platform.is_rocm()", cuda) is True
    assert evaluate_condition("vllm.platforms.current_platform.is_cuda_alike()", platform_conditions("rocm")) is True
    assert evaluate_condition("current_platform.device_type in ('cuda', 'xpu')", cuda) is True
    assert evaluate_condition("current_platform.is_rocm() and foo()", cuda) is False
    assert evaluate_condition("current_platform.is_rocm() or foo()", cuda) is None


# -- kind 8: a gate file that does not parse never passes the gate silently ------------------


def _overlaid(version: str, path: str, extra: str) -> Auditor:
    """The release's auditor with ``extra`` appended to the file at ``path`` (in memory)."""
    from auditor.orchestration.fix import overlay_auditor

    base = release_auditor(version)
    return overlay_auditor(base, {path: base.tree.source.read(path).decode() + extra})


def _one(a: Auditor, arch: str, model_type: str | None = None, text_model_type: str | None = None):
    if model_type:
        return a.audit(TargetSpec(arch, model_type, text_model_type or model_type, "test"), "eagle3")
    (spec,) = resolve_targets(a.registry, [arch])
    return a.audit(spec, "eagle3")


def test_newer_grammar_in_the_allowlist_file_is_parsed_0_16_0():
    a = _overlaid("0.16.0", "vllm/config/speculative.py", "\ntype X = int\n")
    s = a.tree.summary("vllm/config/speculative.py")
    assert s.error is None and s.extras["newer_syntax_lines"]  # libcst accepted it; that line is left out
    r = _one(a, "DeepseekV3ForCausalLM", "deepseek_v3")
    assert r.verdict.value == "blocked"
    assert r.blocking == ["allowlist", "interface", "aux-capture"]


@pytest.mark.parametrize("path,arch,model_type,text_model_type,gate", [
    ("vllm/config/speculative.py", "DeepseekV3ForCausalLM", "deepseek_v3", None, "allowlist"),
    ("vllm/config/speculative.py", "LlamaForCausalLM", "llama", None, "allowlist"),
    ("vllm/v1/spec_decode/eagle.py", "KimiK25ForConditionalGeneration", "kimi_k25", "kimi_k2", "image-token"),
    ("vllm/model_executor/models/interfaces.py", "LlamaForCausalLM", "llama", None, "interface"),
])
def test_a_gate_file_that_does_not_parse_makes_the_gate_unknown_0_16_0(path, arch, model_type, text_model_type, gate):
    a = _overlaid("0.16.0", path, "\ndef broken(:\n    pass\n")
    r = _one(a, arch, model_type, text_model_type)
    assert r.verdict.value != "supported"
    (f,) = [f for f in r.findings if f.gate == gate]
    assert f.severity.value == "unknown" and f.path == path
    assert path in f.message and "does not parse" in f.message
    if arch == "LlamaForCausalLM":
        assert r.verdict.value == "unknown"


def test_an_unreadable_gate_file_makes_the_gate_unknown(tmp_path):
    from conftest import make_tree

    from auditor.index.tree import SummaryCache
    from auditor.orchestration.scan import make_tree as vllm_tree
    from auditor.source.folder import FolderSource

    class Unreadable(FolderSource):
        """A folder whose speculative config cannot be read (as a file without read permission)."""

        def _read(self, relpath):
            if relpath == "vllm/config/speculative.py":
                raise PermissionError(13, "Permission denied")
            return super()._read(relpath)

    a = Auditor(vllm_tree(Unreadable(make_tree(tmp_path)), SummaryCache(enabled=False)))
    (spec,) = resolve_targets(a.registry, ["LlamaForCausalLM"])
    r = a.audit(spec, "eagle3")
    (f,) = [f for f in r.findings if f.gate == "allowlist"]
    assert f.severity.value == "unknown" and f.path == "vllm/config/speculative.py"
    assert "cannot be read (Permission denied)" in f.message
    assert r.verdict.value == "unknown"


# -- kind 3: holders built by a factory that takes the class -----------------------------------


_FACTORY_WRAPPER = '''
import torch.nn as nn
from vllm.model_executor.models.interfaces import SupportsEagle3
from vllm.model_executor.models.llama import LlamaForCausalLM


def build_model(vllm_config=None, prefix="", model_class=None):
    return model_class(vllm_config=vllm_config)


class WrapForCausalLM(nn.Module, SupportsEagle3):
    def __init__(self, vllm_config=None):
        super().__init__()
        self.language_model = build_model(vllm_config=vllm_config, prefix="lm", model_class=LlamaForCausalLM)

    def set_aux_hidden_state_layers(self, layers):
        self.language_model.set_aux_hidden_state_layers(layers)

    def get_eagle3_aux_hidden_state_layers(self):
        return (2,)
'''


def test_holder_built_by_a_factory_handed_the_class(tmp_path):
    from conftest import add_registry_row, audit, make_tree

    folder = make_tree(tmp_path, {"vllm/model_executor/models/wrap.py": _FACTORY_WRAPPER})
    add_registry_row(folder, "WrapForCausalLM", "wrap")
    r = audit(folder, "WrapForCausalLM", text_model_type="llama")
    assert r.holder == "vllm.model_executor.models.llama.LlamaModel"
    assert r.verdict.value == "supported", [f.message for f in r.findings]


def test_llama4_language_model_from_initialize_model_0_16_0():
    from auditor.engines.modelfiles import find_holder

    a = release_auditor("0.16.0")
    r = _one(a, "Llama4ForConditionalGeneration", "llama4", "llama4_text")
    assert r.holder == "vllm.model_executor.models.llama4.Llama4Model"
    assert not [f for f in r.findings if f.gate in ("interface", "aux-capture", "resolve")], [f.message for f in r.findings]
    h = find_holder(a.resolver, a.registry, a.registry.class_ref("Llama4ForConditionalGeneration"))
    assert "initialize_model(..., model_class=Llama4ForCausalLM)" in h.via


# -- kind 4: model_type from the tree, a name guess only last and labelled ----------------------


@pytest.mark.parametrize("version,arch,model_type,how", [
    ("0.33.0", "Qwen3VLMoeForConditionalGeneration", "qwen3_vl_moe", "annotates its hf_config as Qwen3VLMoeConfig"),
    ("0.16.0", "HunYuanVLForConditionalGeneration", "hunyuan_vl", "model_type of HunYuanVLConfig"),
    ("0.33.0", "KimiK25ForConditionalGeneration", "kimi_k25", "maps kimi_k25 to Kimi_K25Config"),
])
def test_model_type_from_the_config_class(version, arch, model_type, how):
    a = release_auditor(version)
    (spec,) = resolve_targets(a.registry, [arch])
    r = a.audit(spec, "eagle3")
    assert r.model_type == model_type
    assert how in r.model_type_source
    assert "guessed" not in r.model_type_source


def test_a_guessed_model_type_is_labelled_and_findings_say_so(tmp_path):
    from conftest import add_registry_row, make_tree, open_auditor

    folder = make_tree(tmp_path, {"vllm/model_executor/models/noconf.py": _NOCONF})
    add_registry_row(folder, "NoConfVLForConditionalGeneration", "noconf", table="_MULTIMODAL_MODELS")
    a = open_auditor(folder)
    (spec,) = resolve_targets(a.registry, ["NoConfVLForConditionalGeneration"])
    r = a.audit(spec, "eagle3")
    assert (r.model_type, r.model_type_source) == ("no_conf_vl", "guessed from the class name")
    assert r.as_dict()["model_type_source"] == "guessed from the class name"
    (img,) = [f for f in r.findings if f.gate == "image-token"]
    assert "guessed from the class name" in img.message


_NOCONF = '''
import torch.nn as nn
from vllm.model_executor.models.llama import LlamaForCausalLM


class NoConfVLForConditionalGeneration(LlamaForCausalLM):
    supports_multimodal = True
'''


# -- kind 6: the Transformers modeling backend captures aux hidden states itself -----------------


def test_transformers_backend_captures_aux_states_itself_0_33_0():
    a = release_auditor("0.33.0")
    for arch in ("TransformersForCausalLM", "TransformersMoEForCausalLM", "Olmo2ForCausalLM",
                 "TransformersMultiModalForCausalLM"):
        (spec,) = resolve_targets(a.registry, [arch])
        r = a.audit(spec, "eagle3")
        (f,) = [f for f in r.findings if f.gate == "aux-capture"]
        assert f.severity.value == "warning", f.message
        assert f.path == "vllm/model_executor/models/transformers/base.py"
        assert "transformers.utils.output_capturing.OutputRecorder" in f.data.requires
        if arch == "Olmo2ForCausalLM":  # transformers' Olmo2Model holds .embed_tokens
            assert r.verdict.value == "supported", [x.message for x in r.findings]
        elif arch != "TransformersMultiModalForCausalLM":
            # the generic classes: which class AutoModel.from_config builds depends on the
            # checkpoint's model_type, so embed-sharing cannot be decided without --hf-config
            assert r.verdict.value == "unknown", [x.message for x in r.findings]
            (e,) = [x for x in r.findings if x.gate == "embed-sharing"]
            assert e.severity.value == "unknown" and "--hf-config" in e.message, e.message


def test_a_setter_that_delegates_is_not_self_capture(minivllm):
    from conftest import open_auditor

    from auditor.engines.modelfiles import captures_itself

    a = open_auditor(minivllm)
    ref = a.registry.class_ref("LlamaForCausalLM")
    assert captures_itself(a.resolver, ref) is None  # its holder LlamaModel captures


# -- kind 5: HF config classes outside the tree: the transformers the release itself requires ----


def test_transformers_fetched_per_the_tree_requirement_0_16_0():
    from packaging.specifiers import SpecifierSet

    a = release_auditor("0.16.0")
    assert a.tree.source.requirement("transformers") == "<5,>=4.56.0"
    r = _one(a, "Llama4ForConditionalGeneration", "llama4", "llama4_text")
    assert r.verdict.value == "supported"
    used = a.transformers_used()
    assert used["version"] in SpecifierSet("<5,>=4.56.0")
    assert "the tree's requirement transformers<5,>=4.56.0" in used["how"]
    report = a.scan([TargetSpec("Llama4ForConditionalGeneration", "llama4", "llama4_text", "test")], ["eagle3"])
    assert report.as_dict()["transformers"]["version"] == used["version"]


def test_an_archive_verdict_ignores_the_installed_transformers(monkeypatch):
    from pathlib import Path

    from auditor.hf import configs as hfconfigs

    stub = Path(__file__).resolve().parents[1] / "fixtures" / "transformers_stub"
    monkeypatch.setattr(hfconfigs, "locate_transformers", lambda explicit=None: stub if explicit is None else None)
    from auditor.index.tree import SummaryCache
    from auditor.orchestration.scan import make_tree as vllm_tree
    from auditor.hf.configs import TransformersFacts

    a = Auditor(vllm_tree(release_auditor("0.16.0").tree.source, SummaryCache()))
    tf = a.ctx.get(TransformersFacts).configs
    assert tf is not None and tf.parent != stub  # not the one "installed" here
    assert "the tree's requirement" in a.transformers_used()["how"]


def test_transformers_version_override_and_bad_value(tmp_path):
    import json
    import os
    import subprocess
    import sys

    base = [sys.executable, "-m", "auditor", "scan", "--vllm-version", "0.16.0", "--model-type", "llama4_text",
            "-m", "Llama4ForConditionalGeneration", "--format", "json", "--no-progress"]
    p = subprocess.run(base + ["--transformers", "4.56.0"], capture_output=True, text=True, env=dict(os.environ),
                       timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["transformers"]["version"] == "4.56.0" and "--transformers 4.56.0" in doc["transformers"]["how"]
    bad = subprocess.run(base + ["--transformers", "not-a-version"], capture_output=True, text=True,
                         env=dict(os.environ), timeout=600)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--transformers" in bad.stderr


def test_wrappers_of_a_checkpoint_language_model_0_33_0():
    a = release_auditor("0.33.0")
    # the module states its language model: cast(NemotronHForCausalLM, self.get_language_model())
    (spec,) = resolve_targets(a.registry, ["NemotronH_Nano_VL_V2"])
    r = a.audit(spec, "eagle3")
    assert r.holder == "vllm.model_executor.models.nemotron_h.NemotronHModel"
    assert not [f for f in r.findings if f.gate == "aux-capture"]
    # the HF config class's default text config (read from transformers), and the verdict says it assumes it
    (spec,) = resolve_targets(a.registry, ["LlavaForConditionalGeneration"])
    r = a.audit(spec, "eagle3")
    assert r.holder == "vllm.model_executor.models.llama.LlamaModel"
    (f,) = [f for f in r.findings if f.gate == "aux-capture"]
    assert f.severity.value == "warning" and "default text_config of LlavaConfig (model_type llama" in f.message
    assert "--hf-config" in f.message
    # the one config class a module imports for its own model, not its encoders' (Qwen3ASRThinkerConfig)
    (spec,) = resolve_targets(a.registry, ["Qwen3ASRForConditionalGeneration"])
    assert a.audit(spec, "eagle3").model_type == "qwen3_asr"
    (spec,) = resolve_targets(a.registry, ["RadioMBartPrefixForCausalLM"])
    assert a.audit(spec, "eagle3").model_type_source == "guessed from the class name"  # RadioConfig is its encoder's


def test_model_type_from_the_config_registry_read_backwards(tmp_path):
    from conftest import make_tree, open_auditor

    # ToyVLConfig without a model_type attribute: vLLM's _CONFIG_REGISTRY still says toy_vl
    cfg = (Path(__file__).resolve().parents[1] / "fixtures/minivllm/vllm/transformers_utils/configs/toy_vl.py").read_text()
    model = (Path(__file__).resolve().parents[1] / "fixtures/minivllm/vllm/model_executor/models/toy_vl.py").read_text()
    folder = make_tree(tmp_path, {
        "vllm/transformers_utils/configs/toy_vl.py": cfg.replace('    model_type = "toy_vl"\n', ""),
        "vllm/model_executor/models/toy_vl.py": model.replace(
            "config = vllm_config.model_config.hf_config",
            "config: ToyVLConfig = vllm_config.model_config.hf_config").replace(
            "from torch import nn", "from torch import nn\nfrom vllm.transformers_utils.configs.toy_vl import ToyVLConfig", 1),
    })
    a = open_auditor(folder)
    (spec,) = resolve_targets(a.registry, ["ToyVLForConditionalGeneration"])
    r = a.audit(spec, "eagle3")
    assert r.model_type == "toy_vl"
    assert "_CONFIG_REGISTRY maps toy_vl to ToyVLConfig" in r.model_type_source
