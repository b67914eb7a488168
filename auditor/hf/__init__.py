"""What the tool knows of checkpoints and Hugging Face ``transformers``, whichever engine serves
them: the alias table of model names (``targets.toml``) and target resolution
(:mod:`auditor.hf.targets`), the config classes of a ``transformers`` source read in place
(:mod:`auditor.hf.configs`), and a target's model_type (:mod:`auditor.hf.modeltypes`). Below the
engines: both engines and the layers above read it; it names no engine package."""
