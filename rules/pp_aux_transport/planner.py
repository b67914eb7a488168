"""Fix planner of the ``pp-aux-transport`` gate: give the holder model EagleModelMixin's transport
(where the release has one and its mixin implements it), and route a direct setter through it."""

from __future__ import annotations

from auditor.engines.modelfiles import find_holder, holder_forward, target_facts
from auditor.index.facts import AttrFact, MethodFact
from auditor.model.findings import Finding
from auditor.model.results import TargetResult
from rules.planning import Invocation, Planner, module_params
from rules.pp_aux_transport.facts import FLAG, transport_check

#: The mixin methods that carry the states (``vllm/model_executor/models/interfaces.py``, 0.33.0).
TRANSPORT = ("collect_remote_aux_hidden_states", "pack_local_aux_hidden_states", "_set_aux_hidden_state_layers")


def plan(p: Planner, result: TargetResult, f: Finding) -> None:
    arch = result.architecture
    if transport_check(p.ctx) is None:
        p.no(arch, f, "this release has no transport of aux hidden states across pipeline stages: no local patch "
             "can add one", "run without pipeline parallelism, or use a release that has the transport")
        return
    mixin = p.facts.eagle_model_mixin
    missing = [m for m in TRANSPORT if mixin is None or p.r.lookup(mixin, m) is None]
    if missing:
        p.no(arch, f, f"the tree's EagleModelMixin does not implement the transport ({', '.join(missing)})")
        return
    facts = target_facts(p.r, p.registry, arch)
    h = find_holder(p.r, p.registry, facts.ref)
    if h.ref is None:
        p.no(arch, f, f"the holder model is not known statically: {h.unknown}")
        return
    own = p.r.lookup(h.ref, FLAG)
    if own is not None and isinstance(own[1], AttrFact) and own[1].literal is False and own[0] != mixin:
        p.no(arch, f, f"{own[0].name} opts out of the transport ({FLAG} = False): deliberate, not patched",
             "check with the model's authors why the states cannot cross stages")
        return
    fwd = holder_forward(p.r, h.ref)
    if fwd.defined_in is None or fwd.path is None:
        p.no(arch, f, f"{h.ref.name} has no forward in the tree")
        return
    if fwd.defined_in != h.ref:
        p.no(arch, f, f"{h.ref.name} inherits its forward from {fwd.defined_in.name}: the transport belongs there, "
             "and would change every model that shares it")
        return
    lists = {lp.capture_list for lp in fwd.loops if lp.captures and lp.capture_list not in (None, "?")}
    aux = lists.pop() if len(lists) == 1 else None
    if not aux:
        p.no(arch, f, f"{h.ref.name}.forward has no aux-states list to carry (fix aux-capture first)")
        return
    params = {"part": "holder", "class": h.ref.qualname, "mixin_module": mixin.module, "aux": aux}
    params.update(module_params(h.ref, fwd.path))
    p.add(Invocation("pp-aux-transport", "pp-aux-transport", fwd.path, params, [arch]))
    setter = p.r.lookup(facts.ref, "set_aux_hidden_state_layers")
    proto = p.facts.protocol("SupportsEagle3")
    if setter is None or not isinstance(setter[1], MethodFact) or (proto and proto.is_protocol_class(setter[0])):
        return  # the protocol default goes through the mixin already
    if "_set_aux_hidden_state_layers" in setter[1].attrs:
        return
    loc = p.r.location(setter[0])
    if loc is None:
        p.no(arch, f, f"cannot locate {setter[0].name}, whose set_aux_hidden_state_layers bypasses the mixin")
        return
    sparams = {"part": "setter", "class": setter[0].qualname}
    sparams.update(module_params(setter[0], loc[0]))
    p.add(Invocation("pp-aux-transport", "pp-aux-transport", loc[0], sparams, [arch]))
