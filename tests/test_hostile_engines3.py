"""Issue 20, a second breaker pass on the engine and rule layers: constructs that gave a false
``supported`` (exit 0).

Each test builds its own tree (fixtures/minivllm or fixtures/minisglang with a few lines
changed), scans one target through the real command line and checks the verdict: ``blocked``
when the tree decides, ``unknown`` naming the construct and its ``file:line`` when it cannot;
never ``supported``. Every scan leaves the tree as it was (:func:`tests.test_hostile_bindings.scan`).

1. vLLM's config validation refusing eagle3 through a name, a ``match``, an ``elif`` chain, a
   ``try``/``finally``, a helper's parameter, or a method rewritten before the checks.
2. vLLM's run-time ``ModelRegistry``: its class's ``__init__`` replaced, a ``__new__``, its
   ``models`` cleared through an alias, a ``resolve_model_cls`` that tests the architecture name.
"""

from __future__ import annotations

import pytest

from tests.conftest import REPO, make_tree
from tests.test_hostile_bindings import expect, scan
from tests.test_hostile_engines2 import expect_unknown_at, line_of

SPEC_PATH = "vllm/config/speculative.py"
SPEC = (REPO / "fixtures" / "minivllm" / SPEC_PATH).read_text()
CHECK = "        if self.num_speculative_tokens < 1:\n"
POST_INIT = "    def __post_init__(self) -> None:\n"


def _refusing(first: str, head: str = "", tail: str = "") -> str:
    """The fixture's speculative config with ``first`` at the top of ``_verify_args``, ``head`` after
    the module's imports and ``tail`` at the end of the module."""
    assert CHECK in SPEC and "from typing import Any\n" in SPEC
    text = SPEC.replace(CHECK, first + CHECK).replace("from typing import Any\n", "from typing import Any\n" + head)
    return text.rstrip("\n") + "\n" + tail


def expect_refused(text: str, needle: str, tmp_path) -> None:
    """The speculative config ``text`` refuses eagle3 for every target: blocked, at the line of ``needle``."""
    res = expect(make_tree(tmp_path, {SPEC_PATH: text}), "blocked", "raises for every eagle3 target")
    f = next(f for f in res["findings"] if f["gate"] == "allowlist")
    assert f["severity"] == "error" and f"{SPEC_PATH}:{line_of(text, needle)}" in f["message"], f["message"]


# -- 1. vLLM: config validation refusing eagle3 ------------------------------------------------

RAISE = '            raise ValueError("no eagle3 here")\n'


@pytest.mark.parametrize("first, head, tail, needle", [
    ("        if self.method == _NO:\n" + RAISE, '_NO = "eagle3"\n', "", "if self.method == _NO:"),
    ("        if self.method in _BAD:\n" + RAISE, '_BAD = ("medusa", "eagle3")\n', "", "if self.method in _BAD:"),
    ("        if self.method == _NO:\n" + RAISE, '_NO = "medusa"\n', '_NO = "eagle3"\n', "if self.method == _NO:"),
    ('        bad = ["eagle3"]\n        if self.method in bad:\n' + RAISE, "", "", "if self.method in bad:"),
    ("        m = self.method\n        if m == 'eagle3':\n" + RAISE, "", "", "if m == 'eagle3':"),
    ("        match self.method:\n            case 'ngram':\n                pass\n            case 'eagle3':\n"
     "                raise ValueError('no')\n", "", "", "raise ValueError('no')"),
    ("        if self.method == 'ngram':\n            pass\n        elif self.method == 'eagle3':\n" + RAISE,
     "", "", "elif self.method == 'eagle3':"),
    ("        if self.method == 'ngram':\n            pass\n        else:\n            assert self.method != 'eagle3'\n",
     "", "", "assert self.method != 'eagle3'"),
    ("        try:\n            if self.method == 'eagle3':\n    " + RAISE + "        finally:\n            pass\n",
     "", "", "if self.method == 'eagle3':"),
    ("        try:\n            if self.method == 'eagle3':\n    " + RAISE + "        except KeyError:\n            pass\n",
     "", "", "if self.method == 'eagle3':"),
    ("        _check(self.method)\n", "", "\n\ndef _check(m):\n    if m == 'eagle3':\n        raise ValueError('no')\n",
     "    if m == 'eagle3':"),
], ids=["module-constant", "module-tuple", "module-constant-rebound", "local-list", "local-name", "match", "elif",
        "else-assert", "try-finally", "try-except-other", "helper-parameter"])
