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
from dataclasses import dataclass, field

from auditor.index.resolve import Resolver
from auditor.index.summary import Extractor
from auditor.index.syntax import dotted
from auditor.index.tables import hidden_changes
from auditor.index.targets import ClassRef, FunctionRef, Target, Unresolved
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
            elts = v.elts if isinstance(v, (ast.List, ast.Tuple)) else [v]
            names = [dotted(e) for e in elts]
            before = found
            found = {"names": [n for n in names if n], "line": st.lineno, "unreadable": None in names}
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
    aliases, kept = _entry_aliases(tree)
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


def _entry_aliases(tree: ast.Module) -> tuple[dict[str, tuple[str, int]], list]:
    """Other names bound to the ``EntryClass`` list, anywhere in the module: ``_e = EntryClass``
    (and aliases of aliases), as ``{name: (statement, line)}``; and the references kept where
    changes through them cannot be traced, as changes ``(None, construct, line, [])``: a default
    argument (``def f(entries=EntryClass)``), an item of a literal (``[EntryClass]``)."""
    aliases: dict[str, tuple[str, int]] = {}
    kept: list = []
    watched = {ENTRY_NAME}
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
    return aliases, kept


#: Reads ``EntryClass`` in the model modules.
ENTRY_EXTRACTOR = Extractor("sglang-entry", extract_entry, prefixes=(MODELS_DIR,), needles=(ENTRY_NAME.encode(),))

def names_entry_twice(source: bytes) -> bool:
    """True when a module's bytes name ``EntryClass`` more than once (a module-level function, so
    that the extractor can be sent to the summary worker processes)."""
    return source.count(ENTRY_NAME.encode()) > 1


#: Finds changes to ``EntryClass`` the straight-line reading misses, in the model modules that name
#: it more than once (the others cannot change it but through ``globals()``, which the summary sees).
ENTRY_CHANGES_EXTRACTOR = Extractor("sglang-entry-changes", extract_entry_changes, prefixes=(MODELS_DIR,),
                                    needles=(ENTRY_NAME.encode(),),
                                    prefilter=names_entry_twice)

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
            entry, s = self._entry_of(s)
            if not entry:
                continue
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
