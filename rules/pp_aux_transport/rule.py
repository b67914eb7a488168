"""EA310 ``pp-aux-transport``: EAGLE-3 under pipeline parallelism, and the inner model does not
carry aux hidden states across stages (or the release cannot carry them at all)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from auditor.cache import cacheable
from auditor.engines.modelfiles import HolderFacts
from auditor.index.facts import AttrFact
from auditor.index.providers import ModuleAst
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions
from rules.base import AuditTarget, Context, Example, Rule
from rules.pp_aux_transport.facts import EXTRACTOR, FLAG, transport_check

_CHECK = '''"""EAGLE-3 helpers of the GPU runner (synthetic)."""


def verify_supports_aux_hidden_states_over_pp(model, method):
    inner = getattr(model, "model", None)
    if not getattr(inner, "supports_aux_hidden_states_over_pp", False):
        raise ValueError(f"{type(model).__name__} does not support {method} with pipeline parallelism")
'''

_LLAMA_OVER_PP = '''"""Llama (synthetic), declaring the aux-state transport."""

from itertools import islice

import torch.nn as nn
from vllm.model_executor.models.interfaces import SupportsEagle3


class LlamaModel(nn.Module):
    supports_aux_hidden_states_over_pp = True

    def forward(self, input_ids, positions, intermediate_tensors=None):
        hidden_states, residual = input_ids, None
        aux_hidden_states = []
        for idx, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer), start=self.start_layer):
            if idx in self.aux_hidden_state_layers:
                aux_hidden_states.append(hidden_states + residual)
            hidden_states, residual = layer(positions, hidden_states, residual)
        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states


class LlamaForCausalLM(nn.Module, SupportsEagle3):
    def __init__(self, vllm_config=None):
        super().__init__()
        self.model = LlamaModel()

    def set_aux_hidden_state_layers(self, layers):
        self.model.aux_hidden_state_layers = layers

    def get_eagle3_aux_hidden_state_layers(self):
        return (2,)
'''

_CHECK_PATH = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
_PP2 = RunOptions(pipeline_parallel_size=2)


@cacheable
@dataclass
class PPAuxTransportData:
    """EA310 details: the ``holder`` (inner model) and the ``check`` (``path:line``) that
    refuses it, or None when the release has no transport."""

    holder: str | None = None
    check: str | None = None
    unanalysed: str | None = None


class PPAuxTransportRule(Rule):
    """EAGLE-3's aux hidden states across pipeline stages.

    What it does: with ``--pipeline-parallel-size`` > 1, finds the runner's check that the inner
    model declares the transport (``if not getattr(inner, "supports_aux_hidden_states_over_pp",
    False): raise``). When the release has it, the target's holder model (found as for
    ``aux-capture``) must set the flag to ``True`` (a class attribute on its MRO). When it has
    none, the release cannot carry the states at all: blocked for every target.
    """

    CODE = "EA310"
    FACTS = (HolderFacts, ModuleAst)
    GATE = "pp-aux-transport"
    NAME = "aux-states-not-carried-across-stages"
    SUMMARY = "EAGLE-3 with pipeline parallelism: the aux hidden states of earlier stages never reach the drafter"
    WHY = (
        "Each pipeline stage runs only its own layers, so it captures only its own aux hidden states, and "
        "the drafter runs on the last stage. Until vLLM carried the states across stages (the inner model "
        "packs them into the IntermediateTensors sent to the next stage and the last stage collects them), "
        "every stage but the last dropped what it captured and the drafter got too few hidden states. From "
        "that release, the runner refuses a target whose inner model does not declare "
        "supports_aux_hidden_states_over_pp = True ('... does not support eagle3 with pipeline "
        "parallelism'; 0.33.0: LlamaModel and Qwen2Model declare it, DeepseekV2Model does not, MiMoModel "
        "opts out)."
    )
    HOW_TO_FIX = (
        "Where the release has the transport, give the inner model what the tree's own transport holders "
        "have (0.33.0 LlamaModel): inherit EagleModelMixin, declare supports_aux_hidden_states_over_pp = True, "
        "collect the earlier stages' states (collect_remote_aux_hidden_states), send this stage's on in the "
        "IntermediateTensors (pack_local_aux_hidden_states), key captures on absolute layer numbers, and set "
        "the layers through _set_aux_hidden_state_layers; the codemod does all of it. Declaring the flag "
        "alone would pass the check and feed the drafter wrong states. A release without the transport "
        "cannot be patched locally: run without pipeline parallelism or upgrade; an explicit opt-out is "
        "left alone."
    )
    FIX_AVAILABLE = True
    METHODS = ("eagle3",)
    REQUIRES = "--pipeline-parallel-size 2 or more"
    CHECKED_WITH = "pipeline parallelism (-pp N)"
    DATA = PPAuxTransportData
    VALID = [
        Example({_CHECK_PATH: _CHECK, "vllm/model_executor/models/llama.py": _LLAMA_OVER_PP}, "LlamaForCausalLM",
                options=_PP2, note="the holder declares the transport"),
    ]
    INVALID = [
        Example({_CHECK_PATH: _CHECK}, "LlamaForCausalLM", options=_PP2, expect_severity=Severity.ERROR,
                note="the release checks the flag, minivllm's LlamaModel does not set it"),
        Example({}, "LlamaForCausalLM", options=_PP2, expect_severity=Severity.ERROR,
                note="a release without the transport: blocked for every target"),
    ]

    def applies(self, target: AuditTarget) -> bool:
        return target.method in self.METHODS and target.options.pipeline_parallel

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        if target.facts.ref is None:
            return
        pp = target.options.pipeline_parallel_size
        found = transport_check(ctx)
        h, fwd = ctx.get(HolderFacts, target.facts.ref)
        if found is None:
            broken = ctx.facts.unanalysed(EXTRACTOR)
            if broken:
                yield self.finding(Severity.UNKNOWN, f"{broken[0][0]} may hold the check of the aux-state transport "
                                   f"but is missing from the analysis ({broken[0][1]})", broken[0][0], None,
                                   unanalysed=broken[0][0])
                return
            if fwd is not None and fwd.path:
                path, line, what = fwd.path, fwd.line, f"{fwd.defined_in.name}.forward"
            else:
                path, line, what = target.facts.path, target.facts.line, target.facts.ref.name
            yield self.finding(
                Severity.ERROR,
                f"this release has no transport of EAGLE-3 aux hidden states across pipeline stages (nothing "
                f"checks or declares {FLAG}): with --pipeline-parallel-size {pp} the drafter runs on the last "
                f"stage, and the states captured by the layers of earlier stages ({what} on those stages) never "
                "reach it, for every target", path, line, fix=False,
                holder=h.ref.dotted if h.ref else None)
            return
        cpath, check = found
        where = f"{cpath}:{check.line}"
        if h.unknown or h.ref is None:
            yield self.finding(Severity.UNKNOWN, f"cannot find the inner model that {check.function} ({where}) "
                               f"checks: {h.unknown}", h.path or cpath, h.line or check.line, check=where)
            return
        hit = ctx.resolver.lookup(h.ref, FLAG)
        loc = ctx.resolver.location(h.ref)
        fix = None
        if hit is not None and isinstance(hit[1], AttrFact) and hit[1].literal is True:
            # vLLM trusts the flag; the states only cross stages if forward uses the transport
            unused = [m for m in TRANSPORT_CALLS if fwd is not None and fwd.defined_in is not None
                      and ctx.resolver.lookup(h.ref, m) is not None and m not in _forward_calls(ctx, fwd)]
            if unused:
                yield self.finding(
                    Severity.ERROR,
                    f"{h.ref.name} declares {FLAG} = True but {fwd.defined_in.name}.forward never calls "
                    f"{', '.join(unused)}: with --pipeline-parallel-size {pp} the earlier stages' aux states do "
                    "not reach the drafter", fwd.path, fwd.line, holder=h.ref.dotted, check=where)
            return
        if hit is not None and isinstance(hit[1], AttrFact) and hit[1].literal is False \
                and hit[0] != ctx.facts.eagle_model_mixin:
            why = f"{hit[0].name} sets {FLAG} = False (opts out)"
            hloc = ctx.resolver.location(hit[0])
            path, line = (hloc[0], hit[1].line) if hloc else (loc[0] if loc else None, loc[1] if loc else None)
            fix = False
        else:
            why = f"{h.ref.name} does not set {FLAG} = True"
            path, line = (loc[0], loc[1]) if loc else (None, None)
        yield self.finding(
            Severity.ERROR,
            f"{why}: with --pipeline-parallel-size {pp}, {check.function} ({where}) refuses the target"
            f"{': ' + repr(check.message) if check.message else ''} (inner model found via {h.via})",
            path, line, fix=fix, holder=h.ref.dotted, check=where)


#: The mixin methods a holder's forward calls to carry the states (0.33.0 ``EagleModelMixin``).
TRANSPORT_CALLS = ("collect_remote_aux_hidden_states", "pack_local_aux_hidden_states")


def _forward_calls(ctx: Context, fwd) -> set[str]:
    """The ``self.<method>(...)`` calls of the holder's forward (re-read from the file)."""
    import ast

    node = ctx.function_node(fwd.path, "forward", fwd.line) if fwd.path and fwd.line else None
    if node is None:
        return set(TRANSPORT_CALLS)  # cannot re-read it: do not claim the calls are missing
    return {n.func.attr for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"}