def test_vllm_config_refusing_eagle3_through_a_name_or_a_branch_is_blocked(tmp_path, first, head, tail, needle):
    expect_refused(_refusing(first, head, tail), needle, tmp_path)


@pytest.mark.parametrize("first, head, tail", [
    ("        if self.method == _NO:\n" + RAISE, '_NO = "eagle3"\n', '_NO = "medusa"\n'),
    ('        bad = ["medusa"]\n        if self.method in bad:\n' + RAISE, "", ""),
    ("        match self.method:\n            case 'eagle3':\n                pass\n            case _:\n"
     "                raise ValueError('no')\n", "", ""),
    ("        if self.method == 'eagle3':\n            pass\n        elif self.method.startswith('eagle'):\n" + RAISE,
     "", ""),
    ("        try:\n            if self.method == 'eagle3':\n    " + RAISE + "        except ValueError:\n            pass\n",
     "", ""),
    ("        try:\n            if self.method == 'eagle3':\n    " + RAISE + "        finally:\n            return\n",
     "", ""),
    ("        _check(self.num_speculative_tokens)\n", "", "\n\ndef _check(m):\n    if m == 'eagle3':\n"
     "        raise ValueError('no')\n"),
], ids=["module-constant-rebound", "local-list", "match-other", "elif-taken-first", "try-caught", "finally-returns",
        "helper-other-argument"])
def test_vllm_config_refusal_that_python_never_reaches_for_eagle3_keeps_the_verdict(tmp_path, first, head, tail):
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: _refusing(first, head, tail)}))
    assert (code, res["verdict"]) == (0, "supported"), res


@pytest.mark.parametrize("first, head, construct", [
    ('        bad = ["medusa"]\n        bad.append("eagle3")\n        if self.method in bad:\n' + RAISE, "",
     "if self.method in bad"),
    ("        if self.method in _BAD:\n" + RAISE, "_BAD = ['medusa']\n_BAD.append('eagle3')\n",
     "if self.method in _BAD"),
], ids=["local-list-appended", "module-list-appended"])
def test_vllm_config_refusal_through_a_changed_list_is_unknown(tmp_path, first, head, construct):
    text = _refusing(first, head)
    expect_unknown_at(make_tree(tmp_path, {SPEC_PATH: text}), SPEC_PATH, text, construct)


@pytest.mark.parametrize("rewrite", [
    "        self.method = self.method.upper()\n",
    "        self.method = 'eagle3_' + str(self.num_speculative_tokens)\n",
    "        setattr(self, 'method', 'medusa')\n",
], ids=["upper", "computed", "setattr"])
def test_vllm_config_method_rewritten_in_post_init_is_unknown(tmp_path, rewrite):
    # __post_init__ changes the method before _verify_args tests it: the tests read another value
    assert POST_INIT in SPEC
    text = _refusing("        if self.method == 'EAGLE3':\n" + RAISE).replace(POST_INIT, POST_INIT + rewrite)
    expect_unknown_at(make_tree(tmp_path, {SPEC_PATH: text}), SPEC_PATH, text, rewrite.strip())


