"""The functions of a vLLM config module that building the speculative config runs (its
``__init__``, ``__post_init__``, ``_verify_args`` or a validator, and the functions they call),
and the functions a later binding of the same name replaces, read statically from the module's
``ast`` (``vllm/config/speculative.py`` and its neighbours)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from auditor.index.syntax import walk, walk_statements


def is_method(node: ast.AST) -> bool:
    """``<name>.method`` or ``getattr(<name>, "method")``: the speculative method read."""
    if isinstance(node, ast.Attribute) and node.attr == "method" and isinstance(node.value, ast.Name):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
        and len(node.args) == 2 and isinstance(node.args[0], ast.Name) and isinstance(node.args[1], ast.Constant) \
        and node.args[1].value == "method"


def shadowed_functions(tree: ast.Module) -> set[ast.AST]:
    """The function definitions a later statement of the same body (module, class or function)
    binds the same name again, by a ``def``, a ``class`` or an assignment: the earlier one is never
    what the name means once the body has run (the last binding wins). A later ``def`` decorated
    with ``@<name>.<attr>`` (a property's setter) or ``@overload`` builds on the earlier one and
    does not count."""
    out: set[ast.AST] = set()
    for body_owner in walk(tree):
        body = getattr(body_owner, "body", None)
        if not isinstance(body, list):
            continue
        for i, st in enumerate(body):
            if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if any(_is_overload(d) for d in st.decorator_list):
                continue
            for later in body[i + 1:]:
                if _rebinds(later, st.name):
                    out.add(st)
                    break
    return out


def _is_overload(deco: ast.expr) -> bool:
    return (deco.id if isinstance(deco, ast.Name) else getattr(deco, "attr", "")) == "overload"


def _rebinds(st: ast.stmt, name: str) -> bool:
    """True when the statement ``st`` binds ``name`` anew (see :func:`shadowed_functions`)."""
    if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and st.name == name:
        return not any(isinstance(d, ast.Attribute) and isinstance(d.value, ast.Name) and d.value.id == name
                       or _is_overload(d) for d in st.decorator_list)
    if isinstance(st, (ast.Assign, ast.AnnAssign)):
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        return st.value is not None and any(isinstance(t, ast.Name) and t.id == name for t in targets)
    return False


#: The methods of a config class that its construction runs (a dataclass's ``__post_init__``,
#: ``__init__``, vLLM's ``_verify_args`` called from them) and the decorators that make a method a
#: validator run with the construction (pydantic's ``model_validator``/``field_validator``).
_ENTRY_METHODS = frozenset({"__init__", "__post_init__", "_verify_args", "__attrs_post_init__"})
_VALIDATOR_WORDS = ("validator",)
#: the entry methods Python runs itself when the object is built
_CONSTRUCTORS = frozenset({"__init__", "__post_init__", "__attrs_post_init__"})


@dataclass
class CallGraph:
    """The validation functions of a config module and how they run: ``functions`` each with the
    parameters bound to the method (:func:`validation_functions`), ``entries`` those the
    construction runs itself, ``callers`` for each other one the calls of it, as ``(call, caller)``,
    ``references`` the places that pass it as a value (called in a way not followed)."""

    functions: dict[ast.AST, set[str]] = field(default_factory=dict)
    entries: set[ast.AST] = field(default_factory=set)
    callers: dict[ast.AST, list[tuple[ast.Call, ast.AST]]] = field(default_factory=dict)
    references: dict[ast.AST, list[tuple[ast.AST, ast.AST]]] = field(default_factory=dict)


def validation_functions(tree: ast.Module) -> dict[ast.AST, set[str]]:
    """The functions of a config module that constructing its classes runs: the entry methods of
    each class (:data:`_ENTRY_METHODS`, a method decorated as a validator), then, transitively,
    the methods they call as ``self.m(...)`` and the module-level functions they call by name. A
    test in any other function (one never called, one of another code path) refuses nothing when
    the config is built.

    Args:
        tree: the config module's syntax tree.

    Returns:
        The function nodes (``ast.FunctionDef``/``AsyncFunctionDef``), each with the names of its
        parameters that some call of it binds to the speculative method (``_check(self.method)``).
    """
    return call_graph(tree).functions


def call_graph(tree: ast.Module) -> CallGraph:
    """The :class:`CallGraph` of a config module's validation. An entry method other than the
    constructors (``_verify_args``) that another validation function of its class calls, and that
    is not decorated as a validator, runs through those calls only (whose branches and ``try``
    blocks then decide whether its refusals reach the caller of the constructor).

    Args:
        tree: the config module's syntax tree.
    """
    funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
    module_fns = {st.name: st for st in tree.body if isinstance(st, funcs)}
    classes = {st.name: st for st in tree.body if isinstance(st, ast.ClassDef)}
    graph = CallGraph()
    out = graph.functions
    todo: list[tuple[ast.AST, dict]] = []
    # ``self._setup = ...``: an instance attribute may hide the method of that name, so a call of it
    # is not followed as a call of the method (kept as a reference: not followed)
    stored = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
    for cls in (st for st in walk_statements(tree) if isinstance(st, ast.ClassDef)):
        methods = _class_methods(cls, classes)
        for name, fn in methods.items():
            if fn not in cls.body:
                continue
            words = [ast.unparse(d) for d in fn.decorator_list]
            if name in _ENTRY_METHODS or any(w in d for d in words for w in _VALIDATOR_WORDS):
                todo.append((fn, methods))
                graph.entries.add(fn)
    while todo:
        fn, methods = todo.pop()
        if fn in out:
            continue
        out[fn] = set()
        calls = {id(n.func) for n in walk(fn) if isinstance(n, ast.Call)}
        for node in walk(fn):
            target = node.func if isinstance(node, ast.Call) else node
            if not isinstance(node, ast.Call) and (id(node) in calls or not isinstance(getattr(node, "ctx", None), ast.Load)):
                continue
            callee = _resolve(target, methods, module_fns, classes)
            if callee is None:
                continue
            todo.append((callee, methods if callee not in module_fns.values() else {}))
            if callee is fn:
                continue
            if isinstance(node, ast.Call) and not (isinstance(target, ast.Attribute) and target.attr in stored):
                graph.callers.setdefault(callee, []).append((node, fn))
            else:  # passed as a value (``functools.partial(self._check, ...)``): how it is called is not followed
                graph.references.setdefault(callee, []).append((node, fn))
    for callee, sites in graph.callers.items():
        for call, _ in sites:
            out.setdefault(callee, set())
            out[callee] |= _method_parameters(call, callee)
    for fn in list(graph.entries):
        if fn.name not in _CONSTRUCTORS and fn in graph.callers and not fn.decorator_list:
            graph.entries.discard(fn)
    return graph


def _class_methods(cls: ast.ClassDef, classes: dict, seen: frozenset = frozenset()) -> dict:
    """The methods of ``cls`` by name, those of its bases of the same module included (its own win)."""
    out: dict = {}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
            out.update(_class_methods(classes[base.id], classes, seen | {cls.name}))
    out.update({st.name: st for st in cls.body if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef))})
    return out


def _resolve(f: ast.AST, methods: dict, module_fns: dict, classes: dict) -> ast.AST | None:
    """The function ``f`` names: ``name`` of the module, ``self.m``/``cls.m`` of the class (its
    bases included), ``Class.m`` of a class of the module."""
    if isinstance(f, ast.Name):
        return module_fns.get(f.id)
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        if f.value.id in ("self", "cls"):
            return methods.get(f.attr)
        if f.value.id in classes:
            return _class_methods(classes[f.value.id], classes).get(f.attr)
    return None


def _method_parameters(call: ast.Call, fn: ast.AST) -> set[str]:
    """The parameters of ``fn`` that ``call`` binds to ``<name>.method`` (by position or keyword)."""
    params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    decorators = {getattr(d, "id", getattr(d, "attr", None)) for d in fn.decorator_list}
    f = call.func
    bound = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls")
    if "staticmethod" not in decorators and (bound or "classmethod" in decorators):  # the first is self/cls
        params = params[1:]
    out = {params[i] for i, a in enumerate(call.args) if i < len(params) and is_method(a)}
    return out | {k.arg for k in call.keywords if k.arg and is_method(k.value)}
