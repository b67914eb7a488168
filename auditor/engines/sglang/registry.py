"""SGLang's model registry, read statically.

SGLang has no table of architectures: ``sglang/srt/models/registry.py``
(``import_model_classes``) imports every module directly under ``sglang/srt/models/`` (not the
sub-packages) and collects its module-level ``EntryClass``, a class or a list of classes; the
architecture name is the class's ``__name__``. So here: every non-package module of that folder
is read, its last module-level ``EntryClass = X`` / ``EntryClass = [X, Y]`` assignment is taken,
each name is resolved to its class, and the class's own name is the architecture (an alias
``EntryClass = [Alias]`` registers the class it names, under the class's name).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from auditor.index.resolve import ClassRef, FunctionRef, ModuleRef, Resolver, Target, Unresolved
from auditor.index.summary import Extractor, dotted
from auditor.index.tables import CONTAINER_MUTATORS, hidden_changes
from auditor.model.errors import AuditError

MODELS_PACKAGE = "sglang.srt.models"
MODELS_DIR = "sglang/srt/models/"
REGISTRY_MODULE = "sglang.srt.models.registry"
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
    for a name imported from module ``M`` as written (``from .llama``), the function whose body makes it (None: at module level), and the
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
            head = dotted(n.value)
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
                roots.append((n, dotted(n.args[0])))
            else:
                record(n, dotted(n.args[0]))
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


#: A reference to another module's ``EntryClass``: ``m.EntryClass``, ``"EntryClass"`` (``setattr``,
#: ``getattr``), ``from M import EntryClass``
_OUTSIDE_REF = re.compile(rb"\.\s*EntryClass\b|[\"']EntryClass[\"']|\bimport\b(?:[^\n]|\\\n)*\bEntryClass\b"
                          rb"|\bimport\s*\([^)]*\bEntryClass\b")


def refers_to_entry(source: bytes) -> bool:
    """True when a module's bytes may refer to another module's ``EntryClass`` (:data:`_OUTSIDE_REF`;
    a module-level function, so that the extractor can be sent to the summary worker processes)."""
    return _OUTSIDE_REF.search(source) is not None


#: Finds, in SGLang's ``sglang/srt/`` modules, the changes made to a model module's ``EntryClass``
#: from outside it (:func:`extract_entry_refs`).
ENTRY_REFS_EXTRACTOR = Extractor("sglang-entry-refs", extract_entry_refs, prefixes=("sglang/srt/",),
                                 needles=(ENTRY_NAME.encode(),), prefilter=refers_to_entry)

#: Words of an SGLang class name that mark a draft model (an EAGLE/EAGLE-3 head, a NextN/MTP
#: module, a DFlash or Medusa drafter): SGLang registers drafters beside targets, in one
#: namespace, and says nothing else about them.
DRAFTER_WORDS = ("Eagle", "EAGLE", "NextN", "MTP", "DFlash", "Medusa", "DraftModel")


@dataclass
class EntryRow:
    """One registered architecture: its name (the class's ``__name__``), the ``module`` (dotted)
    whose ``EntryClass`` lists it, the ``name`` written there, the class it resolves to, and the
    ``path``/``line`` of the ``EntryClass`` assignment. ``tables`` is ``["EntryClass"]`` (the
    shape of a vLLM registry row, for reports)."""

    architecture: str
    module: str
    class_name: str
    target: Target
    path: str
    line: int | None
    tables: list[str] = field(default_factory=lambda: [ENTRY_NAME])

    @property
    def dotted_module(self) -> str:
        """The module whose ``EntryClass`` lists the row."""
        return self.module

    @property
    def is_drafter(self) -> bool:
        """True when the class name marks a drafter (:data:`DRAFTER_WORDS`)."""
        return any(w in self.architecture for w in DRAFTER_WORDS)

    @property
    def is_multimodal_table(self) -> bool:
        """Always False: SGLang has no multimodal table."""
        return False


class Registry:
    """The architectures of an SGLang tree (see the module docstring).

    Raises:
        AuditError: the tree has no ``sglang/srt/models/`` module with an ``EntryClass``.
    """

    def __init__(self, resolver: Resolver):
        self.resolver = resolver
        tree = resolver.tree
        self.path = tree.path_of(REGISTRY_MODULE) or MODELS_DIR
        self.entries: dict[str, EntryRow] = {}
        #: ``(module path, why)`` for model modules whose ``EntryClass`` cannot be read
        self.problems: list[tuple[str, str]] = []
        dups: list[str] = []
        tuples: list[str] = []  # EntryClass bound to a tuple: SGLang's registry fails on it at start-up
        constants: list[str] = []  # an item of the list that is a constant (None, a name as a string): the same
        modules = sorted(p for p in tree.files if p.startswith(MODELS_DIR) and p.count("/") == 3
                         and not p.endswith("/__init__.py"))
        for p in modules:
            try:
                data = tree.read(p)
            except (KeyError, OSError):
                self.problems.append((p, "cannot be read"))
                continue
            if ENTRY_NAME.encode() not in data and b"import *" not in data:
                continue
            s = tree.summary(p)
            if s.error:
                self.problems.append((p, f"does not parse ({s.error})"))
                continue
            if s.raises_at is not None:
                # import_model_classes catches the import error, logs it and skips the module
                self.problems.append((p, f"raises {s.raises_at[1]} at line {s.raises_at[0]} when imported: SGLang "
                                         "skips the module and registers none of its architectures"))
                continue
            imported = s.module
            entry, s = self._entry_of(s)
            if not entry:
                continue
            outside = self.changed_elsewhere({imported, s.module}, imported)
            marks = s.unfollowable.get(ENTRY_NAME, []) + s.unfollowable.get("*", [])
            hidden = s.extras.get(ENTRY_CHANGES_EXTRACTOR.name)
            why = None
            if marks:
                construct, line, _ = marks[0]
                why = (f"{ENTRY_NAME} of {s.path} may be rebound by {construct} at {s.path}:{line}, which static "
                       "analysis cannot follow")
            elif hidden:
                construct, line = hidden[0][1], hidden[0][2]
                why = (f"{ENTRY_NAME} of {s.path} may be changed by `{construct}` at {s.path}:{line}, which static "
                       "analysis cannot follow")
            elif outside:
                why = (f"{ENTRY_NAME} of {s.path} may be changed by {outside[0][0]}, which static analysis cannot "
                       "follow")
                entry = {**entry, "resolved_mentions": [m for _, found in outside for m in found]}
            elif entry.get("built"):
                construct, line = entry["built"]
                why = (f"{ENTRY_NAME} of {s.path} is built at run time by `{construct}` at {s.path}:{line}, which "
                       "static analysis cannot follow: which classes it registers is not known")
                given = self._returned_by(s, entry)
                if given is not None and given[0] is None:
                    entry = {**entry, "names": [], "resolved": given[1], "unreadable": False}  # followed: the classes it returns
                    why = None
                elif given is not None:
                    why = (f"{ENTRY_NAME} of {s.path} is what `{construct}` at {s.path}:{line} returns, and "
                           f"{given[0]}, which static analysis cannot follow: which classes it registers is not known")
                    entry = {**entry, "mentions": entry.get("mentions", []), "resolved_mentions": given[1]}
            if why is not None:
                names = list(entry["names"])
                more = entry.get("mentions", []) + [d for h in hidden or () if len(h) > 3 for d in h[3]]
                for d in more:  # the classes a run-time EntryClass may register
                    if d not in names and isinstance(resolver.resolve_dotted(s.module, d), ClassRef):
                        names.append(d)
                for name in names:
                    arch = name.rsplit(".", 1)[-1]
                    self.entries.setdefault(arch, EntryRow(arch, s.module, name, Unresolved(f"{s.module}.{name}", why),
                                                           s.path, entry["line"]))
                for name, t in entry.get("resolved_mentions", ()):  # named in the function it calls
                    arch = t.name
                    if arch in self.entries and not isinstance(self.entries[arch].target, Unresolved):
                        # it may register this class a second time, on which SGLang asserts at start-up
                        self.entries[arch].target = Unresolved(f"{s.module}.{name}", why)
                    self.entries.setdefault(arch, EntryRow(arch, s.module, name, Unresolved(f"{s.module}.{name}", why),
                                                           s.path, entry["line"]))
                continue
            if entry.get("tuple"):
                construct, line = entry["tuple"]
                tuples.append(f"`{construct}` at {s.path}:{line}")
            if entry.get("constant"):
                construct, line = entry["constant"]
                constants.append(f"`{construct}` at {s.path}:{line}")
            if entry.get("unreadable"):
                self.problems.append((p, f"{ENTRY_NAME} (line {entry['line']}) is not a class or a list of classes"))
            for name, t in [(n, resolver.resolve_dotted(s.module, n)) for n in entry["names"]] + entry.get("resolved", []):
                arch = t.name if isinstance(t, ClassRef) else name.rsplit(".", 1)[-1]
                if arch in self.entries:
                    first = self.entries[arch]
                    via = f" through {p}" if s.path != p else ""
                    dups.append(f"{arch} ({first.path}:{first.line} and {s.path}:{entry['line']}{via})")
                    continue
                self.entries[arch] = EntryRow(arch, s.module, name, t, s.path, entry["line"])
        if not self.entries:
            raise AuditError(f"no model registry in this tree: no module of {MODELS_DIR} defines {ENTRY_NAME}")
        # what stops SGLang's import_model_classes at start-up, whatever model it was asked to
        # serve (every target then fails the same way)
        why = None
        if tuples:
            # it registers the items of a list, and takes anything else for one class whose
            # ``__name__`` it reads: a tuple has none
            why = (f"{ENTRY_NAME} is a tuple ({'; '.join(tuples)}): SGLang's model registry iterates a list and "
                   "reads the `__name__` of anything else, which a tuple lacks, so it fails at start-up and no model "
                   "can be served")
        elif constants:
            # the same for an item of the list that is no class: it has no ``__name__`` either
            why = (f"{ENTRY_NAME} holds a constant ({'; '.join(constants)}): SGLang's model registry reads the "
                   "`__name__` of each item, which a constant lacks, so it fails at start-up and no model can be "
                   "served")
        elif dups:
            # it asserts that no architecture name is registered twice
            why = (f"{ENTRY_NAME} registers {'; '.join(dups)} twice: SGLang's model registry asserts on a "
                   "duplicate at start-up, so no model can be served")
        if why is not None:
            for e in self.entries.values():
                e.target = Unresolved(f"{e.module}.{e.class_name}", why)
        self._roles: dict[str, str] = {}

    def changed_elsewhere(self, modules: set[str], imported: str) -> list[tuple[str, list]]:
        """The changes other modules of ``sglang/srt/`` make to the ``EntryClass`` of ``modules``
        (the model module SGLang's registry imports, ``imported``, and the one whose list it
        holds), read by :data:`ENTRY_REFS_EXTRACTOR`, that may run before the registry reads it.

        A change from a model module whose file name sorts after ``imported``'s, which no other
        module names, has no effect: ``import_model_classes`` imports the modules of the folder in
        that order (``pkgutil.iter_modules``) and has read the list by then. SGLang's own
        registry module (``sglang/srt/models/registry.py``), which reads every ``EntryClass``, is
        left out. A change through a name that cannot be bound (a parameter) counts for every
        module.

        Args:
            modules: the dotted modules whose ``EntryClass`` counts.
            imported: the model module the registry imports.

        Returns:
            ``("`construct` at path:line (when it runs)", [(name, ClassRef)])`` per change: the
            classes its statement names, which it may register.
        """
        r = self.resolver
        refs = self.__dict__.get("_refs")
        if refs is None:
            refs = self.__dict__["_refs"] = []
            paths = [p for p in r.mentioning(ENTRY_NAME) if p.startswith("sglang/srt/")]
            r.tree.summarize_ahead(paths)
            for p in paths:
                s = r.tree.summary(p)
                if s.module == REGISTRY_MODULE:
                    continue
                for head, construct, line, fn, mentions in s.extras.get(ENTRY_REFS_EXTRACTOR.name) or ():
                    refs.append((s, self._module_of(s, head, line), construct, line, fn, mentions))
        out = []
        short = imported.rsplit(".", 1)[-1]
        for s, target, construct, line, fn, mentions in refs:
            if s.module in modules or (target is not None and target not in modules):
                continue
            mine = s.module.rsplit(".", 1)
            if s.path.startswith(MODELS_DIR) and s.path.count("/") == 3 and mine[0] == MODELS_PACKAGE \
                    and mine[1] > short and set(r.mentioning(mine[1])) <= {s.path}:
                continue  # imported after the registry has read the list, by nothing else
            when = f"in {fn}(), when it is called" if fn else f"when {s.module} is imported"
            named = [(d, t) for d in dict.fromkeys(mentions) for t in [r.resolve_dotted(s.module, d)]
                     if isinstance(t, ClassRef)]
            out.append((f"`{construct}` at {s.path}:{line} ({when})", named))
        return out

    def _module_of(self, s, head: str | None, line: int) -> str | None:
        """The dotted module whose ``EntryClass`` a change recorded in module ``s`` reaches through
        ``head`` (see :func:`extract_entry_refs`), ``""`` when ``head`` binds no module of the tree
        (a class, an outside name: no model module), or None when it cannot be known."""
        r = self.resolver
        if head is None:
            return None
        if head.startswith("from "):
            name = head[5:]
            level = len(name) - len(name.lstrip("."))
            if level:
                base = s.module.split(".") if s.path.endswith("/__init__.py") else s.module.split(".")[:-1]
                base = base[:len(base) - (level - 1)] if level > 1 else base
                name = ".".join(base + ([name[level:]] if name[level:] else []))
            return name
        t = r.resolve_dotted(s.module, head, at_line=line)
        if isinstance(t, ModuleRef):
            return t.module
        return None if isinstance(t, Unresolved) else ""

    def _returned_by(self, s, entry: dict) -> tuple[str | None, list] | None:
        """What the function called by ``EntryClass = f()`` in module ``s`` returns, read from its
        source wherever it is defined (another model module, a third module of the tree): ``(None,
        [(name, target)])`` when its body is only ``return [A, B]`` or ``return A`` (the names
        resolved in the function's module), ``(why, [(name, class)])`` when it is anything else (the
        classes its body names, which it may register), or None when ``f`` is not a function of
        the tree (then the call stays built at run time)."""
        callee = entry.get("call")
        r = self.resolver
        f = r.resolve_dotted(s.module, callee) if callee else None
        if not isinstance(f, FunctionRef):
            return None
        path = r.tree.path_of(f.module)
        try:
            tree = ast.parse(r.tree.read(path)) if path else None
        except (KeyError, OSError, SyntaxError, ValueError):
            tree = None
        fn = next((st for st in reversed(tree.body) if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and st.name == f.name), None) if tree is not None else None
        if fn is None:
            return None
        where = f"{path}:{fn.lineno}"
        body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) \
            and isinstance(fn.body[0].value, ast.Constant) else fn.body
        ret = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
        elts = ret.elts if isinstance(ret, ast.List) else [ret] if isinstance(ret, (ast.Name, ast.Attribute)) else None
        names = [dotted(e) for e in elts] if elts is not None and not isinstance(fn, ast.AsyncFunctionDef) \
            and not fn.decorator_list else None
        if names and all(names) and ENTRY_NAME not in names:
            return None, [(n, r.resolve_dotted(f.module, n)) for n in names]
        named = []
        for n in ast.walk(fn):
            d = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
            t = r.resolve_dotted(f.module, d) if d and d not in (x for x, _ in named) else None
            if isinstance(t, ClassRef):
                named.append((d, t))
        return f"{f.name}() (defined at {where}) does more than return a list of classes", named

    def _entry_of(self, s, depth: int = 0):
        """The ``EntryClass`` a model module ends up with, and the module whose names it lists:
        its own last assignment, unless a later star import or a ``from M import EntryClass``
        rebinds it (SGLang reads the module's attribute, so the imported one counts)."""
        r = self.resolver
        entry = s.extras.get(ENTRY_EXTRACTOR.name)
        if depth > 5:
            return entry, s
        b = s.bindings.get(ENTRY_NAME)
        after = max(entry["line"] if entry else 0, b.line if b is not None else 0)
        for mod, line in reversed(s.stars):
            if line > after and r.star_exports(mod, ENTRY_NAME):
                other = r.tree.module(mod)
                return self._entry_of(other, depth + 1) if other is not None else (entry, s)
        if b is not None and b.kind == "import" and b.line >= after:
            other = r.tree.module(b.target[0])
            if other is not None and b.target[1] == ENTRY_NAME:
                return self._entry_of(other, depth + 1)
        return entry, s

    def architectures(self) -> list[str]:
        """Every registered architecture name, sorted."""
        return sorted(self.entries)

    #: how messages name the engine whose registry this is
    display = "SGLang"

    def registered_in(self, arch: str) -> str:
        """Where a result note says ``arch`` is registered: the model module whose
        ``EntryClass`` names it, with its table (``sglang/srt/models/llama.py (EntryClass)``).
        Raises KeyError for an unknown architecture."""
        e = self.entries[arch]
        return f"{e.path} ({', '.join(e.tables)})"

    def class_ref(self, arch: str) -> Target:
        """The class an architecture names. Raises KeyError for an unknown architecture."""
        e = self.entries[arch]
        if isinstance(e.target, ClassRef):
            return e.target
        if isinstance(e.target, Unresolved):
            return e.target
        return Unresolved(f"{e.module}.{e.class_name}", f"{e.class_name} is not a class of the tree")

    def role(self, arch: str) -> str:
        """``drafter`` (the class name marks a draft model, :data:`DRAFTER_WORDS`), ``pooling``
        (the ``__init__`` the class runs, the first on its MRO, builds ``self.pooler`` and not
        ``self.logits_processor``: an embedding, reward or classification model), else
        ``target``. Raises KeyError for an unknown architecture."""
        if arch in self._roles:
            return self._roles[arch]
        e = self.entries[arch]
        role = "target"
        if e.is_drafter:
            role = "drafter"
        else:
            t = self.class_ref(arch)
            if isinstance(t, ClassRef):
                for c in self.resolver.mro(t).entries:
                    cf = self.resolver.cls(c) if isinstance(c, ClassRef) else None
                    if cf is not None and "__init__" in cf.methods:
                        assigns = cf.methods["__init__"].self_assigns  # the __init__ that runs
                        if "pooler" in assigns and "logits_processor" not in assigns:
                            role = "pooling"
                        break
        self._roles[arch] = role
        return role

    def drafters(self) -> list[EntryRow]:
        """Rows whose role is ``drafter``."""
        return [e for e in self.entries.values() if self.role(e.architecture) == "drafter"]