@pytest.mark.parametrize("rewrite", [
    "        if self.method is None:\n            self.method = 'draft_model'\n",
    "        if self.method in ('ngram', '[ngram]'):\n            self.method = 'ngram'\n",
    "        if self.method in ('eagle', 'eagle3'):\n            pass\n        else:\n            self.method = 'medusa'\n",
    "        if self.method == 'eagle3':\n            self.method = 'eagle3'\n",
], ids=["none", "ngram", "else-of-eagle", "same-value"])
def test_vllm_config_method_rewritten_only_for_other_methods_keeps_the_verdict(tmp_path, rewrite):
    # vLLM's own shape: the method is normalised or inferred when it is not eagle3
    text = SPEC.replace(POST_INIT, POST_INIT + rewrite)
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported"), res


# -- 2. vLLM: the run-time ModelRegistry -------------------------------------------------------

MODELS = "vllm/model_executor/models"
REGISTRY_PATH = f"{MODELS}/registry.py"
REGISTRY = (REPO / "fixtures" / "minivllm" / REGISTRY_PATH).read_text()
REG_LINE = "ModelRegistry = _ModelRegistry(_VLLM_MODELS)"
RESOLVE = "    def resolve_model_cls(self, architectures: list[str]):\n"


def _registry(before: str = "", after: str = "", in_class: str = "") -> str:
    """The fixture's registry.py with ``before``/``after`` around ``ModelRegistry = ...`` and
    ``in_class`` at the top of the registry class body."""
    assert REG_LINE in REGISTRY and RESOLVE in REGISTRY
    return REGISTRY.replace(REG_LINE, before + REG_LINE + after).replace(RESOLVE, in_class + RESOLVE)


@pytest.mark.parametrize("text, construct", [
    (_registry(before="def _init(self, models):\n    self.models = {}\n\n\n_ModelRegistry.__init__ = _init\n"),
     "_ModelRegistry.__init__ = _init"),
    (_registry(before="setattr(_ModelRegistry, '__init__', lambda self, models: None)\n"),
     "setattr(_ModelRegistry, '__init__', lambda self, models: None)"),
    (_registry(before="_t = _VLLM_MODELS\n\n\ndef _reset():\n    _t.clear()\n\n\n_reset()\n"), "_t.clear()"),
    (_registry(after="\n_m = ModelRegistry.models\n_m.clear()\n"), "_m.clear()"),
    (_registry(in_class="    def __new__(cls, models):\n        return object.__new__(cls)\n\n"),
     "def __new__(cls, models)"),
    (REGISTRY.replace("        for arch in architectures:\n",
                      "        for arch in [a for a in architectures if a != 'LlamaForCausalLM']:\n"),
     "a != 'LlamaForCausalLM'"),
    (REGISTRY.replace("            if arch in self.models:\n",
                      "            if arch == 'LlamaForCausalLM':\n                continue\n            if arch in self.models:\n"),
     "arch == 'LlamaForCausalLM'"),
], ids=["init-replaced", "init-setattr", "table-alias-clear", "models-alias-clear", "new",
        "resolve-filtered", "resolve-skips"])
def test_vllm_model_registry_changed_by_other_constructs_is_unknown(tmp_path, text, construct):
    expect_unknown_at(make_tree(tmp_path, {REGISTRY_PATH: text}), REGISTRY_PATH, text, construct)


@pytest.mark.parametrize("text", [
    _registry(after="\n\ndef _init(self, models):\n    self.models = {}\n\n\n_ModelRegistry.__init__ = _init\n"),
    _registry(before="_t = _TEXT_GENERATION_MODELS\n_t.clear()\n"),
    _registry(after="\n_m = ModelRegistry.models\nprint(len(_m))\n"),
], ids=["init-replaced-after-the-object", "sub-table-cleared-after-the-merge", "alias-only-read"])
def test_vllm_model_registry_changes_that_come_too_late_keep_the_verdict(tmp_path, text):
    # the object is built, or the merged table copied, before the change runs
    code, res, _ = scan(make_tree(tmp_path, {REGISTRY_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported"), res
