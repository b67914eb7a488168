"""Issue 17: the ``embed-sharing`` codemod. The proposer's ``_maybe_share_embeddings`` reads the
target's ``.model`` and then ``.embed_tokens`` or ``.embedding``; GPT-2, Falcon and BLOOM hold the
inner model at ``.transformer``, OPT its embedding at ``.model.decoder.embed_tokens``. ``fix`` adds
read-only properties under the names the proposer reads, found by following the model's own
``embed_input_ids``; where that path is not plain it refuses and says why. The engine's proof of
these patches is in the runtime tier (``tests/runtime``) and ``bench/results``."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import add_registry_row, make_tree

from real import REPO
from rules.embed_sharing.rule import _PROPOSER, _PROPOSER_PATH

#: A GPT-2-shaped text model (synthetic): the inner model at self.transformer, its layers at self.h,
#: its embedding at self.wte; every other gate is one fix knows.
_GPT = '''"""A GPT-2-shaped model (synthetic)."""
import torch
from torch import nn

from .interfaces import SupportsPP


class ToyGPTBlock(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.mlp = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states):
        return hidden_states + self.mlp(hidden_states)


class ToyGPTModel(nn.Module):
    def __init__(self, *, vllm_config=None, prefix="", num_layers=4, hidden_size=16):
        super().__init__()
        self.wte = nn.Embedding(32, hidden_size)
        self.start_layer = 0
        self.end_layer = num_layers
        self.h = nn.ModuleList(ToyGPTBlock(hidden_size) for _ in range(num_layers))

    def embed_input_ids(self, input_ids):
        return self.wte(input_ids)

    def forward(self, input_ids, positions, intermediate_tensors=None):
        hidden_states = self.embed_input_ids(input_ids)
        for layer in self.h[self.start_layer:self.end_layer]:
            hidden_states = layer(hidden_states)
        return hidden_states


class ToyGPTForCausalLM(nn.Module, SupportsPP):
    def __init__(self, *, vllm_config=None, prefix=""):
        super().__init__()
        self.transformer = ToyGPTModel(vllm_config=vllm_config, prefix=prefix)
        self.lm_head = nn.Linear(16, 32, bias=False)

    def embed_input_ids(self, input_ids):
        return self.transformer.embed_input_ids(input_ids)

    def forward(self, input_ids, positions, intermediate_tensors=None):
        return self.transformer(input_ids, positions, intermediate_tensors)

    def compute_logits(self, hidden_states):
        return self.lm_head(hidden_states)
'''

#: An OPT-shaped text model (synthetic): .model is the wrapper of the decoder, which holds the
#: embedding and the layers.
_OPT = (_GPT.replace("ToyGPT", "ToyOPT").replace("self.transformer", "self.model")
        .replace("class ToyOPTModel(nn.Module):", "class ToyOPTDecoder(nn.Module):")
        .replace("class ToyOPTForCausalLM(", '''class ToyOPTModel(nn.Module):
    def __init__(self, *, vllm_config=None, prefix=""):
        super().__init__()
        self.decoder = ToyOPTDecoder(vllm_config=vllm_config, prefix=prefix)

    def embed_input_ids(self, input_ids):
        return self.decoder.embed_input_ids(input_ids)

    def forward(self, input_ids, positions, intermediate_tensors=None):
        return self.decoder(input_ids, positions, intermediate_tensors)


class ToyOPTForCausalLM(''', 1)
        .replace("self.model = ToyOPTModel(", "self.model = ToyOPTModel(").replace("self.wte", "self.embed_tokens"))


def _fix(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="400")
    return subprocess.run([sys.executable, "-m", "auditor", "fix", *map(str, args), "--no-config", "--no-progress"],
                          capture_output=True, text=True, timeout=600, cwd=REPO, env=env)


def _tree(tmp_path, name: str, source: str, arch: str):
    folder = make_tree(tmp_path, {_PROPOSER_PATH: _PROPOSER, f"vllm/model_executor/models/{name}.py": source})
    add_registry_row(folder, arch, name, arch, "_TEXT_GENERATION_MODELS")
    return folder


def _embed_lines(stderr: str) -> list[str]:
    return [line.strip() for line in stderr.splitlines() if line.strip().startswith("[embed-sharing]")]


def _after(stderr: str, arch: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.strip().startswith(f"{arch}: ") and " -> " in line]
    return line.split(" after the patch")[0].split("->", 1)[1]


def test_gpt_shape_gets_model_and_embed_tokens_properties(tmp_path):
    folder = _tree(tmp_path, "toygpt", _GPT, "ToyGPTForCausalLM")
    p = _fix(folder, "-m", "ToyGPTForCausalLM")
    assert _embed_lines(p.stderr) == [
        "[embed-sharing] vllm/model_executor/models/toygpt.py: added the property ToyGPTForCausalLM.model "
        "returning self.transformer",
        "[embed-sharing] vllm/model_executor/models/toygpt.py: added the property ToyGPTModel.embed_tokens "
        "returning self.wte",
    ], p.stderr
    assert "embed-sharing" not in _after(p.stderr, "ToyGPTForCausalLM"), p.stderr
    assert "+    def model(self):" in p.stdout and "+        return self.transformer" in p.stdout, p.stdout
    assert "+    def embed_tokens(self):" in p.stdout and "+        return self.wte" in p.stdout, p.stdout


def test_opt_shape_gets_only_the_embedding_one_level_down(tmp_path):
    folder = _tree(tmp_path, "toyopt", _OPT, "ToyOPTForCausalLM")
    p = _fix(folder, "-m", "ToyOPTForCausalLM")
    assert _embed_lines(p.stderr) == [
        "[embed-sharing] vllm/model_executor/models/toyopt.py: added the property ToyOPTModel.embed_tokens "
        "returning self.decoder.embed_tokens",
    ], p.stderr
    assert "embed-sharing" not in _after(p.stderr, "ToyOPTForCausalLM"), p.stderr


def test_an_embedding_path_that_is_not_plain_is_refused_with_the_reason(tmp_path):
    scaled = _GPT.replace("return self.transformer.embed_input_ids(input_ids)",
                          "return self.transformer.embed_input_ids(input_ids) * self.scale")
    assert scaled != _GPT
    folder = _tree(tmp_path, "toygpt", scaled, "ToyGPTForCausalLM")
    p = _fix(folder, "-m", "ToyGPTForCausalLM")
    assert p.returncode == 1 and _embed_lines(p.stderr) == [], p.stderr
    assert ("embed-sharing (vllm/v1/spec_decode/eagle.py:12): the path from ToyGPTForCausalLM to its token "
            "embedding is not plain (ToyGPTForCausalLM.embed_input_ids is not a single "
            "`return self.<module>(input_ids)`)") in p.stderr, p.stderr
    assert "nothing was written" in p.stderr


def test_a_class_that_binds_the_name_itself_is_not_given_a_property(tmp_path):
    """A class attribute ``model = None`` on the target: the rule sees .model defined, and the
    codemod never shadows a name the class binds."""
    head = "class ToyGPTForCausalLM(nn.Module, SupportsPP):\n"
    bound = _GPT.replace(head, head + "    model = None\n")
    assert bound != _GPT
    folder = _tree(tmp_path, "toygpt", bound, "ToyGPTForCausalLM")
    p = _fix(folder, "-m", "ToyGPTForCausalLM")
    assert not any("ToyGPTForCausalLM.model" in line for line in _embed_lines(p.stderr)), p.stderr


def test_real_release_032_gpt2_falcon_bloom_opt_are_planned():
    """vLLM 0.32.0 (the release the runtime tier runs): each of the four is blocked by embed-sharing
    among others; the properties are planned as named, and for GPT-2, Falcon and BLOOM the patch
    clears every gate on re-scan (the engine's proof: the runtime tier and bench/results)."""
    want = {
        "GPT2LMHeadModel": ["gpt2.py: added the property GPT2LMHeadModel.model returning self.transformer",
                            "gpt2.py: added the property GPT2Model.embed_tokens returning self.wte"],
        "FalconForCausalLM": ["falcon.py: added the property FalconForCausalLM.model returning self.transformer",
                              "falcon.py: added the property FalconModel.embed_tokens returning self.word_embeddings"],
        "BloomForCausalLM": ["bloom.py: added the property BloomForCausalLM.model returning self.transformer",
                             "bloom.py: added the property BloomModel.embed_tokens returning self.word_embeddings"],
        "OPTForCausalLM": ["opt.py: added the property OPTModel.embed_tokens returning self.decoder.embed_tokens"],
    }
    for arch, lines in want.items():
        p = _fix("--vllm-version", "0.32.0", "-m", arch)
        got = [line.removeprefix("[embed-sharing] vllm/model_executor/models/") for line in _embed_lines(p.stderr)]
        assert got == lines, p.stderr
        assert f"{arch}: blocked (" in p.stderr and "embed-sharing" in p.stderr.split(f"{arch}: blocked (")[1].split(")")[0]
        if arch == "OPTForCausalLM":
            # OPTModel.forward hands the layers to self.decoder: the aux-capture codemod refuses it,
            # so fix writes nothing (an answer next.toml accepts) and says why
            assert p.returncode == 1 and _after(p.stderr, arch).strip() == "blocked (aux-capture)", p.stderr
            assert "OPTForCausalLM: aux-capture (vllm/model_executor/models/opt.py): OPTModel.forward has no loop" in p.stderr
            assert "nothing was written" in p.stderr
            continue
        assert p.returncode == 0, p.stderr
        assert _after(p.stderr, arch).strip() == "supported", p.stderr
