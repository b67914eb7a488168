"""Issue 20, the sixth hostile pass: what a model module runs or rebinds that a static reader may
take for inert.

Each test changes ``llama.py`` of fixtures/minivllm (a Llama target the tree otherwise supports),
runs the real command line and checks that the verdict is never ``supported``: ``blocked`` when
the tree decides (a member bound to None), else ``unknown`` naming the construct and its
``file:line``; and that nothing was written. The kinds: a member bound to a value after its
``def`` (``forward = None``); module statements that always raise when the module is imported
(a literal division by zero, a name bound nowhere); builtins the model module rebinds (``len``,
``range``), the loop's ``islice`` rebound after its import or changed in ``itertools`` itself;
and code run by other means than ``exec`` (``runpy``, ``operator.methodcaller`` of a dunder, a
module found by a computed name, a function's ``__code__`` replaced).
"""

from __future__ import annotations

import pytest

from tests.conftest import REPO, make_tree
from tests.test_hostile_reach import result_of, scan_json

MODELS = "vllm/model_executor/models"
LLAMA = (REPO / "fixtures" / "minivllm" / MODELS / "llama.py").read_text()
PATH = f"{MODELS}/llama.py"
BEFORE_TARGET = "class LlamaForCausalLM("


def _scan(text: str) -> tuple[int, dict]:
    assert text != LLAMA
    root = make_tree(_scan.tmp, {PATH: text})
    code, doc, _ = scan_json(root)
    return code, result_of(doc)


@pytest.fixture(autouse=True)
def _tmp(tmp_path):
    _scan.tmp = tmp_path


def _line_of(text: str, needle: str) -> int:
    return next(i for i, t in enumerate(text.splitlines(), 1) if needle in t)


def _finding(r: dict, severity: str, *words: str) -> dict:
    hits = [f for f in r["findings"] if f["severity"] == severity and all(w in f["message"] for w in words)]
    assert hits, (severity, words, r["findings"])
    return hits[0]


# -- a member bound to a value after its def ----------------------------------------------------


def test_the_targets_forward_bound_to_none_after_its_def_blocks_the_capture():
    text = LLAMA.replace("    def compute_logits", "    forward = None\n\n    def compute_logits")
    code, r = _scan(text)
    assert code == 1 and r["verdict"] == "blocked"
    f = _finding(r, "error", "LlamaForCausalLM.forward = None", "TypeError")
    assert f["gate"] == "aux-capture" and f["path"] == PATH and f["line"] == _line_of(text, "forward = None")


def test_the_targets_forward_bound_to_a_lambda_is_not_followed():
    text = LLAMA.replace("    def compute_logits", "    forward = lambda self, *a: None\n\n    def compute_logits")
    code, r = _scan(text)
    assert code == 1 and r["verdict"] == "unknown"
    f = _finding(r, "unknown", "LlamaForCausalLM.forward = ", "does not follow")
    assert f["line"] == _line_of(text, "forward = lambda")


# -- module statements that always raise on import -----------------------------------------------


@pytest.mark.parametrize("tail, words", [
    ("_X = 1 / 0\n", ("`1 / 0`", "ZeroDivisionError")),
    ("1 // 0\n", ("`1 // 0`", "ZeroDivisionError")),
    ("_X: int = 3 % 0\n", ("`3 % 0`", "ZeroDivisionError")),
    ("_X = undefined_name_xyz\n", ("undefined_name_xyz", "NameError")),
    ("undefined_name_xyz()\n", ("undefined_name_xyz", "NameError")),
    ("undefined_name_xyz.attr = 1\n", ("undefined_name_xyz", "NameError")),
])
def test_a_module_statement_that_always_raises_makes_the_target_unknown(tail, words):
    text = LLAMA + "\n" + tail
    code, r = _scan(text)
    assert code == 1 and r["verdict"] == "unknown"
    f = _finding(r, "unknown", *words)
    assert f["rule"] == "EA300" and f["path"] == PATH and f["line"] == len(text.splitlines())
    assert f"{PATH}:{f['line']}" in f["message"]


@pytest.mark.parametrize("tail", [
    "_X = 1 / 2\n",                                         # no zero
    "_ZERO = 0\n_X = 1 / _ZERO if _ZERO else 0\n",          # guarded, not a literal
    "try:\n    _X = 1 / 0\nexcept ZeroDivisionError:\n    _X = 0\n",
    "if False:\n    _X = undefined_name_xyz\n",
    "_X = [undefined_name_xyz for _ in ()]\n",              # a comprehension's own scope, never run
    "_f = lambda: undefined_name_xyz\n",                    # runs later, maybe never
    "_X = later_name if False else 0\nlater_name = 1\n",    # bound later in the module: not decided
])
def test_a_module_statement_that_may_not_raise_is_not_counted(tail):
    code, r = _scan(LLAMA + "\n" + tail)
    assert code == 0 and r["verdict"] == "supported", r["findings"]


