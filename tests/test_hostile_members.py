"""Issue 20, the verdict: the EAGLE-3 setter or the capturing ``forward`` made inert past its ``def``.

A method decorator, an instance attribute set while the model is built, a setter that stores the
layers under another name than the capture reads, or a change to Python's builtins: each test
builds its own tree (fixtures/minivllm with ``llama.py`` edited), scans it through the real command
line and checks the verdict (blocked with the reason where the index follows that the member does
nothing, else ``unknown`` naming the construct and its ``file:line``; never ``supported``), the exit
code, and that the scan wrote nothing (``tests.test_hostile_bindings.scan`` digests the tree).
What a decorator or attribute that changes nothing does is checked too: the verdict stays
``supported``.
"""

from __future__ import annotations

import pytest

from tests.conftest import make_tree
from tests.test_hostile_bindings import LLAMA, SG_LLAMA, SG_MODELS, expect, llama, scan, sglang_tree

SETTER = "    def set_aux_hidden_state_layers(self, layers"
FORWARD = ("    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, intermediate_tensors=None):\n"
           "        hidden_states = self.embed_tokens(input_ids)")
INIT_END = "        self.lm_head = nn.Linear(16, 32, bias=False)\n"
HOLDER_INIT_END = "        self.aux_hidden_state_layers: tuple[int, ...] = tuple()\n"


def _with(defs: str, member: str, deco: str) -> str:
    """``llama.py`` with ``defs`` before the first class and ``@deco`` on ``member``."""
    assert member in LLAMA
    return LLAMA.replace("class LlamaDecoderLayer", defs + "\n\nclass LlamaDecoderLayer", 1).replace(
        member, f"    @{deco}\n{member}", 1)


NOOP = '''import functools


def _noop(fn):
    @functools.wraps(fn)
    def w(*a, **k):
        return None
    return w
'''
FIRST = '''import functools


def _first(fn):
    @functools.wraps(fn)
    def w(*a, **k):
        out = fn(*a, **k)
        return out[0] if isinstance(out, tuple) else out
    return w
'''
GONE = '''def _gone(fn):
    return None
'''
PASS = '''import functools


def _logged(fn):
    @functools.wraps(fn)
    def w(*a, **k):
        return fn(*a, **k)
    return w


def _same(fn):
    return fn
'''


# -- method decorators ------------------------------------------------------------------------------

def test_wrapper_that_never_calls_the_setter_blocks(tmp_path):
    res = expect(make_tree(tmp_path, llama(_with(NOOP, SETTER, "_noop"))), "blocked",
                 "which never calls the decorated function")
    hit = next(f for f in res["findings"] if "_noop" in f["message"])
    assert hit["rule"] == "EA302" and hit["severity"] == "error"
    assert "vllm/model_executor/models/llama.py:" in hit["message"]


def test_wrapper_that_changes_what_forward_returns_is_unknown(tmp_path):
    res = expect(make_tree(tmp_path, llama(_with(FIRST, FORWARD, "_first"))), "unknown",
                 "returns something else than its result")
    assert any(f["rule"] == "EA303" and "`@_first` on LlamaModel.forward at vllm/model_executor/models/llama.py:"
               in f["message"] for f in res["findings"])


def test_wrapper_that_changes_the_arguments_is_unknown(tmp_path):
    changed = FIRST.replace("def _first", "def _empty").replace(
        "        out = fn(*a, **k)\n        return out[0] if isinstance(out, tuple) else out\n",
        "        return fn(a[0], ())\n")
    expect(make_tree(tmp_path, llama(_with(changed, SETTER, "_empty"))), "unknown",
           "calls the decorated function with other arguments than its own")


def test_decorator_returning_none_blocks(tmp_path):
    expect(make_tree(tmp_path, llama(_with(GONE, SETTER, "_gone"))), "blocked", "returns None, so the member is None")


def test_decorator_from_outside_the_tree_is_unknown(tmp_path):
    res = expect(make_tree(tmp_path, llama(_with("from somewhere_external import strange\n", SETTER, "strange"))),
                 "unknown", "comes from outside the tree (somewhere_external.strange)")
    assert any("`@strange` on LlamaForCausalLM.set_aux_hidden_state_layers at vllm/model_executor/models/llama.py:"
               in f["message"] for f in res["findings"])


