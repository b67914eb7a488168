"""EA402 ``interface`` on SGLang trees: the target class has no EAGLE-3 setter.

SGLang has no protocol: its runner calls ``model.set_eagle3_layers_to_capture(layer_ids)``
(0.5.10.post1 ``sglang/srt/model_executor/model_runner.py``, directly; 0.5.23
``model_executor/model_runner_components/attention_backend_setup.py``, after a ``hasattr``
check that raises ``ValueError``). The setter's name is read from the tree's runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.engines.sglang.facts import find_setter
from auditor.model.findings import Finding, Severity
from rules.base import AuditTarget, Context, Example, Rule

_LLAMA_LIKE = '''
import torch.nn as nn


class ToyModel(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.layers = []
        self.layers_to_capture = []

    def forward(self, input_ids, positions):
        hidden_states, residual = input_ids, None
        aux_hidden_states = []
        for i in range(self.start_layer, self.end_layer):
            if i in self.layers_to_capture:
                aux_hidden_states.append(hidden_states + residual)
            hidden_states, residual = self.layers[i](positions, hidden_states, residual)
        if len(aux_hidden_states) == 0:
            return hidden_states
        return hidden_states, aux_hidden_states


class ToyForCausalLM(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.model = ToyModel(config)
        self.capture_aux_hidden_states = False
{setter}

EntryClass = ToyForCausalLM
'''
_SETTER = '''
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.capture_aux_hidden_states = True
        self.model.layers_to_capture = [val + 1 for val in layer_ids]
'''


def toy(setter: bool = True) -> dict[str, str]:
    """A one-module SGLang-like model file (``sglang/srt/models/toy.py``), with or without the
    setter (for the rule examples)."""
    return {"sglang/srt/models/toy.py": _LLAMA_LIKE.format(setter=_SETTER if setter else "")}


@cacheable
@dataclass
class SetterData:
    """EA402 details: the setter ``missing`` (its name, as the runner calls it), the
    ``code_holder`` (the class of the MRO that holds the code, where the setter would go), and
    the ``runner`` call (``path:line``)."""

    missing: list[str] = field(default_factory=list)
    code_holder: str | None = None
    runner: str | None = None


class SGLangInterfaceRule(Rule):
    """The setter the SGLang runner calls, looked up on the target class's C3 MRO."""

    CODE = "EA402"
    GATE = "interface"
    NAME = "eagle3-setter-missing"
    SUMMARY = "the target class has no set_eagle3_layers_to_capture (SGLang)"
    WHY = (
        "SGLang's model runner calls model.set_eagle3_layers_to_capture(layer_ids) when EAGLE-3 "
        "is enabled (duck typing: no protocol class). A class without it fails at start-up "
        "(AttributeError, or ValueError after the hasattr check of newer releases)."
    )
    HOW_TO_FIX = (
        "Define set_eagle3_layers_to_capture on the class (or the base that holds its code): store "
        "the layer ids on the inner model's layers_to_capture and set capture_aux_hidden_states, "
        "as the tree's Llama or DeepSeek-V2 models do. The codemod (sglang-interface) writes it in the shape of "
        "the tree's own capable models, or a delegation to the language model for a multimodal wrapper."
    )
    FIX_AVAILABLE = True
    METHODS = ("eagle3",)
    ENGINES = ("sglang",)
    DATA = SetterData
    VALID = [Example(toy(setter=True), "ToyForCausalLM")]
    INVALID = [Example(toy(setter=False), "ToyForCausalLM", expect_severity=Severity.ERROR, note="no setter")]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        facts = target.facts
        if facts.ref is None:
            return
        calls = ctx.facts.runner_calls()
        name = ctx.facts.setter_name()
        holder = facts.code_holder or facts.ref
        loc = ctx.resolver.location(holder) or (facts.path, facts.line)
        if not calls:
            yield self.finding(Severity.UNKNOWN, "this tree's runner never calls a set_eagle3* method on the model "
                               "(no call in sglang/srt/model_executor, speculative or managers): cannot tell what "
                               "EAGLE-3 requires of the target", loc[0], loc[1])
            return
        call = calls[0]
        runner = (f"{call.path}:{call.line} calls model.{name}(...)"
                  + (" after checking hasattr (ValueError)" if call.checked else " (AttributeError when absent)"))
        hit = find_setter(ctx.resolver, facts.ref, name)
        if hit is None:
            where = ""
            if facts.empty and holder != facts.ref:
                where = f" ({facts.ref.name} is an empty subclass; the code lives in {holder.name})"
            if facts.mro_unresolved:
                bases = ", ".join(u.text for u in facts.mro_unresolved)
                yield self.finding(Severity.UNKNOWN, f"{facts.ref.name} has no {name} on the resolved part of its MRO; "
                                   f"bases that cannot be resolved statically may define it: {bases}", loc[0], loc[1])
                return
            yield self.finding(Severity.ERROR, f"{facts.ref.name} has no {name} on its MRO{where}: {runner}",
                               loc[0], loc[1], missing=[name], code_holder=holder.dotted, runner=f"{call.path}:{call.line}")
            return
        owner, mf, sf = hit
        if sf is not None and sf["raises_only"]:
            oloc = ctx.resolver.location(owner)
            yield self.finding(Severity.ERROR, f"{owner.name}.{name} only raises: {runner}",
                               oloc[0] if oloc else None, mf.line, code_holder=owner.dotted)
