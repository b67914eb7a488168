"""What becomes of a class member at run time, past its ``def``: the method decorators that wrap
it, the instance attributes and class changes that shadow it when the model is built, and the
changes to Python's builtins that the capture loop relies on. Read by the ``interface`` gate (the
EAGLE-3 setter and getter) and the ``aux-capture`` gate (the capturing ``forward``), of both
engines.

Each check follows what the index can follow the way Python executes it (a decorator of the tree
that returns the function, or a wrapper that calls it and returns its result, changes nothing; a
wrapper that never calls it, or a decorator that gives back None, makes the member inert) and
reports what it cannot follow (a decorator from outside the tree, a wrapper that changes what it
returns, an instance attribute bound to some other value) with its construct and ``file:line``.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass

from auditor.index.facts import AttrFact, MethodFact, ReturnsFact
from auditor.index.providers import FactProvider
from auditor.index.resolve import Resolver
from auditor.index.targets import ClassRef, External, FunctionRef

#: Decorators from outside the tree whose effect is known: they give back the function itself
#: (``abc.abstractmethod``, ``typing.override``) or a wrapper that calls it with the same arguments
#: and returns its result (torch's gradient modes, TorchScript's ``ignore``, ``torch.compile``,
#: which compiles the same computation). Any other outside decorator is not followed.
KNOWN_TRANSPARENT = frozenset({
    "abc.abstractmethod", "typing.override", "typing_extensions.override", "torch.no_grad",
    "torch.inference_mode", "torch.jit.ignore", "torch.compile", "torch.compiler.disable",
    "torch.enable_grad",
})

#: The builtins of this Python: a tree that rebinds one of them changes what every loop and test
#: of the model code does.
PY_BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_"))


@dataclass(frozen=True)
class Inert:
    """Why a member does not do at run time what its ``def`` says: ``blocked`` when the index
    follows that it cannot (the wrapper never calls it, it is None), else it is not decided;
    ``why`` a sentence naming the construct and its ``path:line``."""

    blocked: bool
    why: str
    path: str | None
    line: int | None


def _absolute(resolver: Resolver, module: str, text: str):
    """The decorator written ``text`` (a dotted name, with ``(...)`` when it is a call) as module
    ``module`` binds it: ``(target, called)``."""
    called = text.endswith("(...)")
    return resolver.resolve_dotted(module, text.removesuffix("(...)")), called


def _wrapper_effect(g: ReturnsFact) -> tuple[str, str] | None:
    """What a decorator of the tree (its :class:`ReturnsFact`) gives back for the function it is
    applied to: None when it is the function or a wrapper that calls it and returns its result;
    else ``("blocked" or "unknown", what)``."""
    if not g.params:
        return "unknown", "takes no argument"
    fn = g.params[0]
    kinds = {(r[0], r[1]) for r in g.returns}
    if kinds == {("name", fn)}:
        return None
    if kinds == {("other", "None")}:
        return "blocked", "returns None, so the member is None (calling it raises TypeError)"
    if len(kinds) == 1 and next(iter(kinds))[0] == "name" and next(iter(kinds))[1] in g.inner:
        wname = next(iter(kinds))[1]
        w = g.inner[wname]
        if fn not in (w.calls or ()):
            return "blocked", f"returns its wrapper {wname}, which never calls the decorated function"
        if all(r[0] == "call" and r[1] == fn for r in w.returns):
            if fn in (w.passes or ()):
                return None
            return "unknown", (f"returns its wrapper {wname}, which calls the decorated function with other arguments "
                               "than its own")
        return "unknown", (f"returns its wrapper {wname}, which calls the decorated function but returns something "
                           "else than its result")
    return "unknown", "gives back something static analysis cannot follow"


def decorator_effect(resolver: Resolver, owner: ClassRef, fact: MethodFact) -> Inert | None:
    """The first decorator of the method ``fact`` (defined in class ``owner``) that keeps it from
    running as written, or None when every decorator is followed and changes nothing.

    Args:
        resolver: the tree's resolver.
        owner: the class that defines the method.
        fact: the method.

    Returns:
        :class:`Inert` (blocked: a decorator of the tree whose wrapper never calls the method, or
        that returns None; not decided: a decorator from outside the tree not in
        :data:`KNOWN_TRANSPARENT`, a factory, a class, or a name that does not resolve).
    """
    m = resolver.tree.module(owner.module)
    path = m.path if m else None
    for text in reversed(fact.decorators):  # the innermost runs first
        where = f"`@{text.replace('(...)', '(…)')}` on {owner.name}.{fact.name} at {path}:{fact.line}"
        target, called = _absolute(resolver, owner.module, text)
        if isinstance(target, External):
            if target.name in KNOWN_TRANSPARENT:
                continue
            return Inert(False, f"{where} comes from outside the tree ({target.name}): its effect cannot be read",
                         path, fact.line)
        if isinstance(target, FunctionRef) and not called:
            fm = resolver.tree.module(target.module)
            ff = fm.functions.get(target.name) if fm else None
            if ff is not None and ff.gives is not None:
                eff = _wrapper_effect(ff.gives)
                if eff is None:
                    continue
                kind, what = eff
                return Inert(kind == "blocked", f"{where}: {target.name} ({fm.path}:{ff.line}) {what}", path,
                             fact.line)
        return Inert(False, f"{where} is not a function of the tree static analysis can follow", path, fact.line)
    return None


def instance_shadows(resolver: Resolver, ref: ClassRef, member: str) -> Inert | None:
    """An instance attribute or a class change that the model's construction makes over the
    member ``member`` of class ``ref``: ``self.<member> = v`` or ``setattr(self, ...)`` in a
    method of a class on the MRO (``__init__`` and the methods the index details), or
    ``type(self).<member> = v``/``self.__class__.<member> = v``/``setattr(type(self), ...)`` there.

    Args:
        resolver: the tree's resolver.
        ref: the model class.
        member: the member name.

    Returns:
        :class:`Inert` (blocked when the value is None, else not decided), or None.
    """
    for e in resolver.mro(ref).entries:
        c = resolver.cls(e) if isinstance(e, ClassRef) else None
        if c is None:
            continue
        m = resolver.tree.module(e.module)
        for mname, mf in c.methods.items():
            for key in (member, "*"):
                if key in mf.self_assigns:
                    value = mf.self_assigns[key]
                    line = mf.self_assign_calls.get(key, (None, None, mf.line))[2]
                    what = f"self.{member}" if key == member else "an instance attribute under a computed name"
                    return Inert(key == member and value == "None",
                                 f"{e.name}.{mname} ({m.path}:{line}) sets {what} = {value}, which shadows the "
                                 f"method {member} on every instance", m.path, line)
        for path, value, mname, line, _ in c.instance_writes:
            if path in (member, "*", f"?.{member}"):
                what = f"self.{member}" if path == member else f"self.{path}" if path.startswith("?") else \
                    "an instance attribute under a computed name"
                return Inert(False, f"{e.name}.{mname} ({m.path}:{line}) sets {what} = {value}, which shadows the "
                             f"method {member} on the instance once it runs: static analysis does not follow it",
                             m.path, line)
        for head, mm, construct, line, label in m.deferred_changes:
            if head in ("type(self)", "self.__class__", "type(cls)") and mm in (member, "*") \
                    and label.startswith(e.qualname + "."):
                return Inert(False, f"`{construct}` in {label} ({m.path}:{line}) changes {member} on the class of "
                             "the instance, which static analysis cannot follow", m.path, line)
    return None


#: the methods that hand the layers to capture to the model (they write them by design)
CAPTURE_SETTERS = frozenset({"set_aux_hidden_state_layers", "_set_aux_hidden_state_layers",
                             "set_eagle3_layers_to_capture"})


def _constant(value: str, empty: bool = True) -> bool:
    """True when a write's value text (:attr:`auditor.index.summary.ClassFact.instance_writes`)
    is None, a constant or (``empty``) an empty literal."""
    return value == "None" or empty and value in ("()", "[]", "{}") or value[:1] in "'\"0123456789-"


def capture_writes(resolver: Resolver, holder: ClassRef, target: ClassRef, attr: str = "aux_hidden_state_layers",
                   layers: str = "layers") -> list[Inert]:
    """The writes, in the methods of the holder's and the target's classes, to what the capture
    loop reads that the index does not follow (:attr:`auditor.index.summary.ClassFact.instance_writes`):

    - on the holder, the layers to capture (``attr``) written outside ``__init__`` and the setters
      (``s = self; s.aux_hidden_state_layers = ()`` in ``forward``, a helper ``_setup``; a method
      that stores a value read from its parameters is a setter, as SGLang 0.5.23's
      ``set_dflash_layers_to_capture`` for another draft method), and
      the decoder layers (``layers``) bound to None or a scalar constant, or outside ``__init__`` and
      the helpers an ``__init__`` of the holder calls (``self._init_layers()``, MiniCPM's);
    - on the target, the same members of the holder reached from it (the path its setter writes
      the layers to capture under, ``self.model``): the decoder layers anywhere, the layers to
      capture outside the setters; a setter that stores None, an empty literal or a constant
      drops the layers it is handed.

    Args:
        resolver: the tree's resolver.
        holder: the class whose ``forward`` captures.
        target: the model class the engine builds.
        attr: the attribute the capture tests the layer index against.
        layers: the attribute holding the decoder layers.

    Returns:
        One :class:`Inert` (not decided) per write, naming it and its ``path:line``.
    """
    out: list[Inert] = []
    seen: set[tuple[str, int]] = set()

    def classes(ref: ClassRef):
        for e in resolver.mro(ref).entries:
            c = resolver.cls(e) if isinstance(e, ClassRef) else None
            if c is not None:
                yield e, c, resolver.tree.module(e.module)

    def add(e, m, path, value, mname, line):
        if (m.path, line) not in seen:
            seen.add((m.path, line))
            out.append(Inert(False, f"{e.name}.{mname} ({m.path}:{line}) sets self.{path} = {value}, which the "
                             "capture reads: static analysis does not follow what it captures then", m.path, line))

    held = list(classes(holder))
    init_like = {"__init__"} | {x for _, c, _ in held for x in getattr(c.methods.get("__init__"), "self_calls", ())}
    for e, c, m in held:
        for path, value, mname, line, given in c.instance_writes:
            if path in (f"?.{attr}", f"?.{layers}"):
                add(e, m, path, value, mname, line)  # through a name the index does not follow
                continue
            setter = mname in CAPTURE_SETTERS or given  # it hands on the layers it is given
            if path == attr and (not setter and mname != "__init__" or setter and _constant(value)):
                add(e, m, path, value, mname, line)
            elif path == layers and (mname not in init_like or _constant(value, empty=False)):
                add(e, m, path, value, mname, line)
    if target == holder:
        return out
    built = list(classes(target))
    # the paths the target's setters store the layers to capture under: the holder as reached
    heads = {p.rsplit(".", 1)[0] for _, c, _ in built for p, _, mn, _, _ in c.instance_writes
             if mn in CAPTURE_SETTERS and "." in p and p.rsplit(".", 1)[1] == attr}
    for e, c, m in built:
        for path, value, mname, line, given in c.instance_writes:
            head, _, last = path.rpartition(".")
            if head == "?" and last in (attr, layers):
                add(e, m, path, value, mname, line)  # through a name the index does not follow
                continue
            if head not in heads:
                continue
            setter = mname in CAPTURE_SETTERS or given
            if last == layers or last == attr and (not setter or _constant(value)):
                add(e, m, path, value, mname, line)
    return out


def member_inert(resolver: Resolver, ref: ClassRef, member: str) -> Inert | None:
    """Whether the member ``member`` of class ``ref`` runs as its definition says: the method
    found on the MRO, its decorators (:func:`decorator_effect`) and what the model's construction
    does over it (:func:`instance_shadows`).

    Returns:
        :class:`Inert`, or None when nothing changes it.
    """
    hit = resolver.lookup(ref, member)
    if hit is not None and isinstance(hit[1], MethodFact):
        eff = decorator_effect(resolver, hit[0], hit[1])
        if eff is not None:
            return eff
    elif hit is not None and isinstance(hit[1], AttrFact):
        eff = value_member(resolver, hit[0], hit[1], member)
        if eff is not None:
            return eff
    return instance_shadows(resolver, ref, member)


def value_member(resolver: Resolver, owner: ClassRef, fact: AttrFact, member: str) -> Inert | None:
    """What a member bound last to a value in the class body of ``owner`` does (``forward = None``
    after its ``def``; ``fact`` the binding): ``blocked`` for None (calling it raises TypeError),
    None for the member's own name (``forward = forward``: unchanged), else not followed (a
    lambda, another object)."""
    m = resolver.tree.module(owner.module)
    path = m.path if m is not None else None
    if fact.value == member:
        return None  # ``forward = forward``: the name bound to what it already was
    if fact.value == "None":
        return Inert(True, f"{owner.name}.{member} = None ({path}:{fact.line}): the member is None, so "
                     "calling it raises TypeError", path, fact.line)
    return Inert(False, f"{owner.name}.{member} = {(fact.value or '?')[:60]} ({path}:{fact.line}) binds "
                 "the member to a value static analysis does not follow", path, fact.line)


def forward_effects(resolver: Resolver, holder: ClassRef, defined_in: ClassRef, target: ClassRef,
                    capture_attr: str = "aux_hidden_state_layers") -> list[Inert]:
    """What keeps the capturing ``forward`` from running as written: a decorator on the holder's
    ``forward`` (the one defined in ``defined_in``), an instance attribute or class change over
    ``forward`` on the holder, and the same for the target's own ``forward`` (the engine calls the
    target, whose ``forward`` calls the holder's), the holder's ``forward`` shadowed through the
    target (``self.model.forward = f``), and the writes to what the capture reads
    (:func:`capture_writes`; ``capture_attr``: the attribute the capture tests the layer index
    against).

    Returns:
        The :class:`Inert` found (empty when the capture runs as written).
    """
    hit = resolver.lookup(defined_in, "forward")
    out = [decorator_effect(resolver, hit[0], hit[1]) if hit and isinstance(hit[1], MethodFact)
           else value_member(resolver, hit[0], hit[1], "forward") if hit and isinstance(hit[1], AttrFact) else None,
           instance_shadows(resolver, holder, "forward")]
    if target != holder:
        out.append(member_inert(resolver, target, "forward"))
        # the holder's ``forward`` shadowed through the target (``self.model.forward = f``)
        for e in resolver.mro(target).entries:
            c = resolver.cls(e) if isinstance(e, ClassRef) else None
            hit = next(((p, v, mn, ln) for p, v, mn, ln, _ in (c.instance_writes if c is not None else ())
                        if p.count(".") == 1 and (p.split(".")[1] == "forward" or p.endswith(".*")
                                                  and not p.startswith("?."))), None)
            if hit is not None:
                m = resolver.tree.module(e.module)
                out.append(Inert(False, f"{e.name}.{hit[2]} ({m.path}:{hit[3]}) sets self.{hit[0]} = {hit[1]}, which "
                                 "shadows the inner model's forward once it runs: static analysis does not follow it",
                                 m.path, hit[3]))
                break
    out += capture_writes(resolver, holder, target, capture_attr)
    return [e for e in out if e is not None]


def _near(a: str, b: str) -> bool:
    """True when the names ``a`` and ``b`` differ by at most two characters inserted, deleted or
    replaced (a misspelling: ``aux_hidden_state_layer``, ``layers_to_captur``)."""
    if a == b or abs(len(a) - len(b)) > 2:
        return a == b
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1] <= 2


def branch_misses(fact: MethodFact, attr: str) -> list[tuple[int, str]]:
    """The ``if`` branches of the setter ``fact`` that store the layers elsewhere than in
    ``attr``, the attribute the capture reads, while nothing on their way stores ``attr``
    (:attr:`auditor.index.summary.MethodFact.branch_stores`): a branch storing one of the
    setter's parameters on another attribute, or one storing an attribute whose name is a
    misspelling of ``attr`` (``aux_hidden_state_layer``). Which branch runs is decided at run
    time.

    Returns:
        ``(line of the branch's first statement, the attributes it stores, comma-separated)``
        for each such branch.
    """
    out = []
    for line, with_param, stored, on_path in fact.branch_stores:
        if attr in on_path:
            continue
        near = [a for a in stored if _near(a, attr)]
        if with_param or near:
            out.append((line, ", ".join(near or with_param)))
    return out


def setter_misses(fact: MethodFact, attr: str) -> bool:
    """True when the setter ``fact`` can never hand its layers to the capture, which reads the
    attribute ``attr``: it stores no attribute of that name, mentions none, and calls nothing that
    could (a plain ``self.model.<typo> = layers``)."""
    return bool(fact.attrs) and attr not in fact.attrs and not fact.calls and not fact.delegates \
        and not fact.is_stub


def _member_changes(s):
    """Each member change a module summary ``s`` records (at module level and in its functions),
    as ``(head, member, construct, line, bound, modules)``: ``bound`` the module-level binding of
    the head's first name, ``modules`` the modules that name is bound to by an import there or in
    a function's scope."""
    changes = [(h, mm, c, ln) for h, mm, c, ln in s.foreign_changes]
    changes += [(h, mm, c, ln) for h, mm, c, ln, _ in s.deferred_changes]
    for head, member, construct, line in changes:
        first = head.split(".")[0]
        b = s.bindings.get(first)
        scoped = [sb.get(first) for sb in s.scope_bindings.values()]
        mods = [x.target for x in [b] + scoped + [f.local_bindings.get(first) for f in s.functions.values()]
                if x is not None and x.kind == "module"]
        yield head, member, construct, line, b, mods


class BuiltinsChanges(FactProvider):
    """The changes the tree makes to Python's builtins that a model's code reads
    (``builtins.enumerate = f``, ``setattr(builtins, "range", f)``, at module level or in a
    function), as ``[(name or "*", construct, path, line)]``: a tree-wide fact (key None). New
    names put in builtins (SGLang's ``builtins.FP8_E4M3_MAX``) change no builtin and are left out."""

    @classmethod
    def compute(cls, ctx, key=None):
        r = ctx.resolver
        out = []
        for p in r.mentioning("builtins"):
            s = r.tree.summary(p)
            for head, member, construct, line, b, mods in _member_changes(s):
                if member != "*" and member not in PY_BUILTINS:
                    continue
                first = head.split(".")[0]
                if head in ("builtins", "__builtins__") and (head == "__builtins__" or "builtins" in mods
                                                              or b is None):
                    out.append((member, construct, s.path, line))
                elif mods and all(t == "builtins" for t in mods) and head == first:
                    out.append((member, construct, s.path, line))
                elif _looks_up(head, "builtins") or _reaches(s, head, b, "builtins"):
                    # sys.modules["builtins"].range = f, an alias, a head computed from the module
                    out.append((member, construct, s.path, line))
        for p in r.mentioning("__builtins__"):
            out += _builtins_dict_writes(r.tree.read(p), p)
        return out


def _builtins_dict_writes(data: bytes, path: str) -> list[tuple[str, str, str, int]]:
    """The writes through the name ``__builtins__`` (the builtins' dictionary, in a module that is
    not ``__main__``) in one module's source, anywhere in it: ``__builtins__[k] = v``, ``del
    __builtins__[k]``, a changing method of it (``.update(...)``, ``.pop(k)``, ...), as
    ``(name or "*", construct, path, line)``; none when the source does not parse."""
    import ast

    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out = []
    for n in ast.walk(tree):
        sub = n if isinstance(n, ast.Subscript) and not isinstance(n.ctx, ast.Load) else None
        if sub is not None and isinstance(sub.value, ast.Name) and sub.value.id == "__builtins__":
            k = sub.slice
            name = k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else "*"
            if name == "*" or name in PY_BUILTINS:
                out.append((name, ast.unparse(sub)[:100], path, sub.lineno))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                and n.func.value.id == "__builtins__" and n.func.attr in _DICT_CHANGES:
            first = n.args[0] if n.args else None
            name = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) \
                and n.func.attr != "update" else "*"
            if name == "*" and n.func.attr == "update" and not n.args and all(k.arg for k in n.keywords):
                names = [k.arg for k in n.keywords if k.arg in PY_BUILTINS]
                name = names[0] if names else None
            if name is not None and (name == "*" or name in PY_BUILTINS):
                out.append((name, ast.unparse(n)[:100], path, n.lineno))
    return out


