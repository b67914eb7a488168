"""Issue 21, a third breaker pass on vLLM's speculative config validation.

Each test builds its own tree (fixtures/minivllm with a few lines of ``vllm/config/speculative.py``
changed), scans one target through the real command line and checks verdict and exit code; every
scan leaves the tree as it was (:func:`tests.test_hostile_bindings.scan`).

1. A test the evaluator cannot compute that reads nothing but the method, constants and followed
   names: evaluated exactly (``blocked``) or ``unknown`` naming it, never ``supported``.
2. A module without the allowlist (vLLM >= 0.22) is still read for refusals.
3. A refusal Python never reaches for eagle3 (an early ``return``, a caught call, a helper called
   only for a run option or another method) does not block.
"""

from __future__ import annotations

import pytest

from tests.conftest import make_tree
from tests.test_hostile_bindings import scan
from tests.test_hostile_engines2 import expect_unknown_at
from tests.test_hostile_engines3 import POST_INIT, SPEC, SPEC_PATH, _refusing, expect_refused

R = '            raise ValueError("no")\n'
#: the allowlist block of the fixture, gone from vLLM >= 0.22
ALLOWLIST = "        eagle3_target_supported = ["


def _if(test: str) -> str:
    return f"        if {test}:\n" + R


# -- 1. tests the evaluator computes exactly: blocked -------------------------------------------

@pytest.mark.parametrize("first, head, needle", [
    (_if("(m := self.method) == 'eagle3'"), "", "if (m := self.method)"),
    (_if("self.method in _BAD"), "_BAD = frozenset({'medusa', 'eagle3'})\n", "if self.method in _BAD"),
    (_if("self.method in _BAD"), "_BAD = {'medusa', 'eagle3'}\n", "if self.method in _BAD"),
    (_if("self.method in _BAD"), "_BAD = {'eagle3': 'x'}\n", "if self.method in _BAD"),
    (_if("self.method not in _OK"), "_OK = {'ngram': 'x'}\n", "if self.method not in _OK"),
    (_if("f'{self.method}' == 'eagle3'"), "", "if f'{self.method}'"),
    (_if("'%s' % self.method == 'eagle3'"), "", "if '%s' % self.method"),
    (_if("'{}'.format(self.method) == 'eagle3'"), "", "if '{}'.format"),
    (_if("str(self.method) == 'eagle3'"), "", "if str(self.method)"),
    (_if("self.method[-1] == '3'"), "", "if self.method[-1]"),
    (_if("len(self.method) == 6"), "", "if len(self.method)"),
    (_if("(True if self.method == 'eagle3' else False)"), "", "if (True if"),
    # a module function of one ``return``: evaluated with its argument (tests/test_hostile_gaps5.py)
    (_if("_bad(self.method)"), "", "if _bad(self.method)"),
], ids=["walrus", "frozenset", "set", "in-dict", "not-in-dict", "f-string", "percent", "format", "str",
        "index", "len", "conditional-expression", "module-function"])
def test_computable_test_of_the_method_is_blocked(tmp_path, first, head, needle):
    tail = "\n\ndef _bad(m):\n    return m == 'eagle3'\n"
    expect_refused(_refusing(first, head, tail), needle, tmp_path)


# -- 1. tests it cannot compute: unknown naming the construct -----------------------------------

@pytest.mark.parametrize("first, head, construct", [
    (_if("any(self.method == b for b in ('eagle3',))"), "", "self.method == b for b in"),
    (_if("vars(self)['method'] == 'eagle3'"), "", "vars(self)['method']"),
    (_if("self.__dict__['method'] == 'eagle3'"), "", "self.__dict__['method']"),
    (_if("self.method.split('_')[0] == 'eagle3'"), "", "self.method.split('_')"),
    (_if("_bad(self.method)"), "", "_bad(self.method)"),
], ids=["generator", "vars", "dunder-dict", "unknown-str-method", "module-function-of-two-statements"])
def test_uncomputable_test_of_the_method_is_unknown(tmp_path, first, head, construct):
    tail = "\n\ndef _bad(m):\n    n = m\n    return n == 'eagle3'\n"
    text = _refusing(first, head, tail)
    expect_unknown_at(make_tree(tmp_path, {SPEC_PATH: text}), SPEC_PATH, text, construct)


@pytest.mark.parametrize("test", ["self.method == self._NO", "self.method == SpeculativeConfig._NO"],
                         ids=["self", "class-name"])
def test_class_attribute_read_by_the_test_is_unknown(tmp_path, test):
    text = _refusing(_if(test)).replace(POST_INIT, "    _NO = 'eagle3'\n\n" + POST_INIT)
    expect_unknown_at(make_tree(tmp_path, {SPEC_PATH: text}), SPEC_PATH, text, test)


@pytest.mark.parametrize("test", [
    "self.method == 'eagle3' and self.num_speculative_tokens > 99",
    "len(self.method) == self.num_speculative_tokens",
    "self.method == 'eagle3' and _ok(self.target_model_config)",
    "self.method == self.draft_model_config",
], ids=["and-option", "len-option", "call-on-target", "compared-to-option"])
def test_test_of_the_method_and_a_run_option_stays_conditional(tmp_path, test):
    text = _refusing(_if(test), tail="\n\ndef _ok(c):\n    return False\n")
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported"), res


# -- 2. no allowlist in the module (vLLM >= 0.22) -----------------------------------------------

def _no_allowlist(text: str) -> str:
    assert ALLOWLIST in text
    return text[:text.index(ALLOWLIST)].rstrip("\n") + "\n"


