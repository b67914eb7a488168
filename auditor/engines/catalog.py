"""The engines the tool knows, by name (see :class:`auditor.engines.base.Engine`)."""

from __future__ import annotations

from auditor.engines.base import Engine
from auditor.engines.sglang import ENGINE as SGLANG
from auditor.engines.vllm import ENGINE as VLLM
from auditor.model.errors import AuditError

#: Engine name → engine, vLLM first (the default).
ENGINES: dict[str, Engine] = {e.name: e for e in (VLLM, SGLANG)}


def engine_for(name: str | None) -> Engine:
    """The engine called ``name`` (``vllm``, ``sglang``); None gives vLLM.

    Raises:
        AuditError: an unknown name.
    """
    if name is None:
        return VLLM
    try:
        return ENGINES[name]
    except KeyError:
        raise AuditError(f"unknown engine {name!r} (one of {', '.join(ENGINES)})") from None
