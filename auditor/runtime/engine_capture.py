"""The measurements of ``eagle-audit verify``'s child inside the engine: which hidden states
enter each decoder layer, which states the model captured for the drafter, and how the model
holds its residual stream.

Like ``engine_child.py``, a script of the child, never imported by eagle-audit: the child loads it
by its path. It needs torch, and reads the engine's modules only through the model object it is
handed (``install_hooks(model)``, through vLLM's ``LLM.apply_model``).
"""

from __future__ import annotations

STATE: dict = {"entering": {}, "aux": None, "aux_layers": None, "hooked": False, "hook_error": None,
               "last_out": None, "stream": None}

#: attribute names of a holder model's final norm, as vLLM's model files spell them
_FINAL_NORMS = ("norm", "final_layernorm", "ln_f", "final_layer_norm", "final_norm", "norm_f")


def _holder_of(model):
    """The module whose ``aux_hidden_state_layers`` the runner set, and its decoder layer list."""
    for mod in model.modules():
        layers = getattr(mod, "layers", None)
        if hasattr(mod, "aux_hidden_state_layers") and layers is not None:
            return mod, layers
    for mod in model.modules():  # no capture attribute: the first module holding the layer list
        for attr in ("layers", "h", "blocks"):
            layers = getattr(mod, attr, None)
            if isinstance(layers, __import__("torch").nn.ModuleList) and len(layers) > 1:
                return mod, layers
    return None, None


def install_hooks(model) -> str:
    """Hook ``model`` for one run: the states entering each decoder layer, what the last layer
    hands on, and the model's output (aux states and the final norm's result), on the first step.
    Returns an empty string when hooked, else why not."""
    import inspect

    import torch

    holder, layers = _holder_of(model)
    if holder is None:
        return "no decoder layer list found"
    aux = getattr(holder, "aux_hidden_state_layers", None)
    STATE["aux_layers"] = list(aux) if aux is not None else None

    def pre_hook(idx):
        def hook(mod, args, kwargs):
            if idx in STATE["entering"]:
                return None
            try:
                bound = inspect.signature(mod.forward).bind_partial(*args, **kwargs).arguments
            except (TypeError, ValueError):
                bound = {}
            hs = bound.get("hidden_states")
            if hs is None:
                tensors = [a for a in args if isinstance(a, torch.Tensor) and a.dim() == 2 and a.is_floating_point()]
                hs = tensors[0] if tensors else None
            res = bound.get("residual")
            if isinstance(hs, torch.Tensor):
                STATE["entering"][idx] = (hs.detach().float().cpu().clone(),
                                          res.detach().float().cpu().clone() if isinstance(res, torch.Tensor) else None)
            return None
        return hook

    for i, layer in enumerate(layers):
        layer.register_forward_pre_hook(pre_hook(i), with_kwargs=True)

    def last_hook(mod, args, output):
        # what the last decoder layer hands on: (hidden_states, residual) or one tensor
        if STATE["last_out"] is None:
            hs, res = (output[0], output[1] if len(output) > 1 else None) if isinstance(output, tuple) \
                else (output, None)
            if isinstance(hs, torch.Tensor):
                STATE["last_out"] = (hs.detach().clone(), res.detach().clone() if isinstance(res, torch.Tensor)
                                     else None)
        return None

    layers[len(layers) - 1].register_forward_hook(last_hook)
    norm = next((getattr(holder, n) for n in _FINAL_NORMS
                 if isinstance(getattr(holder, n, None), torch.nn.Module)), None)

    def out_hook(mod, args, output):
        if isinstance(STATE["last_out"], tuple):
            # once, on the first step: what the last layer handed on and what the model returned
            # belong to the same forward only there; later steps neither clone nor norm again
            final = output[0] if isinstance(output, tuple) else output
            STATE["stream"] = _stream_by_final_norm(norm, STATE["last_out"], final)
            STATE["last_out"] = "measured"
        if STATE["aux"] is not None:
            return None
        if isinstance(output, tuple) and len(output) == 2 and isinstance(output[1], (list, tuple)):
            STATE["aux"] = [t.detach().float().cpu().clone() for t in output[1] if isinstance(t, torch.Tensor)]
        return None

    # not a forward hook: vLLM's @support_torch_compile replaces __call__ and, without compiling,
    # calls self.forward directly, so module hooks of a decorated class never fire (Ernie 4.5 puts
    # it on the top-level class); the instance's own forward is what every path calls
    inner = model.forward

    def forward(*args, **kwargs):
        output = inner(*args, **kwargs)
        out_hook(model, args, output)
        return output

    model.forward = forward
    STATE["hooked"] = True
    return ""


