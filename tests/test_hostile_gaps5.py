"""Issue 20, a fifth breaker pass: the gaps left open by the last round, each of which gave
``supported`` (or a wrong verdict) on main.

Each test builds its own tree (fixtures/minivllm or fixtures/minisglang with a few lines changed),
scans one target through the real command line and checks verdict, exit code and, for
``unknown``, that a finding names the construct and its ``file:line``; every scan leaves the tree
as it was (:func:`tests.test_hostile_bindings.scan`). Each gap has a control: the same tree
without the trick keeps its verdict.

1. vLLM's config refusing eagle3 behind a helper of the config (``if self._is_eagle3(): raise``).
2. Names the refusal test or the allowlist reads from another module (``from .consts import *``,
   ``eagle3_target_supported = ALLOWED`` imported), or a module constant allowlist.
3. SGLang: another model module writing a model module's ``EntryClass`` by a name not written out
   (``vars(m)["EntryClass"] = ...``, ``setattr(m, "Entry" + "Class", ...)``).
4. SGLang: a module outside ``sglang/srt/`` (``sglang/patches.py``, imported by the package) that
   rebinds a model module's ``EntryClass``.
5. vLLM's run-time ``ModelRegistry`` whose resolution fails for every name alike.
6. A function the speculative config calls on every path that always raises.
"""

from __future__ import annotations

import pytest

from tests.conftest import make_tree
from tests.test_hostile_bindings import expect, scan, sglang_tree
from tests.test_hostile_engines2 import SG_LLAMA_PATH, expect_unknown_at, line_of
from tests.test_hostile_engines3 import POST_INIT, REGISTRY_PATH, RESOLVE, SPEC, SPEC_PATH, _refusing, _registry, \
    expect_refused

R = '            raise ValueError("no")\n'
CONSTS = "vllm/config/consts.py"


def _if(test: str) -> str:
    return f"        if {test}:\n" + R


def _member(text: str, body: str) -> str:
    """``text`` with ``body`` at the top of the config class."""
    assert POST_INIT in text
    return text.replace(POST_INIT, body + POST_INIT)


def _supported(root, arch: str = "LlamaForCausalLM") -> None:
    code, res, _ = scan(root, arch)
    assert (code, res["verdict"]) == (0, "supported"), res


# -- 1. a refusal behind a helper of the config -------------------------------------------------

IS_EAGLE3 = "    def _is_eagle3(self):\n        return self.method == 'eagle3'\n\n"


@pytest.mark.parametrize("test, member", [
    ("self._is_eagle3()", IS_EAGLE3),
    ("self._is_eagle3()", "    def _is_eagle3(self) -> bool:\n        \"\"\"Doc.\"\"\"\n        return self.method in ('eagle3',)\n\n"),
    ("self.is_eagle3", "    @property\n    def is_eagle3(self):\n        return self.method == 'eagle3'\n\n"),
    ("self._is('eagle3')", "    def _is(self, m):\n        return self.method == m\n\n"),
    ("self._same(self.method)", "    @staticmethod\n    def _same(m, want='eagle3'):\n        return m == want\n\n"),
    ("_is_eagle3(self)", ""),
], ids=["method", "docstring-and-tuple", "property", "constant-argument", "staticmethod-default", "module-function"])
def test_refusal_behind_a_helper_of_the_config_is_blocked(tmp_path, test, member):
    tail = "\n\ndef _is_eagle3(c):\n    return c.method == 'eagle3'\n"
    text = _member(_refusing(_if(test), tail=tail), member)
    expect_refused(text, f"if {test}:", tmp_path)


def test_refusal_behind_a_helper_not_evaluated_is_unknown(tmp_path):
    # a helper of more than one statement that reads the method: not evaluated, named
    member = "    def _is_eagle3(self):\n        m = self.method\n        return m == 'eagle3'\n\n"
    text = _member(_refusing(_if("self._is_eagle3()")), member)
    res = expect_unknown_at(make_tree(tmp_path, {SPEC_PATH: text}), SPEC_PATH, text, "if self._is_eagle3():")
    assert any("self._is_eagle3()" in f["message"] and "not evaluated" in f["message"] for f in res["findings"])


@pytest.mark.parametrize("member", [
    "    def _is_eagle3(self):\n        return self.method == 'ngram'\n\n",
    "    def _is_eagle3(self):\n        return self.method == 'eagle3' and self.num_speculative_tokens > 99\n\n",
    "    def _is_eagle3(self):\n        if self.num_speculative_tokens > 99:\n            return True\n"
    "        return False\n\n",
], ids=["other-method", "and-run-option", "run-option-only"])
def test_helper_that_does_not_refuse_eagle3_keeps_it_supported(tmp_path, member):
    _supported(make_tree(tmp_path, {SPEC_PATH: _member(_refusing(_if("self._is_eagle3()")), member)}))


