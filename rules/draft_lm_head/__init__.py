"""Gate ``draft-lm-head`` (EA317, a warning): the drafter builds no LM head of its own (its
``__init__`` skips its base's), and the proposer's head sharing reads the drafter's head when the
drafter checkpoint ships one.

``facts.py`` finds each class's ``__init__`` shape and the proposer's read by what the code does
(index pass); ``rule.py`` follows the draft's construction along its MRO. No fix: the drafter is
engine code, and the remedy is the checkpoint served."""

from rules.draft_lm_head.rule import DraftLmHeadRule

__all__ = ["DraftLmHeadRule"]
