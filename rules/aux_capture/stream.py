"""How the holder model's layers hand on the residual stream, read from the model file the
aux-capture codemod rewrites: whether the state entering a decoder layer is ``hidden_states +
residual`` (a stream split in two) or ``hidden_states`` alone (layers that sum it themselves)."""

from __future__ import annotations

import ast
import functools

import libcst as cst



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


#: list methods that change ``self.layers`` after it is built
_MUTATORS = frozenset({"append", "extend", "insert", "__setitem__", "__iadd__", "pop", "remove", "clear"})


def _loop_layer_name(loop: cst.For) -> str | None:
    """The name the loop binds each layer to: ``for layer in ...`` or ``for i, layer in ...``."""
    t = loop.target
    if isinstance(t, cst.Name):
        return t.value
    if isinstance(t, (cst.Tuple, cst.List)) and len(t.elements) == 2 and isinstance(t.elements[1].value, cst.Name):
        return t.elements[1].value.value
    return None


def _layer_call(loop: cst.For, residual: str) -> cst.Call | None:
    """The loop body's first call that takes ``residual`` back, when it is the layer itself
    (``hidden_states, residual = layer(..., residual)``); None otherwise."""
    layer = _loop_layer_name(loop)
    if layer is None or not isinstance(loop.body, cst.IndentedBlock):
        return None
    for st in loop.body.body:
        for s in getattr(st, "body", ()) if isinstance(st, cst.SimpleStatementLine) else ():
            if isinstance(s, cst.Assign) and isinstance(s.value, cst.Call) and residual in argument_names(s.value):
                func = s.value.func
                return s.value if isinstance(func, cst.Name) and func.value == layer else None
    return None


def _is_self_layers(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "layers" and isinstance(node.value, ast.Name) \
        and node.value.id == "self"


def _layers_value(holder: ast.ClassDef) -> ast.expr | None:
    """The value of the one ``self.layers = ...`` (or ``..., self.layers = make_layers(...)``) of
    the holder, at the top of its ``__init__``; None when the class binds or changes
    ``self.layers`` anywhere else (a second assignment, ``append``, ``+=``, an item, ``setattr``)."""
    value, stores = None, 0
    for node in ast.walk(holder):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                elems = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                if any(_is_self_layers(e) for e in elems):
                    stores += 1
                    value = node.value
                    if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elems) > 1:
                        # ``a, b, self.layers = x, y, nn.ModuleList(...)``: the matching item
                        value = value.elts[next(i for i, e in enumerate(elems) if _is_self_layers(e))]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and _is_self_layers(node.target):
            stores += 2
        elif isinstance(node, ast.Subscript) and _is_self_layers(node.value) and not isinstance(node.ctx, ast.Load):
            stores += 2
        elif isinstance(node, ast.Delete) and any(_is_self_layers(t) for t in node.targets):
            stores += 2
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                (node.func.attr in _MUTATORS and _is_self_layers(node.func.value))):
            stores += 2
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            stores += 2  # setattr(self, <anything>): the attribute it sets is not read here
    init = next((f for f in holder.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if stores != 1 or init is None or not any(isinstance(st, ast.Assign) and any(
            n is value for n in ast.walk(st.value)) for st in init.body):
        return None
    return value


def _layer_class(value: ast.expr, classes: dict[str, ast.ClassDef]) -> str | None:
    """The one class of the module that ``value`` builds every layer from, in the two shapes of
    vLLM's model files: ``make_layers(n, lambda prefix: Layer(...), ...)`` and
    ``nn.ModuleList([Layer(...) for ...])``. None for any other shape (a helper, a local callable,
    a conditional between classes, an imported class): then it cannot be vouched for."""
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    made: ast.expr | None = None
    if isinstance(func, ast.Name) and func.id == "make_layers":
        fn = value.args[1] if len(value.args) > 1 else next(
            (k.value for k in value.keywords if k.arg == "layer_fn"), None)
        made = fn.body if isinstance(fn, ast.Lambda) else None
    elif isinstance(func, (ast.Name, ast.Attribute)) and (getattr(func, "id", None) or func.attr) == "ModuleList" \
            and len(value.args) == 1 and not value.keywords:
        arg = value.args[0]
        made = arg.elt if isinstance(arg, ast.ListComp) else None
    if isinstance(made, ast.Call) and isinstance(made.func, ast.Name) and made.func.id in classes:
        return made.func.id
    return None


def _bound_once(module: ast.Module, name: str) -> bool:
    """True when the module binds ``name`` only by its ``class`` statement and never changes the
    class from outside (``name.forward = ...``, ``setattr(name, ...)``, ``del name``)."""
    binds = 0
    for node in ast.walk(module):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            binds += 1
        elif isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return False
        elif isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            return False
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name \
                and not isinstance(node.ctx, ast.Load):
            return False
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") \
                and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == name:
            return False
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return False
    return binds == 1


def _plain_forward(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> ast.FunctionDef | None:
    """The class's own ``forward``, when the layer is called through it alone: one undecorated
    ``def forward`` in the body, no class decorator, and no ``__call__``/``__getattribute__``/
    ``__getattr__`` on it or on a base defined in the module."""
    hooks = {"__call__", "__getattribute__", "__getattr__", "__init_subclass__"}
    bases = [classes[b.id] for b in cls.bases if isinstance(b, ast.Name) and b.id in classes]
    if cls.decorator_list or cls.keywords or any(
            isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name in hooks
            for c in [cls, *bases] for f in c.body):
        return None
    fwds = [f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign, ast.AnnAssign))
            and ((getattr(f, "name", None) == "forward")
                 or any(isinstance(t, ast.Name) and t.id == "forward" for t in getattr(f, "targets", [])))]
    if len(fwds) != 1 or not isinstance(fwds[0], ast.FunctionDef) or fwds[0].decorator_list:
        return None
    return fwds[0]


def _param_taking(fwd: ast.FunctionDef, call: cst.Call, residual: str) -> str | None:
    """The named parameter of a layer's ``forward(self, ...)`` that ``call`` binds ``residual`` to
    (None when it lands in ``*args``/``**kwargs`` or its place is not known)."""
    params = [a.arg for a in fwd.args.posonlyargs + fwd.args.args][1:]
    named = set(params) | {a.arg for a in fwd.args.kwonlyargs}
    pos = 0
    for a in call.args:
        if a.keyword is not None:
            if isinstance(a.value, cst.Name) and a.value.value == residual:
                return a.keyword.value if a.keyword.value in named else None
            continue
        if a.star:
            return None  # *args: the position is not known
        if isinstance(a.value, cst.Name) and a.value.value == residual:
            return params[pos] if pos < len(params) else None
        pos += 1
    return None


def _rebound_before_read(fwd: ast.FunctionDef, name: str) -> bool:
    """True when the first statement of ``fwd`` that mentions ``name`` is a plain
    ``name = <value without name>`` at the top of the body: the value passed in is never read."""
    for st in fwd.body:
        if not any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(st)):
            continue
        return isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
            and st.targets[0].id == name and not any(isinstance(n, ast.Name) and n.id == name
                                                     for n in ast.walk(st.value))
    return False