@pytest.mark.parametrize("tail, needle, words", [
    # a raise that the statement holding it always propagates
    ("try:\n    raise ImportError('x')\nfinally:\n    pass\n", "raise ImportError", ("raises ImportError",)),
    ("try:\n    pass\nfinally:\n    raise ImportError('x')\n", "raise ImportError", ("raises ImportError",)),
    ("try:\n    raise ImportError('x')\nexcept KeyError:\n    pass\n", "raise ImportError", ("raises ImportError",)),
    ("try:\n    raise ImportError('x')\nexcept ImportError:\n    raise\n", "raise ImportError", ("raises ImportError",)),
    ("class _Z:\n    raise ImportError('x')\n", "raise ImportError", ("raises ImportError",)),
    # a function that always raises, called in a value
    ("def _f():\n    raise ImportError('x')\n_y = _f()\n", "_y = _f()", ("calls _f()", "always raises")),
    ("def _f():\n    raise ImportError('x')\n_y = [1, _f()]\n", "_y = [1", ("calls _f()", "always raises")),
    # a name loaded before the module binds it
    ("_X = _later\n_later = 1\n", "_X = _later", ("loads _later", "only later", "NameError")),
    ("if _later:\n    pass\ndef _later():\n    pass\n", "if _later", ("loads _later", "only later")),
    ("_X = [c for c in _later]\n_later = [1]\n", "_X = [c", ("loads _later", "only later")),  # the first iterable
])
def test_a_compound_statement_or_early_name_that_always_raises_makes_the_target_unknown(tail, needle, words):
    text = LLAMA + "\n" + tail
    code, r = _scan(text)
    assert code == 1 and r["verdict"] == "unknown"
    f = _finding(r, "unknown", *words)
    assert f["rule"] == "EA300" and f"{PATH}:{_line_of(text, needle)}" in f["message"], f


@pytest.mark.parametrize("tail", [
    "try:\n    raise ImportError('x')\nexcept ImportError:\n    pass\n",          # caught
    "try:\n    raise ImportError('x')\nexcept (KeyError, Exception):\n    pass\n",  # caught by a base
    "try:\n    raise ImportError('x')\nexcept _Mine:\n    pass\n_Mine = 1\n",       # a type the tree binds
    "with _ctx():\n    raise ImportError('x')\n",  # a context manager may swallow it
    "def _f():\n    raise ImportError('x')\n_y = _f if True else _f()\n",  # not called
    "_later = 0\nif _later:\n    pass\n_later = 1\n",  # bound before too
    "_L = [1]\n_X = {c: c for c in _L}\nc = 1\n",  # the comprehension's own variable
    "def _g():\n    global _later\n    _later = 1\n_g()\n_X = _later\n_later = 2\n",  # bound by a call
])
def test_a_statement_that_may_not_raise_after_all_is_not_counted(tail):
    text = LLAMA + "\n" + tail
    if "_ctx" in text:
        text = text.replace("with _ctx", "import contextlib\n_ctx = contextlib.suppress\nwith _ctx")
    code, r = _scan(text)
    assert code == 0 and r["verdict"] == "supported", r["findings"]


# -- builtins and the loop's helpers rebound ----------------------------------------------------


@pytest.mark.parametrize("edit, name", [
    (lambda t: t.replace("class LlamaModel", "def len(x):\n    return 0\n\n\nclass LlamaModel"), "len"),
    (lambda t: t.replace("from itertools import islice\n", "from itertools import islice\nrange = lambda *a: []\n"),
     "range"),
    (lambda t: t.replace("from torch import nn\n", "from torch import nn\nfrom torch import max as tuple\n"), "tuple"),
])
def test_a_builtin_the_model_module_rebinds_makes_the_target_unknown(edit, name):
    text = edit(LLAMA)
    code, r = _scan(text)
    assert code == 1 and r["verdict"] == "unknown"
    f = _finding(r, "unknown", f"rebinds the builtin {name}")
    assert f["path"] == PATH and f["line"] == next(
        i for i, t in enumerate(text.splitlines(), 1) if f"def {name}(" in t or f"{name} = " in t or f"as {name}" in t)


def test_islice_rebound_after_its_import_makes_the_capture_unknown():
    text = LLAMA + "\n\ndef islice(*a):\n    return iter(())\n"
    code, r = _scan(text)
    assert code == 1 and r["verdict"] == "unknown"
    f = _finding(r, "unknown", "iterates its layers through islice", "rebinds")
    assert f["gate"] == "aux-capture" and f["line"] == _line_of(text, "for idx, layer in")


