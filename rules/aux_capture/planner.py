"""Fix planner of the ``aux-capture`` gate: make the holder model's forward capture aux hidden states
(a list, or EagleModelMixin where the tree's protocol defaults demand it)."""

from __future__ import annotations

from auditor.engines.modelfiles import find_holder, holder_forward, method_requires_mixin, target_facts
from auditor.index.facts import MethodFact
from auditor.index.targets import ClassRef
from auditor.model.findings import Finding
from auditor.model.results import TargetResult
from rules.planning import Invocation, Planner, module_params


def plan(p: Planner, result: TargetResult, f: Finding) -> None:
    arch = result.architecture
    if not f.fix_available:
        p.no(arch, f, f"no codemod changes this: {f.message}")
        return
    facts = target_facts(p.r, p.registry, arch)
    h = find_holder(p.r, p.registry, facts.ref)
    if h.ref is None:
        p.no(arch, f, f"the holder model is not known statically: {h.unknown}")
        return
    fwd = holder_forward(p.r, h.ref)
    if fwd.defined_in is None or fwd.path is None:
        p.no(arch, f, f"{h.ref.name} has no forward in the tree")
        return
    needs = (f.data.needs_mixin if f.data else False) or _needs_mixin(p, facts.ref)
    mode = "mixin" if needs and arch not in p.explicit_setter else "list"
    mixin = p.facts.eagle_model_mixin
    if mode == "mixin" and mixin is None:
        p.no(arch, f, "the tree's protocol needs EagleModelMixin, which the tree does not define")
        return
    params = {"class": fwd.defined_in.qualname, "mode": mode,
              "mixin_module": mixin.module if mixin is not None else None}
    params.update(module_params(fwd.defined_in, fwd.path))
    p.add(Invocation("aux-capture", "aux-capture", fwd.path, params, [arch]))


def _needs_mixin(p: Planner, ref: ClassRef) -> bool:
    """True when the setter the target will run is a protocol default that asserts the inner
    model inherits EagleModelMixin (vLLM ≥ 0.18)."""
    proto = p.facts.protocol("SupportsEagle3")
    if proto is None or p.facts.eagle_model_mixin is None:
        return False
    entry = proto.members.get("set_aux_hidden_state_layers")
    if entry is None or not isinstance(entry[1], MethodFact) or not method_requires_mixin(entry[1]):
        return False
    hit = p.r.lookup(ref, "set_aux_hidden_state_layers")
    return hit is None or proto.is_protocol_class(hit[0])
