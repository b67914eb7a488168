"""``eagle-audit explain``: the resolved class hierarchy of an architecture, as data."""

from __future__ import annotations

import difflib

from auditor.engines.sglang.facts import find_setter, forward_capture, trace_capture
from auditor.engines.vllm.facts import find_holder, holder_forward, target_facts
from auditor.index.resolve import ClassRef
from auditor.model.errors import AuditError
from auditor.orchestration.scan import Auditor


def positional_is_tree(value: str, loose: bool = False) -> bool:
    """Tell whether the one positional of ``explain`` names a tree (a folder or an archive that
    exists: ``explain site-packages/vllm``) rather than an architecture or a model_type, which are
    bare names. With ``loose`` (``explain --all``, which takes no architecture) a value written
    as a path (a separator or a dot) counts too, so that a missing path is reported as such.

    A name that does not exist on disk is never a tree: ``moonshotai/Kimi-K2`` stays a name and
    gets the Hugging Face repo id hint.
    """
    from pathlib import Path

    try:
        if Path(value).expanduser().exists():
            return True
    except (OSError, ValueError):
        return False
    return loose and any(c in value for c in "/\\.")


def explain(auditor: Auditor, arch: str) -> dict:
    """Explain one registry architecture.

    Returns a dict with at least ``architecture``, ``class`` (dotted qualname), ``path`` (relative
    to the folder that contains ``vllm/``), ``line``, ``empty_subclass``, ``mro`` (dotted names,
    external bases as imported, e.g. ``torch.nn.Module``), plus ``mro_detail``, ``protocols``
    (member → the class that provides it, or None), ``holder`` and ``language_model``.

    Raises:
        AuditError: ``arch`` is not in the registry (the message suggests close names).
    """
    reg = auditor.registry
    if arch not in reg.entries:
        close = difflib.get_close_matches(arch, reg.architectures(), n=4, cutoff=0.5)
        hint = f"; did you mean: {', '.join(close)}?" if close else ""
        raise AuditError(f"unknown architecture {arch!r}: not in this tree's model registry{hint}")
    if auditor.engine.name == "sglang":
        return explain_sglang(auditor, arch)
    r = auditor.resolver
    facts = target_facts(r, reg, arch)
    entry = reg.entries[arch]
    if facts.ref is None:
        return {"architecture": arch, **_unresolved_class(f"{entry.dotted_module}.{entry.class_name}", facts)}
    protocols = {}
    for pname in ("SupportsEagle3", "SupportsEagle"):
        p = auditor.facts.protocol(pname)
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
        **_class_and_mro(r, facts, auditor.facts.is_typing_protocol),
        "registry_tables": entry.tables,
        "code_holder": facts.code_holder.dotted if facts.code_holder else None,
        "protocols": protocols,
        "holder": holder,
        "language_model": h.language_arch,
        "platform": auditor.platform,
        "branches": branches_followed(auditor, modules),
    }


def _unresolved_class(dotted: str, facts) -> dict:
    """The class part of an explanation when the registry row names no class the tree resolves."""
    return {"class": dotted, "path": None, "line": None, "empty_subclass": False, "mro": [], "mro_detail": [],
            "resolved": False, "mro_problems": [f"cannot resolve the class: {facts.unresolved.reason}"]}


def _class_and_mro(r, facts, is_protocol=None) -> dict:
    """The class part of an explanation, the same for every engine: ``class``, ``path``, ``line``,
    ``empty_subclass``, ``mro``, ``mro_detail`` (each entry's place and emptiness, and whether it
    is a typing protocol when ``is_protocol`` is given), ``mro_problems``, ``resolved``."""
    detail = []
    for e in facts.mro:
        d = {"name": e.dotted}
        if isinstance(e, ClassRef):
            loc = r.location(e)
            c = r.cls(e)
            d.update(path=loc[0] if loc else None, line=loc[1] if loc else None, empty=bool(c and c.empty))
            if is_protocol is not None:
                d["protocol"] = is_protocol(e)
        detail.append(d)
    problems = ([facts.mro_error] if facts.mro_error else []) + [
        f"unresolved base {u.text}: {u.reason}" for u in facts.mro_unresolved]
    return {"class": facts.ref.dotted, "path": facts.path, "line": facts.line, "empty_subclass": facts.empty,
            "mro": [e.dotted for e in facts.mro], "mro_detail": detail, "mro_problems": problems,
            "resolved": True}


def branches_followed(auditor: Auditor, modules: set[str]) -> list[dict]:
    """The import-time branches the resolution followed in ``modules`` on the auditor's platform:
    ``module``, ``name``, ``path``, ``line`` of the binding used (None: no branch binds it) and
    ``branch`` (the tests that hold there, e.g. ``not (current_platform.is_rocm())``)."""
    out = []
    for (mod, name), (conds, line) in sorted(auditor.resolver.followed.items()):
        if mod not in modules:
            continue
        branch = " and ".join(t if want else f"not ({t})" for t, want in conds) or "no branch binds it"
        out.append({"module": mod, "name": name, "path": auditor.tree.path_of(mod), "line": line, "branch": branch})
    return out


def explain_sglang(auditor: Auditor, arch: str) -> dict:
    """:func:`explain` for an SGLang tree: the class and its MRO (``mro``, ``mro_detail``), the
    module whose ``EntryClass`` registers it (``registered_in``), the runner's call of the setter
    (``runner``), the setter found on the MRO (``setter``: defining class, path, line, or None),
    the setter's trace (``capture``: the classes it passes through, the model whose
    ``layers_to_capture`` it sets, and any problem), and that model's ``forward`` loops."""
    r, reg = auditor.resolver, auditor.registry
    facts = target_facts(r, reg, arch)
    entry = reg.entries[arch]
    base = {"architecture": arch, "engine": "sglang", "registered_in": {"path": entry.path, "line": entry.line}}
    if facts.ref is None:
        return {**base, **_unresolved_class(f"{entry.module}.{entry.class_name}", facts)}
    name = auditor.facts.setter_name()
    calls = auditor.facts.runner_calls()
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
        **_class_and_mro(r, facts),
        "role": reg.role(arch),
        "code_holder": facts.code_holder.dotted if facts.code_holder else None,
        "runner": [{"path": c.path, "line": c.line, "name": c.name, "checks_hasattr": c.checked} for c in calls[:3]],
        "setter": setter,
        "capture": capture,
    }
