"""Issue 20, a third breaker pass on SGLang's ``EntryClass``: constructs that gave a false
``supported`` (exit 0).

Each test builds its own tree (fixtures/minisglang with a few lines changed), scans one target
through the real command line and checks the verdict: ``blocked`` when the tree decides,
``unknown`` naming the construct and its ``file:line`` when it cannot; never ``supported``.
Every scan leaves the tree as it was (:func:`tests.test_hostile_bindings.scan`).

1. A tuple reached through a name (``_T = (A, B)`` then ``EntryClass = _T``).
2. A change made through a walrus (``(e := EntryClass).append(X)``).
3. A change made through a bound method (``add = EntryClass.append``, ``map(EntryClass.append, ...)``).
4. A change made by another model module, imported before (``m.EntryClass = Other``).
"""

from __future__ import annotations

import pytest

from tests.test_hostile_bindings import expect, scan, sglang_tree
from tests.test_hostile_engines2 import EXTRA, SG_ENTRY, SG_LLAMA, SG_LLAMA_PATH, SG_MODELS, expect_unknown_at

# -- 1. a tuple through a name ------------------------------------------------------------------


@pytest.mark.parametrize("entry, construct", [
    ("_T = (LlamaForCausalLM, Phi3ForCausalLM)\nEntryClass = _T", "EntryClass = _T"),
    ("_T = (LlamaForCausalLM, Phi3ForCausalLM)\n_U = _T\nEntryClass = _U", "EntryClass = _U"),
    ("_T: tuple = (LlamaForCausalLM, Phi3ForCausalLM)\nEntryClass: tuple = _T", "EntryClass: tuple = _T"),
    ("_T = [LlamaForCausalLM, Phi3ForCausalLM]\n_T = (LlamaForCausalLM, Phi3ForCausalLM)\nEntryClass = _T",
     "EntryClass = _T"),
], ids=["name", "name-of-name", "annotated", "last-binding-wins"])
def test_sglang_entryclass_tuple_through_a_name_is_unknown_for_every_target(tmp_path, entry, construct):
    # as with a literal tuple: SGLang's registry reads the tuple's __name__ and fails at start-up
    text = SG_LLAMA.replace(SG_ENTRY, entry)
    assert text != SG_LLAMA
    root = sglang_tree(tmp_path, {SG_LLAMA_PATH: text})
    res = expect_unknown_at(root, SG_LLAMA_PATH, text, construct)
    assert any("tuple" in f["message"] for f in res["findings"])
    expect(root, "unknown", "tuple", arch="Gemma3ForCausalLM")


@pytest.mark.parametrize("entry", [
    "_L = [LlamaForCausalLM, Phi3ForCausalLM]\nEntryClass = _L",
    "_T = (LlamaForCausalLM, Phi3ForCausalLM)\n_T = [LlamaForCausalLM, Phi3ForCausalLM]\nEntryClass = _T",
    "_L = [LlamaForCausalLM, Phi3ForCausalLM]\nEntryClass = _L\n_L = (LlamaForCausalLM,)",
    "_L = [LlamaForCausalLM, Phi3ForCausalLM]\nEntryClass = _L\nprint(len(_L))",
], ids=["list-name", "tuple-then-list", "rebound-after", "only-read"])
def test_sglang_entryclass_list_through_a_name_keeps_the_verdict(tmp_path, entry):
    text = SG_LLAMA.replace(SG_ENTRY, entry)
    root = sglang_tree(tmp_path, {SG_LLAMA_PATH: text})
    for arch in ("LlamaForCausalLM", "Phi3ForCausalLM"):
        code, res, _ = scan(root, arch)
        assert (code, res["verdict"]) == (0, "supported"), res


@pytest.mark.parametrize("entry, construct", [
    ("_L = [LlamaForCausalLM, Phi3ForCausalLM]\nEntryClass = _L\n_L.remove(LlamaForCausalLM)",
     "_L.remove(LlamaForCausalLM)"),
    ("_L = [LlamaForCausalLM, Phi3ForCausalLM]\n_L.remove(LlamaForCausalLM)\nEntryClass = _L",
     "_L.remove(LlamaForCausalLM)"),
], ids=["after", "before"])
def test_sglang_entryclass_list_through_a_name_changed_through_it_is_unknown(tmp_path, entry, construct):
    text = SG_LLAMA.replace(SG_ENTRY, entry)
    expect_unknown_at(sglang_tree(tmp_path, {SG_LLAMA_PATH: text}), SG_LLAMA_PATH, text, construct)


# -- 2. a change through a walrus ---------------------------------------------------------------


@pytest.mark.parametrize("tail, construct", [
    ("\n(_e := EntryClass).remove(LlamaForCausalLM)\n", "(_e := EntryClass).remove(LlamaForCausalLM)"),
    ("\n(_e := EntryClass).clear()\n", "(_e := EntryClass).clear()"),
    ("\nprint((_e := EntryClass))\n_e.clear()\n", "_e.clear()"),
    ("\n[(_e := EntryClass).clear()]\n", "(_e := EntryClass).clear()"),
], ids=["remove", "clear", "alias-later", "nested"])
def test_sglang_entryclass_changed_through_a_walrus_is_unknown(tmp_path, tail, construct):
    text = SG_LLAMA + tail
    expect_unknown_at(sglang_tree(tmp_path, {SG_LLAMA_PATH: text}), SG_LLAMA_PATH, text, construct)


