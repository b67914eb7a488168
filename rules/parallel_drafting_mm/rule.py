"""EA313 ``parallel-drafting-mm``: the proposer refuses a multimodal target when parallel drafting
is on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from auditor.cache import cacheable
from auditor.engines.modelfiles import is_multimodal
from auditor.index.providers import ModuleAst
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions
from rules.base import AuditTarget, Context, Example, Rule
from rules.parallel_drafting_mm.facts import EXTRACTOR, guard_fires

_PROPOSER = '''"""A speculative proposer (synthetic)."""


class SpecDecodeBaseProposer:
    def __init__(self, vllm_config, pass_hidden_states_to_model):
        self.speculative_config = vllm_config.speculative_config
        self.num_speculative_tokens = self.speculative_config.num_speculative_tokens
        self.pass_hidden_states_to_model = pass_hidden_states_to_model
        self.parallel_drafting: bool = self.speculative_config.parallel_drafting
        self.extra_slots_per_request = 1 if not self.parallel_drafting else self.num_speculative_tokens
        self.net_num_new_slots_per_request = self.extra_slots_per_request - (
            1 if self.pass_hidden_states_to_model else 0
        )
        self.needs_extra_input_slots = self.net_num_new_slots_per_request > 0
        self.supports_mm_inputs = vllm_config.model_config.is_multimodal_model
        if self.needs_extra_input_slots:
            self._{kind}_if_multimodal()

    def _{kind}_if_multimodal(self):
        if self.supports_mm_inputs:
            {action}
'''

_RAISE = 'raise NotImplementedError("Speculative Decoding with parallel drafting does not support multimodal models yet")'
_WARN = 'print("parallel drafting does not fully support multimodal models yet")'


def _tree(raises: bool) -> dict[str, str]:
    return {"vllm/v1/spec_decode/parallel_drafting.py":
            _PROPOSER.replace("{kind}", "raise" if raises else "warn").replace("{action}", _RAISE if raises else _WARN)}


def _pd(k: int | None) -> RunOptions:
    return RunOptions(parallel_drafting=True, num_speculative_tokens=k)


_VL = "ToyVLForConditionalGeneration"


@cacheable
@dataclass
class ParallelDraftingMMData:
    """EA313 details: the ``guard`` method the proposer calls and the ``caller``."""

    guard: str | None = None
    caller: str | None = None


#: How the message words a verdict decided for every number of speculative tokens that drafts in
#: parallel (``--num-speculative-tokens`` not given).
_EVERY_K = (" and any number of speculative tokens above one (--num-speculative-tokens not given; "
            "with one, nothing is drafted in parallel)")

#: The numbers of speculative tokens above one for which the guard's condition is evaluated when
#: the run does not give one (the condition is a comparison of the extra slots with a constant).
_PARALLEL_KS = (2, 3, 4, 8, 16)


def _fires_for_every_parallel_k(ctx, path: str, g, method: str) -> bool | None:
    """Whether the guard fires for every number of speculative tokens above one: True when it
    does for each of :data:`_PARALLEL_KS`, False when it does for none, else None. Parallel
    drafting drafts its tokens in one pass, so it means more than one token; with one, the
    proposer's extra slots (``num_speculative_tokens`` minus the slot the hidden states fill)
    may be none (a run given ``--num-speculative-tokens 1`` is judged as such, ``unknown`` when
    the tree does not say whether the hidden states fill a slot)."""
    seen = {guard_fires(ctx, path, g, True, n, method) for n in _PARALLEL_KS}
    if seen == {True}:
        return True
    if seen == {False}:
        return False
    return None


class ParallelDraftingMMRule(Rule):
    """A multimodal target and parallel drafting.

    What it does: with ``--parallel-drafting`` and a multimodal target (``supports_multimodal``
    on its MRO), finds the proposer's guard that raises for multimodal inputs and the condition
    under which ``__init__`` calls it, and decides that condition for the run's
    ``parallel_drafting`` and ``num_speculative_tokens`` (interpreting the assignments before the
    call: ``needs_extra_input_slots`` from the extra slots parallel drafting needs). Without
    ``--num-speculative-tokens`` the condition is decided for every number above one (parallel
    drafting drafts several tokens in one pass); ``unknown`` only when that does not decide it.
    """

    CODE = "EA313"
    FACTS = (ModuleAst,)
    GATE = "parallel-drafting-mm"
    NAME = "parallel-drafting-refuses-multimodal"
    SUMMARY = "the proposer refuses a multimodal target when parallel drafting is on"
    WHY = (
        "In the releases whose proposer raises 'Speculative Decoding with draft models or parallel drafting "
        "does not support multimodal models yet' (vLLM 0.17-0.2x: _raise_if_multimodal, called when parallel "
        "drafting needs extra input slots, i.e. num_speculative_tokens > 1), a multimodal target cannot "
        "serve with parallel_drafting on. Later releases only warn."
    )
    HOW_TO_FIX = (
        "Turn parallel drafting off, or use a release whose proposer only warns for multimodal targets. "
        "Not fixable by a local patch: the proposer would mis-handle multimodal embeddings in the extra slots."
    )
    FIX_AVAILABLE = False
    METHODS = ("eagle", "eagle3", "mtp")
    REQUIRES = "--parallel-drafting"
    CHECKED_WITH = "parallel drafting (--parallel-drafting)"
    DATA = ParallelDraftingMMData
    VALID = [
        Example(_tree(False), _VL, options=_pd(3), note="a release whose proposer only warns"),
        Example(_tree(True), "LlamaForCausalLM", options=_pd(3), note="a text-only target"),
    ]
    INVALID = [
        Example(_tree(True), _VL, options=_pd(3), expect_severity=Severity.ERROR,
                note="three speculative tokens: extra slots, the guard raises"),
        Example(_tree(True), _VL, options=_pd(None), expect_severity=Severity.ERROR,
                note="not given: the guard fires for every number of speculative tokens above one"),
    ]

    def applies(self, target: AuditTarget) -> bool:
        return (target.method in self.METHODS and target.options.parallel_drafting and target.facts.ref is not None)

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        if not is_multimodal(ctx.resolver, target.facts.ref):
            return
        guards = ctx.facts.found(EXTRACTOR)
        if not guards:
            return  # the release's proposer does not refuse multimodal targets
        k = target.options.num_speculative_tokens
        for path, g in guards:
            fires = guard_fires(ctx, path, g, True, k, target.method)
            if fires is None and k is None:
                fires = _fires_for_every_parallel_k(ctx, path, g, target.method)
            if fires is False:
                continue
            if fires is None:
                need = "pass --num-speculative-tokens" if k is None else "it depends on values the run does not give"
                yield self.finding(Severity.UNKNOWN, f"{g.caller} ({path}:{g.line}) calls {g.guard}, which refuses "
                                   f"multimodal targets, under a condition the tool cannot decide: {need}",
                                   path, g.line, guard=g.guard, caller=g.caller)
                continue
            yield self.finding(
                Severity.ERROR,
                f"{target.architecture} is multimodal, and with parallel drafting"
                f"{f' and {k} speculative tokens' if k else _EVERY_K} {g.caller} ({path}:{g.line}) calls {g.guard}, "
                f"which raises{': ' + repr(g.message) if g.message else ''}",
                path, g.guard_line, guard=g.guard, caller=g.caller)
            return