@pytest.mark.parametrize("deco", ["_logged", "_same", "torch.no_grad()", "torch.inference_mode()"])
def test_decorators_that_pass_the_call_through_keep_the_verdict(tmp_path, deco):
    text = _with(PASS, SETTER, deco)
    text = text.replace(FORWARD, f"    @{deco}\n{FORWARD}", 1)
    code, res, _ = scan(make_tree(tmp_path, llama(text)))
    assert (code, res["verdict"]) == (0, "supported"), res["findings"]


# -- instance attributes and class changes while the model is built ---------------------------------

@pytest.mark.parametrize("line, verdict, needle", [
    ("        self.set_aux_hidden_state_layers = lambda layers: None\n", "unknown",
     "sets self.set_aux_hidden_state_layers = <Lambda>"),
    ("        setattr(self, 'set_aux_hidden_state_layers', print)\n", "unknown",
     "sets self.set_aux_hidden_state_layers = print"),
    ("        self.set_aux_hidden_state_layers = None\n", "blocked", "sets self.set_aux_hidden_state_layers = None"),
    ("        type(self).set_aux_hidden_state_layers = None\n", "unknown",
     "`type(self).set_aux_hidden_state_layers = None` in LlamaForCausalLM.__init__"),
    ("        setattr(type(self), 'set_aux_hidden_state_layers', None)\n", "unknown",
     "in LlamaForCausalLM.__init__ (vllm/model_executor/models/llama.py:"),
    ("        self.__dict__['set_aux_hidden_state_layers'] = print\n", "unknown",
     "sets self.set_aux_hidden_state_layers = print"),
    ("        object.__setattr__(self, 'set_aux_hidden_state_layers', None)\n", "blocked",
     "sets self.set_aux_hidden_state_layers = None"),
    ("        self.__dict__.update(extra)\n", "unknown", "sets an instance attribute under a computed name"),
    ("        self.__class__.set_aux_hidden_state_layers = None\n", "unknown",
     "`self.__class__.set_aux_hidden_state_layers = None` in LlamaForCausalLM.__init__"),
])
def test_init_shadowing_the_setter(tmp_path, line, verdict, needle):
    assert INIT_END in LLAMA
    res = expect(make_tree(tmp_path, llama(LLAMA.replace(INIT_END, INIT_END + line, 1))), verdict, needle)
    assert any(f["rule"] == "EA302" and needle in f["message"] and "llama.py:" in f["message"]
               for f in res["findings"])


def test_init_shadowing_the_capturing_forward_is_unknown(tmp_path):
    text = LLAMA.replace(HOLDER_INIT_END, HOLDER_INIT_END + "        self.forward = self._plain\n\n"
                         "    def _plain(self, input_ids, positions, intermediate_tensors=None):\n"
                         "        return self.norm(self.embed_tokens(input_ids))\n", 1)
    res = expect(make_tree(tmp_path, llama(text)), "unknown",
                 "LlamaModel.__init__ (vllm/model_executor/models/llama.py:")
    assert any(f["rule"] == "EA303" and "sets self.forward = self._plain" in f["message"] for f in res["findings"])


def test_other_instance_attributes_keep_the_verdict(tmp_path):
    # the loop over literal names: vLLM 0.33.0 vllm/models/deepseek_v4/common/vl_model.py
    text = LLAMA.replace(INIT_END, INIT_END + "        self.forward_count = 0\n        setattr(self, 'tag', 1)\n"
                         "        for name in ('image_start', 'image_end'):\n            setattr(self, name, None)\n", 1)
    code, res, _ = scan(make_tree(tmp_path, llama(text)))
    assert (code, res["verdict"]) == (0, "supported"), res["findings"]


def test_instance_attribute_under_a_computed_name_is_unknown(tmp_path):
    text = LLAMA.replace(INIT_END, INIT_END + "        for name in self.names():\n            setattr(self, name, None)\n", 1)
    expect(make_tree(tmp_path, llama(text)), "unknown", "sets an instance attribute under a computed name = None")


# -- a setter that stores the layers where the capture does not read them ---------------------------