@pytest.mark.parametrize("first, head, needle", [
    (_if("self.method == _NO"), "_NO = 'eagle3'\n", "if self.method == _NO"),
    ("        m = self.method\n" + _if("m == 'eagle3'"), "", "if m == 'eagle3'"),
    (_if("self.method in _BAD"), "_BAD = ('medusa',\n        'eagle3')\n", "if self.method in _BAD"),
    ("        _check(self.method)\n", "", "    if m == 'eagle3':"),
], ids=["module-constant", "local-name", "multi-line-tuple", "helper"])
def test_refusal_in_a_module_without_the_allowlist_is_blocked(tmp_path, first, head, needle):
    text = _no_allowlist(_refusing(first, head)) + "\n\ndef _check(m):\n    if m == 'eagle3':\n        raise ValueError('no')\n"
    expect_refused(text, needle, tmp_path)


# -- 3. refusals Python never reaches for eagle3 ------------------------------------------------

HELPER = "    def _verify_other(self) -> None:\n        if self.method == 'eagle3':\n" + "    " + R


@pytest.mark.parametrize("text", [
    _refusing("        if self.method == 'eagle3':\n            return\n" + _if("self.method == 'eagle3'")),
    _refusing("        if self.method != 'eagle3':\n            pass\n        else:\n            return\n"
              + _if("self.method.startswith('eagle')")),
    _refusing(_if("self.method == 'eagle3'")).replace(
        POST_INIT + "        self._verify_args()\n",
        POST_INIT + "        try:\n            self._verify_args()\n        except ValueError:\n            pass\n"),
    SPEC.replace(POST_INIT, HELPER + "\n" + POST_INIT).replace(
        "        self._verify_args()\n",
        "        self._verify_args()\n        if self.num_speculative_tokens > 99:\n            self._verify_other()\n"),
    SPEC.replace(POST_INIT, HELPER + "\n" + POST_INIT).replace(
        "        self._verify_args()\n",
        "        self._verify_args()\n        if self.method == 'ngram':\n            self._verify_other()\n"),
], ids=["early-return", "early-return-in-else", "caught-call", "helper-under-option", "helper-for-other-method"])
def test_refusal_python_never_reaches_for_eagle3_is_not_blocked(tmp_path, text):
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported"), res


def test_helper_called_for_eagle3_still_blocks(tmp_path):
    # the composition of call sites does not lose a refusal: the helper runs for eagle3
    text = SPEC.replace(POST_INIT, HELPER + "\n" + POST_INIT).replace(
        "        self._verify_args()\n",
        "        self._verify_args()\n        if self.method.startswith('eagle'):\n            self._verify_other()\n")
    expect_refused(text, "        if self.method == 'eagle3':", tmp_path)


def test_early_return_under_a_run_option_keeps_the_refusal_conditional(tmp_path):
    text = _refusing("        if self.num_speculative_tokens > 99:\n            return\n" + _if("self.method == 'eagle3'"))
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported"), res


# -- 4. refusals in helpers reached otherwise ---------------------------------------------------

CLASS = "@dataclass\nclass SpeculativeConfig:\n"
STATIC = "    @staticmethod\n    def _check(m):\n        if m == 'eagle3':\n            raise ValueError('no')\n\n"


def _with_class_body(text: str, body: str) -> str:
    assert POST_INIT in text
    return text.replace(POST_INIT, body + POST_INIT)


@pytest.mark.parametrize("text, needle", [
    (_with_class_body(_refusing("        self._check(self.method)\n"), STATIC), "        if m == 'eagle3':"),
    (_with_class_body(_refusing("        SpeculativeConfig._check(self.method)\n"), STATIC), "        if m == 'eagle3':"),
    (_refusing("        self._verify_base()\n").replace(
        CLASS, "class _Base:\n    def _verify_base(self):\n        if self.method == 'eagle3':\n"
               "            raise ValueError('no')\n\n\n@dataclass\nclass SpeculativeConfig(_Base):\n"),
     "        if self.method == 'eagle3':"),
], ids=["staticmethod", "staticmethod-by-class", "inherited"])
def test_refusal_in_a_helper_of_the_class_is_blocked(tmp_path, text, needle):
    expect_refused(text, needle, tmp_path)


@pytest.mark.parametrize("text, construct", [
    (_refusing("        def inner():\n            if self.method == 'eagle3':\n    " + R + "        inner()\n"),
     "if self.method == 'eagle3':"),
    (_with_class_body(_refusing("        functools.partial(self._check, self.method)()\n", "import functools\n"),
                      "    def _check(self, m):\n        if m == 'eagle3':\n            raise ValueError('no')\n\n"),
     "if m == 'eagle3':"),
    (_refusing("        check_method(self.method)\n", "from vllm.config.checks import check_method\n"),
     "check_method(self.method)"),
], ids=["nested-function", "partial", "other-module"])
def test_refusal_through_a_call_not_followed_is_unknown(tmp_path, text, construct):
    expect_unknown_at(make_tree(tmp_path, {SPEC_PATH: text}), SPEC_PATH, text, construct)


@pytest.mark.parametrize("first", [
    "        try:\n            if self.method == 'eagle3':\n                return\n        except KeyError:\n"
    "            pass\n        else:\n            if self.method == 'eagle3':\n    " + R,
    "        for _ in range(2):\n            if self.method == 'ngram':\n                return\n"
    + _if("self.method == 'eagle3'"),
], ids=["try-else", "loop"])
def test_return_in_a_try_or_a_loop_above_the_refusal_is_not_blocked(tmp_path, first):
    # the try's body returns before its else runs; a loop that may return is not followed
    code, res, _ = scan(make_tree(tmp_path, {SPEC_PATH: _refusing(first)}))
    assert res["verdict"] in ("supported", "unknown") and code == (0 if res["verdict"] == "supported" else 1), res
