"""Fix planner of the ``allowlist`` gate: add the target's text model_type to the allowlist."""

from __future__ import annotations

from auditor.model.findings import Finding
from auditor.model.inputs import is_model_type
from auditor.model.results import TargetResult
from rules.allowlist.facts import allowlist_for
from rules.planning import Invocation, Planner


def plan(p: Planner, result: TargetResult, f: Finding) -> None:
    found = allowlist_for(p.ctx, p.method)
    mt = (f.data.model_type if f.data else None) or result.text_model_type
    if found is None or not mt:
        p.no(result.architecture, f, "the allowlist or the target's text model_type is unknown",
                 "pass --model-type with the checkpoint's text model_type")
        return
    if not is_model_type(mt):  # e.g. derived from a registry key of the scanned tree
        p.no(result.architecture, f, f"the text model_type {mt!r} is not shaped like a model_type, so it "
             "is never written into the tree", "pass --model-type with the checkpoint's text model_type")
        return
    path, fact = found
    if fact.kind == "refuses-all":
        p.no(result.architecture, f, f"{fact.function}() refuses the method for every model, not by model_type",
             "remove the unconditional test from the tree's speculative config validation")
        return
    p.add(Invocation("allowlist", "allowlist", path,
                         {"model_types": [mt], "method": p.method, "function": fact.function},
                         [result.architecture]))
    others = admitted_too(p, mt)
    if others:
        shown = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
        p.note(f"allowlist ({path}): the list is matched by substring, so adding {mt!r} also admits the "
               f"model_types {shown} that this tree registers")


def admitted_too(p: Planner, model_type: str) -> list[str]:
    """The other model_types the tree registers (vLLM's ``_CONFIG_REGISTRY`` keys, from
    ``vllm/transformers_utils/config.py``) that contain ``model_type``: a substring-matched
    allowlist admits them too once ``model_type`` is on it."""
    table = getattr(p.registry, "config_registry", None)
    known = table().keys() if table is not None else ()
    return sorted(m for m in known if isinstance(m, str) and m != model_type and model_type in m)