def test_setter_typo_blocks(tmp_path):
    text = LLAMA.replace("        self.model.aux_hidden_state_layers = layers\n",
                         "        self.model.aux_hidden_state_layerz = layers\n", 1)
    assert text != LLAMA
    res = expect(make_tree(tmp_path, llama(text)), "blocked", "stores the layers as aux_hidden_state_layerz")
    hit = next(f for f in res["findings"] if "aux_hidden_state_layerz" in f["message"])
    assert hit["rule"] == "EA303" and "vllm/model_executor/models/llama.py:" in hit["message"]


# -- Python's builtins changed in the tree ----------------------------------------------------------

@pytest.mark.parametrize("tail, needle", [
    ("\nimport builtins\nbuiltins.enumerate = lambda it, start=0: zip(range(100, 200), it)\n",
     "`builtins.enumerate = <Lambda>` at vllm/model_executor/models/llama.py:"),
    ("\nimport builtins as b\n\n\ndef patch():\n    b.range = list\n", "`b.range = list` at vllm/model_executor/models/llama.py:"),
    ("\nimport builtins\nsetattr(builtins, 'isinstance', print)\n", "changes the builtin isinstance"),
    # the builtins' dictionary, as the name __builtins__ holds it in a module that is not __main__
    ("\n__builtins__['enumerate'] = lambda it, start=0: zip(range(100, 200), it)\n",
     "`__builtins__['enumerate']` at vllm/model_executor/models/llama.py:"),
    ("\n__builtins__.update(range=list)\n", "`__builtins__.update(range=list)` at vllm/model_executor/models/llama.py:"),
    ("\n\ndef patch(k):\n    del __builtins__[k]\n", "changes a builtin under a computed name"),
])
def test_builtins_changed_in_the_tree_is_unknown(tmp_path, tail, needle):
    res = expect(make_tree(tmp_path, llama(LLAMA + tail)), "unknown", needle)
    assert any(f["rule"] == "EA303" for f in res["findings"] if needle in f["message"])


def test_builtins_changed_in_another_module_is_unknown(tmp_path):
    other = {"vllm/model_executor/models/patcher.py": "import builtins\nbuiltins.len = lambda x: 0\n"}
    expect(make_tree(tmp_path, other), "unknown", "`builtins.len = <Lambda>` at vllm/model_executor/models/patcher.py:")


def test_enumerate_rebound_in_the_holder_module_is_unknown(tmp_path):
    text = LLAMA + "\n\ndef enumerate(it, start=0):\n    return zip(range(100, 200), it)\n"
    expect(make_tree(tmp_path, llama(text)), "unknown", "indexes its layers with enumerate, which")


def test_new_names_in_builtins_keep_the_verdict(tmp_path):
    # SGLang 0.5.10.post1's sglang/srt/utils/common.py: builtins.FP8_E4M3_MAX = ...
    code, res, _ = scan(make_tree(tmp_path, llama(LLAMA + "\nimport builtins\nbuiltins.FP8_MAX = 448.0\n"
                                                          "__builtins__['FP8_MIN'] = -448.0\n")))
    assert (code, res["verdict"]) == (0, "supported"), res["findings"]


# -- SGLang: the same constructs on its duck-typed setter and its capturing forward -----------------

SG_SETTER = "    def set_eagle3_layers_to_capture(self, layer_ids=None):"
SG_FORWARD = "    def forward(self, input_ids, positions):\n        hidden_states, residual = input_ids, None"


def _sg(text: str) -> dict[str, str]:
    return {f"{SG_MODELS}/llama.py": text}


def _sg_with(defs: str, member: str, deco: str) -> str:
    assert member in SG_LLAMA
    return SG_LLAMA.replace("class LlamaModel", defs + "\n\nclass LlamaModel", 1).replace(
        member, f"    @{deco}\n{member}", 1)


@pytest.mark.parametrize("defs, member, deco, verdict, needle", [
    (NOOP, SG_SETTER, "_noop", "blocked", "which never calls the decorated function"),
    (GONE, SG_SETTER, "_gone", "blocked", "returns None, so the member is None"),
    ("from somewhere_external import strange\n", SG_SETTER, "strange", "unknown",
     "comes from outside the tree (somewhere_external.strange)"),
    (FIRST, SG_FORWARD, "_first", "unknown", "returns something else than its result"),
])
def test_sglang_decorated_setter_or_forward(tmp_path, defs, member, deco, verdict, needle):
    res = expect(sglang_tree(tmp_path, _sg(_sg_with(defs, member, deco))), verdict, needle)
    assert any("sglang/srt/models/llama.py:" in f["message"] for f in res["findings"] if needle in f["message"])


