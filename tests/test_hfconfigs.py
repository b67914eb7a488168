"""HF config classes read statically from a transformers source (a synthetic stand-in)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import add_registry_row, make_tree

from auditor.hf.configs import TransformersConfigs, locate_transformers
from auditor.model.results import TargetSpec
from auditor.orchestration.scan import Auditor, open_tree

STUB = Path(__file__).resolve().parents[1] / "fixtures" / "transformers_stub"

_WRAPPER = '''
import torch.nn as nn
from vllm.model_executor.models.interfaces import SupportsEagle3, SupportsMultiModal
from vllm.model_executor.models.llama import LlamaForCausalLM


class {name}(LlamaForCausalLM, SupportsMultiModal):
    pass
'''


def test_model_types_map_to_config_classes():
    tf = TransformersConfigs(STUB)
    assert tf.config_class("toy_vision").dotted == "transformers.models.toy_vision.configuration_toy_vision.ToyVisionConfig"
    assert tf.config_class("toy-audio").dotted == "transformers.models.toy_audio.configuration_toy_audio.ToyAudioConfig"
    assert tf.config_class("nope") is None
    assert locate_transformers(STUB / "transformers") == STUB
    assert locate_transformers(STUB.parent) is None


def _audit(tmp_path, name, model_type, transformers):
    folder = make_tree(tmp_path, {"vllm/model_executor/models/wrap.py": _WRAPPER.format(name=name)})
    add_registry_row(folder, name, "wrap")
    a = Auditor(open_tree(str(folder), None, progress=False, use_cache=False), transformers=transformers)
    return a.audit(TargetSpec(name, model_type, "llama", "test"), "eagle3")


def test_image_token_decided_from_transformers(tmp_path):
    ok = _audit(tmp_path / "a", "ToyVisionForConditionalGeneration", "toy_vision", str(STUB))
    assert "image-token" not in {f.gate for f in ok.findings}
    bad = _audit(tmp_path / "b", "ToyAudioForConditionalGeneration", "toy-audio", str(STUB))
    (f,) = [f for f in bad.findings if f.gate == "image-token"]
    assert f.severity.value == "error"
    assert "ToyAudioConfig" in f.message and "transformers" in f.message


def test_image_token_unknown_without_transformers(tmp_path, monkeypatch):
    import auditor.hf.configs as hf

    monkeypatch.setattr(hf.importlib.util, "find_spec", lambda name: None)
    monkeypatch.delenv("EAGLE_AUDIT_TRANSFORMERS", raising=False)
    r = _audit(tmp_path, "ToyVisionForConditionalGeneration", "toy_vision", None)
    (f,) = [f for f in r.findings if f.gate == "image-token"]
    assert f.severity.value == "unknown"
    assert "--hf-config" in f.message


def test_a_fifo_in_a_given_transformers_folder_never_blocks(tmp_path):
    import os

    from auditor.hf.configs import PackageFolderSource

    pkg = tmp_path / "transformers"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    os.mkfifo(pkg / "configuration_fifo.py")
    src = PackageFolderSource(tmp_path)
    assert "transformers/configuration_fifo.py" in src.files()
    with pytest.raises(KeyError):
        src.read("transformers/configuration_fifo.py")  # refused at once, never opened for a blocking read
