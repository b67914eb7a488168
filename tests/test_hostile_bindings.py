"""Issue 20, the verdict: names, tables and members bound or changed after their definition.

Each test builds its own tree (fixtures/minivllm or fixtures/minisglang with a few files
changed), scans one target through the real command line and checks the verdict and the exit
code. The rule under test: a binding or mutation the index can follow is followed the way Python
runs it (the last binding wins, code that never runs has no effect); one it cannot follow makes
the verdict ``unknown`` naming the construct and its ``file:line``; never ``supported``. Every
scan also leaves the tree exactly as it was.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, make_tree
from tests.test_hostile import cli

MODELS = "vllm/model_executor/models"
LLAMA = (REPO / "fixtures" / "minivllm" / MODELS / "llama.py").read_text()
REGISTRY = (REPO / "fixtures" / "minivllm" / MODELS / "registry.py").read_text()
SPEC = (REPO / "fixtures" / "minivllm" / "vllm/config/speculative.py").read_text()
INTERFACES = (REPO / "fixtures" / "minivllm" / MODELS / "interfaces.py").read_text()
MINISGLANG = REPO / "fixtures" / "minisglang"
SG_MODELS = "sglang/srt/models"
SG_LLAMA = (MINISGLANG / SG_MODELS / "llama.py").read_text()

#: a Llama-named class without any EAGLE-3 support
PLAIN = '''from torch import nn


class LlamaForCausalLM(nn.Module):
    def forward(self, input_ids, positions):
        return input_ids
'''


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def scan(root: Path, arch: str = "LlamaForCausalLM", *extra: str) -> tuple[int, dict | None, str]:
    """Scan ``arch`` of ``root``: ``(exit code, its JSON result or None, stderr)``; asserts that the
    scan wrote nothing into the tree."""
    before = _digest(root)
    r = cli("scan", str(root), "--model", arch, "--format", "json", "--no-progress", "--no-cache", *extra)
    assert _digest(root) == before, "the scan changed the tree"
    assert "Traceback" not in r.stderr
    if r.exit_code not in (0, 1):
        return r.exit_code, None, r.stderr
    results = [x for x in json.loads(r.stdout)["results"] if x["architecture"] == arch]
    return r.exit_code, results[0], r.stderr


def sglang_tree(tmp_path: Path, files: dict[str, str | None]) -> Path:
    dest = tmp_path / "minisglang"
    shutil.copytree(MINISGLANG, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for rel, text in files.items():
        p = dest / rel
        if text is None:
            p.unlink()
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    return dest


def llama(text: str) -> dict[str, str]:
    return {f"{MODELS}/llama.py": text}


def expect(root: Path, verdict: str, needle: str | None = None, arch: str = "LlamaForCausalLM") -> dict:
    """Assert the verdict (never ``supported`` here), exit code 1, and, for ``unknown``, that a
    finding names ``needle`` (the construct) with a ``file:line``."""
    code, res, err = scan(root, arch)
    assert res is not None, err
    assert res["verdict"] == verdict, res
    assert code == 1
    if needle is not None:
        hits = [f for f in res["findings"] if needle in f["message"]]
        assert hits, res["findings"]
        if verdict == "unknown":
            assert any(f["severity"] == "unknown" for f in hits)
            assert any(":" in f["message"] or f.get("line") for f in hits)
    return res


def test_pristine_trees_are_supported(tmp_path):
    code, res, _ = scan(make_tree(tmp_path))
    assert (code, res["verdict"]) == (0, "supported")
    code, res, _ = scan(sglang_tree(tmp_path, {}))
    assert (code, res["verdict"]) == (0, "supported")


# -- rebinding after the definition --------------------------------------------------------------

def test_star_import_at_the_end_rebinds_the_class(tmp_path):
    root = make_tree(tmp_path, {f"{MODELS}/llama_plain.py": PLAIN, **llama(LLAMA + "\nfrom .llama_plain import *\n")})
    expect(root, "blocked", "does not satisfy")


def test_star_import_before_the_class_does_not_rebind_it(tmp_path):
    text = LLAMA.replace("from .utils import maybe_prefix", "from .utils import maybe_prefix\nfrom .llama_plain import *")
    code, res, _ = scan(make_tree(tmp_path, {f"{MODELS}/llama_plain.py": PLAIN, **llama(text)}))
    assert (code, res["verdict"]) == (0, "supported")


@pytest.mark.parametrize("tail, verdict, needle", [
    ("LlamaForCausalLM, _n = LlamaModel, 1", "blocked", "does not satisfy"),  # literal: followed
    ("LlamaForCausalLM, _n = _pick()", "unknown", "tuple unpacking"),
    ("for LlamaForCausalLM in (LlamaModel,):\n    pass", "unknown", "for loop"),
    ("with open(__file__) as LlamaForCausalLM:\n    pass", "unknown", "with ... as"),
    ("(LlamaForCausalLM := LlamaModel)", "blocked", "does not satisfy"),  # a walrus statement: followed
    ("print(LlamaForCausalLM := LlamaModel)", "unknown", "walrus"),
    ("match 1:\n    case LlamaForCausalLM:\n        pass", "unknown", "match capture"),
], ids=["tuple-literal", "tuple-call", "for", "with", "walrus-statement", "walrus-expression", "match"])
def test_rebinding_by_unpacking_loops_with_walrus_match(tmp_path, tail, verdict, needle):
    expect(make_tree(tmp_path, llama(LLAMA + "\n" + tail + "\n")), verdict, needle)


@pytest.mark.parametrize("tail, verdict, needle", [
    ("def _swap():\n    global LlamaForCausalLM\n    LlamaForCausalLM = LlamaModel\n\n\n_swap()", "unknown",
     "global LlamaForCausalLM"),
    ('globals()["LlamaForCausalLM"] = LlamaModel', "blocked", "does not satisfy"),  # literal key: followed
    ("globals()[_name()] = LlamaModel", "unknown", "globals()"),
    ('import sys\nsetattr(sys.modules[__name__], "LlamaForCausalLM", LlamaModel)', "unknown", "module object"),
], ids=["global-in-function", "globals-literal", "globals-computed", "setattr-module"])
def test_rebinding_through_globals_and_the_module_object(tmp_path, tail, verdict, needle):
    expect(make_tree(tmp_path, llama(LLAMA + "\n" + tail + "\n")), verdict, needle)


def _decorated(deco_body: str) -> str:
    text = LLAMA.replace("class LlamaForCausalLM(", f"{deco_body}\n\n\n@_swap\nclass LlamaForCausalLM(")
    return text


def test_class_decorator_returning_another_class(tmp_path):
    expect(make_tree(tmp_path, llama(_decorated("def _swap(cls):\n    return LlamaModel"))), "blocked",
           "does not satisfy")


def test_class_decorator_that_may_return_another_class(tmp_path):
    body = "def _swap(cls):\n    if cls.__name__.startswith('L'):\n        return LlamaModel\n    return cls"
    expect(make_tree(tmp_path, llama(_decorated(body))), "unknown", "class decorator _swap")


def test_identity_class_decorator_keeps_the_verdict(tmp_path):
    code, res, _ = scan(make_tree(tmp_path, llama(_decorated("def _swap(cls):\n    return cls"))))
    assert (code, res["verdict"]) == (0, "supported")


# what a class decorator binds: followed through the tree, or unknown (never the class assumed)

def _decorated_with(deco: str, head: str = "", files: dict[str, str] | None = None, cls: str = "LlamaForCausalLM"):
    """``llama.py`` with ``head`` after its imports and ``@deco`` on ``cls``."""
    text = LLAMA.replace("from .utils import maybe_prefix", "from .utils import maybe_prefix\n" + head)
    text = text.replace(f"\nclass {cls}(", f"\n@{deco}\nclass {cls}(")
    return {**llama(text), **(files or {})}


@pytest.mark.parametrize("head, deco, needle", [
    ("from somewhere_else import swap", "swap", "somewhere_else.swap, from outside the tree"),
    ("import torch", "torch.compile", "torch.compile, from outside the tree"),
    ("from somewhere_else import swap", "swap(layers=2)", "somewhere_else.swap, from outside the tree"),
    ("_DECOS = [lambda c: c]", "_DECOS[0]", "no name static analysis can follow"),
    ("", "_nowhere", "cannot be followed"),
], ids=["external-name", "external-attribute", "external-call", "subscript", "unbound"])
def test_class_decorator_the_tree_cannot_resolve_is_unknown(tmp_path, head, deco, needle):
    res = expect(make_tree(tmp_path, _decorated_with(deco, head)), "unknown", needle)
    assert any("llama.py:" in f["message"] for f in res["findings"])


def test_class_decorator_on_the_holder_the_tree_cannot_resolve_is_unknown(tmp_path):
    files = _decorated_with("swap", "from somewhere_else import swap", cls="LlamaModel")
    expect(make_tree(tmp_path, files), "unknown", "somewhere_else.swap")


#: a registry object of the tree, as vLLM's MULTIMODAL_REGISTRY.register_processor(...)
#: (vllm/multimodal/registry.py): a method returning an inner function that gives its argument back
REG = """class _Registry:
    def __init__(self):
        self.rows = {}

    def register(self, name, *, info=None):
        def wrapper(model_cls):
            self.rows[name] = model_cls
            return model_cls

        return wrapper

    def swap(self, name):
        def wrapper(model_cls):
            return LlamaModel

        return wrapper

    def keep(self, model_cls):
        return model_cls

    @classmethod
    def tag(cls, name):
        def wrapper(model_cls):
            return model_cls

        return wrapper

    @staticmethod
    def other(model_cls):
        return _make(model_cls)