def test_sglang_init_shadowing_and_builtins(tmp_path):
    init = "        self.capture_aux_hidden_states = False\n"
    assert init in SG_LLAMA
    shadow = SG_LLAMA.replace(init, init + "        self.set_eagle3_layers_to_capture = lambda layer_ids=None: None\n", 1)
    expect(sglang_tree(tmp_path / "a", _sg(shadow)), "unknown", "sets self.set_eagle3_layers_to_capture = <Lambda>")
    patched = SG_LLAMA + "\nimport builtins\nbuiltins.range = lambda *a: []\n"
    expect(sglang_tree(tmp_path / "b", _sg(patched)), "unknown", "`builtins.range = <Lambda>` at sglang/srt/models/llama.py:")


def test_sglang_pass_through_decorators_keep_the_verdict(tmp_path):
    text = _sg_with(PASS, SG_SETTER, "_logged").replace(SG_FORWARD, f"    @torch.no_grad()\n{SG_FORWARD}", 1)
    code, res, _ = scan(sglang_tree(tmp_path, _sg("import torch\n" + text)))
    assert (code, res["verdict"]) == (0, "supported"), res["findings"]


def test_sglang_setter_typo_blocks(tmp_path):
    text = SG_LLAMA.replace("self.model.layers_to_capture = ", "self.model.layers_to_captur = ")
    assert text != SG_LLAMA
    expect(sglang_tree(tmp_path, _sg(text)), "blocked", "layers_to_captur")


# -- the sixth pass: a setter typo on one branch, writes through an alias of self, helper methods ----

SETTER_BODY = "        self.model.aux_hidden_state_layers = layers\n"
FORWARD_LIST = "        aux_hidden_states = []\n"


def _edit(old: str, new: str) -> str:
    assert old in LLAMA
    return LLAMA.replace(old, new, 1)


def test_setter_typo_on_one_branch_is_unknown(tmp_path):
    text = _edit(SETTER_BODY, "        if len(layers) > 2:\n            self.model.aux_hidden_state_layers = layers\n"
                 "        else:\n            self.model.aux_hidden_state_layer = layers\n")
    res = expect(make_tree(tmp_path, llama(text)), "unknown",
                 "stores the layers as aux_hidden_state_layer on the branch at vllm/model_executor/models/llama.py:")
    hit = next(f for f in res["findings"] if "on the branch at" in f["message"])
    assert hit["rule"] == "EA303" and hit["line"] == text.splitlines().index(
        "            self.model.aux_hidden_state_layer = layers") + 1


def test_setter_storing_on_every_branch_keeps_the_verdict(tmp_path):
    text = _edit(SETTER_BODY, "        if len(layers) > 2:\n            self.model.aux_hidden_state_layers = layers\n"
                 "        else:\n            self._few = len(layers)\n            self.model.aux_hidden_state_layers = "
                 "tuple(layers)\n")
    code, res, _ = scan(make_tree(tmp_path, llama(text)))
    assert (code, res["verdict"]) == (0, "supported"), res["findings"]


