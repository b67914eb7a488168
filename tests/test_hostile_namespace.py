"""Issue 20, the namespace part of the fifth hostile pass: bindings and member changes made through
a namespace the index does not follow (a module's object or dictionary, a class body's
``locals()``, text run as code, a star import of a module whose ``__all__`` is changed) and changes
to a class object (``__bases__``, ``__class__``, a ``__new__`` giving back another class, a member
deleted through a loop target).

Each test builds its own tree (fixtures/minivllm or fixtures/minisglang with a few lines added),
scans one target through the real command line and asserts the verdict (``unknown``, naming the
construct and its ``file:line``; never ``supported``), the exit code (1) and that the scan wrote
nothing (:func:`tests.test_hostile_bindings.scan` compares the tree's digest). The scope tests
check the other side: the same idiom aimed at another name, in a function's own namespace, or in
a module that cannot reach the target leaves the target ``supported`` (exit 0).
"""

from __future__ import annotations

import tarfile

import pytest

from auditor.source.fetch import fetch_release
from tests.conftest import make_tree
from tests.test_hostile import cli
from tests.test_hostile_bindings import LLAMA, MODELS, SG_LLAMA, SG_MODELS, _digest, llama, scan, sglang_tree

LLAMA_PATH = f"{MODELS}/llama.py"
SG_PATH = f"{SG_MODELS}/llama.py"


def _line_of(text: str, needle: str) -> int:
    """The 1-based line of ``text`` where ``needle`` first occurs (the construct's line)."""
    for i, ln in enumerate(text.splitlines(), 1):
        if needle in ln:
            return i
    raise AssertionError(f"{needle!r} not in the text")


def expect_unknown(root, path: str, text: str, line_needle: str, needle: str, arch: str = "LlamaForCausalLM"):
    """Assert ``unknown`` with exit 1, and that an ``unknown`` finding names ``needle`` (the
    construct as written) and ``path:line`` of the line of ``text`` holding ``line_needle``."""
    code, res, err = scan(root, arch)
    assert res is not None, err
    assert (code, res["verdict"]) == (1, "unknown"), res
    where = f"{path}:{_line_of(text, line_needle)}"
    hits = [f for f in res["findings"] if f["severity"] == "unknown" and needle in f["message"]
            and where in f["message"]]
    assert hits, (where, [f["message"] for f in res["findings"]])
    return res


def expect_supported(root, arch: str = "LlamaForCausalLM"):
    code, res, err = scan(root, arch)
    assert res is not None, err
    assert (code, res["verdict"]) == (0, "supported"), res["findings"]


# -- the module's namespace ----------------------------------------------------------------------

