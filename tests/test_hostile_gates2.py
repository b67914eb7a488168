"""Issue 20, "never a false ``supported``": constructs of the interface and aux-capture gates that
a breaker pass found still answered ``supported``.

Each test builds its own tree (fixtures/minivllm with a file or two edited), scans it through the
real command line (:func:`tests.test_hostile_reach.scan_json`, which also checks the scan wrote
nothing) and checks the verdict: ``blocked`` where the tree decides, else ``unknown`` naming the
construct and its ``file:line``; never ``supported``. Each group also keeps one harmless variant
that must stay ``supported``.

1. the runner's call to the target's ``set_aux_hidden_state_layers`` never runs (a ``return``
   before it, the flag that guards it set back to False);
2. the target's ``forward`` drops the aux states it collected;
3. the protocol is not ``@runtime_checkable``, or its checker function is rebound;
4. a decorator whose closure is rebound after the wrapper is made, a ``__set_name__`` descriptor,
   a class with ``__getattribute__``/``__setattr__``/``__getattr__``.
"""

from __future__ import annotations

import pytest

from tests.conftest import REPO, make_tree
from tests.test_hostile_reach import result_of, scan_json

MODELS = "vllm/model_executor/models"
RUNNER_PATH = "vllm/v1/worker/gpu_model_runner.py"
IFACE_PATH = f"{MODELS}/interfaces.py"
LLAMA_PATH = f"{MODELS}/llama.py"
MINI = REPO / "fixtures" / "minivllm"
RUNNER = (MINI / RUNNER_PATH).read_text()
IFACE = (MINI / IFACE_PATH).read_text()
LLAMA = (MINI / LLAMA_PATH).read_text()

CALL = "            self.model.set_aux_hidden_state_layers(aux_layers)\n"
FLAG = '        self.use_aux_hidden_state_outputs = spec is not None and spec.method == "eagle3"\n'
LOAD = "    def load_model(self, model) -> None:\n        self.model = model\n"


