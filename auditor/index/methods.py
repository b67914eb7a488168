"""The facts of one function or class body that need no module state.

A method's :class:`~auditor.index.facts.MethodFact` (:func:`method_fact`: references, ``self``
assignments, decoder-layer loops, returns, an ``__init__``'s parameters and ``super().__init__``
call, the setters' branches), a class attribute's :class:`~auditor.index.facts.AttrFact`
(:func:`attr_fact`), what ``setattr(self, key, v)`` may set (:func:`attr_names`), and the readings of a
class body: a method that rebinds its instance (:func:`self_rebound_line`), the names a class-body
statement binds (:func:`class_scope_binds`), what ``__init_subclass__`` changes
(:func:`subclass_hook_changes`) and a ``__new__`` that may return another object
(:func:`new_returns_other`).
"""

from __future__ import annotations

import ast

from auditor.index.facts import DETAILED_METHODS, AttrFact, LoopFact, MethodFact
from auditor.index.importsteps import bound_by
from auditor.index.returns import returns_fact
from auditor.index.syntax import dotted, iter_stmts, node_text, short_text, walk


def _is_stub_body(body: list[ast.stmt]) -> bool:
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring or bare ``...``
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            if dotted(exc) == "NotImplementedError":
                continue
        return False
    return True


def _raises_only(body: list[ast.stmt]) -> bool:
    """True when the first statement after the docstring, ``pass`` and ``...`` is a ``raise``:
    calling the function always raises."""
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) or isinstance(stmt, ast.Pass):
            continue
        return isinstance(stmt, ast.Raise)
    return False


def _is_self_attr(node: ast.AST, attr: str | None = None) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and (attr is None or node.attr == attr)
    )


def _mentions(node: ast.AST, attr: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == attr for n in walk(node))


def _loop_fact(loop: ast.For) -> LoopFact | None:
    """Describe ``loop`` if it iterates a model's decoder layers, else None."""
    it = loop.iter
    if not (_mentions(it, "layers") or _mentions(it, "start_layer") or _mentions(it, "end_layer")):
        return None
    index_var = None
    index_kind = None
    enum_start = None
    inner = it
    if isinstance(it, ast.Call) and dotted(it.func) == "enumerate":
        index_kind = "enumerate"
        if isinstance(loop.target, ast.Tuple) and loop.target.elts and isinstance(
            loop.target.elts[0], ast.Name
        ):
            index_var = loop.target.elts[0].id
        for kw in it.keywords:
            if kw.arg == "start":
                enum_start = node_text(kw.value)
        if len(it.args) > 1:
            enum_start = node_text(it.args[1])
        inner = it.args[0] if it.args else it
    elif isinstance(it, ast.Call) and dotted(it.func) == "range":
        index_kind = "range"
        if isinstance(loop.target, ast.Name):
            index_var = loop.target.id
    over_slice = False
    if isinstance(inner, ast.Call) and (dotted(inner.func) or "").endswith("islice"):
        over_slice = True
    elif isinstance(inner, ast.Subscript) and isinstance(inner.slice, ast.Slice):
        over_slice = True
    elif index_kind == "range":
        over_slice = True
    captures = False
    capture_list = None
    mixin = False
    for node in walk(loop):
        if isinstance(node, ast.Call):
            fname = dotted(node.func) or ""
            if fname.endswith("_maybe_add_hidden_state"):
                if not captures:
                    first = node.args[0] if node.args else None
                    capture_list = first.id if isinstance(first, ast.Name) else "?"
                captures, mixin = True, True
        if isinstance(node, ast.If):
            t = node.test
            if (
                isinstance(t, ast.Compare)
                and any(isinstance(op, ast.In) for op in t.ops)
                and any(_mentions(c, "aux_hidden_state_layers") for c in t.comparators)
            ):
                appends = [n for b in node.body for n in walk(b)
                           if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append"]
                if appends:
                    if not captures:
                        capture_list = dotted(appends[0].func.value) or "?"
                    captures = True
    return LoopFact(
        line=loop.lineno,
        index_var=index_var,
        index_kind=index_kind,
        enumerate_start=enum_start,
        over_slice=over_slice,
        captures=captures,
        uses_mixin_helper=mixin,
        over_layers=_mentions(it, "layers"),
        capture_list=capture_list,
        iter_names=tuple(sorted({n.id for n in walk(it) if isinstance(n, ast.Name)})),
    )


def subclass_hook_changes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, str, int]]:
    """The changes an ``__init_subclass__`` makes to the class it is called for (its first
    parameter: ``cls.forward = f``, ``setattr(cls, ...)``, ``del cls.m``), as ``(member or "*"
    when computed, text, line)``."""
    params = fn.args.posonlyargs + fn.args.args
    if not params:
        return []
    me = params[0].arg
    out = []
    for n in walk(fn):
        if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name) \
                and n.value.id == me:
            out.append((n.attr, node_text(n)[:60], n.lineno))
        elif isinstance(n, ast.Call) and dotted(n.func) in ("setattr", "delattr", "type.__setattr__") and n.args \
                and isinstance(n.args[0], ast.Name) and n.args[0].id == me:
            key = n.args[1] if len(n.args) > 1 else None
            member = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "*"
            out.append((member, node_text(n)[:60], n.lineno))
    return out


