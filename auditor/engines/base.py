"""What the layers above need to know about a serving engine, whichever it is.

An :class:`Engine` describes one engine package (``auditor/engines/vllm``,
``auditor/engines/sglang``): the top-level package of its trees, the fact extractors its index
pass needs, how to build its registry and tree-wide facts over a resolver, the import-time
conditions of a platform, where its model code lives, and the speculative methods it audits.
The orchestration layer picks the engine of a tree (:func:`auditor.engines.catalog.engine_for`)
and never names an engine's modules itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from auditor.index.summary import Extractor


@dataclass(frozen=True)
class Engine:
    """One serving engine's vocabulary.

    Attributes:
        name: the engine id used on the command line and in reports (``vllm``, ``sglang``).
        display: how messages name it (``vLLM``, ``SGLang``).
        package: the top-level package of its trees (``vllm``, ``sglang``).
        extractors: the fact extractors its index pass runs (the rules' own are added by the
            scan).
        make_registry: ``resolver -> registry``: the architectures of a tree (an object with
            ``entries``, ``architectures()``, ``role(arch)``, ``class_ref(arch)``, ``drafters()``,
            ``path``). Raises ``AuditError`` when the tree has no readable registry.
        make_facts: ``(resolver, registry) -> tree facts`` (an object with ``found``,
            ``candidate_paths``, ``unanalysed``, ``broken_module``).
        conditions: ``platform -> {expression text: value}`` for the resolver's evaluation of
            import-time branches, or None when the engine's trees are not audited per platform.
        methods: the speculative methods it audits.
        model_scopes: path prefixes of its model code (the modules a full scan summarises in
            waves, following imports).
        prefetch: ``tree -> paths`` of the modules besides the registry's that a full scan reads.
        holder: ``(context, class ref) -> (holder class dotted or None, language-model
            architecture or None)`` for a target's report line, after the rules ran.
    """

    name: str
    display: str
    package: str
    extractors: tuple[Extractor, ...]
    make_registry: Callable[[Any], Any]
    make_facts: Callable[[Any, Any], Any]
    conditions: Callable[[str], Mapping[str, object] | None]
    methods: tuple[str, ...]
    model_scopes: tuple[str, ...]
    prefetch: Callable[[Any], set[str]]
    holder: Callable[[Any, Any], tuple[str | None, str | None]]
