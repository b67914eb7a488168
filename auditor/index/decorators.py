"""Following a class statement through its decorators to the object it binds.

:class:`DecoratorsMixin`, a part of :class:`auditor.index.resolve.Resolver`: the class a decorated
class statement binds (``_decorated``), each decorator followed through the returns of a function
or method of the tree (``_through_decorator``, ``_returned``), the instance a module-level name is
of (:meth:`~DecoratorsMixin.instance_of`), and the decorators from outside the tree known to give
back the class itself (:data:`IDENTITY_DECORATORS`).
"""

from __future__ import annotations

from auditor.index.conditions import param_test
from auditor.index.facts import ClassFact, MethodFact, ModuleSummary
from auditor.index.targets import ClassRef, External, FunctionRef, ModuleRef, Target, Unresolved


#: Class decorators from outside the tree (the standard library and typing_extensions) that
#: return the class they decorate, with its members: followed as the identity. Any other
#: decorator from outside the tree makes what the class statement binds unknown.
IDENTITY_DECORATORS = frozenset({
    "dataclasses.dataclass", "typing.runtime_checkable", "typing_extensions.runtime_checkable", "typing.final",
    "typing_extensions.final", "functools.total_ordering", "enum.unique", "typing.type_check_only",
    "typing_extensions.deprecated", "warnings.deprecated",
    # huggingface_hub's strict dataclasses (documented as the standard dataclass with validation
    # added): every HF config class of transformers 5 is decorated with it
    "huggingface_hub.dataclasses.strict",
})