# -- 2. names from another module ---------------------------------------------------------------

def test_refusal_reading_a_star_import_is_unknown(tmp_path):
    text = _refusing(_if("self.method in BAD"), "from .consts import *\n")
    root = make_tree(tmp_path, {SPEC_PATH: text, CONSTS: "BAD = ('medusa', 'eagle3')\n"})
    res = expect_unknown_at(root, SPEC_PATH, text, "if self.method in BAD:")
    assert any("from .consts import *" in f["message"] for f in res["findings"])


def test_star_import_beside_a_constant_of_the_module_keeps_the_refusal(tmp_path):
    # the module's own binding is followed as before: blocked
    text = _refusing(_if("self.method in BAD"), "from .consts import *\nBAD = ('eagle3',)\n")
    expect_refused(text, "if self.method in BAD:", tmp_path)


LIST = 'eagle3_target_supported = ["llama", "qwen"]'


@pytest.mark.parametrize("head, value", [
    ("from vllm.config.consts import ALLOWED\n", "ALLOWED"),
    ("from .consts import *\n", "ALLOWED"),
    ("from vllm.config import consts\n", "consts.ALLOWED"),
], ids=["from-import", "star-import", "module-attribute"])
def test_allowlist_bound_in_another_module_is_unknown(tmp_path, head, value):
    # main read no entries from it and blocked every target, the allowed ones too
    text = _refusing("", head).replace(LIST, f"eagle3_target_supported = {value}")
    root = make_tree(tmp_path, {SPEC_PATH: text, CONSTS: "ALLOWED = ['llama', 'qwen']\n"})
    res = expect(root, "unknown", "eagle3_target_supported")
    where = f"{SPEC_PATH}:{line_of(text, f'eagle3_target_supported = {value}')}"
    assert any(where in f["message"] and (value == "consts.ALLOWED" or head.strip() in f["message"])
               for f in res["findings"]), res["findings"]


@pytest.mark.parametrize("model_type, verdict", [("llama", "supported"), ("gemma", "blocked")])
def test_allowlist_bound_to_a_module_constant_is_followed(tmp_path, model_type, verdict):
    # main read no entries from a module constant and blocked every target
    text = _refusing("", '_ALLOWED = ("llama",\n            "qwen")\n').replace(LIST, "eagle3_target_supported = _ALLOWED")
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: text}), "LlamaForCausalLM", "--model-type", model_type)
    assert (code, res["verdict"]) == ({"supported": 0, "blocked": 1}[verdict], verdict), res


# -- 3. SGLang: EntryClass written by a name not written out ------------------------------------

MODELS = "sglang/srt/models"


@pytest.mark.parametrize("write", [
    "vars(_l)['EntryClass'] = []",
    "vars(_l)[_N] = []",
    "_l.__dict__['EntryClass'] = []",
    "setattr(_l, 'Entry' + 'Class', [])",
    "setattr(_l, _N, [])",
    "vars(_l).update({_N: []})",
], ids=["vars", "vars-computed", "dunder-dict", "setattr-computed", "setattr-name", "vars-update"])
def test_sglang_entryclass_written_by_a_computed_name_is_unknown(tmp_path, write):
    # aa_patch sorts before llama: SGLang's registry imports it first, so the write runs before the read
    text = f"from sglang.srt.models import llama as _l\n\n_N = 'Entry' + 'Class'\n{write}\nEntryClass = []\n"
    path = f"{MODELS}/aa_patch.py"
    expect_unknown_at(sglang_tree(tmp_path, {path: text}), path, text, write)


@pytest.mark.parametrize("files", [
    {f"{MODELS}/zz_patch.py": "from sglang.srt.models import llama as _l\n\nvars(_l)['EntryClass'] = []\nEntryClass = []\n"},
    {f"{MODELS}/aa_patch.py": "from sglang.srt.models import llama as _l\n\n_l.OTHER = 1\nsetattr(_l, 'OTHER', 1)\n"
                              "EntryClass = []\n"},
    {f"{MODELS}/aa_patch.py": "import torch\n\nsetattr(torch, 'Entry' + 'Class', [])\nEntryClass = []\n"},
], ids=["after-the-read", "other-attribute", "not-a-module-of-the-tree"])
def test_sglang_writes_that_cannot_reach_the_entryclass_keep_it_supported(tmp_path, files):
    _supported(sglang_tree(tmp_path, files))