MODULE_NAMESPACE = [
    ("import sys\nsys.modules[__name__].LlamaForCausalLM = None", "sys.modules[__name__].LlamaForCausalLM"),
    ('import sys\nsys.modules[__name__].__dict__["LlamaForCausalLM"] = None', "sys.modules[__name__].__dict__"),
    ('import sys\nvars(sys.modules[__name__]).pop("LlamaForCausalLM")', "vars(sys.modules[__name__]).pop"),
    ('import sys\ndel sys.modules[__name__].LlamaForCausalLM', "sys.modules[__name__].LlamaForCausalLM"),
    ('import sys\nsys.modules["vllm.model_executor.models.llama"].LlamaForCausalLM = None',
     "sys.modules['vllm.model_executor.models.llama']"),
    ('locals()["LlamaForCausalLM"] = None', "locals()['LlamaForCausalLM']"),
    ('vars().update(LlamaForCausalLM=None)', "vars()"),
    ('exec("from .toy import ToyV2ForCausalLM as LlamaForCausalLM")', "exec("),
    ('eval(compile("del LlamaForCausalLM", "x", "exec"))', "eval(compile("),
    ("exec(_code())", "exec(_code())"),
    ('import builtins\nbuiltins.exec("LlamaForCausalLM = None")', "builtins.exec("),
    ("import sys\n_me = sys.modules[__name__]\n_me.LlamaForCausalLM = None", "_me.LlamaForCausalLM"),
    ("import sys\nsys.modules.get(__name__).LlamaForCausalLM = None", "sys.modules.get(__name__)"),
    ("_run = exec\n_run('LlamaForCausalLM = None')", "_run('LlamaForCausalLM = None')"),
    ("from . import llama as _me\n\ndel _me.LlamaForCausalLM", "_me.LlamaForCausalLM"),
    ('import vllm.model_executor.models.llama as _me\n\nsetattr(_me, "LlamaForCausalLM", None)', "setattr(_me,"),
    # the spellings of the sixth pass: code run under another name, the module object reached by
    # another call or through an alias of sys.modules
    ("import builtins\ngetattr(builtins, 'exec')('LlamaForCausalLM.forward = None')", "getattr(builtins, 'exec')("),
    ("import builtins\ngetattr(builtins, 'ex' + 'ec')('LlamaForCausalLM.forward = None')", "getattr(builtins, "),
    ("import types\n_code = compile('LlamaForCausalLM.forward = None', 'x', 'exec')\n"
     "types.FunctionType(_code, {'LlamaForCausalLM': LlamaForCausalLM})()", "types.FunctionType(_code,"),
    ("from types import FunctionType as _F\n_F(compile('del LlamaForCausalLM', 'x', 'exec'), globals())()", "_F(compile("),
    ("_me = __import__(__name__, fromlist=['x'])\n_me.LlamaForCausalLM = None", "_me.LlamaForCausalLM"),
    ("__import__(__name__, fromlist=['x']).LlamaForCausalLM = None", "__import__(__name__, fromlist=['x'])"),
    ("from importlib import import_module as im\nim(__name__).LlamaForCausalLM = None", "im(__name__).LlamaForCausalLM"),
    ("import sys\n_mods = sys.modules\n_mods[__name__].__dict__['LlamaForCausalLM'] = None",
     "_mods[__name__].__dict__['LlamaForCausalLM']"),
    ("import sys\n_d = sys.modules[__name__].__dict__\n_d['LlamaForCausalLM'] = None", "_d['LlamaForCausalLM']"),
    ("from sys import modules\nmodules[__name__].LlamaForCausalLM = None", "modules[__name__].LlamaForCausalLM"),
    ("import functools\nfunctools.partial(exec, 'del LlamaForCausalLM')()", "functools.partial(exec, "),
    ("import builtins\nvars(builtins)['exec']('del LlamaForCausalLM')", "vars(builtins)['exec']("),
    ("__builtins__['eval']('LlamaForCausalLM.forward')", "__builtins__['eval']("),
]


@pytest.mark.parametrize("tail, needle", MODULE_NAMESPACE, ids=[n for _, n in MODULE_NAMESPACE])
def test_a_write_through_the_module_namespace_is_unknown(tmp_path, tail, needle):
    text = LLAMA + "\n\n" + tail + "\n"
    root = make_tree(tmp_path, llama(text))
    expect_unknown(root, LLAMA_PATH, text, tail.splitlines()[-1], needle)


@pytest.mark.parametrize("tail", [
    "import sys\nsys.modules[__name__]._CACHE = {}",  # another name
    'locals()["_CACHE"] = {}',
    'exec("_X = 1")',  # text that names nothing the target needs
    'def _f():\n    locals()["LlamaForCausalLM"] = None',  # a function's own namespace: no effect
    'def _g():\n    vars()["LlamaForCausalLM"] = None',
    "import builtins\n_open = getattr(builtins, 'open')",  # another builtin than exec/eval, not called
    "import importlib\n_json = importlib.import_module('json')\n_json.X = 1",  # another module's object
    "from sys import modules\n_n = len(modules)",
])
def test_the_same_idioms_aimed_elsewhere_keep_the_verdict(tmp_path, tail):
    expect_supported(make_tree(tmp_path, llama(LLAMA + "\n\n" + tail + "\n")))


def test_a_write_through_the_module_object_from_another_module(tmp_path):
    patch = ('import sys\n\nfrom vllm.model_executor.models import llama  # noqa: F401\n\n'
             'sys.modules["vllm.model_executor.models.llama"].LlamaForCausalLM.forward = None\n')
    root = make_tree(tmp_path, {f"{MODELS}/_patch.py": patch})
    expect_unknown(root, f"{MODELS}/_patch.py", patch, ".forward = None",
                   "sys.modules['vllm.model_executor.models.llama'].LlamaForCausalLM.forward")


