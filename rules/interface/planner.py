"""Fix planner of the ``interface`` gate: the protocol and its members on the class of the MRO
that holds the code (never on an empty subclass), delegating through wrappers."""

from __future__ import annotations

import ast

from auditor.engines.base import init_assign
from auditor.engines.modelfiles import (
    HOLDER_ATTRS,
    LANGUAGE_MODEL_ATTRS,
    find_holder,
    holder_forward,
    target_facts,
)
from auditor.index.facts import MethodFact
from auditor.index.targets import ClassRef
from auditor.model.findings import Finding
from auditor.model.results import TargetResult
from rules.interface.facts import duck_typed_eagle3_members
from rules.interface.rule import PROTOCOL_FOR_METHOD
from rules.planning import Invocation, Planner, code_holder, module_params


def plan(p: Planner, result: TargetResult, f: Finding) -> None:
    if not f.fix_available:
        p.no(result.architecture, f, f"no codemod changes this: {f.message}")
        return
    facts = target_facts(p.r, p.registry, result.architecture)
    if facts.ref is None:
        p.no(result.architecture, f, f"cannot resolve the class of {result.architecture}")
        return
    _interface_on(p, facts.ref, result.architecture, f)



def _assigned_class(p: Planner, ref: ClassRef, owner: ClassRef, callee: str) -> ClassRef | None:
    """The class built by ``self.<attr> = <callee>(...)`` in ``owner.__init__`` (a class,
    ``self.<class attribute>(...)`` or ``self.<factory method>(...)``, looked up on ``ref``)."""
    if callee.startswith("self."):
        name = callee[len("self."):]
        hit = p.r.lookup(ref, name) if "." not in name else None
        if hit is None:
            return None
        defined_in, fact = hit
        if isinstance(fact, MethodFact):
            text = fact.returns_call[0].removesuffix("(...)") if fact.returns_call else None
        else:
            text = fact.value
        t = p.r.resolve_dotted(defined_in.module, text) if text else None
    else:
        t = p.r.resolve_dotted(owner.module, callee)
    return t if isinstance(t, ClassRef) else None


