"""The shared room of the gates: the facts, fact providers and synthetic examples that more than
one gate reads, so that no gate room imports another. ``examples.py``: synthetic model files of
several gates' examples; ``layer_ids.py``: where the engine reads a drafter's aux layer ids
(``aux-layers``, ``interface``); ``sglang_setter.py``: the route of SGLang's EAGLE-3 setter and
the tree's donor models (the ``interface`` and ``aux-capture`` planners of SGLang trees). The
holder model that four vLLM gates read is a provider of the model files themselves
(:class:`auditor.engines.modelfiles.HolderFacts`)."""
