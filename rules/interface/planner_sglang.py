"""Fix planner of the ``interface`` gate on SGLang trees: the setter the runner calls, on the class
of the target's MRO that holds the code, in the shape of the tree's donor model
(:func:`auditor.engines.sglang.donor.find_donor`); multimodal wrappers delegate to their language
model, whose class gets the setter in turn. The getters the EAGLE workers call on the target
(``get_embed_and_head``) are planned the same way (:func:`getter_route`): ``return self.model
.embed_tokens.weight, self.lm_head.weight`` in the shape of the tree's donors, when the target's
``__init__`` builds those attributes, or a delegation to the language model.

:func:`route` is shared with the ``aux-capture`` planner: it follows (or plans) the setter from the
target to the inner model whose ``forward`` must capture."""

from __future__ import annotations

from auditor.engines.base import init_assign
from auditor.engines.modelfiles import target_facts
from auditor.index.facts import MethodFact
from auditor.index.targets import ClassRef
from auditor.model.findings import Finding
from auditor.model.results import TargetResult
from rules.common.sglang_setter import (
    CODEMOD,
    GetterDonor,
    Route,
    builds_inner,
    inner_attr,
    place_setter,
    route,
)
from rules.planning import Invocation, Planner



def getter_donor(p: Planner, name: str):
    """The tree's :class:`GetterDonor` for the getter ``name``."""
    return p.ctx.get(GetterDonor, name)


def _builds(p: Planner, ref: ClassRef, path: tuple[str, ...]) -> str | None:
    """Why ``self.<path>`` (all but its last attribute, a parameter such as ``weight``) is not
    known to exist on an instance of ``ref`` (None when every step is assigned in an ``__init__``
    of the MRO of the class built at the step before)."""
    steps = path[:-1] if len(path) > 1 else path
    cur = ref
    for i, attr in enumerate(steps):
        if init_assign(p.r, cur, (attr,)) is None:
            return f"no __init__ on {cur.name}'s MRO sets self.{attr}"
        if i < len(steps) - 1:
            cls, _, why = p.facts.attr_class(p.r, cur, attr)
            if cls is None:
                return why
            cur = cls
    return None


def getter_route(p: Planner, ref: ClassRef, name: str, depth: int = 0) -> Route:
    """Plan the getter ``name`` on ``ref`` (nothing when its MRO has it): a delegation to the
    language model for a wrapper (whose class is planned in turn), else the donor's ``return``
    of ``self`` attributes, checked against what ``ref``'s ``__init__`` builds."""
    out = Route()
    _getter_walk(p, ref, name, depth, out)
    return out


def _getter_walk(p: Planner, ref: ClassRef, name: str, depth: int, out: Route) -> None:
    if depth > 3:
        out.fails = ("wrappers nested too deep to plan", "")
        return
    hit = p.r.lookup(ref, name)
    if hit is not None:
        if isinstance(hit[1], MethodFact) and hit[1].is_stub:
            out.fails = (f"{hit[0].name}.{name} is a stub", f"make {hit[0].name}.{name} return what the donors return")
        return
    placed = place_setter(p, ref, out)
    if placed is None:
        return
    holder, loc, params = placed
    found = inner_attr(p, ref)
    if found is not None:
        attr = found[1]
        cls, _, _why = p.facts.attr_class(p.r, ref, attr)
        if cls is not None and (p.r.lookup(cls, name) is not None or builds_inner(p, cls)):
            params["getters"] = [{"name": name, "kind": "delegate", "attr": attr}]
            out.invocations.append(Invocation(CODEMOD, "interface", loc[0], params))
            _getter_walk(p, cls, name, depth + 1, out)
            return
    search = getter_donor(p, name)
    d = search.donor
    if d is None:
        out.fails = (f"no model of this tree to copy {name} from: {search.why_none()}", f"define {name} on {holder.name}")
        return
    first_why = None
    for cand in search.shapes:  # the most shared shape whose attributes the target builds
        why = next((f"the donor {cand.ref.name}.{name} returns self.{'.'.join(path)}, and {w}"
                    for path in cand.shape.paths for w in [_builds(p, ref, path)] if w is not None), None)
        if why is None:
            d = cand
            break
        first_why = first_why or why
    else:
        more = (f" (nor do the other {len(search.shapes) - 1} shapes of the tree's donors fit)"
                if len(search.shapes) > 1 else "")
        out.fails = (f"{first_why}{more}", f"define {name} on {holder.name}")
        return
    params["getters"] = [{"name": name, "kind": "return", **d.shape.as_dict(), "donor": d.ref.name}]
    out.invocations.append(Invocation(CODEMOD, "interface", loc[0], params))


def plan(p: Planner, result: TargetResult, f: Finding) -> None:
    """Plan what ``result``'s target lacks (see the module docstring): the setter (when it is
    missing, or only raises) and each getter the workers call."""
    if not f.fix_available:
        p.no(result.architecture, f, f"no codemod changes this: {f.message}")
        return
    facts = target_facts(p.r, p.registry, result.architecture)
    if facts.ref is None:
        p.no(result.architecture, f, f"cannot resolve the class of {result.architecture}")
        return
    setter = p.ctx.facts.setter_name()
    data = f.data
    missing = list(getattr(data, "missing", None) or [])
    stub = getattr(data, "stub", None)
    invocations: list[Invocation] = []
    if stub is not None and stub != setter:
        r = getter_route(p, facts.ref, stub)
        p.no(result.architecture, f, r.fails[0] if r.fails else f"{stub} is a stub", r.fails[1] if r.fails else "")
        return
    if not missing or setter in missing:
        r = route(p, facts.ref)
        if r.fails is not None:
            p.no(result.architecture, f, r.fails[0], r.fails[1])
            return
        invocations += r.invocations
    for name in missing:
        if name == setter:
            continue
        r = getter_route(p, facts.ref, name)
        if r.fails is not None:
            p.no(result.architecture, f, r.fails[0], r.fails[1])
            return
        invocations += r.invocations
    for inv in invocations:
        inv.architectures = [result.architecture]
        p.add(inv)
