"""eagle-audit: static auditor of speculative-decoding gates (EAGLE-3, EAGLE-1/2, MTP) in vLLM trees."""

__version__ = "0.1.0"
