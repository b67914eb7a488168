"""Gate ``parallel-drafting-mm`` (EA313): in releases whose proposer refuses multimodal targets
when parallel drafting is on, a multimodal target with ``--parallel-drafting`` is blocked.

``facts.py`` finds the guard and where the proposer calls it (index pass); ``rule.py`` decides
the call's condition for the run's options."""

from rules.parallel_drafting_mm.rule import ParallelDraftingMMRule

__all__ = ["ParallelDraftingMMRule"]
