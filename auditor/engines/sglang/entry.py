"""What each module of SGLang's models folder does with its ``EntryClass``, read from its ``ast``
in the summary pass: the value it binds (``extract_entry``), the changes it makes to it after the
binding (``extract_entry_changes``), and the changes a module makes to another module's
``EntryClass`` (``extract_entry_refs``). SGLang reads every module's ``EntryClass`` in
``sglang/srt/models/registry.py`` (``import_model_classes``); :mod:`auditor.engines.sglang.registry`
builds the registry from these facts.
"""

from __future__ import annotations

import ast
import re

from auditor.index.summary import Extractor
from auditor.index.syntax import dotted
from auditor.index.tables import CONTAINER_MUTATORS, hidden_changes

MODELS_DIR = "sglang/srt/models/"
ENTRY_NAME = "EntryClass"


def extract_entry(tree: ast.Module) -> dict | None:
    """The module-level ``EntryClass`` of a model module: ``{"names": [dotted names], "line": N,
    "unreadable": bool}`` from the last plain assignment (a name, or a list/tuple of names;
    ``unreadable`` when the value is anything else), or None when the module assigns none."""
    found = None
    values: dict[str, ast.expr] = {}  # the module-level names bound so far by a plain assignment, to their values
    for st in tree.body:
        for name in _rebound(st):  # bound by anything else (an import, a loop, ``+=``): no longer followed
            values.pop(name, None)
        if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name) and isinstance(st.op, ast.Add):
            before = values.get(st.target.id)
            if type(before) in (ast.List, ast.Tuple) and type(st.value) is type(before):
                # ``_T += (B,)``: a literal still, one the name of a later ``EntryClass = _T`` holds
                values[st.target.id] = type(before)(elts=before.elts + st.value.elts, ctx=ast.Load())
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            if st.value is not None:
                for t in targets:
                    if isinstance(t, ast.Name) and t.id != ENTRY_NAME:
                        values[t.id] = st.value
            unpacked = _unpacked_entry(targets, st.value) if isinstance(st, ast.Assign) else None
            if unpacked is not None:
                # ``EntryClass, _x = [A, B], 1``: the item bound to it, or a value known only at run time
                found = {"names": [], "line": st.lineno, "unreadable": False}
                _built(found, st, st.value, values)
                continue
            if st.value is None or not any(isinstance(t, ast.Name) and t.id == ENTRY_NAME for t in targets):
                continue
            v = st.value
            if isinstance(v, ast.Name) and v.id == ENTRY_NAME and found is not None:
                found["line"] = st.lineno  # ``EntryClass = EntryClass``: the same list, bound again
                continue
            v, via = _through_names(v, values)
            elts = v.elts if isinstance(v, (ast.List, ast.Tuple)) else [v]
            names = [dotted(e) for e in elts]
            before = found
            found = {"names": [n for n in names if n], "line": st.lineno, "unreadable": None in names}
            if via:
                # ``_L = [A, B]`` then ``EntryClass = _L``: one list under both names, changed through either
                found["via"] = via
                found["via_at"] = (ast.unparse(st)[:80], st.lineno)
            if isinstance(v, ast.Tuple):
                found["tuple"] = (ast.unparse(st)[:100], st.lineno)
            if isinstance(v, ast.List) and any(isinstance(e, ast.Constant) for e in v.elts):
                found["constant"] = (ast.unparse(st)[:100], st.lineno)  # ``[LlamaForCausalLM, None]``
            if isinstance(v, ast.Call) and dotted(v.func) and not v.args and not v.keywords:
                found["call"] = dotted(v.func)  # ``EntryClass = get_classes()``: followed into the function
            if any(n is None and not isinstance(e, ast.Constant) for n, e in zip(names, elts)):
                _built(found, st, v, values)  # a call, a comprehension…: what it holds is known only at run time
                if before is not None and (_reads_entry(v) or isinstance(v, ast.Call)):
                    # ``EntryClass = EntryClass[1:]``: built from the classes it held, which it may keep
                    found["mentions"] += [d for d in before["names"] + before.get("mentions", [])
                                          if d not in found["mentions"]]
        elif found is not None:
            # ``EntryClass.append(X)``, ``.extend([X, Y])``, ``.remove(X)``, ``EntryClass += [X]``
            call = st.value if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) else None
            if call is not None and dotted(call.func) in (f"{ENTRY_NAME}.{m}" for m in ("append", "extend", "remove")):
                op = call.func.attr
                arg = call.args[0] if len(call.args) == 1 else None
            elif isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name) and st.target.id == ENTRY_NAME \
                    and isinstance(st.op, ast.Add):
                op, arg = "extend", st.value
            else:
                continue
            elts = (arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [None]) if op == "extend" else [arg]
            names = [dotted(e) if e is not None else None for e in elts]
            if op == "remove":
                found["names"] = [n for n in found["names"] if n not in names]
            else:
                found["names"] += [n for n in names if n]
            found["unreadable"] = found["unreadable"] or None in names
            if any(n is None and not isinstance(e, ast.Constant) for n, e in zip(names, elts)):
                _built(found, st, arg if arg is not None else st, values)
            if found.get("tuple") and isinstance(st, ast.AugAssign):
                found["tuple"] = (ast.unparse(st)[:100], st.lineno)  # ``+=`` on a tuple gives a tuple
            found["line"] = st.lineno
    return found


