"""Gate ``allowlist`` (EA301): the EAGLE-3 target model_type allowlist.

``facts.py`` finds it in the tree (index pass), ``rule.py`` judges a target, ``planner.py`` plans
the fix, ``codemod.py`` writes it."""

from rules.allowlist.rule import AllowlistRule

__all__ = ["AllowlistRule"]
