"""Whether the class of vLLM's run-time ``ModelRegistry`` has a shape static analysis can follow.

:mod:`auditor.engines.vllm.runtime_registry` reads which table the object is built from and what
``__init__`` stores. That stands for what ``resolve_model_cls`` does only when nothing else decides
the object or its lookups. This module lists, as ``(construct, line, where)``, what may:

* the class itself (:func:`class_shape`): a decorator other than ``dataclass``, a base class or a
  metaclass, ``models`` defined in the class body (a property, a method, an assignment), an
  attribute hook (``__getattribute__``, ``__setattr__``, ``__delattr__``), a ``global
  ModelRegistry`` in a function, a module-level binding of ``ModelRegistry`` below the object;
* what builds the object (:func:`init_changes`): ``__init__``/``__post_init__`` and every method
  they call on ``self``, which may write ``self.models`` only by storing the argument, and never
  through ``setattr(self, ...)``, ``self.__dict__``, ``vars(self)`` or by handing ``self`` on;
* what resolves a name (:func:`route_changes`): ``resolve_model_cls`` and every method it calls on
  ``self``, along the code a name the table holds reaches, may test the name only against the table
  and may not rewrite it, nor hand it (but to a function whose result is returned) or ``self`` on.

Both walks read only methods defined with ``def`` and no decorator: a call of another member is
itself named. Not read: a method called only for a configuration (:func:`_picks_a_route`), a
method that always raises (the failure path), and a module function whose result
``resolve_model_cls``'s helpers return as it is (vLLM's loader). Reported as failing for every name
alike (``"fails"``): a ``resolve_model_cls`` that always raises or only returns None, and a method
given one architecture name on a row's route that always raises or whose result, read, is always
None (vLLM's ``_try_load_model_cls`` is given the name; ``_raise_for_unsupported`` the list).
"""

from __future__ import annotations

import ast

from auditor.engines.vllm.runtime_pruning import architecture_names, is_table, method_call, reached_statements, reads

RUNTIME_REGISTRY = "ModelRegistry"
#: attribute hooks that can answer ``self.models`` with something other than what was stored
_HOOKS = ("__getattribute__", "__setattr__", "__delattr__")
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
             ast.AsyncFunctionDef, ast.ClassDef)


def _decorator_name(d: ast.expr) -> str:
    """``dataclass`` for ``@dataclass``, ``@dataclass(...)`` and ``@dataclasses.dataclass``."""
    f = d.func if isinstance(d, ast.Call) else d
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


#: keywords of ``dataclass(...)`` that keep the ``__init__`` taking ``models`` first, by position
_DATACLASS_KEEPS = frozenset({"frozen", "eq", "repr", "order", "unsafe_hash", "match_args", "slots"})


def is_dataclass(tree: ast.Module, d: ast.expr) -> bool:
    """The class decorator ``d`` is ``dataclasses.dataclass`` as the module ``tree`` imports it
    (``from dataclasses import dataclass`` or ``import dataclasses``, not bound again at module
    level), bare or with keywords that keep its ``__init__`` (not ``init=False``, ``kw_only=True``)."""
    if isinstance(d, ast.Call) and (d.args or any(k.arg not in _DATACLASS_KEEPS for k in d.keywords)):
        return False
    f = d.func if isinstance(d, ast.Call) else d
    if isinstance(f, ast.Name) and f.id == "dataclass":
        head, imported = "dataclass", any(isinstance(st, ast.ImportFrom) and st.module == "dataclasses" and any(
            a.name == "dataclass" and a.asname is None for a in st.names) for st in tree.body)
    elif isinstance(f, ast.Attribute) and f.attr == "dataclass" and isinstance(f.value, ast.Name) \
            and f.value.id == "dataclasses":
        head, imported = "dataclasses", any(isinstance(st, ast.Import) and any(
            a.name == "dataclasses" and a.asname is None for a in st.names) for st in tree.body)
    else:
        return False
    rebound = sum(1 for st in tree.body for n in ast.walk(st)
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == head
                  or isinstance(n, ast.Name) and n.id == head and isinstance(n.ctx, (ast.Store, ast.Del))
                  or isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == head)
    return imported and rebound == 1


