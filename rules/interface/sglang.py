"""EA402 ``interface`` on SGLang trees: the target class lacks a method SGLang calls on it.

SGLang has no protocol: its runner calls ``model.set_eagle3_layers_to_capture(layer_ids)``
(0.5.10.post1 ``sglang/srt/model_executor/model_runner.py``, directly; 0.5.23
``model_executor/model_runner_components/attention_backend_setup.py``, after a ``hasattr``
check that raises ``ValueError``). The setter's name is read from the tree's runner. Its EAGLE
workers (which also serve NEXTN/MTP) call methods on the target when the drafter starts
(``get_embed_and_head()``: 0.5.10.post1 ``speculative/eagle_worker.py``); those are read from the
tree's speculative package (:mod:`auditor.engines.sglang.workers`) and required for ``eagle3``,
``eagle`` (EAGLE-1/2: the same workers, ``is_eagle()``; no setter) and ``mtp``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.index.facts import MethodFact
from auditor.model.findings import Finding, Severity
from rules.base import AuditTarget, Context, Example, Rule
from rules.common.examples import toy
from rules.common.members import member_inert

@cacheable
@dataclass
class SetterData:
    """EA402 details: the members ``missing`` on the target's MRO (their names, as SGLang calls
    them: the setter and/or what the EAGLE workers call), the ``code_holder`` (the class of the MRO
    that holds the code, where they would go), the ``runner`` call of the setter (``path:line``),
    ``sites``: member name → the ``path:line`` that calls it, and ``stub``: the member that is
