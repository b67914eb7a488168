"""Synthetic model files shared by the rule examples of several gates (never engine code): a
vLLM-like speculative config with an MTP rewrite and its draft model (``mtp-draft``,
``draft-pp``), and a one-module SGLang-like model with an EAGLE worker (``interface``,
``aux-capture`` on SGLang trees)."""

from __future__ import annotations

EXAMPLE_SPEC = '''"""Speculative decoding settings (synthetic, with an MTP rewrite)."""

from typing import Literal, get_args

MTPModelTypes = Literal["toy_mtp", "mtp"]


class SpeculativeConfig:
    method: str | None = None

    def __post_init__(self) -> None:
        if self.method in get_args(MTPModelTypes) and self.method != "mtp":
            self.method = "mtp"
        if self.model is not None:  # a drafter checkpoint of its own: the rewrite judges its config
            self.draft_model_config = ModelConfig(model=self.model, hf_overrides=SpeculativeConfig.hf_config_override)

    @staticmethod
    def hf_config_override(hf_config):
        initial_architecture = hf_config.architectures[0]
        if hf_config.model_type in ("toy_v3", "toy_v32", "toy_assistant"):
            hf_config.model_type = "toy_mtp"
        if hf_config.model_type == "toy_mtp":
            n_predict = getattr(hf_config, "num_nextn_predict_layers", None)
            hf_config.update({"n_predict": n_predict, "architectures": ["ToyMTPModel"]})
        if initial_architecture == "ToyV2ForCausalLM":
            hf_config.model_type = "toy_v2_mtp"
            hf_config.update({"architectures": ["ToyV2MTPModel"]})
        return hf_config
'''

EXAMPLE_DRAFT = '''
import torch.nn as nn


class ToyMTP(nn.Module):
    """The synthetic MTP draft of ToyV3."""

    def forward(self, input_ids, positions, hidden_states):
        return hidden_states
'''

#: The synthetic tree of the examples: the speculative config above and a registered draft.


_LLAMA_LIKE = '''
import torch.nn as nn


class ToyModel(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.layers = []
        self.layers_to_capture = []

    def forward(self, input_ids, positions):
        hidden_states, residual = input_ids, None
        aux_hidden_states = []
        for i in range(self.start_layer, self.end_layer):
            if i in self.layers_to_capture:
                aux_hidden_states.append(hidden_states + residual)
            hidden_states, residual = self.layers[i](positions, hidden_states, residual)
        if len(aux_hidden_states) == 0:
            return hidden_states
        return hidden_states, aux_hidden_states


class ToyForCausalLM(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.model = ToyModel(config)
        self.capture_aux_hidden_states = False
{setter}{embed_head}

EntryClass = ToyForCausalLM
'''
_SETTER = '''
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.capture_aux_hidden_states = True
        self.model.layers_to_capture = [val + 1 for val in layer_ids]
'''


_EMBED_HEAD = '''
    def get_embed_and_head(self):
        return self.model.embed_tokens.weight, self.lm_head.weight
'''
_SPEC_INFO = '''
class SpeculativeAlgorithm:
    def create_worker(self, server_args):
        if self.is_eagle():
            from sglang.srt.speculative.eagle_worker import EAGLEWorker

            return EAGLEWorker
        raise ValueError("unknown algorithm")
'''
_EAGLE_WORKER = '''
class EAGLEWorker:
    def __init__(self, server_args, target_worker):
        self.target_worker = target_worker
        embed, head = self.target_worker.model_runner.model.get_embed_and_head()
        self.draft_model_runner.model.set_embed_and_head(embed, head)
'''


def worker_files() -> dict[str, str]:
    """A speculative package whose EAGLE worker (the one ``create_worker`` returns under
    ``is_eagle()``) calls ``get_embed_and_head()`` on the target model."""
    return {"sglang/srt/speculative/spec_info.py": _SPEC_INFO,
            "sglang/srt/speculative/eagle_worker.py": _EAGLE_WORKER}


def toy(setter: bool = True, embed_head: bool = False, worker: bool = False) -> dict[str, str]:
    """A one-module SGLang-like model file (``sglang/srt/models/toy.py``), with or without the
    setter and ``get_embed_and_head``, and with or without an EAGLE worker that calls the latter
    (for the rule examples)."""
    files = {"sglang/srt/models/toy.py": _LLAMA_LIKE.format(setter=_SETTER if setter else "",
                                                            embed_head=_EMBED_HEAD if embed_head else "")}
    return {**files, **(worker_files() if worker else {})}
