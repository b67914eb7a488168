"""How tests/conftest.py puts a test in its tier, on small functions written here (their source is
assembled at run time, never folded into a constant, so that this file itself names nothing of the
full tier and its tests are fast)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import _code_uses_full, _value_names_full



def _names(src: str) -> str:
    """``src`` with ``FLAG`` and ``HELPER`` spelled out (a release option, a tests/real.py helper)."""
    return src.replace("FLAG", "-".join(("-", "vllm", "version"))).replace("HELPER", "release_auditor")


def _function(src: str):
    """The function ``t`` of ``src``, compiled as if written in this folder."""
    ns: dict = {}
    exec(compile(_names(src), str(Path(__file__)), "exec"), ns)
    return ns["t"]


@pytest.mark.parametrize("src, full", [
    ("def t():\n    return HELPER('x')\n", True),  # a helper of tests/real.py
    ("def t():\n    return run(['scan', 'FLAG', 'x'])\n", True),  # a release on the command line
    ("ARGS = ('scan', 'FLAG', 'x')\ndef t():\n    return run(ARGS)\n", True),  # through a module constant
    ("def h():\n    return HELPER('x')\ndef t():\n    return h()\n", True),  # through a helper of the module
    ("def t():\n    return run(['scan', 'fixtures/minivllm'])\n", False),  # a synthetic tree
])
def test_a_test_is_full_by_what_it_uses(src, full):
    f = _function(src)
    assert _code_uses_full(f.__code__, f.__globals__, set()) is full


def test_values_that_name_a_release():
    assert _value_names_full(("scan", ("x", _names("FLAG"))))
    assert _value_names_full({"archive": "-".join(("vllm", "0.16.0.tar.gz"))})
    assert not _value_names_full(("scan", "fixtures/minivllm", 3))


def test_a_fast_test_has_no_archive_and_no_index_in_reach(request):
    import os

    assert request.node.get_closest_marker("fast") is not None
    assert request.node.get_closest_marker("full") is None
    assert not (Path(os.environ["EAGLE_AUDIT_CACHE_DIR"]) / "archives").exists()
    assert os.environ["PIP_INDEX_URL"].startswith("http://127.0.0.1:9/")
