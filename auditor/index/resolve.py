"""Name resolution across the modules of a vLLM tree, C3 MRO, and member lookup.

Everything here reads :class:`~auditor.index.facts.ModuleSummary` records; nothing is imported. Names
are resolved the way Python binds them at run time: relative and absolute imports, ``import a.b
as c``, re-exports through ``__init__.py``, lazy ``__getattr__`` modules that map names to
submodules, the later of two bindings, and names bound only under ``if TYPE_CHECKING:`` (which do
not exist at run time). Names from outside the tree (``torch.nn.Module``, ``typing.Protocol``)
become :class:`~auditor.index.targets.External` nodes; nothing is guessed.

The :class:`Resolver` is made of parts: name binding here, the decorators a class statement runs
(:mod:`auditor.index.decorators`), the MRO and lookup (:mod:`auditor.index.mro`), and the changes
to a class made anywhere in the tree (:mod:`auditor.index.elsewhere`); what it gives back is in
:mod:`auditor.index.targets`, the static truth of ``if`` tests in :mod:`auditor.index.conditions`.
"""

from __future__ import annotations

import ast
import functools
from typing import Mapping

from auditor.index.conditions import evaluate_condition
from auditor.index.decorators import DecoratorsMixin
from auditor.index.elsewhere import ElsewhereMixin
from auditor.index.facts import ClassFact, ModuleSummary
from auditor.index.mro import MroMixin
from auditor.index.targets import ClassRef, External, FunctionRef, ModuleRef, MroResult, Target, Unresolved
from auditor.index.tree import Tree


_BUILTINS = {
    "object", "int", "str", "float", "dict", "list", "tuple", "set", "Exception", "ValueError",
    "RuntimeError", "type", "bytes", "frozenset", "bool", "NamedTuple", "TypeError", "KeyError",
}