REGISTRY = _Registry()


def register_here(cls):
    return REGISTRY.register("x", info=1)(cls)


def compile_like(cls=None, *, dims=None):
    def helper(cls):
        if not hasattr(cls, "forward"):
            raise TypeError("no forward")
        return _compile(cls, dims)

    if cls is not None:
        return helper(cls)
    return helper


def _compile(cls, dims):
    cls.dims = dims
    return cls


def returns_a_call(cls):
    return torch.compile(cls)


from .llama import LlamaModel  # noqa: E402
"""


@pytest.mark.parametrize("deco", [
    "REGISTRY.register('llama', info=1)", "_registry.REGISTRY.register('llama')", "REGISTRY.keep",
    "_Registry.tag('x')", "register_here", "compile_like", "compile_like(dims={'x': 0})", "typing.final",
], ids=["instance-method-factory", "through-the-module", "instance-method", "classmethod-factory",
        "factory-applied-in-place", "bare-optional-argument", "called-optional-argument", "stdlib-identity"])
def test_class_decorator_that_gives_the_class_back_is_followed(tmp_path, deco):
    head = ("import typing\n\nfrom . import _registry\nfrom ._registry import REGISTRY, _Registry, compile_like, "
            "register_here\n")
    root = make_tree(tmp_path, _decorated_with(deco, head, {f"{MODELS}/_registry.py": "import torch\n\n\n" + REG}))
    code, res, _ = scan(root)
    assert (code, res["verdict"]) == (0, "supported"), res


@pytest.mark.parametrize("deco, verdict, needle", [
    ("REGISTRY.swap('llama')", "blocked", "does not satisfy"),  # followed: the class it returns
    ("_Registry.other", "unknown", "may return the result of _make"),
    ("returns_a_call", "unknown", "may return the result of torch.compile"),
], ids=["method-returns-another-class", "staticmethod-returns-a-call", "function-returns-an-external-call"])
def test_class_decorator_that_may_not_give_the_class_back(tmp_path, deco, verdict, needle):
    head = "from ._registry import REGISTRY, _Registry, returns_a_call\n"
    root = make_tree(tmp_path, _decorated_with(deco, head, {f"{MODELS}/_registry.py": "import torch\n\n\n" + REG}))
    expect(root, verdict, needle)


def test_method_replaced_after_the_class(tmp_path):
    # followed: the holder's forward becomes the decoder layer's, which captures nothing
    expect(make_tree(tmp_path, llama(LLAMA + "\nLlamaModel.forward = LlamaDecoderLayer.forward\n")), "blocked",
           "aux")
    # not followed: a module-level function put in its place
    tail = "\ndef _fwd(self, *a):\n    return a\n\n\nLlamaModel.forward = _fwd\n"
    expect(make_tree(tmp_path, llama(LLAMA + tail)), "unknown", "LlamaModel.forward")


def test_method_replaced_by_the_package_above(tmp_path):
    # models/__init__.py runs before llama.py's classes can be used: its change counts
    init = (REPO / "fixtures" / "minivllm" / MODELS / "__init__.py").read_text()
    tail = ("\nfrom vllm.model_executor.models import llama as _llama\n\n"
            "_llama.LlamaModel.forward = _llama.LlamaDecoderLayer.forward\n")
    expect(make_tree(tmp_path, {f"{MODELS}/__init__.py": init + tail}), "unknown", "LlamaModel.forward")


# changes made to a class by other modules, or by functions: they run when that module is imported
# or the function called, which static analysis cannot tell: unknown, naming the construct

@pytest.mark.parametrize("patch, needle", [
    ("from .llama import LlamaForCausalLM\n\ndel LlamaForCausalLM.set_aux_hidden_state_layers\n",
     "when vllm.model_executor.models._patch is imported"),
    ("from . import llama as L\n\n_C = L.LlamaModel\n_C.forward = L.LlamaDecoderLayer.forward\n", "_C.forward"),
    ('from .llama import LlamaForCausalLM\n\nsetattr(LlamaForCausalLM, "supports_eagle3", False)\n',
     "setattr(LlamaForCausalLM"),
    ("def patch():\n    from vllm.model_executor.models.llama import LlamaModel\n    LlamaModel.forward = None\n",
     "in patch(), when it is called"),
    ("import vllm.model_executor.models.llama\n\n\ndef patch(name):\n"
     "    setattr(vllm.model_executor.models.llama.LlamaForCausalLM, name, None)\n", "in patch()"),
], ids=["del-at-import", "alias", "setattr", "function-local-import", "computed-member"])
def test_class_changed_by_another_module(tmp_path, patch, needle):
    res = expect(make_tree(tmp_path, {f"{MODELS}/_patch.py": patch}), "unknown", needle)
    assert any("_patch.py:" in f["message"] for f in res["findings"])


def test_class_changed_by_a_function_of_its_own_module(tmp_path):
    tail = "\ndef _fwd(self, *a):\n    return a\n\n\ndef _patch():\n    LlamaModel.forward = _fwd\n"
    expect(make_tree(tmp_path, llama(LLAMA + tail)), "unknown", "in _patch(), when it is called")


@pytest.mark.parametrize("other", [
    "from .llama import LlamaForCausalLM\n\n_fwd = LlamaForCausalLM.forward\n",  # read only
    "def tag(cls):\n    cls.tagged = True\n    return cls\n",  # a parameter, not the class
    "class LlamaForCausalLMHelper:\n    pass\n\n\nLlamaForCausalLMHelper.x = 1\n",  # another class
    "import torch\n\ntorch.LlamaForCausalLM = 1\n",  # an external module's attribute named alike
], ids=["read", "parameter", "other-class", "external-head"])
def test_other_modules_that_do_not_change_the_class_keep_the_verdict(tmp_path, other):
    code, res, _ = scan(make_tree(tmp_path, {f"{MODELS}/_other.py": other}))
    assert (code, res["verdict"]) == (0, "supported"), res


# -- a registry changed after its literal ---------------------------------------------------------

@pytest.mark.parametrize("tail, verdict, needle", [
    ('_VLLM_MODELS["LlamaForCausalLM"] = ("toy", "ToyV2ForCausalLM")', "blocked", None),
    ('_VLLM_MODELS["LlamaForCausalLM"] = _pick()', "unknown", "_VLLM_MODELS"),
    ('_VLLM_MODELS.update({"LlamaForCausalLM": ("toy", "ToyV2ForCausalLM")})', "blocked", None),
    ("_VLLM_MODELS.update(_more())", "unknown", "update"),
], ids=["setitem", "setitem-computed", "update", "update-computed"])
def test_registry_entry_repointed(tmp_path, tail, verdict, needle):
    root = make_tree(tmp_path, {f"{MODELS}/registry.py": REGISTRY.replace(
        "\n\nclass _ModelRegistry", f"\n{tail}\n\n\nclass _ModelRegistry")})
    res = expect(root, verdict, needle)
    if verdict == "blocked":
        assert res["class"].endswith("toy.ToyV2ForCausalLM")


def _registry_with(tail: str, before_merge: str = "") -> dict[str, str]:
    text = REGISTRY.replace("\n\nclass _ModelRegistry", f"\n{tail}\n\n\nclass _ModelRegistry")
    if before_merge:
        text = text.replace("\n_VLLM_MODELS = {", f"\n{before_merge}\n\n\n_VLLM_MODELS = {{")
    return {f"{MODELS}/registry.py": text}


TOY = '("toy", "ToyV2ForCausalLM")'


@pytest.mark.parametrize("tail, needle", [
    ("_VLLM_MODELS = {k: v for k, v in _plugin_rows()}", "built at run time"),
    ("_VLLM_MODELS = {**_TEXT_GENERATION_MODELS, **_load()}", "built at run time"),
    ('_VLLM_MODELS = getattr(_plugins, "MODELS", _VLLM_MODELS)', "built at run time"),
    (f'for _a, _row in {{"LlamaForCausalLM": {TOY}}}.items():\n    _VLLM_MODELS[_a] = _row', "module-level for"),
    (f'if _flag():\n    _VLLM_MODELS.update({{"LlamaForCausalLM": {TOY}}})', "module-level if"),
    (f'def _register():\n    _VLLM_MODELS["LlamaForCausalLM"] = {TOY}\n\n\n_register()', "in _register()"),
    ("def _swap():\n    global _VLLM_MODELS\n    _VLLM_MODELS = {}", "global _VLLM_MODELS"),
    (f'def _fill(t):\n    t["LlamaForCausalLM"] = {TOY}\n\n\n_fill(_VLLM_MODELS)', "_fill(_VLLM_MODELS)"),
    ("import _plugins\n_plugins.extend(_VLLM_MODELS)", "_plugins.extend(_VLLM_MODELS)"),
    (f'x = _VLLM_MODELS.pop("LlamaForCausalLM")', "pop"),
], ids=["comprehension", "spread-of-a-call", "getattr", "loop", "branch", "function", "global-in-function",
        "handed-to-a-function", "handed-to-an-external", "nested-in-an-expression"])
def test_registry_built_or_changed_at_run_time_is_unknown(tmp_path, tail, needle):
    res = expect(make_tree(tmp_path, _registry_with(tail)), "unknown", needle)
    assert any("registry.py:" in f["message"] for f in res["findings"])


def test_registry_sub_table_changed_in_a_function_is_unknown(tmp_path):
    fn = f'def _more():\n    _TEXT_GENERATION_MODELS["LlamaForCausalLM"] = {TOY}\n\n\n_more()'
    expect(make_tree(tmp_path, _registry_with("", before_merge=fn)), "unknown", "in _more()")


@pytest.mark.parametrize("tail", [
    "ModelRegistry = _ModelRegistry(dict(_VLLM_MODELS))",
    "_N = len(_VLLM_MODELS)\n_NAMES = sorted(_VLLM_MODELS)",
    "def _names():\n    return list(_VLLM_MODELS)",
    "def _local():\n    _VLLM_MODELS = {}\n    _VLLM_MODELS['x'] = 1\n    return _VLLM_MODELS",
], ids=["copied", "read", "read-in-a-function", "local-of-the-same-name"])
def test_registry_only_read_keeps_the_verdict(tmp_path, tail):
    files = _registry_with(tail)
    if tail.startswith("ModelRegistry = "):
        # the registry object built from a copy: in place of the tree's own, after its class (before
        # it, the module's import would fail with a NameError, which the scan reports as unknown)
        (path, text), = files.items()
        files = {path: text.replace(f"\n{tail}\n", "\n").replace("ModelRegistry = _ModelRegistry(_VLLM_MODELS)", tail)}
        assert tail in files[path] and "_ModelRegistry(_VLLM_MODELS)" not in files[path]
    code, res, _ = scan(make_tree(tmp_path, files))
    assert (code, res["verdict"]) == (0, "supported"), res


def test_registry_changed_through_an_alias_is_followed(tmp_path):
    root = make_tree(tmp_path, _registry_with(f'_m = _VLLM_MODELS\n_m["LlamaForCausalLM"] = {TOY}'))
    res = expect(root, "blocked")
    assert res["class"].endswith("toy.ToyV2ForCausalLM")


@pytest.mark.parametrize("plugin, needle", [
    ('from .registry import ModelRegistry\n\nModelRegistry.register_model("LlamaForCausalLM", "x:Y")\n',
     "when vllm.model_executor.models._plugin is imported"),
    ("from vllm.model_executor.models import ModelRegistry\n\n\ndef setup():\n"
     f'    ModelRegistry.models["LlamaForCausalLM"] = {TOY}\n', "in setup(), when it is called"),
    ("def setup(arch):\n    from vllm.model_executor import models as me\n\n"
     "    me.ModelRegistry.register_model(arch, 'x:Y')\n", "me.ModelRegistry.register_model(arch"),
], ids=["register-at-import", "item-in-a-function", "computed-through-a-local-import"])
def test_runtime_registry_changed_by_another_module(tmp_path, plugin, needle):
    res = expect(make_tree(tmp_path, {f"{MODELS}/_plugin.py": plugin}), "unknown", needle)
    assert any("_plugin.py:" in f["message"] for f in res["findings"])


@pytest.mark.parametrize("plugin", [
    'from .registry import ModelRegistry\n\nModelRegistry.register_model("ToyV3ForCausalLM", "x:Y")\n',
    "from .registry import ModelRegistry\n\n_ARCHS = ModelRegistry.models.keys()\n",
], ids=["another-row", "read"])
def test_runtime_registry_other_rows_or_reads_keep_the_verdict(tmp_path, plugin):
    code, res, _ = scan(make_tree(tmp_path, {f"{MODELS}/_plugin.py": plugin}))
    assert (code, res["verdict"]) == (0, "supported"), res


@pytest.mark.parametrize("tail", ['del _VLLM_MODELS["LlamaForCausalLM"]', '_VLLM_MODELS.pop("LlamaForCausalLM")'],
                         ids=["del", "pop"])
def test_registry_entry_removed(tmp_path, tail):
    root = make_tree(tmp_path, {f"{MODELS}/registry.py": REGISTRY.replace(
        "\n\nclass _ModelRegistry", f"\n{tail}\n\n\nclass _ModelRegistry")})
    code, res, err = scan(root)
    # vLLM no longer registers the architecture: asking for it is refused (one line, exit 2)
    assert code == 2 and res is None
    assert "LlamaForCausalLM" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("change, verdict", [
    ('eagle3_target_supported.remove("llama")', "blocked"),
    ("eagle3_target_supported.clear()", "blocked"),
    ("del eagle3_target_supported[0]", "blocked"),
    ("eagle3_target_supported.remove(_which())", "unknown"),
], ids=["remove", "clear", "del-index", "remove-computed"])
def test_allowlist_emptied_in_place(tmp_path, change, verdict):
    spec = SPEC.replace('eagle3_target_supported = ["llama", "qwen"]\n',
                        f'eagle3_target_supported = ["llama", "qwen"]\n        {change}\n')
    expect(make_tree(tmp_path, {"vllm/config/speculative.py": spec}), verdict, "allowlist")


# -- a package beside the module ------------------------------------------------------------------

def test_package_folder_beside_the_module_wins(tmp_path):
    root = make_tree(tmp_path, {f"{MODELS}/llama/__init__.py": PLAIN})
    res = expect(root, "blocked", "does not satisfy")
    assert "llama/__init__.py" in json.dumps(res["findings"])


# -- members removed or disabled -------------------------------------------------------------------

@pytest.mark.parametrize("change", [
    ("    def compute_logits(self, hidden_states):", "    del set_aux_hidden_state_layers\n\n"
                                                     "    def compute_logits(self, hidden_states):"),
    ("    def compute_logits(self, hidden_states):", "    set_aux_hidden_state_layers = None\n\n"
                                                     "    def compute_logits(self, hidden_states):"),
], ids=["del-in-body", "none-in-body"])
def test_member_removed_in_the_class_body(tmp_path, change):
    expect(make_tree(tmp_path, llama(LLAMA.replace(*change))), "blocked", "set_aux_hidden_state_layers")


@pytest.mark.parametrize("tail", ["del LlamaForCausalLM.set_aux_hidden_state_layers",
                                  'delattr(LlamaForCausalLM, "set_aux_hidden_state_layers")',
                                  "LlamaForCausalLM.set_aux_hidden_state_layers = None"],
                         ids=["del-attribute", "delattr", "set-none"])
def test_member_removed_after_the_class(tmp_path, tail):
    expect(make_tree(tmp_path, llama(LLAMA + "\n" + tail + "\n")), "blocked", "set_aux_hidden_state_layers")


def test_class_deleted_at_module_level(tmp_path):
    expect(make_tree(tmp_path, llama(LLAMA + "\ndel LlamaForCausalLM\n")), "unknown", "del LlamaForCausalLM")


def test_checker_function_returning_false(tmp_path):
    text = INTERFACES.replace("    return isinstance(model, SupportsEagle3)", "    return False")
    assert text != INTERFACES
    expect(make_tree(tmp_path, {f"{MODELS}/interfaces.py": text}), "blocked", "supports_eagle3()")


# -- code that never runs ---------------------------------------------------------------------------

CAPTURE = """            if idx in self.aux_hidden_state_layers:
                aux_hidden_states.append(hidden_states + residual)
