"""EA315 ``platform-spec-decode``: the platform's model runner refuses speculative decoding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from auditor.cache import cacheable
from auditor.index.targets import ClassRef
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions
from rules.base import AuditTarget, Context, Example, Rule
from rules.platform_spec_decode.facts import RUNNER_EXTRACTOR, WORKER_EXTRACTOR

_PLATFORM = '''"""A CPU platform (synthetic)."""


class CpuPlatform:
    @classmethod
    def check_and_update_config(cls, vllm_config):
        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = "vllm.v1.worker.cpu_worker.CPUWorker"
'''

_WORKER = '''"""A CPU worker (synthetic)."""
from vllm.v1.worker.cpu_model_runner import CPUModelRunner


class CPUWorker:
    def init_device(self):
        self.model_runner: CPUModelRunner = CPUModelRunner(self.vllm_config, "cpu")
'''

_RUNNER = '''"""A CPU model runner (synthetic)."""


class CPUModelRunner:
    def __init__(self, vllm_config, device):
        self.speculative_config = vllm_config.speculative_config
        {check}
'''


def _tree(refuses: bool) -> dict[str, str]:
    check = 'assert self.speculative_config is None, "spec decode is not supported."' if refuses else "pass"
    return {"vllm/platforms/cpu.py": _PLATFORM, "vllm/v1/worker/cpu_worker.py": _WORKER,
            "vllm/v1/worker/cpu_model_runner.py": _RUNNER.replace("{check}", check)}


@cacheable
@dataclass
class PlatformSpecDecodeData:
    """EA315 details: the ``platform``, its ``worker`` class and the ``runner`` class that refuses."""

    platform: str
    worker: str
    runner: str


class PlatformSpecDecodeRule(Rule):
    """Speculative decoding on the run's platform.

    What it does: for the run's ``--platform``, reads the worker class its platform module names
    (``worker_cls = "vllm.v1.worker.cpu_worker.CPUWorker"``), the model runner that worker builds
    (``self.model_runner = CPUModelRunner(...)``), and whether that runner's ``__init__`` refuses
    any speculative config (``assert self.speculative_config is None``).
    """

    CODE = "EA315"
    GATE = "platform-spec-decode"
    NAME = "platform-runner-refuses-spec-decode"
    SUMMARY = "the platform's model runner refuses any speculative config (`--platform`)"
    WHY = (
        "Each platform builds its own worker and model runner. vLLM 0.16.0's CPU model runner asserts that no "
        "speculative config is set ('spec decode is not supported', vllm/v1/worker/cpu_model_runner.py), so on "
        "that platform no target can run EAGLE, EAGLE-3 or MTP, whatever its model code. Later CPU runners load "
        "a drafter."
    )
    HOW_TO_FIX = (
        "Run on a platform whose runner supports speculative decoding (the CUDA runner does), or use a release "
        "whose runner for your platform loads a drafter. Not fixable by a model patch."
    )
    FIX_AVAILABLE = False
    METHODS = ("eagle", "eagle3", "mtp")
    DATA = PlatformSpecDecodeData
    VALID = [
        Example(_tree(False), "LlamaForCausalLM", options=RunOptions(platform="cpu"),
                note="a CPU runner that loads a drafter"),
        Example(_tree(True), "LlamaForCausalLM", note="the default platform (cuda): the CPU runner is not used"),
    ]
    INVALID = [
        Example(_tree(True), "LlamaForCausalLM", options=RunOptions(platform="cpu"), expect_severity=Severity.ERROR,
                note="the CPU runner asserts speculative_config is None"),
    ]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        platform = target.options.platform
        module_path = f"vllm/platforms/{platform}.py"
        runner_facts = dict(ctx.facts.found(RUNNER_EXTRACTOR))
        for path, (dotted, _line) in ctx.facts.found(WORKER_EXTRACTOR):
            if path != module_path:
                continue
            module, _, worker = dotted.rpartition(".")
            wpath = ctx.resolver.tree.path_of(module)
            wf = runner_facts.get(wpath) if wpath else None
            if wf is None:
                continue
            for name in wf.runners.get(worker, []):
                ref = ctx.resolver.resolve_dotted(module, name)
                if not isinstance(ref, ClassRef):
                    continue
                rpath = ctx.resolver.tree.path_of(ref.module)
                rf = runner_facts.get(rpath) if rpath else None
                hit = rf.refusals.get(ref.name) if rf else None
                if hit is None:
                    continue
                line, msg = hit
                yield self.finding(
                    Severity.ERROR,
                    f"on {platform}, the worker {worker} ({module_path} worker_cls) builds {ref.name}, whose "
                    f"__init__ refuses any speculative config ({rpath}:{line}"
                    f"{': ' + repr(msg) if msg else ''}): no target runs {target.method} on this platform",
                    rpath, line, platform=platform, worker=dotted, runner=f"{ref.module}.{ref.name}")
                return
