"""EA303 ``aux-capture``: the holder model cannot capture auxiliary hidden states; EA307
``pp-relative-index``: it captures them by a stage-relative layer index."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.engines.modelfiles import HolderFacts, captures_itself, method_requires_mixin
from auditor.index.facts import MethodFact
from auditor.model.findings import Finding, Severity
from rules.aux_capture.target_forward import target_drops
from rules.base import AuditTarget, Context, Example, Rule
from rules.common.members import (BuiltinsChanges, OutsideModuleChanges, branch_misses, builtins_changed,
                                  builtins_rebound_messages, forward_effects, loop_helpers_rebound, setter_misses)

_NO_INDEX_LOOP = '''
from itertools import islice

import torch.nn as nn
from vllm.model_executor.models.interfaces import SupportsEagle3


class NoIdxModel(nn.Module):
    def forward(self, input_ids, positions):
        hidden_states, residual = input_ids, None
        for layer in islice(self.layers, self.start_layer, self.end_layer):
            hidden_states, residual = layer(positions, hidden_states, residual)
        return hidden_states


class NoIdxForCausalLM(nn.Module, SupportsEagle3):
    def __init__(self, vllm_config=None):
        super().__init__()
        self.model = NoIdxModel()

    def set_aux_hidden_state_layers(self, layers):
        self.model.aux_hidden_state_layers = layers

    def get_eagle3_aux_hidden_state_layers(self):
        return (2,)
'''


_CAPTURING_MODEL = '''
from itertools import islice

import torch.nn as nn
from vllm.model_executor.models.interfaces import SupportsEagle3


class CapModel(nn.Module):
    def forward(self, input_ids, positions):
        hidden_states, residual = input_ids, None
        aux_hidden_states = []
        for idx, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer){start}):
            if idx in self.aux_hidden_state_layers:
                aux_hidden_states.append(hidden_states + residual)
            hidden_states, residual = layer(positions, hidden_states, residual)
        {ret}


class CapForCausalLM(nn.Module, SupportsEagle3):
    def __init__(self, vllm_config=None):
        super().__init__()
        self.model = CapModel()

    def set_aux_hidden_state_layers(self, layers):
        self.model.aux_hidden_state_layers = layers

    def get_eagle3_aux_hidden_state_layers(self):
        return (2,)
'''
_RETURNS = """if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states"""


def _cap(start: str = "", ret: str = _RETURNS, edit: tuple[str, str] = ("", "")) -> dict[str, str]:
    """The capturing model, with ``start=`` of its ``enumerate``, its return, and one ``edit``
    (``(old, new)`` text) applied."""
    return {"vllm/model_executor/models/cap.py": _CAPTURING_MODEL.format(start=start, ret=ret).replace(*edit)}


#: the setter stores the layers where the capture never reads them
_TYPO = ("self.model.aux_hidden_state_layers = layers", "self.model.aux_hidden_state_layer = layers")
#: the holder's forward shadowed on every instance by an attribute set in ``__init__``
_SHADOWED = ("class CapModel(nn.Module):\n", "class CapModel(nn.Module):\n    def __init__(self):\n"
             "        super().__init__()\n        self.forward = self.plain\n\n    def plain(self, input_ids, "
             "positions):\n        return input_ids\n\n")


def _assigns(ctx: Context, ref, attr: str) -> bool:
    """True when some ``__init__`` on ``ref``'s MRO assigns ``self.<attr>``, or a class on it
    defines ``attr``."""
    for e in ctx.resolver.mro(ref).entries:
        c = ctx.resolver.cls(e) if hasattr(e, "qualname") else None
        if c is None:
            continue
        init = c.methods.get("__init__")
        if (init and attr in init.self_assigns) or attr in c.attrs or attr in c.methods:
            return True
    return False


def _mixin_assertion(ctx: Context, ref, holder) -> list | None:
    """``[path, line]`` of the ``set_aux_hidden_state_layers`` the target ``ref`` runs when it is
    the ``SupportsEagle3`` protocol's default, that default asserts the holder inherits
    ``EagleModelMixin``, and ``holder`` does not; else None."""
    setter = ctx.resolver.lookup(ref, "set_aux_hidden_state_layers")
    if setter is None or not isinstance(setter[1], MethodFact):
        return None
    proto = ctx.facts.protocol("SupportsEagle3")
    if not (proto and proto.is_protocol_class(setter[0]) and method_requires_mixin(setter[1])):
        return None
    mixin = ctx.facts.eagle_model_mixin
    if mixin is not None and ctx.resolver.is_subclass(holder, mixin):
        return None
    loc = ctx.resolver.location(setter[0])
    return [loc[0], setter[1].line] if loc and loc[0] and isinstance(setter[1].line, int) else None


@cacheable
@dataclass
class AuxCaptureData:
    """EA303 details: the ``holder`` model (the inner model whose forward runs the layers),
    whether the tree's protocol defaults make it ``needs_mixin`` (``EagleModelMixin``), what a
    wrapper that captures by itself ``requires`` of transformers, and whether the holder was
    ``assumed`` rather than found."""

    holder: str | None = None
    needs_mixin: bool = False
    requires: list[str] = field(default_factory=list)
    assumed: bool = False
    #: ``[path, line]`` of the protocol default ``set_aux_hidden_state_layers`` the target runs,
    #: which asserts that the holder inherits ``EagleModelMixin`` when the holder does not: the
    #: engine refuses there, at load, before any forward runs (vLLM 0.32.0
    #: ``vllm/model_executor/models/interfaces.py``)
    enforced_at: list | None = None


@cacheable
@dataclass
class LayerIndexData:
    """EA307 details: the ``start`` the stage-relative index should be offset by."""

    start: str | None = None


class AuxCaptureRule(Rule):
    """The holder model's ``forward`` captures aux hidden states and returns them.

    What it does: finds the inner model (``self.model = X(...)``, ``self._init_model(...)``,
    ``self.model_cls(...)``, or a wrapper's language model built with
    ``init_vllm_registered_model(..., architectures=[...])``), reads its ``forward``, and checks
    that a loop over the decoder layers knows each layer's index and appends the state entering
    the layer when the index is in ``aux_hidden_state_layers`` (or calls ``EagleModelMixin``'s
    ``_maybe_add_hidden_state``), and that ``forward`` returns ``(hidden_states, aux_hidden_states)``.
    Where the tree's protocol default for ``set_aux_hidden_state_layers`` asserts
    ``isinstance(model, EagleModelMixin)`` and the target does not override it, the holder must
    inherit ``EagleModelMixin``.
    """

    CODE = "EA303"
    FACTS = (HolderFacts, BuiltinsChanges, OutsideModuleChanges)
    GATE = "aux-capture"
    NAME = "aux-hidden-states-not-captured"
    SUMMARY = ("the holder model's `forward` cannot capture aux hidden states (or lacks `EagleModelMixin` where "
               "the protocol default demands it)")
    WHY = (
        "EAGLE-3 feeds the drafter with the hidden states entering a few target layers. A "
        "forward loop without a layer index (for layer in islice(self.layers, ...)) cannot "
        "collect them: set_aux_hidden_state_layers has no effect and the runner fails to unpack "
        "(hidden_states, aux_hidden_states)."
    )
    HOW_TO_FIX = (
        "Track the absolute layer index (start_layer + i), append hidden_states + residual for "
        "indices in aux_hidden_state_layers, and return (hidden_states, aux_hidden_states) when "
        "any were captured; the codemod rewrites the loop."
    )
    FIX_AVAILABLE = True
    DATA = AuxCaptureData
    VALID = [Example({}, "LlamaForCausalLM"), Example(_cap(), "CapForCausalLM")]
    INVALID = [
        Example({"vllm/model_executor/models/noidx.py": _NO_INDEX_LOOP}, "NoIdxForCausalLM",
                expect_severity=Severity.ERROR, note="islice loop without an index"),
        Example(_cap(ret="return hidden_states"), "CapForCausalLM",
                expect_severity=Severity.ERROR, note="captures but never returns the aux states"),
        Example(_cap(edit=_TYPO), "CapForCausalLM", expect_severity=Severity.ERROR,
                note="the setter stores the layers under another name than the capture reads"),
        Example(_cap(edit=_SHADOWED), "CapForCausalLM", expect_severity=Severity.UNKNOWN,
                note="an instance attribute set in __init__ shadows the capturing forward"),
    ]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        facts = target.facts
        if facts.ref is None:
            return
        own = captures_itself(ctx.resolver, facts.ref)
        if own is not None:
            # the Transformers modeling backend: no vLLM holder model exists, none is needed
            if own.requires:
                yield self.finding(
                    Severity.WARNING,
                    f"{own.defined_in.name} captures aux hidden states itself (its forward returns them, "
                    f"set_aux_hidden_state_layers configures the capture); this needs a transformers that "
                    f"provides {', '.join(own.requires)}", own.path, own.line, requires=own.requires,
                )
            return
        h, fwd = ctx.get(HolderFacts, target.facts.ref)
        if h.unknown:
            yield self.finding(Severity.UNKNOWN, f"cannot find the holder model: {h.unknown}", h.path, h.line)
            return
        if h.assumed:
            yield self.finding(Severity.WARNING, h.assumed, h.path, h.line, assumed=True)
        holder = h.ref
        if fwd is None or fwd.defined_in is None:
            loc = ctx.resolver.location(holder)
            yield self.finding(
                Severity.UNKNOWN, f"holder {holder.name} ({h.via}) has no forward in the tree",
                loc[0] if loc else None, loc[1] if loc else None,
            )
            return
        capturing = [lp for lp in fwd.loops if lp.captures]
        lm = f" (language model {h.language_arch})" if h.language_arch else ""
        if not capturing:
            if fwd.loops:
                lp = fwd.loops[0]
                how = "with no layer index" if lp.index_var is None else f"with index {lp.index_var!r} but never tests it"
                msg = (f"{fwd.defined_in.name}.forward{lm} iterates its layers {how} and captures no "
                       f"aux hidden states (holder found via {h.via})")
                reset = next((x for x in fwd.loops if x.reset_line is not None), None)
                if reset is not None:
                    msg = (f"{fwd.defined_in.name}.forward{lm} captures aux hidden states into "
                           f"{reset.capture_list} but empties it again at line {reset.reset_line}, before it "
                           f"returns: nothing captured reaches the drafter (holder found via {h.via})")
                line = lp.line
            else:
                msg = (f"{fwd.defined_in.name}.forward{lm} has no loop over its decoder layers that "
                       f"captures aux hidden states (holder found via {h.via})")
                line = fwd.line
            yield self.finding(Severity.ERROR, msg, fwd.path, line, holder=holder.dotted,
                               enforced_at=_mixin_assertion(ctx, facts.ref, holder))
            return
        if not fwd.returns_aux:
            yield self.finding(
                Severity.ERROR,
                f"{fwd.defined_in.name}.forward captures aux hidden states but never returns them",
                fwd.path, fwd.line, holder=holder.dotted,
            )
            return
        drop = target_drops(ctx, facts.ref, h.via)
        if drop is not None:
            yield self.finding(Severity.UNKNOWN, drop[0], drop[1], drop[2], fix=False, holder=holder.dotted)
        yield from self._runs_as_written(ctx, target, holder, fwd, capturing)
        mixin = ctx.facts.eagle_model_mixin
        needs_mixin = any(lp.uses_mixin_helper for lp in capturing)
        why = "its loop calls _maybe_add_hidden_state"
        setter = ctx.resolver.lookup(facts.ref, "set_aux_hidden_state_layers")
        if setter is not None and isinstance(setter[1], MethodFact):
            proto = ctx.facts.protocol("SupportsEagle3")
            if proto and proto.is_protocol_class(setter[0]) and method_requires_mixin(setter[1]):
                needs_mixin = True
                why = f"{setter[0].name}.set_aux_hidden_state_layers (the protocol default) asserts it"
        if needs_mixin and (mixin is None or not ctx.resolver.is_subclass(holder, mixin)):
            loc = ctx.resolver.location(holder)
            yield self.finding(
                Severity.ERROR,
                f"{holder.name} must inherit EagleModelMixin: {why}",
                loc[0] if loc else None, loc[1] if loc else None, holder=holder.dotted, needs_mixin=True,
                enforced_at=_mixin_assertion(ctx, facts.ref, holder),
            )
        # the protocol's default layer getter (vLLM >= 0.18) reads ``<holder>.layers``
        proto = ctx.facts.protocol("SupportsEagle3")
        if proto is not None:
            for name, (owner, fact) in proto.members.items():
                if not (isinstance(fact, MethodFact) and name.startswith("get_eagle3") and "layers" in fact.attrs):
                    continue
                hit = ctx.resolver.lookup(facts.ref, name)
                if hit is None or not proto.is_protocol_class(hit[0]):
                    continue  # overridden: the model picks its own layers
                if not (_assigns(ctx, holder, "layers") or any(lp.over_layers for lp in capturing)):
                    loc = ctx.resolver.location(holder)
                    yield self.finding(
                        Severity.ERROR,
                        f"{owner.name}.{name} (the protocol default) reads {holder.name}.layers, which "
                        f"{holder.name} never sets (unless the drafter config lists "
                        "eagle_aux_hidden_state_layer_ids)",
                        loc[0] if loc else None, loc[1] if loc else None, holder=holder.dotted,
                    )


    def _runs_as_written(self, ctx: Context, target: AuditTarget, holder, fwd, capturing) -> Iterator[Finding]:
        """What keeps a capture that reads well from running as written: the holder's or the
        target's ``forward`` wrapped by a decorator or shadowed by an instance attribute
        (:mod:`rules.common.members`), a setter that stores the layers under another name than
        the capture reads, the loop's ``enumerate``/``range`` rebound in the holder's module, or a
        change to Python's builtins anywhere in the tree."""
        r = ctx.resolver
        for eff in forward_effects(r, holder, fwd.defined_in, target.facts.ref):
            yield self.finding(Severity.ERROR if eff.blocked else Severity.UNKNOWN,
                               f"the capture in {fwd.defined_in.name}.forward does not run as written: {eff.why}",
                               eff.path, eff.line, fix=False, holder=holder.dotted)
        setter = r.lookup(target.facts.ref, "set_aux_hidden_state_layers")
        proto = ctx.facts.protocol("SupportsEagle3")
        if setter is not None and isinstance(setter[1], MethodFact) and not (
                proto and proto.is_protocol_class(setter[0])) and not any(lp.uses_mixin_helper for lp in capturing) \
                and setter_misses(setter[1], "aux_hidden_state_layers"):
            loc = r.location(setter[0])
            stored = ", ".join(sorted(a for a in setter[1].attrs if a not in ("model",)))
            yield self.finding(Severity.ERROR,
                               f"{setter[0].name}.set_aux_hidden_state_layers ({loc[0] if loc else '?'}:"
                               f"{setter[1].line}) stores the layers as {stored or 'nothing'}, but "
                               f"{fwd.defined_in.name}.forward captures the layers in aux_hidden_state_layers: "
                               "the capture never sees them", loc[0] if loc else None, setter[1].line, fix=False,
                               holder=holder.dotted)
        if setter is not None and isinstance(setter[1], MethodFact) and not (
                proto and proto.is_protocol_class(setter[0])):
            loc = r.location(setter[0])
            for line, stored in branch_misses(setter[1], "aux_hidden_state_layers"):
                yield self.finding(Severity.UNKNOWN,
                                   f"{setter[0].name}.set_aux_hidden_state_layers stores the layers as "
                                   f"{stored} on the branch at {loc[0] if loc else '?'}:{line}, but "
                                   f"{fwd.defined_in.name}.forward captures the layers in aux_hidden_state_layers: "
                                   "the capture sees them only when another branch runs, which static analysis "
                                   "cannot decide", loc[0] if loc else None, line, fix=False, holder=holder.dotted)
        for lp in capturing:
            kind = lp.index_kind
            names = set(lp.iter_names) | ({kind} if kind else set())
            for name, outside in loop_helpers_rebound(r, fwd.defined_in.module, names, lp.iter_local):
                if outside is None:
                    how = "indexes its layers with" if name == kind else "iterates its layers through"
                    yield self.finding(Severity.UNKNOWN,
                                       f"{fwd.defined_in.name}.forward {how} {name}, which "
                                       f"{fwd.path} rebinds: static analysis cannot follow the capture",
                                       fwd.path, lp.line, holder=holder.dotted)
                    continue
                for member, construct, path, line in ctx.get(OutsideModuleChanges, outside):
                    if member in (name, "*"):
                        yield self.finding(Severity.UNKNOWN,
                                           f"`{construct}` at {path}:{line} changes {outside}.{name}, through which "
                                           f"{fwd.defined_in.name}.forward iterates its layers: static analysis "
                                           "cannot follow the capture", path, line, holder=holder.dotted)
                        break
        for msg, path, line in builtins_changed(ctx.get(BuiltinsChanges, None), f"{fwd.defined_in.name}.forward"):
            yield self.finding(Severity.UNKNOWN, msg, path, line, holder=holder.dotted)
        for msg, path, line in builtins_rebound_messages(r, target.facts.ref, holder, f"{fwd.defined_in.name}.forward"):
            yield self.finding(Severity.UNKNOWN, msg, path, line, holder=holder.dotted)