@functools.lru_cache(maxsize=2)
def _parsed(code: str) -> ast.Module | None:
    """The ``ast`` of the module the codemod rewrites, parsed once for both readings of its layers
    (:func:`whole_stream_layer`, then :func:`rebinding_layer_classes`); None when it does not
    parse. The tree is only read."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return None


def whole_stream_layer(tree: cst.Module, holder: cst.ClassDef, loop: cst.For, residual: str) -> str | None:
    """The decoder layer class of this module that discards the residual the holder's loop hands
    it, or None.

    The holder's ``__init__`` builds ``self.layers`` once, from one class of the same module
    (``make_layers(n, lambda prefix: CohereDecoderLayer(...))``), and nothing changes the list or
    the class afterwards; the loop calls the layer itself; and that class's one undecorated
    ``forward`` starts by rebinding the parameter the loop passes ``residual`` to
    (``residual = hidden_states``). Such a layer reads only ``hidden_states``, so the state entering
    it is ``hidden_states`` alone, and the residual it hands on is a leftover (vLLM's
    ``commandr.py``, ``exaone4.py``; its own ``cohere2_moe.py`` captures ``hidden_states`` for that
    shape). None whenever any of that is not certain: the codemod then refuses when the module has
    such a layer (:func:`rebinding_layer_classes`), and otherwise takes the state as
    ``hidden_states + residual`` (and ``verify`` measures which it is)."""
    call = _layer_call(loop, residual)
    if call is None:
        return None
    module = _parsed(tree.code)
    if module is None:
        return None
    classes = {st.name: st for st in module.body if isinstance(st, ast.ClassDef)}
    holder_ast = classes.get(holder.name.value)
    if holder_ast is None:
        return None  # a nested holder: not followed
    value = _layers_value(holder_ast)
    name = _layer_class(value, classes) if value is not None else None
    if name is None or not _bound_once(module, name):
        return None
    fwd = _plain_forward(classes[name], classes)
    param = _param_taking(fwd, call, residual) if fwd is not None else None
    return name if param is not None and _rebound_before_read(fwd, param) else None


def rebinding_layer_classes(tree: cst.Module) -> list[str]:
    """The classes of the module whose one plain ``forward`` starts by rebinding a parameter named
    for the residual (``residual = hidden_states``): layers that hand on the whole state. When
    :func:`whole_stream_layer` cannot vouch for the holder's layer class and one of these is in
    the module, the state entering a layer may be either: the codemod refuses rather than guess."""
    module = _parsed(tree.code)
    if module is None:
        return []
    classes = {st.name: st for st in module.body if isinstance(st, ast.ClassDef)}
    out = []
    for name, cls in classes.items():
        fwd = _plain_forward(cls, classes)
        if fwd is None:
            continue
        params = [a.arg for a in fwd.args.posonlyargs + fwd.args.args + fwd.args.kwonlyargs][1:]
        if any("residual" in prm and _rebound_before_read(fwd, prm) for prm in params) and _hands_on_a_residual(fwd):
            out.append(name)
    return out


def _hands_on_a_residual(fwd: ast.FunctionDef) -> bool:
    """Some ``return`` of ``fwd`` hands on a second value that is not ``None`` (a layer that
    returns ``(hidden_states, None)``, MiniCPM's, leaves the loop's residual None, so a capture of
    ``hidden_states + residual`` where it is not None is the state entering the layer)."""
    for n in ast.walk(fwd):
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple) and len(n.value.elts) >= 2:
            second = n.value.elts[1]
            if not (isinstance(second, ast.Constant) and second.value is None):
                return True
    return False