def test_text_run_as_code_in_a_module_that_cannot_reach_the_target_keeps_it(tmp_path):
    other = "def _run(code):\n    exec(code)\n"
    expect_supported(make_tree(tmp_path, {f"{MODELS}/_runner.py": other}))


def test_text_run_as_code_in_a_module_that_imports_the_class(tmp_path):
    other = "from vllm.model_executor.models.llama import LlamaForCausalLM  # noqa: F401\n\n\n" \
            "def _run(code):\n    exec(code)\n"
    root = make_tree(tmp_path, {f"{MODELS}/_runner.py": other})
    expect_unknown(root, f"{MODELS}/_runner.py", other, "exec(code)", "exec(code)")


@pytest.mark.parametrize("run", [
    "exec('del llama.LlamaForCausalLM.forward')",
    "getattr(builtins, 'exec')('del llama.LlamaForCausalLM.forward')",
    "types.FunctionType(compile('del llama.LlamaForCausalLM.forward', 'x', 'exec'), {'llama': llama})()",
    "functools.partial(exec, 'del llama.LlamaForCausalLM.forward')()",
])
def test_text_run_as_code_that_names_the_module_from_another_module(tmp_path, run):
    # the module name the text mentions is marked as changed by the same call: what it was
    # imported as is what the text reaches
    other = f"import builtins\nimport functools\nimport types\n\nfrom . import llama\n\n{run}\n"
    root = make_tree(tmp_path, {f"{MODELS}/_runner.py": other})
    expect_unknown(root, f"{MODELS}/_runner.py", other, run, run[:20])


@pytest.mark.parametrize("evil_all", [
    '__all__ = []\n__all__.append("LlamaForCausalLM")',
    '__all__ = []\n__all__ += ["LlamaForCausalLM"]',
    '__all__ = ["ToyV2ForCausalLM"]\n__all__.extend(["LlamaForCausalLM"])',
    "__all__ = _names()",
])
def test_a_star_import_of_a_module_whose_all_is_changed_is_unknown(tmp_path, evil_all):
    evil = "from .toy import ToyV2ForCausalLM as LlamaForCausalLM  # noqa: F401\n" + evil_all + "\n"
    text = LLAMA + "\n\nfrom ._evil import *  # noqa: F403\n"
    root = make_tree(tmp_path, {**llama(text), f"{MODELS}/_evil.py": evil})
    res = expect_unknown(root, LLAMA_PATH, text, "import *", "from vllm.model_executor.models._evil import *")
    assert any("__all__" in f["message"] and f"{MODELS}/_evil.py:" in f["message"] for f in res["findings"])


def test_a_star_import_of_a_literal_all_that_leaves_the_name_out_keeps_it(tmp_path):
    evil = "from .toy import ToyV2ForCausalLM as LlamaForCausalLM  # noqa: F401\n__all__ = []\n"
    text = LLAMA + "\n\nfrom ._evil import *  # noqa: F403\n"
    expect_supported(make_tree(tmp_path, {**llama(text), f"{MODELS}/_evil.py": evil}))


# -- the class body and the class object ---------------------------------------------------------

SETTER_END = "        self.model.aux_hidden_state_layers = layers\n"
HEAD = "class LlamaForCausalLM(nn.Module, SupportsPP, SupportsEagle, SupportsEagle3):\n"

CLASS_BODY = [
    ('exec("del set_aux_hidden_state_layers")', "exec('del set_aux_hidden_state_layers')"),
    ('locals().pop("set_aux_hidden_state_layers")', "locals().pop('set_aux_hidden_state_layers')"),
    ('vars()["set_aux_hidden_state_layers"] = None', "vars()['set_aux_hidden_state_layers']"),
    ("set_aux_hidden_state_layers = property(lambda self: None)", "property(lambda self: None)"),
]


@pytest.mark.parametrize("stmt, needle", CLASS_BODY, ids=[n for _, n in CLASS_BODY])
def test_a_class_body_namespace_change_is_unknown(tmp_path, stmt, needle):
    assert SETTER_END in LLAMA
    text = LLAMA.replace(SETTER_END, SETTER_END + f"    {stmt}\n", 1)
    root = make_tree(tmp_path, llama(text))
    expect_unknown(root, LLAMA_PATH, text, stmt, needle)


