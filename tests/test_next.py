"""The static cases of ``../shared/acceptance/next.toml`` that hold: every one, on the real release
archives (the embed-sharing cases of vLLM 0.32.0, the CPU platform case of 0.16.0)."""

from __future__ import annotations

import pytest

from tests.real import case_id, check_case, next_cases

CASES = next_cases()


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_next_case(case):
    check_case(case)