class Resolver(DecoratorsMixin, ElsewhereMixin, MroMixin):
    """Resolve names, classes and MROs in one :class:`~auditor.index.tree.Tree`.

    Args:
        tree: the tree.
        conditions: run-time values of the expressions that ``if`` tests around module-level
            bindings use (see :func:`evaluate_condition`; the engine layer supplies them, e.g.
            one platform's ``current_platform.is_*()``). With them, a name bound in several
            branches resolves to the binding of the branch that runs; a test they cannot decide
            keeps the default (the first of the conditional bindings). None: no evaluation.
    """

    def __init__(self, tree: Tree, conditions: Mapping[str, object] | None = None):
        self.tree = tree
        self.conditions = conditions
        self._mro: dict[ClassRef, MroResult] = {}
        #: (module, name) → ``(branch tests as (text, value) pairs, line of the binding)`` of the
        #: binding followed (``((), None)``: no branch binds it), for every name resolved through a
        #: conditional binding (``explain`` reports them)
        self.followed: dict[tuple[str, str], tuple] = {}

    def _branch_binding(self, m: ModuleSummary, name: str, table: dict):
        """The binding of ``name`` that runs under :attr:`conditions`: a Binding, ``False`` when
        every branch that binds it is false, or None when a test cannot be decided (or there are
        no conditions, or no conditional binding)."""
        if self.conditions is None or name not in table:
            return None
        chosen = False
        for b in table[name]:
            vals = []
            for text, want in b.conds:
                v = evaluate_condition(text, self.conditions)
                vals.append(None if v is None else v == want)
            if None in vals:
                return None
            if all(vals):
                chosen = b
        self.followed[(m.module, name)] = (chosen.conds, chosen.line) if chosen else ((), None)
        return chosen

    # -- summaries ---------------------------------------------------------------------
    def cls(self, ref: ClassRef) -> ClassFact | None:
        """The summary of a tree class, or None if the module or class is gone."""
        m = self.tree.module(ref.module)
        return m.classes.get(ref.qualname) if m else None

    def location(self, ref: ClassRef) -> tuple[str, int] | None:
        """``(path, line)`` of a tree class."""
        m = self.tree.module(ref.module)
        if not m or ref.qualname not in m.classes:
            return None
        return m.path, m.classes[ref.qualname].line

    # -- names -------------------------------------------------------------------------
    def resolve_name(self, module: str, name: str, _seen: frozenset = frozenset()) -> Target:
        """Bind ``name`` as module ``module`` sees it at run time."""
        key = (module, name)
        if key in _seen:
            return Unresolved(f"{module}.{name}", "import cycle")
        _seen = _seen | {key}
        m = self.tree.module(module)
        if m is None:
            if module.split(".")[0] != self.tree.package or not module:
                return External(f"{module}.{name}" if module else name)
            return Unresolved(f"{module}.{name}", f"module {module} is not in the tree")
        if m.raises_at is not None:
            line, exc = m.raises_at
            return Unresolved(f"{module}.{name}", f"{m.path}:{line} raises {exc} when the module is imported, so "
                                                  f"nothing can be imported from it")
        b = m.bindings.get(name)
        branch = self._branch_binding(m, name, m.cond_bindings)
        if branch is not None:
            b = branch or None  # False: no branch that binds the name runs
        for construct, line, ordered in m.unfollowable.get(name, []) + m.unfollowable.get("*", []):
            if not ordered or b is None or line >= b.line:
                return Unresolved(f"{module}.{name}", f"{name} may be rebound by {construct} in {m.path}:{line}, "
                                                      "which static analysis cannot follow")
        for star, line in reversed(m.stars):
            if b is not None and line < b.line:
                break  # the binding comes after every remaining star import
            if self.star_exports(star, name):
                changed = self.all_changed(star)
                if changed is not None:
                    construct, path, cline = changed
                    return Unresolved(f"{module}.{name}", f"{name} may be rebound by `from {star} import *` at "
                                                          f"{m.path}:{line}, whose __all__ is changed by `{construct}` "
                                                          f"at {path}:{cline}, which static analysis cannot follow")
                return self.resolve_name(star, name, _seen)
        if b is not None:
            t = self._from_binding(m, name, b, _seen)
            if isinstance(t, Unresolved) and name in m.alt_bindings:
                for alt in m.alt_bindings[name]:
                    t2 = self._from_binding(m, name, alt, _seen)
                    if not isinstance(t2, Unresolved):
                        return t2
            return t
        if m.is_package and self.tree.has_module(f"{module}.{name}"):
            return ModuleRef(f"{module}.{name}")
        if name in m.lazy_map:
            target_mod = m.lazy_map[name]
            if target_mod == module or target_mod.split(".")[0] != self.tree.package:
                return External(f"{target_mod}.{name}")
            return self.resolve_name(target_mod, name, _seen)
        if name in m.tc_bindings and ("__getattr__" in m.functions or m.lazy_self) and (
                name in m.type_checking_names or branch is False):
            # a lazy module: ``__getattr__`` (or the lazy module it replaced itself with in
            # ``sys.modules``) imports at first access what TYPE_CHECKING names
            tc = self._branch_binding(m, name, m.tc_cond_bindings)
            return self._from_binding(m, name, tc or m.tc_bindings[name], _seen)
        if branch is False:
            return Unresolved(f"{module}.{name}", f"{name} is bound in {m.path} only in branches that do not run "
                                                  "on this platform")
        if name in m.type_checking_names:
            return Unresolved(f"{module}.{name}", "bound only under TYPE_CHECKING (absent at run time)")
        if name in _BUILTINS:
            return External(name)
        if m.error:
            return Unresolved(f"{module}.{name}", f"{m.path} " + (m.error if m.error.startswith("cannot be read")
                                                                  else f"does not parse ({m.error})"))
        return Unresolved(f"{module}.{name}", f"{name} is not bound in {m.path}")

    def star_exports(self, module: str, name: str, depth: int = 0) -> bool:
        """True when ``from module import *`` binds ``name``: a name of its ``__all__``, else a
        public name it binds, itself or through its own star imports.

        Args:
            module: the dotted module star-imported.
            name: the name.
            depth: how many star imports were followed to get here (bounded).

        Returns:
            Whether the star import rebinds ``name`` (False for a module outside the tree).
        """
        sm = self.tree.module(module)
        if sm is None or depth > 20:
            return False
        if sm.all_changes:
            pass  # ``__all__`` changed in a way not followed: any name the module binds may be exported
        elif sm.dunder_all is not None:
            if name not in sm.dunder_all:
                return False
        elif name.startswith("_"):
            return False
        if name in sm.bindings or name in sm.cond_bindings or name in sm.unfollowable:
            return True
        return any(self.star_exports(st, name, depth + 1) for st, _ in sm.stars)

    def all_changed(self, module: str, depth: int = 0) -> tuple[str, str, int] | None:
        """``(construct, path, line)`` of a change to the ``__all__`` of ``module`` (or of a module
        it star-imports) that the index does not follow (:attr:`ModuleSummary.all_changes`), or
        None: what ``from module import *`` binds is then not known."""
        sm = self.tree.module(module)
        if sm is None or depth > 20:
            return None
        if sm.all_changes:
            construct, line = sm.all_changes[0]
            return construct, sm.path, line
        for star, _ in sm.stars:
            got = self.all_changed(star, depth + 1)
            if got is not None:
                return got
        return None

    def _from_binding(self, m: ModuleSummary, name: str, b, seen) -> Target:
        if b.kind == "class":
            return self._decorated(m, ClassRef(m.module, b.target), seen)
        if b.kind == "deleted":
            return Unresolved(f"{m.module}.{name}", f"{name} is deleted by `{b.target}` at {m.path}:{b.line}")
        if b.kind == "function":
            return FunctionRef(m.module, b.target)
        if b.kind == "module":
            return ModuleRef(b.target) if self._in_tree_module(b.target) else External(b.target)
        if b.kind == "import":
            mod, attr = b.target
            if self._in_tree_module(mod):
                return self.resolve_name(mod, attr, seen)
            if self._in_tree_module(f"{mod}.{attr}"):
                # ``from pkg import submodule`` of a namespace package (no ``__init__.py``, as
                # SGLang's ``sglang/srt/models``)
                return ModuleRef(f"{mod}.{attr}")
            if mod.split(".")[0] == self.tree.package:
                return Unresolved(f"{mod}.{attr}", f"module {mod} is not in the tree")
            return External(f"{mod}.{attr}")
        if b.kind == "alias":
            return self.resolve_dotted(m.module, b.target, seen)
        if b.kind == "factory":
            callee, args = b.target
            return self._factory(m.module, callee, args, (), seen)
        return Unresolved(f"{m.module}.{name}", f"{name} is bound to a value, not a class ({b.target[:60]})")

    def _in_tree_module(self, mod: str) -> bool:
        return self.tree.has_module(mod)

    def resolve_name_at(self, module: str, name: str, line: int) -> Target:
        """Bind ``name`` as module-level code at ``line`` sees it: the latest binding made
        before that line (``class Thing(Thing)`` sees the imported Thing)."""
        m = self.tree.module(module)
        if m is None or name not in m.bindings:
            return self.resolve_name(module, name)
        cands = m.earlier.get(name, []) + [m.bindings[name]]
        before = [b for b in cands if b.line < line]
        if not before or before[-1] is m.bindings[name]:
            return self.resolve_name(module, name)
        return self._from_binding(m, name, before[-1], frozenset({(module, name)}))

    def resolve_dotted(self, module: str, text: str, _seen: frozenset = frozenset(), subst: tuple = (),
                       at_line: int | None = None) -> Target:
        """Bind a dotted expression (``nn.Module``, ``interfaces.SupportsEagle3``) in ``module``.
        ``subst`` maps factory parameters to targets; ``at_line`` binds the head name as code at
        that line sees it."""
        parts = text.split(".")
        head = dict(subst).get(parts[0]) if subst else None
        if head is not None:
            t = head
        elif at_line is not None:
            t = self.resolve_name_at(module, parts[0], at_line)
        else:
            t = self.resolve_name(module, parts[0], _seen)
        for part in parts[1:]:
            if isinstance(t, ModuleRef):
                t = self.resolve_name(t.module, part, _seen)
            elif isinstance(t, External):
                t = External(f"{t.name}.{part}")
            elif isinstance(t, ClassRef):
                inner = ClassRef(t.module, f"{t.qualname}.{part}")
                if self.cls(inner) is None:
                    return Unresolved(text, f"{t.dotted} has no nested class {part}")
                t = inner
            else:
                return t
        return t

    def _factory(self, module: str, callee: str, args: list[str], subst: tuple, seen) -> Target:
        """A class returned by a module-level factory function (``as_seq_cls_model(X)``)."""
        f = self.resolve_dotted(module, callee, seen, subst)
        if isinstance(f, FunctionRef):
            fm = self.tree.module(f.module)
            ff = fm.functions.get(f.name) if fm else None
            if ff and ff.returns_local_class:
                binds = []
                for p, a in zip(ff.params, args):
                    binds.append((p, self.resolve_dotted(module, a, seen, subst)))
                return ClassRef(f.module, ff.returns_local_class, tuple(binds))
            return Unresolved(f"{callee}(...)", f"{callee} does not return a class it defines")
        if isinstance(f, External):
            return Unresolved(f"{callee}(...)", f"class built at run time by external {f.name}")
        return Unresolved(f"{callee}(...)", f"cannot resolve factory {callee}")

    def resolve_base(self, ref: ClassRef, text: str) -> Target:
        """Bind one base-class text of ``ref`` (``Generic[T]`` → ``typing.Generic``)."""
        shape = _base_shape(text)
        if shape is None:
            return Unresolved(text, "unsupported base expression")
        scope = ref.module
        if shape[0] == "call":
            return self._factory(scope, shape[1], list(shape[2]), ref.subst, frozenset())
        text2 = shape[1]
        subst = ref.subst
        c = self.cls(ref)
        if c is not None and c.factory:
            fm = self.tree.module(ref.module)
            ff = fm.functions.get(c.factory[0]) if fm else None
            head = text2.split(".")[0]
            if ff and head in ff.local_bindings and head not in dict(subst):
                local = self._from_binding(fm, head, ff.local_bindings[head], frozenset())
                subst = subst + ((head, local),)
        at = c.line if c is not None and "." not in ref.qualname.split("@")[0] else None
        t = self.resolve_dotted(scope, text2, frozenset(), subst, at_line=at)
        if isinstance(t, External) and t.name in ("typing_extensions.Protocol",):
            return External("typing.Protocol")
        return t

    def find_class(self, name: str, near: str | None = None) -> ClassRef | None:
        """Resolve a class by simple name from module ``near`` (its bindings first)."""
        if near:
            t = self.resolve_name(near, name)
            if isinstance(t, ClassRef):
                return t
        return None


@functools.lru_cache(maxsize=4096)
def _base_shape(text: str) -> tuple | None:
    """A base-class text as ``("name", dotted)`` (subscripts dropped: ``Generic[T]`` →
    ``Generic``) or ``("call", callee, args)``; None when it is neither."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Call):
        return ("call", ast.unparse(node.func), tuple(ast.unparse(a) for a in node.args))
    text2 = ast.unparse(node)
    if not all(p.isidentifier() for p in text2.split(".")):
        return None
    return ("name", text2)
