"""How the holder model's layers hand on the residual stream, read from the model file the
aux-capture codemod rewrites: whether the state entering a decoder layer is ``hidden_states +
residual`` (a stream split in two) or ``hidden_states`` alone (layers that sum it themselves)."""

from __future__ import annotations

import libcst as cst

from rules.cst import class_methods, names_used


def layer_call_names(loop: cst.For) -> tuple[str, str | None] | None:
    """``(hidden states name, residual name or None)`` from the loop body's
    ``hidden_states, residual = layer(...)``. The residual counts only when the call also takes it
    (``layer(positions, hidden_states, residual)``): a layer that returns a residual without
    taking one back has no residual stream, and the state entering it is ``hidden_states``."""
    if not isinstance(loop.body, cst.IndentedBlock):
        return None
    for st in loop.body.body:
        if not isinstance(st, cst.SimpleStatementLine):
            continue
        for s in st.body:
            if not isinstance(s, cst.Assign) or not isinstance(s.value, cst.Call) or len(s.targets) != 1:
                continue
            t = s.targets[0].target
            names = []
            if isinstance(t, cst.Name):
                names = [t.value]
            elif isinstance(t, (cst.Tuple, cst.List)) and all(isinstance(e.value, cst.Name) for e in t.elements):
                names = [e.value.value for e in t.elements]
            hidden = next((n for n in names if "hidden" in n), None)
            if hidden is None:
                continue
            residual = next((n for n in names if "residual" in n), None)
            if residual is not None and residual not in argument_names(s.value):
                # the layer returns a residual it does not take back in (StableLM: its output is
                # already the summed state): there is no residual stream to add
                residual = None
            return hidden, residual
    return None


def argument_names(call: cst.Call) -> set[str]:
    """The bare names passed to ``call``, positionally or as keyword values."""
    return {a.value.value for a in call.args if isinstance(a.value, cst.Name)}


def _layer_call(loop: cst.For, residual: str) -> cst.Call | None:
    """The loop body's ``... = layer(..., residual, ...)`` call that takes ``residual`` back."""
    if not isinstance(loop.body, cst.IndentedBlock):
        return None
    for st in loop.body.body:
        for s in getattr(st, "body", ()) if isinstance(st, cst.SimpleStatementLine) else ():
            if isinstance(s, cst.Assign) and isinstance(s.value, cst.Call) and residual in argument_names(s.value):
                return s.value
    return None


class _CalledNames(cst.CSTVisitor):
    """The bare names called in a node (``X(...)``), in order."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name):
            self.names.append(node.func.value)


def _layers_value(holder: cst.ClassDef) -> cst.BaseExpression | None:
    """The value of ``self.layers = ...`` (or ``..., self.layers = make_layers(...)``) in the
    holder's ``__init__``."""
    init = class_methods(holder).get("__init__")
    if init is None or not isinstance(init.body, cst.IndentedBlock):
        return None
    for st in init.body.body:
        for s in getattr(st, "body", ()) if isinstance(st, cst.SimpleStatementLine) else ():
            if not isinstance(s, cst.Assign):
                continue
            for t in s.targets:
                elems = [e.value for e in t.target.elements] if isinstance(t.target, (cst.Tuple, cst.List)) \
                    else [t.target]
                if any(isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self"
                       and e.attr.value == "layers" for e in elems):
                    return s.value
    return None


def _param_taking(fwd: cst.FunctionDef, call: cst.Call, residual: str) -> str | None:
    """The parameter of a layer's ``forward(self, ...)`` that ``call`` binds ``residual`` to."""
    params = [p.name.value for p in list(fwd.params.posonly_params) + list(fwd.params.params)][1:]
    pos = 0
    for a in call.args:
        if a.keyword is not None:
            if isinstance(a.value, cst.Name) and a.value.value == residual:
                return a.keyword.value
            continue
        if a.star:
            return None  # *args: the position is not known
        if isinstance(a.value, cst.Name) and a.value.value == residual:
            return params[pos] if pos < len(params) else None
        pos += 1
    return None


def _rebound_before_read(fwd: cst.FunctionDef, name: str) -> bool:
    """True when the first statement of ``fwd`` that mentions ``name`` is a plain
    ``name = <value without name>`` at the top of the body: the value passed in is never read."""
    if not isinstance(fwd.body, cst.IndentedBlock):
        return False
    for st in fwd.body.body:
        if name not in names_used(st):
            continue
        if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1 or not isinstance(st.body[0], cst.Assign):
            return False
        a = st.body[0]
        return name not in names_used(a.value) and any(
            isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets)
    return False


def whole_stream_layer(tree: cst.Module, holder: cst.ClassDef, loop: cst.For, residual: str) -> str | None:
    """The decoder layer class of this module that discards the residual the holder's loop hands
    it, or None.

    The holder's ``__init__`` builds ``self.layers`` from one class of the same module
    (``make_layers(n, lambda prefix: CohereDecoderLayer(...))``); that class's ``forward`` starts by
    rebinding the parameter the loop passes ``residual`` to (``residual = hidden_states``). Such a
    layer reads only ``hidden_states``, so the state entering it is ``hidden_states`` alone, and
    the residual it hands on is a leftover (vLLM's ``commandr.py``, ``exaone4.py``; its own
    ``cohere2_moe.py`` captures ``hidden_states`` for that shape). None when the layer class is
    not defined in this module, is not one class, or reads the residual: the state is then
    ``hidden_states + residual``."""
    value = _layers_value(holder)
    call = _layer_call(loop, residual)
    if value is None or call is None:
        return None
    called = _CalledNames()
    value.visit(called)
    classes = {st.name.value: st for st in tree.body if isinstance(st, cst.ClassDef)}
    found = {n for n in called.names if n in classes and "forward" in class_methods(classes[n])}
    if len(found) != 1:
        return None
    name = found.pop()
    fwd = class_methods(classes[name])["forward"]
    param = _param_taking(fwd, call, residual)
    return name if param is not None and _rebound_before_read(fwd, param) else None
