"""Issue 20, the metamorphic property: the verdict depends on what the code does, not on how it is
laid out.

Trees with known verdicts (fixtures/minivllm: ``LlamaForCausalLM`` supported,
``ToyV2ForCausalLM`` blocked) are rewritten at random:

- semantics-preserving rewrites (the class behind an alias, the module re-exporting it from
  another module, a star import of it, the module split into a package, unrelated names bound by
  loops, ``with`` and tuple unpacking, the classes under identity decorators written as vLLM's
  own are) must leave the verdict unchanged;
- one semantics-changing rewrite from issue 20's catalog, on top of any preserving layout, must
  change a ``supported`` verdict (to ``blocked`` or ``unknown``), never leave it ``supported``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, audit, make_tree

MODELS = "vllm/model_executor/models"
PKG = "vllm.model_executor.models"
LLAMA = (REPO / "fixtures" / "minivllm" / MODELS / "llama.py").read_text()
REGISTRY = (REPO / "fixtures" / "minivllm" / MODELS / "registry.py").read_text()
SPEC = (REPO / "fixtures" / "minivllm" / "vllm/config/speculative.py").read_text()

PLAIN = "from torch import nn\n\n\nclass LlamaForCausalLM(nn.Module):\n    pass\n"
CAPTURE = """            if idx in self.aux_hidden_state_layers:
                aux_hidden_states.append(hidden_states + residual)
