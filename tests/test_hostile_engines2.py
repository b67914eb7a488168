"""Issue 20, a breaker pass on the engine and rule layers: constructs that gave a false
``supported`` (or a wrong refusal, or exit 2 on a tree that is not bad input).

Each test builds its own tree (fixtures/minisglang or fixtures/minivllm with a few lines
changed), scans one target through the real command line and checks the verdict: ``blocked``
when the tree decides, ``unknown`` naming the construct and its ``file:line`` when it cannot;
never ``supported``. Every scan leaves the tree as it was (:func:`tests.test_hostile_bindings.scan`).

1. SGLang's ``EntryClass``: a tuple, an alias changed in place, a value computed from itself.
2. vLLM's run-time ``ModelRegistry``: built from another table, or its ``self.models`` rewritten.
3. vLLM's config validation refusing eagle3 by other spellings, and a redefined ``_verify_args``.
4. SGLang: an ``EntryClass`` returned by a function of a third module.
"""

from __future__ import annotations

import pytest

from tests.conftest import REPO, make_tree
from tests.test_hostile_bindings import expect, scan, sglang_tree

SG_MODELS = "sglang/srt/models"
SG_LLAMA_PATH = f"{SG_MODELS}/llama.py"
SG_LLAMA = (REPO / "fixtures" / "minisglang" / SG_LLAMA_PATH).read_text()
SG_ENTRY = "EntryClass = [LlamaForCausalLM, Phi3ForCausalLM]"
MODELS = "vllm/model_executor/models"
REGISTRY_PATH = f"{MODELS}/registry.py"
REGISTRY = (REPO / "fixtures" / "minivllm" / REGISTRY_PATH).read_text()
SPEC_PATH = "vllm/config/speculative.py"
SPEC = (REPO / "fixtures" / "minivllm" / SPEC_PATH).read_text()

