"""Fix planner of the ``aux-capture`` gate on SGLang trees: the inner model the target's setter
reaches (as planned by :func:`rules.interface.planner_sglang.route` when the setter is missing)
gets the capture in its ``forward``, in the class that defines that ``forward``."""

from __future__ import annotations

from auditor.engines.modelfiles import target_facts
from auditor.model.findings import Finding
from auditor.model.results import TargetResult
from rules.common.sglang_setter import donor, route
from rules.planning import Invocation, Planner, module_params

#: Codemod name (``rules.registry.CODEMODS``).
CODEMOD = "sglang-aux-capture"


def plan(p: Planner, result: TargetResult, f: Finding) -> None:
    """Plan the capture for ``result``'s target (see the module docstring)."""
    if not f.fix_available:
        p.no(result.architecture, f, f"no codemod changes this: {f.message}")
        return
    arch = result.architecture
    facts = target_facts(p.r, p.registry, arch)
    if facts.ref is None:
        p.no(arch, f, f"cannot resolve the class of {arch}")
        return
    r = route(p, facts.ref)
    if r.fails is not None:
        p.no(arch, f, r.fails[0], r.fails[1])
        return
    if r.holder is None:
        p.no(arch, f, "the model the setter fills is not known")
        return
    fwd = p.facts.forward_capture(p.r, r.holder)
    if fwd.defined_in is None or fwd.path is None:
        p.no(arch, f, f"{r.holder.name} has no forward in the tree")
        return
    if any(lp["captures"] for lp in fwd.loops) and fwd.returns_aux:
        return  # captures already: what blocks is upstream (the setter's route)
    if donor(p).donor is None:
        p.no(arch, f, f"no model of this tree captures aux hidden states to copy: {donor(p).why_none()}",
             f"append the state entering each layer in {p.facts.capture_attr} in {fwd.defined_in.name}.forward")
        return
    params = {"class": fwd.defined_in.qualname, "capture_attr": p.facts.capture_attr}
    params.update(module_params(fwd.defined_in, fwd.path))
    p.add(Invocation(CODEMOD, "aux-capture", fwd.path, params, [arch]))