"""

#: statements that bind only names no verdict reads
HARMLESS = [
    "for _i in range(2):\n    pass",
    "with open(__file__) as _fh:\n    pass",
    "def _make():\n    return 1, 2\n\n\n_a, _b = _make()",
    "_unused = 1\ndel _unused",
    "def _cache():\n    global _CACHE\n    _CACHE = {}",
    "print(_w := 3)",
]

#: semantics-changing rewrites of the module that defines the classes: (name, tail appended or
#: (old, new) replaced, files added, or the registry/config replaced)
CATALOG = {
    "star-rebind": {"tail": f"from {PKG}.llama_plain import *", "files": {f"{MODELS}/llama_plain.py": PLAIN}},
    "tuple-unpack": {"tail": "def _pick():\n    return LlamaModel, 1\n\n\nLlamaForCausalLM, _n = _pick()"},
    "for-target": {"tail": "for LlamaForCausalLM in (LlamaModel,):\n    pass"},
    "with-target": {"tail": "with open(__file__) as LlamaForCausalLM:\n    pass"},
    "walrus": {"tail": "print(LlamaForCausalLM := LlamaModel)"},
    "match": {"tail": "match 1:\n    case LlamaForCausalLM:\n        pass"},
    "global": {"tail": "def _swap():\n    global LlamaForCausalLM\n    LlamaForCausalLM = LlamaModel\n\n\n_swap()"},
    "globals": {"tail": "def _key():\n    return 'LlamaForCausalLM'\n\n\nglobals()[_key()] = LlamaModel"},
    "setattr-module": {"tail": "import sys\nsetattr(sys.modules[__name__], 'LlamaForCausalLM', LlamaModel)"},
    "forward-replaced": {"tail": "LlamaModel.forward = LlamaDecoderLayer.forward"},
    "del-member": {"tail": "del LlamaForCausalLM.set_aux_hidden_state_layers"},
    "delattr": {"tail": "delattr(LlamaForCausalLM, 'get_eagle3_aux_hidden_state_layers')"},
    "member-none": {"tail": "LlamaForCausalLM.set_aux_hidden_state_layers = None"},
    "del-class": {"tail": "del LlamaForCausalLM"},
    "module-raise": {"tail": "raise ImportError('not here')"},
    "if-false-capture": {"replace": (CAPTURE, "            if False:\n"
                                     + "".join("    " + ln + "\n" for ln in CAPTURE.splitlines()))},
    "aux-reset": {"replace": ("        if len(aux_hidden_states) > 0:",
                              "        aux_hidden_states = []\n        if len(aux_hidden_states) > 0:")},
    "return-first": {"replace": ("        for idx, layer in enumerate(",
                                 "        return hidden_states\n        for idx, layer in enumerate(")},
    "registry-repoint": {"registry": '_VLLM_MODELS["LlamaForCausalLM"] = ("toy", "ToyV2ForCausalLM")'},
    "registry-computed": {"registry": "_VLLM_MODELS.update(_more())"},
    "allowlist-clear": {"spec": "eagle3_target_supported.clear()"},
    "allowlist-remove": {"spec": 'eagle3_target_supported.remove("llama")'},
    "eagle3-refused": {"spec_head": 'if self.method == "eagle3":\n            raise ValueError("no")'},
    # a class decorator the tree cannot follow, or one that may not give the class back
    "external-decorator": {"replace": ("class LlamaModel(nn.Module):",
                                       "import _ext\n\n\n@_ext.swap\nclass LlamaModel(nn.Module):")},
    "decorator-returns-a-call": {"replace": ("class LlamaModel(nn.Module):",
                                             "def _wrap(cls):\n    return torch.compile(cls)\n\n\n"
                                             "@_wrap\nclass LlamaModel(nn.Module):")},
    # changed by another module (when it is imported) or by a function (when it is called)
    "patched-by-another-module": {"files": {f"{MODELS}/_patch.py": f"from {PKG}.llama import LlamaForCausalLM\n\n"
                                                                    "del LlamaForCausalLM.set_aux_hidden_state_layers\n"}},
    "patched-in-a-function": {"tail": "def _patch():\n    LlamaModel.forward = None"},
    # a registry built or changed at run time
    "registry-built": {"registry": "_VLLM_MODELS = {k: v for k, v in _rows()}"},
    "registry-in-a-function": {"registry": 'def _reg():\n    _VLLM_MODELS["LlamaForCausalLM"] = ("toy", "ToyV2ForCausalLM")'},
    "registry-in-a-loop": {"registry": "for _k in _keys():\n    _VLLM_MODELS.pop(_k)"},
    # a namespace written behind the index's back, text run as code, a class object changed
    "module-object-write": {"tail": "import sys\nsys.modules[__name__].LlamaForCausalLM = None"},
    "module-dict-write": {"tail": "import sys\nsys.modules[__name__].__dict__['LlamaForCausalLM'] = None"},
    "module-vars-pop": {"tail": "import sys\nvars(sys.modules[__name__]).pop('LlamaForCausalLM')"},
    "module-locals-write": {"tail": "locals()['LlamaForCausalLM'] = None"},
    "exec-rebind": {"tail": "exec('LlamaForCausalLM = LlamaModel')"},
    "eval-compile-del": {"tail": "eval(compile('del LlamaForCausalLM', 'x', 'exec'))"},
    "exec-del-member": {"tail": "exec('del LlamaForCausalLM.set_aux_hidden_state_layers')"},
    "star-dynamic-all": {"tail": f"from {PKG}.llama_plain import *",
                         "files": {f"{MODELS}/llama_plain.py": PLAIN + "__all__ = []\n__all__ += ['LlamaForCausalLM']\n"}},
    "class-body-locals": {"replace": ("        self.model.aux_hidden_state_layers = layers\n",
                                      "        self.model.aux_hidden_state_layers = layers\n"
                                      "    locals().pop('set_aux_hidden_state_layers')\n")},
    "member-property": {"replace": ("        self.model.aux_hidden_state_layers = layers\n",
                                    "        self.model.aux_hidden_state_layers = layers\n"
                                    "    set_aux_hidden_state_layers = property(lambda self: None)\n")},
    "for-del-member": {"tail": "for _c in (LlamaForCausalLM,):\n    del _c.set_aux_hidden_state_layers"},
    "bases-assigned": {"tail": "LlamaForCausalLM.__bases__ = (nn.Module,)"},
    "new-returns-other": {"replace": ("    def get_eagle3_aux_hidden_state_layers(self)",
                                      "    def __new__(cls, *a, **k):\n        return LlamaModel(*a, **k)\n\n"
                                      "    def get_eagle3_aux_hidden_state_layers(self)")},
    # the sixth pass: a setter typo on one branch, writes through an alias of self or in a helper,
    # a loop over classes a function computes, code run or the module reached under other spellings
    "setter-branch-typo": {"replace": ("        self.model.aux_hidden_state_layers = layers\n",
                                       "        if len(layers) > 2:\n            self.model.aux_hidden_state_layers = layers\n"
                                       "        else:\n            self.model.aux_hidden_state_layer = layers\n")},
    "self-alias-capture-reset": {"replace": ("        aux_hidden_states = []\n",
                                             "        aux_hidden_states = []\n        s = self\n"
                                             "        s.aux_hidden_state_layers = ()\n")},
    "holder-forward-through-alias": {"replace": ("        self.lm_head = nn.Linear(16, 32, bias=False)\n",
                                                 "        self.lm_head = nn.Linear(16, 32, bias=False)\n"
                                                 "        m = self.model\n        m.forward = None\n")},
    "helper-drops-layers": {"replace": ("        self.aux_hidden_state_layers: tuple[int, ...] = tuple()\n",
                                        "        self.aux_hidden_state_layers: tuple[int, ...] = tuple()\n"
                                        "        self._setup()\n\n    def _setup(self):\n        self.layers = None\n")},
    "loop-over-computed-classes": {"files": {f"{MODELS}/_patch.py": f"from {PKG} import llama\n\n\n"
                                             "def get_classes():\n    return [llama.LlamaForCausalLM]\n\n\n"
                                             "for c in get_classes():\n    c.forward = None\n"}},
    "exec-through-getattr": {"tail": "import builtins\ngetattr(builtins, 'exec')('del LlamaForCausalLM')"},
    "function-type-code": {"tail": "import types\ntypes.FunctionType(compile('del LlamaForCausalLM', 'x', 'exec'), {})()"},
    "import-self-write": {"tail": "__import__(__name__, fromlist=['x']).LlamaForCausalLM = None"},
    "sys-modules-alias": {"tail": "from sys import modules\nmodules[__name__].__dict__['LlamaForCausalLM'] = None"},
}

#: class decorators that give the class back, as vLLM's own are written (a registry instance's
#: method returning an inner function, an optional-argument decorator): followed, no change
IDENTITY = """

