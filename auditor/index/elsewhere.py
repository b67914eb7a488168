"""Changes to a class's members that the index cannot follow, wherever in the tree they are made.

:class:`ElsewhereMixin`, a part of :class:`auditor.index.resolve.Resolver`: the changes recorded on
the classes of an MRO, by ``__init_subclass__`` hooks, metaclasses and the packages above a module
(:meth:`~ElsewhereMixin.unfollowable_members`), and those made by any other module or function of
the tree (:meth:`~ElsewhereMixin.changes_from_elsewhere`), found by cheap byte searches of the
modules' texts (:meth:`~ElsewhereMixin.mentioning`, ``_may_change``, ``_reflected``) before any
module is summarised.
"""

from __future__ import annotations


from auditor.index.facts import ITEMS_OF, RUNS_CODE, MethodFact, ModuleSummary
from auditor.index.textsearch import (
    IDENTIFIER,
    DEL_STATEMENT,
    ALIAS,
    LOOP_CALL_WRITE,
    search_text,
    has_word,
    calls_exec,
    runs_text,
    dict_owners,
    INDEX_AFTER,
    DOTTED,
    IDENT_TEXT,
    REFLECTED_CALL,
    WRITES_SYS_MODULES,
    SYS_MODULES,
    SYS_MODULES_HEAD,
    names_changed,
)
from auditor.index.targets import ClassRef, External, FunctionRef, ModuleRef, Target, Unresolved



