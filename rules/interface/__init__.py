"""Gate ``interface`` (EA302) and its warnings ``stub-member`` (EA305), ``stale-member`` (EA306):
the tree's ``SupportsEagle3`` protocol on the target's MRO.

``facts.py`` reads what the runtime calls, ``rule.py`` judges a target, ``planner.py`` plans the
fix, ``codemod.py`` writes it."""

from rules.interface.rule import InterfaceRule, StaleMemberRule, StubMemberRule

__all__ = ["InterfaceRule", "StaleMemberRule", "StubMemberRule"]