@pytest.mark.parametrize("patch", [
    "import itertools\nitertools.islice = lambda *a: iter(())\n",
    "import itertools as _it\n_it.islice = lambda *a: iter(())\n",
])
def test_islice_changed_in_itertools_makes_the_capture_unknown(patch):
    text = LLAMA.replace("from itertools import islice\n", patch + "from itertools import islice\n")
    code, r = _scan(text)
    assert code == 1 and r["verdict"] == "unknown"
    f = _finding(r, "unknown", "changes itertools.islice")
    assert f["path"] == PATH and f["line"] == _line_of(text, ".islice = ")


def test_islice_changed_in_itertools_from_another_module_makes_the_capture_unknown(tmp_path):
    root = make_tree(tmp_path, {f"{MODELS}/toy.py": (REPO / "fixtures" / "minivllm" / MODELS / "toy.py").read_text()
                                + "\nimport itertools\nitertools.islice = lambda *a: iter(())\n"})
    code, doc, _ = scan_json(root)
    r = result_of(doc)
    assert code == 1 and r["verdict"] == "unknown"
    f = _finding(r, "unknown", "changes itertools.islice")
    assert f["path"] == f"{MODELS}/toy.py"


def test_an_unchanged_loop_helper_and_other_module_names_stay_supported():
    # a module-level name that is no builtin, and islice imported twice from itertools
    text = LLAMA.replace("from itertools import islice\n", "from itertools import islice\nfrom itertools import islice\n"
                         "SIZE = 16\n")
    code, r = _scan(text)
    assert code == 0 and r["verdict"] == "supported", r["findings"]


# -- code run by other means -------------------------------------------------------------------


@pytest.mark.parametrize("tail, construct", [
    ("import runpy\nrunpy.run_path(__file__.replace('.py', '.txt'), init_globals=globals())\n", "runpy.run_path"),
    ("from runpy import run_path as _rp\n_rp('patch.txt')\n", "_rp("),
    ("import operator\noperator.methodcaller('__delattr__', 'set_aux_hidden_state_layers')(LlamaForCausalLM)\n",
     "operator.methodcaller"),
    ("import importlib\nimportlib.import_module('built' + 'ins').exec('del LlamaForCausalLM')\n",
     "importlib.import_module"),
    ("def _nope(self, layers):\n    pass\n\n\nLlamaForCausalLM.set_aux_hidden_state_layers.__code__ = _nope.__code__\n",
     "__code__"),
])
def test_code_run_by_other_means_makes_the_target_unknown(tail, construct):
    text = LLAMA + "\n" + tail
    code, r = _scan(text)
    assert code == 1 and r["verdict"] == "unknown"
    f = _finding(r, "unknown", construct)
    # said where the class is resolved (its registry row) or where the construct is
    assert f["path"] == PATH or PATH in f["message"], f


def test_a_method_caller_of_a_plain_method_name_is_no_code_run():
    text = LLAMA + "\nimport operator\n_get = operator.methodcaller('get_eagle3_aux_hidden_state_layers')\n"
    code, r = _scan(text)
    assert code == 0 and r["verdict"] == "supported", r["findings"]


def test_a_method_that_swaps_in_its_own_compiled_code_is_no_code_run():
    # the torch.compile wrapper's pattern (vllm/compilation/wrapper.py): a method replaces the code
    # of its own class's forward with that forward compiled
    text = LLAMA.replace("    def compute_logits", "    def _swap(self, compiled):\n"
                         "        self.__class__.forward.__code__ = compiled\n\n    def compute_logits")
    code, r = _scan(text)
    assert code == 0 and r["verdict"] == "supported", r["findings"]


def test_a_methods_code_replaced_in_a_called_function_makes_the_target_unknown():
    text = LLAMA + ("\n\ndef _nope(self, layers):\n    pass\n\n\ndef _patch():\n"
                    "    LlamaForCausalLM.set_aux_hidden_state_layers.__code__ = _nope.__code__\n\n\n_patch()\n")
    code, r = _scan(text)
    assert code == 1 and r["verdict"] == "unknown"
    _finding(r, "unknown", "__code__")


# -- the same on SGLang ---------------------------------------------------------------------


def test_a_builtin_an_sglang_model_module_rebinds_makes_the_target_unknown(tmp_path):
    from tests.test_hostile_bindings import expect, scan, sglang_tree

    path = "sglang/srt/models/llama.py"
    text = (REPO / "fixtures" / "minisglang" / path).read_text()
    assert scan(sglang_tree(tmp_path / "before", {}))[1]["verdict"] == "supported"
    changed = text.replace("import torch.nn as nn\n", "import torch.nn as nn\n\nrange = lambda *a: ()\n")
    res = expect(sglang_tree(tmp_path / "after", {path: changed}), "unknown", "rebinds the builtin range")
    f = next(f for f in res["findings"] if "rebinds the builtin range" in f["message"])
    assert f["path"] == path and f["line"] == 5