class ElsewhereMixin:
    """The change search of the resolver (a mixin of :class:`auditor.index.resolve.Resolver`,
    whose ``tree``, ``resolve_dotted``, ``resolve_base``, ``lookup``, ``mro``, ``cls`` and
    ``_from_binding`` it uses)."""

    def unfollowable_members(self, ref: ClassRef, elsewhere: bool = True) -> list[tuple[ClassRef, str, str, str, int]]:
        """Changes to the members of the classes on ``ref``'s MRO that the index cannot follow,
        as ``(class, member or "*", construct, path, line)``: those made in the class's own module
        after it, those made to it by the packages above its module (``__init__.py`` files, which
        run before the class can be used), and those made by any other module of the tree, at
        module level (they run when something imports that module) or in a module-level function
        (when it is called): static analysis cannot tell whether or when they run
        (:meth:`changes_from_elsewhere`).

        Args:
            ref: the class.
            elsewhere: also search the other modules and the functions (False: only the class's
                own module and the packages above it, which costs no extra reading).

        Returns:
            The changes, in MRO order (empty when every member is known).
        """
        out = []
        for e in self.mro(ref).entries:
            c = self.cls(e) if isinstance(e, ClassRef) else None
            if c is None:
                continue
            path = self.tree.module(e.module).path
            out += [(e, member, construct, path, line) for member, construct, line in c.unfollowable]
            if e != ref:
                # an ``__init_subclass__`` above the class runs for it: a change to a method of its
                # MRO (or to a computed name) counts; data it derives (vLLM's Transformers backend
                # merges ``hf_to_vllm_mapper``) changes no gate
                for member, construct, line in c.subclass_changes:
                    hit = self.lookup(ref, member) if member != "*" else None
                    if member == "*" or (hit is not None and isinstance(hit[1], MethodFact)):
                        out.append((ref, member, construct, path, line))
            meta = c.keywords.get("metaclass")
            if meta is not None:
                why = self._metaclass_change(e, meta)
                if why is not None:
                    out.append((e, "*", why, path, c.line))
            # the packages above the class's module run before anything can use it
            parts = e.module.split(".")
            for i in range(1, len(parts)):
                pm = self.tree.module(".".join(parts[:i]))
                for head, member, construct, line in pm.foreign_changes if pm is not None else ():
                    if self.resolve_dotted(pm.module, head.removeprefix(ITEMS_OF)) == e:
                        out.append((e, member, construct, pm.path, line))
            if elsewhere:
                out += self.changes_from_elsewhere(e)
        return out

    #: metaclass methods that run when a class is made or used, and may change or replace it
    _META_HOOKS = ("__new__", "__init__", "__call__", "__prepare__", "__setattr__", "__delattr__",
                   "__getattribute__", "__getattr__", "__instancecheck__", "__subclasscheck__")

    def _metaclass_change(self, ref: ClassRef, meta: str) -> str | None:
        """Why the metaclass ``meta`` (as written on class ``ref``) may change the class, or None:
        a class of the tree that defines (or inherits from a class of the tree) a method that
        runs when a class is made or used (:data:`_META_HOOKS`), or a name static analysis
        cannot bind. A metaclass from outside the tree (``abc.ABCMeta``, typing's) makes no
        change the tree controls."""
        t = self.resolve_base(ref, meta)
        if isinstance(t, External):
            return None
        if not isinstance(t, ClassRef):
            return f"metaclass={meta}, which static analysis cannot resolve"
        for hook in self._META_HOOKS:
            hit = self.lookup(t, hook)
            if hit is not None and isinstance(hit[0], ClassRef) and self.cls(hit[0]) is not None:
                return f"metaclass={meta}, whose {hit[0].name}.{hook} runs when the class is made or used"
        return None

    def changes_from_elsewhere(self, ref: ClassRef) -> list[tuple[ClassRef, str, str, str, int]]:
        """Changes to the members of the class ``ref`` made by the modules of the tree other than
        its own module and the packages above it, or by module-level functions (its own module's
        included), as ``(class, member or "*", construct, path, line)``.

        The modules whose text names the class, under its name or an alias of it (``X = Cls``,
        ``from m import Cls as X``, followed to a fixed point; :meth:`mentioning`), and those
        that name its module and reach it reflectively (:meth:`_reflected`), are
        summarised; a change they record (at module level, in a function, a method or a class
        body: :attr:`ModuleSummary.deferred_changes`) is counted as :meth:`_changes_class`
        says: its head resolves to ``ref``, or cannot be resolved and ends with one of those
        names; it rebinds the class's name in its module; it is computed from the class or its
        module (``getattr(M, name)``); or it replaces the module in ``sys.modules``.
        """
        cache = self.__dict__.setdefault("_elsewhere", {})
        key = (ref.module, ref.qualname)
        if key in cache:
            return cache[key]
        cache[key] = []
        name = ref.name
        own = self.tree.path_of(ref.module)
        parts = ref.module.split(".")
        above = {self.tree.path_of(".".join(parts[:i])) for i in range(1, len(parts))}
        out = []
        # the names the class may be reached under: its own, then every alias or import that
        # renames one of them, in the modules that mention it (to a fixed point)
        names, todo, candidates = {name}, [name], set()
        while todo and len(names) < 200:
            n = todo.pop()
            self.tree.summarize_ahead(p for p in self.mentioning(n)
                                      if p not in candidates and self._may_change(p, names))
            for p in self.mentioning(n):
                if p in candidates or not self._may_change(p, names):
                    continue
                candidates.add(p)
                for bound, b in self.tree.summary(p).bindings.items():
                    src = b.target.split(".")[-1] if b.kind == "alias" else b.target[1] if b.kind == "import" else None
                    if src in names and bound not in names:
                        names.add(bound)
                        todo.append(bound)
        # the modules that name the class's module and reach its attributes reflectively
        # (``setattr(M, name, v)``, ``getattr(M, name).forward = f``) may rebind or change it
        # without naming it
        short = ref.module.rsplit(".", 1)[-1]
        for p in self.mentioning(short):
            if p not in candidates:
                got = self._reflected(p)
                if short in got or SYS_MODULES in got or RUNS_CODE in got:
                    candidates.add(p)
        self.tree.summarize_ahead(candidates)
        for p in sorted(candidates):
            s = self.tree.summary(p)
            if not (s.foreign_changes or s.deferred_changes):
                continue
            changes = [(h, mm, c, ln, None) for h, mm, c, ln in s.foreign_changes
                       if (p != own and p not in above) or not DOTTED.fullmatch(h.removeprefix(ITEMS_OF))]
            changes += s.deferred_changes
            for head, member, construct, line, fn in changes:
                if not self._changes_class(s, head, member, fn, ref, names):
                    continue
                if fn and fn.startswith("<class "):
                    when = f"in the body of class {fn[7:-1]}, when {s.module} is imported"
                else:
                    when = f"in {fn}(), when it is called" if fn else f"when {s.module} is imported"
                out.append((ref, "*" if head in ("sys.modules", RUNS_CODE) else member, f"{construct} ({when})",
                            s.path, line))
        cache[key] = out
        return out

    def _changes_class(self, s: ModuleSummary, head: str, member: str, fn: str | None, ref: ClassRef,
                       names: set[str]) -> bool:
        """True when a member change recorded in module ``s`` (``head`` as written, in scope
        ``fn``) may change the class ``ref`` (reached under ``names``) or rebind it in its
        module: the head names the class (or, unresolved, is spelled as one of ``names``); or
        it names the class's module and the member is the class's name or computed (``*``); or
        the head is computed (``getattr(M, name)``) from the class or its module."""
        if head == "sys.modules" or head == RUNS_CODE:
            # a module replaced under its name (the class's own or a package above it), or text
            # run as code (it may change whatever the module reaches)
            if member != "*" and head == "sys.modules":
                return ref.module == member or ref.module.startswith(member + ".")
            # under a computed name: only where the module imports the class or its module, or
            # names its module in full (vLLM's import_from_path and LazyLoader, SGLang's dummy
            # modules for a missing path, write sys.modules[name] for other modules)
            if ref.module.encode() in self._text_of(s.path):
                return True
            scopes = [s.bindings] + list(s.scope_bindings.values()) + [f.local_bindings for f in s.functions.values()]
            for bindings in scopes:
                for b in bindings.values():
                    if b.kind == "import" and (b.target == (ref.module, ref.name)
                                               or f"{b.target[0]}.{b.target[1]}" == ref.module):
                        return True
            return False
        items = head.startswith(ITEMS_OF)  # through a ``for`` target over a computed iterable
        head = head.removeprefix(ITEMS_OF)
        named = SYS_MODULES_HEAD.fullmatch(head)
        if named is not None:  # through the module object ``sys.modules["pkg.mod"]``
            mod, rest = named.group(2), named.group(3).lstrip(".")
            if not rest:
                return mod == ref.module and member in (ref.name, "*")
            t = self.resolve_dotted(mod, rest) if self.tree.has_module(mod) else None
            return isinstance(t, ClassRef) and (t.module, t.qualname) == (ref.module, ref.qualname) or (
                mod == ref.module and rest == ref.name)
        if not DOTTED.fullmatch(head):
            for ident in set(IDENT_TEXT.findall(head)):
                if ident in names or (fn is None and names & set(s.holders.get(ident, ()))):
                    return True  # ``_d = {"k": C}; _d["k"].forward = f``: through what a holder holds
                t = self._head_target(s, ident, fn)
                if (isinstance(t, ClassRef) and (t.module, t.qualname) == (ref.module, ref.qualname)) \
                        or (isinstance(t, ModuleRef) and t.module == ref.module):
                    return True
                if items and isinstance(t, FunctionRef) and f"{ident}(" in head and self._may_give(t, ref, names):
                    # ``for c in get_classes(): c.forward = f``: the objects a function of the tree
                    # computes, which may be the class
                    return True
            return False
        t = self._head_target(s, head, fn)
        first = head.split(".")[0]
        b = s.bindings.get(first)
        held = s.holders.get(first) if fn is None or b is not None or first in s.unfollowable else None
        if held and (names & set(held) or any(self._head_target(s, h, None) == ref for h in held)):
            # ``_c = [LlamaForCausalLM][0]``, ``with nullcontext(C) as _C``, ``match C: case _C``:
            # the name holds what an expression of the class computes
            return True
        if isinstance(t, Unresolved) and b is not None and b.kind in ("import", "module"):
            # the name is marked as changed by the same construct (text run as code that names
            # ``llama`` changes what ``llama`` holds): what it was bound to before is what it reaches
            t = self.resolve_dotted(s.module, head, subst=((first, self._from_binding(s, first, b, frozenset())),))
        if isinstance(t, ClassRef):
            return (t.module, t.qualname) == (ref.module, ref.qualname)
        if isinstance(t, ModuleRef):
            return t.module == ref.module and member in (ref.name, "*")
        if b is not None and b.kind == "factory" and b.target[0] == "getattr" and b.target[1]:
            # ``X = getattr(M, NAME)``: X is computed from M
            return self._changes_class(s, f"getattr({', '.join(b.target[1])})", "*", None, ref, names)
        return head.split(".")[-1] in names  # an unresolved head counts only when it is spelled as the class

    def _may_give(self, fn: FunctionRef, ref: ClassRef, names: set[str]) -> bool:
        """True when the function ``fn`` of the tree may give back the class ``ref`` (reached
        under ``names``) among the objects it computes: its module is the class's, or its text
        names the class (under one of ``names``) or the class's module."""
        if fn.module == ref.module:
            return True
        path = self.tree.path_of(fn.module)
        text = self._text_of(path) if path else b""
        short = ref.module.rsplit(".", 1)[-1].encode()
        return short in text or any(n.encode() in text for n in names)

    def _text_of(self, path: str) -> bytes:
        """The text of the module at ``path`` as :meth:`mentioning` read it (empty when it
        cannot be read)."""
        by_path = self.__dict__.get("_texts_by_path")
        if by_path is None:
            texts = self.__dict__.get("_texts")
            if texts is None:
                texts = self.__dict__["_texts"] = list(self._readable_texts())
            by_path = self.__dict__["_texts_by_path"] = dict(texts)
        return by_path.get(path, b"")

    def _reflected(self, path: str) -> frozenset[str]:
        """The last parts of the objects the module at ``path`` reaches reflectively
        (``setattr(llama, ...)``, ``getattr(models.llama, n)``, ``vars(llama)``,
        ``llama.__dict__`` → ``llama``), plus :data:`SYS_MODULES` when it writes into
        ``sys.modules``; one pass over each text, remembered."""
        memo = self.__dict__.setdefault("_reflected_memo", {})
        got = memo.get(path)
        if got is None:
            text = self._text_of(path)
            names: set[str] = set()
            if b"attr(" in text or b"vars(" in text:
                names.update(m.group(1).rsplit(b".", 1)[-1].decode() for m in REFLECTED_CALL.finditer(text))
            if b"__dict__" in text:
                names.update(g.rsplit(b".", 1)[-1].decode() for g in dict_owners(text))
            if b"sys.modules" in text and WRITES_SYS_MODULES.search(text):
                names.add(SYS_MODULES)
            if runs_text(text):
                names.add(RUNS_CODE)
            memo[path] = got = frozenset(names)
        return got

    def _head_target(self, s: ModuleSummary, head: str, fn: str | None) -> Target:
        """What the head of a member change names in module ``s`` (in function ``fn``: its
        imports first)."""
        first = head.split(".")[0]
        ff = s.functions.get(fn) if fn else None
        scoped = ff.local_bindings if ff is not None else s.scope_bindings.get(fn, {}) if fn else {}
        if first in scoped:
            local = self._from_binding(s, first, scoped[first], frozenset())
            return self.resolve_dotted(s.module, head, subst=((first, local),))
        return self.resolve_dotted(s.module, head)

    def _readable_texts(self):
        """``(path, bytes)`` of every module of the tree that can be read. A module that cannot be
        read (no permission, gone) is left out: Python could not import it either, and the gate
        that reads it reports it (``cannot be read``)."""
        for p in sorted(self.tree.files):
            try:
                yield p, search_text(self.tree.read(p))
            except (OSError, KeyError):
                continue

    def mentioning(self, name: str) -> list[str]:
        """The modules of the tree whose text holds the identifier ``name``. Every module is read
        once; the first names are looked up by a plain search of the texts, and after
        :data:`INDEX_AFTER` of them an index of every identifier of every module answers."""
        memo = self.__dict__.setdefault("_mentions", {})
        if name in memo:
            return memo[name]
        texts = self.__dict__.get("_texts")
        if texts is None:
            texts = self.__dict__["_texts"] = list(self._readable_texts())
        index = self.__dict__.get("_ident_index")
        if index is None and len(memo) >= INDEX_AFTER:
            index = {}
            for p, text in texts:
                for ident in set(IDENTIFIER.findall(text)):
                    got = index.get(ident)
                    if got is None:
                        index[ident] = [p]
                    else:
                        got.append(p)
            self.__dict__["_ident_index"] = index
        needle = name.encode()
        if index is not None:
            memo[name] = index.get(needle, [])
        else:
            memo[name] = [p for p, text in texts if needle in text and has_word(text, needle)]
        return memo[name]

    def may_change_module(self, path: str, module: str) -> bool:
        """True when the text of the module at ``path`` (a module :meth:`mentioning` returned for
        the last part of ``module``) may change a member of the module ``module`` (dotted, from
        outside the tree: ``itertools``), as the summary records such changes: through its name,
        its first part or any ``as`` alias in the text, written to (``N.m = f``, annotated too,
        ``N[k]``, ``N as``), rebound (``X = N``, ``for X in ... N``) or handed to ``setattr``,
        ``delattr``, ``vars`` or ``del``; or the module looked up by a name in a string
        (``modules[``, ``import_module``, ``__import__``), or text run as code (``exec(``,
        ``eval(``). False only when none can; a cheap test before summarising the module."""
        text = self._text_of(path)
        if b"modules[" in text or b"import_module" in text or b"__import__" in text \
                or ((b"exec" in text or b"eval" in text) and calls_exec(text, False)):
            return True
        parts = module.split(".")
        names = {parts[0], parts[-1]} | {a.decode("utf-8", "replace") for a in ALIAS.findall(text)}
        return names_changed(text, names, handed=True)

    def _may_change(self, path: str, names: set[str]) -> bool:
        """True when the text of the module at ``path`` may change a member of something named
        ``names`` (a member write, ``del``, ``setattr``/``delattr`` or an item write on one of
        them, or a rebinding of one: ``X = N``, ``N as X``, ``for ... in ... N``), or runs text
        as code (``exec(``, ``eval(``): a cheap test before summarising it.

        The constructs that name no class (``setattr``, ``del``, ``exec(``, a loop over what a
        call computes that writes an attribute of its target) are looked for once
        per module; then each occurrence of one of ``names`` as a whole word is read in its line
        (the module came from :meth:`mentioning`, so it has a few)."""
        text = self._text_of(path)
        anonymous = self.__dict__.setdefault("_anonymous_change", {})
        hit = anonymous.get(path)
        if hit is None:
            hit = anonymous[path] = bool(
                b"setattr" in text or b"delattr" in text
                or (b"del" in text and DEL_STATEMENT.search(text) is not None)
                or ((b"exec" in text or b"eval" in text) and calls_exec(text, False))
                or (b"for" in text and LOOP_CALL_WRITE.search(text) is not None))
        if hit:
            return True
        return names_changed(text, names, handed=False)