"""


@pytest.mark.parametrize("change", [
    (CAPTURE, "            if False:\n" + "".join("    " + ln + "\n" for ln in CAPTURE.splitlines())),
    ("        if len(aux_hidden_states) > 0:", "        aux_hidden_states = []\n        if len(aux_hidden_states) > 0:"),
    ("        for idx, layer in enumerate(", "        return hidden_states\n        for idx, layer in enumerate("),
], ids=["if-false", "reset-before-return", "return-before-loop"])
def test_capture_that_never_runs(tmp_path, change):
    text = LLAMA.replace(*change)
    assert text != LLAMA
    expect(make_tree(tmp_path, llama(text)), "blocked", "aux")


def test_unconditional_eagle3_refusal_in_the_config_validation(tmp_path):
    spec = SPEC.replace('        eagle3_target_supported = ["llama", "qwen"]\n',
                        '        if self.method == "eagle3":\n            raise ValueError("no")\n'
                        '        eagle3_target_supported = ["llama", "qwen"]\n')
    expect(make_tree(tmp_path, {"vllm/config/speculative.py": spec}), "blocked", "raises for every eagle3 target")


def test_module_level_raise_makes_the_module_unimportable(tmp_path):
    text = LLAMA.replace("from .utils import maybe_prefix", "from .utils import maybe_prefix\n\n"
                         'raise ImportError("not on this platform")')
    expect(make_tree(tmp_path, llama(text)), "unknown", "raises ImportError")


# -- SGLang --------------------------------------------------------------------------------------

def test_sglang_second_entryclass_with_the_same_name(tmp_path):
    dup = PLAIN + "\n\nEntryClass = LlamaForCausalLM\n"
    expect(sglang_tree(tmp_path, {f"{SG_MODELS}/llama_dup.py": dup}), "unknown", "twice")


def test_sglang_star_import_rebinding(tmp_path):
    root = sglang_tree(tmp_path, {f"{SG_MODELS}/llama.py": SG_LLAMA.replace(
        "\n\nEntryClass", "\n\nfrom ._plain import *\n\n\nEntryClass"),
        f"{SG_MODELS}/_plain.py": PLAIN})
    expect(root, "blocked", "set_eagle3_layers_to_capture")


def test_sglang_setter_deleted_after_the_class(tmp_path):
    root = sglang_tree(tmp_path, {f"{SG_MODELS}/llama.py": SG_LLAMA.replace(
        "\n\nclass Phi3ForCausalLM", "\n\ndel LlamaForCausalLM.set_eagle3_layers_to_capture\n\n\nclass Phi3ForCausalLM")})
    expect(root, "blocked", "set_eagle3_layers_to_capture")


def test_sglang_dead_code_capture(tmp_path):
    cap = """            if i in self.layers_to_capture:
                aux_hidden_states.append(hidden_states + residual)