# -- the seventh pass: more spellings, and harmless trees left alone -----------------------------


@pytest.mark.parametrize("tail, words", [
    ("_X = 1 / -0\n", ("`1 / -0`", "ZeroDivisionError")),
    ("_X = (1 / 0) + 1\n", ("`1 / 0`", "ZeroDivisionError")),
    ("print(1 / 0)\n", ("`1 / 0`", "ZeroDivisionError")),
    ("for _q in undefined_name_xyz:\n    pass\n", ("undefined_name_xyz", "NameError")),
    ("if undefined_name_xyz:\n    pass\n", ("undefined_name_xyz", "NameError")),
    ("with undefined_name_xyz:\n    pass\n", ("undefined_name_xyz", "NameError")),
    ("@undefined_name_xyz\ndef _f():\n    pass\n", ("undefined_name_xyz", "NameError")),
    ("def _f(x=undefined_name_xyz):\n    pass\n", ("undefined_name_xyz", "NameError")),
])
def test_more_module_statements_that_always_raise(tail, words):
    text = LLAMA + "\n" + tail
    code, r = _scan(text)
    assert code == 1 and r["verdict"] == "unknown"
    f = _finding(r, "unknown", *words)
    assert f["rule"] == "EA300" and f["path"] == PATH and f["line"] == len(LLAMA.splitlines()) + 2
    assert "\n" not in f["message"]


@pytest.mark.parametrize("tail", [
    "_H = __cached__\n",                                     # set on every module imported from source
    "_X = 0 and 1 / 0\n",                                   # never evaluated
    "_X = 1 if True else 1 / 0\n",
    "if False and undefined_name_xyz:\n    pass\n",
])
def test_harmless_module_statements_stay_supported(tail):
    code, r = _scan(LLAMA + "\n" + tail)
    assert code == 0 and r["verdict"] == "supported", r["findings"]


def test_a_member_bound_to_itself_changes_nothing():
    text = LLAMA.replace("    def compute_logits", "    forward = forward\n\n    def compute_logits")
    code, r = _scan(text)
    assert code == 0 and r["verdict"] == "supported", r["findings"]


def test_a_method_replacing_the_code_of_its_class_setter_is_not_taken_for_the_compile_wrapper():
    text = LLAMA.replace("        self.lm_head = nn.Linear(16, 32, bias=False)\n",
                         "        self.lm_head = nn.Linear(16, 32, bias=False)\n"
                         "        self.__class__.set_aux_hidden_state_layers.__code__ = _nope.__code__\n")
    text += "\n\ndef _nope(self, layers):\n    pass\n"
    code, r = _scan(text)
    assert code == 1 and r["verdict"] == "unknown"
    _finding(r, "unknown", "__code__")


@pytest.mark.parametrize("old, new, name", [
    ("        aux_hidden_states = []\n", "        aux_hidden_states = []\n        islice = lambda *a: iter(())\n", "islice"),
    ("        aux_hidden_states = []\n", "        aux_hidden_states = []\n        from os import path as islice\n",
     "islice"),
    ("    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, intermediate_tensors=None):\n",
     "    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, intermediate_tensors=None,\n"
     "                enumerate=lambda x: iter(())):\n", "enumerate"),
])
def test_a_loop_helper_the_forward_binds_itself_makes_the_capture_unknown(old, new, name):
    assert old in LLAMA
    code, r = _scan(LLAMA.replace(old, new))
    assert code == 1 and r["verdict"] == "unknown"
    _finding(r, "unknown", f" {name}, which", "rebinds")


@pytest.mark.parametrize("tail", ["_X = undefined_name_xyz\n", "_X = 1 / 0\n"])
def test_a_module_the_model_module_imports_that_always_raises_makes_the_target_unknown(tmp_path, tail):
    utils = f"{MODELS}/utils.py"
    text = (REPO / "fixtures" / "minivllm" / utils).read_text() + "\n" + tail
    root = make_tree(tmp_path, {utils: text})
    code, doc, _ = scan_json(root)
    r = result_of(doc)
    assert code == 1 and r["verdict"] == "unknown"
    f = _finding(r, "unknown", f"imports vllm.model_executor.models.utils, whose import fails", f"{utils}:")
    assert f["path"] == PATH and f["line"] == _line_of(LLAMA, "from .utils import")