#: the methods of a dict that change it
_DICT_CHANGES = frozenset({"update", "pop", "setdefault", "clear", "popitem", "__setitem__", "__delitem__"})


class OutsideModuleChanges(FactProvider):
    """The changes the tree makes to the members of a module from outside the tree
    (``itertools.islice = f``, ``import itertools as it; it.islice = f``, at module level or in a
    function), as ``[(member or "*", construct, path, line)]``; the key is the module's dotted
    name (``"itertools"``)."""

    @classmethod
    def compute(cls, ctx, key=None):
        r = ctx.resolver
        out = []
        for p in r.mentioning(key.split(".")[-1]):
            if not r.may_change_module(p, key):
                continue  # its text cannot change a member of the module: not summarised
            s = r.tree.summary(p)
            for head, member, construct, line, b, mods in _member_changes(s):
                if ("." not in head and key in mods) or _looks_up(head, key) or _reaches(s, head, b, key):
                    out.append((member, construct, s.path, line))
        return out


def _reaches(s, head: str, b, key: str) -> bool:
    """True when a change's ``head`` in module summary ``s`` is the module ``key`` under a plain
    alias (``it = itertools``), or a head computed around its name (``(itertools if a else b)``,
    ``[itertools][0]``, ``sys.modules.get('itertools')``). A head that names no module
    (``sys.modules.get(name)``, a loop over ``sys.modules``) is not counted: vLLM's triton
    dispatcher (``vllm/triton_utils/dispatcher.py``, 0.32.0 on) sets attributes of every module of
    ``sys.modules`` whose value is a registered kernel, and counting it as a change of every
    module made 68 of 0.33.0's targets unknown that the engine runs (break 29, left open)."""
    if "." not in head and b is not None and b.kind == "alias" and b.target.split(".")[0] in (key, key.split(".")[0]):
        return True
    if _DOTTED_HEAD.fullmatch(head):
        return False  # a plain name or a member chain: counted by its binding, or a member of a member
    # a head computed around the module's own name, or a lookup of it by that name as a string:
    # ``(itertools if a else b)``, ``[itertools][0]``, ``sys.modules.get('itertools')``
    parts = key.split(".")
    return bool(set(_WORD.findall(head)) & {parts[0], parts[-1]}) or re.search(
        r"""['"]%s['"]""" % re.escape(key), head) is not None


