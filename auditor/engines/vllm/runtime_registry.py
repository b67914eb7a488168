"""How ``vllm/model_executor/models/registry.py`` builds its run-time ``ModelRegistry``, read statically.

vLLM resolves architectures through the object ``ModelRegistry = _ModelRegistry(...)``, not through
the literal tables the index reads. The tables stand for it only when the object is built from the
merged table as it is (``_ModelRegistry(_VLLM_MODELS)``, or vLLM's own ``{arch:
_LazyRegisteredModel(...) for arch, (mod, cls) in _VLLM_MODELS.items()}``) and its class keeps what
it is given in ``self.models`` (a dataclass whose first field is ``models``, or an ``__init__``
that stores its argument). This module finds, by structure, which table the object is built from
and what the class's ``__init__``/``__post_init__`` does to ``self.models``.
"""

from __future__ import annotations

import ast

from auditor.index.summary import Extractor
from auditor.engines.vllm.registry_shape import class_shape, init_changes, is_dataclass, route_changes
from auditor.index.tables import CONTAINER_MUTATORS

RUNTIME_REGISTRY = "ModelRegistry"


def _table_read(arg: ast.expr) -> tuple[str | None, bool]:
    """``(table name, unpacks rows)`` for the argument the registry object is built from: a
    table name, ``dict(T)``, ``{**T}``, ``T.copy()``, or a dict comprehension over ``T.items()``
    with no filter whose key is the row's key (``unpacks``: it unpacks each row into two names, so
    a row that is not a pair fails when the module is imported). ``(None, False)`` for anything
    else (a call, a filtered comprehension, another literal)."""
    if isinstance(arg, ast.Name):
        return arg.id, False
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "dict" \
            and len(arg.args) == 1 and not arg.keywords and isinstance(arg.args[0], ast.Name):
        return arg.args[0].id, False
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "copy" \
            and isinstance(arg.func.value, ast.Name) and not arg.args:
        return arg.func.value.id, False
    if isinstance(arg, ast.Dict) and len(arg.keys) == 1 and arg.keys[0] is None and isinstance(arg.values[0], ast.Name):
        return arg.values[0].id, False
    if isinstance(arg, ast.DictComp) and len(arg.generators) == 1:
        gen = arg.generators[0]
        it = gen.iter
        if gen.ifs or gen.is_async or not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                                           and it.func.attr == "items" and isinstance(it.func.value, ast.Name)
                                           and not it.args):
            return None, False
        t = gen.target
        if isinstance(t, ast.Tuple) and len(t.elts) == 2 and isinstance(t.elts[0], ast.Name) \
                and isinstance(arg.key, ast.Name) and arg.key.id == t.elts[0].id:
            row = t.elts[1]
            return it.func.value.id, isinstance(row, (ast.Tuple, ast.List))
    return None, False


