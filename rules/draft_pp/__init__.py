"""Gate ``draft-pp`` (EA309): under pipeline parallelism, in releases where the draft model
inherits the target's pipeline-parallel size, the draft class must implement ``SupportsPP``.

``facts.py`` finds how the speculative config builds the draft's parallel config and the model
config's pipeline-parallel refusal (index pass); ``rule.py`` judges a target. No fix: splitting a
draft into pipeline stages is a model change, not a local patch."""

from rules.draft_pp.rule import DraftPPRule

__all__ = ["DraftPPRule"]
