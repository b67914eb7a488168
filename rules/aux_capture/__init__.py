"""Gate ``aux-capture`` (EA303) and the warning ``pp-relative-index`` (EA307): the holder model's
forward must capture auxiliary hidden states.

``rule.py`` judges a target, ``planner.py`` plans the fix, ``codemod.py`` writes it."""

from rules.aux_capture.rule import AuxCaptureRule, PPRelativeIndexRule

__all__ = ["AuxCaptureRule", "PPRelativeIndexRule"]
