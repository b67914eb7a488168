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
    elif any((d.id if isinstance(d, ast.Name) else d.func.id if isinstance(d, ast.Call) and
              isinstance(d.func, ast.Name) else getattr(d, "attr", "")) == "dataclass" for d in cls.decorator_list):
        fields = [st.target.id for st in cls.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)]
        stores = (keyword or (fields[0] if fields else None)) == "models"
    if "__post_init__" in methods:
        out["changes"] += [(c, ln, "__post_init__") for c, ln in _models_writes(methods["__post_init__"], None)]
    if not stores:
        out["changes"].append((f"class {cls.name}", cls.lineno, "class"))
    out["table"] = table
    out["unpacks"] = unpacks
    return out


#: Reads how ``registry.py`` builds ``ModelRegistry``.
RUNTIME_REGISTRY_EXTRACTOR = Extractor("vllm-runtime-registry", extract_runtime_registry,
                                       suffixes=("model_executor/models/registry.py",),
                                       needles=(RUNTIME_REGISTRY.encode(),))


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
        return f"`{construct}` at {path}:{line} (in {where}, which rewrites the run-time ModelRegistry's models)"
    return None
