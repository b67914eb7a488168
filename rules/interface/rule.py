"""EA302 ``interface``: the target class does not satisfy the tree's ``SupportsEagle3`` protocol
as vLLM's runtime ``isinstance`` check decides it.

EAGLE-1/2 has no such target-side gate: ``SupportsEagle`` describes the *drafter*; vLLM reaches
``supports_eagle`` only through ``supports_any_eagle`` in ``process_eagle_weight``
(``vllm/model_executor/models/utils.py``), which the drafter's ``load_weights`` calls, and which
just returns when the protocol is absent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.index.facts import MethodFact
from auditor.index.targets import ClassRef
from auditor.model.findings import Finding, Severity
from rules.common.layer_ids import EXTRACTOR as LAYER_IDS_READS
from rules.common.layer_ids import KEY as LAYER_IDS_KEY
from rules.common.layer_ids import layer_ids
from rules.base import AuditTarget, Context, Example, Rule
from rules.common.hidden import DecoratorClosures, hidden_members
from rules.common.members import member_inert
from rules.interface.checker import checker_verdict
from rules.interface.runner import SetterCalls, setter_never_runs
from rules.interface.facts import RuntimeEagle3Calls, duck_typed_eagle3_members, runtime_eagle3_calls

#: The protocol the runner checks on the *target* per speculative method (``supports_eagle3`` in
#: vllm/model_executor/models/interfaces.py). EAGLE-1/2 has none (see the module docstring).
PROTOCOL_FOR_METHOD = {"eagle3": "SupportsEagle3"}

_EMPTY_SUBCLASS = '''
from vllm.model_executor.models.toy import ToyV2ForCausalLM


class ToyV4ForCausalLM(ToyV2ForCausalLM):
    pass
'''

_STRUCTURAL = '''
import torch.nn as nn
from vllm.model_executor.models.llama import LlamaModel


class StructuralForCausalLM(nn.Module):
    """Satisfies SupportsEagle3 without inheriting it: every member is defined."""

    supports_eagle3 = True
    has_own_lm_head = False
    has_own_embed_tokens = False

    def __init__(self, vllm_config=None):
        super().__init__()
        self.model = LlamaModel()

    def set_aux_hidden_state_layers(self, layers):
        self.model.aux_hidden_state_layers = layers

    def get_eagle3_aux_hidden_state_layers(self):
        return (2,)
'''

_STUB_ONLY = '''
import torch.nn as nn
from vllm.model_executor.models.interfaces import SupportsEagle3
from vllm.model_executor.models.llama import LlamaModel


class StubForCausalLM(nn.Module, SupportsEagle3):
    def __init__(self, vllm_config=None):
        super().__init__()
        self.model = LlamaModel()
'''


_DECORATED = '''
import functools

from vllm.model_executor.models.llama import LlamaForCausalLM

{decorator}

class DecoratedForCausalLM(LlamaForCausalLM):
    @deco
    def set_aux_hidden_state_layers(self, layers):
        self.model.aux_hidden_state_layers = layers
'''
_WRAPPER = '''
def deco(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        {body}
    return wrapper
'''


def _decorated(body: str | None) -> dict[str, str]:
    """The setter under ``@deco``: a decorator of the tree whose wrapper runs ``body``, or
    (None) one imported from outside the tree."""
    decorator = _WRAPPER.format(body=body) if body is not None else "from outside_the_tree import deco\n"
    return {"vllm/model_executor/models/decorated.py": _DECORATED.format(decorator=decorator)}


def missing_members(ctx: Context, target: AuditTarget) -> tuple[list[str], object, list[str]]:
    """``(missing member names, protocol or None, required member names)`` for the target's
    class under its method's protocol; without a protocol in the tree (vLLM ≤ 0.10.0), the
    members are the methods the runner calls by duck typing."""
    ref = target.facts.ref
    proto = ctx.facts.protocol(PROTOCOL_FOR_METHOD[target.method])
    if proto is not None:
        required = sorted(proto.members)
    elif target.method == "eagle3":
        required = duck_typed_eagle3_members(ctx)
    else:
        required = []
    disabled = disabled_members(ctx, ref, proto, required)
    if disabled:
        # a method member set to None, or removed so that only the protocol's stub is left: the
        # runner's call fails or does nothing, however the isinstance check decides
        return sorted(disabled), proto, required
    if proto is not None and proto.ref in target.facts.mro:
        # nominal: vLLM checks an instance, and typing's isinstance accepts any instance of a
        # class that inherits the protocol before it looks at members
        return [], proto, required
    missing = []
    for m in required:
        hit = ctx.resolver.lookup(ref, m)
        if hit is None:
            missing.append(m)
        elif proto is not None and m in proto.members and isinstance(proto.members[m][1], MethodFact):
            # typing's runtime check also rejects a callable member set to None
            fact = hit[1]
            if not isinstance(fact, MethodFact) and fact.value == "None":
                missing.append(m)
    return missing, proto, required


def disabled_members(ctx: Context, ref, proto, required: list[str]) -> dict[str, str]:
    """The protocol methods of ``required`` that the class disables, with how: a member whose
    value on the MRO is ``None`` (``set_aux_hidden_state_layers = None``, ``Cls.m = None``), or
    one removed (``del m`` in the body, ``del Cls.m``/``delattr`` after the class) so that the
    lookup only reaches the protocol's own stub.

    Args:
        ctx: the audit context.
        ref: the target class.
        proto: the tree's protocol (None: duck typing, where a removed method is simply missing).
        required: the member names to check.

    Returns:
        ``{member: "how, at path:line"}``; empty when nothing is disabled.
    """
    r = ctx.resolver
    out: dict[str, str] = {}
    for m in required:
        if proto is not None and m in proto.members and not isinstance(proto.members[m][1], MethodFact):
            continue
        hit = r.lookup(ref, m)
        if hit is not None and not isinstance(hit[1], MethodFact) and hit[1].value == "None":
            loc = r.location(hit[0])
            out[m] = f"{hit[0].name}.{m} is None (at {loc[0] if loc else '?'}:{hit[1].line})"
            continue
        if proto is None or hit is None or not proto.is_protocol_class(hit[0]):
            continue
        for e in r.mro(ref).entries:
            c = r.cls(e) if isinstance(e, ClassRef) else None
            if c is not None and m in c.removed and not proto.is_protocol_class(e):
                construct, line = c.removed[m]
                out[m] = f"`{construct}` at {r.tree.module(e.module).path}:{line} leaves only the protocol's stub"
                break
    return out


@cacheable
@dataclass
class InterfaceData:
    """EA302 details: the protocol members ``missing``, the ``code_holder`` (the class of the
    MRO that holds the code, where the fix goes), the ``protocol``, or the module ``unanalysed``
    that defines it."""

    missing: list[str] = field(default_factory=list)
    code_holder: str | None = None
    protocol: str | None = None
    unanalysed: str | None = None


@cacheable
@dataclass
class MemberData:
    """EA305/EA306 details: the protocol ``member`` concerned."""

    member: str


class InterfaceRule(Rule):
    """Protocol conformance, exactly as vLLM's runtime check decides it.

    What it does: reads the protocol's members (its own and its protocol bases') from the
    scanned tree's ``interfaces.py`` and looks each one up on the target class's C3 MRO.
    Declaring the protocol as a base satisfies it (the protocol class defines the members);
    so does defining every member without inheriting it.
    """

    CODE = "EA302"
    FACTS = (RuntimeEagle3Calls, SetterCalls, DecoratorClosures)
    GATE = "interface"
    NAME = "protocol-not-implemented"
    SUMMARY = ("the class does not satisfy the tree's `SupportsEagle3` protocol, member by member on its C3 MRO "
               "(EAGLE-1 has no target-side protocol gate)")
    WHY = (
        "The GPU model runner checks supports_eagle3(model) (isinstance against the "
        "runtime-checkable SupportsEagle3 protocol) after the weights are loaded and raises "
        "'Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested'. "
        "Empty subclasses such as DeepseekV3ForCausalLM(DeepseekV2ForCausalLM): pass inherit "
        "exactly what their base has."
    )
    HOW_TO_FIX = (
        "Declare the protocol on the nearest class of the MRO that holds code (never on an "
        "empty subclass) and implement the members the tree's protocol requires; the codemod "
        "does both."
    )
    FIX_AVAILABLE = True
    DATA = InterfaceData
    METHODS = ("eagle3",)
    VALID = [
        Example({"vllm/model_executor/models/llama.py": None}, "LlamaForCausalLM"),  # base tree's Llama
        Example({"vllm/model_executor/models/structural.py": _STRUCTURAL}, "StructuralForCausalLM",
                note="structural conformance without inheriting the protocol"),
        Example(_decorated("return fn(*args, **kwargs)"), "DecoratedForCausalLM",
                note="a decorator whose wrapper calls the setter and returns its result"),
    ]
    INVALID = [
        Example({"vllm/model_executor/models/toy4.py": _EMPTY_SUBCLASS}, "ToyV4ForCausalLM",
                expect_severity=Severity.ERROR, note="empty subclass of a class without SupportsEagle3"),
        Example(_decorated("return None"), "DecoratedForCausalLM",
                expect_severity=Severity.ERROR, note="a decorator whose wrapper never calls the setter"),
        Example(_decorated(None), "DecoratedForCausalLM", expect_severity=Severity.UNKNOWN,
                note="a decorator from outside the tree: its effect cannot be read"),
    ]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        facts = target.facts
        if facts.ref is None:
            return
        broken = ctx.facts.broken_module(ctx.facts.interfaces_module)
        if broken is not None:
            path, why = broken
            yield self.finding(Severity.UNKNOWN, f"{path} defines the protocol but is missing from the analysis: it "
                               + (why if why.startswith("cannot be read") else f"does not parse ({why})"),
                               path, None, unanalysed=path)
            return
        pname = PROTOCOL_FOR_METHOD.get(target.method)
        refused = checker_verdict(ctx, target.method, pname, ctx.facts.protocol(pname) if pname else None)
        if refused is not None:
            sev, msg, path, line = refused
            yield self.finding(Severity.ERROR if sev == "error" else Severity.UNKNOWN, msg, path, line)
            return
        dead = setter_never_runs(ctx)
        if dead is not None:
            yield self.finding(Severity.ERROR if dead[0] else Severity.UNKNOWN, dead[1], dead[2], dead[3], fix=False)
        missing, proto, required = missing_members(ctx, target)
        for msg, path, line in hidden_members(ctx, facts.ref, tuple(required)):
            yield self.finding(Severity.UNKNOWN, msg, path, line, fix=False)
        if not missing:
            yield from self._raising(ctx, target, proto, required)
            yield from self._inert(ctx, target, proto, required)
            return
        pname = PROTOCOL_FOR_METHOD[target.method]
        disabled = disabled_members(ctx, facts.ref, proto, required)
        holder = facts.code_holder or facts.ref
        loc = ctx.resolver.location(holder) or (facts.path, facts.line)
        where = ""
        if facts.empty and holder != facts.ref:
            where = f" ({facts.ref.name} is an empty subclass; the code lives in {holder.name})"
        if facts.mro_unresolved:
            bases = ", ".join(u.text for u in facts.mro_unresolved)
            yield self.finding(
                Severity.UNKNOWN,
                f"{facts.ref.name} lacks {pname} members {missing} on the resolved part of its MRO; "
                f"bases that cannot be resolved statically may provide them: {bases}",
                loc[0], loc[1],
            )
            return
        proto_txt = f"{pname} (defined at {proto.path}:{proto.line})" if proto else f"the duck-typed {target.method} methods"
        yield self.finding(
            Severity.ERROR,
            f"{facts.ref.name} does not satisfy {proto_txt}: missing {', '.join(missing)}{where}"
            + "".join(f"; {m}: {how}" for m, how in sorted(disabled.items())),
            loc[0], loc[1],
            missing=missing, code_holder=holder.dotted, protocol=pname,
        )

    def _inert(self, ctx: Context, target: AuditTarget, proto, required: list[str]) -> Iterator[Finding]:
        """For each method member of ``required``: blocked when what the model runs is not the
        method as written and the index follows that it does nothing (a decorator of the tree whose
        wrapper never calls it, or that returns None; an instance attribute set to None in
        ``__init__``), ``unknown`` when it cannot follow it (a decorator from outside the tree, an
        instance attribute or a change of ``type(self)`` bound to another value):
        :func:`rules.common.members.member_inert`."""
        for m in required:
            if proto is not None and m in proto.members and not isinstance(proto.members[m][1], MethodFact):
                continue
            eff = member_inert(ctx.resolver, target.facts.ref, m)
            if eff is not None:
                sev = Severity.ERROR if eff.blocked else Severity.UNKNOWN
                yield self.finding(sev, f"{target.facts.ref.name}.{m} does not run as written: {eff.why}",
                                   eff.path, eff.line, fix=False, missing=[m])

    def _raising(self, ctx: Context, target: AuditTarget, proto, required: list[str]) -> Iterator[Finding]:
        """``unknown`` for each member of ``required`` that the class (not the protocol) defines
        with a body that only raises (``raise NotImplementedError``): it passes the isinstance
        check, but a call from the engine raises, so the gate is not passed."""
        r = ctx.resolver
        for m in required:
            hit = r.lookup(target.facts.ref, m)
            if hit is None or not isinstance(hit[1], MethodFact) or not hit[1].raises_only:
                continue
            if proto is not None and proto.is_protocol_class(hit[0]):
                continue
            loc = r.location(hit[0])
            path = loc[0] if loc else target.facts.path
            yield self.finding(Severity.UNKNOWN,
                               f"{hit[0].name}.{m} (at {path}:{hit[1].line}) only raises: it satisfies the protocol "
                               f"check, but the engine's call to it for {target.method} raises, so the gate is not "
                               "passed", path, hit[1].line, missing=[m], code_holder=hit[0].dotted)


class StubMemberRule(Rule):
    """A protocol method inherited only as the protocol's own stub (``...``): vLLM's
    ``isinstance`` check passes, and the call returns None at run time."""

    CODE = "EA305"
    GATE = "stub-member"
    NAME = "protocol-stub-inherited"
    SUMMARY = "a protocol method inherited only as the protocol's `...` stub"
    WHY = (
        "Up to vLLM 0.17 the SupportsEagle3 methods are stubs whose body is '...'. A class that "
        "declares the protocol without overriding them passes the runtime check, then "
        "get_eagle3_aux_hidden_state_layers() returns None and set_aux_hidden_state_layers() "
        "does nothing."
    )
    HOW_TO_FIX = "Implement the method on the class that holds the model (the interface codemod writes it)."
    BLOCKING = False
    DATA = MemberData
    METHODS = ("eagle3",)
    VALID = [Example({}, "LlamaForCausalLM")]
    INVALID = [Example({"vllm/model_executor/models/stub.py": _STUB_ONLY}, "StubForCausalLM",
                       expect_severity=Severity.WARNING, note="inherits the protocol, overrides nothing")]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        facts = target.facts
        if facts.ref is None:
            return
        proto = ctx.facts.protocol(PROTOCOL_FOR_METHOD[target.method])
        if proto is None:
            return
        for name in sorted(proto.members):
            hit = ctx.resolver.lookup(facts.ref, name)
            if hit is None:
                continue
            owner, fact = hit
            if isinstance(fact, MethodFact) and fact.is_stub and proto.is_protocol_class(owner):
                loc = ctx.resolver.location(facts.code_holder or facts.ref)
                yield self.finding(
                    Severity.WARNING,
                    f"{facts.ref.name}.{name} is the {owner.name} stub: it passes vLLM's check and "
                    "does nothing at run time",
                    loc[0] if loc else None, loc[1] if loc else None, member=name,
                )


class StaleMemberRule(Rule):
    """A method named as in an older protocol that neither this tree's protocol nor its runtime
    calls: an override that is silently dead."""

    CODE = "EA306"
    FACTS = (RuntimeEagle3Calls,)
    GATE = "stale-member"
    NAME = "stale-protocol-method"
    SUMMARY = "a method named as in an older protocol that this tree never calls"
    WHY = (
        "vLLM 0.18 renamed get_eagle3_aux_hidden_state_layers to "
        "get_eagle3_default_aux_hidden_state_layers. A class that still defines the old name "
        "keeps running, but its custom layer choice is ignored: the runner calls the protocol's "
        "default instead."
    )
    HOW_TO_FIX = "Rename the method to the name the tree's protocol declares."
    BLOCKING = False
    DATA = MemberData
    METHODS = ("eagle3",)

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        facts = target.facts
        if facts.ref is None:
            return
        dc = target.options.draft_config
        if dc is not None and layer_ids(dc) is not None and ctx.facts.found(LAYER_IDS_READS):
            return  # the runner takes the drafter's layer ids: no get_eagle3 method decides, dead or not
        proto = ctx.facts.protocol("SupportsEagle3")
        live = set(proto.members) if proto else set()
        live |= runtime_eagle3_calls(ctx)
        seen: set[str] = set()
        called = sorted(n for n in live if n.startswith("get_eagle3"))
        for entry in facts.mro:
            c = ctx.resolver.cls(entry) if hasattr(entry, "qualname") else None
            if c is None or (proto and proto.is_protocol_class(entry)):
                continue
            for name, mf in c.methods.items():
                if name.startswith("get_eagle3") and name not in live and name not in seen:
                    seen.add(name)
                    loc = ctx.resolver.location(entry)
                    yield self.finding(Severity.WARNING, _stale_message(ctx, f"{entry.name}.{name}", called),
                                       loc[0] if loc else None, mf.line, member=name)


def _stale_message(ctx: Context, member: str, called: list[str]) -> str:
    """EA306's message: the dead ``member`` (``Class.method``), what this tree calls instead
    (``called``: the protocol's and the runner's ``get_eagle3*`` names), the drafter config's layer
    ids when the runner reads them (the ``aux-layers`` facts), and the rename that keeps the choice."""
    if not called:
        return (f"{member} is never called by this tree (neither its protocol nor its runner calls a get_eagle3 "
                "method): the layer choice it returns is ignored")
    instead = called[0] if len(called) == 1 else f"one of {', '.join(called)}"
    # the runner's read of a drafter's layer ids (the aux-layers facts) is cited by EA312; here, only whether it exists
    drafter = f", or the drafter config's {LAYER_IDS_KEY} when it lists them" if ctx.facts.found(LAYER_IDS_READS) else ""
    return (f"{member} is never called by this tree: the layer choice it returns is ignored; the runner takes "
            f"the aux hidden state layers from {', '.join(called)}{drafter}. To keep the model's choice, rename "
            f"the method to {instead}")