ALIAS_WRITES = [
    (FORWARD_LIST, FORWARD_LIST + "        s = self\n        s.aux_hidden_state_layers = ()\n",
     "LlamaModel.forward (vllm/model_executor/models/llama.py:45) sets self.aux_hidden_state_layers = ()"),
    (INIT_END, INIT_END + "        m = self.model\n        m.forward = None\n",
     "LlamaForCausalLM.__init__ (vllm/model_executor/models/llama.py:61) sets self.model.forward = None"),
    (INIT_END, INIT_END + "        self.model.forward = None\n",
     "LlamaForCausalLM.__init__ (vllm/model_executor/models/llama.py:60) sets self.model.forward = None"),
    (INIT_END, INIT_END + "        s = self\n        s.set_aux_hidden_state_layers = None\n",
     "LlamaForCausalLM.__init__ (vllm/model_executor/models/llama.py:61) sets self.set_aux_hidden_state_layers = None"),
    (SETTER_BODY, "        m = self.model\n        m.aux_hidden_state_layers = ()\n",
     "LlamaForCausalLM.set_aux_hidden_state_layers (vllm/model_executor/models/llama.py:66) sets "
     "self.model.aux_hidden_state_layers = ()"),
    (INIT_END, INIT_END + "        self.model.layers = []\n",
     "LlamaForCausalLM.__init__ (vllm/model_executor/models/llama.py:60) sets self.model.layers = []"),
    (FORWARD_LIST, FORWARD_LIST + "        self.aux_hidden_state_layers = ()\n",
     "LlamaModel.forward (vllm/model_executor/models/llama.py:44) sets self.aux_hidden_state_layers = ()"),
    (HOLDER_INIT_END, HOLDER_INIT_END + "        self.layers = None\n",
     "LlamaModel.__init__ (vllm/model_executor/models/llama.py:39) sets self.layers = None"),
    # other spellings of the alias: getattr with a constant, a tuple of the same shape, a walrus,
    # and the instance seen from a function nested in the method
    (INIT_END, INIT_END + "        m = getattr(self, 'model')\n        m.forward = None\n",
     "LlamaForCausalLM.__init__ (vllm/model_executor/models/llama.py:61) sets self.model.forward = None"),
    (INIT_END, INIT_END + "        s, t = self, 1\n        s.set_aux_hidden_state_layers = None\n",
     "LlamaForCausalLM.__init__ (vllm/model_executor/models/llama.py:61) sets self.set_aux_hidden_state_layers = None"),
    (INIT_END, INIT_END + "        if (m := self.model) is not None:\n            m.forward = None\n",
     "LlamaForCausalLM.__init__ (vllm/model_executor/models/llama.py:61) sets self.model.forward = None"),
    (INIT_END, INIT_END + "        def f():\n            self.set_aux_hidden_state_layers = None\n        f()\n",
     "LlamaForCausalLM.__init__ (vllm/model_executor/models/llama.py:61) sets self.set_aux_hidden_state_layers = None"),
    (INIT_END, INIT_END + "        m = self.parts[0] if self.parts else self\n        m.set_aux_hidden_state_layers = None\n",
     "LlamaForCausalLM.__init__ (vllm/model_executor/models/llama.py:61) sets self.?.set_aux_hidden_state_layers = None"),
]


@pytest.mark.parametrize("old, new, needle", ALIAS_WRITES, ids=[n.split(" sets ")[1] for _, _, n in ALIAS_WRITES])
def test_writes_through_self_or_an_alias_of_it_are_unknown(tmp_path, old, new, needle):
    # llama.py holds none of the byte markers of the namespace or reflective passes
    res = expect(make_tree(tmp_path, llama(_edit(old, new))), "unknown", needle)
    assert all(f["severity"] == "unknown" for f in res["findings"] if needle in f["message"])


HELPER_WRITES = [
    (HOLDER_INIT_END, "        self.aux_hidden_state_layers = None\n",
     "LlamaModel._setup (vllm/model_executor/models/llama.py:42) sets self.aux_hidden_state_layers = None"),
    (HOLDER_INIT_END, "        self.layers = None\n",
     "LlamaModel._setup (vllm/model_executor/models/llama.py:42) sets self.layers = None"),
    (HOLDER_INIT_END, "        self.forward = None\n",
     "LlamaModel._setup (vllm/model_executor/models/llama.py:42) sets self.forward = None"),
    (INIT_END, "        self.set_aux_hidden_state_layers = None\n",
     "LlamaForCausalLM._setup (vllm/model_executor/models/llama.py:63) sets self.set_aux_hidden_state_layers = None"),
    (INIT_END, "        self.model.layers = []\n",
     "LlamaForCausalLM._setup (vllm/model_executor/models/llama.py:63) sets self.model.layers = []"),
]


@pytest.mark.parametrize("end, body, needle", HELPER_WRITES, ids=[n.split(" sets ")[1] for _, _, n in HELPER_WRITES])
def test_instance_writes_in_a_helper_init_calls_are_unknown(tmp_path, end, body, needle):
    text = _edit(end, end + "        self._setup()\n\n    def _setup(self):\n" + body)
    expect(make_tree(tmp_path, llama(text)), "unknown", needle)


