"""Analysis truths a second new-user trial of issue 12 questioned, checked as the user meets them:
``eagle-audit`` run as a subprocess on real vLLM releases (fetched through pip's index and cached),
piped at 80 columns, with the checkpoint and drafter configs written here.

- P3: EA312 (aux-layers) cites the model runner's EAGLE-3 read of the drafter's aux layer ids,
  never another method's proposer that reads the same key (``extract_hidden_states``).
- P9: a result heading and the mtp-draft finding name the same model_type (the one the gate used).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(*args) -> subprocess.CompletedProcess:
    """``eagle-audit ARGS`` with stdout and stderr piped, at 80 columns, without colour."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR",)}
    env.update(NO_COLOR="1", COLUMNS="80")
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=REPO, env=env)


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    """A 32-layer Llama checkpoint config and a drafter folder asking for layers 2, 16 and 40."""
    d = tmp_path_factory.mktemp("ea312")
    ck = d / "ck.json"
    ck.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                              "num_hidden_layers": 32}))
    (d / "drafter").mkdir()
    (d / "drafter" / "config.json").write_text(json.dumps(
        {"architectures": ["LlamaForCausalLM"], "eagle_aux_hidden_state_layer_ids": [2, 16, 40]}))
    return ck, d / "drafter"


@pytest.mark.parametrize("version, read, setter", [
    # 0.33.0: _get_eagle3_aux_layers_from_config reads the ids, _setup_eagle3_aux_hidden_state_outputs
    # passes them on; extract_hidden_states.py (another method's proposer) reads the key too
    ("0.33.0", ("_get_eagle3_aux_layers_from_config", 5207), ("_setup_eagle3_aux_hidden_state_outputs", 5188)),
    # 0.16.0: the same reader, called from load_model
    ("0.16.0", ("_get_eagle3_aux_layers_from_config", 4306), ("load_model", 4207)),
])
def test_ea312_cites_the_runners_eagle3_read(configs, version, read, setter):
    ck, drafter = configs
    args = ("scan", "--vllm-version", version, "-m", "LlamaForCausalLM", "--method", "eagle3", "--hf-config", ck,
            "--draft-config", drafter, "-pp", "2", "--no-progress")
    p = run(*args, "--format", "json")
    (r,) = json.loads(p.stdout)["results"]
    (f,) = [f for f in r["findings"] if f["rule"] == "EA312"]
    runner = "vllm/v1/worker/gpu_model_runner.py"
    assert (f["severity"], f["path"], f["line"], f["data"]["out_of_range"]) == ("error", runner, read[1], [40])
    assert f"{read[0]} ({runner}:{read[1]}) reads them and {setter[0]} ({runner}:{setter[1]}) passes them" \
        in f["message"]
    text = run(*args)
    flat = "".join(text.stdout.split())
    assert f"EA312aux-layerserror{runner}:{read[1]}" in flat
    assert "extract_hidden_states" not in text.stdout


def test_kimi_k25_mtp_heading_and_finding_name_the_model_type_the_gate_used():
    args = ("scan", "-m", "kimi_k2", "--method", "all", "--vllm-version", "0.16.0", "--no-progress")
    p = run(*args, "--format", "json")
    (r,) = [r for r in json.loads(p.stdout)["results"]
            if (r["architecture"], r["method"]) == ("KimiK25ForConditionalGeneration", "mtp")]
    assert (r["model_type"], r["text_model_type"]) == ("kimi_k25", "kimi_k2")
    (f,) = [f for f in r["findings"] if f["gate"] == "mtp-draft"]
    # hf_config_override tests the HF config's own model_type, not the text config's
    assert "model_type 'kimi_k25' (hf_config.model_type, which SpeculativeConfig.hf_config_override tests, " \
           "not the text model_type 'kimi_k2'; alias table)" in f["message"]
    text = " ".join(run(*args).stdout.split())
    heading = "KimiK25ForConditionalGeneration (mtp, model_type 'kimi_k25', text model_type 'kimi_k2': alias table)"
    assert heading in text
    assert text.split(heading, 1)[1].split("KimiK25ForConditionalGeneration (", 1)[0].count("'kimi_k25'") == 1
    # a target whose two model_types agree keeps the one-name heading
    assert "DeepseekV3ForCausalLM (mtp, text model_type 'kimi_k2': alias table)" in text
