"""Gate ``draft-registry`` (EA311): with ``--draft-config``, the drafter checkpoint's architecture,
rewritten as the tree rewrites EAGLE drafters, must be registered.

``facts.py`` finds the rewrite (``EAGLEConfig.__init__`` in
``vllm/transformers_utils/configs/eagle.py``, index pass) and applies it; ``rule.py`` judges a
run. No fix: an unregistered drafter architecture is a missing model implementation.
``sglang.py`` is SGLang's rule of the same gate (EA406): the drafter's architecture, through the
draft model config's rewrite, must be listed in a model module's ``EntryClass``."""

from rules.draft_registry.rule import DraftRegistryRule
from rules.draft_registry.sglang import SGLangDraftRegistryRule

__all__ = ["DraftRegistryRule", "SGLangDraftRegistryRule"]