def _rebound(st: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds or unbinds other than as the plain
    target of an assignment (an import, a ``def``/``class``, a loop or ``with`` target, ``+=``, a
    walrus, ``del``, an unpacking); nested scopes are included (more names than Python binds,
    which only stops a name from being followed)."""
    out: set[str] = set()
    if isinstance(st, (ast.Import, ast.ImportFrom)):
        out.update((a.asname or a.name).split(".")[0] for a in st.names)
    elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.add(st.name)
    plain = set(map(id, st.targets if isinstance(st, ast.Assign) else
                    [st.target] if isinstance(st, ast.AnnAssign) else []))
    for n in ast.walk(st):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and id(n) not in plain:
            out.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)) and n is not st:
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
    return out


def _through_names(value: ast.expr, values: dict[str, ast.expr]) -> tuple[ast.expr, list[str]]:
    """The value ``EntryClass`` is bound to, through the module-level names it reads (``_T = (A, B)``
    then ``EntryClass = _T``; at most five names): ``(the value those names hold, [the names])``
    when it is anything but a name or a dotted name (a class, which the resolver follows), else
    ``(value, [])``."""
    v, via = value, []
    while isinstance(v, ast.Name) and v.id in values and v.id != ENTRY_NAME and len(via) < 5:
        via.append(v.id)
        v = values[v.id]
    if not via or isinstance(v, (ast.Name, ast.Attribute)):
        return value, []
    return v, via


def _reads_entry(value: ast.AST) -> bool:
    """True when an expression reads ``EntryClass`` (``EntryClass[:1]``, ``EntryClass + [X]``)."""
    return any(isinstance(n, ast.Name) and n.id == ENTRY_NAME for n in ast.walk(value))


def _unpacked_entry(targets: list, value: ast.AST) -> bool | None:
    """True when a target of an assignment unpacks into ``EntryClass`` (``EntryClass, x = ...``,
    ``[EntryClass, *rest] = ...``), else None."""
    for t in targets:
        if isinstance(t, (ast.Tuple, ast.List)) and any(isinstance(n, ast.Name) and n.id == ENTRY_NAME
                                                        for n in ast.walk(t)):
            return True
    return None


def _built(found: dict, st: ast.stmt, value: ast.AST, values: dict[str, ast.expr] | None = None) -> None:
    """Record that ``EntryClass`` is built at run time by ``st``: the statement (``built``) and
    the dotted names its value mentions (``mentions``: the classes it may register), through the
    values of the module-level names it reads (``values``: ``_B = [A, B]`` then ``[*_B]``; at
    most four levels)."""
    found.setdefault("built", (ast.unparse(st)[:100], st.lineno))
    seen = found.setdefault("mentions", [])
    todo, expanded = [(value, 0)], set()
    while todo:
        node, depth = todo.pop()
        for n in ast.walk(node):
            d = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
            if d and d not in seen and d != ENTRY_NAME:
                seen.append(d)
            if values and isinstance(n, ast.Name) and n.id in values and n.id not in expanded and depth < 4:
                expanded.add(n.id)
                todo.append((values[n.id], depth + 1))


def extract_entry_changes(tree: ast.Module) -> list | None:
    """Changes to ``EntryClass`` out of the module's straight-line statements (in a loop, a
    branch, a function; see :func:`auditor.index.tables.hidden_changes`) or made through another
    name bound to the same list (:func:`_entry_aliases`), or None. Each change is ``(None,
    construct, line)``; one made through an alias is ``(None, construct, line, mentions)``, with
    the dotted names its statement mentions (the classes it may add)."""
    followed = set()
    for st in tree.body:  # the statements extract_entry follows itself
        call = st.value if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) else None
        if call is not None and dotted(call.func) in (f"{ENTRY_NAME}.{m}" for m in ("append", "extend", "remove")) \
                and all(isinstance(a, (ast.Name, ast.Attribute, ast.List, ast.Tuple)) for a in call.args) \
                or isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name) and st.target.id == ENTRY_NAME \
                and isinstance(st.op, ast.Add):
            followed.add(id(st))
    out = list(hidden_changes(tree, {ENTRY_NAME}, followed).get(ENTRY_NAME, []))
    entry = extract_entry(tree)
    aliases, kept = _entry_aliases(tree, {n: entry["via_at"] for n in entry.get("via", ())} if entry else {})
    out += kept
    if aliases:
        for name, changes in hidden_changes(tree, set(aliases)).items():
            how, line = aliases[name]
            for _, what, at in changes:
                node = next((n for n in ast.walk(tree) if getattr(n, "lineno", None) == at
                             and isinstance(n, ast.stmt)), None)
                mentions = [d for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))
                            for d in [dotted(n)] if d and d.split(".")[0] not in aliases] if node else []
                out.append((None, f"{what} (through the alias `{how}`, line {line})", at, mentions))
    return out or None


def _entry_aliases(tree: ast.Module, via: dict[str, tuple[str, int]] | None = None) \
        -> tuple[dict[str, tuple[str, int]], list]:
    """Other names bound to the ``EntryClass`` list, anywhere in the module: ``_e = EntryClass``
    (and aliases of aliases), the names ``via`` it was bound through (``_L`` of ``EntryClass = _L``,
    to that statement and its line), as ``{name: (statement, line)}``; and the references kept
    where changes through them cannot be traced, as changes ``(None, construct, line, [])``: a
    default argument (``def f(entries=EntryClass)``), an item of a literal (``[EntryClass]``); and
    those the straight-line reading and :func:`auditor.index.tables.hidden_changes` do not see
    (:func:`_method_changes`: ``add = EntryClass.append``, ``(e := EntryClass).clear()``), as
    ``(None, construct, line, mentions)``."""
    aliases: dict[str, tuple[str, int]] = dict(via or {})
    kept: list = []
    watched = {ENTRY_NAME, *aliases}
    while True:
        grew = False
        for n in ast.walk(tree):
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and isinstance(n.value, ast.Name) \
                    and n.value.id in watched:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id not in watched:
                        aliases[t.id] = (ast.unparse(n)[:80], n.lineno)
                        watched.add(t.id)
                        grew = True
        if not grew:
            break
    for n in ast.walk(tree):
        held = []
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            held = n.args.defaults + [d for d in n.args.kw_defaults if d is not None]
            what = f"def {n.name}(...)" if not isinstance(n, ast.Lambda) else "lambda"
        elif isinstance(n, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            held = n.values if isinstance(n, ast.Dict) else n.elts
            what = ast.unparse(n)[:80]
        if any(isinstance(h, ast.Name) and h.id in watched for h in held):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = n.args.posonlyargs + n.args.args
                pairs = list(zip(args[len(args) - len(n.args.defaults):], n.args.defaults))
                pairs += [(a, d) for a, d in zip(n.args.kwonlyargs, n.args.kw_defaults) if d is not None]
                what = next(f"def {n.name}({a.arg}={d.id})" for a, d in pairs
                            if isinstance(d, ast.Name) and d.id in watched)
            kept.append((None, f"{what} (keeps a reference to {ENTRY_NAME})", n.lineno, []))
    kept += _method_changes(tree, watched)
    return aliases, kept


#: The methods of a list that change it in place (``EntryClass.append``, ``__setitem__``, ...).
LIST_MUTATORS = frozenset(CONTAINER_MUTATORS) | {"sort", "reverse", "__imul__", "__setattr__", "__delattr__"}

#: Callables that only read a list handed to them (``len(EntryClass)``).
_LIST_READERS = frozenset({"len", "print", "list", "tuple", "set", "frozenset", "sorted", "iter", "any", "all",
                           "isinstance", "repr", "str", "enumerate", "zip", "reversed", "sum", "min", "max", "id",
                           "type", "hasattr", "bool"})


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    """``id(node)`` → its parent node, for every node of ``tree``."""
    return {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}


def _is_root(node: ast.AST, watched: set[str]) -> bool:
    """True when ``node`` evaluates to the watched list: one of the ``watched`` names, or a walrus
    that binds it (``(e := EntryClass)``)."""
    while isinstance(node, ast.NamedExpr):
        node = node.value
    return isinstance(node, ast.Name) and node.id in watched


def _method_changes(tree: ast.Module, watched: set[str]) -> list:
    """Changes to the list the ``watched`` names hold that neither :func:`extract_entry` nor
    :func:`auditor.index.tables.hidden_changes` sees, each ``(None, construct, line, mentions)``
    (``mentions``: the dotted names the change may add): a mutating method taken without being
    called (``add = EntryClass.append`` then ``add(X)``, ``map(EntryClass.append, [X])``; any call
    of it may change the list), and any change through a walrus (``(e := EntryClass).append(X)``,
    ``(e := EntryClass)[0] = X``, ``f((e := EntryClass))``)."""
    parents = _parents(tree)
    out = []

    def names_in(nodes) -> list[str]:
        return [d for x in nodes for n in ast.walk(x) if isinstance(n, (ast.Name, ast.Attribute))
                for d in [dotted(n)] if d and d.split(".")[0] not in watched]

    for n in ast.walk(tree):
        p = parents.get(id(n))
        if isinstance(n, ast.Attribute) and n.attr in LIST_MUTATORS and _is_root(n.value, watched):
            if isinstance(p, ast.Call) and p.func is n:
                if isinstance(n.value, ast.NamedExpr):  # ``(e := EntryClass).append(X)``
                    out.append((None, ast.unparse(p)[:80], p.lineno, names_in(p.args + [k.value for k in p.keywords])))
                continue
            # the bound method, kept: what its calls add
            if isinstance(p, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and p.value is n:
                targets = p.targets if isinstance(p, ast.Assign) else [p.target]
                held = {t.id for t in targets if isinstance(t, ast.Name)}
                calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                         and c.func.id in held]
                mentions = names_in([a for c in calls for a in c.args + [k.value for k in c.keywords]])
                what = ast.unparse(p)[:80]
            else:
                call = p
                while call is not None and not isinstance(call, ast.Call):
                    call = parents.get(id(call))
                mentions = names_in([a for a in call.args + [k.value for k in call.keywords] if a is not n]) \
                    if call is not None else []
                what = ast.unparse(_stmt_of(n, parents))[:80]
            out.append((None, what, n.lineno, mentions))
        elif isinstance(n, ast.NamedExpr) and _is_root(n, watched):
            if isinstance(p, ast.Subscript) and not isinstance(p.ctx, ast.Load):
                out.append((None, ast.unparse(parents.get(id(p), p))[:80], n.lineno, []))
            elif isinstance(p, ast.Call) and p.func is not n and dotted(p.func) not in _LIST_READERS:
                out.append((None, ast.unparse(p)[:80], n.lineno, names_in(p.args)))
    return out


#: Reads ``EntryClass`` in the model modules.
ENTRY_EXTRACTOR = Extractor("sglang-entry", extract_entry, prefixes=(MODELS_DIR,), needles=(ENTRY_NAME.encode(),))

#: ``EntryClass = NAME`` on a line of its own (the name ``EntryClass`` may be bound through)
_ENTRY_FROM_NAME = re.compile(rb"(?m)^" + ENTRY_NAME.encode() + rb"\s*(?::[^=\n]*)?=\s*([A-Za-z_]\w*)\s*(?:#[^\n]*)?$")


def may_change_entry(source: bytes) -> bool:
    """True when a module's bytes name ``EntryClass`` more than once, or bind it to a name that is
    itself assigned at the start of a line (``_L = [A, B]`` then ``EntryClass = _L``: the list may
    be changed through ``_L``). A module-level function, so that the extractor can be sent to the
    summary worker processes."""
    if source.count(ENTRY_NAME.encode()) > 1:
        return True
    return any(re.search(rb"(?m)^" + re.escape(m.group(1)) + rb"\s*(?::[^=\n]*)?[+]?=(?!=)", source)
               for m in _ENTRY_FROM_NAME.finditer(source))


#: Finds changes to ``EntryClass`` the straight-line reading misses, in the model modules that may
#: change it (:func:`may_change_entry`; the others cannot change it but through ``globals()``,
#: which the summary sees).
ENTRY_CHANGES_EXTRACTOR = Extractor("sglang-entry-changes", extract_entry_changes, prefixes=(MODELS_DIR,),
                                    needles=(ENTRY_NAME.encode(),),
                                    prefilter=may_change_entry)

def _stmt_of(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST:
    """The statement ``node`` is part of (``node`` itself when it has none)."""
    st = node
    while st is not None and not isinstance(st, ast.stmt):
        st = parents.get(id(st))
    return st if st is not None else node


def _use_changes(node: ast.AST, parents: dict[int, ast.AST], aliases: set[str]) -> bool:
    """True when the use of ``node``, an expression that evaluates to another module's
    ``EntryClass``, may change that list or keep it where a change cannot be followed: a mutating
    method called or taken (:data:`LIST_MUTATORS`), an item written, the list handed to a call
    that is not a plain reader, stored in a container or an attribute, returned; a plain name bound
    to it is added to ``aliases`` (whose uses the caller reads in turn). Reading it (``len(...)``,
    a loop, a comparison, ``+``, a copy) changes nothing."""
    p = parents.get(id(node))
    if isinstance(p, ast.NamedExpr) and p.value is node:
        aliases.add(p.target.id)
        return _use_changes(p, parents, aliases)
    if isinstance(p, ast.Attribute):
        return p.attr in LIST_MUTATORS
    if isinstance(p, ast.Subscript):
        return p.value is node and not isinstance(p.ctx, ast.Load)
    if isinstance(p, ast.keyword):
        p, node = parents.get(id(p)), p
    if isinstance(p, ast.Call):
        f = dotted(p.func)
        if f == "getattr" and len(p.args) >= 2 and isinstance(p.args[1], ast.Constant):
            return p.args[1].value in LIST_MUTATORS
        return p.func is not node and f not in _LIST_READERS
    if isinstance(p, (ast.Assign, ast.AnnAssign)) and p.value is node:
        targets = p.targets if isinstance(p, ast.Assign) else [p.target]
        aliases.update(t.id for t in targets if isinstance(t, ast.Name))
        return not all(isinstance(t, ast.Name) for t in targets)
    return not isinstance(p, (ast.Expr, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.If, ast.While,
                              ast.IfExp, ast.For, ast.AsyncFor, ast.comprehension, ast.Starred,
                              ast.FormattedValue, ast.Assert, ast.AugAssign))


def extract_entry_refs(tree: ast.Module) -> list | None:
    """The changes a module makes to another module's ``EntryClass`` (``m.EntryClass = X``,
    ``m.EntryClass.remove(X)``, ``setattr(m, "EntryClass", X)``, ``add = m.EntryClass.append``,
    ``from M import EntryClass as E`` then ``E.clear()``; see :func:`_use_changes`), or None.
    Each is ``[head, construct, line, function or None, mentions]``: ``head`` the dotted
    expression whose attribute it is (``m``; None when it is not a dotted name), or ``from M``
    for a name imported from module ``M`` as written (``from .llama``), or ``computed m`` for a write
    by a name not written out on an imported ``m`` (``setattr(m, name, X)``, ``vars(m)[k] = X``:
    :func:`_computed_write`), the function whose body makes it (None: at module level), and the
    dotted names its statement mentions (the classes it may add)."""
    parents = _parents(tree)
    roots: list[tuple[ast.AST, str | None]] = []  # the expressions that evaluate to another module's EntryClass
    imported: dict[str, str] = {}  # a name bound by ``from M import EntryClass``: M
    out: list = []

    def record(node: ast.AST, head: str | None) -> None:
        st = _stmt_of(node, parents)
        fn = st
        while fn is not None and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fn = parents.get(id(fn))
        mentions = [d for n in ast.walk(st) if isinstance(n, (ast.Name, ast.Attribute)) for d in [dotted(n)] if d]
        out.append([head, ast.unparse(st)[:100], getattr(st, "lineno", 0), fn.name if fn is not None else None,
                    mentions])

    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr == ENTRY_NAME:
            head = dotted(n.value) or _module_by_name(n.value)
            if not isinstance(n.ctx, ast.Load):
                record(n, head)  # ``m.EntryClass = X``, ``del m.EntryClass``
            else:
                roots.append((n, head))
        elif isinstance(n, ast.ImportFrom):
            for a in n.names:
                if a.name == ENTRY_NAME:
                    imported[a.asname or a.name] = "." * n.level + (n.module or "")
        elif isinstance(n, ast.Call) and dotted(n.func) in ("setattr", "delattr", "getattr") and len(n.args) >= 2 \
                and isinstance(n.args[1], ast.Constant) and n.args[1].value == ENTRY_NAME:
            if dotted(n.func) == "getattr":
                roots.append((n, dotted(n.args[0]) or _module_by_name(n.args[0])))
            else:
                record(n, dotted(n.args[0]) or _module_by_name(n.args[0]))
        else:
            obj = _computed_write(n)
            if obj is not None and (dotted(obj) or "").split(".")[0] in _import_names(tree):
                record(n, COMPUTED + dotted(obj))  # a name not written out, on an imported object: maybe EntryClass
    def through(aliases: set[str], head: str | None) -> None:
        """Record the changes made through the names bound to the list, anywhere in the module."""
        seen: set[str] = set()
        while aliases - seen:
            name = (aliases - seen).pop()
            seen.add(name)
            for n in ast.walk(tree):
                if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) \
                        and _use_changes(n, parents, aliases):
                    record(n, head)

    for node, head in roots:
        aliases: set[str] = set()
        if _use_changes(node, parents, aliases):
            record(node, head)
        through(aliases, head)
    for name, module in imported.items():
        through({name}, f"from {module}")
    return out or None


def _module_by_name(node: ast.AST) -> str | None:
    """``sys.modules["M"]`` or ``importlib.import_module("M")`` (an absolute name written out): the
    head ``from M`` (that module's own ``EntryClass``); else None."""
    name = None
    if isinstance(node, ast.Subscript) and dotted(node.value) == "sys.modules" and isinstance(node.slice, ast.Constant):
        name = node.slice.value
    elif isinstance(node, ast.Call) and dotted(node.func) in ("importlib.import_module", "import_module", "__import__") \
            and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and dotted(node.func) != "__import__":
        name = node.args[0].value
    return f"from {name}" if isinstance(name, str) and name and not name.startswith(".") else None


#: The ``head`` prefix of a change made by a name not written out (:func:`_computed_write`): it
#: counts only when the head is a module of the tree.
COMPUTED = "computed "


def _import_names(tree: ast.Module) -> set[str]:
    """The names the module's import statements bind (found once per tree)."""
    memo = tree.__dict__.get("_import_names")
    if memo is None:
        memo = tree.__dict__["_import_names"] = {
            (a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in n.names}
    return memo


def _namespace_of(node: ast.AST) -> ast.AST | None:
    """For ``vars(X)`` or ``X.__dict__``, ``X``; else None."""
    if isinstance(node, ast.Call) and dotted(node.func) == "vars" and len(node.args) == 1 and not node.keywords:
        return node.args[0]
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    return None


def _computed_write(n: ast.AST) -> ast.AST | None:
    """The object ``X`` that ``n`` writes an attribute of by a name that is not written out, and so
    may be ``EntryClass``: ``setattr(X, name, v)``/``delattr(X, name)`` with a computed name,
    ``vars(X)[k] = v``, ``X.__dict__[k] = v`` (or ``del``) with a computed key or ``"EntryClass"``,
    ``vars(X).update(...)``; else None."""
    if isinstance(n, ast.Call) and dotted(n.func) in ("setattr", "delattr") and len(n.args) >= 2 \
            and not isinstance(n.args[1], ast.Constant):
        return n.args[0]
    if isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)):
        obj = _namespace_of(n.value)
        if obj is not None and (not isinstance(n.slice, ast.Constant) or n.slice.value == ENTRY_NAME):
            return obj
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in LIST_MUTATORS:
        return _namespace_of(n.func.value)
    return None