def _first_line(node: ast.AST) -> str:
    return ast.unparse(node).splitlines()[0][:80]


def _header(cls: ast.ClassDef) -> str:
    """``class C(bases, keywords)`` as written."""
    parts = [ast.unparse(b) for b in cls.bases] + [ast.unparse(k) for k in cls.keywords]
    return f"class {cls.name}({', '.join(parts)})" if parts else f"class {cls.name}"


def class_shape(tree: ast.Module, cls: ast.ClassDef, built: ast.stmt) -> list[tuple[str, int, str]]:
    """What about the registry class ``cls`` and the name ``ModelRegistry`` (bound by ``built``)
    static analysis does not follow, as ``(construct, line, where)``; see the module's docstring."""
    out = []
    for d in cls.decorator_list:
        if not is_dataclass(tree, d):
            out.append((f"@{ast.unparse(d)}", d.lineno, "decorator"))
    if cls.bases or cls.keywords:
        out.append((_header(cls), cls.lineno, "base"))
    for st in cls.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if st.name == "models" or st.name in _HOOKS:
                out.append((f"def {st.name}({ast.unparse(st.args)})", st.lineno, "hook"))
        elif isinstance(st, (ast.Assign, ast.AnnAssign)):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            field = isinstance(st, ast.AnnAssign) and (st.value is None or _is_field(st.value))
            if names & ({"models", "resolve_model_cls", "__init__", "__post_init__", "__new__", *_HOOKS}) and not field:
                out.append((_first_line(st), st.lineno, "hook"))
    for st in tree.body:
        for n in ast.walk(st):
            if isinstance(n, ast.Global) and RUNTIME_REGISTRY in n.names:
                out.append((f"global {RUNTIME_REGISTRY}", n.lineno, "global"))
        if st.lineno > built.lineno and not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and _binds(st):
            out.append((_first_line(st), st.lineno, "global"))
    return out


def _is_field(value: ast.expr) -> bool:
    """``field(...)``/``dataclasses.field(...)``: a dataclass field's default, not a value."""
    return isinstance(value, ast.Call) and _decorator_name(value) == "field"


def _binds(st: ast.stmt) -> bool:
    """Whether the module-level statement ``st`` binds ``ModelRegistry`` (outside functions)."""
    stack: list[ast.AST] = [st]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(n, ast.Name) and n.id == RUNTIME_REGISTRY and isinstance(n.ctx, (ast.Store, ast.Del)):
            return True
        if isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == RUNTIME_REGISTRY:
            return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def _self_name(fn: ast.FunctionDef) -> str | None:
    args = fn.args.posonlyargs + fn.args.args
    return args[0].arg if args else None


def _self_calls(fn: ast.FunctionDef) -> list[ast.Call]:
    """Calls ``self.m(...)`` in ``fn``."""
    me = _self_name(fn)
    return [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name) and n.func.value.id == me]


def called_methods(methods: dict[str, ast.FunctionDef], roots: list[str]) -> list[str]:
    """``roots`` and every method of ``methods`` they call on ``self``, transitively, in order."""
    seen = [r for r in roots if r in methods]
    i = 0
    while i < len(seen):
        for c in _self_calls(methods[seen[i]]):
            if c.func.attr in methods and c.func.attr not in seen:
                seen.append(c.func.attr)
        i += 1
    return seen


