"""Break 29: the cheap text tests that decide whether a module is summarised before the tree-wide
change searches (``Resolver.mentioning``, ``Resolver._may_change``,
``Resolver.may_change_module``), and the consumers of the summaries they pass
(``changes_from_elsewhere``, ``OutsideModuleChanges``, ``BuiltinsChanges``).

Each case writes, in another module of a synthetic tree, a change that Python really makes
(checked with a stand-in class and module outside vLLM) to ``itertools.islice`` (the capture
loop's helper), to a builtin, or to a member of ``LlamaForCausalLM``; the scan must not say
``supported``. The first groups are forms the text tests read wrong (Python reads the source
through its coding cookie and normalises identifiers to NFKC; form feeds and comments are
whitespace; a head may be bracketed or computed around the name). The last groups are forms that
pass the text tests but that the summary or its consumer does not count. The controls only read
the objects and keep ``supported``.
"""

from __future__ import annotations

import pytest

from tests.conftest import REPO, make_tree
from tests.test_hostile_reach import result_of, scan_json

MODELS = "vllm/model_executor/models"
TOY = (REPO / "fixtures" / "minivllm" / MODELS / "toy.py").read_text()
F = "lambda *a: iter(())"
H = ("from vllm.model_executor.models import llama\nfrom vllm.model_executor.models.llama import LlamaForCausalLM\n\n\n"
     "def _f(self, *a, **k):\n    return None\n\n\n")
DEF_F = "\ndef _f(self, *a, **k):\n    return None\n\n"


def _verdict(tmp_path, files: dict[str, str]) -> tuple[int, str]:
    root = make_tree(tmp_path, {f"{MODELS}/{k}": v for k, v in files.items()})
    code, doc, _ = scan_json(root)
    r = result_of(doc)
    return code, r["verdict"]


def _toy(patch: str) -> dict[str, str]:
    return {"toy.py": TOY + "\n" + patch}


def _new(text: str) -> dict[str, str]:
    """A new module of its own (toy.py, which mentions itertools, left as it is)."""
    return {"toy2.py": text}


# -- 1. islice changed in forms the text tests read wrong -------------------------------------

@pytest.mark.parametrize("files", [
    # (itertools # c \n .islice) = f: a comment is whitespace between the name and the dot
    _toy(f"import itertools\n(itertools # c\n .islice) = {F}\n"),
    # itertools<FF>.islice = f: a form feed is whitespace inside a line
    _toy(f"import itertools\nitertools\f.islice = {F}\n"),
    # import itertools as<FF>_it; _it.islice = f: the alias after a form feed
    _new(f"import itertools as\f_it\n_it.islice = {F}\n"),
    # (itertools).islice = f: a parenthesised head, then the member
    _toy(f"import itertools\n(itertools).islice = {F}\n"),
    # import ｉtertools; ｉtertools.islice = f: Python normalises identifiers (NFKC) to itertools
    _new(f"import \uff49tertools\n\uff49tertools.islice = {F}\n"),
    # # coding: utf-7, +AGk-tertools is itertools once Python decodes the source
    _new(f"# coding: utf-7\nimport +AGk-tertools\n+AGk-tertools.islice = {F}\n"),
    # sys.modules['iter' + 'tools'].islice = f, in a module whose text never spells itertools
    pytest.param(_new(f"import sys\nsys.modules['iter' + 'tools'].islice = {F}\n"), marks=pytest.mark.xfail(strict=True, reason="open: a module that never spells the name is not searched; counting every module lookup under a computed name makes vLLM 0.32.0 on (triton_utils/dispatcher.py, a loop over sys.modules) change every module, against the engine")),
    # importlib.import_module('iter' + 'tools').islice = f, same
    pytest.param(_new(f"import importlib\nimportlib.import_module('iter' + 'tools').islice = {F}\n"), marks=pytest.mark.xfail(strict=True, reason="open: a module that never spells the name is not searched; counting every module lookup under a computed name makes vLLM 0.32.0 on (triton_utils/dispatcher.py, a loop over sys.modules) change every module, against the engine")),
], ids=["comment", "formfeed", "alias-formfeed", "paren-head", "nfkc-name", "utf7-name", "sys-modules-computed",
        "import-module-computed"])
def test_islice_changed_in_forms_the_text_test_reads_wrong_is_never_supported(tmp_path, files):
    code, verdict = _verdict(tmp_path, files)
    assert code == 1 and verdict != "supported", (code, verdict)


# -- 2. a member of LlamaForCausalLM replaced in forms the text tests read wrong -------------

