"""A third breaker pass on vLLM's run-time ``ModelRegistry``: constructs that gave a false
``supported`` (exit 0) while ``ModelRegistry.resolve_model_cls(["LlamaForCausalLM"])`` fails.

The registry class's members that resolve an architecture or hold the table (``resolve_model_cls``,
``__init__`` and every method they call on ``self``, properties, attribute hooks, its metaclass and
decorators) must have a shape the auditor follows; otherwise every row is ``unknown``, naming the
construct and its ``file:line``. Each test builds its own tree from fixtures/minivllm and scans it
through the command line; the scan writes nothing into the tree (:func:`tests.test_hostile_bindings.scan`).
"""

from __future__ import annotations

import pytest

from tests.conftest import make_tree
from tests.test_hostile_bindings import scan
from tests.test_hostile_engines2 import expect_unknown_at
from tests.test_hostile_engines3 import REG_LINE, REGISTRY, REGISTRY_PATH, RESOLVE, _registry

LOOKUP = "            if arch in self.models:\n"
LOOP = "        for arch in architectures:\n"
INIT = "        self.models = dict(models)\n"
CLASS = "class _ModelRegistry:\n"
IMPORT = "import importlib\n"
DATACLASS = ("from dataclasses import dataclass, field\n", "@dataclass\nclass _ModelRegistry:\n"
             "    models: dict = field(default_factory=dict)\n\n")


def _dataclass(imports: str = DATACLASS[0], head: str = DATACLASS[1]) -> str:
    """The fixture's registry with vLLM's shape: a dataclass whose first field is ``models``."""
    old_init = "    def __init__(self, models: dict[str, tuple[str, str]]) -> None:\n" + INIT + "\n"
    text = _swap(IMPORT, IMPORT + imports, _swap(CLASS + old_init, head))
    # as vLLM builds it: handing the table itself to a dataclass is not followed (it may change it)
    return _swap(REG_LINE, "ModelRegistry = _ModelRegistry({k: v for k, v in _VLLM_MODELS.items()})", text)


def _swap(old: str, new: str, text: str = REGISTRY) -> str:
    assert old in text
    return text.replace(old, new)