_DOTTED_HEAD = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_WORD = re.compile(r"[A-Za-z_]\w*")


#: A change's head that looks a module up by name: ``sys.modules[...]``,
#: ``importlib.import_module(...)``, ``__import__(...)``, with the name as a plain string when it
#: is one (group 1, 2 or 3).
_MODULE_LOOKUP = re.compile(r"(?:\w+\.)?modules\[\s*(?:'([\w.]+)'\s*\]|[^\]]*\])"
                            r"|(?:\w+\.)?import_module\(\s*(?:'([\w.]+)'\s*\)|[^)]*\))"
                            r"|__import__\(\s*(?:'([\w.]+)'\s*\)|[^)]*\))")


def _looks_up(head: str, key: str) -> bool:
    """True when the change's ``head`` text is a lookup of the module ``key`` by name
    (``sys.modules['itertools']``), or one whose name is computed (``sys.modules[k]``: it may be
    that module)."""
    m = _MODULE_LOOKUP.fullmatch(head.replace('"', "'"))
    if m is None:
        return False
    name = m.group(1) or m.group(2) or m.group(3)
    return name is None or name == key


def loop_helpers_rebound(resolver: Resolver, module: str, names, local=()) -> list[tuple[str, str | None]]:
    """The names a capturing layer loop's iterable calls (``enumerate``, ``islice``, ``range``:
    :attr:`auditor.index.summary.LoopFact.iter_names`) that module ``module`` does not leave
    bound to the builtin or to the outside import it had: a builtin the module binds, a name
    imported from outside the tree and rebound after (``def islice(...)`` below ``from itertools
    import islice``), bound under a test or by a construct the index does not follow, or bound by
    a later star import, or bound by the ``forward`` itself (``local``:
    :attr:`auditor.index.summary.LoopFact.iter_local`).

    Returns:
        ``(name, outside module or None)`` for each name that is rebound (module None), and for
        each name still bound to its outside import (the module it comes from, whose own changes
        the caller checks with :class:`OutsideModuleChanges`).
    """
    m = resolver.tree.module(module)
    if m is None:
        return []
    out = []
    package = resolver.tree.package
    for name in sorted(set(names) - {"self"}):
        b = m.bindings.get(name)
        outside = [x for x in list(m.earlier.get(name, ())) + ([b] if b is not None else [])
                   if x is not None and x.kind == "import" and x.target[0].split(".")[0] != package]
        if name not in PY_BUILTINS and not outside:
            continue  # a name of the tree (a helper function, a class): not a loop helper
        if name in local:
            out.append((name, None))  # bound by the forward itself (a parameter, a local, an import)
            continue
        moved = name in m.cond_bindings or name in m.unfollowable or "*" in m.unfollowable \
            or any(resolver.star_exports(star, name) for star, _ in m.stars)
        if name in PY_BUILTINS and not outside:
            moved = moved or b is not None
        else:
            moved = moved or b is None or b.kind != "import" or b.target[0].split(".")[0] == package
        if moved:
            out.append((name, None))
        elif b is not None and b.kind == "import":
            out.append((name, b.target[0]))
    return out


