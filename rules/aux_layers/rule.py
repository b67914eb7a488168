"""EA312 ``aux-layers``: the drafter config's ``eagle_aux_hidden_state_layer_ids`` name layers the
target does not have (or the release ignores them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.engines.modelfiles import HolderFacts
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions
from rules.common.layer_ids import (
    EXTRACTOR,
    KEY,
    eagle3_reads,
    layer_ids,
    num_hidden_layers,
)
from rules.base import AuditTarget, Context, Example, Rule

_RUNNER = '''"""The GPU runner (synthetic): the drafter's aux layer ids win over the target's defaults."""


def aux_layers_from_config(hf_config):
    layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
    if layer_ids:
        return tuple(layer_ids)
    return None


def setup_aux_layers(model, hf_config):
    model.set_aux_hidden_state_layers(aux_layers_from_config(hf_config) or model.default_aux_layers())
'''

_OTHER_METHOD = '''"""A proposer of another method (synthetic): reads the ids only to size its buffers."""


class HiddenStatesExtractor:
    def __init__(self, hf_config):
        self.num_states = len(getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None) or ())
'''

_TREE = {"vllm/v1/worker/eagle3_layers.py": _RUNNER}

_RUNNER_WITHOUT_IDS = '''"""The GPU model runner (synthetic), before drafters could choose the aux layers."""


class GPUModelRunner:
    def load_model(self, model) -> None:
        model.set_aux_hidden_state_layers(model.get_eagle3_aux_hidden_state_layers())
'''


def _run(*ids: int) -> RunOptions:
    return RunOptions(draft_config={"architectures": ["LlamaForCausalLM"], KEY: list(ids)},
                      draft_config_path="drafter/config.json")


_HF = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32}


@cacheable
@dataclass
class AuxLayersData:
    """EA312 details: the drafter's ``ids``, the target's ``num_layers``, the ids ``out_of_range``."""

    ids: list[int] = field(default_factory=list)
    num_layers: int | None = None
    out_of_range: list[int] = field(default_factory=list)


class AuxLayersRule(Rule):
    """The drafter's aux layer ids against the target's layers.

    What it does: with ``--draft-config`` carrying ``eagle_aux_hidden_state_layer_ids`` (top level
    or in ``eagle_config``), checks that the release reads them (else they are ignored: a warning),
    and that each id names a layer position the target's inner model captures: ``0 … N-1`` for a
    loop that captures the state entering layer ``idx``, ``0 … N`` for one that captures after each
    layer (``_maybe_add_hidden_state(..., idx + 1, ...)``), ``N`` read from ``--hf-config``
    (``num_hidden_layers``, or ``text_config.num_hidden_layers``); without it the gate is unknown.
    """

    CODE = "EA312"
    GATE = "aux-layers"
    NAME = "aux-layer-ids-out-of-range"
    SUMMARY = "the drafter config's eagle_aux_hidden_state_layer_ids name layers the target does not have"
    WHY = (
        "When the drafter's config.json carries eagle_aux_hidden_state_layer_ids, the runner passes them to "
        "the target's set_aux_hidden_state_layers instead of the target's default layers. An id past the "
        "target's last layer is never captured: the drafter gets fewer hidden states than it was trained on "
        "and fails (or drafts from the wrong features) at the first step. A drafter trained for another "
        "target depth is the usual cause."
    )
    HOW_TO_FIX = (
        "Use the drafter trained for this target, or correct eagle_aux_hidden_state_layer_ids in its "
        "config.json (the target has num_hidden_layers layers). Not a vLLM patch: the fix is in the drafter "
        "checkpoint."
    )
    FIX_AVAILABLE = False
    METHODS = ("eagle3",)
    REQUIRES = "--draft-config with a drafter config that lists eagle_aux_hidden_state_layer_ids"
    CHECKED_WITH = "your drafter (--draft-config)"
    DATA = AuxLayersData
    VALID = [
        Example(_TREE, "LlamaForCausalLM", options=_run(2, 16, 29), hf_config=_HF, note="ids inside 32 layers"),
    ]
    INVALID = [
        Example(_TREE, "LlamaForCausalLM", options=_run(2, 40, 77), hf_config=_HF, expect_severity=Severity.ERROR,
                note="ids 40 and 77 past a 32-layer target"),
        Example(_TREE, "LlamaForCausalLM", options=_run(2, 16, 29), expect_severity=Severity.UNKNOWN,
                note="no --hf-config: the layer count is unknown"),
        Example({"vllm/v1/worker/gpu_model_runner.py": _RUNNER_WITHOUT_IDS}, "LlamaForCausalLM",
                options=_run(2, 16, 29), hf_config=_HF, expect_severity=Severity.WARNING,
                note="a release that never reads the ids"),
        Example({"vllm/v1/worker/gpu_model_runner.py": _RUNNER_WITHOUT_IDS,
                 "vllm/v1/spec_decode/extract_hidden_states.py": _OTHER_METHOD}, "LlamaForCausalLM",
                options=_run(2, 16, 29), hf_config=_HF, expect_severity=Severity.WARNING,
                note="only another method's proposer reads the ids: EAGLE-3 ignores them"),
    ]

    def applies(self, target: AuditTarget) -> bool:
        return (target.method in self.METHODS and target.options.draft_config is not None
                and layer_ids(target.options.draft_config) is not None)

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        ids = layer_ids(target.options.draft_config or {}) or []
        where = target.options.draft_config_path or "--draft-config"
        reads = eagle3_reads(ctx)
        if not reads:
            if ctx.facts.unanalysed(EXTRACTOR):
                path, why = ctx.facts.unanalysed(EXTRACTOR)[0]
                yield self.finding(Severity.UNKNOWN, f"{path} may read {KEY} but is missing from the analysis ({why})",
                                   path, None, ids=ids)
                return
            others = ctx.facts.found(EXTRACTOR)
            elsewhere = (f" (only {others[0][1].function} at {others[0][0]}:{others[0][1].line} reads it, and not "
                         "for set_aux_hidden_state_layers)") if others else ""
            yield self.finding(Severity.WARNING, f"this release never reads {KEY} on the EAGLE-3 path{elsewhere}: "
                               f"the drafter's ids {ids} ({where}) are ignored and the target's default aux layers "
                               "are used", target.facts.path, target.facts.line, ids=ids)
            return
        rpath, read = reads[0]
        n = num_hidden_layers(target.hf_config)
        if n is None:
            yield self.finding(Severity.UNKNOWN, f"the target's layer count is unknown: pass --hf-config with the "
                               f"checkpoint's config.json (num_hidden_layers) to check the drafter's ids {ids}",
                               rpath, read.line, ids=ids)
            return
        count, label = n
        after = False
        if target.facts.ref is not None:
            h, fwd = ctx.get(HolderFacts, target.facts.ref)
            after = bool(fwd and any(lp.captures and lp.uses_mixin_helper for lp in fwd.loops))
        top = count if after else count - 1
        bad = [i for i in ids if i < 0 or i > top]
        if not bad:
            return
        how = ("positions 0..N, the state after each layer" if after else "layers 0..N-1, the state entering each")
        yield self.finding(
            Severity.ERROR,
            f"the drafter config {where} asks for aux hidden states of layers {bad}, but the target has "
            f"{count} layers ({label} of --hf-config; its inner model captures {how}): {read.function} "
            f"({rpath}:{read.line}) reads them and {read.setter_function} ({rpath}:{read.setter_line}) passes them "
            "to set_aux_hidden_state_layers; those states are never captured",
            rpath, read.line, ids=ids, num_layers=count, out_of_range=bad)