#: a class with no EAGLE-3 setter, to append to an EntryClass
EXTRA = "\n\nclass ExtraForCausalLM(nn.Module):\n    pass\n"


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line of ``text`` that holds ``needle``."""
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def expect_unknown_at(root, path: str, text: str, construct: str, arch: str = "LlamaForCausalLM") -> dict:
    """``arch`` is unknown (exit 1) with a finding that names ``construct`` at ``path:line``."""
    res = expect(root, "unknown", construct, arch=arch)
    where = f"{path}:{line_of(text, construct.splitlines()[0])}"
    assert any(where in f["message"] for f in res["findings"] if f["severity"] == "unknown"), (where, res["findings"])
    return res


# -- 1. SGLang: EntryClass as a tuple, changed through an alias, computed from itself ------------


def test_sglang_entryclass_as_a_tuple_is_unknown_for_every_target(tmp_path):
    # SGLang's import_model_classes iterates a list; anything else is taken as one class and its
    # __name__ read: a tuple has none, so the registry fails at start-up, whatever model is served
    text = SG_LLAMA.replace(SG_ENTRY, "EntryClass = (LlamaForCausalLM, Phi3ForCausalLM)")
    root = sglang_tree(tmp_path, {SG_LLAMA_PATH: text})
    res = expect_unknown_at(root, SG_LLAMA_PATH, text, "EntryClass = (LlamaForCausalLM, Phi3ForCausalLM)")
    assert any("tuple" in f["message"] for f in res["findings"])
    # a target of another module is not served either
    res = expect(root, "unknown", "tuple", arch="Gemma3ForCausalLM")


def test_sglang_entryclass_made_a_tuple_by_augmented_assignment_is_unknown(tmp_path):
    text = SG_LLAMA.replace(SG_ENTRY, "EntryClass = (LlamaForCausalLM,)\nEntryClass += (Phi3ForCausalLM,)")
    expect_unknown_at(sglang_tree(tmp_path, {SG_LLAMA_PATH: text}), SG_LLAMA_PATH, text,
                      "EntryClass += (Phi3ForCausalLM,)")


def test_sglang_entryclass_tuple_then_a_list_keeps_the_verdict(tmp_path):
    text = SG_LLAMA.replace(SG_ENTRY, "EntryClass = (LlamaForCausalLM,)\n" + SG_ENTRY)
    code, res, _ = scan(sglang_tree(tmp_path, {SG_LLAMA_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported")


@pytest.mark.parametrize("tail, construct, arch", [
    ("\n_e = EntryClass\n_e.clear()\n", "_e.clear()", "LlamaForCausalLM"),
    (EXTRA + "\n\n_e = EntryClass\n_e.append(ExtraForCausalLM)\n", "_e.append(ExtraForCausalLM)", "LlamaForCausalLM"),
    (EXTRA + "\n\n_e = EntryClass\n_e.append(ExtraForCausalLM)\n", "_e.append(ExtraForCausalLM)", "ExtraForCausalLM"),
    ("\n_e = EntryClass\n_f = _e\n_f.remove(LlamaForCausalLM)\n", "_f.remove(LlamaForCausalLM)", "LlamaForCausalLM"),
    ("\n\ndef _drop(entries=EntryClass):\n    entries.clear()\n\n\n_drop()\n", "def _drop(entries=EntryClass)",
     "LlamaForCausalLM"),
], ids=["clear", "append-old", "append-new", "alias-of-alias", "default-argument"])
def test_sglang_entryclass_changed_through_an_alias_is_unknown(tmp_path, tail, construct, arch):
    # SGLang reads the list the module's EntryClass names, whatever name changed it
    text = SG_LLAMA + tail
    res = expect_unknown_at(sglang_tree(tmp_path, {SG_LLAMA_PATH: text}), SG_LLAMA_PATH, text, construct, arch=arch)
    said = " ".join(f["message"] for f in res["findings"])
    assert "alias `_" in said or "keeps a reference to EntryClass" in said, said


def test_sglang_entryclass_alias_only_read_keeps_the_verdict(tmp_path):
    text = SG_LLAMA + "\n_e = EntryClass\nprint(len(_e))\n"
    code, res, _ = scan(sglang_tree(tmp_path, {SG_LLAMA_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported")


@pytest.mark.parametrize("tail, arch", [
    ("\nEntryClass = EntryClass[:1]\n", "LlamaForCausalLM"),
    ("\nEntryClass = EntryClass[1:]\n", "LlamaForCausalLM"),
    (EXTRA + "\n\nEntryClass = EntryClass + [ExtraForCausalLM]\n", "LlamaForCausalLM"),
    (EXTRA + "\n\nEntryClass = EntryClass + [ExtraForCausalLM]\n", "ExtraForCausalLM"),
    (EXTRA + "\n\nEntryClass += [ExtraForCausalLM][:_n()]\n", "ExtraForCausalLM"),
], ids=["slice-head", "slice-tail", "concat-old", "concat-new", "augmented-slice"])
def test_sglang_entryclass_computed_from_itself_is_unknown_not_bad_input(tmp_path, tail, arch):
    text = SG_LLAMA + tail
    construct = tail.strip().splitlines()[-1]
    expect_unknown_at(sglang_tree(tmp_path, {SG_LLAMA_PATH: text}), SG_LLAMA_PATH, text, construct, arch=arch)


# -- 1b. vLLM: a registry row that is not a (module, class) pair ----------------------------------


def test_vllm_three_item_registry_row_is_named_plainly(tmp_path):
    row = '"LlamaForCausalLM": ("llama", "LlamaForCausalLM"),'
    text = REGISTRY.replace(row, '"LlamaForCausalLM": ("llama", "LlamaForCausalLM", "extra"),')
    root = make_tree(tmp_path, {REGISTRY_PATH: text})
    code, res, err = scan(root)
    assert code in (1, 2) and (res is None or res["verdict"] != "supported")
    said = err if res is None else " ".join(f["message"] for f in res["findings"])
    assert "('llama', 'LlamaForCausalLM', 'extra')" in said and "(module, class) pair" in said, said
    assert f"{REGISTRY_PATH}:{line_of(text, 'extra')}" in said


def test_vllm_three_item_row_unpacked_by_the_registry_comprehension_makes_every_row_unknown(tmp_path):
    # vLLM's own shape: the comprehension unpacks each row in two, so registry.py fails on import
    row = '"LlamaForCausalLM": ("llama", "LlamaForCausalLM"),'
    text = REGISTRY.replace(row, '"LlamaForCausalLM": ("llama", "LlamaForCausalLM", "extra"),').replace(
        "ModelRegistry = _ModelRegistry(_VLLM_MODELS)",
        "ModelRegistry = _ModelRegistry({a: (m, c) for a, (m, c) in _VLLM_MODELS.items()})")
    res = expect(make_tree(tmp_path, {REGISTRY_PATH: text}), "unknown", "fails when vLLM imports it",
                 arch="ToyV2ForCausalLM")
    assert any("not a (module, class) pair" in f["message"] for f in res["findings"])


# -- 2. vLLM: the run-time ModelRegistry -------------------------------------------------------

REG_LINE = "ModelRegistry = _ModelRegistry(_VLLM_MODELS)"
INIT_LINE = "        self.models = dict(models)"


@pytest.mark.parametrize("new", [
    "ModelRegistry = _ModelRegistry(_MULTIMODAL_MODELS)",
    "ModelRegistry = _ModelRegistry({**_MULTIMODAL_MODELS, **_SPECULATIVE_DECODING_MODELS})",
    "ModelRegistry = _ModelRegistry({k: v for k, v in _VLLM_MODELS.items() if k != 'LlamaForCausalLM'})",
    "ModelRegistry = _ModelRegistry(_load_models())",
    "ModelRegistry = _ModelRegistry({})",
], ids=["other-table", "other-tables-spread", "filtered", "call", "empty"])
def test_vllm_model_registry_built_from_another_table_is_unknown(tmp_path, new):
    assert REG_LINE in REGISTRY
    text = REGISTRY.replace(REG_LINE, new)
    expect_unknown_at(make_tree(tmp_path, {REGISTRY_PATH: text}), REGISTRY_PATH, text, new)


@pytest.mark.parametrize("new", [
    "        self.models = {}",
    "        self.models = {k: v for k, v in models.items() if k != 'LlamaForCausalLM'}",
    "        self.models = dict(models)\n        self.models.pop('LlamaForCausalLM')",
    "        self.models = dict(models)\n        del self.models['LlamaForCausalLM']",
], ids=["emptied", "filtered", "popped", "deleted"])
def test_vllm_model_registry_models_rewritten_in_init_is_unknown(tmp_path, new):
    assert INIT_LINE in REGISTRY
    text = REGISTRY.replace(INIT_LINE, new)
    construct = new.splitlines()[-1].strip()
    expect_unknown_at(make_tree(tmp_path, {REGISTRY_PATH: text}), REGISTRY_PATH, text, construct)


def test_vllm_model_registry_as_a_dataclass_over_a_comprehension_keeps_the_verdict(tmp_path):
    # the shape of vLLM's own registry.py: a dataclass, built from a comprehension over _VLLM_MODELS
    cls_start = REGISTRY.index("class _ModelRegistry:")
    body_end = REGISTRY.index("    def resolve_model_cls")
    text = (REGISTRY[:cls_start].replace("import importlib", "import importlib\nfrom dataclasses import dataclass, field")
            + "@dataclass\nclass _ModelRegistry:\n    models: dict = field(default_factory=dict)\n\n"
            + REGISTRY[body_end:].replace(REG_LINE, "ModelRegistry = _ModelRegistry(\n    {\n        arch: (mod, cls)\n"
                                                    "        for arch, (mod, cls) in _VLLM_MODELS.items()\n    }\n)"))
    code, res, _ = scan(make_tree(tmp_path, {REGISTRY_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported")
    # ... and a __post_init__ that empties it is followed
    text2 = text.replace("    models: dict = field(default_factory=dict)\n",
                         "    models: dict = field(default_factory=dict)\n\n    def __post_init__(self):\n"
                         "        self.models = {}\n")
    expect_unknown_at(make_tree(tmp_path, {REGISTRY_PATH: text2}), REGISTRY_PATH, text2, "self.models = {}")


# -- 3. vLLM: config validation refusing eagle3 ------------------------------------------------

CHECK = "        if self.num_speculative_tokens < 1:\n"


def _refusing(first: str) -> str:
    assert CHECK in SPEC
    return SPEC.replace(CHECK, first + CHECK)


@pytest.mark.parametrize("first, needle", [
    ('        if self.method.startswith("eagle3"):\n            raise ValueError("no eagle3 here")\n', "startswith"),
    ('        if self.method.startswith("eagle"):\n            raise ValueError("no eagle here")\n', "startswith"),
    ('        if "eagle3" in self.method:\n            raise ValueError("no eagle3 here")\n', "'eagle3' in"),
    # already read before this pass (the method == / in spelling): blocked, its construct not repeated
    ('        if self.method in {"eagle3"}:\n            raise ValueError("no eagle3 here")\n', "unconditional test"),
    ('        assert self.method != "eagle3"\n', "assert"),
    ('        assert self.method not in ("eagle", "eagle3"), "no eagle"\n', "assert"),
    ('        assert not self.method.startswith("eagle3")\n', "assert"),
], ids=["startswith", "startswith-prefix", "substring", "set", "assert", "assert-not-in", "assert-not-startswith"])
def test_vllm_config_refusing_eagle3_by_another_spelling_is_blocked(tmp_path, first, needle):
    text = _refusing(first)
    res = expect(make_tree(tmp_path, {SPEC_PATH: text}), "blocked", "raises for every eagle3 target")
    f = next(f for f in res["findings"] if f["gate"] == "allowlist")
    assert f["severity"] == "error" and f"{SPEC_PATH}:{line_of(text, first.splitlines()[0].strip())}" in f["message"]
    assert needle in f["message"], f["message"]


@pytest.mark.parametrize("first", [
    '        if self.method.startswith("medusa"):\n            raise ValueError("no medusa")\n',
    '        assert self.method != "medusa"\n',
    '        if self.method.startswith("eagle3") and self.num_speculative_tokens > 8:\n            raise ValueError("x")\n',
], ids=["other-method", "assert-other-method", "conditional"])
def test_vllm_config_refusing_other_methods_keeps_the_verdict(tmp_path, first):
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: _refusing(first)}))
    assert (code, res["verdict"]) == (0, "supported")


def _with_second_verify(spec: str, body: str) -> str:
    """``spec`` with a second ``_verify_args`` at the end of the class body (it is the one bound)."""
    return spec.rstrip("\n") + "\n\n    def _verify_args(self) -> None:\n" + body


def test_vllm_config_redefined_verify_args_that_refuses_eagle3_is_blocked(tmp_path):
    text = _with_second_verify(SPEC, '        if self.method.startswith("eagle3"):\n'
                                     '            raise ValueError("eagle3 is gone")\n')
    res = expect(make_tree(tmp_path, {SPEC_PATH: text}), "blocked", "raises for every eagle3 target")
    assert any(f"{SPEC_PATH}:{line_of(text, 'startswith')}" in f["message"] for f in res["findings"])


def test_vllm_config_refusal_in_a_shadowed_verify_args_has_no_effect(tmp_path):
    # the first _verify_args refuses eagle3 outright, but a later one in the class body replaces it
    first = _refusing('        if self.method == "eagle3":\n            raise ValueError("no eagle3 here")\n')
    live = SPEC[SPEC.index("    def _verify_args(self) -> None:\n") + len("    def _verify_args(self) -> None:\n"):]
    text = _with_second_verify(first, live)
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported"), res


def test_vllm_config_allowlist_in_a_shadowed_verify_args_has_no_effect(tmp_path):
    # an allowlist without llama in the first _verify_args; the bound one checks nothing
    spec = SPEC.replace('eagle3_target_supported = ["llama", "qwen"]', 'eagle3_target_supported = ["qwen"]')
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: spec}))
    assert (code, res["verdict"]) == (1, "blocked")  # the test can fail: this one is live
    text = _with_second_verify(spec, "        pass\n")
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported"), res


# -- 4. SGLang: EntryClass returned by a function of a third module -----------------------------

HELPERS_PATH = "sglang/srt/utils_entries.py"
PLAIN = '''import torch.nn as nn


class LlamaForCausalLM(nn.Module):
    def forward(self, input_ids, positions):
        return input_ids
'''


def test_sglang_entryclass_from_a_function_of_another_module_is_followed(tmp_path):
    # plain.py registers, through helpers' get_classes(), a second LlamaForCausalLM: SGLang's
    # registry asserts on the duplicate at start-up
    helpers = "from sglang.srt.models._plain_impl import LlamaForCausalLM\n\n\ndef get_classes():\n" \
              "    return [LlamaForCausalLM]\n"
    files = {HELPERS_PATH: helpers, f"{SG_MODELS}/_plain_impl.py": PLAIN,
             f"{SG_MODELS}/plain.py": "from sglang.srt.utils_entries import get_classes\n\nEntryClass = get_classes()\n"}
    expect(sglang_tree(tmp_path, files), "unknown", "twice")


def test_sglang_entryclass_from_a_function_of_another_module_registers_its_classes(tmp_path):
    helpers = "from sglang.srt.models._plain_impl import PlainForCausalLM\n\n\ndef get_classes():\n" \
              "    return [PlainForCausalLM]\n"
    files = {HELPERS_PATH: helpers, f"{SG_MODELS}/_plain_impl.py": PLAIN.replace("Llama", "Plain"),
             f"{SG_MODELS}/plain.py": "from sglang.srt.utils_entries import get_classes\n\nEntryClass = get_classes()\n"}
    res = expect(sglang_tree(tmp_path, files), "blocked", "set_eagle3_layers_to_capture", arch="PlainForCausalLM")
    assert res["class"].endswith("_plain_impl.PlainForCausalLM")


@pytest.mark.parametrize("body", [
    "    return [c for c in (LlamaForCausalLM,) if _NAME]\n",
    "    if _flag():\n        return [LlamaForCausalLM]\n    return []\n",
    "    out = []\n    out.append(LlamaForCausalLM)\n    return out\n",
], ids=["comprehension", "branch", "built-list"])
def test_sglang_entryclass_from_a_function_that_cannot_be_followed_is_unknown(tmp_path, body):
    helpers = "from sglang.srt.models._plain_impl import LlamaForCausalLM\n\n_NAME = 'x'\n\n\ndef get_classes():\n" \
              + body
    plain = "from sglang.srt.utils_entries import get_classes\n\nEntryClass = get_classes()\n"
    files = {HELPERS_PATH: helpers, f"{SG_MODELS}/_plain_impl.py": PLAIN, f"{SG_MODELS}/plain.py": plain}
    expect_unknown_at(sglang_tree(tmp_path, files), f"{SG_MODELS}/plain.py", plain, "EntryClass = get_classes()")


@pytest.mark.parametrize("files", [
    # a function of another config module that nothing calls
    {"vllm/config/legacy.py": "def check(cfg):\n    if cfg.method == 'eagle3':\n        raise ValueError('no')\n"},
    # an uncalled method of the speculative config, in the new spelling and the old one
    {SPEC_PATH: SPEC.rstrip("\n") + "\n\n    def _legacy_check(self) -> None:\n"
                "        assert not self.method.startswith('eagle3')\n"},
    {SPEC_PATH: SPEC.rstrip("\n") + "\n\n    def _legacy_check(self) -> None:\n"
                "        if self.method == 'eagle3':\n            raise ValueError('no')\n"},
    # an uncalled module-level function, and one in another class's validation
    {SPEC_PATH: SPEC + "\n\ndef _unused(cfg):\n    if cfg.method == 'eagle3':\n        raise ValueError('no')\n"},
], ids=["other-module", "uncalled-method-new", "uncalled-method-old", "uncalled-function"])
def test_a_refusal_that_building_the_config_never_runs_refuses_nothing(tmp_path, files):
    code, res, _ = scan(make_tree(tmp_path, files))
    assert (code, res["verdict"]) == (0, "supported"), res


def test_a_refusal_in_a_method_the_validation_calls_is_blocked(tmp_path):
    text = SPEC.replace(CHECK, "        self._check_method()\n" + CHECK).rstrip("\n") + (
        "\n\n    def _check_method(self) -> None:\n        if self.method.startswith('eagle3'):\n"
        "            raise ValueError('no')\n")
    expect(make_tree(tmp_path, {SPEC_PATH: text}), "blocked", "raises for every eagle3 target")


def test_sglang_entry_class_bound_to_itself_keeps_its_classes(tmp_path):
    text = SG_LLAMA.rstrip("\n") + "\nEntryClass = EntryClass\n"
    code, res, _ = scan(sglang_tree(tmp_path, {SG_LLAMA_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported"), res


@pytest.mark.parametrize("item", ["None", "'Phi3ForCausalLM'"])
def test_sglang_entry_class_holding_a_constant_fails_every_target(tmp_path, item):
    # SGLang's registry reads the __name__ of each item of the list: a constant has none, and the
    # AttributeError stops it at start-up, whatever model it serves
    assert "EntryClass = [LlamaForCausalLM, Phi3ForCausalLM]" in SG_LLAMA
    text = SG_LLAMA.replace("EntryClass = [LlamaForCausalLM, Phi3ForCausalLM]", f"EntryClass = [LlamaForCausalLM, {item}]")
    tree = sglang_tree(tmp_path, {SG_LLAMA_PATH: text})
    for arch in ("LlamaForCausalLM", "DeepseekV2ForCausalLM"):
        expect(tree, "unknown", "holds a constant", arch=arch)


@pytest.mark.parametrize("first", [
    '        if self.method == "eagle" + "3":\n            raise ValueError("no")\n',
    '        if self.method[:6] == "eagle3":\n            raise ValueError("no")\n',
    '        if self.method.__eq__("eagle3"):\n            raise ValueError("no")\n',
    '        if getattr(self, "method") == "eagle3":\n            raise ValueError("no")\n',
], ids=["concatenated", "sliced", "dunder-eq", "getattr"])
def test_vllm_config_refusing_eagle3_by_more_spellings_is_blocked(tmp_path, first):
    text = _refusing(first)
    res = expect(make_tree(tmp_path, {SPEC_PATH: text}), "blocked", "raises for every eagle3 target")
    f = next(f for f in res["findings"] if f["gate"] == "allowlist")
    assert f"{SPEC_PATH}:{line_of(text, first.splitlines()[0].strip())}" in f["message"]


@pytest.mark.parametrize("first", [
    '        if self.method == "medusa" + "3":\n            raise ValueError("no")\n',
    '        if self.method[:5] == "ngram":\n            raise ValueError("no")\n',
])
def test_vllm_config_refusing_another_method_by_those_spellings_keeps_the_verdict(tmp_path, first):
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: _refusing(first)}))
    assert (code, res["verdict"]) == (0, "supported"), res


# -- 5. SGLang: an EntryClass bound in ways the registry reader did not take (was exit 2) -------


@pytest.mark.parametrize("entry, construct", [
    ("_B = [LlamaForCausalLM, Phi3ForCausalLM]\nEntryClass = [*_B]", "EntryClass = [*_B]"),
    ("EntryClass, _x = [LlamaForCausalLM, Phi3ForCausalLM], 1", "EntryClass, _x = "),
    ("def _g():\n    return EntryClass\n\n\nEntryClass = [LlamaForCausalLM, Phi3ForCausalLM]\nEntryClass = _g()",
     "EntryClass = _g()"),
])
def test_sglang_entryclass_bound_at_run_time_is_unknown_not_bad_input(tmp_path, entry, construct):
    # each is a valid module that SGLang imports; which classes it registers is not followed, so
    # the classes it names are its targets, each unknown (before: "unknown model", exit 2)
    text = SG_LLAMA.replace(SG_ENTRY, entry)
    assert text != SG_LLAMA
    for arch in ("LlamaForCausalLM", "Phi3ForCausalLM"):
        expect_unknown_at(sglang_tree(tmp_path / arch, {SG_LLAMA_PATH: text}), SG_LLAMA_PATH, text, construct,
                          arch=arch)