#: A write of an attribute whose name is not written out (``setattr``, ``vars(m)[...]``, ``m.__dict__``)
_COMPUTED_REF = re.compile(rb"\b(?:setattr|delattr|vars)\s*\(|__dict__")


def may_write_entry(source: bytes) -> bool:
    """True when a module's bytes may write another module's ``EntryClass``: they refer to it
    (:func:`refers_to_entry`) or write an attribute by a computed name (:data:`_COMPUTED_REF`)."""
    return refers_to_entry(source) or _COMPUTED_REF.search(source) is not None


#: A reference to another module's ``EntryClass``: ``m.EntryClass``, ``"EntryClass"`` (``setattr``,
#: ``getattr``), ``from M import EntryClass``
_OUTSIDE_REF = re.compile(rb"\.\s*EntryClass\b|[\"']EntryClass[\"']|\bimport\b(?:[^\n]|\\\n)*\bEntryClass\b"
                          rb"|\bimport\s*\([^)]*\bEntryClass\b")


def refers_to_entry(source: bytes) -> bool:
    """True when a module's bytes may refer to another module's ``EntryClass`` (:data:`_OUTSIDE_REF`;
    a module-level function, so that the extractor can be sent to the summary worker processes)."""
    return _OUTSIDE_REF.search(source) is not None


#: Finds, in SGLang's modules (the whole ``sglang/`` package: a module outside ``sglang/srt/`` that
#: the engine imports runs too), the changes made to a model module's ``EntryClass`` from outside
#: it (:func:`extract_entry_refs`).
ENTRY_REFS_EXTRACTOR = Extractor("sglang-entry-refs", extract_entry_refs, prefixes=("sglang/",),
                                 prefilter=may_write_entry)
#: Words whose modules :meth:`auditor.engines.sglang.registry.Registry.changed_elsewhere` reads.
ENTRY_REF_WORDS = (ENTRY_NAME, "setattr", "delattr", "vars", "__dict__")

#: Words of an SGLang class name that mark a draft model (an EAGLE/EAGLE-3 head, a NextN/MTP
#: module, a DFlash or Medusa drafter): SGLang registers drafters beside targets, in one
#: namespace, and says nothing else about them.
