"""Gate ``platform-block-size`` (EA318) on the real vLLM 0.32.0 release, the one the runtime tier
runs: on the CPU build the engine refused DeepseekV3ForCausalLM with EAGLE-3 ('No common block
size for 16 (CPU_MLA: [16]; CPU_ATTN: [MultipleOf(32)])', vllm/v1/worker/utils.py), on a CPU
without AMX tiles. The scan reads the forcing, the backends and the refusal from the tree, and
leaves the AMX query to the machine."""

from __future__ import annotations

import pytest

from auditor.orchestration.fix import overlay_auditor
from auditor.orchestration.scan import Auditor
from tests.real import release_auditor

from tests.test_fidelity import _one  # noqa: E402  (the one-target audit helper)


def _cpu(version: str) -> Auditor:
    base = release_auditor(version)
    return base if base.platform == "cpu" else Auditor(base.tree, platform="cpu")


def _gate(result):
    return [f for f in result.findings if f.gate == "platform-block-size"]


def test_mla_target_on_cpu_depends_on_amx_tiles_0_32_0():
    a = _cpu("0.32.0")
    r = _one(a, "DeepseekV3ForCausalLM")
    (f,) = _gate(r)
    assert r.verdict.value == "unknown" and f.severity.value == "unknown" and f.rule == "EA318"
    # located at the worker's refusal, where verify attributes the engine's ValueError
    assert f.path == "vllm/v1/worker/utils.py"
    src = a.tree.read(f.path).decode().splitlines()
    assert src[f.line - 1].strip().startswith("raise ValueError(")
    assert "No common block size" in "\n".join(src[f.line - 1:f.line + 2])
    # what the tree cannot decide is named, each at its line of the platform module
    cpu = a.tree.read("vllm/platforms/cpu.py").decode().splitlines()
    assert "torch.cpu._is_amx_tile_supported()" in f.message and "CPUAttentionBackend" in f.message
    forced = int(f.message.split("vllm/platforms/cpu.py:")[1].split(";")[0])
    assert cpu[forced - 1].strip() == "cache_config.block_size = 16"
    assert f.data.size == 16 and f.data.backend.endswith("cpu_attn.CPUAttentionBackend")


@pytest.mark.parametrize("arch,platform", [
    ("DeepseekV3ForCausalLM", "cuda"),   # the CUDA platform module forces no MLA block size
    ("LlamaForCausalLM", "cpu"),         # no MLA: the CPU backend's own block size
    ("DeepseekV4ForCausalLM", "cpu"),    # forced to 256, a multiple of the backend's 32
])
def test_no_conflict_no_finding_0_32_0(arch, platform):
    a = _cpu("0.32.0") if platform == "cpu" else release_auditor("0.32.0")
    assert a.platform == platform
    assert _gate(_one(a, arch)) == []


def test_a_cpu_tree_that_always_forces_the_size_blocks_0_32_0():
    """The same tree with the AMX query replaced by False: the forcing holds for every MLA target,
    so the gate blocks (decided), and a target without MLA stays clear."""
    base = _cpu("0.32.0")
    text = base.tree.read("vllm/platforms/cpu.py").decode()
    assert text.count("torch.cpu._is_amx_tile_supported()") >= 1
    a = overlay_auditor(base, {"vllm/platforms/cpu.py": text.replace("torch.cpu._is_amx_tile_supported()", "False")})
    r = _one(a, "DeepseekV3ForCausalLM")
    (f,) = _gate(r)
    assert r.verdict.value == "blocked" and "platform-block-size" in r.blocking and f.data.undecided == []
    assert _gate(_one(a, "LlamaForCausalLM")) == []