@pytest.mark.parametrize("files", [
    # (LlamaForCausalLM # c \n .forward) = f: a comment between the name and the dot
    _toy(H + "(LlamaForCausalLM # c\n .forward) = _f\n"),
    # form feeds as whitespace around the dot and before the =
    _toy(H + "LlamaForCausalLM\f.forward = _f\n"),
    _toy(H + "LlamaForCausalLM.\fforward = _f\n"),
    _toy(H + "LlamaForCausalLM.forward\f= _f\n"),
    # (LlamaForCausalLM).forward = f; (llama.LlamaForCausalLM).forward = f: a bracketed head
    _toy(H + "(LlamaForCausalLM).forward = _f\n"),
    _toy(H + "(llama.LlamaForCausalLM).forward = _f\n"),
    # LlamaForCausalLM.mro()[0].forward = f: the class reached by a call and an item on it
    _toy(H + "LlamaForCausalLM.mro()[0].forward = _f\n"),
    # (LlamaForCausalLM if 1 else None).forward = f; [LlamaForCausalLM][0].forward = f
    _toy(H + "(LlamaForCausalLM if 1 else None).forward = _f\n"),
    _toy(H + "[LlamaForCausalLM][0].forward = _f\n"),
    # LlamaForCausalLM.ｆorward = f: the member's name normalised (NFKC) to forward
    _new("from vllm.model_executor.models.llama import LlamaForCausalLM\n" + DEF_F + "LlamaForCausalLM.\uff46orward = _f\n"),
    _toy(H + "LlamaForCausalLM.\uff53et_aux_hidden_state_layers = _f\n"),
    # ＬlamaForCausalLM is LlamaForCausalLM (NFKC), imported and changed under that spelling
    _new("from vllm.model_executor.models.llama import \uff2clamaForCausalLM\n" + DEF_F
         + "\uff2clamaForCausalLM.forward = _f\n"),
    # # coding: utf-7: forwar+AGQ- is forward, +AEw-lamaForCausalLM is LlamaForCausalLM
    _new("# coding: utf-7\nfrom vllm.model_executor.models.llama import LlamaForCausalLM\n" + DEF_F
         + "LlamaForCausalLM.forwar+AGQ- = _f\n"),
    _new("# coding: utf-7\nfrom vllm.model_executor.models.llama import +AEw-lamaForCausalLM\n" + DEF_F
         + "+AEw-lamaForCausalLM.forward = _f\n"),
], ids=["comment", "ff-before-dot", "ff-after-dot", "ff-before-eq", "paren-head", "paren-dotted-head", "mro-item",
        "ifexp-head", "list-item-head", "nfkc-member", "nfkc-set-aux", "nfkc-class", "utf7-member", "utf7-class"])
def test_a_member_replaced_in_forms_the_text_test_reads_wrong_is_never_supported(tmp_path, files):
    code, verdict = _verdict(tmp_path, files)
    assert code == 1 and verdict != "supported", (code, verdict)


# -- 3. a builtin changed under a spelling Python normalises ----------------------------------

@pytest.mark.parametrize("files", [
    # import ｂuiltins; ｂuiltins.enumerate = f: the builtins module under an NFKC spelling
    _new("import \uff42uiltins\n\uff42uiltins.enumerate = lambda it, start=0: zip(range(100, 200), it)\n"),
    # the same under a utf-7 coding cookie
    _new("# coding: utf-7\nimport +AGI-uiltins\n+AGI-uiltins.enumerate = lambda it, start=0: zip(range(100, 200), it)\n"),
], ids=["nfkc", "utf7"])
def test_a_builtin_changed_under_a_normalised_spelling_is_never_supported(tmp_path, files):
    code, verdict = _verdict(tmp_path, files)
    assert code == 1 and verdict != "supported", (code, verdict)


# -- 4. islice changed in forms the summary or OutsideModuleChanges does not count ------------

@pytest.mark.parametrize("files", [
    # sys.modules.get('itertools').islice = f: the module looked up by a method of sys.modules
    _toy(f"import sys\nsys.modules.get('itertools').islice = {F}\n"),
    # pkgutil.resolve_name('itertools') is the module
    _toy(f"import pkgutil\npkgutil.resolve_name('itertools').islice = {F}\n"),
    # inspect.getmodule(itertools.chain) is the module
    _toy(f"import inspect, itertools\ninspect.getmodule(itertools.chain).islice = {F}\n"),
    # (itertools if 1 else None).islice = f; [itertools][0].islice = f: computed heads
    _toy(f"import itertools\n(itertools if 1 else None).islice = {F}\n"),
    _toy(f"import itertools\n[itertools][0].islice = {F}\n"),
    # _it = itertools; _it.islice = f: a plain alias of the module
    _toy(f"import itertools\n_it = itertools\n_it.islice = {F}\n"),
    # _a, itertools.islice = <call>: an unpacking whose value is computed
    _toy(f"import itertools\n_a, itertools.islice = divmod(1, 1) and (1, {F})\n"),
    # *_a, itertools.islice = 1, 2, f: a starred unpacking
    _toy(f"import itertools\n*_a, itertools.islice = 1, 2, ({F})\n"),
    # for itertools.islice in [f]: the loop assigns the member
    _toy(f"import itertools\nfor itertools.islice in [{F}]:\n    pass\n"),
    # with nullcontext(f) as itertools.islice: the with statement assigns the member
    _toy(f"import itertools, contextlib\nwith contextlib.nullcontext({F}) as itertools.islice:\n    pass\n"),
    # the same unpacking and loop inside a function that is called
    _toy(f"import itertools\ndef _g():\n    _a, itertools.islice = 1, ({F})\n_g()\n"),
    _toy(f"import itertools\ndef _g():\n    for itertools.islice in [{F}]:\n        pass\n_g()\n"),
], ids=["sys-modules-get", "resolve-name", "getmodule", "ifexp-head", "list-item-head", "alias", "unpack-call",
        "starred", "for-target", "with-target", "fn-unpack", "fn-for-target"])
