"""Breaker pass 28 on the gate ``platform-block-size`` (EA318): trees where the gate said
``blocked`` though Python, run as written, would not force the size or would not refuse it
(a local rebound in a nested block or by ``+=``/tuple/``del``, code after a ``return``, a write
undone later in the same branch, a method or backend method rebound after its ``def``, an
early return for every model in ``get_attn_backend_cls``, a backend class of the same name in
another module, a return on a user option before the forcing, a write on another object). Each
test builds a synthetic tree from the rule's own example and checks the severity; the untouched
example is the control.

Then issue 20's closures: a refusal behind a lambda helper (supported on main, the engine refuses),
a helper or route hidden by an instance attribute or that is a generator/coroutine function
(blocked on main, the raise never runs), and an SGLang patcher outside ``sglang/srt/`` that
writes a model module's ``EntryClass`` through ``sys.modules``/``importlib.import_module``
(supported on main)."""

from __future__ import annotations

import pytest

from auditor.model.findings import Severity
from auditor.model.options import RunOptions
from rules.base import Example
from rules.platform_block_size.rule import PlatformBlockSizeRule, _tree
from tests.test_rule_examples import _example_tree, _run_rule

CPU = "vllm/platforms/cpu.py"
FORCED = "        if mla and not fast:\n            cache_config.block_size = 16\n"


def _severities(tmp_path, files: dict[str, str]) -> list[str]:
    ex = Example(files, "LlamaForCausalLM", text_model_type="deepseek_v3", options=RunOptions(platform="cpu"))
    folder = _example_tree(tmp_path, ex)
    return [f.severity.value for f in _run_rule(folder, PlatformBlockSizeRule, ex)]


def _with(path: str, old: str, new: str) -> dict[str, str]:
    files = _tree("False")
    assert old in files[path], old
    files[path] = files[path].replace(old, new)
    return files


def test_control_blocks(tmp_path):
    assert _severities(tmp_path, _tree("False")) == [Severity.ERROR.value]


# -- the forcing test, through local names --------------------------------------------------------

@pytest.mark.parametrize("rebind", [
    "        if torch.cpu._is_amx_tile_supported():\n            fast = True\n",   # in a nested block
    "        fast |= torch.cpu._is_amx_tile_supported()\n",                        # augmented
    "        fast, _n = torch.cpu._is_amx_tile_supported(), 0\n",                  # a tuple target
    "        fast = other = torch.cpu._is_amx_tile_supported()\n",                 # two targets
    "        fast: bool = torch.cpu._is_amx_tile_supported()\n",                   # annotated
    "        for fast in (torch.cpu._is_amx_tile_supported(),):\n            pass\n",
    "        with probe() as fast:\n            pass\n",
    "        if (fast := torch.cpu._is_amx_tile_supported()):\n            pass\n",
    "        from vllm.hw import fast\n",
])
def test_a_later_binding_of_a_local_is_not_the_stale_one(tmp_path, rebind):
    """``fast`` is False, then bound again before the test by what the tree cannot decide: the
    forcing is undecided, not certain."""
    files = _with(CPU, FORCED, rebind + FORCED)
    assert _severities(tmp_path, files) == [Severity.UNKNOWN.value]


def test_a_deleted_local_is_not_followed(tmp_path):
    files = _with(CPU, FORCED, "        del fast\n" + FORCED)
    assert Severity.ERROR.value not in _severities(tmp_path, files)


def test_code_after_a_return_forces_nothing(tmp_path):
    files = _with(CPU, FORCED, "        return\n" + FORCED)
    assert _severities(tmp_path, files) == []


def test_a_write_undone_later_in_the_branch(tmp_path):
    files = _with(CPU, FORCED, FORCED + "            cache_config.block_size = 32\n")
    assert Severity.ERROR.value not in _severities(tmp_path, files)


def test_a_write_maybe_undone_in_a_nested_if(tmp_path):
    files = _with(CPU, FORCED, FORCED + "            if torch.cpu._is_amx_tile_supported():\n"
                                        "                cache_config.block_size = 32\n")
    assert _severities(tmp_path, files) == [Severity.UNKNOWN.value]


