"""Gate ``resolve`` (EA300): what static analysis cannot follow for a target — its class does
not resolve, or a member on its MRO (or its holder model's) is changed by a construct the index
cannot read. ``rule.py`` holds the rule; the scan runs it first when the class does not resolve
(the gates are then not evaluated) and last otherwise."""

from rules.resolve.rule import ResolveRule

__all__ = ["ResolveRule"]
