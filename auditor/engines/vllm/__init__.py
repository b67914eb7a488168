"""The vLLM engine vocabulary: where vLLM keeps its model registry, protocols, holder models,
HF config registry and model_type aliases. Every vLLM-specific name of the analysis lives here
(the gates' own trigger words live with their gates in ``rules/``)."""

from auditor.engines.base import Engine
from auditor.engines.modelfiles import HolderFacts, target_facts
from auditor.engines.vllm.explain import explain
from auditor.engines.vllm.facts import TreeFacts
from auditor.engines.vllm.platforms import platform_conditions
from auditor.engines.vllm.registry import TABLES_EXTRACTOR, Registry
from auditor.engines.vllm.runtime_registry import RUNTIME_REGISTRY_EXTRACTOR
from auditor.hf.targets import resolve_targets

#: The extractors the engine needs in the summary pass (the registry tables, how the run-time
#: registry object is built from them).
EXTRACTORS = (TABLES_EXTRACTOR, RUNTIME_REGISTRY_EXTRACTOR)


def _prefetch(tree) -> set[str]:
    """The modules besides the registry's that a full vLLM scan reads: the HF config classes of
    multimodal targets, the protocols and the HF config registry."""
    wave = {f for f in tree.files if f.startswith("vllm/transformers_utils/configs/")}
    for mod in ("vllm.model_executor.models.interfaces", "vllm.transformers_utils.config"):
        p = tree.path_of(mod)
        if p:
            wave.add(p)
    return wave


def _holder(ctx, ref) -> tuple[str | None, str | None]:
    """The holder model and language-model architecture of a target class (the
    :class:`auditor.engines.modelfiles.HolderFacts` the aux-capture gate reads)."""
    h = ctx.get(HolderFacts, ref)[0]
    return (h.ref.dotted if h.ref else None), h.language_arch


#: vLLM as an :class:`auditor.engines.base.Engine`.
ENGINE = Engine(
    name="vllm",
    display="vLLM",
    package="vllm",
    extractors=EXTRACTORS,
    make_registry=Registry,
    make_facts=TreeFacts,
    conditions=platform_conditions,
    methods=("eagle3", "eagle", "mtp"),
    model_scopes=("vllm/model_executor/models/", "vllm/models/"),
    prefetch=_prefetch,
    holder=_holder,
    explain=explain,
    target=target_facts,
    resolve_targets=resolve_targets,
    release_option="vllm_version",
    models_drafter=True,
    verifiable=True,
)