def init_changes(methods: dict[str, ast.FunctionDef], writes) -> list[tuple[str, int, str]]:
    """What the methods ``__init__``/``__post_init__`` call on ``self`` (transitively) do to the
    object that static analysis does not follow: their writes to ``self.models`` (``writes(fn,
    None)``, :func:`auditor.engines.vllm.runtime_registry._models_writes`), and writes through
    ``setattr(self, ...)``, ``object.__setattr__(self, ...)``, ``self.__dict__``, ``vars(self)``, or
    ``self`` handed to a function, in any of them; as ``(construct, line, method)``."""
    out = []
    roots = [r for r in ("__init__", "__post_init__") if r in methods]
    for name in called_methods(methods, roots):
        fn = methods[name]
        out += [(c, ln, name) for call in _self_calls(fn) for c, ln in _unread_member(methods, call)
                if call.func.attr not in ("models", "__dict__")]
        if name not in roots:
            out += [(c, ln, name) for c, ln in writes(fn, None)]
        me = _self_name(fn)
        if me is None:
            continue
        for st in ast.walk(fn):
            if not isinstance(st, ast.stmt) or isinstance(st, _COMPOUND):
                continue
            for n in ast.walk(st):
                if isinstance(n, ast.Attribute) and n.attr == "__dict__" and isinstance(n.value, ast.Name) \
                        and n.value.id == me or isinstance(n, ast.Call) and any(
                            isinstance(a, ast.Name) and a.id == me for a in [*n.args, *(k.value for k in n.keywords)]):
                    out.append((_first_line(st), st.lineno, name))
                    break
    return sorted(set(out), key=lambda c: c[1])


def route_changes(methods: dict[str, ast.FunctionDef]) -> list[tuple[str, int, str]]:
    """Tests of an architecture name other than against the table, and rewrites of one, along the
    code a name the table holds reaches in ``resolve_model_cls`` and the methods it calls on
    ``self`` (:func:`auditor.engines.vllm.runtime_pruning.reached_statements`), as ``(construct,
    line, method)``. A method every path of which raises is the failure path and is not read; a
    method whose result only picks another route for a configuration (:func:`_picks_a_route`) is not
    read either."""
    if "resolve_model_cls" not in methods:
        return []
    out = []
    kinds: dict[str, dict[int, str]] = {"resolve_model_cls": {0: "list"}}  # method -> position -> kind
    order = ["resolve_model_cls"]
    i = 0
    while i < len(order):
        name = order[i]
        i += 1
        fn = methods[name]
        if name == "resolve_model_cls" and (_always_raises(fn) or _only_none(fn)):
            shown = _failure(fn)  # every name fails alike: no row resolves
            out.append((_first_line(shown), shown.lineno, "fails"))
            continue
        if _always_raises(fn):
            continue
        names, lists = architecture_names(fn, kinds[name])
        reached = reached_statements(fn, names, lists)
        out += [(c, ln, name) for c, ln in _tests_and_rewrites(fn, reached, names, lists)]
        for call in _self_calls(fn):
            callee = call.func.attr
            if _in(call, reached):
                out += [(c, ln, name) for c, ln in _unread_member(methods, call)]
            if callee in methods and _in(call, reached) and any(reads(a, names) for a in call.args) \
                    and (_always_raises(methods[callee]) or _only_none(methods[callee]) and not _unused(fn, call)):
                shown = _failure(methods[callee])  # a step each row's name goes through fails for every name
                out.append((f"{_first_line(call)}: {_first_line(shown)}", shown.lineno, "fails"))
            if callee not in methods or callee in order or not _in(call, reached) \
                    or _picks_a_route(fn, call, names | lists):
                continue
            kinds[callee] = {j: _kind(a, names, lists) for j, a in enumerate(call.args) if reads(a, names | lists)}
            order.append(callee)
    return out


def _unread_member(methods: dict[str, ast.FunctionDef], call: ast.Call) -> list[tuple[str, int]]:
    """The call ``self.m(...)`` of a member the class does not define with ``def`` (an assignment,
    a base's), or of a decorated method (a decorator may put another function in its place)."""
    fn = methods.get(call.func.attr)
    if fn is None:
        return [(_first_line(call), call.lineno)]
    return [(f"@{ast.unparse(d)}", d.lineno) for d in fn.decorator_list]