"""
    assert cap in SG_LLAMA
    text = SG_LLAMA.replace(cap, "            if False:\n" + "".join("    " + ln + "\n" for ln in cap.splitlines()))
    expect(sglang_tree(tmp_path, {f"{SG_MODELS}/llama.py": text}), "blocked", "aux")


def test_sglang_module_level_raise_drops_its_architectures(tmp_path):
    text = SG_LLAMA.replace("import torch.nn as nn", 'import torch.nn as nn\n\nraise ImportError("no kernels")')
    root = sglang_tree(tmp_path, {f"{SG_MODELS}/llama.py": text})
    r = cli("scan", str(root), "--format", "json", "--no-progress", "--no-cache")
    archs = {x["architecture"]: x["verdict"] for x in json.loads(r.stdout)["results"]}
    assert "LlamaForCausalLM" not in archs and "Phi3ForCausalLM" not in archs
    code, res, err = scan(root)
    assert code == 2 and "LlamaForCausalLM" in err and len(err.strip().splitlines()) == 1


def test_sglang_entryclass_appended_after_its_literal(tmp_path):
    extra = "\n\nclass ExtraForCausalLM(nn.Module):\n    pass\n\n\nEntryClass.append(ExtraForCausalLM)\n"
    root = sglang_tree(tmp_path, {f"{SG_MODELS}/llama.py": SG_LLAMA + extra})
    res = expect(root, "blocked", "set_eagle3_layers_to_capture", arch="ExtraForCausalLM")
    assert res["class"].endswith("llama.ExtraForCausalLM")


def test_sglang_entryclass_rebound_by_a_star_import(tmp_path):
    # llama.py's EntryClass becomes _plain's: SGLang then sees LlamaForCausalLM registered by two
    # modules (llama.py through the star import, and _plain.py itself) and asserts at start-up
    plain = PLAIN + "\n\nEntryClass = [LlamaForCausalLM]\n"
    root = sglang_tree(tmp_path, {f"{SG_MODELS}/_plain.py": plain,
                                  f"{SG_MODELS}/llama.py": SG_LLAMA + "\nfrom ._plain import *\n"})
    expect(root, "unknown", "twice", arch="LlamaForCausalLM")


def test_sglang_entryclass_rebound_in_a_loop_is_unknown(tmp_path):
    root = sglang_tree(tmp_path, {f"{SG_MODELS}/llama.py": SG_LLAMA
                                  + "\nfor EntryClass in ([LlamaForCausalLM],):\n    pass\n"})
    expect(root, "unknown", "for loop", arch="LlamaForCausalLM")


@pytest.mark.parametrize("tail, needle", [
    ("\nEntryClass = [c for c in (LlamaForCausalLM, Phi3ForCausalLM)]\n", "built at run time"),
    ("\nEntryClass = _pick(LlamaForCausalLM)\n", "built at run time"),
    ("\nfor _c in (Phi3ForCausalLM,):\n    EntryClass.append(_c)\n", "module-level for"),
    ("\ndef _drop():\n    EntryClass.remove(LlamaForCausalLM)\n\n\n_drop()\n", "in _drop()"),
    ("\nif _flag():\n    EntryClass = [Phi3ForCausalLM]\n", "module-level if"),
], ids=["comprehension", "call", "loop", "function", "branch"])
def test_sglang_entryclass_built_or_changed_at_run_time_is_unknown(tmp_path, tail, needle):
    root = sglang_tree(tmp_path, {f"{SG_MODELS}/llama.py": SG_LLAMA + tail})
    expect(root, "unknown", needle, arch="LlamaForCausalLM")


def test_sglang_entryclass_named_in_all_keeps_the_verdict(tmp_path):
    root = sglang_tree(tmp_path, {f"{SG_MODELS}/llama.py": SG_LLAMA + '\n__all__ = ["EntryClass"]\n'})
    code, res, _ = scan(root)
    assert (code, res["verdict"]) == (0, "supported")


# -- changes made in methods of other classes, class bodies and nested functions -------------------

@pytest.mark.parametrize("patch, needle", [
    ("from .llama import LlamaForCausalLM\n\n\nclass Patcher:\n    def __init__(self):\n"
     "        LlamaForCausalLM.forward = None\n", "in Patcher.__init__(), when it is called"),
    ("from .llama import LlamaForCausalLM\n\n\nclass Patcher:\n    def go(self):\n"
     "        setattr(LlamaForCausalLM, 'set_aux_hidden_state_layers', None)\n", "in Patcher.go()"),
    ("from .llama import LlamaForCausalLM\n\n\nclass Patcher:\n    @classmethod\n    def go(cls):\n"
     "        del LlamaForCausalLM.set_aux_hidden_state_layers\n", "del LlamaForCausalLM.set_aux_hidden_state_layers"),
    ("class Patcher:\n    @staticmethod\n    def go():\n        from .llama import LlamaForCausalLM as L\n"
     "        L.forward = None\n", "L.forward = None (in Patcher.go()"),
    ("class Outer:\n    class Inner:\n        def go(self):\n            from . import llama\n"
     "            llama.LlamaModel.forward = None\n", "in Outer.Inner.go()"),
    ("from .llama import LlamaForCausalLM\n\n\ndef outer():\n    def inner():\n"
     "        LlamaForCausalLM.forward = None\n    return inner\n", "in outer.<locals>.inner()"),
    ("from .llama import LlamaForCausalLM\n\n\nclass Patcher:\n    LlamaForCausalLM.forward = None\n",
     "in the body of class Patcher"),
    ("from .llama import LlamaModel\n\n\nclass Patcher:\n    def go(self):\n        setattr(LlamaModel, 'forward', None)\n",
     "LlamaModel.forward changed"),  # the holder model, not the target class
], ids=["init", "setattr", "classmethod", "staticmethod-local-import", "nested-class", "nested-function",
        "class-body", "holder"])
def test_class_changed_in_a_method_of_another_class(tmp_path, patch, needle):
    res = expect(make_tree(tmp_path, {f"{MODELS}/_patch.py": patch}), "unknown", needle)
    assert any("_patch.py:" in f["message"] for f in res["findings"])


@pytest.mark.parametrize("other", [
    "class Helper:\n    def __init__(self, model):\n        self.forward = None\n        model.tagged = True\n",
    "class Helper:\n    @classmethod\n    def make(cls):\n        cls.forward = None\n        return cls\n",
    "from .llama import LlamaForCausalLM\n\n\nclass Helper:\n    def go(self):\n        return LlamaForCausalLM.forward\n",
], ids=["self-and-parameter", "own-cls", "read-only"])
def test_methods_that_do_not_change_the_class_keep_the_verdict(tmp_path, other):
    code, res, _ = scan(make_tree(tmp_path, {f"{MODELS}/_other.py": other}))
    assert (code, res["verdict"]) == (0, "supported"), res


# -- attribute names computed through getattr / setattr / delattr ----------------------------------

@pytest.mark.parametrize("patch, needle", [
    ("from .llama import LlamaForCausalLM\n\nname = 'set_' + 'aux_hidden_state_layers'\n"
     "setattr(LlamaForCausalLM, name, None)\n", "setattr(LlamaForCausalLM, name, None)"),
    ("from .llama import LlamaForCausalLM\n\nsetattr(LlamaForCausalLM, 'set_' + 'aux_hidden_state_layers', None)\n",
     "'set_' + 'aux_hidden_state_layers'"),
    ("from .llama import LlamaForCausalLM\n\n_s = setattr\n_s(LlamaForCausalLM, 'forward', None)\n",
     "_s(LlamaForCausalLM, 'forward', None)"),
    ("from .llama import LlamaForCausalLM\n\n_ = setattr(LlamaForCausalLM, 'forward', None)\n",
     "setattr(LlamaForCausalLM, 'forward', None)"),
    ("from .llama import LlamaForCausalLM\n\ntype.__setattr__(LlamaForCausalLM, 'forward', None)\n",
     "type.__setattr__"),
    ("from .llama import LlamaForCausalLM\n\n[setattr(LlamaForCausalLM, n, None) for n in ['forward']]\n",
     "setattr(LlamaForCausalLM, n, None)"),
    ("from .llama import LlamaForCausalLM\n\npatch = lambda: delattr(LlamaForCausalLM, 'forward')\n",
     "delattr(LlamaForCausalLM, 'forward')"),
    ("import functools\nfrom .llama import LlamaForCausalLM\n\n_p = functools.partial(setattr, LlamaForCausalLM)\n",
     "functools.partial(setattr, LlamaForCausalLM)"),
    ("from . import llama\n\nN = 'LlamaForCausalLM'\nsetattr(getattr(llama, N), 'forward', None)\n",
     "setattr(getattr(llama, N), 'forward', None)"),
    ("from . import llama\n\nN = 'LlamaModel'\ngetattr(llama, N).forward = None\n", "getattr(llama, N).forward"),
    ("from . import llama\n\nX = getattr(llama, 'LlamaFor' + 'CausalLM')\nX.forward = None\n", "X.forward = None"),
    ("from . import llama\n\ngetattr(llama, 'LlamaForCausalLM').forward = None\n", "getattr(llama, 'LlamaForCausalLM')"),
    ("from . import llama\n\nN = 'Llama' + 'ForCausalLM'\nsetattr(llama, N, None)\n", "setattr(llama, N, None)"),
    ("from . import llama, toy\n\nsetattr(llama, 'LlamaForCausalLM', toy.ToyV2ForCausalLM)\n",
     "the name LlamaForCausalLM in vllm.model_executor.models.llama"),
    ("from . import llama, toy\n\nllama.LlamaForCausalLM = toy.ToyV2ForCausalLM\n",
     "the name LlamaForCausalLM in vllm.model_executor.models.llama"),
    ("from . import llama, toy\n\nllama.__dict__['LlamaForCausalLM'] = toy.ToyV2ForCausalLM\n", "llama.__dict__"),
    ("from . import llama\n\n\ndef patch(name):\n    vars(llama)[name] = None\n", "vars(llama)[name]"),
], ids=["computed-name", "concatenated-name", "alias-of-setattr", "in-an-expression", "type-setattr",
        "comprehension", "lambda", "partial", "getattr-head", "getattr-attribute-target", "getattr-binding",
        "getattr-literal", "module-computed", "module-literal", "module-attribute", "module-dict", "vars-in-function"])
def test_computed_attribute_names_are_unknown(tmp_path, patch, needle):
    res = expect(make_tree(tmp_path, {f"{MODELS}/_patch.py": patch}), "unknown", needle)
    assert any("_patch.py:" in f["message"] for f in res["findings"])


def test_registry_row_written_under_a_computed_key_is_unknown(tmp_path):
    tail = '\n_N = "Llama" + "ForCausalLM"\n_VLLM_MODELS[_N] = ("toy", "ToyV2ForCausalLM")\n'
    expect(make_tree(tmp_path, {f"{MODELS}/registry.py": REGISTRY + tail}), "unknown", "_VLLM_MODELS[_N]")


# -- vLLM's HF config registry (_CONFIG_REGISTRY) built or changed at run time ---------------------

CONFIG_REGISTRY = (REPO / "fixtures" / "minivllm" / "vllm/transformers_utils/config.py").read_text().replace(
    'toy_vl="ToyVLConfig",', 'toy_vl="ToyVLConfig",\n    llama_vl="LlamaVLConfig",')
#: a multimodal target that is supported when its config class (vLLM's, registered for
#: ``llama_vl``) defines the image_token_index the proposer's fallback reads
LLAMA_VL = {
    f"{MODELS}/llama_vl.py": (
        "from .interfaces import SupportsMultiModal\nfrom .llama import LlamaForCausalLM\n"
        "from vllm.transformers_utils.configs.llama_vl import LlamaVLConfig\n\n\n"
        "class LlamaVLForConditionalGeneration(LlamaForCausalLM, SupportsMultiModal):\n"
        "    def get_language_model(self):\n        return self\n"),
    "vllm/transformers_utils/configs/llama_vl.py": (
        "from transformers import PretrainedConfig\n\n\nclass LlamaVLConfig(PretrainedConfig):\n"
        '    model_type = "llama_vl"\n\n    def __init__(self, image_token_index: int = 5, **kwargs) -> None:\n'
        "        self.image_token_index = image_token_index\n        super().__init__(**kwargs)\n"),
    "vllm/transformers_utils/configs/__init__.py": (
        "from vllm.transformers_utils.configs.llama_vl import LlamaVLConfig\n"
        "from vllm.transformers_utils.configs.toy_vl import ToyVLConfig\n\n__all__ = ['LlamaVLConfig', 'ToyVLConfig']\n"),
    f"{MODELS}/registry.py": REGISTRY.replace(
        '"ToyVLForConditionalGeneration": ("toy_vl", "ToyVLForConditionalGeneration"),',
        '"ToyVLForConditionalGeneration": ("toy_vl", "ToyVLForConditionalGeneration"),\n'
        '    "LlamaVLForConditionalGeneration": ("llama_vl", "LlamaVLForConditionalGeneration"),'),
}
VL = "LlamaVLForConditionalGeneration"


def _config_tree(tmp_path, config_py: str, extra: dict | None = None) -> Path:
    return make_tree(tmp_path, {**LLAMA_VL, "vllm/transformers_utils/config.py": config_py, **(extra or {})})


def test_config_registry_as_written_gives_the_multimodal_target_its_verdict(tmp_path):
    code, res, _ = scan(_config_tree(tmp_path, CONFIG_REGISTRY), VL)
    assert (code, res["verdict"]) == (0, "supported"), res
    # a change the index follows as Python runs it: the row now names a class without the attribute
    tail = '\n_CONFIG_REGISTRY["llama_vl"] = "ToyVLConfig"\n'
    res = expect(_config_tree(tmp_path, CONFIG_REGISTRY + tail), "blocked", "ToyVLConfig", arch=VL)
    assert any(f["rule"] == "EA304" and f["severity"] == "error" for f in res["findings"])


@pytest.mark.parametrize("tail, needle", [
    ("_CONFIG_REGISTRY = {k: v for k, v in _load().items()}", "the table is built at run time"),
    ("_CONFIG_REGISTRY = LazyConfigDict(**_more())", "LazyConfigDict(**_more())"),
    ("_CONFIG_REGISTRY.update(_more())", "_CONFIG_REGISTRY.update(_more())"),
    ('def _patch():\n    _CONFIG_REGISTRY["llama_vl"] = "ToyVLConfig"', "in _patch()"),
    ('for _k in ["llama_vl"]:\n    del _CONFIG_REGISTRY[_k]', "del _CONFIG_REGISTRY[_k]"),
    ('_K = "llama" + "_vl"\ndel _CONFIG_REGISTRY[_K]', "del _CONFIG_REGISTRY[_K]"),
], ids=["comprehension-over-a-call", "spread-of-a-call", "update-with-a-call", "setitem-in-a-function",
        "del-in-a-loop", "del-computed-key"])
def test_config_registry_built_or_changed_at_run_time_is_unknown(tmp_path, tail, needle):
    res = expect(_config_tree(tmp_path, CONFIG_REGISTRY + "\n" + tail + "\n"), "unknown", "_CONFIG_REGISTRY", arch=VL)
    hits = [f for f in res["findings"] if f["rule"] == "EA304" and f["severity"] == "unknown"]
    assert hits and needle in hits[0]["message"] and "transformers_utils/config.py:" in hits[0]["message"], hits


@pytest.mark.parametrize("patch, needle", [
    ("from vllm.transformers_utils.config import _CONFIG_REGISTRY\n\n\nclass P:\n    def go(self):\n"
     "        _CONFIG_REGISTRY['llama_vl'] = 'ToyVLConfig'\n", "in P.go(), when it is called"),
    ("from vllm.transformers_utils import config\n\nconfig._CONFIG_REGISTRY.update(llama_vl='ToyVLConfig')\n",
     "when vllm.model_executor.models._patch is imported"),
], ids=["method", "module-level"])
def test_config_registry_changed_by_another_module_is_unknown(tmp_path, patch, needle):
    root = _config_tree(tmp_path, CONFIG_REGISTRY, {f"{MODELS}/_patch.py": patch})
    res = expect(root, "unknown", needle, arch=VL)
    assert any("_patch.py:" in f["message"] and f["rule"] == "EA304" for f in res["findings"])


# -- an attacker's other ways: a module replaced in sys.modules, subclass hooks, metaclasses -------

_HOOK = ("class _Hook:\n    def __init_subclass__(cls, **kw):\n        super().__init_subclass__(**kw)\n"
         "        cls.set_aux_hidden_state_layers = None\n\n\n")
_META = ("class _Meta(type):\n    def __new__(mcs, name, bases, ns):\n        ns.pop('forward', None)\n"
         "        return super().__new__(mcs, name, bases, ns)\n\n\nclass _Base(metaclass=_Meta):\n    pass\n\n\n")
_LLAMA_CLASS = "class LlamaForCausalLM("


@pytest.mark.parametrize("files, needle", [
    ({f"{MODELS}/_patch.py": "import sys\nfrom . import toy\n\nsys.modules['vllm.model_executor.models.llama'] = toy\n"},
     "sys.modules['vllm.model_executor.models.llama']"),
    ({f"{MODELS}/_patch.py": "import sys\nfrom . import llama, toy\n\n\ndef swap():\n    sys.modules[llama.__name__] = toy\n"},
     "sys.modules[llama.__name__] (in swap(), when it is called)"),
    (llama(LLAMA.replace(_LLAMA_CLASS, _HOOK + "class LlamaForCausalLM(_Hook, ", 1)), "_Hook.__init_subclass__"),
    (llama(LLAMA.replace(_LLAMA_CLASS, _META + "class LlamaForCausalLM(_Base, ", 1)), "metaclass=_Meta"),
], ids=["sys-modules", "sys-modules-in-a-function", "init-subclass-hook", "metaclass"])
def test_module_replacement_subclass_hooks_and_metaclasses_are_unknown(tmp_path, files, needle):
    expect(make_tree(tmp_path, files), "unknown", needle)


@pytest.mark.parametrize("files", [
    llama(LLAMA.replace(_LLAMA_CLASS, "import abc\n\n\nclass _Base(metaclass=abc.ABCMeta):\n    pass\n\n\n"
                        "class LlamaForCausalLM(_Base, ", 1)),
    llama(LLAMA.replace(_LLAMA_CLASS, "_SEEN = []\n\n\nclass _Hook:\n    def __init_subclass__(cls, **kw):\n"
                        "        _SEEN.append(cls)\n\n\nclass LlamaForCausalLM(_Hook, ", 1)),
    # vLLM's Transformers backend merges a data attribute on each subclass: no gate reads it
    llama(LLAMA.replace(_LLAMA_CLASS, "class _Hook:\n    mapper = {}\n\n    def __init_subclass__(cls, **kw):\n"
                        "        merged = {}\n        for base in cls.__mro__:\n"
                        "            merged.update(getattr(base, 'mapper', {}))\n        cls.mapper = merged\n\n\n"
                        "class LlamaForCausalLM(_Hook, ", 1)),
    {f"{MODELS}/_other.py": "import sys\n\nsys.modules.setdefault('vllm.unrelated_thing', None)\n_m = sys.modules['os']\n"},
], ids=["external-metaclass", "hook-that-changes-nothing", "hook-that-merges-data", "other-module-entries"])
def test_harmless_hooks_metaclasses_and_module_entries_keep_the_verdict(tmp_path, files):
    code, res, _ = scan(make_tree(tmp_path, files))
    assert (code, res["verdict"]) == (0, "supported"), res


@pytest.mark.parametrize("files, needle", [
    ({f"{MODELS}/registry.py": REGISTRY + '\nsetattr(ModelRegistry, "models", {})\n'},
     "setattr(ModelRegistry, 'models', {})"),
    ({f"{MODELS}/_plugin.py": "from .registry import ModelRegistry\n\n\nclass Plugin:\n    def load(self):\n"
                              "        ModelRegistry.models = {}\n"}, "in Plugin.load(), when it is called"),
], ids=["setattr-in-registry-py", "attribute-in-a-method"])
def test_runtime_registry_attribute_replaced_is_unknown(tmp_path, files, needle):
    expect(make_tree(tmp_path, files), "unknown", needle)