def _close(a, b) -> bool:
    import torch

    return a.shape == b.shape and torch.allclose(a, b, rtol=1e-2, atol=1e-3 * max(1.0, float(a.abs().max())))


def _stream_by_final_norm(norm, last_out, final) -> str | None:
    """``"whole"`` or ``"split"``: how the model's residual stream is held between layers, measured
    at its end, where the holder's final norm turns the stream into the output.

    ``last_out`` is ``(hidden_states, residual)`` as the last decoder layer handed them on, and
    ``final`` what the model returned. When ``norm(hidden_states + residual)`` is that output, the
    stream is split in two (Llama: a fused add-norm sums them); when ``norm(hidden_states)`` is, the
    layers hand on the whole state and the residual is a leftover (Cohere, EXAONE 4: each layer
    starts with ``residual = hidden_states``). None when there is no norm, no residual, or neither
    or both match: then nothing is measured here. The norm runs on copies (vLLM's fused norms
    write into their inputs)."""
    import torch

    hs, res = last_out
    if norm is None or res is None or not isinstance(final, torch.Tensor):
        return None
    found = []
    try:
        with torch.no_grad():
            for mode, x in (("whole", hs.clone()), ("split", hs.clone() + res)):
                y = norm(x)
                y = y[0] if isinstance(y, tuple) else y
                if isinstance(y, torch.Tensor) and _close(y.detach().float().cpu(), final.detach().float().cpu()):
                    found.append(mode)
    except Exception:  # noqa: BLE001  (a norm that wants other arguments measures nothing)
        return None
    return found[0] if len(found) == 1 else None


def _entering_states() -> dict:
    """Layer id → the hidden state entering that layer (the residual stream), from the
    ``(hidden_states, residual)`` each layer was called with.

    Most layers take a residual stream split in two (Llama: the layer's first norm adds
    ``residual`` back), so the state is ``hidden_states + residual``. A layer that starts with
    ``residual = hidden_states`` and sums the rest itself (Cohere, EXAONE 4) takes its state whole:
    ``hidden_states``; what it hands on as the residual is a leftover. Which one the model is, is
    measured: first at the model's end (:func:`_stream_by_final_norm`, recorded by the hooks);
    else, when every later layer's ``residual`` equals the ``hidden_states`` the layer before it
    was called with, the residual is not part of the state."""
    raw = STATE["entering"]
    ids = sorted(raw)
    if STATE.get("stream") is not None:
        whole = STATE["stream"] == "whole"
    else:
        handed_back = [raw[i][1] is not None and (i - 1) in raw and _close(raw[i][1], raw[i - 1][0])
                       for i in ids[1:]]
        whole = bool(handed_back) and all(handed_back)
    return {i: (hs if whole or res is None else hs + res) for i, (hs, res) in raw.items()}


def match_aux() -> list:
    """For each captured aux tensor, the layer ids whose entering hidden state it equals."""
    if not STATE["aux"]:
        return []
    entering = _entering_states()
    out = []
    for t in STATE["aux"]:
        hits = []
        for idx, ent in sorted(entering.items()):
            if _close(ent, t):
                hits.append(idx)
        out.append(hits)
    return out
