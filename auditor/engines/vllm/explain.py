"""``eagle-audit explain`` for a vLLM tree: the resolved class hierarchy of one architecture, the
``SupportsEagle3``/``SupportsEagle`` members each class of its MRO provides (the tree's own
``vllm/model_executor/models/interfaces.py``), the holder model and its ``forward`` loops, and the
import-time branches followed."""

from __future__ import annotations

from auditor.engines.base import branches_followed, class_and_mro, unresolved_class
from auditor.engines.modelfiles import find_holder, holder_forward, target_facts
from auditor.index.resolve import Resolver
from auditor.index.targets import ClassRef


def explain(resolver: Resolver, registry, facts_, arch: str, platform: str) -> dict:
    """Explain ``arch`` (a row of the tree's ``registry``; ``facts_``: the tree's
    :class:`auditor.engines.vllm.facts.TreeFacts`) on ``platform``.

    Returns:
        ``architecture``, ``class`` (dotted qualname), ``path``, ``line``, ``empty_subclass``,
        ``mro``, ``mro_detail``, ``registry_tables``, ``code_holder``, ``protocols`` (member →
        the class that provides it, or None), ``holder``, ``language_model``, ``platform`` and
        ``branches``.
    """
    r = resolver
    reg = registry
    facts = target_facts(r, reg, arch)
    entry = reg.entries[arch]
    if facts.ref is None:
        return {"architecture": arch, **unresolved_class(f"{entry.dotted_module}.{entry.class_name}", facts)}
    protocols = {}
    for pname in ("SupportsEagle3", "SupportsEagle"):
        p = facts_.protocol(pname)
        if p is None:
            continue
        members = {}
        for m in sorted(p.members):
            hit = r.lookup(facts.ref, m)
            members[m] = hit[0].dotted if hit else None
        protocols[pname] = members
    h = find_holder(r, reg, facts.ref)
    modules = {entry.dotted_module} | {e.module for e in facts.mro if isinstance(e, ClassRef)}
    if h.ref is not None:
        modules.add(h.ref.module)
    holder = {"class": h.ref.dotted if h.ref else None, "via": h.via, "unknown": h.unknown,
              "path": h.path, "line": h.line}
    if h.ref is not None:
        fw = holder_forward(r, h.ref)
        if fw.defined_in is not None:
            holder["forward"] = {
                "defined_in": fw.defined_in.dotted, "path": fw.path, "line": fw.line, "returns_aux": fw.returns_aux,
                "loops": [{"line": lp.line, "index_var": lp.index_var, "index_kind": lp.index_kind,
                           "enumerate_start": lp.enumerate_start, "captures": lp.captures} for lp in fw.loops],
            }
    return {
        "architecture": arch,
        **class_and_mro(r, facts, facts_.is_typing_protocol),
        "registry_tables": entry.tables,
        "code_holder": facts.code_holder.dotted if facts.code_holder else None,
        "protocols": protocols,
        "holder": holder,
        "language_model": h.language_arch,
        "platform": platform,
        "branches": branches_followed(resolver, modules),
    }