CASES = [
    # 1. a filter in a helper method that resolve_model_cls calls
    (_swap(LOOKUP, "            if self._usable(arch):\n",
           _registry(in_class="    def _usable(self, arch):\n"
                              "        return arch in self.models and arch != 'LlamaForCausalLM'\n\n")),
     "arch != 'LlamaForCausalLM'", "helper-filter"),
    # 2. a filter through a module constant
    (_swap(LOOKUP, "            if arch in self.models and arch not in _BLOCKED:\n",
           _swap(CLASS, "_BLOCKED = {'LlamaForCausalLM'}\n\n\n" + CLASS)),
     "arch not in _BLOCKED", "module-constant-filter"),
    # 3. the name rewritten in the loop
    (_swap(LOOP, LOOP + "            arch = arch.replace('Llama', 'Lama')\n"),
     "arch = arch.replace('Llama', 'Lama')", "name-rewritten"),
    (_swap(LOOP, LOOP + "            key = arch.replace('Llama', 'Lama')\n",
           _swap(LOOKUP, "            if key in self.models:\n")),
     "key = arch.replace('Llama', 'Lama')", "name-rewritten-into-another"),
    # 4. __init__ calls a method that prunes
    (_swap(INIT, INIT + "        self._prune()\n",
           _registry(in_class="    def _prune(self):\n        self.models.pop('LlamaForCausalLM', None)\n\n")),
     "self.models.pop('LlamaForCausalLM', None)", "init-calls-pruner"),
    # 5. __init__ writes without `self.models =`
    (_swap(INIT, INIT + "        setattr(self, 'models', {})\n"), "setattr(self, 'models', {})", "init-setattr"),
    (_swap(INIT, INIT + "        self.__dict__['models'] = {}\n"), "self.__dict__['models'] = {}", "init-dict"),
    # 6. models as a property
    (_registry(in_class="    @property\n    def models(self):\n        return {}\n\n"
                        "    @models.setter\n    def models(self, value):\n        self._kept = value\n\n"),
     "def models(self)", "models-property"),
    # 7. __getattribute__
    (_registry(in_class="    def __getattribute__(self, name):\n"
                        "        return {} if name == 'models' else object.__getattribute__(self, name)\n\n"),
     "def __getattribute__(self, name)", "getattribute"),
    # 8. a metaclass whose __call__ builds the object with {}
    (_swap(CLASS, "class _Meta(type):\n    def __call__(cls, models):\n        return super().__call__({})\n\n\n"
                  "class _ModelRegistry(metaclass=_Meta):\n"),
     "class _ModelRegistry(metaclass=_Meta)", "metaclass"),
    # 9. a class decorator that returns something else
    (_swap(CLASS, "def _empty(c):\n    return lambda models: c({})\n\n\n@_empty\n" + CLASS), "@_empty", "decorator"),
    (_swap(LOOP, "        for arch in [a.lower() for a in architectures]:\n"), "a.lower()", "names-rewritten-in-the-loop"),
    (_swap(INIT, INIT + "        vars(self)['models'] = {}\n"), "vars(self)['models'] = {}", "init-vars"),
    (_swap(INIT, INIT + "        object.__setattr__(self, 'models', {})\n"), "object.__setattr__(self, 'models', {})",
     "init-object-setattr"),
    # a route for a configuration is read when its guard does not read the configuration
    (_swap(LOOP, "        if self.models:\n            k = self._route(architectures[0])\n"
                 "            if k is not None:\n                return (k, k)\n" + LOOP,
           _registry(in_class="    def _route(self, arch):\n        if arch == 'LlamaForCausalLM':\n"
                              "            raise ValueError('no')\n        return None\n\n")),
     "arch == 'LlamaForCausalLM'", "route-not-for-a-configuration"),
    # a filter inside a builtin's generator, or in a module function handed the name or the object
    (_swap(LOOP, "        if any(a == 'LlamaForCausalLM' for a in architectures):\n            raise ValueError('no')\n"
                 + LOOP), "a == 'LlamaForCausalLM'", "filter-in-any"),
    (_swap(LOOKUP, "            if arch in self.models and _usable(arch):\n",
           _registry(after="\n\n\ndef _usable(arch):\n    return arch != 'LlamaForCausalLM'\n")),
     "_usable(arch)", "module-function-filter"),
    (_swap(LOOKUP, "            if _usable(self, arch):\n",
           _swap(CLASS, "def _usable(reg, arch):\n    return arch in reg.models and arch != 'LlamaForCausalLM'\n\n\n"
                 + CLASS)), "_usable(self, arch)", "object-handed-on"),
    # 9'. a decorator named dataclass that is not dataclasses.dataclass, or one that builds no __init__
    (_dataclass(imports="from dataclasses import field\n\n\ndef dataclass(c):\n    return lambda models: c({})\n"),
     "@dataclass", "dataclass-shadowed"),
    (_dataclass(head=DATACLASS[1].replace("@dataclass", "@dataclass(init=False)")), "@dataclass(init=False)",
     "dataclass-without-init"),
    # a method the class does not define with def, or one a decorator may replace
    (_swap(LOOKUP, "            if self._usable(arch):\n",
           _registry(in_class="    _usable = staticmethod(lambda arch: arch != 'LlamaForCausalLM')\n\n")),
     "self._usable(arch)", "member-not-a-def"),
    (_swap(LOOKUP, "            if self._usable(arch):\n",
           _swap(CLASS, "def _refuse(f):\n    return lambda self, arch: False\n\n\n" + CLASS,
                 _registry(in_class="    @_refuse\n    def _usable(self, arch):\n        return arch in self.models\n\n"))),
     "@_refuse", "method-decorated"),
    # 10. global rebinding in a function called at import
    (_registry(after="\n\n\ndef _reset():\n    global ModelRegistry\n    ModelRegistry = _ModelRegistry({})\n\n\n"
                     "_reset()\n"), "global ModelRegistry", "global-rebinding"),
]


