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

import ast
from dataclasses import dataclass, field

from auditor.engines.base import init_assign
from auditor.engines.sglang.donor import (
    DonorSearch,
    GetterSearch,
    find_donor,
    find_getter_donor,
    method_ast,
)
from auditor.engines.sglang.facts import (
    CAPTURE_ATTR,
    attr_class,
    find_setter,
    forward_capture,
)
from auditor.engines.vllm.facts import HOLDER_ATTRS, LANGUAGE_MODEL_ATTRS, target_facts
from auditor.index.resolve import ClassRef, External, FunctionRef
from auditor.index.summary import MethodFact
from auditor.model.findings import Finding
from auditor.model.results import TargetResult
from rules.planning import Invocation, Planner, code_holder, module_params

#: Codemod names (``rules.registry.CODEMODS``).
CODEMOD = "sglang-interface"


@dataclass
class Route:
    """Where a target's setter leads once fixed: the ``holder`` (the inner model whose ``forward``
    must capture), the setter ``invocations`` to plan, or the reason it ``fails`` (with a hint)."""

    holder: ClassRef | None = None
    invocations: list[Invocation] = field(default_factory=list)
    fails: tuple[str, str] | None = None


def donor(p: Planner) -> DonorSearch:
    """The tree's donor (computed once per tree)."""
    key = ("sglang-donor",)
    if key not in p.ctx.cache:
        p.ctx.cache[key] = find_donor(p.r, p.registry, p.ctx.facts.setter_name())
    return p.ctx.cache[key]



def _wrapper_like(p: Planner, cls: ClassRef, name: str) -> bool:
    """True when ``cls`` is itself a wrapper (it has the setter, or builds an inner model and
    its ``forward`` loops over no layers), so the setter should be delegated to it."""
    return find_setter(p.r, cls, name) is not None or _builds_inner(p, cls)


def _builds_inner(p: Planner, cls: ClassRef) -> bool:
    """True when ``cls`` is itself a wrapper: it builds an inner model and its ``forward`` loops
    over no layers."""
    fc = forward_capture(p.r, cls)
    return not fc.loops and not fc.layer_loops and init_assign(p.r, cls, HOLDER_ATTRS) is not None


def _self_chain(node: ast.AST) -> tuple[str, ...] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return tuple(reversed(parts)) if isinstance(node, ast.Name) and node.id == "self" else None


def _routes_through(p: Planner, ref: ClassRef, attr: str, inner_cls: ClassRef) -> str | None:
    """Why the wrapper's ``forward`` does not hand its work to ``self.<attr>``'s own ``forward``
    (None when it does: it calls ``self.<attr>(...)`` or hands ``self.<attr>`` to a helper, and
    never reaches past it to the language model's inner model or logits processor)."""
    hit = p.r.lookup(ref, "forward")
    fn = method_ast(p.r, hit[0], "forward") if hit is not None else None
    if fn is None:
        return f"the forward of {ref.name} cannot be read"
    inner = init_assign(p.r, inner_cls, HOLDER_ATTRS)
    past = {"logits_processor", "lm_head"} | ({inner[1]} if inner else set())
    routed = False
    for node in ast.walk(fn):
        chain = _self_chain(node) if isinstance(node, ast.Attribute) else None
        if chain and len(chain) >= 2 and chain[0] == attr and chain[1] in past:
            return (f"{hit[0].name}.forward reaches self.{attr}.{chain[1]} itself, past the language model's forward "
                    "that would unpack the aux hidden states")
        if isinstance(node, ast.Call):
            if _self_chain(node.func) == (attr,):
                routed = True
            if any(_self_chain(a) == (attr,) for a in node.args) or any(
                    _self_chain(k.value) == (attr,) for k in node.keywords):
                routed = True
    return None if routed else f"{hit[0].name}.forward never runs self.{attr}"


def _guard(p: Planner, ref: ClassRef, holder: ClassRef) -> str | None:
    """How the new setter tells the last pipeline rank, as the donor does: ``self.pp_group`` when
    the target's ``__init__`` sets it, else ``get_pp_group()`` when the holder's module binds that
    function, else None (no guard)."""
    if init_assign(p.r, ref, ("pp_group",)) is not None:
        return "self.pp_group"
    if isinstance(p.r.resolve_name(holder.module, "get_pp_group"), (FunctionRef, External)):
        return "get_pp_group()"
    return None


def _placed(p: Planner, ref: ClassRef, out: Route) -> tuple[ClassRef, tuple[str, int], dict] | None:
    """Where members of ``ref`` are written: its code holder (:func:`rules.planning.code_holder`),
    the holder's ``(path, line)``, and the codemod parameters naming the class and its module.
    None, with ``out.fails`` set, when the holder is not defined in the tree."""
    holder = code_holder(p, ref)
    loc = p.r.location(holder)
    if loc is None:
        out.fails = (f"{holder.name} is not defined in the tree", "")
        return None
    params = {"class": holder.qualname}
    params.update(module_params(holder, loc[0]))
    return holder, loc, params


