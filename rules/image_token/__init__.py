"""Gate ``image-token`` (EA304): multimodal targets in the EAGLE proposer.

``facts.py`` finds the proposer's branches (index pass), ``rule.py`` judges a target,
``planner.py`` plans the fix, ``codemod.py`` writes it."""

from rules.image_token.rule import ImageTokenRule

__all__ = ["ImageTokenRule"]
