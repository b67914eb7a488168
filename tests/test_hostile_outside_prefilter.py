"""The text test that spares summarising a module before the tree-wide searches
(``Resolver.may_change_module``, ``Resolver._may_change``) must never drop a module whose change
the summary would report. Each case writes the change in another module of a synthetic tree, in a
form the first version of the test did not read (an annotated attribute assignment; a module's
dictionary reached through ``vars``/``sys.modules``), and the scan must not say ``supported``.
A module that only reads ``itertools`` keeps the verdict (the control)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, make_tree
from tests.test_hostile_reach import result_of, scan_json

MODELS = "vllm/model_executor/models"
TOY = (REPO / "fixtures" / "minivllm" / MODELS / "toy.py").read_text()


def _never_supported(tmp_path, patch: str) -> None:
    """Scan LlamaForCausalLM of minivllm with ``patch`` appended to ``toy.py``: exit 1, and a
    verdict other than ``supported``."""
    root = make_tree(tmp_path, {f"{MODELS}/toy.py": TOY + "\n" + patch})
    code, doc, _ = scan_json(root)
    r = result_of(doc)
    assert code == 1 and r["verdict"] != "supported", r


@pytest.mark.parametrize("patch", [
    "import itertools\nitertools.islice: object = lambda *a: iter(())\n",
    "import itertools as _it\n_it.islice : object = lambda *a: iter(())\n",
    "import itertools\nvars(itertools)['islice'] = lambda *a: iter(())\n",
    "import itertools, sys\nsys.modules['itertools'].islice = lambda *a: iter(())\n",
])
def test_islice_changed_from_another_module_in_other_forms_is_never_supported(tmp_path, patch):
    _never_supported(tmp_path, patch)


@pytest.mark.parametrize("patch", [
    "from vllm.model_executor.models.llama import LlamaForCausalLM\n\n\ndef _f(self, *a, **k):\n    return None\n\n\n"
    "LlamaForCausalLM.forward: object = _f\n",
    "from vllm.model_executor.models import llama\n\n\ndef _f(self, *a, **k):\n    return None\n\n\n"
    "llama.LlamaForCausalLM.set_aux_hidden_state_layers : object = _f\n",
])
def test_a_member_replaced_by_an_annotated_assignment_elsewhere_is_never_supported(tmp_path, patch):
    _never_supported(tmp_path, patch)


def test_a_module_that_only_reads_itertools_keeps_the_verdict(tmp_path):
    root = make_tree(tmp_path, {f"{MODELS}/toy.py": TOY + "\nimport itertools\nCHUNKS = list(itertools.islice(range(9), 3))\n"})
    code, doc, _ = scan_json(root)
    r = result_of(doc)
    assert code == 0 and r["verdict"] == "supported", r


def test_a_builtin_changed_through_sys_modules_elsewhere_is_never_supported(tmp_path):
    patch = "import sys\nsys.modules['builtins'].enumerate = lambda it, start=0: zip(range(100, 200), it)\n"
    _never_supported(tmp_path, patch)


@pytest.mark.parametrize("patch", [
    "import itertools\n(itertools.islice) = lambda *a: iter(())\n",
    "import itertools\nitertools \\\n    .islice = lambda *a: iter(())\n",
    "import itertools\nsetattr(\n    itertools, 'islice', lambda *a: iter(()))\n",
    "import itertools\ndel(itertools.islice)\n",
])
def test_islice_changed_in_spread_out_forms_is_never_supported(tmp_path, patch):
    _never_supported(tmp_path, patch)


@pytest.mark.parametrize("patch", [
    "from vllm.model_executor.models import llama\n\n\ndef _f(self, *a, **k):\n    return None\n\n\n"
    "(llama.LlamaForCausalLM.forward) = _f\n",
    "from vllm.model_executor.models import llama\n\n\ndef _f(self, *a, **k):\n    return None\n\n\n"
    "llama.LlamaForCausalLM \\\n    .forward = _f\n",
])
def test_a_member_replaced_in_spread_out_forms_elsewhere_is_never_supported(tmp_path, patch):
    _never_supported(tmp_path, patch)
