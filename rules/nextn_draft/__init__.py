"""Gate ``mtp-draft`` on SGLang trees (EA405): the NextN/MTP draft the tree builds for a target.

SGLang's mechanism differs from vLLM's (``hf_config_override``), so it has its own room; the gate
id is the same. ``rule.py`` judges a target."""

from rules.nextn_draft.rule import SGLangMTPDraftRule

__all__ = ["SGLangMTPDraftRule"]
