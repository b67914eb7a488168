"""Gate ``mtp-draft`` (EA308): for ``--method mtp``, the tree's speculative config must rewrite the
target's HF config into a registered MTP draft architecture.

``facts.py`` finds the rewrite (``SpeculativeConfig.hf_config_override``) and the MTP method
strings in the tree (index pass) and interprets the rewrite per target; ``rule.py`` judges a
target. No fix: a draft architecture is a model implementation, not a local patch."""

from rules.mtp_draft.rule import MtpDraftRule

__all__ = ["MtpDraftRule"]