def test_a_method_rebound_after_its_def(tmp_path):
    files = _with(CPU, FORCED, FORCED + "\n    check_and_update_config = classmethod(lambda cls, c: None)\n")
    assert _severities(tmp_path, files) == []


def test_a_method_defined_twice_the_first_is_dead(tmp_path):
    files = _with(CPU, FORCED, FORCED + "\n    @classmethod\n    def check_and_update_config(cls, vllm_config):\n"
                                        "        pass\n")
    assert _severities(tmp_path, files) == []


def test_a_helper_never_called_is_not_a_certain_refusal(tmp_path):
    files = _with(CPU, "def check_and_update_config(", "def _old_check(")
    assert Severity.ERROR.value not in _severities(tmp_path, files)


def test_an_earlier_return_on_a_user_option_leaves_it_undecided(tmp_path):
    files = _with(CPU, FORCED, "        if cache_config.user_specified_block_size:\n            return\n" + FORCED)
    assert _severities(tmp_path, files) == [Severity.UNKNOWN.value]


def test_an_earlier_return_for_models_without_mla_keeps_the_block(tmp_path):
    files = _with(CPU, FORCED, "        if not mla:\n            return\n" + FORCED)
    assert _severities(tmp_path, files) == [Severity.ERROR.value]


def test_a_block_size_written_on_another_object(tmp_path):
    files = _with(CPU, "            cache_config.block_size = 16",
                  "            scheduler_config = vllm_config.scheduler_config\n"
                  "            scheduler_config.block_size = 16")
    assert Severity.ERROR.value not in _severities(tmp_path, files)


# -- the drafter's backend --------------------------------------------------------------------------

def test_get_attn_backend_cls_returns_early_for_every_model(tmp_path):
    files = _with(CPU, "        if attn_selector_config.use_mla:",
                  '        return "vllm.v1.attention.backends.flex.FlexBackend"\n'
                  "        if attn_selector_config.use_mla:")
    assert _severities(tmp_path, files) == []


def test_backend_method_rebound_after_its_def(tmp_path):
    path = "vllm/v1/attention/backends/cpu_attn.py"
    files = _with(path, "        return [MultipleOf(32)]\n",
                  "        return [MultipleOf(32)]\n\n"
                  "    get_supported_kernel_block_sizes = staticmethod(lambda kv_cache_spec=None: [16])\n")
    assert _severities(tmp_path, files) == []


def test_enum_member_rebound_to_what_the_tree_cannot_follow(tmp_path):
    path = "vllm/v1/attention/backends/registry.py"
    files = _with(path, '    CPU_ATTN = "vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend"\n',
                  '    CPU_ATTN = "vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend"\n'
                  '    CPU_ATTN = _path("cpu16")\n')
    assert Severity.ERROR.value not in _severities(tmp_path, files)


def test_backend_class_of_the_same_name_in_another_module(tmp_path):
    """The enum names cpu_attn.CPUAttentionBackend, which takes 16; another module's class of the
    same name takes multiples of 32. The named module decides."""
    files = _with("vllm/v1/attention/backends/cpu_attn.py", "[MultipleOf(32)]", "[16]")
    files["vllm/v1/attention/backends/aaa_legacy.py"] = (
        '"""Legacy (synthetic)."""\n\n\nclass CPUAttentionBackend:\n    @staticmethod\n'
        "    def get_supported_kernel_block_sizes(kv_cache_spec=None):\n        return [MultipleOf(32)]\n")
    assert _severities(tmp_path, files) == []


def test_select_raise_after_a_return_is_dead(tmp_path):
    files = _with("vllm/v1/worker/utils.py", "    if all(", "    return size\n    if all(")
    assert _severities(tmp_path, files) == []


def test_mla_check_returning_false_first(tmp_path):
    path = "vllm/transformers_utils/model_arch_config_convertor.py"
    files = _with(path, "        return self.hf_text_config.model_type in",
                  "        return False\n        return self.hf_text_config.model_type in")
    assert _severities(tmp_path, files) == []


