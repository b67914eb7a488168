"""Facts shared by the ``aux-layers`` and ``interface`` gates: where the engine reads a drafter's aux layer ids.

The GPU runner (``vllm/v1/worker/gpu_model_runner.py``; ``v1/worker/gpu/spec_decode/eagle/
eagle3_utils.py`` in Model Runner V2) reads ``eagle_aux_hidden_state_layer_ids`` from the drafter's
HF config (``getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)``, or the attribute)
and, when set, passes them to the target's ``set_aux_hidden_state_layers`` instead of the target's
default layers. Other methods read the same key for their own ends (the ``extract_hidden_states``
proposer, ``vllm/v1/spec_decode/extract_hidden_states.py``, sizes its buffers with it): a read is on
the EAGLE-3 path only when the function that reads it calls ``set_aux_hidden_state_layers``, or is
called by a function of the same module that does (``_setup_eagle3_aux_hidden_state_outputs`` →
``self._get_eagle3_aux_layers_from_config()`` in 0.33.0's runner).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from auditor.cache import cacheable
from auditor.index.summary import Extractor
from auditor.index.syntax import ParentMap, walk

#: The drafter config key.
KEY = "eagle_aux_hidden_state_layer_ids"

#: The target's method that takes the aux layer ids.
SETTER = "set_aux_hidden_state_layers"


@cacheable
@dataclass
class LayerIdsReadFact:
    """One read of the drafter's aux layer ids: ``line`` and ``function`` (the reader); ``owner``,
    the class that defines the reader ('' for a module-level function); ``setter_function`` and
    ``setter_line``, the function of the same module that passes the ids to
    ``set_aux_hidden_state_layers`` and the line of that call ('' and None: the read feeds no such
    call, so it is not on the EAGLE-3 path)."""

    line: int
    function: str
    owner: str = ""
    setter_function: str = ""
    setter_line: int | None = None


def _called_name(call: ast.Call) -> str:
    fn = call.func
    return fn.id if isinstance(fn, ast.Name) else (fn.attr if isinstance(fn, ast.Attribute) else "")


def _setter_call(fn: ast.AST) -> int | None:
    """The line of the first ``<x>.set_aux_hidden_state_layers(...)`` call inside ``fn``, or None."""
    lines = [n.lineno for n in walk(fn) if isinstance(n, ast.Call) and _called_name(n) == SETTER]
    return min(lines) if lines else None


def _setter_for(tree: ast.Module, reader: ast.AST | None) -> tuple[str, int | None]:
    """``(function, line)`` of the call to ``set_aux_hidden_state_layers`` that the ids read in
    ``reader`` reach: in ``reader`` itself, else in a function of the module that calls ``reader``
    by name (``self.reader(...)`` or ``reader(...)``); ``('', None)`` when none does."""
    if not isinstance(reader, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "", None
    line = _setter_call(reader)
    if line is not None:
        return reader.name, line
    for fn in walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn is reader:
            continue
        if any(isinstance(n, ast.Call) and _called_name(n) == reader.name for n in walk(fn)):
            line = _setter_call(fn)
            if line is not None:
                return fn.name, line
    return "", None


def extract_reads(tree: ast.Module) -> list[LayerIdsReadFact]:
    """Every ``getattr(x, KEY, ...)``, ``x.get(KEY)`` or ``x.KEY`` of a module, with the call to
    ``set_aux_hidden_state_layers`` it feeds (see :class:`LayerIdsReadFact`)."""
    out = []
    pm: ParentMap | None = None
    for n in walk(tree):
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
            owner = pm.parent.get(fn_node) if fn_node is not None else None
            setter, setter_line = _setter_for(tree, fn_node)
            out.append(LayerIdsReadFact(n.lineno, getattr(fn_node, "name", "<module>"),
                                        owner.name if isinstance(owner, ast.ClassDef) else "", setter, setter_line))
    out.sort(key=lambda f: f.line)
    return out


#: Runs on the v1 engine's modules that name the key.
EXTRACTOR = Extractor("aux-layer-ids", extract_reads, prefixes=("vllm/v1/",), needles=(KEY.encode(),))


def eagle3_reads(ctx) -> list[tuple[str, LayerIdsReadFact]]:
    """``(path, fact)`` of every read of the drafter's aux layer ids that reaches
    ``set_aux_hidden_state_layers`` (the EAGLE-3 path), the model runner's own first: reads in a
    class method (the runner, ``GPUModelRunner`` in ``vllm/v1/worker/gpu_model_runner.py``) before
    module-level helpers (Model Runner V2's ``eagle3_utils.py``), then by path and line. Reads by
    other methods' code (the ``extract_hidden_states`` proposer) are left out."""
    found = [(p, f) for p, f in ctx.facts.found(EXTRACTOR) if f.setter_line is not None]
    return sorted(found, key=lambda pf: (not pf[1].owner, pf[0], pf[1].line))


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