def test_helpers_that_build_the_layers_or_touch_other_members_keep_the_verdict(tmp_path):
    # vLLM 0.33.0 minicpm.py: MiniCPMModel.__init__ calls self._init_layers(), which builds self.layers
    text = _edit(HOLDER_INIT_END, HOLDER_INIT_END + "        self._init_layers(hidden_size)\n\n"
                 "    def _init_layers(self, hidden_size):\n        s = self\n"
                 "        s.layers = nn.ModuleList(LlamaDecoderLayer(hidden_size) for _ in range(4))\n"
                 "        s.counter = 0\n")
    text = text.replace(SETTER_BODY, "        m = self.model\n        m.aux_hidden_state_layers = layers\n", 1)
    code, res, _ = scan(make_tree(tmp_path, llama(text)))
    assert (code, res["verdict"]) == (0, "supported"), res["findings"]


def test_setter_storing_a_misspelled_constant_on_one_branch_is_unknown(tmp_path):
    text = _edit(SETTER_BODY, "        if layers:\n            self.model.aux_hidden_state_layers = layers\n"
                 "        else:\n            self.model.aux_hidden_state_layerz = ()\n")
    expect(make_tree(tmp_path, llama(text)), "unknown",
           "stores the layers as aux_hidden_state_layerz on the branch at vllm/model_executor/models/llama.py:")


SG_INIT = "        self.capture_aux_hidden_states = False\n"


@pytest.mark.parametrize("old, new, needle", [
    ("            self.model.layers_to_capture = [2, 3]\n", "            self.model.layers_to_captur = [2, 3]\n",
     "stores the layers as layers_to_captur on the branch at sglang/srt/models/llama.py:45"),
    (SG_INIT, SG_INIT + "        m = self.model\n        m.forward = None\n",
     "LlamaForCausalLM.__init__ (sglang/srt/models/llama.py:32) sets self.model.forward = None"),
    (SG_INIT, SG_INIT + "        self._setup()\n\n    def _setup(self):\n        self.model.layers_to_capture = []\n",
     "LlamaForCausalLM._setup (sglang/srt/models/llama.py:34) sets self.model.layers_to_capture = []"),
])
def test_sglang_branch_typo_alias_and_helper_writes_are_unknown(tmp_path, old, new, needle):
    assert old in SG_LLAMA
    res = expect(sglang_tree(tmp_path, _sg(SG_LLAMA.replace(old, new, 1))), "unknown", needle)
    assert any(f["rule"] == "EA403" for f in res["findings"] if needle in f["message"])


# -- a statement of a newer grammar, left out of the index (breaker pass 5) ----------------------

NEWER = {
    "class-rebinds-the-target": "\n\nclass LlamaForCausalLM[T](nn.Module):\n    pass\n",
    "type-alias-rebinds-the-target": "\n\ntype LlamaForCausalLM = int\n",
    "generic-function-deletes-the-setter": ("\n\ndef _p[T](x: T = None) -> T:\n"
                                            "    del LlamaForCausalLM.set_aux_hidden_state_layers\n\n\n_p()\n"),
}


@pytest.mark.parametrize("tail", NEWER.values(), ids=NEWER.keys())
def test_a_statement_of_a_newer_grammar_is_unknown_not_left_out_silently(tmp_path, tail):
    # Python 3.12 runs it (the last binding wins); this interpreter cannot parse it; either way
    # the index cannot say what it does
    root = make_tree(tmp_path, llama(LLAMA + tail))
    expect(root, "unknown", "a statement of a newer Python grammar")


def test_a_newer_grammar_statement_in_the_setter_class_is_unknown(tmp_path):
    text = LLAMA.replace(SETTER, "    def set_aux_hidden_state_layers[T](self, layers: T):\n        pass\n\n" + SETTER, 1)
    assert text != LLAMA
    root = make_tree(tmp_path, llama(text))
    expect(root, "unknown", "a statement of a newer Python grammar")


def _not_supported(tmp_path, text: str) -> dict:
    """Scan ``llama.py`` replaced by ``text``: the verdict is blocked or unknown, exit 1."""
    code, res, err = scan(make_tree(tmp_path, llama(text)))
    assert res is not None, err
    assert res["verdict"] in ("blocked", "unknown") and code == 1, res
    return res