# -- issue 20's closures: the config's helpers and routes --------------------------------------------

from tests.conftest import make_tree  # noqa: E402
from tests.test_hostile_bindings import scan  # noqa: E402
from tests.test_hostile_engines3 import SPEC_PATH, _refusing  # noqa: E402
from tests.test_hostile_gaps5 import IS_EAGLE3, SETUP, _if, _member  # noqa: E402

RAISING = "    def _setup(self):\n        raise RuntimeError('broken')\n\n"


def _verdict(tmp_path, text: str) -> str:
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: text}), "LlamaForCausalLM")
    assert (code == 0) == (res["verdict"] == "supported"), res
    return res["verdict"]


@pytest.mark.parametrize("text", [
    # the engine refuses eagle3 for every target: a helper bound by an assignment, not a def
    _member(_refusing(_if("self._is_eagle3()")), "    _is_eagle3 = lambda self: self.method == 'eagle3'\n\n"),
    _refusing(_if("_is_eagle3(self)"), tail="\n\n_is_eagle3 = lambda c: c.method == 'eagle3'\n"),
], ids=["class-attribute-lambda", "module-lambda"])
def test_refusal_behind_a_lambda_helper_is_not_supported(tmp_path, text):
    """main: supported (the call was run state); the engine raises for every eagle3 target."""
    assert _verdict(tmp_path, text) == "unknown"


@pytest.mark.parametrize("text", [
    # the instance's attribute hides the class's helper / route
    _member(_refusing("        self._is_eagle3 = lambda: False\n" + _if("self._is_eagle3()")), IS_EAGLE3),
    _member(_refusing("        self._setup = lambda: None\n        self._setup()\n"), RAISING),
    # a call of a generator or coroutine function runs none of its body
    _refusing("        _setup(self)\n", tail="\n\ndef _setup(c):\n    raise ValueError('broken')\n    yield\n"),
    _refusing("        _setup(self)\n", tail="\n\ndef _setup(c):\n    if c.num_speculative_tokens > 99:\n"
                                          "        yield 1\n    raise ValueError('broken')\n"),
    _refusing("        _setup(self)\n", tail="\n\nasync def _setup(c):\n    raise ValueError('broken')\n"),
], ids=["instance-hides-helper", "instance-hides-route", "generator-dead-yield", "generator", "coroutine"])
def test_helper_or_route_that_does_not_run_is_not_blocked(tmp_path, text):
    """main: blocked ('raises for every eagle3 target'), though Python never runs that raise."""
    assert _verdict(tmp_path, text) != "blocked"


def test_route_that_always_raises_still_blocks(tmp_path):
    # the control: the same route as a plain function, called
    assert _verdict(tmp_path, _refusing("        _setup(self)\n", tail=SETUP)) == "blocked"


# -- SGLang: a patcher outside sglang/srt/ that names the model module by a string ----------------

from tests.test_hostile_bindings import sglang_tree  # noqa: E402

IMPORTS_PATCHES = {"sglang/__init__.py": "from sglang import patches\n"}


@pytest.mark.parametrize("text", [
    "import sys\nimport sglang.srt.models.llama\n\nsys.modules['sglang.srt.models.llama'].EntryClass = []\n",
    "import importlib\n\nimportlib.import_module('sglang.srt.models.llama').EntryClass = []\n",
    "import importlib\n\nsetattr(importlib.import_module('sglang.srt.models.llama'), 'EntryClass', [])\n",
], ids=["sys-modules", "import-module", "setattr-import-module"])
def test_sglang_entryclass_rebound_by_module_name_outside_srt_is_unknown(tmp_path, text):
    """main: supported (the write's head was no dotted name, and outside sglang/srt/ only a write
    into a resolved module counted); the engine imports sglang.patches and empties the list."""
    code, res, _ = scan(sglang_tree(tmp_path, {"sglang/patches.py": text, **IMPORTS_PATCHES}), "LlamaForCausalLM")
    assert res["verdict"] == "unknown", res
    assert any("sglang/patches.py" in f["message"] for f in res["findings"]), res["findings"]