def _models_writes(fn: ast.FunctionDef, kept: str | None) -> list[tuple[str, int]]:
    """Writes to ``self.models`` in ``fn`` other than storing the parameter ``kept`` as it is
    (``self.models = kept`` / ``dict(kept)`` / ``{**kept}`` / ``kept.copy()``), as ``(statement,
    line)``: a rebinding, an item written or deleted, a changing call (``self.models.pop(k)``)."""
    args = fn.args.posonlyargs + fn.args.args
    if not args:
        return []
    me = args[0].arg

    def is_models(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "models" and isinstance(node.value, ast.Name) \
            and node.value.id == me

    out = []
    for n in ast.walk(fn):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
            targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
            for t in targets:
                if is_models(t) and isinstance(n, (ast.Assign, ast.AnnAssign)) and kept is not None \
                        and n.value is not None and _table_read(n.value) == (kept, False):
                    continue
                if is_models(t) or isinstance(t, ast.Subscript) and is_models(t.value):
                    out.append((ast.unparse(n)[:80], n.lineno))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and is_models(n.func.value) \
                and n.func.attr in CONTAINER_MUTATORS:
            out.append((ast.unparse(n)[:80], n.lineno))
    return out


def extract_runtime_registry(tree: ast.Module) -> dict | None:
    """The module's last module-level ``ModelRegistry = ...``: ``{"line": N, "construct": text,
    "table": name or None, "unpacks": bool, "changes": [(statement, line, where)]}``. ``table`` is
    the table the object is built from (None: not a call of a class of the module with one argument
    static analysis can read, see :func:`_table_read`); ``changes`` are the writes of the class's
    ``__init__``/``__post_init__`` to ``self.models`` other than storing the argument, and, as
    ``("...", line, "class")``, a class that does not store its argument in ``models`` by a
    structure this reader knows. None when the module assigns no ``ModelRegistry``."""
    found = None
    for st in tree.body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            if any(isinstance(t, ast.Name) and t.id == RUNTIME_REGISTRY for t in targets):
                found = st
    if found is None:
        return None
    out = {"line": found.lineno, "construct": ast.unparse(found)[:100], "table": None, "unpacks": False,
           "changes": []}
    v = found.value
    if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and len(v.args) + len(v.keywords) == 1):
        return out
    classes = {st.name: st for st in tree.body if isinstance(st, ast.ClassDef)}
    cls = classes.get(v.func.id)
    if cls is None:
        return out
    arg = v.args[0] if v.args else v.keywords[0].value
    keyword = v.keywords[0].arg if v.keywords else None
    table, unpacks = _table_read(arg)
    methods = {st.name: st for st in cls.body if isinstance(st, ast.FunctionDef)}
    out["changes"] += class_shape(tree, cls, found)  # first: what decides the object before __init__ runs
    init = methods.get("__init__")
    stores = False
    if init is not None:
        params = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
        kept = keyword if keyword is not None else (params[0] if params else None)
        stores = kept is not None and (keyword is None or keyword in params)
        out["changes"] += [(c, ln, "__init__") for c, ln in _models_writes(init, kept)]
        if stores and not any(isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None
                              and _table_read(n.value) == (kept, False)
                              and any(isinstance(t, ast.Attribute) and t.attr == "models"
                                      for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))
                              for n in ast.walk(init)):
            stores = False
    elif any(is_dataclass(tree, d) for d in cls.decorator_list):
        fields = [st.target.id for st in cls.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)]
        stores = (keyword or (fields[0] if fields else None)) == "models"
    if "__post_init__" in methods:
        out["changes"] += [(c, ln, "__post_init__") for c, ln in _models_writes(methods["__post_init__"], None)]
    if not stores:
        out["changes"].append((f"class {cls.name}", cls.lineno, "class"))
    if "__new__" in methods:
        out["changes"].append((f"def __new__({ast.unparse(methods['__new__'].args)})", methods["__new__"].lineno,
                               "__new__"))
    out["changes"] += init_changes(methods, _models_writes)
    out["changes"] += [(c, ln, "fails" if how == "fails" else "route") for c, ln, how in route_changes(methods)]
    out["changes"] += [(c, ln, "class attribute") for c, ln in _class_writes(tree, cls.name, found)]
    out["changes"] += [(c, ln, "alias") for c, ln in _alias_writes(tree, table)]
    out["table"] = table
    out["unpacks"] = unpacks
    return out


def _class_writes(tree: ast.Module, name: str, built: ast.stmt) -> list[tuple[str, int]]:
    """Writes to attributes of the registry class ``name`` (``C.__init__ = f``, ``setattr(C,
    "resolve_model_cls", f)``), as ``(statement, line)``; a replaced ``__init__``/``__new__`` in a
    module-level statement below ``built`` (the one that builds the object) runs too late to change it."""
    out = []
    for st in tree.body:
        late = st.lineno > built.lineno
        for n in ast.walk(st):
            attr = None
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
                attr = next((t.attr for t in targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                             and t.value.id == name), None)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("setattr", "delattr") \
                    and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == name:
                attr = n.args[1].value if len(n.args) > 1 and isinstance(n.args[1], ast.Constant) else "?"
            if attr is not None and not (late and attr in ("__init__", "__new__", "__post_init__")):
                out.append((ast.unparse(n).splitlines()[0][:80], n.lineno))
    return out


