"""``eagle-audit explain`` for an SGLang tree: the class and its MRO, the module whose
``EntryClass`` registers it, the runner's call of the EAGLE-3 setter, the setter on the MRO, its
trace to the model that captures, and that model's ``forward`` loops."""

from __future__ import annotations

from auditor.engines.base import class_and_mro, unresolved_class
from auditor.engines.modelfiles import find_holder, target_facts
from auditor.engines.sglang.facts import find_setter, forward_capture, trace_capture
from auditor.index.resolve import Resolver


def explain(resolver: Resolver, registry, facts_, arch: str, platform: str) -> dict:
    """``eagle-audit explain`` for an SGLang tree (``facts_``: its
    :class:`auditor.engines.sglang.facts.TreeFacts`; ``platform`` is not used: SGLang trees are not
    audited per platform): the class and its MRO (``mro``, ``mro_detail``), the
    module whose ``EntryClass`` registers it (``registered_in``), the runner's call of the setter
    (``runner``), the setter found on the MRO (``setter``: defining class, path, line, or None),
    the setter's trace (``capture``: the classes it passes through, the model whose
    ``layers_to_capture`` it sets, and any problem), and that model's ``forward`` loops."""
    r, reg = resolver, registry
    facts = target_facts(r, reg, arch)
    entry = reg.entries[arch]
    base = {"architecture": arch, "registered_in": {"path": entry.path, "line": entry.line}}
    if facts.ref is None:
        return {**base, **unresolved_class(f"{entry.module}.{entry.class_name}", facts)}
    name = facts_.setter_name()
    calls = facts_.runner_calls()
    hit = find_setter(r, facts.ref, name)
    setter = None
    if hit is not None:
        loc = r.location(hit[0])
        setter = {"name": name, "defined_in": hit[0].dotted, "path": loc[0] if loc else None, "line": hit[1].line}
    trace = trace_capture(r, facts.ref, name, reg)
    capture = {
        "steps": [{"class": st.ref.dotted, "via": st.via,
                   "setter": st.setter_owner.dotted if st.setter_owner else None} for st in trace.steps],
        "holder": trace.holder.dotted if trace.holder else None,
        "via": trace.holder_via or None,
        "problems": [{"kind": k, "message": m, "path": p, "line": ln} for k, m, p, ln in trace.problems],
        "language_model": trace.language_arch,
    }
    holder_ref = trace.holder
    if holder_ref is None and hit is None:
        h = find_holder(r, reg, facts.ref)
        holder_ref = h.ref
        capture.update(holder=h.ref.dotted if h.ref else None, via=h.via, unknown=h.unknown)
    if holder_ref is not None:
        fw = forward_capture(r, holder_ref)
        if fw.defined_in is not None:
            capture["forward"] = {"defined_in": fw.defined_in.dotted, "path": fw.path, "line": fw.line,
                                  "returns_aux": fw.returns_aux, "loops": fw.loops}
    return {
        **base,
        **class_and_mro(r, facts),
        "role": reg.role(arch),
        "code_holder": facts.code_holder.dotted if facts.code_holder else None,
        "runner": [{"path": c.path, "line": c.line, "name": c.name, "checks_hasattr": c.checked} for c in calls[:3]],
        "setter": setter,
        "capture": capture,
    }