def test_sglang_write_by_name_into_another_module_keeps_it_supported(tmp_path):
    text = "import sys\n\nsys.modules['sglang.srt.models.other'].EntryClass = []\n"
    code, res, _ = scan(sglang_tree(tmp_path, {"sglang/patches.py": text, **IMPORTS_PATCHES}), "LlamaForCausalLM")
    assert (code, res["verdict"]) == (0, "supported"), res


# -- the breaks left open by the breaker, closed after it ------------------------------------------

def _severities_with(tmp_path, files: dict[str, str], **kw) -> list[str]:
    ex = Example(files, "LlamaForCausalLM", text_model_type=kw.pop("text_model_type", "deepseek_v3"),
                 options=RunOptions(platform="cpu"), **kw)
    folder = _example_tree(tmp_path, ex)
    return [f.severity.value for f in _run_rule(folder, PlatformBlockSizeRule, ex)]


@pytest.mark.parametrize("config", [
    {"model_type": "deepseek_v3", "kv_lora_rank": 512, "is_causal": False},   # use_mla is False
    {"model_type": "deepseek_v3", "kv_lora_rank": None},
    {"model_type": "deepseek_v3", "kv_lora_rank": 512, "compress_ratios": [1], "head_dim": None},  # head_dim decides
    {"model_type": "x_vl", "text_config": {"model_type": "deepseek_v3", "kv_lora_rank": None}},  # the text config
])
def test_a_checkpoint_that_does_not_use_mla_is_not_blocked(tmp_path, config):
    assert _severities_with(tmp_path, _tree("False"), hf_config=config) == []


def test_a_checkpoint_that_uses_mla_is_blocked(tmp_path):
    """A key the config.json leaves out takes the config class's default (DeepseekV3Config sets
    kv_lora_rank 512 and head_dim): only a stated None rules MLA out."""
    for i, config in enumerate(({"model_type": "deepseek_v3", "kv_lora_rank": 512},
                                {"model_type": "deepseek_v3"},
                                {"model_type": "deepseek_v3", "kv_lora_rank": 512, "compress_ratios": [1]},
                                {"model_type": "deepseek_v3", "compress_ratios": None, "kv_lora_rank": None},
                                {"model_type": "x_vl", "text_config": {"model_type": "deepseek_v3", "kv_lora_rank": 8}},
                                {"model_type": "x_vl", "text_config": {"model_type": "deepseek_v3"}})):
        assert _severities_with(tmp_path / str(i), _tree("False"), hf_config=config) == [Severity.ERROR.value], config


def test_a_model_type_list_that_use_mla_does_not_read_is_not_the_mla_list(tmp_path):
    """A function named for MLA that tests the model_type is no proof the model uses MLA: only a
    list in a function that ``use_mla`` reads counts."""
    conv = "vllm/transformers_utils/model_arch_config_convertor.py"
    files = _tree("False")
    files[conv] += ("\n\nclass Other:\n    def skip_mla_for(self):\n"
                    "        return self.hf_text_config.model_type in (\"llama\",)\n")
    assert _severities_with(tmp_path / "a", files, text_model_type="llama") == []
    # and use_mla reading nothing the tree tests: no model_type uses MLA as far as the tree says
    files = _with("vllm/config/model.py", "return self.is_deepseek_mla", "return self.is_something_else")
    assert _severities_with(tmp_path / "b", files) == []


def test_a_class_the_platform_package_does_not_load_forces_nothing(tmp_path):
    """The forcing write in another class of the platform module (an old class kept beside it):
    the platform package loads ``CpuPlatform``, whose body forces nothing."""
    files = _tree("False")
    files[CPU] = files[CPU].replace("class CpuPlatform:", "class _OldCpuPlatform:") + (
        "\n\nclass CpuPlatform:\n    @classmethod\n    def get_attn_backend_cls(cls, selected_backend, attn_selector_config):\n"
        "        return AttentionBackendEnum.CPU_ATTN.get_path()\n")
    assert _severities_with(tmp_path, files) == []