def builtins_rebound(resolver: Resolver, refs) -> list[tuple[str, str, int]]:
    """The builtins that the modules of the classes ``refs`` (and of the classes on their MROs)
    rebind at module level (``def len(x): ...``, ``range = f``, ``from x import y as max``, under
    a test or not): every call of that name in the module's model code then runs the module's
    object, which static analysis does not follow.

    Returns:
        ``(name, path, line)`` of the first rebinding in each such module, modules in MRO order.
    """
    out, seen = [], set()
    for ref in refs:
        for e in resolver.mro(ref).entries:
            if not isinstance(e, ClassRef) or e.module in seen:
                continue
            seen.add(e.module)
            m = resolver.tree.module(e.module)
            if m is None:
                continue
            hits = [(b.line, n) for n, b in m.bindings.items() if n in PY_BUILTINS
                    and not (b.kind == "import" and b.target == ("builtins", n))]
            hits += [(b.line, n) for n, bs in m.cond_bindings.items() if n in PY_BUILTINS for b in bs]
            hits += [(ln, n) for n, xs in m.unfollowable.items() if n in PY_BUILTINS for _, ln, _ in xs]
            if hits:
                line, name = min(hits)
                out.append((name, m.path, line))
    return out


def builtins_rebound_messages(resolver: Resolver, target: ClassRef, holder: ClassRef,
                              forward: str) -> list[tuple[str, str, int]]:
    """The ``unknown`` of each module of ``target``'s and ``holder``'s MROs that rebinds a builtin
    (:func:`builtins_rebound`; ``forward``: ``Class.forward`` of the capture), as ``(message, path,
    line)``."""
    return [(f"{path}:{line} rebinds the builtin {name} for its module, whose model code (the capture of "
             f"{forward}, the EAGLE-3 members of {target.name}) then calls the module's {name}: static "
             "analysis does not follow it", path, line)
            for name, path, line in builtins_rebound(resolver, [target, holder])]


def builtins_changed(changes: list, forward: str) -> list[tuple[str, str, int]]:
    """The ``unknown`` of a capture in ``forward`` (``Class.forward``) when the tree changes a
    builtin (the first change of :class:`BuiltinsChanges`), as ``(message, path, line)``."""
    out = []
    for name, construct, path, line in changes[:1]:
        what = "a builtin under a computed name" if name == "*" else f"the builtin {name}"
        out.append((f"`{construct}` at {path}:{line} changes {what} for every module, which the capture in {forward} "
                    "relies on: static analysis cannot follow it", path, line))
    return out
