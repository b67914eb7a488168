"""Facts of the ``interface`` gate beyond the protocol itself: which ``get_eagle3_*`` methods the
runtime calls (to tell a live protocol method from a stale one).
"""

from __future__ import annotations

import re

from auditor.index.providers import FactProvider

_CALL = re.compile(rb"\.(get_eagle3\w*)\s*\(")
_PROBE = re.compile(rb"\b(?:hasattr|getattr)\s*\([^()]*?[\"'](get_eagle3\w*)[\"']")
_COMMENT = re.compile(rb"#[^\n]*")


def scan_eagle3_calls(source: bytes) -> set[str]:
    """Names of ``get_eagle3*`` methods that a module calls (``x.get_eagle3_...(``) or probes
    (``hasattr(x, "get_eagle3_...")``), by a text scan with comments removed. Runtime modules
    such as ``vllm/v1/worker/gpu_model_runner.py`` are large and need nothing else from their
    syntax tree, so they are not parsed; a definition (``def get_eagle3_...(``) is no call."""
    text = _COMMENT.sub(b"", source)
    names = {m.group(1) for m in _CALL.finditer(text)} | {m.group(1) for m in _PROBE.finditer(text)}
    return {n.decode() for n in names}



#: Runtime modules that call the model's EAGLE-3 methods.
RUNTIME_PREFIXES = ("vllm/v1/", "vllm/worker/", "vllm/spec_decode/")


class RuntimeEagle3Calls(FactProvider):
    """``get_eagle3_*`` method names that runtime code (``vllm/v1``, ``vllm/worker``,
    ``vllm/spec_decode``) of the tree calls (see :func:`scan_eagle3_calls`): a tree-wide fact
    (key None)."""

    @classmethod
    def compute(cls, ctx, key=None) -> set[str]:
        tree = ctx.resolver.tree
        calls: set[str] = set()
        for p in sorted(tree.files):
            if p.startswith(RUNTIME_PREFIXES):
                data = tree.read(p)
                if b"get_eagle3" in data:
                    calls |= scan_eagle3_calls(data)
        return calls


def runtime_eagle3_calls(ctx) -> set[str]:
    """The :class:`RuntimeEagle3Calls` of the tree of ``ctx``."""
    return ctx.get(RuntimeEagle3Calls)


def duck_typed_eagle3_members(ctx) -> list[str]:
    """Without a protocol (vLLM ≤ 0.10.0), the methods the runner calls on the model for EAGLE-3."""
    return sorted({"set_aux_hidden_state_layers"} | runtime_eagle3_calls(ctx))