def new_returns_other(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The first ``return`` value of a ``__new__`` that may not be an instance of the class it is
    called for (its first parameter), as text; None when every ``return`` gives
    ``super().__new__(cls, ...)`` or ``object.__new__(cls, ...)``, directly or through a local
    name or an attribute of ``cls`` assigned one (the singleton form ``cls._instance``)."""
    params = fn.args.posonlyargs + fn.args.args
    if not params:
        return "?"
    me = params[0].arg

    def makes_own(v: ast.AST | None) -> bool:
        if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "__new__"):
            return False
        owner = v.func.value
        if not (isinstance(owner, ast.Call) and dotted(owner.func) == "super" or dotted(owner) == "object"):
            return False
        return bool(v.args) and isinstance(v.args[0], ast.Name) and v.args[0].id == me

    own: set[str] = set()
    for n in walk(fn):
        if isinstance(n, ast.Assign) and makes_own(n.value):
            own.update(node_text(tg) for tg in n.targets if isinstance(tg, (ast.Name, ast.Attribute)))
    for n in walk(fn):
        if isinstance(n, ast.Return):
            if n.value is None or not (makes_own(n.value) or node_text(n.value) in own):
                return node_text(n.value)[:60] if n.value is not None else "None"
    return None


_REFERENCE_METHODS = frozenset(
    {
        "set_aux_hidden_state_layers",
        "get_eagle3_aux_hidden_state_layers",
        "get_eagle3_default_aux_hidden_state_layers",
        "get_language_model",
        "_maybe_add_hidden_state",
        "_set_aux_hidden_state_layers",
    }
)


#: the methods whose branches :attr:`MethodFact.branch_stores` describes
_BRANCH_METHODS = frozenset({"set_aux_hidden_state_layers", "_set_aux_hidden_state_layers",
                             "set_eagle3_layers_to_capture"})


def _stores(stmts, params: set[str]) -> tuple[set[str], set[str]]:
    """``(attributes a parameter is stored on, every attribute stored)`` by the assignments
    among ``stmts``."""
    with_param: set[str] = set()
    every: set[str] = set()
    for st in stmts:
        if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and st.value is not None:
            uses = any(isinstance(n, ast.Name) and n.id in params for n in walk(st.value))
            for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    if isinstance(e, ast.Attribute):
                        every.add(e.attr)
                        if uses:
                            with_param.add(e.attr)
    return with_param, every


def _branch_stores(body: list[ast.stmt], params: set[str], above: frozenset, out: list) -> None:
    """Fill ``out`` (:attr:`MethodFact.branch_stores`) for the ``if`` branches of ``body``, the
    statements stored directly in the enclosing blocks being ``above``."""
    here = above | _stores(body, params)[1]
    for st in body:
        if not isinstance(st, ast.If):
            continue
        for branch in (st.body, st.orelse):
            if not branch:
                continue
            inner = [n for b in branch for n in iter_stmts([b])]
            with_param, every = _stores(inner, params)
            if every:
                out.append((branch[0].lineno, tuple(sorted(with_param)), tuple(sorted(every)),
                            tuple(sorted(every | here))))
            _branch_stores(branch, params, here, out)


def _is_super_call(node: ast.AST, method: str) -> bool:
    """``super().<method>(...)``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method
            and isinstance(node.func.value, ast.Call) and dotted(node.func.value.func) == "super")


