"""Gate ``embed-sharing`` (EA314): the EAGLE/MTP proposer shares the target's embedding with the
drafter, and raises when the target language model has no ``.model`` or that inner model has no
``.embed_tokens`` / ``.embedding`` (with one pipeline stage).

``facts.py`` finds the proposer's required attribute chain (index pass); ``rule.py`` looks the
attributes up on the target's classes."""

from rules.embed_sharing.rule import EmbedSharingRule

__all__ = ["EmbedSharingRule"]