def _kind(arg: ast.expr, names: set[str], lists: set[str]) -> str:
    """``"list"`` for an argument that is a list of architecture names, else ``"name"``."""
    return "list" if isinstance(arg, ast.Name) and arg.id in lists else "name"


def _in(node: ast.AST, reached: list[ast.stmt]) -> bool:
    return any(node is n for st in reached for n in ast.walk(st))


def _always_raises(fn: ast.FunctionDef) -> bool:
    """Every path of ``fn`` raises: a ``raise`` at the top of its body with no ``return`` above it
    (what follows it never runs)."""
    for i, st in enumerate(fn.body):
        if isinstance(st, ast.Raise):
            return not any(isinstance(n, ast.Return) for p in fn.body[:i] for n in ast.walk(p))
    return False


def _only_none(fn: ast.FunctionDef) -> bool:
    """Every ``return`` of ``fn`` that can run gives None (falling off its end included): its
    result is None for every name. A generator or a function with a nested one is not read (False)."""
    own = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(fn)) or \
            any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) for n in ast.walk(fn)
                if n is not fn):
        return False
    def none(r: ast.Return) -> bool:
        return r.value is None or _is_none(r.value)
    for i, st in enumerate(fn.body):  # a ``return``/``raise`` at the top: what follows never runs
        if isinstance(st, (ast.Return, ast.Raise)):
            return isinstance(st, ast.Return) and none(st) and \
                all(none(r) for p in fn.body[:i] for r in ast.walk(p) if isinstance(r, ast.Return))
    return all(none(r) for r in own)


def _failure(fn: ast.FunctionDef) -> ast.AST:
    """What makes every call of ``fn`` fail: the ``raise``/``return`` at the top of its body, else
    its first ``return``, else its ``def``."""
    top = next((st for st in fn.body if isinstance(st, (ast.Return, ast.Raise))), None)
    if top is not None:
        return top
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    return returns[0] if returns else fn


def _unused(fn: ast.FunctionDef, call: ast.Call) -> bool:
    """``call`` is a statement of its own in ``fn``: its result is not read."""
    return any(isinstance(st, ast.Expr) and st.value is call for st in ast.walk(fn))


def _picks_a_route(fn: ast.FunctionDef, call: ast.Call, both: set[str]) -> bool:
    """``call`` is ``r = self.m(...)`` in an ``if`` whose test reads a parameter of ``fn`` other than
    the architectures (``both``) and no architecture (vLLM: ``if model_config.model_impl ==
    "transformers":``), and every read of ``r`` in ``fn`` is an ``is None``/``is not None`` test, an
    argument of a call, an element of a returned tuple, or a test against the table: the result only
    picks, for a configuration, another way to resolve, which falls back to the table's."""
    others = set([a.arg for a in fn.args.posonlyargs + fn.args.args][1:]) - both
    bound = next((st for st in ast.walk(fn) if isinstance(st, ast.Assign) and st.value is call), None)
    if bound is None or len(bound.targets) != 1 or not isinstance(bound.targets[0], ast.Name):
        return False
    if not any(isinstance(i, ast.If) and reads(i.test, others) and not reads(i.test, both)
               and any(bound is x for st in i.body + i.orelse for x in ast.walk(st)) for i in ast.walk(fn)):
        return False
    r = bound.targets[0].id
    allowed: set[int] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            allowed |= {id(a) for a in [*n.args, *(k.value for k in n.keywords)]}
        elif isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple):
            allowed |= {id(e) for e in n.value.elts}
        elif isinstance(n, ast.Compare) and len(n.ops) == 1 and (
                isinstance(n.ops[0], (ast.Is, ast.IsNot)) and _is_none(n.comparators[0])
                or isinstance(n.ops[0], (ast.In, ast.NotIn)) and is_table(n.comparators[0], _self_name(fn))):
            allowed.add(id(n.left))
    return all(id(n) in allowed for n in ast.walk(fn)
               if isinstance(n, ast.Name) and n.id == r and isinstance(n.ctx, ast.Load))


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


