"""EA403 ``aux-capture`` on SGLang trees: the inner model does not capture auxiliary hidden
states; EA404 ``silent-delegation``: a wrapper's setter delegates behind ``if hasattr(...)`` to a
language model that lacks the setter, so it silently does nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from auditor.cache import cacheable
from auditor.engines.modelfiles import find_holder
from auditor.index.facts import MethodFact
from auditor.model.findings import Finding, Severity
from rules.base import AuditTarget, Context, Example, Rule
from rules.common.examples import toy
from rules.common.members import (BuiltinsChanges, branch_misses, builtins_changed, builtins_rebound_messages,
                                  forward_effects)

_WRAPPER = '''
import torch.nn as nn

from sglang.srt.models.toy import ToyForCausalLM


class ToyVLForConditionalGeneration(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.language_model = ToyForCausalLM(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if hasattr(self.language_model, "set_eagle3_layers_to_capture"):
            self.language_model.set_eagle3_layers_to_capture(layer_ids)


EntryClass = ToyVLForConditionalGeneration
'''


def _wrapped(lm_has_setter: bool) -> dict[str, str]:
    return {**toy(setter=lm_has_setter), "sglang/srt/models/toy_vl.py": _WRAPPER}


@cacheable
@dataclass
class CaptureData:
    """EA403 details: the ``holder`` model whose forward must capture (dotted name)."""

    holder: str | None = None


class SGLangAuxCaptureRule(Rule):
    """The model the setter fills captures aux hidden states in its ``forward`` and returns them.

    What it does: follows the target's setter (on its MRO) to the model whose
    ``layers_to_capture`` it sets — directly (``self.model.layers_to_capture = ...``) or through
    delegation (``self.language_model.set_eagle3_layers_to_capture(...)``, ``self.model``'s own
    setter) — and checks that the model's ``forward`` loop tests the layer index against
    ``layers_to_capture`` and appends (or hands the aux-states list to the layer), and returns
    ``(hidden_states, aux_hidden_states)``. Without a setter, the inner model is found through
    ``__init__`` (``self.model``, ``self.language_model``) and checked the same way.
    """

    CODE = "EA403"
    GATE = "aux-capture"
    NAME = "aux-hidden-states-not-captured"
    SUMMARY = "the inner model's forward cannot capture auxiliary hidden states (SGLang)"
    WHY = (
        "EAGLE-3 feeds the drafter with the hidden states entering a few target layers. SGLang's "
        "setter stores their ids in the inner model's layers_to_capture; a forward that never "
        "tests it (or a setter that reaches no such model) captures nothing, and the draft model "
        "gets no aux hidden states."
    )
    HOW_TO_FIX = (
        "In the inner model's forward, keep aux_hidden_states = [], append hidden_states + "
        "residual when the layer index is in self.layers_to_capture, and return (hidden_states, "
        "aux_hidden_states) when any were captured; make the setter reach that model. The codemod "
        "(sglang-aux-capture) does so, modelled on the tree's own capable models."
    )
    FIX_AVAILABLE = True
    METHODS = ("eagle3",)
    ENGINES = ("sglang",)
    DATA = CaptureData
    VALID = [Example(toy(setter=True), "ToyForCausalLM"),
             Example(_wrapped(True), "ToyVLForConditionalGeneration", note="delegates to a language model that captures")]
    INVALID = [Example(_wrapped(False), "ToyVLForConditionalGeneration", expect_severity=Severity.ERROR,
                       note="delegates behind hasattr to a language model without the setter")]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        facts = target.facts
        if facts.ref is None:
            return
        r = ctx.resolver
        trace = ctx.get(ctx.facts.capture_trace, target.facts.ref)
        has_setter = bool(trace.steps and trace.steps[0].setter_owner is not None)
        if has_setter:
            for kind, msg, path, line in trace.problems:
                if kind == "unknown":
                    yield self.finding(Severity.UNKNOWN, f"cannot follow the setter: {msg}", path, line)
                    return
            for kind, msg, path, line in trace.problems:
                yield self.finding(Severity.ERROR, msg, path, line)
                return
            holder, via = trace.holder, trace.holder_via
        else:
            h = find_holder(r, ctx.registry, facts.ref)
            if h.unknown:
                yield self.finding(Severity.UNKNOWN, f"cannot find the inner model: {h.unknown}", h.path, h.line)
                return
            holder, via = h.ref, h.via
        fwd = ctx.facts.forward_capture(r, holder)
        if fwd.defined_in is None:
            loc = r.location(holder)
            yield self.finding(Severity.UNKNOWN, f"{holder.name} ({via}) has no forward in the tree",
                               loc[0] if loc else None, loc[1] if loc else None)
            return
        capturing = [lp for lp in fwd.loops if lp["captures"]]
        if not capturing:
            if fwd.loops or fwd.layer_loops:
                line = fwd.loops[0]["line"] if fwd.loops else fwd.layer_loops[0]
                msg = (f"{fwd.defined_in.name}.forward iterates its layers but never tests {ctx.facts.capture_attr}: it "
                       f"captures no aux hidden states (inner model found via {via})")
            else:
                line = fwd.line
                msg = (f"{fwd.defined_in.name}.forward has no loop over its layers that captures aux hidden "
                       f"states (inner model found via {via})")
            yield self.finding(Severity.ERROR, msg, fwd.path, line, holder=holder.dotted)
            return
        if has_setter and trace.holder_writes:
            # the capture must test what *this method's* setter writes (SGLang 0.5.11
            # sglang/srt/models/qwen3_5.py: the forward tests a per-layer mark only the DFlash
            # setter sets, while the EAGLE-3 setter fills layers_to_capture)
            tested = {t for lp in capturing for t in lp.get("tests", ())}
            if tested and not tested & trace.holder_writes:
                lp = capturing[0]
                others = _other_setters(ctx, holder, tested, ctx.facts.setter_name())
                by = f"; only {', '.join(others)} sets it" if others else ""
                yield self.finding(
                    Severity.ERROR,
                    f"{fwd.defined_in.name}.forward captures only when {', '.join(sorted(tested))} is set, which "
                    f"{ctx.facts.setter_name()} never sets (it writes {', '.join(sorted(trace.holder_writes))}"
                    f"{by}): nothing is captured for EAGLE-3 (inner model found via {via})",
                    fwd.path, lp["capture_line"] or lp["line"], holder=holder.dotted)
                return
        if not fwd.returns_aux:
            yield self.finding(Severity.ERROR, f"{fwd.defined_in.name}.forward captures aux hidden states but never "
                               "returns them", fwd.path, fwd.line, holder=holder.dotted)
            return
        setter = r.lookup(facts.ref, ctx.facts.setter_name()) if has_setter else None
        if setter is not None and isinstance(setter[1], MethodFact):
            loc = r.location(setter[0])
            for line, stored in branch_misses(setter[1], ctx.facts.capture_attr):
                yield self.finding(Severity.UNKNOWN,
                                   f"{setter[0].name}.{ctx.facts.setter_name()} stores the layers as {stored} on the "
                                   f"branch at {loc[0] if loc else '?'}:{line}, but {fwd.defined_in.name}.forward "
                                   f"captures the layers in {ctx.facts.capture_attr}: the capture sees them only when "
                                   "another branch runs, which static analysis cannot decide",
                                   loc[0] if loc else None, line, fix=False, holder=holder.dotted)
        for eff in forward_effects(r, holder, fwd.defined_in, facts.ref, ctx.facts.capture_attr):
            yield self.finding(Severity.ERROR if eff.blocked else Severity.UNKNOWN,
                               f"the capture in {fwd.defined_in.name}.forward does not run as written: {eff.why}",
                               eff.path, eff.line, fix=False, holder=holder.dotted)
        for msg, path, line in builtins_changed(ctx.get(BuiltinsChanges, None), f"{fwd.defined_in.name}.forward"):
            yield self.finding(Severity.UNKNOWN, msg, path, line, holder=holder.dotted)
        for msg, path, line in builtins_rebound_messages(r, facts.ref, holder, f"{fwd.defined_in.name}.forward"):
            yield self.finding(Severity.UNKNOWN, msg, path, line, holder=holder.dotted)


def _other_setters(ctx: Context, holder, names: set[str], setter: str) -> list[str]:
    """``Class.method`` of the capture setters on ``holder``'s MRO, other than ``setter``, that
    write one of ``names`` (``set_dflash_layers_to_capture``)."""
    out = []
    for e in ctx.resolver.mro(holder).entries:
        if not hasattr(e, "qualname"):
            continue
        for name, f in ctx.facts.class_facts(ctx.resolver, e).get("setters", {}).items():
            if name != setter and any(a in names for _, a, _ in f["writes"]):
                out.append(f"{e.name}.{name}")
    return out


class SilentDelegationRule(Rule):
    """A setter that delegates under ``if hasattr(self.X, ...)`` to a model that lacks it."""

    CODE = "EA404"
    GATE = "silent-delegation"
    NAME = "setter-delegation-silently-skipped"
    SUMMARY = "the setter delegates behind hasattr to a language model without it: it does nothing"
    WHY = (
        "A multimodal wrapper whose set_eagle3_layers_to_capture only calls the language model's "
        "'if hasattr(self.language_model, ...)' passes SGLang's check, then silently captures "
        "nothing when the language model lacks the setter: the failure shows up only as a "
        "drafter that never accepts."
    )
    HOW_TO_FIX = "Give the language model the setter (and capture), or raise instead of skipping."
    BLOCKING = False
    METHODS = ("eagle3",)
    ENGINES = ("sglang",)
    VALID = [Example(_wrapped(True), "ToyVLForConditionalGeneration")]
    INVALID = [Example(_wrapped(False), "ToyVLForConditionalGeneration", expect_severity=Severity.WARNING)]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        if target.facts.ref is None:
            return
        for kind, msg, path, line in ctx.get(ctx.facts.capture_trace, target.facts.ref).problems:
            if kind == "silent":
                yield self.finding(Severity.WARNING, msg, path, line)
