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

from auditor.engines.sglang.entry import (COMPUTED, ENTRY_CHANGES_EXTRACTOR, ENTRY_EXTRACTOR, ENTRY_NAME,
                                          ENTRY_REF_WORDS, ENTRY_REFS_EXTRACTOR, MODELS_DIR)
from auditor.index.resolve import Resolver
from auditor.index.syntax import dotted
from auditor.index.targets import ClassRef, FunctionRef, ModuleRef, Target, Unresolved
from auditor.model.errors import AuditError

MODELS_PACKAGE = "sglang.srt.models"
REGISTRY_MODULE = "sglang.srt.models.registry"


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
        """The changes other modules of the ``sglang/`` package make to the ``EntryClass`` of ``modules``
        (the model module SGLang's registry imports, ``imported``, and the one whose list it
        holds), read by :data:`ENTRY_REFS_EXTRACTOR`, that may run before the registry reads it.

        A change from a model module whose file name sorts after ``imported``'s, which no other
        module names, has no effect: ``import_model_classes`` imports the modules of the folder in
        that order (``pkgutil.iter_modules``) and has read the list by then. SGLang's own
        registry module (``sglang/srt/models/registry.py``), which reads every ``EntryClass``, is
        left out. A change through a name that cannot be bound (a parameter) counts for every
        module when it is made in ``sglang/srt/``; outside it (a patcher elsewhere in the package,
        which runs when the engine imports it) only a change into a model module the index
        resolves counts (``sglang/multimodal_gen/registry.py`` reads its own pipelines' lists).

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
            paths = sorted({p for w in ENTRY_REF_WORDS for p in r.mentioning(w) if p.startswith("sglang/")})
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
            if target is None and not s.path.startswith("sglang/srt/"):
                continue  # outside srt/: only a write into a resolved model module counts
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
        if head.startswith(COMPUTED):  # a name not written out: counts for a module of the tree only
            t = r.resolve_dotted(s.module, head[len(COMPUTED):], at_line=line)
            return t.module if isinstance(t, ModuleRef) else ""
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