def test_sglang_entryclass_walrus_only_read_keeps_the_verdict(tmp_path):
    text = SG_LLAMA + "\nprint(len(_e := EntryClass), (_f := EntryClass).count(LlamaForCausalLM))\n"
    code, res, _ = scan(sglang_tree(tmp_path, {SG_LLAMA_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported"), res


# -- 3. a change through a bound method ---------------------------------------------------------


@pytest.mark.parametrize("tail, construct, arch", [
    ("\n_drop = EntryClass.remove\n_drop(LlamaForCausalLM)\n", "_drop = EntryClass.remove", "LlamaForCausalLM"),
    (EXTRA + "\n\n_add = EntryClass.append\n_add(ExtraForCausalLM)\n", "_add = EntryClass.append",
     "ExtraForCausalLM"),
    (EXTRA + "\n\nlist(map(EntryClass.append, [ExtraForCausalLM]))\n", "list(map(EntryClass.append",
     "ExtraForCausalLM"),
    ("\nlist(map(EntryClass.remove, [LlamaForCausalLM]))\n", "list(map(EntryClass.remove", "LlamaForCausalLM"),
    ("\n_e = EntryClass\n_drop = _e.remove\n_drop(LlamaForCausalLM)\n", "_drop = _e.remove", "LlamaForCausalLM"),
    ("\n_drop = (_e := EntryClass).remove\n_drop(LlamaForCausalLM)\n", "_drop = (_e := EntryClass).remove",
     "LlamaForCausalLM"),
], ids=["remove", "append", "map-append", "map-remove", "through-an-alias", "through-a-walrus"])
def test_sglang_entryclass_changed_through_a_bound_method_is_unknown(tmp_path, tail, construct, arch):
    text = SG_LLAMA + tail
    expect_unknown_at(sglang_tree(tmp_path, {SG_LLAMA_PATH: text}), SG_LLAMA_PATH, text, construct, arch=arch)


def test_sglang_entryclass_reading_method_kept_keeps_the_verdict(tmp_path):
    text = SG_LLAMA + "\n_count = EntryClass.count\nprint(_count(LlamaForCausalLM), EntryClass.index(LlamaForCausalLM))\n"
    code, res, _ = scan(sglang_tree(tmp_path, {SG_LLAMA_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported"), res


# -- 4. a change made by another model module, imported before ---------------------------------

#: another model module that the registry imports before llama.py (pkgutil sorts the names)
EARLY = f"{SG_MODELS}/aaa_patch.py"
#: one it imports after llama.py
LATE = f"{SG_MODELS}/zzz_patch.py"
OTHER = "import torch.nn as nn\n\n\nclass OtherForCausalLM(nn.Module):\n    pass\n\n\n"


@pytest.mark.parametrize("patch, construct", [
    ("import sglang.srt.models.llama as m\n\nm.EntryClass = [m.Phi3ForCausalLM]\n", "m.EntryClass = "),
    ("import sglang.srt.models.llama as m\n\nm.EntryClass.remove(m.LlamaForCausalLM)\n", "m.EntryClass.remove("),
    ("import sglang.srt.models.llama\n\nsglang.srt.models.llama.EntryClass = []\n",
     "sglang.srt.models.llama.EntryClass = []"),
    ("from sglang.srt.models import llama\n\nsetattr(llama, 'EntryClass', [])\n", "setattr(llama, 'EntryClass'"),
    ("from sglang.srt.models.llama import EntryClass as _E\n\n_E.clear()\n", "_E.clear()"),
    ("from sglang.srt.models import llama\n\n_drop = llama.EntryClass.remove\n_drop(llama.LlamaForCausalLM)\n",
     "_drop = llama.EntryClass.remove"),
], ids=["rebind", "remove", "dotted", "setattr", "imported-name", "bound-method"])
def test_sglang_entryclass_changed_by_a_module_imported_before_is_unknown(tmp_path, patch, construct):
    text = OTHER + patch
    expect_unknown_at(sglang_tree(tmp_path, {EARLY: text}), EARLY, text, construct)


def test_sglang_class_changed_by_a_module_imported_before_is_not_supported(tmp_path):
    patch = "import sglang.srt.models.llama as m\n\ndel m.LlamaForCausalLM.set_eagle3_layers_to_capture\n"
    code, res, _ = scan(sglang_tree(tmp_path, {EARLY: OTHER + patch}))
    assert res is not None and res["verdict"] in ("blocked", "unknown") and code == 1, res


def test_sglang_entryclass_changed_by_a_module_imported_after_has_no_effect(tmp_path):
    # the registry has read llama.EntryClass before it imports zzz_patch, which no module imports
    patch = "import sglang.srt.models.llama as m\n\nm.EntryClass = []\n"
    code, res, _ = scan(sglang_tree(tmp_path, {LATE: OTHER + patch}))
    assert (code, res["verdict"]) == (0, "supported"), res


def test_sglang_entryclass_read_by_another_module_keeps_the_verdict(tmp_path):
    patch = "import sglang.srt.models.llama as m\n\nprint(len(m.EntryClass))\n"
    code, res, _ = scan(sglang_tree(tmp_path, {EARLY: OTHER + patch}))
    assert (code, res["verdict"]) == (0, "supported"), res
