"""EA309 ``draft-pp``: with ``--pipeline-parallel-size`` > 1, a draft that inherits the target's
pipeline size must implement ``SupportsPP``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from auditor.cache import cacheable
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions
from rules.base import AuditTarget, Context, Example, Rule
from rules.draft_pp.facts import (
    PARALLEL_EXTRACTOR,
    REFUSAL_EXTRACTOR,
    draft_parallel,
    implements_pp,
    pp_refusal,
)
from rules.drafts import draft_model
from rules.common.examples import EXAMPLE_DRAFT, EXAMPLE_SPEC

_BUILD = '''

def create_draft_parallel_config(target_parallel_config):
    return ParallelConfig(
        pipeline_parallel_size={pp},
        tensor_parallel_size=1,
    )


def verify_draft(spec_config):
    spec_config.draft_model_config.verify_with_parallel_config(spec_config.draft_parallel_config)
'''

_MODEL_CONFIG = '''"""The model config (synthetic): its pipeline-parallel refusal."""


class ModelConfig:
    def verify_with_parallel_config(self, parallel_config) -> None:
        pipeline_parallel_size = parallel_config.pipeline_parallel_size
        if pipeline_parallel_size > 1 and not self.registry.is_pp_supported_model(self.architectures, self):
            raise NotImplementedError(
                "Pipeline parallelism is not supported for this model. "
                "Supported models implement the `SupportsPP` interface."
            )
'''

_TOY_MTP_PP = '''
import torch.nn as nn
from vllm.model_executor.models.interfaces import SupportsPP


class ToyMTP(nn.Module, SupportsPP):
    """The synthetic MTP draft of ToyV3, split into pipeline stages."""

    def make_empty_intermediate_tensors(self, batch_size, dtype, device):
        return {}

    def forward(self, input_ids, positions, hidden_states, intermediate_tensors=None):
        return hidden_states
'''


def _tree(pp: str, draft: str = EXAMPLE_DRAFT) -> dict[str, str]:
    return {"vllm/config/speculative.py": EXAMPLE_SPEC + _BUILD.format(pp=pp),
            "vllm/config/model.py": _MODEL_CONFIG,
            "vllm/model_executor/models/toy_mtp.py": draft}


_ROWS = [("ToyMTPModel", "toy_mtp", "ToyMTP", "_SPECULATIVE_DECODING_MODELS")]
_PP2 = RunOptions(method="mtp", pipeline_parallel_size=2)


@cacheable
@dataclass
class DraftPPData:
    """EA309 details: the ``draft_architecture`` and ``draft_class``, and ``draft_parallel``
    (``path:line`` of the draft's ``ParallelConfig``)."""

    draft_architecture: str | None = None
    draft_class: str | None = None
    draft_parallel: str | None = None


class DraftPPRule(Rule):
    """A draft model split into the target's pipeline stages.

    What it does: with ``--pipeline-parallel-size`` > 1, names the draft the run builds (the MTP
    draft the tree's rewrite yields, or an EAGLE drafter from ``--draft-config``), finds how the
    speculative config builds the draft's parallel config (``ParallelConfig(pipeline_parallel_size=
    ...)``: inherited from the target, or 1) and the model config's refusal of a model without
    pipeline-parallel support, and checks the draft class against the tree's ``SupportsPP``
    protocol as the registry does (nominally, or its members at class level).
    """

    CODE = "EA309"
    GATE = "draft-pp"
    NAME = "draft-without-pipeline-parallel"
    SUMMARY = "the draft inherits the target's pipeline-parallel size but does not implement SupportsPP"
    WHY = (
        "Up to vLLM 0.27 the speculative config built the draft's ParallelConfig with the target's "
        "pipeline_parallel_size, and verified the draft model config against it: "
        "ModelConfig.verify_with_parallel_config raises 'Pipeline parallelism is not supported for this "
        "model' for a draft class without SupportsPP (DeepSeekMTP for DeepSeek-V3's MTP draft). "
        "0.33 builds the draft with pipeline_parallel_size=1."
    )
    HOW_TO_FIX = (
        "Run the target without pipeline parallelism (tensor or expert parallelism instead), or use a "
        "release that builds the draft with pipeline_parallel_size=1 (eagle-audit matrix "
        "--pipeline-parallel-size 2 finds it). Not fixable by a local patch: SupportsPP needs the draft "
        "split into stages (intermediate tensors, per-stage layers), which the tree does not show how "
        "to do for a draft."
    )
    FIX_AVAILABLE = False
    METHODS = ("mtp", "eagle", "eagle3")
    REQUIRES = "--pipeline-parallel-size 2 or more"
    CHECKED_WITH = "pipeline parallelism (-pp N)"
    DATA = DraftPPData
    VALID = [
        Example(_tree("1"), "ToyV3ForCausalLM", method="mtp", rows=_ROWS, options=_PP2,
                note="the draft is built with pipeline_parallel_size=1"),
        Example(_tree("target_parallel_config.pipeline_parallel_size", _TOY_MTP_PP), "ToyV3ForCausalLM",
                method="mtp", rows=_ROWS, options=_PP2, note="inherited, and the draft implements SupportsPP"),
    ]
    INVALID = [
        Example(_tree("target_parallel_config.pipeline_parallel_size"), "ToyV3ForCausalLM", method="mtp",
                rows=_ROWS, options=_PP2, expect_severity=Severity.ERROR,
                note="inherited, and ToyMTP lacks SupportsPP"),
    ]

    def applies(self, target: AuditTarget) -> bool:
        return target.method in self.METHODS and target.options.pipeline_parallel

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        dm = draft_model(ctx, target)
        if dm is None or dm.unknown or dm.ref is None:
            return  # no draft named (EAGLE without --draft-config), or mtp-draft/draft-registry says why
        pp = target.options.pipeline_parallel_size
        builds = draft_parallel(ctx)
        if not builds:
            broken = ctx.facts.unanalysed(PARALLEL_EXTRACTOR)
            why = f"{broken[0][0]} is missing from the analysis ({broken[0][1]})" if broken else \
                "the speculative config builds no ParallelConfig(pipeline_parallel_size=...) the tool recognises"
            yield self.finding(Severity.UNKNOWN, f"cannot tell the draft's pipeline-parallel size: {why}",
                               broken[0][0] if broken else dm.path, None)
            return
        inherited = [(p, f) for p, f in builds if f.inherits]
        if not inherited:
            return  # the draft runs unsplit (pipeline_parallel_size=1)
        bpath, build = inherited[0]
        if build.verify_line is None:
            return  # the draft model config is never checked against its parallel config
        refusal = pp_refusal(ctx)
        if refusal is None:
            broken = ctx.facts.unanalysed(REFUSAL_EXTRACTOR)
            if broken:
                yield self.finding(Severity.UNKNOWN, f"{broken[0][0]} may hold the pipeline-parallel refusal but is "
                                   f"missing from the analysis ({broken[0][1]})", broken[0][0], None)
            return
        ok, why = implements_pp(ctx, dm.ref)
        loc = ctx.resolver.location(dm.ref)
        if ok is None:
            yield self.finding(Severity.UNKNOWN, f"cannot tell whether the draft {dm.architecture} supports pipeline "
                               f"parallelism: {why}", refusal[0], refusal[1].line)
            return
        if ok:
            return
        rpath, rf = refusal
        yield self.finding(
            Severity.ERROR,
            f"with --pipeline-parallel-size {pp}, the draft's parallel config inherits the target's pipeline size "
            f"({bpath}:{build.line}, pipeline_parallel_size={build.value}) and {rf.function} refuses a model "
            f"without SupportsPP: the draft {dm.architecture} → {dm.ref.dotted}"
            f"{f' ({loc[0]}:{loc[1]})' if loc else ''}: {why}",
            rpath, rf.line, draft_architecture=dm.architecture, draft_class=dm.ref.dotted,
            draft_parallel=f"{bpath}:{build.line}")