def _init_facts(fn: ast.FunctionDef | ast.AsyncFunctionDef, mf: MethodFact) -> None:
    """Fill ``params``, ``super_init`` and ``self_calls`` of an ``__init__``'s fact."""
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    mf.params = [(p.arg, short_text(d) if d is not None else None) for p, d in zip(pos, defaults)][1:]
    mf.params += [(p.arg, short_text(d) if d is not None else None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    for node in walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if mf.super_init is None and _is_super_call(node, "__init__"):
            mf.super_init = ([short_text(x) for x in node.args], {k.arg: short_text(k.value) for k in node.keywords if k.arg})
        elif isinstance(node.func.value, ast.Name) and node.func.value.id == "self" \
                and node.func.attr not in mf.self_calls:
            mf.self_calls.append(node.func.attr)


def method_fact(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> MethodFact:
    """The :class:`~auditor.index.facts.MethodFact` of a method definition (already pruned of dead
    code): in detail for :data:`~auditor.index.facts.DETAILED_METHODS` (references, ``self``
    assignments, layer loops of ``forward``, returns), shallow for the others (``return X(...)``
    and ``self.X = Callee(...)`` one ``if`` level down at most).

    Args:
        fn: the method's definition (a module-level function made a method is read the same way).

    Returns:
        A new fact; never raises for valid syntax.
    """
    mf = MethodFact(
        name=fn.name,
        line=fn.lineno,
        is_stub=_is_stub_body(fn.body),
        decorators=[short_text(d) for d in fn.decorator_list],
        raises_only=_raises_only(fn.body),
    )
    mf.gives = returns_fact(fn)
    if fn.name in _BRANCH_METHODS:
        a = fn.args
        _branch_stores(fn.body, {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}, frozenset(), mf.branch_stores)
    if fn.name not in DETAILED_METHODS:
        # shallow: ``return X(...)`` in the body or one ``if``/``else`` level down (factories
        # such as ``_init_model``/``_build_model`` that build the inner model)
        # ``self.X = Callee(...)`` at the same depth (a helper ``__init__`` calls that builds the
        # inner model itself)
        for st in fn.body:
            for sub in [st] + (st.body + st.orelse if isinstance(st, ast.If) else []):
                if isinstance(sub, ast.Return) and isinstance(sub.value, ast.Call):
                    mf.returns_call.append(short_text(sub.value.func))
                elif isinstance(sub, ast.Assign) and len(sub.targets) == 1 and _is_self_attr(sub.targets[0]) \
                        and isinstance(sub.value, ast.Call):
                    attr = sub.targets[0].attr
                    mf.self_assigns.setdefault(attr, short_text(sub.value))
                    kw = {k.arg: (ast.unparse(k.value) if k.arg == "architectures" else short_text(k.value))
                          for k in sub.value.keywords if k.arg}
                    mf.self_assign_calls.setdefault(attr, (short_text(sub.value.func), kw, sub.lineno))
        return mf
    if fn.name == "__init__":
        _init_facts(fn, mf)
    if fn.name in _REFERENCE_METHODS:
        # small methods: every name and attribute they reference, and delegations
        names: set[str] = set()
        attrs: set[str] = set()
        for node in walk(fn):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                attrs.add(node.attr)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if _is_self_attr(owner):
                    mf.delegates.append((owner.attr, node.func.attr))
                elif isinstance(owner, ast.Call) and _is_self_attr(owner.func):
                    mf.delegates.append((owner.func.attr + "()", node.func.attr))
            if isinstance(node, ast.Call):
                mf.calls.append(short_text(node.func))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mf.imports += [f"{node.module}.{a.name}" for a in node.names]
        mf.names = frozenset(names)
        mf.attrs = frozenset(attrs)
    aux_vars: set[str] = set()
    returns: list[ast.Return] = []
    super_vars: set[str] = set()
    for st in iter_stmts(fn.body):
        if fn.name == "forward":
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                    and _is_super_call(st.value, fn.name):
                super_vars.add(st.targets[0].id)
            elif isinstance(st, ast.Return) and st.value is not None and (
                    _is_super_call(st.value, fn.name) or (isinstance(st.value, ast.Name) and st.value.id in super_vars)):
                mf.returns_super = True
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            value = st.value
            if value is None:
                continue
            if isinstance(st, ast.AnnAssign) and mf.config_annotation is None and isinstance(value, ast.Attribute) \
                    and value.attr == "hf_config":
                mf.config_annotation = node_text(st.annotation)
            # ``self.start_layer, self.end_layer, self.layers = make_layers(...)``
            targets = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
            for t in targets:
                if _is_self_attr(t):
                    mf.self_assigns[t.attr] = short_text(value)
                    if isinstance(value, ast.Call):
                        kw = {k.arg: (ast.unparse(k.value) if k.arg == "architectures" else short_text(k.value))
                              for k in value.keywords if k.arg}
                        mf.self_assign_calls[t.attr] = (short_text(value.func), kw, st.lineno)
                elif isinstance(t, ast.Subscript) and dotted(t.value) == "self.__dict__":
                    # ``self.__dict__["forward"] = f``: an instance attribute
                    for key in attr_names(fn, t.slice):
                        mf.self_assigns[key] = short_text(value)
                elif isinstance(t, ast.Name) and "aux" in t.id and isinstance(value, (ast.List, ast.ListComp)):
                    aux_vars.add(t.id)
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and dotted(st.value.func) == \
                "self.__dict__.update":
            mf.self_assigns["*"] = "self.__dict__.update(...)"  # any instance attribute
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and dotted(st.value.func) in (
                "setattr", "object.__setattr__", "self.__setattr__") and st.value.args:
            # ``setattr(self, "forward", f)``: an instance attribute, as ``self.forward = f``
            args = st.value.args if dotted(st.value.func) != "self.__setattr__" else [ast.Name("self")] + st.value.args
            if len(args) == 3 and isinstance(args[0], ast.Name) and args[0].id == "self":
                for key in attr_names(fn, args[1]):
                    mf.self_assigns[key] = short_text(args[2])
        elif isinstance(st, ast.Return):
            returns.append(st)
            if isinstance(st.value, ast.Call):
                mf.returns_call.append(short_text(st.value.func))
        elif isinstance(st, ast.For) and fn.name == "forward":
            lf = _loop_fact(st)
            if lf is not None:
                mf.loops.append(lf)
    if fn.name == "forward" and mf.loops:
        _drop_reset_captures(fn, mf.loops)
        # the loop helpers the forward binds itself (a parameter, an assignment, an import in
        # its body): the loop calls those, not the module's
        helpers = {n for lf in mf.loops for n in lf.iter_names} - {"self"}
        if helpers:
            a = fn.args
            local = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None}
            for node in walk(fn):
                if node is not fn:
                    local |= bound_by(node)
            for lf in mf.loops:
                lf.iter_local = tuple(sorted(set(lf.iter_names) & local))
    if fn.name == "forward":
        for st in returns:
            if isinstance(st.value, ast.Tuple):
                elts = st.value.elts
                hit = [e.id for e in elts[1:] if isinstance(e, ast.Name) and (e.id in aux_vars or "aux" in e.id)]
                if len(elts) >= 2 and hit:
                    mf.returns_aux = True
    return mf


def attr_names(fn: ast.FunctionDef | ast.AsyncFunctionDef, key: ast.expr) -> list[str]:
    """The attribute names ``setattr(self, key, v)`` in ``fn`` may set: a string constant; the
    strings of a literal tuple or list that a ``for`` loops ``key`` over, when that loop is the
    only binding of the name in ``fn`` (vLLM 0.33.0 ``vllm/models/deepseek_v4/common/vl_model.py``:
    ``for name in ("image_start", ...): setattr(self, name, ...)``); else ``["*"]`` (any name)."""
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return [key.value]
    if isinstance(key, ast.Name):
        stores = [n for n in walk(fn)
                  if isinstance(n, ast.Name) and n.id == key.id and not isinstance(n.ctx, ast.Load)]
        loops = [st for st in walk(fn) if isinstance(st, ast.For) and isinstance(st.target, ast.Name)
                 and st.target.id == key.id and isinstance(st.iter, (ast.Tuple, ast.List))]
        if len(stores) == 1 and len(loops) == 1 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in loops[0].iter.elts):
            return [e.value for e in loops[0].iter.elts]
    return ["*"]


def _drop_reset_captures(fn: ast.FunctionDef | ast.AsyncFunctionDef, loops: list[LoopFact]) -> None:
    """A capture loop whose list is emptied again after the loop (``aux_hidden_states = []``, any
    rebinding to a value computed without the list, or ``aux_hidden_states.clear()`` in the
    statements of ``forward`` that follow it) captures nothing that ``forward`` can return: its
    ``captures`` is set False."""
    by_line = {lf.line: lf for lf in loops if lf.captures and lf.capture_list not in (None, "?")}
    live: list[LoopFact] = []
    for st in fn.body:
        lf = by_line.get(st.lineno) if isinstance(st, (ast.For, ast.AsyncFor)) else None
        if lf is not None:
            live.append(lf)
            continue
        for lf in live:
            name = lf.capture_list
            if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in st.targets) \
                    and not any(isinstance(n, ast.Name) and n.id == name for n in walk(st.value)):
                lf.captures, lf.reset_line = False, st.lineno  # ``remote + aux`` would keep what was captured
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and dotted(st.value.func) == f"{name}.clear":
                lf.captures, lf.reset_line = False, st.lineno