def test_islice_changed_in_forms_the_summary_does_not_count_is_never_supported(tmp_path, files):
    code, verdict = _verdict(tmp_path, files)
    assert code == 1 and verdict != "supported", (code, verdict)


# -- 5. a member of LlamaForCausalLM replaced in forms the summary does not count -------------

@pytest.mark.parametrize("files", [
    # *_a, LlamaForCausalLM.forward = 1, 2, f: a starred unpacking
    _toy(H + "*_a, LlamaForCausalLM.forward = 1, 2, _f\n"),
    # for LlamaForCausalLM.forward in [f]: the loop assigns the member
    _toy(H + "for LlamaForCausalLM.forward in [_f]:\n    pass\n"),
    # with nullcontext(f) as LlamaForCausalLM.forward: the with statement assigns it
    _toy(H + "import contextlib\nwith contextlib.nullcontext(_f) as LlamaForCausalLM.forward:\n    pass\n"),
    # the same unpacking and loop inside a function that is called
    _toy(H + "def _g():\n    _a, LlamaForCausalLM.forward = 1, _f\n_g()\n"),
    _toy(H + "def _g():\n    for LlamaForCausalLM.forward in [_f]:\n        pass\n_g()\n"),
    # with nullcontext(LlamaForCausalLM) as _C: _C.forward = f: the class bound by with ... as
    _toy(H + "import contextlib\nwith contextlib.nullcontext(LlamaForCausalLM) as _C:\n    _C.forward = _f\n"),
    # def _g(c=LlamaForCausalLM): c.forward = f: the class as a parameter's default
    _toy(H + "def _g(c=LlamaForCausalLM):\n    c.forward = _f\n_g()\n"),
    _toy(H + "def _g(*, c=LlamaForCausalLM):\n    c.forward = _f\n_g()\n"),
    # _c = [LlamaForCausalLM][0]; _d = {'k': LlamaForCausalLM}: the class through a container
    _toy(H + "_c = [LlamaForCausalLM][0]\n_c.forward = _f\n"),
    _toy(H + "_d = {'k': LlamaForCausalLM}\n_d['k'].forward = _f\n"),
    # match LlamaForCausalLM: case _C: _C.forward = f: a capture pattern binds the class
    _toy(H + "match LlamaForCausalLM:\n    case _C:\n        _C.forward = _f\n"),
], ids=["starred", "for-target", "with-target", "fn-unpack", "fn-for-target", "with-alias", "default-param",
        "kw-default-param", "list-alias", "dict-alias", "match-capture"])
def test_a_member_replaced_in_forms_the_summary_does_not_count_is_never_supported(tmp_path, files):
    code, verdict = _verdict(tmp_path, files)
    assert code == 1 and verdict != "supported", (code, verdict)


# -- controls ---------------------------------------------------------------------------------

@pytest.mark.parametrize("files", [
    # reads of itertools and of the class, keyword arguments, comments and non-ASCII text
    _toy("import itertools\nCHUNKS = list(itertools.islice(range(9), 3))  # \u00e9t\u00e9\n"),
    _toy("import itertools\nCHUNKS = sorted(itertools.islice(range(9), 3), key=None)\n"),
    _toy(H + "_NAME = LlamaForCausalLM.__name__  # \u2192 \uff2clama\n_K = dict(cls=LlamaForCausalLM, x=1)\n"),
    _new("# coding: utf-7\nimport itertools\nCHUNKS = list(itertools.islice(range(9), 3)) +ACs- \\\n    []\n"),
    _new("\u00e9 = 1\nimport itertools\nCHUNKS = list(itertools.islice(range(9), 3))\n"),
], ids=["read", "keyword", "class-read", "utf7-read", "non-ascii-ident"])
def test_modules_that_only_read_keep_the_verdict(tmp_path, files):
    code, verdict = _verdict(tmp_path, files)
    assert code == 0 and verdict == "supported", (code, verdict)
