"""Gate ``platform-block-size`` (EA318): the platform forces a KV-cache block size on a target
that uses MLA, and the drafter's attention backend takes no such size (vLLM 0.32.0 on CPU without
AMX tiles: 16 against multiples of 32).

``facts.py`` finds the forced size and its test, the platform's default attention backend, the
backends' kernel block sizes, the worker's refusal and the model_types that use MLA (index pass);
``rule.py`` follows them for the run's ``--platform`` and target.
"""

from rules.platform_block_size.rule import PlatformBlockSizeRule

__all__ = ["PlatformBlockSizeRule"]