def _alias_writes(tree: ast.Module, table: str | None) -> list[tuple[str, int]]:
    """Changes in place through a module-level alias of ``ModelRegistry.models`` (``_m =
    ModelRegistry.models`` then ``_m.clear()``, ``_m[k] = v``, ``del _m[k]``), or through one of the
    registry's table ``table`` in a function (the index follows the module-level ones), as
    ``(statement, line)``."""
    def is_models(v: ast.AST) -> bool:
        return isinstance(v, ast.Attribute) and v.attr == "models" and isinstance(v.value, ast.Name) \
            and v.value.id == RUNTIME_REGISTRY
    aliases: dict[str, bool] = {}  # alias -> of ModelRegistry.models (else of the table)
    for st in tree.body:
        if isinstance(st, ast.Assign) and (is_models(st.value) or isinstance(st.value, ast.Name) and st.value.id == table):
            aliases.update({t.id: is_models(st.value) for t in st.targets if isinstance(t, ast.Name)})
    out = []
    for st in tree.body:
        in_function = isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for n in ast.walk(st):
            name = None
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                    and n.func.attr in CONTAINER_MUTATORS:
                name = n.func.value.id
            elif isinstance(n, (ast.Assign, ast.Delete, ast.AugAssign)):
                targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
                name = next((t.value.id for t in targets if isinstance(t, ast.Subscript)
                             and isinstance(t.value, ast.Name)), None)
            if name in aliases and (aliases[name] or in_function):
                out.append((ast.unparse(n).splitlines()[0][:80], n.lineno))
    return out


#: Reads how ``registry.py`` builds ``ModelRegistry``.
RUNTIME_REGISTRY_EXTRACTOR = Extractor("vllm-runtime-registry", extract_runtime_registry,
                                       suffixes=("model_executor/models/registry.py",),
                                       needles=(RUNTIME_REGISTRY.encode(),))


#: Why a change of another kind may change what vLLM's run-time ModelRegistry resolves.
_WHY = {
    "__new__": "the class of vLLM's run-time ModelRegistry defines __new__, which may build another object",
    "route": "vLLM's run-time ModelRegistry tests or rewrites the architecture name in resolve_model_cls or "
             "a method it calls, beside its table",
    "decorator": "a decorator of the class of vLLM's run-time ModelRegistry may put another object in its place",
    "base": "the class of vLLM's run-time ModelRegistry has a base class or a metaclass, whose members static "
            "analysis does not follow",
    "hook": "the class of vLLM's run-time ModelRegistry defines how its models are read or written",
    "global": "the name ModelRegistry is bound again, to a value static analysis does not follow",
    "class attribute": "a member of the class of vLLM's run-time ModelRegistry is replaced",
    "alias": "the run-time ModelRegistry's table is changed in place through another name",
    "fails": "vLLM's run-time ModelRegistry fails there for every architecture name alike (it always raises or "
             "gives None), so no row of its table resolves",
}


def runtime_registry_change(fact: dict | None, path: str, merged: str) -> str | None:
    """Why the run-time ``ModelRegistry`` (``fact`` from :func:`extract_runtime_registry` on
    ``path``) may not hold the rows of the table ``merged`` as they are, as ``"`construct` at
    path:line (...)"``; None when it does (or the module assigns no ``ModelRegistry``)."""
    if fact is None:
        return None
    at = f"`{fact['construct']}` at {path}:{fact['line']}"
    if fact["table"] is None:
        return f"{at} (vLLM's run-time ModelRegistry is built from a value static analysis cannot read)"
    if fact["table"] != merged:
        return f"{at} (vLLM's run-time ModelRegistry is built from {fact['table']}, not from {merged})"
    for construct, line, where in fact["changes"]:
        if where == "class":
            return (f"`{construct}` at {path}:{line} (the class of vLLM's run-time ModelRegistry, which does not "
                    "keep the table it is given in `models` by a structure static analysis can follow)")
        why = _WHY.get(where) or f"in {where}, which rewrites the run-time ModelRegistry's models"
        return f"`{construct}` at {path}:{line} ({why})"
    return None
