"""``eagle-audit explain``: the resolved class hierarchy of an architecture, as data."""

from __future__ import annotations

import difflib

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

    Returns a dict with at least ``architecture``, ``engine`` (the engine's name: ``vllm``,
    ``sglang``, as in the other JSON reports), ``class`` (dotted qualname), ``path`` (relative
    to the folder that contains ``vllm/``), ``line``, ``empty_subclass``, ``mro`` (dotted names,
    external bases as imported, e.g. ``torch.nn.Module``), plus ``mro_detail``, ``protocols``
    (member → the class that provides it, or None), ``holder`` and ``language_model``: the
    engine's own explanation (:attr:`auditor.engines.base.Engine.explain`; an SGLang tree's says
    how its setter reaches the model that captures).

    Raises:
        AuditError: ``arch`` is not in the registry (the message suggests close names).
    """
    reg = auditor.registry
    if arch not in reg.entries:
        close = difflib.get_close_matches(arch, reg.architectures(), n=4, cutoff=0.5)
        hint = f"; did you mean: {', '.join(close)}?" if close else ""
        raise AuditError(f"unknown architecture {arch!r}: not in this tree's model registry{hint}")
    info = auditor.engine.explain(auditor.resolver, reg, auditor.facts, arch, auditor.platform)
    return {"architecture": arch, "engine": auditor.engine.name, **info}
