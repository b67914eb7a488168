"""The vLLM engine vocabulary: where vLLM keeps its model registry, protocols, holder models,
HF config registry and model_type aliases. Every vLLM-specific name of the analysis lives here
(the gates' own trigger words live with their gates in ``rules/``)."""

from auditor.engines.vllm.registry import TABLES_EXTRACTOR

#: The extractors the engine needs in the summary pass (the registry tables).
EXTRACTORS = (TABLES_EXTRACTOR,)
