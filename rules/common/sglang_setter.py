"""The route of SGLang's EAGLE-3 setter from a target to the inner model whose ``forward`` must
capture, as planned for a fix (:func:`route`), and the tree's donor models
(:class:`SetterDonor`, :class:`GetterDonor`): shared by the ``interface`` and ``aux-capture``
planners of SGLang trees."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from auditor.engines.base import init_assign
from auditor.engines.modelfiles import HOLDER_ATTRS, LANGUAGE_MODEL_ATTRS
from auditor.index.providers import FactProvider
from auditor.index.targets import ClassRef, External, FunctionRef
from rules.planning import Invocation, Planner, code_holder, module_params

#: Codemod name of the setter (``rules.registry.CODEMODS``).
CODEMOD = "sglang-interface"


@dataclass
class Route:
    """Where a target's setter leads once fixed: the ``holder`` (the inner model whose ``forward``
    must capture), the setter ``invocations`` to plan, or the reason it ``fails`` (with a hint)."""

    holder: ClassRef | None = None
    invocations: list[Invocation] = field(default_factory=list)
    fails: tuple[str, str] | None = None


class SetterDonor(FactProvider):
    """The tree's donor of the EAGLE-3 setter (:func:`auditor.engines.sglang.donor.find_donor`
    over ``sglang/srt/models/``): a tree-wide fact (key None)."""

    @classmethod
    def compute(cls, ctx, key=None):
        return ctx.facts.find_donor(ctx.resolver, ctx.registry, ctx.facts.setter_name())


class GetterDonor(FactProvider):
    """The tree's donor of the getter named by the key (``get_embed_and_head``:
    :func:`auditor.engines.sglang.donor.find_getter_donor`)."""

    @classmethod
    def compute(cls, ctx, key: str):
        return ctx.facts.find_getter_donor(ctx.resolver, ctx.registry, key)


def donor(p: Planner):
    """The tree's :class:`SetterDonor`."""
    return p.ctx.get(SetterDonor)



def _wrapper_like(p: Planner, cls: ClassRef, name: str) -> bool:
    """True when ``cls`` is itself a wrapper (it has the setter, or builds an inner model and
    its ``forward`` loops over no layers), so the setter should be delegated to it."""
    return p.facts.find_setter(p.r, cls, name) is not None or builds_inner(p, cls)


def builds_inner(p: Planner, cls: ClassRef) -> bool:
    """True when ``cls`` is itself a wrapper: it builds an inner model and its ``forward`` loops
    over no layers."""
    fc = p.facts.forward_capture(p.r, cls)
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
    fn = p.facts.method_ast(p.r, hit[0], "forward") if hit is not None else None
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


def place_setter(p: Planner, ref: ClassRef, out: Route) -> tuple[ClassRef, tuple[str, int], dict] | None:
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


def inner_attr(p: Planner, ref: ClassRef):
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
    hit = p.facts.find_setter(p.r, ref, name)
    if hit is not None:
        owner, _, sf = hit
        if sf is None or sf["raises_only"]:
            out.fails = (f"{owner.name}.{name} {'only raises' if sf else 'cannot be read'}",
                         f"make {owner.name}.{name} fill {p.facts.capture_attr} on the inner model")
            return
        for path, attr, _ in sf["writes"]:
            if attr == p.facts.capture_attr:
                if path == "":
                    out.holder = ref
                    return
                cls, _, why = p.facts.attr_class(p.r, ref, path) if "." not in path else (None, None, f"self.{path}")
                if cls is None:
                    out.fails = (f"{owner.name}.{name} fills self.{path}.{p.facts.capture_attr}, and {why}", "")
                    return
                out.holder = cls
                return
        for path, _, _, _called in sf["delegates"]:
            cls, _, why = p.facts.attr_class(p.r, ref, path) if "." not in path else (None, None, f"self.{path}")
            if cls is None:
                out.fails = (f"{owner.name}.{name} delegates to self.{path}, and {why}", "")
                return
            _walk(p, cls, depth + 1, out)
            return
        out.fails = (f"{owner.name}.{name} fills no {p.facts.capture_attr} and delegates to no model", "")
        return
    placed = place_setter(p, ref, out)
    if placed is None:
        return
    holder, loc, params = placed
    found = inner_attr(p, ref)
    if found is None:
        out.fails = (f"no __init__ on {ref.name}'s MRO builds an inner model (self.{', self.'.join(HOLDER_ATTRS)})",
                     f"define {name} on {holder.name}")
        return
    attr = found[1]
    cls, _, why = p.facts.attr_class(p.r, ref, attr)
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