# -- 4. SGLang: a patcher outside sglang/srt/ ---------------------------------------------------

@pytest.mark.parametrize("write", [
    "llama.EntryClass = []",
    "llama.EntryClass.clear()",
    "setattr(llama, 'EntryClass', [])",
    "vars(llama)[_N] = []",
], ids=["assign", "clear", "setattr", "vars"])
def test_sglang_entryclass_rebound_outside_srt_is_unknown(tmp_path, write):
    text = f"from sglang.srt.models import llama\n\n_N = 'EntryClass'\n{write}\n"
    files = {"sglang/patches.py": text, "sglang/__init__.py": "from sglang import patches\n"}
    res = expect_unknown_at(sglang_tree(tmp_path, files), "sglang/patches.py", text, write)
    assert any("when sglang.patches is imported" in f["message"] for f in res["findings"])


def test_sglang_module_outside_srt_that_writes_no_entryclass_keeps_it_supported(tmp_path):
    text = "from sglang.srt.models import llama\n\nllama.OTHER = []\n"
    _supported(sglang_tree(tmp_path, {"sglang/patches.py": text, "sglang/__init__.py": "from sglang import patches\n"}))


# -- 5. vLLM: a ModelRegistry that fails for every name -----------------------------------------

LOOKUP = "            if arch in self.models:\n"
TRY = "            if arch in self.models and self._try_load_model_cls(arch) is not None:\n"


@pytest.mark.parametrize("text, construct", [
    (_registry().replace(RESOLVE, RESOLVE + "        raise ValueError('nope')\n"), "raise ValueError('nope')"),
    (_registry().replace(RESOLVE, RESOLVE + "        return None\n"), "return None"),
    (_registry(in_class="    def _try_load_model_cls(self, arch):\n        raise ValueError('cannot load')\n\n")
     .replace(LOOKUP, TRY), "raise ValueError('cannot load')"),
    (_registry(in_class="    def _try_load_model_cls(self, arch):\n        print(arch)\n        return None\n\n")
     .replace(LOOKUP, TRY), "return None"),
], ids=["resolve-raises", "resolve-returns-none", "loader-raises", "loader-returns-none"])
def test_vllm_registry_failing_for_every_name_is_unknown(tmp_path, text, construct):
    res = expect_unknown_at(make_tree(tmp_path, {REGISTRY_PATH: text}), REGISTRY_PATH, text, construct)
    assert any("for every architecture name alike" in f["message"] for f in res["findings"])


@pytest.mark.parametrize("text", [
    # vLLM's shape: the failure path takes the list, after the rows have returned
    _registry(in_class="    def _raise_for_unsupported(self, architectures):\n        raise ValueError('no')\n\n")
    .replace("        raise ValueError(f\"none of {architectures} is supported\")\n",
             "        return self._raise_for_unsupported(architectures)\n"),
    # a loader that gives the class
    _registry(in_class="    def _try_load_model_cls(self, arch):\n        return arch\n\n").replace(LOOKUP, TRY),
    # a check whose result is not read
    _registry(in_class="    def _log(self, arch):\n        print(arch)\n\n")
    .replace(LOOKUP, LOOKUP + "                self._log(arch)\n"),
], ids=["failure-path", "loader-returns", "result-unused"])
def test_vllm_registry_that_resolves_a_row_keeps_it_supported(tmp_path, text):
    _supported(make_tree(tmp_path, {REGISTRY_PATH: text}))


# -- 6. a route of the config that always raises ------------------------------------------------

SETUP = "\n\ndef _setup(c):\n    raise ValueError('broken')\n"


@pytest.mark.parametrize("text, needle", [
    (_refusing("        _setup(self)\n", tail=SETUP), "    raise ValueError('broken')"),
    (_member(_refusing("        self._setup()\n"), "    def _setup(self):\n        raise RuntimeError('broken')\n\n"),
     "raise RuntimeError('broken')"),
], ids=["module-function", "method"])
def test_config_route_that_always_raises_is_blocked(tmp_path, text, needle):
    expect_refused(text, needle, tmp_path)


@pytest.mark.parametrize("text", [
    _refusing("        if self.num_speculative_tokens > 99:\n            _setup(self)\n", tail=SETUP),
    _refusing("        try:\n            _setup(self)\n        except ValueError:\n            pass\n", tail=SETUP),
    SPEC.rstrip("\n") + "\n" + SETUP,
], ids=["under-a-run-option", "caught", "never-called"])
def test_config_route_that_raises_only_sometimes_keeps_it_supported(tmp_path, text):
    _supported(make_tree(tmp_path, {SPEC_PATH: text}))
