"""The SGLang engine vocabulary: its model registry (each model module's ``EntryClass``), the
duck-typed EAGLE-3 setter the runner calls, and the capture of auxiliary hidden states by the
inner model (see :mod:`auditor.engines.sglang.facts`). The gates' rules live in ``rules/``
beside the vLLM ones, under the same gate ids."""

from auditor.engines.base import Engine
from auditor.engines.sglang.drafts import DRAFT_MAP_EXTRACTOR
from auditor.engines.sglang.facts import CAPTURE_EXTRACTOR, TreeFacts, trace_capture
from auditor.engines.sglang.registry import ENTRY_EXTRACTOR, MODELS_DIR, Registry
from auditor.engines.sglang.workers import WORKERS_EXTRACTOR

#: The extractors the engine needs in the summary pass.
EXTRACTORS = (ENTRY_EXTRACTOR, CAPTURE_EXTRACTOR, DRAFT_MAP_EXTRACTOR, WORKERS_EXTRACTOR)


def _holder(ctx, ref) -> tuple[str | None, str | None]:
    """The model that captures for a target class, and the registered language model its setter
    delegates to (the aux-capture rule's trace, when it ran)."""
    key = ("sglang-trace", ref)
    t = ctx.cache[key] if key in ctx.cache else trace_capture(ctx.resolver, ref, ctx.facts.setter_name(), ctx.registry)
    return (t.holder.dotted if t.holder else None), t.language_arch


#: SGLang as an :class:`auditor.engines.base.Engine`. Its trees are not audited per platform
#: (no import-time branch is evaluated: the first binding of a name is followed).
ENGINE = Engine(
    name="sglang",
    display="SGLang",
    package="sglang",
    extractors=EXTRACTORS,
    make_registry=Registry,
    make_facts=TreeFacts,
    conditions=lambda platform: None,
    methods=("eagle3", "eagle", "mtp"),
    model_scopes=(MODELS_DIR,),
    prefetch=lambda tree: set(),
    holder=_holder,
)
