"""The SGLang engine vocabulary: its model registry (each model module's ``EntryClass``), the
duck-typed EAGLE-3 setter the runner calls, and the capture of auxiliary hidden states by the
inner model (see :mod:`auditor.engines.sglang.facts`). The gates' rules live in ``rules/``
beside the vLLM ones, under the same gate ids."""

from auditor.engines.base import Engine
from auditor.engines.modelfiles import target_facts
from auditor.engines.sglang.explain import explain
from auditor.engines.sglang.drafts import DRAFT_MAP_EXTRACTOR
from auditor.engines.sglang.capture import CAPTURE_EXTRACTOR
from auditor.engines.sglang.facts import CaptureTraceFacts
from auditor.engines.sglang.vocabulary import SGLangFacts
from auditor.engines.sglang.entry import ENTRY_CHANGES_EXTRACTOR, ENTRY_EXTRACTOR, ENTRY_REFS_EXTRACTOR, MODELS_DIR
from auditor.engines.sglang.registry import Registry
from auditor.engines.sglang.workers import WORKERS_EXTRACTOR
from auditor.hf.targets import resolve_targets

#: The extractors the engine needs in the summary pass.
EXTRACTORS = (ENTRY_EXTRACTOR, ENTRY_CHANGES_EXTRACTOR, ENTRY_REFS_EXTRACTOR, CAPTURE_EXTRACTOR, DRAFT_MAP_EXTRACTOR,
              WORKERS_EXTRACTOR)


def _holder(ctx, ref) -> tuple[str | None, str | None]:
    """The model that captures for a target class, and the registered language model its setter
    delegates to (the :class:`auditor.engines.sglang.facts.CaptureTraceFacts` the aux-capture
    gate reads)."""
    t = ctx.get(CaptureTraceFacts, ref)
    return (t.holder.dotted if t.holder else None), t.language_arch


#: SGLang as an :class:`auditor.engines.base.Engine`. Its trees are not audited per platform
#: (no import-time branch is evaluated: the first binding of a name is followed).
ENGINE = Engine(
    name="sglang",
    display="SGLang",
    package="sglang",
    extractors=EXTRACTORS,
    make_registry=Registry,
    make_facts=SGLangFacts,
    conditions=lambda platform: None,
    methods=("eagle3", "eagle", "mtp"),
    model_scopes=(MODELS_DIR,),
    prefetch=lambda tree: set(),
    holder=_holder,
    explain=explain,
    target=target_facts,
    resolve_targets=resolve_targets,
    release_option="sglang_version",
)