class DecoratorsMixin:
    """The decorator reading of the resolver (a mixin of :class:`auditor.index.resolve.Resolver`,
    whose ``tree``, ``resolve_dotted``, ``lookup``, ``mro``, ``cls`` and ``_from_binding`` it
    uses)."""

    def _decorated(self, m: ModuleSummary, ref: ClassRef, seen) -> Target:
        """The object a decorated class statement binds: the class itself, unless a decorator of
        the tree returns another class (followed: the class it returns, or the class it builds
        around its argument) or may return another class on some path (Unresolved)."""
        c = m.classes.get(ref.qualname)
        if c is None or not c.decorators:
            return ref
        cache = self.__dict__.setdefault("_decorated_cache", {})
        key = (ref.module, ref.qualname)
        if key not in cache:
            cache[key] = ref  # a decorator that leads back here sees the undecorated class
            cache[key] = self._apply_decorators(m, c, ref, frozenset())  # context-free: cached
        return cache[key]

    def _apply_decorators(self, m: ModuleSummary, c: ClassFact, ref: ClassRef, seen) -> Target:
        """Run ``c``'s decorators, innermost first, over ``ref``: each must be followed to the
        class it gives back (see :meth:`_through_decorator`), else the result is Unresolved."""
        for i in reversed(range(len(c.decorators))):
            deco = c.decorators[i]
            call = c.decorator_calls[i] if i < len(c.decorator_calls) else None
            name = deco.removesuffix("(...)")
            if not all(p.isidentifier() for p in name.split(".")):
                return Unresolved(ref.dotted, f"the class decorator `@{deco}` ({m.path}:{c.line}) is no name static "
                                              "analysis can follow: what it binds the class name to is not known")
            out = self._through_decorator(m.module, f"{m.path}:{c.line}", name, deco.endswith("(...)"), call, ref, seen)
            if isinstance(out, Unresolved):
                return out
            ref = out
        return ref

    def _through_decorator(self, module: str, where: str, name: str, is_call: bool, call, ref: ClassRef,
                           seen, depth: int = 0) -> ClassRef | Unresolved:
        """The class one decorator ``@name`` (``@name(...)`` when ``is_call``, with ``call`` =
        ``(positional count, keyword names)``) gives back for ``ref``.

        Followed: a function of the tree (its returns, through the functions it calls with the
        class), a method of a class or of a module-level instance of the tree
        (``@MULTIMODAL_REGISTRY.register_processor(...)``, vLLM ``vllm/multimodal/registry.py``),
        and the decorators of :data:`IDENTITY_DECORATORS`. Anything else — a decorator from
        outside the tree, a name the tree cannot bind, a function that may return something else
        — is Unresolved, naming the decorator and ``where`` (the class's ``file:line``).
        """
        f = self.resolve_dotted(module, name, seen)
        if isinstance(f, External):
            if f.name in IDENTITY_DECORATORS:
                return ref
            return Unresolved(ref.dotted, f"the class decorator @{name} ({where}) is {f.name}, from outside the tree: "
                                          "what it binds the class name to is not known")
        skip = 0
        if isinstance(f, FunctionRef):
            fm = self.tree.module(f.module)
            ff = fm.functions.get(f.name) if fm else None
            if ff is None:
                return Unresolved(ref.dotted, f"the class decorator @{name} ({where}) is not found in the tree")
            if not is_call and ff.returns_local_class and ff.params:
                return ClassRef(f.module, ff.returns_local_class, ((ff.params[0], ref),))
            fact, module, label = ff.gives, f.module, f"{name} ({fm.path}:{ff.line})"
        else:
            meth = self._method_of(module, name)
            if meth is None:
                why = f.reason if isinstance(f, Unresolved) else f"it names a {type(f).__name__.removesuffix('Ref').lower()}"
                return Unresolved(ref.dotted, f"the class decorator @{name} ({where}) cannot be followed ({why}): what "
                                              "it binds the class name to is not known")
            module, mf, skip, path = meth
            fact, label = mf.gives, f"{name} ({path}:{mf.line})"
        if fact is None:
            return Unresolved(ref.dotted, f"the class decorator @{label} is not summarised")
        got = self._decorator_result(fact, module, skip, is_call, call, ref, depth=depth)
        if isinstance(got, ClassRef):
            return got
        if isinstance(got, Unresolved):
            return got
        return Unresolved(ref.dotted, f"the class decorator {label} of {ref.name} ({where}) {got}")

    def _method_of(self, module: str, text: str):
        """``(module, MethodFact, parameters bound before the class, path)`` of the method a
        dotted decorator names (``Cls.register``, ``REGISTRY.register_processor``, with
        ``REGISTRY = Registry()`` bound in the tree), or None."""
        owner_text, _, meth = text.rpartition(".")
        if not owner_text:
            return None
        owner = self.resolve_dotted(module, owner_text)
        instance = False
        if not isinstance(owner, ClassRef):
            owner, instance = self.instance_of(module, owner_text), True
        if not isinstance(owner, ClassRef):
            return None
        hit = self.lookup(owner, meth)
        if hit is None or not isinstance(hit[1], MethodFact):
            return None
        cref, mf = hit
        if any(mm in (meth, "*") for e in self.mro(owner).entries if isinstance(e, ClassRef)
               for mm, _, _ in (self.cls(e).unfollowable if self.cls(e) else ())):
            return None  # the member is changed after its class in a way not followed
        if "staticmethod" in mf.decorators:
            skip = 0
        elif "classmethod" in mf.decorators or instance:
            skip = 1
        else:
            skip = 0  # a plain function read from the class: its first parameter takes the class
        return cref.module, mf, skip, self.tree.module(cref.module).path

    def instance_of(self, module: str, text: str, function: str | None = None) -> ClassRef | None:
        """The tree class of which the module-level name ``text`` (``X`` or ``pkg.mod.X``) seen
        from ``module`` is an instance (``X = Cls()``, through imports), or None.

        Args:
            module: the module the name is read in.
            text: the dotted name.
            function: a module-level function of ``module`` the name is read in (its own imports
                are followed first).

        Returns:
            The class, or None when the name is not bound to an instance of a tree class in a
            way static analysis can follow.
        """
        parts = text.split(".")
        mod, name = module, parts[-1]
        fm = self.tree.module(module) if function else None
        ff = fm.functions.get(function) if fm is not None else None
        local = ff.local_bindings.get(parts[0]) if ff is not None else None
        if local is not None and local.kind == "import" and len(parts) == 1:
            mod, name = local.target
        elif local is not None and len(parts) > 1:
            t = self._from_binding(fm, parts[0], local, frozenset())
            t = self.resolve_dotted(module, ".".join(parts[:-1]), subst=((parts[0], t),))
            if not isinstance(t, ModuleRef):
                return None
            mod = t.module
        elif len(parts) > 1:
            t = self.resolve_dotted(module, ".".join(parts[:-1]))
            if not isinstance(t, ModuleRef):
                return None
            mod = t.module
        for _ in range(20):
            sm = self.tree.module(mod)
            b = sm.bindings.get(name) if sm is not None else None
            if b is None or name in sm.unfollowable or "*" in sm.unfollowable or name in sm.cond_bindings \
                    or any(line > b.line for _, line in sm.stars):
                return None
            if b.kind == "import":
                mod, name = b.target
                continue
            if b.kind == "factory":
                t = self.resolve_dotted(mod, b.target[0])
                return t if isinstance(t, ClassRef) else None
            return None
        return None

    def _decorator_result(self, fact, module: str, skip: int, is_call: bool, call, ref: ClassRef, scopes=(),
                          depth: int = 0):
        """What a decorator described by ``fact`` gives back for ``ref``: a ClassRef, or the
        reason it cannot be followed (a phrase, or the Unresolved of a decorator it applies)."""
        params = fact.params[skip:]
        if not is_call:
            if not params:
                return "takes no argument"
            bind = {params[0]: "cls"}
            bind.update({p: "none" for p in params[1:] if fact.defaults.get(p) == "None"})
            return self._returned(fact, module, bind, [fact.inner, *scopes], ref, depth)
        npos, kws = call if call is not None else (len(params), [p for p in params])
        bind = {p: "none" for k, p in enumerate(params)
                if k >= npos and p not in kws and "**" not in kws and fact.defaults.get(p) == "None"}
        out = set()
        for kind, text, _args, conds, *_ in fact.returns:
            if not self._may_run(conds, bind):
                continue
            inner = fact.inner.get(text) if kind == "name" else None
            if inner is None:
                return f"may return {text}, not a decorator static analysis can follow"
            got = self._decorator_result(inner, module, 0, False, None, ref, (fact.inner, *scopes), depth)
            if not isinstance(got, ClassRef):
                return got
            out.add(got)
        if len(out) != 1:
            return "never returns a decorator" if not out else "may return another class than the one it decorates"
        return out.pop()

    def _returned(self, fact, module: str, bind: dict, scopes: list, ref: ClassRef, depth: int):
        """What a function described by ``fact`` returns when its parameters are bound as
        ``bind`` (``"cls"``: the decorated class, ``"none"``: None): a ClassRef, or the reason."""
        out = set()
        for kind, text, args, conds, *more in fact.returns:
            if not self._may_run(conds, bind):
                continue
            if kind == "decorate" and depth < 8 and [bind.get(a) for a in args] == ["cls"]:
                # ``return FACTORY(...)(cls)``: the factory's decorator applied to the class
                got = self._through_decorator(module, f"returned by {text}(...)(...)", text, True, more[0] if more
                                              else None, ref, frozenset(), depth + 1)
                if isinstance(got, ClassRef):
                    out.add(got)
                    continue
                return got
            if kind == "name" and bind.get(text) == "cls":
                out.add(ref)
                continue
            if kind == "name" and text not in fact.params:
                t = self.resolve_dotted(module, text)
                if isinstance(t, ClassRef):
                    out.add(t)
                    continue
            if kind == "call" and depth < 8:
                got = self._returned_by_call(text, args, module, bind, scopes, ref, depth)
                if isinstance(got, ClassRef):
                    out.add(got)
                    continue
                return got
            return f"may return {text}, not the class it decorates"
        if len(out) != 1:
            return "never returns" if not out else "may return another class than the one it decorates"
        return out.pop()

    def _returned_by_call(self, callee: str, args: tuple, module: str, bind: dict, scopes: list, ref: ClassRef,
                          depth: int):
        """What ``return callee(*args)`` gives back, when the call hands the class on."""
        hands = [j for j, a in enumerate(args) if bind.get(a) == "cls"]
        fact = next((sc[callee] for sc in scopes if callee in sc), None)
        cmod, cscopes = module, scopes
        if fact is None:
            f = self.resolve_dotted(module, callee)
            fm = self.tree.module(f.module) if isinstance(f, FunctionRef) else None
            ff = fm.functions.get(f.name) if fm is not None else None
            fact, cmod, cscopes = (ff.gives, f.module, []) if ff is not None else (None, module, scopes)
        if fact is None or len(hands) != 1 or hands[0] >= len(fact.params):
            return f"may return the result of {callee}(...), which static analysis cannot follow"
        sub = {fact.params[hands[0]]: "cls"}
        sub.update({p: "none" for p in fact.params[len(args):] if fact.defaults.get(p) == "None"})
        return self._returned(fact, cmod, sub, [fact.inner] + cscopes, ref, depth + 1)

    @staticmethod
    def _may_run(conds: tuple, bind: dict) -> bool:
        """False when one of the ``if`` tests ``conds`` is decided against its branch by the
        parameter bindings (``cls is not None`` with ``cls`` the class: true)."""
        for text, want in conds:
            v = param_test(text, bind)
            if v is not None and v != want:
                return False
        return True