#: calls that only log: not read
_LOG = frozenset({"print", "debug", "info", "warning", "error", "exception", "warning_once", "info_once"})
#: builtins that neither rewrite nor test a name themselves (what they are given is read)
_PURE = frozenset({"isinstance", "len", "type", "all", "any"})


def _tests_and_rewrites(fn: ast.FunctionDef, reached: list[ast.AST], names: set[str],
                        lists: set[str]) -> list[tuple[str, int]]:
    """In the nodes ``reached`` of ``fn``: tests of a name in ``names`` (an architecture) or
    ``lists`` (a list of them) against anything but the table, ``None`` or another such name, and
    rewrites: a parameter rebound (but a list wrapped, ``a = [a]``, or a method's result), a loop's
    name rebound in the loop, a value computed from a name (``arch.replace(...)``, ``arch + "X"``,
    ``f"{arch}"``, ``arch[1:]``) outside a ``raise`` and a log call, or a name or the object handed
    to a function (``g(arch)``, ``g(self)``) but a name to one whose result is returned."""
    me = _self_name(fn)
    both = names | lists
    params = set([a.arg for a in fn.args.posonlyargs + fn.args.args][1:])
    in_loop = {id(x) for f in ast.walk(fn) if isinstance(f, (ast.For, ast.AsyncFor))
               for st in f.body for x in ast.walk(st)
               if isinstance(x, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and reads(f.target, both)
               and _rebound(x) & {t.id for t in ast.walk(f.target) if isinstance(t, ast.Name)}}
    out = []

    def plain(x: ast.AST) -> bool:
        return isinstance(x, ast.Name) and x.id in both or isinstance(x, ast.Subscript) \
            and isinstance(x.value, ast.Name) and x.value.id in lists and not isinstance(x.slice, ast.Slice)

    def strong(x: ast.AST) -> bool:
        if isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and reads(x.func.value, both):
            return not (isinstance(x.func.value, ast.Name) and x.func.value.id == me)
        if isinstance(x, (ast.BinOp, ast.JoinedStr)):
            return reads(x, both)
        return isinstance(x, ast.Subscript) and reads(x.value, both) and not plain(x)

    def handed(x: ast.AST, parent: ast.AST | None) -> bool:
        """A function other than a method of the object given the object, or a name outside a
        ``return`` (``return _load(arch, row)``: vLLM's loader)."""
        if not isinstance(x, ast.Call) or method_call(x, me) or _callee(x) in _PURE:
            return False
        given = [*x.args, *(k.value for k in x.keywords)]
        return any(isinstance(a, ast.Name) and a.id == me for a in given) \
            or not isinstance(parent, ast.Return) and any(reads(a, both) for a in given)

    def visit(n: ast.AST, top: ast.AST, parent: ast.AST | None = None) -> None:
        if isinstance(n, ast.Raise) or isinstance(n, ast.Call) and _callee(n) in _LOG:
            return
        if strong(n) or handed(n, parent):
            shown = top if isinstance(top, ast.stmt) and not isinstance(n, ast.Call) or isinstance(top, ast.Assign) \
                else n
            out.append((_first_line(shown), shown.lineno))
            return
        if isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            if any(plain(x) for x in sides) and not all(plain(x) or _is_none(x) or is_table(x, me) for x in sides):
                out.append((_first_line(n), n.lineno))
        elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            bound = _rebound(n) & both
            wrap = isinstance(n.value, (ast.List, ast.Tuple)) and all(plain(e) for e in n.value.elts)
            if bound and (bound & params or id(n) in in_loop) and not wrap and not method_call(n.value, me):
                out.append((_first_line(n), n.lineno))
        for c in ast.iter_child_nodes(n):
            visit(c, top, n)

    for st in reached:
        visit(st, st)
    return out


def _rebound(n: ast.AST) -> set[str]:
    """Names an assignment binds."""
    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
    return {t.id for x in targets for t in ast.walk(x) if isinstance(t, ast.Name)}


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