@pytest.mark.parametrize("text, construct", [c[:2] for c in CASES], ids=[c[2] for c in CASES])
def test_vllm_model_registry_of_a_shape_the_auditor_cannot_follow_is_unknown(tmp_path, text, construct):
    expect_unknown_at(make_tree(tmp_path, {REGISTRY_PATH: text}), REGISTRY_PATH, text, construct)


HARMLESS = [
    # a helper that only looks the name up in the table
    (_swap(LOOKUP, "            if self._usable(arch):\n",
           _registry(in_class="    def _usable(self, arch):\n        return arch in self.models\n\n")),
     "helper-lookup"),
    # a helper that returns the name as it is when the table holds it (vLLM's _normalize_arch)
    (_swap(LOOP, LOOP + "            arch2 = self._normal(arch)\n",
           _swap(LOOKUP, "            if arch2 in self.models:\n",
                 _registry(in_class="    def _normal(self, arch):\n        if arch in self.models:\n"
                                    "            return arch\n        return arch.replace('X', 'Y')\n\n"))),
     "helper-normalises-only-unknown-names"),
    # __init__ calls a method that only reads the table
    (_swap(INIT, INIT + "        self._check()\n",
           _registry(in_class="    def _check(self):\n        assert isinstance(self.models, dict)\n\n")),
     "init-calls-reader"),
    # a dataclass, a docstring, a plain class attribute and a staticmethod
    (_registry(in_class='    """The registry."""\n\n    kind = "models"\n\n    @staticmethod\n'
                        "    def _helper(x):\n        return x\n\n"), "plain-members"),
    # a function that rebinds a local named like the object
    (_registry(after="\n\n\ndef _show():\n    ModelRegistry = 1\n    return ModelRegistry\n"), "local-name"),
    # a route for a configuration that tests names (vLLM's transformers backend), then the table's
    (_swap(RESOLVE, "    def resolve_model_cls(self, architectures: list[str], impl: str = 'auto'):\n",
           _swap(LOOP, "        if impl == 'other':\n            k = self._route(architectures[0])\n"
                       "            if k is not None:\n                return (k, k)\n" + LOOP,
                 _registry(in_class="    def _route(self, arch):\n        if arch in _OTHER:\n"
                                    "            return arch\n        return None\n\n",
                           after="\n_OTHER = {'ToyV2ForCausalLM': 1}\n"))),
     "route-for-a-configuration"),
    # vLLM's shape: a dataclass whose first field is models
    (_dataclass(), "dataclass"),
    (_dataclass(imports="import dataclasses\nfrom dataclasses import field\n",
                head=DATACLASS[1].replace("@dataclass", "@dataclasses.dataclass(frozen=True)")), "dataclass-frozen"),
    # the failure path tests names against constants (vLLM's _raise_for_unsupported)
    (_swap("        raise ValueError(f\"none of {architectures} is supported\")\n",
           "        return self._fail(architectures)\n",
           _registry(in_class="    def _fail(self, architectures):\n        for a in architectures:\n"
                              "            if a in _OLD:\n                raise ValueError('removed')\n"
                              "        raise ValueError('unsupported')\n\n", after="\n_OLD = {'LlamaForCausalLM': '0.1'}\n")),
     "failure-path-tests"),
]


@pytest.mark.parametrize("text", [h[0] for h in HARMLESS], ids=[h[1] for h in HARMLESS])
def test_vllm_model_registry_of_a_followed_shape_keeps_the_verdict(tmp_path, text):
    code, res, _ = scan(make_tree(tmp_path, {REGISTRY_PATH: text}))
    assert (code, res["verdict"]) == (0, "supported"), res


def test_the_cases_are_valid_python():
    import ast
    for text, *_ in CASES + HARMLESS:
        ast.parse(text)
    assert REG_LINE in REGISTRY and RESOLVE in REGISTRY