CLASS_OBJECT = [
    ("for _c in [LlamaForCausalLM]:\n    del _c.set_aux_hidden_state_layers", "del _c.set_aux_hidden_state_layers"),
    ("for _c in _classes():\n    _c.forward = None", "_c.forward = None"),
    ("def _strip():\n    for c in (LlamaForCausalLM,):\n        del c.set_aux_hidden_state_layers",
     "del c.set_aux_hidden_state_layers"),
    ("LlamaForCausalLM.__bases__ = (nn.Module,)", "LlamaForCausalLM.__bases__"),
    ("LlamaForCausalLM.__class__ = type", "LlamaForCausalLM.__class__"),
    ('exec("del LlamaForCausalLM.set_aux_hidden_state_layers")', "exec('del LlamaForCausalLM"),
]


@pytest.mark.parametrize("tail, needle", CLASS_OBJECT, ids=[n for _, n in CLASS_OBJECT])
def test_a_class_object_change_is_unknown(tmp_path, tail, needle):
    text = LLAMA + "\n\n" + tail + "\n"
    root = make_tree(tmp_path, llama(text))
    expect_unknown(root, LLAMA_PATH, text, tail.splitlines()[-1], needle)


GET_CLASSES = "from . import llama\n\n\ndef get_classes():\n    return [llama.LlamaForCausalLM]\n\n\n"
COMPUTED_LOOPS = [
    (GET_CLASSES + "def _f(*a):\n    return None\n\n\nfor c in get_classes():\n    c.forward = _f\n", "c.forward = _f"),
    (GET_CLASSES + "def patch():\n    for c in get_classes():\n        c.forward = None\n\n\npatch()\n",
     "c.forward = None (in patch(), when it is called)"),
    ("from . import llama\n\nfor c in vars(llama).values():\n    if isinstance(c, type):\n        c.forward = None\n",
     "c.forward = None"),
    ("from .llama import LlamaForCausalLM\n\n\ndef names():\n    return ['set_aux_hidden_state_layers']\n\n\n"
     "for n in names():\n    setattr(LlamaForCausalLM, n, None)\n", "setattr(LlamaForCausalLM, n, None)"),
]


@pytest.mark.parametrize("patch, needle", COMPUTED_LOOPS, ids=[n for _, n in COMPUTED_LOOPS])
def test_a_loop_over_a_computed_iterable_in_another_module_is_unknown(tmp_path, patch, needle):
    root = make_tree(tmp_path, {f"{MODELS}/_patch.py": patch})
    line = next(ln for ln in patch.splitlines() if needle.split(" (")[0] in ln)
    expect_unknown(root, f"{MODELS}/_patch.py", patch, line, needle)


def test_a_loop_over_what_a_function_computes_from_elsewhere_keeps_the_verdict(tmp_path):
    # the function's module names neither the class nor its module: its objects are not the class
    other = "def get_layers():\n    return []\n\n\nfor c in get_layers():\n    c.forward = None\n"
    expect_supported(make_tree(tmp_path, {f"{MODELS}/_other.py": other}))


def test_a_loop_over_a_literal_of_classes_is_followed_as_each_assignment(tmp_path):
    """SGLang 0.5.23's qwen3_5.py sets a static method on four classes in a ``for`` loop over a
    tuple of them: followed as the four assignments (the function, made a static method), so
    the targets stay supported; a gate member set to None the same way is followed too."""
    tail = ("def _reason(hf_config, quant_config):\n    return None\n\n\n"
            "for _c in (LlamaForCausalLM, LlamaModel):\n    _c.fusion_reason = staticmethod(_reason)\n")
    expect_supported(make_tree(tmp_path / "a", llama(LLAMA + "\n\n" + tail)))
    tail = "for _c in (LlamaForCausalLM,):\n    _c.set_aux_hidden_state_layers = None\n"
    code, res, _ = scan(make_tree(tmp_path / "b", llama(LLAMA + "\n\n" + tail)))
    assert (code, res["verdict"]) == (1, "blocked"), res["findings"]
    assert any("set_aux_hidden_state_layers is None" in f["message"] for f in res["findings"])


def test_a_new_that_returns_another_class_is_unknown(tmp_path):
    new = ("    def __new__(cls, *a, **k):\n        from .toy import ToyV2ForCausalLM\n"
           "        return ToyV2ForCausalLM(*a, **k)\n\n")
    text = LLAMA.replace(HEAD, HEAD + new, 1)
    root = make_tree(tmp_path, llama(text))
    expect_unknown(root, LLAMA_PATH, text, "def __new__", "__new__ returning ToyV2ForCausalLM(*a, **k)")


