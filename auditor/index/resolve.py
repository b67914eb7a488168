"""Name resolution across the modules of a vLLM tree, C3 MRO, and member lookup.

Everything here reads :class:`~auditor.index.facts.ModuleSummary` records; nothing is imported. Names
are resolved the way Python binds them at run time: relative and absolute imports, ``import a.b
as c``, re-exports through ``__init__.py``, lazy ``__getattr__`` modules that map names to
submodules, the later of two bindings, and names bound only under ``if TYPE_CHECKING:`` (which do
not exist at run time). Names from outside the tree (``torch.nn.Module``, ``typing.Protocol``)
become :class:`External` nodes; nothing is guessed.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from typing import Mapping, Union

from auditor.index.facts import ITEMS_OF, RUNS_CODE, AttrFact, ClassFact, MethodFact, ModuleSummary
from auditor.index.tables import COMPARISONS
from auditor.index.tree import Tree


@dataclass(frozen=True)
class ClassRef:
    """A class defined in the tree: its module and qualname. ``subst`` binds the parameters of
    the factory function that builds it (``as_seq_cls_model(cls)`` → ``(("cls", <target>),)``)."""

    module: str
    qualname: str
    subst: tuple = ()

    @property
    def dotted(self) -> str:
        """``module.qualname``, as Python's ``f"{cls.__module__}.{cls.__qualname__}"`` (an
        earlier definition of a name defined twice is keyed ``Name@line`` internally)."""
        return f"{self.module}.{self.qualname.split('@')[0]}"

    @property
    def name(self) -> str:
        """The class name (last part of the qualname)."""
        return self.qualname.split("@")[0].rsplit(".", 1)[-1]


@dataclass(frozen=True)
class External:
    """A name from outside the tree, dotted as imported (``torch.nn.Module``)."""

    name: str

    @property
    def dotted(self) -> str:
        return self.name


@dataclass(frozen=True)
class ModuleRef:
    """A module of the tree."""

    module: str


@dataclass(frozen=True)
class FunctionRef:
    """A module-level function of the tree."""

    module: str
    name: str


@dataclass(frozen=True)
class Unresolved:
    """A name that static analysis cannot bind, with the reason."""

    text: str
    reason: str

    @property
    def dotted(self) -> str:
        return self.text


Target = Union[ClassRef, External, ModuleRef, FunctionRef, Unresolved]

#: MROs of the external bases whose MRO matters for C3 (from CPython's typing module).
_EXTERNAL_MRO = {
    "typing.Protocol": ["typing.Protocol", "typing.Generic"],
    "typing_extensions.Protocol": ["typing.Protocol", "typing.Generic"],
    "typing.Generic": ["typing.Generic"],
    "typing_extensions.Generic": ["typing.Generic"],
}

_BUILTINS = {
    "object", "int", "str", "float", "dict", "list", "tuple", "set", "Exception", "ValueError",
    "RuntimeError", "type", "bytes", "frozenset", "bool", "NamedTuple", "TypeError", "KeyError",
}


#: An identifier in a module's text (see :meth:`Resolver.mentioning`).
_IDENTIFIER = re.compile(rb"[A-Za-z_]\w*")
#: What :meth:`Resolver._may_change` looks for. After a name: a member chain then an
#: assignment (``N.forward = f``, ``N.x += 1``) or an item (``N[k]``), or ``N as``.
_CHANGE_AFTER = re.compile(rb"(?:[ \t]*(?:\.[ \t]*\w+[ \t]*)*(?:[-+*/|&@%]?=(?!=)|\[)|[ \t]+as[ \t])")
#: Before a name on its line: ``= N`` or ``= pkg.mod.N`` (the name then not followed by a word
#: character, a dot or a call: :data:`_NOT_AFTER_VALUE`).
_VALUE_BEFORE = re.compile(rb"=[ \t]*(?:[\w.]*\.)?\Z")
_NOT_AFTER_VALUE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.(")
#: Before a name on its line: ``for ... in ...``.
_LOOP_BEFORE = re.compile(rb"\bfor[ \t][^\n]*\bin[ \t]")
_DEL_STATEMENT = re.compile(rb"\bdel[ \t]")
_CALLS_EXEC = re.compile(rb"(?<![\w.])(?:exec|eval)[ \t]*\(")
#: A ``for`` loop over what a call computes whose next lines write an attribute of its target
#: (``for c in get_classes():`` then ``c.forward = f``), in a module's text.
_LOOP_CALL_WRITE = re.compile(rb"\bfor[ \t]+(\w+)[ \t]+in[ \t][^\n]*\)[ \t]*:[ \t]*\n(?:[^\n]*\n){0,8}?[ \t]*\1\.\w+[ \t]*=(?!=)")
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _is_word_byte(c: int) -> bool:
    """True when byte ``c`` is a word character of a bytes pattern (``\\w``: ASCII letters, digits, ``_``)."""
    return c in _WORD_BYTES


#: How many names :meth:`Resolver.mentioning` looks up by searching the texts before it indexes
#: every identifier of the tree (a single-target scan asks for a few, a full scan for hundreds).
_INDEX_AFTER = 40
#: A dotted name as a change's head is written (``llama.LlamaModel``); any other head text is an
#: expression (``getattr(llama, NAME)``).
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
#: An identifier in a head's text.
_IDENT_TEXT = re.compile(r"[A-Za-z_]\w*")


#: The object a module's text reaches reflectively: ``setattr(M, ...)``, ``delattr``, ``getattr``,
#: ``vars(M)`` (group 1), ``M.__dict__`` (group 2): the last part of M is what
#: :meth:`Resolver._reflected` records.
_REFLECTED_CALL = re.compile(rb"(?:(?:set|del|get)attr|vars)\(\s*([\w.]+)\s*[,)]")
_REFLECTED_DICT = re.compile(rb"([\w.]+)\.__dict__")
#: A write into ``sys.modules`` in a module's text.
_WRITES_SYS_MODULES = re.compile(rb"sys\.modules\s*(?:\[|\.\s*(?:update|setdefault|__setitem__))")
#: What :meth:`Resolver._reflected` records for a module that writes into ``sys.modules``.
_SYS_MODULES = "sys.modules"
#: A call that runs text as code, in a module's text.
_RUNS_TEXT = re.compile(rb"(?<![\w.])(?:builtins\.)?(?:exec|eval)[ \t]*\(|(?:Function|Lambda)Type[ \t]*\("
                        rb"|['\"](?:exec|eval)['\"][ \t]*\)[ \t]*\(")
#: The head of a change made through a module object named in ``sys.modules``
#: (``sys.modules["pkg.mod"].Cls.m = v``): the module's name (group 2) and the rest (group 3).
_SYS_MODULES_HEAD = re.compile(r"sys\.modules\[(['\"])([\w.]+)\1\]((?:\.\w+)*)")


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


def _param_test(text: str, bind: dict) -> bool | None:
    """The truth of an ``if`` test on a parameter bound in ``bind`` (``"cls"``: a class,
    ``"none"``: None): ``p``, ``not p``, ``p is None``, ``p is not None``; None otherwise."""
    node = _parse_test(text)
    neg = False
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node, neg = node.operand, not neg
    val = None
    if isinstance(node, ast.Name) and node.id in bind:
        val = bind[node.id] == "cls"
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.left, ast.Name) \
            and node.left.id in bind and isinstance(node.comparators[0], ast.Constant) \
            and node.comparators[0].value is None and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
        val = (bind[node.left.id] == "none") == isinstance(node.ops[0], ast.Is)
    return None if val is None else val != neg


@dataclass
class MroResult:
    """The C3 linearisation of a class: ``entries`` (ClassRef or External, the class first,
    ``External("object")`` last), ``error`` (an inconsistent hierarchy, as Python would raise),
    and ``unresolved`` base texts that could not be bound (the MRO is then partial)."""

    entries: list
    error: str | None = None
    unresolved: list[Unresolved] = field(default_factory=list)


def evaluate_condition(text: str, conditions: Mapping[str, object]) -> bool | None:
    """The truth of an ``if`` test (source text) under ``conditions``, or None when it cannot be
    decided.

    ``conditions`` maps expression texts to their run-time values (``"current_platform.is_rocm()"``
    → False, ``"current_platform.device_type"`` → ``"cuda"``); an expression matches a key equal
    to it or ending it after a dot (``vllm.platforms.current_platform.is_rocm()``). ``TYPE_CHECKING``
    is False (it is only true for type checkers). ``not``, ``and``, ``or`` (three-valued), ``==``,
    ``!=``, ``in``, ``not in`` against literals, and literal constants are understood; anything
    else is undecided.
    """
    node = _parse_test(text)
    return None if node is None else _truth(node, conditions)


@functools.lru_cache(maxsize=4096)
def _parse_test(text: str) -> ast.expr | None:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


def _lookup(node: ast.expr, conditions: Mapping[str, object]) -> tuple[bool, object]:
    """``(known, value)`` of a name, attribute or argument-less call under ``conditions``."""
    if isinstance(node, ast.Constant):
        return True, node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = [_lookup(e, conditions) for e in node.elts]
        return all(k for k, _ in vals), [v for _, v in vals]
    if isinstance(node, ast.Call) and (node.args or node.keywords):
        return False, None
    text = ast.unparse(node)
    if text in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
        return True, False
    for key, value in conditions.items():
        if text == key or text.endswith("." + key):
            return True, value
    return False, None


def _truth(node: ast.expr, conditions: Mapping[str, object]) -> bool | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _truth(node.operand, conditions)
        return None if v is None else not v
    if isinstance(node, ast.BoolOp):
        vals = [_truth(v, conditions) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in vals else (None if None in vals else True)
        return True if True in vals else (None if None in vals else False)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        (lk, lv), (rk, rv) = _lookup(node.left, conditions), _lookup(node.comparators[0], conditions)
        if not (lk and rk):
            return None
        compare = COMPARISONS.get(type(node.ops[0]))
        if compare is None:
            return None
        try:
            return compare(lv, rv)
        except TypeError:
            return None
    known, value = _lookup(node, conditions)
    return bool(value) if known else None


class Resolver:
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
            v = _param_test(text, bind)
            if v is not None and v != want:
                return False
        return True

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
                if short in got or _SYS_MODULES in got or RUNS_CODE in got:
                    candidates.add(p)
        self.tree.summarize_ahead(candidates)
        for p in sorted(candidates):
            s = self.tree.summary(p)
            if not (s.foreign_changes or s.deferred_changes):
                continue
            changes = [(h, mm, c, ln, None) for h, mm, c, ln in s.foreign_changes
                       if (p != own and p not in above) or not _DOTTED.fullmatch(h.removeprefix(ITEMS_OF))]
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
        named = _SYS_MODULES_HEAD.fullmatch(head)
        if named is not None:  # through the module object ``sys.modules["pkg.mod"]``
            mod, rest = named.group(2), named.group(3).lstrip(".")
            if not rest:
                return mod == ref.module and member in (ref.name, "*")
            t = self.resolve_dotted(mod, rest) if self.tree.has_module(mod) else None
            return isinstance(t, ClassRef) and (t.module, t.qualname) == (ref.module, ref.qualname) or (
                mod == ref.module and rest == ref.name)
        if not _DOTTED.fullmatch(head):
            for ident in set(_IDENT_TEXT.findall(head)):
                if ident in names:
                    return True
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
        ``llama.__dict__`` → ``llama``), plus :data:`_SYS_MODULES` when it writes into
        ``sys.modules``; one pass over each text, remembered."""
        memo = self.__dict__.setdefault("_reflected_memo", {})
        got = memo.get(path)
        if got is None:
            text = self._text_of(path)
            names: set[str] = set()
            if b"attr(" in text or b"vars(" in text:
                names.update(m.group(1).rsplit(b".", 1)[-1].decode() for m in _REFLECTED_CALL.finditer(text))
            if b"__dict__" in text:
                names.update(m.group(1).rsplit(b".", 1)[-1].decode() for m in _REFLECTED_DICT.finditer(text))
            if b"sys.modules" in text and _WRITES_SYS_MODULES.search(text):
                names.add(_SYS_MODULES)
            if (b"exec" in text or b"eval" in text or b"Type" in text) and _RUNS_TEXT.search(text):
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
                yield p, self.tree.read(p)
            except (OSError, KeyError):
                continue

    def mentioning(self, name: str) -> list[str]:
        """The modules of the tree whose text holds the identifier ``name``. Every module is read
        once; the first names are looked up by a plain search of the texts, and after
        :data:`_INDEX_AFTER` of them an index of every identifier of every module answers."""
        memo = self.__dict__.setdefault("_mentions", {})
        if name in memo:
            return memo[name]
        texts = self.__dict__.get("_texts")
        if texts is None:
            texts = self.__dict__["_texts"] = list(self._readable_texts())
        index = self.__dict__.get("_ident_index")
        if index is None and len(memo) >= _INDEX_AFTER:
            index = {}
            for p, text in texts:
                for ident in set(_IDENTIFIER.findall(text)):
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
            pat = re.compile(rb"(?<![\w])" + re.escape(needle) + rb"(?![\w])")
            memo[name] = [p for p, text in texts if needle in text and pat.search(text)]
        return memo[name]

    def _may_change(self, path: str, names: set[str]) -> bool:
        """True when the text of the module at ``path`` may change a member of something named
        ``names`` (a member write, ``del``, ``setattr``/``delattr`` or an item write on one of
        them, or a rebinding of one: ``X = N``, ``N as X``, ``for ... in ... N``), or runs text
        as code (``exec(``, ``eval(``): a cheap test before summarising it.

        The constructs that name no class (``setattr``, ``del``, ``exec(``, a loop over what a
        call computes that writes an attribute of its target) are looked for once
        per module; then each occurrence of one of ``names`` as a whole word is read in its line
        (the module came from :meth:`mentioning`, so it has a few)."""
        by_path = self.__dict__.get("_texts_by_path")
        if by_path is None:
            by_path = self.__dict__["_texts_by_path"] = dict(self.__dict__["_texts"])
        text = by_path.get(path, b"")
        anonymous = self.__dict__.setdefault("_anonymous_change", {})
        hit = anonymous.get(path)
        if hit is None:
            hit = anonymous[path] = bool(
                b"setattr" in text or b"delattr" in text
                or (b"del" in text and _DEL_STATEMENT.search(text) is not None)
                or ((b"exec" in text or b"eval" in text) and _CALLS_EXEC.search(text) is not None)
                or (b"for" in text and _LOOP_CALL_WRITE.search(text) is not None))
        if hit:
            return True
        for n in names:
            needle = n.encode()
            size = len(needle)
            i = text.find(needle)
            while i >= 0:
                end = i + size
                if (i == 0 or not _is_word_byte(text[i - 1])) and (end == len(text) or not _is_word_byte(text[end])):
                    if _CHANGE_AFTER.match(text, end) is not None:
                        return True
                    start = text.rfind(b"\n", 0, i) + 1
                    if (end == len(text) or text[end] not in _NOT_AFTER_VALUE) \
                            and _VALUE_BEFORE.search(text, start, i) is not None:
                        return True
                    if _LOOP_BEFORE.search(text, start, i) is not None:
                        return True
                i = text.find(needle, i + 1)
        return False

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

    # -- MRO ---------------------------------------------------------------------------
    def bases(self, ref: ClassRef) -> list[Target]:
        """The resolved direct bases of ``ref`` (empty list means ``object``), as they are after
        the class's decorators ran: a decorator that executes
        ``cls.__bases__ = cls.__bases__ + (X,)`` (vLLM's ``support_torch_compile`` does, in
        ``vllm/compilation/decorators.py``) appends X."""
        c = self.cls(ref)
        if c is None:
            return []
        out = [self.resolve_base(ref, b) for b in c.bases]
        for deco in c.decorators:
            for extra in self.decorator_appended_bases(ref.module, deco):
                if extra not in out:
                    out.append(extra)
        return out

    def decorator_appended_bases(self, module: str, deco: str) -> list[Target]:
        """Bases a class decorator appends to ``__bases__`` (through the functions of its module
        that it calls), resolved; [] for decorators that leave the bases alone."""
        key = (module, deco)
        cache = self.__dict__.setdefault("_deco_cache", {})
        if key in cache:
            return cache[key]
        cache[key] = []
        name = deco.removesuffix("(...)")
        if not all(p.isidentifier() for p in name.split(".")):
            return []
        f = self.resolve_dotted(module, name)
        result: list[Target] = []
        if isinstance(f, FunctionRef):
            fm = self.tree.module(f.module)
            if fm is not None:
                seen: set[str] = set()
                todo = [f.name]
                while todo:
                    fn = todo.pop()
                    if fn in seen or fn not in fm.functions:
                        continue
                    seen.add(fn)
                    ff = fm.functions[fn]
                    for b in ff.appends_bases:
                        t = self.resolve_dotted(f.module, b)
                        if t not in result:
                            result.append(t)
                    todo += ff.calls
        cache[key] = result
        return result

    def mro(self, ref: ClassRef) -> MroResult:
        """C3 linearisation of ``ref``, as ``type.mro()`` computes it.

        Args:
            ref: the class.

        Returns:
            Its MRO; an inconsistent or recursive hierarchy is returned as ``MroResult.error``.

        Raises:
            RecursionError: the inheritance chain is too deep to follow (a thousand classes deriving
                from each other); no partial result of this call stays cached, so the classes of
                other targets are linearised afresh.
        """
        if ref in self._mro:
            return self._mro[ref]
        started = self.__dict__.setdefault("_mro_started", [])
        top = not started
        try:
            return self._linearise(ref, started)
        except RecursionError:
            if top:  # forget the placeholders of the classes whose linearisation was cut short
                for r, placeholder in started:
                    if self._mro.get(r) is placeholder:
                        del self._mro[r]
            raise
        finally:
            if top:
                started.clear()

    def _linearise(self, ref: ClassRef, started: list) -> MroResult:
        placeholder = MroResult([ref, External("object")], error="recursive hierarchy")
        started.append((ref, placeholder))
        self._mro[ref] = placeholder
        unresolved: list[Unresolved] = []
        seqs: list[list] = []
        direct: list = []
        for b in self.bases(ref):
            if isinstance(b, ClassRef):
                r = self.mro(b)
                unresolved += r.unresolved
                if r.error == "recursive hierarchy":
                    unresolved.append(Unresolved(b.dotted, "recursive hierarchy"))
                    continue
                seqs.append(list(r.entries))
                direct.append(b)
            elif isinstance(b, External):
                chain = _EXTERNAL_MRO.get(b.name, [b.name])
                ext = [External(n) for n in chain] + [External("object")]
                if b.name == "object":
                    ext = [External("object")]
                seqs.append(ext)
                direct.append(ext[0])
            else:
                ub = b if isinstance(b, Unresolved) else Unresolved(str(b), "not a class")
                unresolved.append(ub)
        if not direct:
            res = MroResult([ref, External("object")], unresolved=unresolved)
        else:
            merged, err = _c3_merge(seqs + [direct])
            res = MroResult([ref] + merged, error=err, unresolved=unresolved)
        self._mro[ref] = res
        return res

    def lookup(self, ref: ClassRef, name: str) -> tuple[ClassRef, MethodFact | AttrFact] | None:
        """The first class on ``ref``'s MRO that defines ``name`` (a method, or an attribute with
        a value; annotation-only names define nothing), with its fact; None if none does."""
        for entry in self.mro(ref).entries:
            if not isinstance(entry, ClassRef):
                continue
            c = self.cls(entry)
            if c is None:
                continue
            if name in c.methods:
                return entry, c.methods[name]
            a = c.attrs.get(name)
            if a is not None and a.has_value:
                return entry, a
        return None

    def is_subclass(self, ref: ClassRef, base: ClassRef | str) -> bool:
        """True when ``base`` (a ClassRef, or a class name) is on ``ref``'s MRO."""
        for e in self.mro(ref).entries:
            if isinstance(e, ClassRef):
                if (isinstance(base, ClassRef) and e.module == base.module and e.qualname == base.qualname) or (
                    isinstance(base, str) and e.name == base
                ):
                    return True
        return False

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


def _c3_merge(seqs: list[list]) -> tuple[list, str | None]:
    seqs = [list(s) for s in seqs if s]
    out: list = []
    while True:
        seqs = [s for s in seqs if s]
        if not seqs:
            return out, None
        for s in seqs:
            head = s[0]
            if not any(head in t[1:] for t in seqs):
                break
        else:
            names = ", ".join(getattr(s[0], "dotted", str(s[0])) for s in seqs)
            return out, f"Cannot create a consistent method resolution order (MRO) for bases {names}"
        out.append(head)
        for s in seqs:
            if s and s[0] == head:
                del s[0]