def self_rebound_line(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """The line where a method rebinds its instance parameter (``self = self.model``, ``self, _ =
    self, 0``, a walrus, a ``for`` target), or None (also for a static or class method)."""
    params = fn.args.posonlyargs + fn.args.args
    if not params or any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
                         for d in fn.decorator_list):
        return None
    me = params[0].arg
    for n in walk(fn):
        if isinstance(n, ast.Name) and n.id == me and isinstance(n.ctx, ast.Store):
            return n.lineno
    return None


def class_scope_binds(stmt: ast.stmt) -> set[str]:
    """The names one statement of a class body binds (or unbinds) in the class's namespace
    (:func:`auditor.index.importsteps.bound_by` of each node: assignment, ``for`` and ``with``
    targets, walrus targets, imports, ``except ... as`` names, ``match`` captures and the names of
    the functions and classes it defines); not what the bodies of those functions, lambdas or
    comprehensions bind (scopes of their own), nor ``global``/``nonlocal`` names."""
    out: set[str] = set()
    todo: list[ast.AST] = [stmt]
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if not isinstance(n, (ast.Global, ast.Nonlocal)):
            out |= bound_by(n)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # a definition binds its name; its decorators and body are not the class's
        todo.extend(ast.iter_child_nodes(n))
    return out


def attr_fact(name: str, line: int, value: ast.expr) -> AttrFact:
    """The :class:`~auditor.index.facts.AttrFact` of a class attribute ``name`` bound at ``line`` to
    ``value``: its short text, and its value when it is a literal (else None)."""
    lit = None
    if isinstance(value, (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.UnaryOp)):
        try:
            lit = ast.literal_eval(value)
        except Exception:
            lit = None
    return AttrFact(name, line, True, short_text(value), lit)