def _inner_attr(p: Planner, ref: ClassRef):
    """The ``__init__`` assignment on ``ref``'s MRO that builds its language model, else its inner
    model (:func:`auditor.engines.base.init_assign` over the attribute names vLLM's facts use);
    None when neither is built."""
    return init_assign(p.r, ref, LANGUAGE_MODEL_ATTRS) or init_assign(p.r, ref, HOLDER_ATTRS)


def route(p: Planner, ref: ClassRef, depth: int = 0) -> Route:
    """Follow the setter of ``ref`` (or plan it where it is missing) to the model that captures."""
    out = Route()
    _walk(p, ref, depth, out)
    return out


def _walk(p: Planner, ref: ClassRef, depth: int, out: Route) -> None:
    name = p.ctx.facts.setter_name()
    if depth > 3:
        out.fails = ("wrappers nested too deep to plan", "")
        return
    hit = find_setter(p.r, ref, name)
    if hit is not None:
        owner, _, sf = hit
        if sf is None or sf["raises_only"]:
            out.fails = (f"{owner.name}.{name} {'only raises' if sf else 'cannot be read'}",
                         f"make {owner.name}.{name} fill {CAPTURE_ATTR} on the inner model")
            return
        for path, attr, _ in sf["writes"]:
            if attr == CAPTURE_ATTR:
                if path == "":
                    out.holder = ref
                    return
                cls, _, why = attr_class(p.r, ref, path) if "." not in path else (None, None, f"self.{path}")
                if cls is None:
                    out.fails = (f"{owner.name}.{name} fills self.{path}.{CAPTURE_ATTR}, and {why}", "")
                    return
                out.holder = cls
                return
        for path, _, _, _called in sf["delegates"]:
            cls, _, why = attr_class(p.r, ref, path) if "." not in path else (None, None, f"self.{path}")
            if cls is None:
                out.fails = (f"{owner.name}.{name} delegates to self.{path}, and {why}", "")
                return
            _walk(p, cls, depth + 1, out)
            return
        out.fails = (f"{owner.name}.{name} fills no {CAPTURE_ATTR} and delegates to no model", "")
        return
    placed = _placed(p, ref, out)
    if placed is None:
        return
    holder, loc, params = placed
    found = _inner_attr(p, ref)
    if found is None:
        out.fails = (f"no __init__ on {ref.name}'s MRO builds an inner model (self.{', self.'.join(HOLDER_ATTRS)})",
                     f"define {name} on {holder.name}")
        return
    attr = found[1]
    cls, _, why = attr_class(p.r, ref, attr)
    if cls is None:
        out.fails = (f"the inner model of {holder.name} is not known statically: {why}", f"define {name} on {holder.name}")
        return
    params.update(setter=name, attr=attr)
    if _wrapper_like(p, cls, name):
        why = _routes_through(p, ref, attr, cls)
        if why is not None:
            out.fails = (why, f"define {name} on {holder.name} and pass the aux hidden states on")
            return
        params["kind"] = "delegate"
        out.invocations.append(Invocation(CODEMOD, "interface", loc[0], params))
        _walk(p, cls, depth + 1, out)
        return
    search = donor(p)
    d = search.donor
    if d is None:
        out.fails = (f"no model of this tree to copy the EAGLE-3 setter from: {search.why_none()}",
                     f"define {name} on {holder.name}")
        return
    fwd = p.r.lookup(ref, "forward")
    if fwd is not None and fwd[0] != holder and p.r.location(fwd[0]) is not None:
        # the setter goes beside the forward that must unpack: on the base of the MRO that defines it
        holder = fwd[0]
        loc = p.r.location(holder)
        params.update(module_params(holder, loc[0]), **{"class": holder.qualname})
    if fwd is None:
        out.fails = (f"no forward on {ref.name}'s MRO in the tree to unpack the aux hidden states",
                     f"define {name} on {holder.name} and unpack the aux hidden states in its forward")
        return
    first = d.setter.num_layers[0] if any(op != "const" for op, _ in d.setter.default) else None
    if first is not None and init_assign(p.r, ref, (first,)) is None:
        out.fails = (f"the donor {d.ref.name} reads the layer count from self.{'.'.join(d.setter.num_layers)}, "
                     f"which no __init__ on {ref.name}'s MRO sets", f"define {name} on {holder.name}")
        return
    params.update(kind="direct", shape=d.setter.as_dict(), wrapper=d.wrapper.as_dict(), donor=d.ref.name,
                  guard=_guard(p, ref, holder) if d.setter.guard else None)
    out.invocations.append(Invocation(CODEMOD, "interface", loc[0], params))
    out.holder = cls


def getter_donor(p: Planner, name: str) -> GetterSearch:
    """The tree's donor for the getter ``name`` (computed once per tree)."""
    key = ("sglang-getter-donor", name)
    if key not in p.ctx.cache:
        p.ctx.cache[key] = find_getter_donor(p.r, p.registry, name)
    return p.ctx.cache[key]


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
            cls, _, why = attr_class(p.r, cur, attr)
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
    placed = _placed(p, ref, out)
    if placed is None:
        return
    holder, loc, params = placed
    found = _inner_attr(p, ref)
    if found is not None:
        attr = found[1]
        cls, _, _why = attr_class(p.r, ref, attr)
        if cls is not None and (p.r.lookup(cls, name) is not None or _builds_inner(p, cls)):
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
