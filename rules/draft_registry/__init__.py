"""Gate ``draft-registry`` (EA311): with ``--draft-config``, the drafter checkpoint's architecture,
rewritten as the tree rewrites EAGLE drafters, must be registered.

``facts.py`` finds the rewrite (``EAGLEConfig.__init__`` in
``vllm/transformers_utils/configs/eagle.py``, index pass) and applies it; ``rule.py`` judges a
run. No fix: an unregistered drafter architecture is a missing model implementation."""

from rules.draft_registry.rule import DraftRegistryRule

__all__ = ["DraftRegistryRule"]