class PPRelativeIndexRule(Rule):
    """Aux states keyed on a stage-relative loop index."""

    CODE = "EA307"
    FACTS = (HolderFacts,)
    GATE = "pp-relative-index"
    NAME = "stage-relative-layer-index"
    SUMMARY = "aux states keyed on `enumerate(islice(...))` without `start=`: wrong layers on later pipeline stages"
    WHY = (
        "enumerate(islice(self.layers, start_layer, end_layer)) counts from 0 on every pipeline "
        "stage, while aux_hidden_state_layers holds absolute layer numbers. With one stage "
        "(start_layer = 0) the index is right; it matters under pipeline parallelism once the "
        "release carries aux states across stages (see pp-aux-transport): every stage but the "
        "first then captures the wrong layers."
    )
    HOW_TO_FIX = "Pass start=self.start_layer to enumerate (or add start_layer to the index)."
    BLOCKING = False
    DATA = LayerIndexData
    VALID = [Example(_cap(start=", start=self.start_layer"), "CapForCausalLM")]
    INVALID = [Example(_cap(), "CapForCausalLM", expect_severity=Severity.WARNING)]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        if target.facts.ref is None:
            return
        h, fwd = ctx.get(HolderFacts, target.facts.ref)
        if fwd is None:
            return
        for lp in fwd.loops:
            if lp.captures and lp.index_kind == "enumerate" and lp.over_slice and lp.enumerate_start is None:
                yield self.finding(
                    Severity.WARNING,
                    f"{fwd.defined_in.name}.forward keys aux states on {lp.index_var!r} from "
                    "enumerate(islice(...)) without start=: once aux states cross pipeline stages "
                    "(pp-aux-transport), stages after the first capture the wrong layers",
                    fwd.path, lp.line,
                )
