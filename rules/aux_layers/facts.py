"""Facts of the ``aux-layers`` gate: where the engine reads a drafter's aux layer ids.

The GPU runner (``vllm/v1/worker/gpu_model_runner.py``; ``v1/worker/gpu/spec_decode/eagle/
eagle3_utils.py`` in Model Runner V2) reads ``eagle_aux_hidden_state_layer_ids`` from the drafter's
HF config (``getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)``, or the attribute)
and, when set, passes them to the target's ``set_aux_hidden_state_layers`` instead of the target's
default layers.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from auditor.cache import cacheable
from auditor.index.summary import Extractor, ParentMap

#: The drafter config key.
KEY = "eagle_aux_hidden_state_layer_ids"


@cacheable
@dataclass
class LayerIdsReadFact:
    """One read of the drafter's aux layer ids: ``line`` and ``function``."""

    line: int
    function: str


def extract_reads(tree: ast.Module) -> list[LayerIdsReadFact]:
    """Every ``getattr(x, KEY, ...)``, ``x.get(KEY)`` or ``x.KEY`` of a module."""
    out = []
    pm: ParentMap | None = None
    for n in ast.walk(tree):
        hit = False
        if isinstance(n, ast.Call) and len(n.args) >= 1:
            fn = n.func
            name = fn.id if isinstance(fn, ast.Name) else (fn.attr if isinstance(fn, ast.Attribute) else "")
            args = n.args[1:2] if name in ("getattr", "hasattr") else (n.args[:1] if name == "get" else [])
            hit = any(isinstance(a, ast.Constant) and a.value == KEY for a in args)
        elif isinstance(n, ast.Attribute) and n.attr == KEY and isinstance(n.ctx, ast.Load):
            hit = True
        if hit:
            pm = pm or ParentMap(tree)
            fn_node = pm.enclosing_function(n)
            out.append(LayerIdsReadFact(n.lineno, getattr(fn_node, "name", "<module>")))
    return out


#: Runs on the v1 engine's modules that name the key.
EXTRACTOR = Extractor("aux-layer-ids", extract_reads, prefixes=("vllm/v1/",), needles=(KEY.encode(),))


def layer_ids(draft_config: dict) -> list[int] | None:
    """The aux layer ids a drafter config carries (top level, else in ``eagle_config``), or None."""
    ids = draft_config.get(KEY)
    if not ids and isinstance(draft_config.get("eagle_config"), dict):
        ids = draft_config["eagle_config"].get(KEY)
    if isinstance(ids, list) and ids and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return ids
    return None


def num_hidden_layers(hf_config: dict | None) -> tuple[int, str] | None:
    """The target's decoder layer count from its checkpoint config (``num_hidden_layers``, else
    ``text_config.num_hidden_layers``), with the key it came from; None when absent."""
    if not hf_config:
        return None
    for label, d in (("num_hidden_layers", hf_config), ("text_config.num_hidden_layers", hf_config.get("text_config"))):
        if isinstance(d, dict):
            v = d.get("num_hidden_layers")
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v, label
    return None