defined but only raises (a finding of its own)."""

    missing: list[str] = field(default_factory=list)
    code_holder: str | None = None
    runner: str | None = None
    sites: dict[str, str] = field(default_factory=dict)
    stub: str | None = None


class SGLangInterfaceRule(Rule):
    """What SGLang calls on the target model, looked up on the target class's C3 MRO: the EAGLE-3
    setter the runner calls (EAGLE-3), and the methods the EAGLE workers call when the drafter
    starts (EAGLE-3 and NEXTN/MTP; read from the tree's speculative package, see
    :mod:`auditor.engines.sglang.workers`)."""

    CODE = "EA402"
    GATE = "interface"
    NAME = "eagle3-setter-missing"
    SUMMARY = "the target class lacks a method SGLang calls on it (set_eagle3_layers_to_capture, get_embed_and_head)"
    WHY = (
        "SGLang's model runner calls model.set_eagle3_layers_to_capture(layer_ids) when EAGLE-3 "
        "is enabled (duck typing: no protocol class), and its EAGLE workers (EAGLE, EAGLE-3, NEXTN) "
        "call target.get_embed_and_head() to share the embedding and LM head with the drafter. A "
        "class without them fails at start-up (AttributeError, or ValueError after the hasattr check "
        "of newer releases)."
    )
    HOW_TO_FIX = (
        "Define set_eagle3_layers_to_capture on the class (or the base that holds its code): store "
        "the layer ids on the inner model's layers_to_capture and set capture_aux_hidden_states, "
        "as the tree's Llama or DeepSeek-V2 models do; define get_embed_and_head returning the "
        "embedding and LM head weights. The codemod (sglang-interface) writes both in the shape of "
        "the tree's own capable models, or a delegation to the language model for a multimodal wrapper."
    )
    FIX_AVAILABLE = True
    METHODS = ("eagle", "eagle3", "mtp")
    ENGINES = ("sglang",)
    DATA = SetterData
    VALID = [Example(toy(setter=True), "ToyForCausalLM"),
             Example(toy(setter=True, embed_head=True, worker=True), "ToyForCausalLM"),
             Example(toy(setter=False, embed_head=True, worker=True), "ToyForCausalLM", method="mtp"),
             Example(toy(setter=False, embed_head=True, worker=True), "ToyForCausalLM", method="eagle",
                     note="EAGLE-1 does not call the EAGLE-3 setter")]
    INVALID = [Example(toy(setter=False), "ToyForCausalLM", expect_severity=Severity.ERROR, note="no setter"),
               Example(toy(setter=True, worker=True), "ToyForCausalLM", expect_severity=Severity.ERROR,
                       note="the EAGLE worker calls get_embed_and_head, which the target lacks"),
               Example(toy(setter=True, worker=True), "ToyForCausalLM", method="mtp",
                       expect_severity=Severity.ERROR, note="NEXTN runs the same worker"),
               Example(toy(setter=True, worker=True), "ToyForCausalLM", method="eagle",
                       expect_severity=Severity.ERROR, note="EAGLE-1 runs the same worker")]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        facts = target.facts
        if facts.ref is None:
            return
        r = ctx.resolver
        holder = facts.code_holder or facts.ref
        loc = r.location(holder) or (facts.path, facts.line)
        required: dict[str, str] = {}  # member -> who calls it (for the message)
        sites: dict[str, str] = {}
        runner = None
        name = ctx.facts.setter_name()
        if target.method == "eagle3":
            calls = ctx.facts.runner_calls()
            if not calls:
                yield self.finding(Severity.UNKNOWN, "this tree's runner never calls a set_eagle3* method on the model "
                                   "(no call in sglang/srt/model_executor, speculative or managers): cannot tell what "
                                   "EAGLE-3 requires of the target", loc[0], loc[1])
                return
            call = calls[0]
            runner = f"{call.path}:{call.line}"
            required[name] = (f"{runner} calls model.{name}(...)"
                              + (" after checking hasattr (ValueError)" if call.checked else " (AttributeError when absent)"))
            sites[name] = runner
        wm = ctx.facts.worker_members()
        for member, found in wm.calls.items():
            if member in required:
                continue
            more = f", and {len(found) - 1} more" if len(found) > 1 else ""
            required[member] = f"the EAGLE worker calls target.{member}() at {found[0].site()}{more}"
            sites[member] = f"{found[0].path}:{found[0].line}"
        missing, stubs = [], []
        for member in required:
            hit = r.lookup(facts.ref, member)
            if member == name:
                setter = ctx.facts.find_setter(r, facts.ref, name)
                if setter is None:
                    missing.append(member)
                elif setter[2] is not None and setter[2]["raises_only"]:
                    stubs.append((setter[0], setter[1], "only raises"))
                continue
            if hit is None:
                missing.append(member)
            elif isinstance(hit[1], MethodFact) and hit[1].is_stub:
                stubs.append((hit[0], hit[1], "is a stub (it only raises or does nothing)"))
        if missing:
            getattr_hit = r.lookup(facts.ref, "__getattr__")
            if facts.mro_unresolved or (getattr_hit is not None and isinstance(getattr_hit[1], MethodFact)):
                if facts.mro_unresolved:
                    why = ("bases that cannot be resolved statically may define them: "
                           + ", ".join(u.text for u in facts.mro_unresolved))
                else:
                    why = f"{getattr_hit[0].name}.__getattr__ may provide them at run time"
                yield self.finding(Severity.UNKNOWN, f"{facts.ref.name} has no {', '.join(missing)} on the resolved "
                                   f"part of its MRO; {why}", loc[0], loc[1])
                return
            where = ""
            if facts.empty and holder != facts.ref:
                where = f" ({facts.ref.name} is an empty subclass; the code lives in {holder.name})"
            what = "; ".join(f"{m} ({required[m]})" for m in missing)
            yield self.finding(Severity.ERROR, f"{facts.ref.name} lacks what SGLang calls on the target{where}: {what}",
                               loc[0], loc[1], missing=missing, code_holder=holder.dotted, runner=runner,
                               sites={m: sites[m] for m in missing})
        for owner, mf, how in stubs:
            oloc = r.location(owner)
            member = mf.name
            yield self.finding(Severity.ERROR, f"{owner.name}.{member} {how}: {required[member]}",
                               oloc[0] if oloc else None, mf.line, code_holder=owner.dotted, stub=member)
        if missing or stubs:
            return
        for member in required:
            eff = member_inert(r, facts.ref, member)
            if eff is not None:
                yield self.finding(Severity.ERROR if eff.blocked else Severity.UNKNOWN,
                                   f"{facts.ref.name}.{member} does not run as written ({required[member]}): {eff.why}",
                                   eff.path, eff.line, fix=False, missing=[member])
