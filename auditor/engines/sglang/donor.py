"""The EAGLE-3 pattern of an SGLang tree, read from its own models (the *donors*).

A fix for an SGLang target adds what the tree's capable models already have, in the shape they
have it. Those models (0.5.10.post1 ``sglang/srt/models/llama.py``, ``qwen2.py``,
``deepseek_v2.py``; read by structure, whatever the release) share one pattern:

- the wrapper's ``set_eagle3_layers_to_capture(self, layer_ids=None)`` returns early off the last
  pipeline rank, sets ``self.capture_aux_hidden_states = True`` and stores
  ``[2, num_layers // 2, num_layers - 3]`` (``num_layers = self.config.num_hidden_layers``) or
  ``[val + 1 for val in layer_ids]`` on ``self.model.layers_to_capture``;
- the wrapper's ``forward`` unpacks ``hidden_states, aux_hidden_states = hidden_states`` under
  ``if self.capture_aux_hidden_states:`` and hands ``aux_hidden_states`` to
  ``self.logits_processor(...)`` (the fifth positional argument);
- the inner model's ``forward`` appends the state entering each layer whose index is in
  ``self.layers_to_capture`` and returns ``(hidden_states, aux_hidden_states)``.

:func:`find_donor` reads each registered class's setter and ``forward`` (``ast``, never
imported) into a :class:`SetterShape` and a :class:`WrapperShape`, keeps the classes whose every
statement fits the pattern and whose inner model captures, and returns the shape most of them
share. Only names (identifiers) and small integers are taken from the tree; the codemods write
their own code from these values.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterator

from auditor.engines.sglang.facts import (
    CAPTURE_ATTR,
    SETTER,
    attr_class,
    find_setter,
    forward_capture,
)
from auditor.index.resolve import Resolver
from auditor.index.targets import ClassRef

#: Binary operators a default layer choice may use on the layer count.
_OPS = {ast.FloorDiv: "//", ast.Sub: "-", ast.Add: "+"}


@dataclass(frozen=True)
class SetterShape:
    """How the donor's setter is written.

    ``flag``: the attribute it sets to ``True`` on itself (``capture_aux_hidden_states``);
    ``capture_attr``: the attribute it fills on the inner model (``layers_to_capture``);
    ``num_layers``: the ``self.`` path of the layer count (``("config", "num_hidden_layers")``);
    ``default``: the default layer choice, each item ``("const", k)`` or ``(op, k)`` meaning
    ``num_layers op k`` (op ``//``, ``-``, ``+``; ``("+", 0)`` is ``num_layers``); ``offset``: added
    to each given layer id (``val + 1``); ``guard``: it returns early off the last pipeline rank.
    """

    flag: str
    capture_attr: str
    num_layers: tuple[str, ...]
    default: tuple[tuple[str, int], ...]
    offset: int
    guard: bool

    def as_dict(self) -> dict:
        return {"flag": self.flag, "capture_attr": self.capture_attr, "num_layers": list(self.num_layers),
                "default": [list(d) for d in self.default], "offset": self.offset, "guard": self.guard}


@dataclass(frozen=True)
class WrapperShape:
    """How the donor's ``forward`` hands the aux hidden states on: to ``self.<call>(...)``
    (``logits_processor``) as positional argument ``position`` (0-based), or as ``keyword``."""

    call: str
    position: int | None
    keyword: str | None

    def as_dict(self) -> dict:
        return {"call": self.call, "position": self.position, "keyword": self.keyword}


@dataclass
class Donor:
    """The pattern chosen for the tree: the donor class (``ref``, its ``path`` and setter
    ``line``), the attribute holding its inner model (``inner``), the shapes, and ``peers``: the
    other donors (architecture class names) that share the shape."""

    ref: ClassRef
    path: str
    line: int
    inner: str
    setter: SetterShape
    wrapper: WrapperShape
    peers: list[str] = field(default_factory=list)


@dataclass
class DonorSearch:
    """The outcome of :func:`find_donor`: the ``donor`` (None when the tree has none) and why
    the classes that have a setter were not taken (``rejected``: class name → reason)."""

    donor: Donor | None
    rejected: dict[str, str] = field(default_factory=dict)

    def why_none(self) -> str:
        """One sentence: why no donor was found."""
        if not self.rejected:
            return f"no registered model of this tree defines {SETTER}"
        items = sorted(self.rejected.items())
        some = "; ".join(f"{k}: {v}" for k, v in items[:3]) + (f"; and {len(items) - 3} more" if len(items) > 3 else "")
        return (f"none of the {len(self.rejected)} models of this tree that define the setter has the plain "
                f"pattern to copy ({some})")


class _NotShape(Exception):
    pass


def _self_path(node: ast.AST) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "self":
        return tuple(reversed(parts))
    return None


def _is_docstring(st: ast.stmt) -> bool:
    return isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)


def _int(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int and -64 <= node.value <= 64:
        return node.value
    raise _NotShape("a layer number that is not a small integer literal")


def setter_shape(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[SetterShape, str]:
    """The :class:`SetterShape` of a setter and the inner-model attribute it fills.

    Raises:
        ValueError: a statement that does not fit the pattern (the message says which).
    """
    args = fn.args.args
    if len(args) != 2 or fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
        raise ValueError("the setter does not take exactly one layer-ids argument")
    param = args[1].arg
    state: dict = {"flag": set(), "inner": set(), "guard": False, "num": {}, "default": None, "offset": None}

    def value(v: ast.AST, branch: str | None) -> None:
        if isinstance(v, ast.List):
            items = []
            for e in v.elts:
                if isinstance(e, ast.BinOp) and type(e.op) in _OPS and isinstance(e.left, ast.Name) \
                        and e.left.id in state["num"]:
                    items.append((_OPS[type(e.op)], _int(e.right)))
                elif isinstance(e, ast.Name) and e.id in state["num"]:
                    items.append(("+", 0))
                else:
                    items.append(("const", _int(e)))
            if not items or branch == "given":
                raise _NotShape("a fixed layer list where the given ids are expected")
            state["default"] = tuple(items)
        elif isinstance(v, ast.ListComp) and len(v.generators) == 1 and not v.generators[0].ifs:
            g = v.generators[0]
            if not (isinstance(g.target, ast.Name) and isinstance(g.iter, ast.Name) and g.iter.id == param):
                raise _NotShape("a comprehension over something other than the given ids")
            elt, var = v.elt, g.target.id
            if isinstance(elt, ast.Name) and elt.id == var:
                state["offset"] = 0
            elif isinstance(elt, ast.BinOp) and isinstance(elt.op, ast.Add) and isinstance(elt.left, ast.Name) \
                    and elt.left.id == var:
                state["offset"] = _int(elt.right)
            else:
                raise _NotShape("a mapping of the given ids other than val + k")
        elif isinstance(v, ast.Name) and v.id == param:
            state["offset"] = 0
        else:
            raise _NotShape("a layer choice that is neither a list of layer numbers nor the given ids")

    def visit(body: list[ast.stmt], branch: str | None) -> None:
        for st in body:
            if _is_docstring(st) or isinstance(st, ast.Pass):
                continue
            if isinstance(st, ast.If):
                t = st.test
                if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not) and isinstance(t.operand, ast.Attribute) \
                        and t.operand.attr == "is_last_rank" and len(st.body) == 1 and isinstance(st.body[0], ast.Return) \
                        and st.body[0].value is None and not st.orelse:
                    state["guard"] = True
                    continue
                if isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == param \
                        and len(t.ops) == 1 and isinstance(t.ops[0], (ast.Is, ast.IsNot)) \
                        and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value is None:
                    none_first = isinstance(t.ops[0], ast.Is)
                    visit(st.body, "default" if none_first else "given")
                    visit(st.orelse, "given" if none_first else "default")
                    continue
                raise _NotShape(f"an if statement the pattern does not have (line {st.lineno})")
            if isinstance(st, ast.Assign) and len(st.targets) == 1:
                t = st.targets[0]
                if isinstance(t, ast.Name) and _self_path(st.value) is not None and len(_self_path(st.value)) >= 1:
                    state["num"][t.id] = _self_path(st.value)  # num_layers = self.config.num_hidden_layers
                    continue
                p = _self_path(t) if isinstance(t, ast.Attribute) else None
                if p is not None and len(p) == 1 and isinstance(st.value, ast.Constant) and st.value.value is True:
                    state["flag"].add(p[0])
                    continue
                if p is not None and len(p) == 2 and p[1] == CAPTURE_ATTR:
                    state["inner"].add(p[0])
                    value(st.value, branch)
                    continue
            raise _NotShape(f"a statement the pattern does not have (line {st.lineno})")

    try:
        visit(fn.body, None)
    except _NotShape as exc:
        raise ValueError(str(exc)) from None
    if len(state["flag"]) != 1:
        raise ValueError("the setter does not set exactly one capture flag to True on itself")
    if len(state["inner"]) != 1:
        raise ValueError(f"the setter does not fill {CAPTURE_ATTR} on exactly one inner model")
    if state["default"] is None or state["offset"] is None:
        raise ValueError("the setter lacks a default layer choice or the mapping of given ids")
    if any(op != "const" for op, _ in state["default"]) and len(state["num"]) != 1:
        raise ValueError("the layer count is not read from one self attribute")
    num = next(iter(state["num"].values())) if state["num"] else ("config", "num_hidden_layers")
    shape = SetterShape(next(iter(state["flag"])), CAPTURE_ATTR, tuple(num), state["default"], state["offset"],
                        state["guard"])
    return shape, next(iter(state["inner"]))


def wrapper_shape(fn: ast.FunctionDef | ast.AsyncFunctionDef, flag: str) -> WrapperShape:
    """How a ``forward`` unpacks ``(hidden_states, aux)`` under ``if self.<flag>:`` and which
    ``self.<call>(...)`` receives ``aux``.

    Raises:
        ValueError: the forward does not do so in that form.
    """
    aux = None
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and _self_path(node.test) == (flag,) and len(node.body) == 1:
            st = node.body[0]
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Tuple) \
                    and len(st.targets[0].elts) == 2 and all(isinstance(e, ast.Name) for e in st.targets[0].elts):
                aux = st.targets[0].elts[1].id
    if aux is None:
        raise ValueError(f"forward does not unpack the aux hidden states under if self.{flag}")
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        p = _self_path(node.func)
        if p is None or len(p) != 1:
            continue
        for i, a in enumerate(node.args):
            if isinstance(a, ast.Name) and a.id == aux:
                return WrapperShape(p[0], i, None)
        for k in node.keywords:
            if k.arg and isinstance(k.value, ast.Name) and k.value.id == aux:
                return WrapperShape(p[0], None, k.arg)
    raise ValueError("forward never hands the aux hidden states to a self.<module>(...) call")


def method_ast(resolver: Resolver, owner: ClassRef, name: str, _parsed: dict | None = None):
    """The ``ast`` definition of method ``name`` in class ``owner`` (its module read from the tree,
    parsed, never imported), or None when it cannot be read."""
    loc = resolver.location(owner)
    if loc is None:
        return None
    parsed = _parsed if _parsed is not None else {}
    if loc[0] not in parsed:
        try:
            parsed[loc[0]] = ast.parse(resolver.tree.read(loc[0]))
        except (SyntaxError, ValueError, KeyError, OSError, RecursionError):
            parsed[loc[0]] = None
    mod = parsed[loc[0]]
    return _function(mod, owner.qualname, name) if mod is not None else None


def _function(tree: ast.Module, qualname: str, name: str):
    body = tree.body
    cls = None
    for part in qualname.split("@")[0].split("."):
        cls = next((st for st in reversed(body) if isinstance(st, ast.ClassDef) and st.name == part), None)
        if cls is None:
            return None
        body = cls.body
    return next((st for st in reversed(body) if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and st.name == name), None)


def target_owners(registry, lookup) -> Iterator[ClassRef]:
    """The classes that define a member for the registered targets, each once, in registry order.

    Args:
        registry: the tree's SGLang registry (``auditor.engines.sglang.registry``).
        lookup: ``ClassRef -> (owner ClassRef, ...) | None``, the MRO lookup of the member.
    Yields:
        The owner class of each target's hit, skipping targets without the member and owners
        already seen."""
    seen: set[ClassRef] = set()
    for arch in registry.architectures():
        if registry.role(arch) != "target":
            continue
        ref = registry.class_ref(arch)
        if not isinstance(ref, ClassRef):
            continue
        hit = lookup(ref)
        if hit is None or hit[0] in seen:
            continue
        seen.add(hit[0])
        yield hit[0]


def find_donor(resolver: Resolver, registry, name: str = SETTER) -> DonorSearch:
    """The tree's EAGLE-3 pattern (see the module docstring): over every registered class whose
    MRO defines the setter ``name``, the shape that most of them share (ties: the first donor by
    dotted name). A class is a donor when its setter and its ``forward`` fit the pattern and its
    inner model's ``forward`` captures and returns the aux hidden states."""
    out = DonorSearch(None)
    parsed: dict[str, ast.Module | None] = {}
    groups: dict[tuple, list[Donor]] = {}
    for owner in target_owners(registry, lambda ref: find_setter(resolver, ref, name)):
        loc = resolver.location(owner)
        if loc is None:
            continue
        fn = method_ast(resolver, owner, name, parsed)
        if fn is None:
            out.rejected[owner.name] = "its setter cannot be read"
            continue
        try:
            shape, inner = setter_shape(fn)
        except ValueError as exc:
            out.rejected[owner.name] = str(exc)
            continue
        fwd_hit = resolver.lookup(owner, "forward")
        if fwd_hit is None or fwd_hit[0] != owner:
            out.rejected[owner.name] = "its forward is not defined beside the setter"
            continue
        try:
            wrapper = wrapper_shape(method_ast(resolver, owner, "forward", parsed), shape.flag)
        except (ValueError, AttributeError, TypeError) as exc:
            out.rejected[owner.name] = str(exc)
            continue
        cls, _, _ = attr_class(resolver, owner, inner)
        fc = forward_capture(resolver, cls) if cls is not None else None
        if fc is None or not any(lp["captures"] for lp in fc.loops) or not fc.returns_aux:
            out.rejected[owner.name] = f"its inner model (self.{inner}) does not capture and return the aux states"
            continue
        d = Donor(owner, loc[0], fn.lineno, inner, shape, wrapper)
        groups.setdefault((shape, wrapper), []).append(d)
    if groups:
        best = min(groups.values(), key=lambda g: (-len(g), min(d.ref.dotted for d in g)))
        best.sort(key=lambda d: d.ref.dotted)
        out.donor = best[0]
        out.donor.peers = [d.ref.name for d in best[1:]]
    return out


# ------------------------------------------------------------------ getters the workers call

@dataclass(frozen=True)
class GetterShape:
    """How a donor writes a getter the EAGLE workers call on the target (``get_embed_and_head``):
    ``return self.<path>, self.<path>`` — ``paths`` are the ``self.`` attribute paths returned
    (``(("model", "embed_tokens", "weight"), ("lm_head", "weight"))``), ``single`` when it returns
    one path rather than a tuple."""

    paths: tuple[tuple[str, ...], ...]
    single: bool = False

    def as_dict(self) -> dict:
        return {"paths": [list(p) for p in self.paths], "single": self.single}


@dataclass
class GetterDonor:
    """The getter pattern chosen for the tree: the donor class (``ref``, its ``path`` and the
    getter's ``line``), the ``shape``, and ``peers`` (the other donors sharing it)."""

    ref: ClassRef
    path: str
    line: int
    shape: GetterShape
    peers: list[str] = field(default_factory=list)


@dataclass
class GetterSearch:
    """The outcome of :func:`find_getter_donor`: the ``donor`` (None when none) and why the
    classes that define the getter were not taken (``rejected``)."""

    name: str
    donor: GetterDonor | None
    rejected: dict[str, str] = field(default_factory=dict)
    #: every shape found, most shared first (each as its first donor); ``donor`` is the first
    shapes: list[GetterDonor] = field(default_factory=list)

    def why_none(self) -> str:
        """One sentence: why no donor was found."""
        if not self.rejected:
            return f"no registered model of this tree defines {self.name}"
        items = sorted(self.rejected.items())
        some = "; ".join(f"{k}: {v}" for k, v in items[:3]) + (f"; and {len(items) - 3} more" if len(items) > 3 else "")
        return (f"none of the {len(self.rejected)} models of this tree that define {self.name} returns plain "
                f"self attributes ({some})")


def getter_shape(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> GetterShape:
    """The :class:`GetterShape` of a getter whose body (docstring aside) is one ``return`` of
    ``self.a.b`` paths (a tuple of them, or one).

    Raises:
        ValueError: another shape (the message says which).
    """
    a = fn.args
    if len(a.posonlyargs) + len(a.args) != 1 or a.vararg or a.kwarg or a.kwonlyargs:
        raise ValueError("the getter takes arguments besides self")
    body = [st for st in fn.body if not _is_docstring(st)]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        raise ValueError("the getter is not one return statement")
    v = body[0].value
    items = v.elts if isinstance(v, ast.Tuple) else [v]
    paths = []
    for e in items:
        p = _self_path(e) if isinstance(e, ast.Attribute) else None
        if not p or len(p) > 6:
            raise ValueError("the getter returns something other than self attributes")
        paths.append(p)
    if not 1 <= len(paths) <= 8:
        raise ValueError("the getter returns too many values")
    return GetterShape(tuple(paths), single=not isinstance(v, ast.Tuple))


def find_getter_donor(resolver: Resolver, registry, name: str) -> GetterSearch:
    """The tree's patterns for the getter ``name``: over every registered target class whose MRO
    defines it, each :class:`GetterShape` found, the one most of them share first (ties: the first
    donor by dotted name)."""
    out = GetterSearch(name, None)
    parsed: dict[str, ast.Module | None] = {}
    groups: dict[GetterShape, list[GetterDonor]] = {}
    for owner in target_owners(registry, lambda ref: resolver.lookup(ref, name)):
        loc = resolver.location(owner)
        fn = method_ast(resolver, owner, name, parsed) if loc is not None else None
        if fn is None:
            out.rejected[owner.name] = f"its {name} cannot be read"
            continue
        try:
            shape = getter_shape(fn)
        except ValueError as exc:
            out.rejected[owner.name] = str(exc)
            continue
        groups.setdefault(shape, []).append(GetterDonor(owner, loc[0], fn.lineno, shape))
    ordered = sorted(groups.values(), key=lambda g: (-len(g), min(d.ref.dotted for d in g)))
    for g in ordered:
        g.sort(key=lambda d: d.ref.dotted)
        g[0].peers = [d.ref.name for d in g[1:]]
        out.shapes.append(g[0])
    out.donor = out.shapes[0] if out.shapes else None
    return out