def _interface_on(p: Planner, ref: ClassRef, arch: str, f: Finding, depth: int = 0) -> bool:
    """Plan the protocol on the code holder of ``ref`` (the nearest non-empty class of its
    MRO). The members are written for this tree: none where the protocol's own defaults
    reach the inner model (``.model``, through the language model for wrappers), the layer
    methods on the inner model where the protocol has stubs, delegation for wrappers (whose
    inner class is planned too). Returns False when it cannot."""
    if depth > 3:
        p.no(arch, f, "wrappers nested too deep to plan")
        return False
    holder = code_holder(p, ref)
    loc = p.r.location(holder)
    if loc is None:
        p.no(arch, f, f"{holder.name} is not defined in the tree")
        return False
    pname = PROTOCOL_FOR_METHOD[p.method]
    proto = p.facts.protocol(pname)
    if proto is not None:
        methods = {n: mf for n, (_, mf) in proto.members.items() if isinstance(mf, MethodFact)}
        defaults = any(not mf.is_stub for mf in methods.values())
        needed = [n for n, mf in methods.items() if defaults or mf.is_stub]
    else:
        defaults = False
        needed = duck_typed_eagle3_members(p.ctx) if p.method == "eagle3" else []
    needed = sorted(needed, key=lambda n: (n != "set_aux_hidden_state_layers", n))
    # how the holder reaches the inner model
    lm = init_assign(p.r, holder, LANGUAGE_MODEL_ATTRS)
    h = find_holder(p.r, p.registry, ref)
    if lm is not None and lm[2] is not None and lm[2][0].endswith("init_vllm_registered_model"):
        attr, relation, inner = lm[1], "delegate", h.language_ref
        if inner is None and needed:
            p.no(arch, f, f"{holder.name} builds its language model from the checkpoint's config, so the "
                     f"class to delegate to is not known statically ({h.unknown or h.via})",
                     f"implement {', '.join(needed)} on {holder.name} and on its language model class")
            return False
        default_path = attr == "language_model" or p.r.lookup(holder, "get_language_model") is not None
    else:
        found = init_assign(p.r, holder, HOLDER_ATTRS)
        if found is None or found[2] is None:
            if needed:
                p.no(arch, f, f"no __init__ on {holder.name}'s MRO builds the inner model "
                         f"(self.{', self.'.join(HOLDER_ATTRS)}), so the layer methods have nothing to act on",
                         f"implement {', '.join(needed)} on {holder.name}")
                return False
            attr, relation, inner, default_path = "model", "direct", None, False
        else:
            owner, attr, call, _ = found
            t = _assigned_class(p, ref, owner, call[0])
            if h.ref is not None and t == h.ref:
                relation, inner = "direct", None
            elif t is not None:
                relation, inner = "delegate", t  # self.model = XForCausalLM(...): a nested wrapper
            else:
                p.no(arch, f, f"the inner model of {holder.name} is not known statically "
                         f"({h.unknown or h.via})", f"implement {', '.join(needed)} on {holder.name}")
                return False
            default_path = relation == "direct" and attr == "model"
    layers = "layers"
    if relation == "direct" and h.ref is not None:
        layers = _layers_attr(p, h.ref)
        default_path = default_path and layers == "layers"  # the default getter reads .model.layers
    if defaults and relation == "delegate" and inner is not None and default_path:
        # the protocol default unwraps the language model, then needs its .model(.layers)
        iholder = code_holder(p, inner)
        ifound = init_assign(p.r, iholder, HOLDER_ATTRS)
        ih = find_holder(p.r, p.registry, inner)
        default_path = (ifound is not None and ifound[1] == "model" and ih.ref is not None
                        and _layers_attr(p, ih.ref) == "layers")
    members: list[dict] = []
    if not (defaults and default_path):
        for name in needed:
            hit = p.r.lookup(holder, name)
            if hit is not None and not (proto is not None and proto.is_protocol_class(hit[0])):
                continue  # implemented on the holder's MRO already
            if name == "set_aux_hidden_state_layers":
                kind = "set"
            elif name.startswith("get_eagle3"):
                kind = "get"
            else:
                p.no(arch, f, f"the tree's {pname} requires {name}, which the codemod has no template for",
                         f"implement {name} on {holder.name}")
                return False
            if relation == "delegate":
                kind = f"delegate-{kind}"
            else:
                kind = "set-inner" if kind == "set" else "get-default"
            members.append({"name": name, "kind": kind, "attr": attr, "layers": layers})
            if kind in ("set", "set-inner", "delegate-set"):
                p.explicit_setter.add(arch)
    if relation == "delegate" and inner is not None and (members or defaults):
        if any(_lacks(p, inner, m, proto) for m in needed) or (
                defaults and proto is not None and not p.r.is_subclass(inner, proto.ref)):
            if not _interface_on(p, inner, inner.name, f, depth + 1):
                return False
    add_base = proto is not None and not p.r.is_subclass(holder, proto.ref)
    if not add_base and not members:
        return True
    params = {
        "class": holder.qualname,
        "protocol": pname if add_base else None,
        "protocol_module": proto.ref.module if proto is not None else None,
        "members": members,
    }
    params.update(module_params(holder, loc[0]))
    p.add(Invocation("interface", "interface", loc[0], params, [arch]))
    return True


def _layers_attr(p: Planner, holder: ClassRef) -> str:
    """The attribute of the inner model that holds its decoder layers, as its forward loop
    iterates it (``self.layers``; GPT-2's ``self.h``)."""
    fwd = holder_forward(p.r, holder)
    if not fwd.loops or fwd.path is None:
        return "layers"
    line = fwd.loops[0].line
    try:
        mod = ast.parse(p.source.read(fwd.path))
    except (SyntaxError, ValueError, KeyError):
        return "layers"
    for node in ast.walk(mod):
        if isinstance(node, ast.For) and node.lineno == line:
            for n in ast.walk(node.iter):
                if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
                        and n.attr not in ("start_layer", "end_layer")):
                    return n.attr
    return "layers"


def _lacks(p: Planner, ref: ClassRef, name: str, proto) -> bool:
    """True when ``name`` is missing on ``ref``'s MRO or only the protocol's stub."""
    hit = p.r.lookup(ref, name)
    if hit is None:
        return True
    return proto is not None and proto.is_protocol_class(hit[0]) and isinstance(hit[1], MethodFact) and hit[1].is_stub