@pytest.mark.parametrize("body", [
    "return super().__new__(cls)",
    "instance = super().__new__(cls)\n        instance.tag = 1\n        return instance",
    "if cls._one is None:\n            cls._one = object.__new__(cls)\n        return cls._one",
])
def test_a_new_that_returns_its_own_instance_keeps_the_verdict(tmp_path, body):
    new = f"    _one = None\n\n    def __new__(cls, *a, **k):\n        {body}\n\n"
    expect_supported(make_tree(tmp_path, llama(LLAMA.replace(HEAD, HEAD + new, 1))))


def test_the_instance_class_replaced_in_a_method_is_unknown(tmp_path):
    anchor = "        self.lm_head = nn.Linear(16, 32, bias=False)\n"
    assert anchor in LLAMA
    text = LLAMA.replace(anchor, anchor + "        self.__class__ = nn.Module\n", 1)
    root = make_tree(tmp_path, llama(text))
    expect_unknown(root, LLAMA_PATH, text, "self.__class__ = nn.Module", "self.__class__")


def test_another_object_class_replaced_in_a_method_keeps_the_verdict(tmp_path):
    anchor = "        self.lm_head = nn.Linear(16, 32, bias=False)\n"
    text = LLAMA.replace(anchor, anchor + "        self.lm_head.__class__ = nn.Linear\n", 1)
    expect_supported(make_tree(tmp_path, llama(text)))


# -- SGLang ---------------------------------------------------------------------------------------

SGLANG = [
    ("import sys\nsys.modules[__name__].EntryClass = [Phi3ForCausalLM]", "sys.modules[__name__].EntryClass"),
    ('locals()["EntryClass"] = [Phi3ForCausalLM]', "locals()['EntryClass']"),
    ('exec("EntryClass = [Phi3ForCausalLM]")', "exec('EntryClass = [Phi3ForCausalLM]')"),
    ('exec("del LlamaForCausalLM.set_eagle3_layers_to_capture")', "exec('del LlamaForCausalLM"),
    ("for _c in (LlamaForCausalLM,):\n    del _c.set_eagle3_layers_to_capture", "del _c.set_eagle3_layers_to_capture"),
]


@pytest.mark.parametrize("tail, needle", SGLANG, ids=[n for _, n in SGLANG])
def test_sglang_entry_class_or_setter_changed_through_a_namespace_is_unknown(tmp_path, tail, needle):
    text = SG_LLAMA + "\n\n" + tail + "\n"
    root = sglang_tree(tmp_path, {SG_PATH: text})
    expect_unknown(root, SG_PATH, text, tail.splitlines()[-1], needle)


# -- a real release --------------------------------------------------------------------------------

def test_the_real_vllm_release_with_its_class_rebound_through_the_module_dict(tmp_path):
    """vLLM 0.16.0's own sources (the cached release archive) with one line appended to
    llama.py: the registered class is rebound through the module's ``__dict__``."""
    archive = fetch_release("0.16.0", progress=False, project="vllm")
    with tarfile.open(archive) as tf:
        members = [m for m in tf.getmembers() if m.name.startswith("vllm-0.16.0/vllm/") and (m.isfile() or m.isdir())]
        tf.extractall(tmp_path, members=members, filter="data")
    root = tmp_path / "vllm-0.16.0"
    p = root / "vllm/model_executor/models/llama.py"
    text = p.read_text() + '\nimport sys\nsys.modules[__name__].__dict__["LlamaForCausalLM"] = None\n'
    p.write_text(text)
    before = _digest(root)
    r = cli("scan", str(root), "--model", "LlamaForCausalLM", "--no-config", "--format", "json", "--no-progress",
            "--no-cache")
    assert _digest(root) == before
    import json

    res = [x for x in json.loads(r.stdout)["results"] if x["architecture"] == "LlamaForCausalLM"][0]
    assert (r.exit_code, res["verdict"]) == (1, "unknown"), res
    where = f"vllm/model_executor/models/llama.py:{_line_of(text, '__dict__[')}"
    assert any("sys.modules[__name__].__dict__" in f["message"] and where in f["message"] for f in res["findings"])