SPACED = {
    "globals-space": '\n\nglobals ()["Llama" + "ForCausalLM"] = LlamaModel\n',
    "sys-space-modules": "\n\nimport sys\nsys .modules[__name__].LlamaForCausalLM = None\n",
    "sys-alias": "\n\nimport sys as _s\n_s.modules[__name__].LlamaForCausalLM = None\n",
    "from-sys-parenthesised": "\n\nfrom sys import (\n    modules,\n)\nmodules[__name__].LlamaForCausalLM = None\n",
}


@pytest.mark.parametrize("tail", SPACED.values(), ids=SPACED.keys())
def test_spellings_the_byte_tests_missed_are_read(tmp_path, tail):
    # Python allows a space before ( and before .modules, and sys under another name: the cheap
    # byte tests that decide which passes run must not skip them (breaker pass A2)
    _not_supported(tmp_path, LLAMA + tail)


AFTER_SETTER = "    def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:\n"
CLASS_BODY_REBINDS = {
    "for-target": "    for set_aux_hidden_state_layers in (None,):\n        pass\n",
    "walrus": "    (set_aux_hidden_state_layers := None)\n",
    "import-as": "    import os as set_aux_hidden_state_layers\n",
    "from-import-as": "    from .utils import maybe_prefix as set_aux_hidden_state_layers\n",
    "nested-class": "    class set_aux_hidden_state_layers:\n        pass\n",
    "with-as": "    import contextlib\n    with contextlib.nullcontext() as set_aux_hidden_state_layers:\n        pass\n",
    "match-capture": "    match None:\n        case set_aux_hidden_state_layers:\n            pass\n",
    "except-as": "    try:\n        raise ValueError\n    except ValueError as set_aux_hidden_state_layers:\n        pass\n",
    "del-tuple": "    del (set_aux_hidden_state_layers,)\n",
    "del-list": "    del [set_aux_hidden_state_layers]\n",
}


@pytest.mark.parametrize("stmt", CLASS_BODY_REBINDS.values(), ids=CLASS_BODY_REBINDS.keys())
def test_a_class_body_statement_that_rebinds_the_setter_is_not_supported(tmp_path, stmt):
    # after the def, in the class body: Python's name then holds None, a module, a class, another
    # function, or nothing at all (breaker pass A3)
    assert AFTER_SETTER in LLAMA
    _not_supported(tmp_path, LLAMA.replace(AFTER_SETTER, stmt + "\n" + AFTER_SETTER, 1))


def test_a_class_body_loop_over_other_names_keeps_the_verdict(tmp_path):
    stmt = "    for _i in range(2):\n        pass\n    _x = 1\n    _x += 1\n"
    root = make_tree(tmp_path, llama(LLAMA.replace(AFTER_SETTER, stmt + "\n" + AFTER_SETTER, 1)))
    code, res, err = scan(root)
    assert res is not None and res["verdict"] == "supported" and code == 0, (res, err)


MODULE_UNBINDS = {
    "except-as-target": "\n\ntry:\n    raise ValueError\nexcept ValueError as LlamaForCausalLM:\n    pass\n",
    "except-as-holder": "\n\ntry:\n    raise ValueError\nexcept ValueError as LlamaModel:\n    pass\n",
    "del-tuple": "\n\ndel (LlamaForCausalLM,)\n",
}


@pytest.mark.parametrize("tail", MODULE_UNBINDS.values(), ids=MODULE_UNBINDS.keys())
def test_a_module_statement_that_unbinds_the_class_is_not_supported(tmp_path, tail):
    # except ... as N unbinds N when the handler ends; del (N,) deletes it (breaker pass A4)
    _not_supported(tmp_path, LLAMA + tail)


SELF_REBOUND = {
    "self-is-self": ("        aux_hidden_states = []\n",
                     "        aux_hidden_states = []\n        self = self\n        self.aux_hidden_state_layers = ()\n"),
    "self-tuple": ("        aux_hidden_states = []\n",
                   "        aux_hidden_states = []\n        self, _ = self, 0\n        self.aux_hidden_state_layers = ()\n"),
}


@pytest.mark.parametrize(("old", "new"), SELF_REBOUND.values(), ids=SELF_REBOUND.keys())
def test_writes_through_a_rebound_self_are_not_supported(tmp_path, old, new):
    # self rebound in the holder's forward, then written through (breaker pass A5)
    assert old in LLAMA
    _not_supported(tmp_path, LLAMA.replace(old, new, 1))