def edited(text: str, old: str, new: str) -> str:
    """``text`` with its one ``old`` replaced by ``new`` (asserts ``old`` is there once)."""
    assert text.count(old) == 1, old
    return text.replace(old, new)


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first line of ``text`` that contains ``needle``."""
    return next(i for i, s in enumerate(text.splitlines(), 1) if needle in s)


def verdict(tmp_path, overrides: dict[str, str], arch: str = "LlamaForCausalLM") -> tuple[int, dict]:
    """``(exit code, the result of arch)`` of a scan of minivllm with ``overrides``."""
    code, doc, _ = scan_json(make_tree(tmp_path, overrides), arch)
    return code, result_of(doc, arch)


def finding(r: dict, gate: str) -> dict:
    """The first finding of ``gate`` in the result ``r`` (fails when there is none)."""
    hits = [f for f in r["findings"] if f["gate"] == gate]
    assert hits, (gate, [(f["gate"], f["severity"], f["message"]) for f in r["findings"]])
    return hits[0]


def not_supported(code: int, r: dict, gate: str, severity: str, path: str, line: int | None, *words: str) -> dict:
    """Checks the verdict is not supported (exit 1) and ``gate`` has a finding of ``severity`` at
    ``path:line`` whose message holds every one of ``words``; returns that finding."""
    assert r["verdict"] != "supported" and code == 1, (r["verdict"], code)
    hits = [f for f in r["findings"] if f["gate"] == gate and f["severity"] == severity]
    assert hits, (gate, severity, [(f["gate"], f["severity"], f["message"]) for f in r["findings"]])
    f = hits[0]
    assert f["path"] == path, f
    if line is not None:
        assert f["line"] == line, f
    for w in words:
        assert w in f["message"], (w, f["message"])
    return f


# -- 1. the runner never calls the setter -----------------------------------------------------


def test_a_return_before_the_runner_calls_the_setter_blocks(tmp_path):
    text = edited(RUNNER, CALL, "            return\n" + CALL)
    code, r = verdict(tmp_path, {RUNNER_PATH: text})
    assert r["verdict"] == "blocked"
    not_supported(code, r, "interface", "error", RUNNER_PATH, line_of(text, "            return"),
                  "set_aux_hidden_state_layers", "return")


def test_a_return_at_the_top_of_load_model_blocks(tmp_path):
    text = edited(RUNNER, LOAD, LOAD + "        return None\n")
    code, r = verdict(tmp_path, {RUNNER_PATH: text})
    assert r["verdict"] == "blocked"
    not_supported(code, r, "interface", "error", RUNNER_PATH, line_of(text, "return None"), "never")


def test_a_raise_before_the_setter_call_blocks(tmp_path):
    text = edited(RUNNER, CALL, '            raise RuntimeError("no")\n' + CALL)
    code, r = verdict(tmp_path, {RUNNER_PATH: text})
    not_supported(code, r, "interface", "error", RUNNER_PATH, line_of(text, 'raise RuntimeError("no")'), "raise")


def test_the_flag_set_back_to_false_in_init_blocks(tmp_path):
    text = edited(RUNNER, FLAG, FLAG + "        self.use_aux_hidden_state_outputs = False\n")
    code, r = verdict(tmp_path, {RUNNER_PATH: text})
    assert r["verdict"] == "blocked"
    not_supported(code, r, "interface", "error", RUNNER_PATH,
                  line_of(text, "self.use_aux_hidden_state_outputs = False"), "use_aux_hidden_state_outputs")


def test_the_flag_set_to_false_in_load_model_before_the_test_blocks(tmp_path):
    text = edited(RUNNER, LOAD, LOAD + "        self.use_aux_hidden_state_outputs = False\n")
    code, r = verdict(tmp_path, {RUNNER_PATH: text})
    assert r["verdict"] == "blocked"
    not_supported(code, r, "interface", "error", RUNNER_PATH,
                  line_of(text, "self.use_aux_hidden_state_outputs = False"), "use_aux_hidden_state_outputs")


def test_the_flag_set_to_false_in_another_method_is_unknown(tmp_path):
    text = RUNNER + "\n    def reset(self):\n        self.use_aux_hidden_state_outputs = False\n"
    code, r = verdict(tmp_path, {RUNNER_PATH: text})
    not_supported(code, r, "interface", "unknown", RUNNER_PATH,
                  line_of(text, "self.use_aux_hidden_state_outputs = False"), "use_aux_hidden_state_outputs")


def test_a_conditional_return_before_the_setter_and_a_late_true_keep_supported(tmp_path):
    # an early return under a test of the flag (0.33.0's shape), and the flag first False then
    # set from the config (0.16.0's shape): nothing changes
    text = edited(RUNNER, LOAD, LOAD + "        if not self.use_aux_hidden_state_outputs:\n            return\n")
    text = edited(text, FLAG, "        self.use_aux_hidden_state_outputs = False\n        if spec is not None:\n"
                  "    " + FLAG)
    code, r = verdict(tmp_path, {RUNNER_PATH: text})
    assert (code, r["verdict"]) == (0, "supported"), r["findings"]


# -- 2. the target's forward drops the aux states -----------------------------------------------

TUPLE_RETURN = "            return hidden_states, aux_hidden_states\n"
OUTER_FORWARD = ("    def forward(self, input_ids, positions, intermediate_tensors=None):\n"
                 "        return self.model(input_ids, positions, intermediate_tensors)\n")


def test_the_holder_returning_only_hidden_states_on_the_aux_path_blocks(tmp_path):
    text = edited(LLAMA, TUPLE_RETURN, "            return hidden_states\n")
    code, r = verdict(tmp_path, {LLAMA_PATH: text})
    assert r["verdict"] == "blocked"
    not_supported(code, r, "aux-capture", "error", LLAMA_PATH, None, "never returns")


def test_the_holder_returning_a_fresh_list_blocks(tmp_path):
    text = edited(LLAMA, TUPLE_RETURN, "            return hidden_states, []\n")
    code, r = verdict(tmp_path, {LLAMA_PATH: text})
    assert r["verdict"] == "blocked"
    not_supported(code, r, "aux-capture", "error", LLAMA_PATH, None, "never returns")


@pytest.mark.parametrize("body", [
    "        out = self.model(input_ids, positions, intermediate_tensors)\n"
    "        if isinstance(out, tuple):\n            out = out[0]\n        return out\n",
    "        return self.model(input_ids, positions, intermediate_tensors)[0]\n",
    "        hidden_states, _ = self.model(input_ids, positions, intermediate_tensors)\n        return hidden_states\n",
])
def test_the_target_forward_dropping_what_the_holder_returns_is_not_supported(tmp_path, body):
    text = edited(LLAMA, OUTER_FORWARD, OUTER_FORWARD.splitlines(True)[0] + body)
    code, r = verdict(tmp_path, {LLAMA_PATH: text})
    not_supported(code, r, "aux-capture", "unknown", LLAMA_PATH,
                  line_of(text, "    def forward(self, input_ids, positions, intermediate"), "LlamaForCausalLM.forward")


@pytest.mark.parametrize("body", [
    "        hidden_states = self.model(input_ids, positions, intermediate_tensors)\n        return hidden_states\n",
    # a type test, an unpacking and both parts returned (0.33.0's MiniCPMForCausalLM.forward)
    "        out = self.model(input_ids, positions, intermediate_tensors)\n"
    "        if isinstance(out, tuple):\n            hidden_states, aux = out\n            return hidden_states, aux\n"
    "        return out\n",
])
def test_the_target_forward_passing_the_holder_output_on_keeps_supported(tmp_path, body):
    text = edited(LLAMA, OUTER_FORWARD, OUTER_FORWARD.splitlines(True)[0] + body)
    code, r = verdict(tmp_path, {LLAMA_PATH: text})
    assert (code, r["verdict"]) == (0, "supported"), r["findings"]


# -- 3. the protocol check ------------------------------------------------------------------------

PROTO_HEAD = "@runtime_checkable\nclass SupportsEagle3(SupportsEagleBase, Protocol):\n"


def test_the_protocol_without_runtime_checkable_blocks(tmp_path):
    text = edited(IFACE, PROTO_HEAD, PROTO_HEAD.removeprefix("@runtime_checkable\n"))
    code, r = verdict(tmp_path, {IFACE_PATH: text})
    assert r["verdict"] == "blocked"
    not_supported(code, r, "interface", "error", IFACE_PATH, line_of(text, "class SupportsEagle3("),
                  "runtime_checkable", "TypeError")


def test_the_checker_rebound_by_a_false_lambda_blocks(tmp_path):
    text = IFACE + "\n\nsupports_eagle3 = lambda m: False  # noqa: E731\n"
    code, r = verdict(tmp_path, {IFACE_PATH: text})
    assert r["verdict"] == "blocked"
    not_supported(code, r, "interface", "error", IFACE_PATH, line_of(text, "supports_eagle3 = lambda"), "False")


def test_the_checker_rebound_by_another_lambda_is_unknown(tmp_path):
    text = IFACE + "\n\nsupports_eagle3 = lambda m: hasattr(m, 'x')  # noqa: E731\n"
    code, r = verdict(tmp_path, {IFACE_PATH: text})
    not_supported(code, r, "interface", "unknown", IFACE_PATH, line_of(text, "supports_eagle3 = lambda"),
                  "supports_eagle3")


def test_the_checker_rebound_by_an_import_alias_of_a_refusing_function_blocks(tmp_path):
    utils = (MINI / MODELS / "utils.py").read_text() + "\n\ndef never(model):\n    return False\n"
    text = IFACE + "\n\nfrom .utils import never as supports_eagle3  # noqa: E402\n"
    code, r = verdict(tmp_path, {IFACE_PATH: text, f"{MODELS}/utils.py": utils})
    assert r["verdict"] == "blocked"
    not_supported(code, r, "interface", "error", f"{MODELS}/utils.py", None, "always returns False")


def test_the_checker_rebound_by_an_import_from_outside_is_unknown(tmp_path):
    text = IFACE + "\n\nfrom elsewhere import check as supports_eagle3  # noqa: E402\n"
    code, r = verdict(tmp_path, {IFACE_PATH: text})
    not_supported(code, r, "interface", "unknown", IFACE_PATH, line_of(text, "import check as supports_eagle3"),
                  "supports_eagle3")


# -- 4. members hidden past their def ----------------------------------------------------------

SUB = '''import functools

from vllm.model_executor.models.llama import LlamaForCausalLM

{defs}

{cls_deco}class LlamaSubForCausalLM(LlamaForCausalLM):
{body}
'''
SETTER_BODY = ('    {deco}def set_aux_hidden_state_layers(self, layers):\n'
               '        self.model.aux_hidden_state_layers = layers\n')
REBOUND = '''def deco(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    fn = lambda *a, **k: None  # noqa: E731
    return wrapper
'''
CLS_REBOUND = '''def deco(cls):
    orig = cls.set_aux_hidden_state_layers

    def setter(self, layers):
        return orig(self, layers)
    cls.set_aux_hidden_state_layers = setter
    orig = lambda *a: None  # noqa: E731
    return cls
'''
SUB_PATH = f"{MODELS}/sub.py"
SUB_ARCH = "LlamaSubForCausalLM"


def sub_tree(defs: str = "", body: str = SETTER_BODY.format(deco=""), cls_deco: str = "") -> dict[str, str]:
    """minivllm with ``LlamaSubForCausalLM(LlamaForCausalLM)`` in ``sub.py`` (``defs`` before it, its
    ``body``, ``cls_deco`` as its decorator line), registered as an architecture."""
    reg = (MINI / MODELS / "registry.py").read_text()
    anchor = '"LlamaForCausalLM": ("llama", "LlamaForCausalLM"),'
    assert anchor in reg
    reg = reg.replace(anchor, anchor + f'\n    "{SUB_ARCH}": ("sub", "{SUB_ARCH}"),', 1)
    return {SUB_PATH: SUB.format(defs=defs, body=body, cls_deco=cls_deco), f"{MODELS}/registry.py": reg}


def test_the_sub_target_is_supported_as_written(tmp_path):
    code, r = verdict(tmp_path, sub_tree(), SUB_ARCH)
    assert (code, r["verdict"]) == (0, "supported"), r["findings"]


def test_a_method_decorator_whose_closure_is_rebound_is_unknown(tmp_path):
    tree = sub_tree(REBOUND, SETTER_BODY.format(deco="@deco\n    "))
    code, r = verdict(tmp_path, tree, SUB_ARCH)
    text = tree[SUB_PATH]
    f = not_supported(code, r, "interface", "unknown", SUB_PATH, None, "deco")
    assert str(line_of(text, "fn = lambda")) in f["message"] or f["line"] == line_of(text, "fn = lambda")


def test_a_class_decorator_whose_closure_is_rebound_is_unknown(tmp_path):
    tree = sub_tree(CLS_REBOUND, cls_deco="@deco\n")
    code, r = verdict(tmp_path, tree, SUB_ARCH)
    not_supported(code, r, "interface", "unknown", SUB_PATH, None, "deco")
    # the base class, undecorated, is unaffected
    code, r = verdict(tmp_path, tree)
    assert (code, r["verdict"]) == (0, "supported"), r["findings"]


SET_NAME = '''class Hider:
    def __set_name__(self, owner, name):
        owner.set_aux_hidden_state_layers = None
'''


def test_a_set_name_descriptor_in_the_class_body_is_unknown(tmp_path):
    tree = sub_tree(SET_NAME, "    hider = Hider()\n")
    code, r = verdict(tmp_path, tree, SUB_ARCH)
    not_supported(code, r, "interface", "unknown", SUB_PATH, line_of(tree[SUB_PATH], "hider = Hider()"),
                  "__set_name__")
    code, r = verdict(tmp_path, tree)
    assert (code, r["verdict"]) == (0, "supported"), r["findings"]


@pytest.mark.parametrize("dunder, body", [
    ("__getattribute__", "        if name == 'set_aux_hidden_state_layers':\n            raise AttributeError(name)\n"
                         "        return super().__getattribute__(name)\n"),
    ("__getattr__", "        raise AttributeError(name)\n"),
])
def test_a_class_that_takes_over_attribute_reads_is_unknown(tmp_path, dunder, body):
    tree = sub_tree("", f"    def {dunder}(self, name):\n{body}")
    code, r = verdict(tmp_path, tree, SUB_ARCH)
    not_supported(code, r, "interface", "unknown", SUB_PATH, line_of(tree[SUB_PATH], f"def {dunder}"), dunder)
    code, r = verdict(tmp_path, tree)
    assert (code, r["verdict"]) == (0, "supported"), r["findings"]


def test_a_class_that_takes_over_attribute_writes_is_unknown(tmp_path):
    body = ("    def __setattr__(self, name, value):\n        if name == 'model':\n"
            "            return\n        super().__setattr__(name, value)\n")
    tree = sub_tree("", body)
    code, r = verdict(tmp_path, tree, SUB_ARCH)
    not_supported(code, r, "interface", "unknown", SUB_PATH, line_of(tree[SUB_PATH], "def __setattr__"), "__setattr__")
