"""Gate ``platform-spec-decode`` (EA315): the platform's model runner refuses any speculative
config (vLLM 0.16.0's CPU runner: ``assert self.speculative_config is None``).

``facts.py`` finds each platform's worker class, the model runner it builds, and the runner's
refusal (index pass); ``rule.py`` follows them for the run's ``--platform``."""

from rules.platform_spec_decode.rule import PlatformSpecDecodeRule

__all__ = ["PlatformSpecDecodeRule"]
