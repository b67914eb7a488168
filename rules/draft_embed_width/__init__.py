"""Gate ``draft-embed-width`` (EA316, a warning): a drafter that projects the target's embedding
(its own is a narrower placeholder) and a proposer that keeps the drafter's own embedding when the
widths differ.

``facts.py`` finds both by what the code does (index pass: the drafter's ``embed_tokens`` and
``2 * W`` projection over a concatenation; the proposer's width guard on embedding sharing);
``rule.py`` judges the draft a run builds. No fix: the proposer's sharing is engine logic."""

from rules.draft_embed_width.rule import DraftEmbedWidthRule

__all__ = ["DraftEmbedWidthRule"]