class _Reg:
    def register(self, name, *, info=None):
        def wrapper(model_cls):
            return model_cls

        return wrapper


_REG = _Reg()


def _compile(cls=None, *, dims=None):
    def helper(cls):
        return cls

    if cls is not None:
        return helper(cls)
    return helper
"""

LAYOUTS = ("module", "re-export", "star", "package")


def build(root: Path, layout: str, alias: bool, harmless: list[str], change: str | None,
          decorate: bool = False) -> Path:
    """A minivllm tree whose ``llama`` module has ``layout``, the class behind an alias or not,
    the ``harmless`` statements, the catalog ``change`` (None: none) and, with ``decorate``, the
    target and its holder under identity decorators of the tree."""
    text = LLAMA
    if decorate:
        text = text.replace("\n\nclass LlamaDecoderLayer(", IDENTITY + "\n\nclass LlamaDecoderLayer(")
        text = text.replace("\nclass LlamaModel(", "\n@_compile\nclass LlamaModel(")
        text = text.replace("\nclass LlamaForCausalLM(", "\n@_REG.register('llama', info=1)\n@_compile(dims=1)"
                                                        "\nclass LlamaForCausalLM(")
    if alias:
        text = text.replace("class LlamaForCausalLM(", "class _LlamaImpl(") + "\n\nLlamaForCausalLM = _LlamaImpl\n"
    c = CATALOG.get(change, {}) if change else {}
    if "replace" in c:
        assert c["replace"][0] in text
        text = text.replace(*c["replace"])
    tail = "\n\n".join(harmless + ([c["tail"]] if "tail" in c else []))
    text = text + "\n\n" + tail + "\n"
    files: dict[str, str | None] = dict(c.get("files", {}))
    if layout == "module":
        files[f"{MODELS}/llama.py"] = text
    elif layout == "re-export":
        files[f"{MODELS}/llama_impl.py"] = text
        files[f"{MODELS}/llama.py"] = "from .llama_impl import LlamaForCausalLM, LlamaModel  # noqa: F401\n"
    elif layout == "star":
        files[f"{MODELS}/llama_impl.py"] = text
        files[f"{MODELS}/llama.py"] = "from .llama_impl import *  # noqa: F403\n"
    else:  # a package replacing the module
        files[f"{MODELS}/llama.py"] = None
        files[f"{MODELS}/llama/__init__.py"] = "from .impl import *  # noqa: F403\n"
        files[f"{MODELS}/llama/impl.py"] = text.replace("from .", "from ..")
    if "registry" in c:
        files[f"{MODELS}/registry.py"] = REGISTRY.replace(
            "\n\nclass _ModelRegistry", f"\n{c['registry']}\n\n\nclass _ModelRegistry")
    if "spec" in c or "spec_head" in c:
        head = '        eagle3_target_supported = ["llama", "qwen"]\n'
        new = head + f"        {c['spec']}\n" if "spec" in c else f"        {c['spec_head']}\n" + head
        files["vllm/config/speculative.py"] = SPEC.replace(head, new)
    return make_tree(root, files)


def verdict(root: Path, arch: str) -> str:
    return audit(root, arch).verdict.value


layouts = st.sampled_from(LAYOUTS)
harmless = st.lists(st.sampled_from(HARMLESS), max_size=3, unique=True)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts, alias=st.booleans(), extra=harmless, decorate=st.booleans(),
       arch=st.sampled_from([("LlamaForCausalLM", "supported"), ("ToyV2ForCausalLM", "blocked")]))
def test_semantics_preserving_rewrites_keep_the_verdict(layout, alias, extra, decorate, arch):
    with tempfile.TemporaryDirectory() as d:
        root = build(Path(d), layout, alias, extra, None, decorate)
        assert verdict(root, arch[0]) == arch[1], (layout, alias, extra, decorate)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts, alias=st.booleans(), extra=harmless, decorate=st.booleans(),
       change=st.sampled_from(sorted(CATALOG)))
def test_semantics_changing_rewrites_never_stay_supported(layout, alias, extra, decorate, change):
    with tempfile.TemporaryDirectory() as d:
        root = build(Path(d), layout, alias, extra, change, decorate)
        assert verdict(root, "LlamaForCausalLM") in ("blocked", "unknown"), (layout, alias, extra, decorate, change)


def test_every_catalog_change_is_caught_in_the_plain_layout(tmp_path):
    """The catalog, exhaustively, on the unchanged layout (the property tests sample it)."""
    for change in sorted(CATALOG):
        root = build(tmp_path / change, "module", False, [], change)
        assert verdict(root, "LlamaForCausalLM") in ("blocked", "unknown"), change


def test_decorator_patch_and_registry_changes_are_caught_in_every_layout(tmp_path):
    """The catalog entries that reach the class through other names or other modules (an
    alias of the class, a re-export, a star import, a package), exhaustively over the layouts:
    sampling once missed the star layout with an aliased class patched from another module."""
    changes = ["external-decorator", "decorator-returns-a-call", "patched-by-another-module", "patched-in-a-function",
               "registry-built", "registry-in-a-function", "registry-in-a-loop", "loop-over-computed-classes"]
    for change in changes:
        for layout in LAYOUTS:
            for alias in (False, True):
                root = build(tmp_path / f"{change}-{layout}-{alias}", layout, alias, [], change, decorate=alias)
                assert verdict(root, "LlamaForCausalLM") in ("blocked", "unknown"), (change, layout, alias)
