"""Static index of one Python module of a vLLM tree: classes, members, imports, bindings.

The index is built with the standard library ``ast`` (see DESIGN.md for the
measurement behind that choice) and never imports or executes the scanned code. One call of
:func:`summarize` turns a module's source bytes into a :class:`ModuleSummary`, a plain picklable
record that later stages (name resolution, MRO, rules) read instead of the syntax tree, so that
summaries can be cached by file content and computed in worker processes.

Facts that only a few modules need (the EAGLE-3 allowlist, the proposer's image-token branches,
the registry tables) are extracted in the same pass by the :class:`Extractor` objects the layers above supply.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from auditor.cache import cacheable
from auditor.index.importsteps import bound_by, import_steps

#: Methods whose bodies are summarised in detail (references, loops, returns).
DETAILED_METHODS = frozenset(
    {
        "forward",
        "__init__",
        "set_aux_hidden_state_layers",
        "get_eagle3_aux_hidden_state_layers",
        "get_eagle3_default_aux_hidden_state_layers",
        "_init_model",
        "get_language_model",
        "_maybe_add_hidden_state",
        "_set_aux_hidden_state_layers",
    }
)


#: The members whose writes on an instance :attr:`ClassFact.instance_writes` records: the methods
#: the index details (a write shadows the method) and the decoder layers and the layers to capture
#: that the aux-state capture reads.
INSTANCE_MEMBERS = DETAILED_METHODS | {"layers", "aux_hidden_state_layers", "layers_to_capture",
                                       "capture_aux_hidden_states", "set_eagle3_layers_to_capture"}


@cacheable
@dataclass(slots=True)
class Binding:
    """How a module-level name is bound at run time.

    ``kind`` is one of:
      - ``"class"``: a class defined here; ``target`` is its qualname in this module;
      - ``"import"``: ``from MODULE import NAME``; ``target`` = ``(absolute module, name)``;
      - ``"module"``: ``import a.b as c``; ``target`` = absolute module name;
      - ``"alias"``: ``X = Y`` or ``X = a.b.Y``; ``target`` = dotted expression text;
      - ``"factory"``: ``X = f(Y)``; ``target`` = ``(callee dotted, [arg dotted...])``;
      - ``"function"``: a function defined here;
      - ``"deleted"``: ``del X`` at module level (the name is unbound from there on); ``target``
        is the statement's text;
      - ``"other"``: any other value (constants, calls we do not model).
    ``line`` is 1-based. ``guarded`` is True for bindings inside ``try``/``except`` or ``if``.
    ``conds``: the ``if`` tests the binding is made under, outermost first, each as
    ``(test source text, the value it must have)`` (``elif``/``else`` branches carry the earlier
    tests as False); empty for unconditional bindings.
    """

    kind: str
    target: Any
    line: int
    guarded: bool = False
    conds: tuple = ()


@cacheable
@dataclass(slots=True)
class LoopFact:
    """A ``for`` loop over a model's decoder layers, as found in a ``forward`` method.

    Attributes: ``line`` of the ``for``; ``index_var`` the loop's layer-index name, or None when the
    loop has no index (``for layer in islice(...)``); ``index_kind`` one of ``"enumerate"``
    (relative to the iterable unless ``enumerate_start`` is given), ``"range"`` (an absolute index
    over ``range(start_layer, end_layer)``) or None; ``enumerate_start`` the text of
    ``enumerate(..., start=X)`` if given; ``over_slice`` True when the iterable slices the layers
    (``islice(self.layers, start, end)`` or ``self.layers[start:end]``); ``captures`` True when the
    body tests the index against ``aux_hidden_state_layers`` and appends, or calls
    ``_maybe_add_hidden_state``; ``uses_mixin_helper`` for the latter form;
    ``capture_list`` the name of the list the states go to (``"?"`` when it is no plain name).
    """

    line: int
    index_var: str | None
    index_kind: str | None
    enumerate_start: str | None
    over_slice: bool
    captures: bool
    uses_mixin_helper: bool
    over_layers: bool = False
    capture_list: str | None = None
    #: the line where ``forward`` empties the capture list again after the loop (``captures`` is
    #: then False: nothing captured reaches the return)
    reset_line: int | None = None
    #: the names the loop's iterable loads (``("enumerate", "islice", "self")``), sorted
    iter_names: tuple[str, ...] = ()
    #: those of :attr:`iter_names` that the ``forward`` itself binds (a parameter, a local), sorted
    iter_local: tuple[str, ...] = ()


@cacheable
@dataclass(slots=True)
class ReturnsFact:
    """What a function gives back, for following a class decorator through it.

    ``params``: its positional parameter names in order (``self``/``cls`` included for
    methods); ``defaults``: each parameter with a default, mapped to the default's short text
    (``"None"``); ``returns``: each reachable ``return`` as ``(kind, text, args, conds)``, where
    ``kind`` is ``"name"`` (``text`` the dotted name returned), ``"call"`` (``text`` the dotted
    callee, ``args`` its positional arguments, each a dotted name or ``"?"``) or ``"other"``
    (``text`` a short description) or ``"decorate"`` (``return text(...)(*args)``: a decorator
    factory applied in place, with a fifth item ``(positional count, keyword names)`` of the
    factory's call), and ``conds`` the ``if`` tests it is returned under as
    ``(test text, value it must have)`` (a test whose branch always returns puts the statements
    after it under the opposite value); ``inner``: the same for the functions defined directly in
    its body, by name (two levels deep at most).
    """

    params: list[str]
    defaults: dict[str, str] = field(default_factory=dict)
    returns: list[tuple] = field(default_factory=list)
    inner: dict[str, "ReturnsFact"] = field(default_factory=dict)
    #: for a nested function (a decorator's wrapper): the dotted names it calls anywhere in its
    #: body (whether it calls the function it wraps); None at the outer level
    calls: frozenset[str] | None = None
    #: for a nested function: the dotted names it calls with exactly its own arguments
    #: (``fn(*args, **kwargs)``, or its parameters in order): a wrapper that passes the call on
    passes: frozenset[str] | None = None


@cacheable
@dataclass(slots=True)
class MethodFact:
    """A method defined in a class body.

    ``is_stub``: the body is only a docstring, ``...`` or ``pass`` (or ``raise NotImplementedError``).
    ``names``/``attrs``: Name ids and attribute names referenced in the body (detailed methods
    only). ``self_assigns``: ``self.X = <value text>`` in the body (detailed methods only), with
    ``self_assign_calls`` mapping X to ``(callee text, {kwarg: value text}, line)`` when the value
    is a call. ``returns_call``: for ``return Callee(...)`` statements, the callee texts.
    ``loops``: layer loops (``forward`` only). ``returns_aux``: ``forward`` returns a tuple whose
    second item is the aux-states list. ``delegates``: ``self.X.method(...)`` calls, as
    ``(X, method)`` pairs.
    """

    name: str
    line: int
    is_stub: bool
    decorators: list[str] = field(default_factory=list)
    #: calling it always raises (its first statement after the docstring is a ``raise``)
    raises_only: bool = False
    names: frozenset[str] = frozenset()
    attrs: frozenset[str] = frozenset()
    self_assigns: dict[str, str] = field(default_factory=dict)
    self_assign_calls: dict[str, tuple[str, dict[str, str], int]] = field(default_factory=dict)
    returns_call: list[str] = field(default_factory=list)
    loops: list[LoopFact] = field(default_factory=list)
    returns_aux: bool = False
    delegates: list[tuple[str, str]] = field(default_factory=list)
    #: the annotation of a local bound from the model's HF config (``config: Qwen3VLMoeConfig =
    #: vllm_config.model_config.hf_config``), as written
    config_annotation: str | None = None
    #: ``module.name`` of each absolute ``from module import name`` in the body (small
    #: protocol methods only): what the method needs at run time
    imports: list[str] = field(default_factory=list)
    #: ``forward`` returns what ``super().forward(...)`` returned, unchanged (directly or through
    #: one local name): the class before it on the MRO decides what it returns
    returns_super: bool = False
    #: ``__init__`` only: its parameters after ``self`` in order, each with its default's text
    #: (None: no default)
    params: list[tuple[str, str | None]] = field(default_factory=list)
    #: ``__init__`` only: the ``super().__init__(...)`` call's positional and keyword argument
    #: texts, or None when it makes none
    super_init: tuple[list[str], dict[str, str]] | None = None
    #: ``__init__`` only: the ``self.<m>(...)`` methods it calls in its body
    self_calls: list[str] = field(default_factory=list)
    #: what the method gives back (see :class:`ReturnsFact`), to follow it as a class decorator
    gives: ReturnsFact | None = None
    #: small protocol methods only: the callees it calls, as written (``self.model.set_x``)
    calls: list[str] = field(default_factory=list)
    #: the setters only (:data:`_BRANCH_METHODS`): for each branch of an ``if`` in the body that
    #: stores an attribute, ``(line, attributes the branch stores a parameter on, attributes the
    #: branch stores, attributes stored on the way to and in the branch)``
    branch_stores: list[tuple[int, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = \
        field(default_factory=list)


@cacheable
@dataclass(slots=True)
class AttrFact:
    """A class-body attribute: ``name = value`` (``has_value``) or ``name: T`` (annotation only,
    which creates no attribute at run time). ``value`` is the value's source text, ``literal`` its
    value when it is a literal (``ast.literal_eval``-able), else None."""

    name: str
    line: int
    has_value: bool
    value: str | None = None
    literal: Any = None


@cacheable
@dataclass(slots=True)
class ClassFact:
    """A class statement. ``qualname`` is dotted within the module (``Outer.Inner`` or
    ``factory.<locals>.Cls`` for classes built inside a module-level function). ``bases`` are
    source texts as written (``nn.Module``, ``Generic[T]``, ``as_seq_cls_model(LlamaForCausalLM)``);
    ``keywords`` the class keywords (``metaclass=...``). ``empty`` is True when the body holds only
    a docstring and/or ``pass``/``...``. ``guarded``: defined inside ``if``/``try``. ``type_checking``:
    defined under ``if TYPE_CHECKING:`` (never exists at run time). ``factory``: for a class built
    inside a function, ``(function name, parameter names)``."""

    name: str
    qualname: str
    line: int
    bases: list[str]
    keywords: dict[str, str]
    decorators: list[str]
    methods: dict[str, MethodFact]
    attrs: dict[str, AttrFact]
    empty: bool
    guarded: bool = False
    type_checking: bool = False
    factory: tuple[str, list[str]] | None = None
    #: members removed after they were defined: ``del m`` in the body, ``del Cls.m`` or
    #: ``delattr(Cls, "m")`` after the class, as ``{member: (construct, line)}``
    removed: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: members changed after the class in a way the index cannot follow (``Cls.forward =
    #: other_function``, ``setattr(Cls, name, v)``), as ``(member or "*", construct, line)``
    unfollowable: list[tuple[str, str, int]] = field(default_factory=list)
    #: what its ``__init_subclass__`` changes on each subclass (``cls.forward = f``,
    #: ``setattr(cls, name, v)``), as ``(member or "*", construct, line)``
    subclass_changes: list[tuple[str, str, int]] = field(default_factory=list)
    #: for each of ``decorators``: None when it is not a call, else ``(number of positional
    #: arguments, keyword names)`` of the call (``@support_torch_compile(dynamic_arg_dims=...)``
    #: → ``(0, ["dynamic_arg_dims"])``)
    decorator_calls: list = field(default_factory=list)
    #: what its methods (any method, not only the detailed ones) write on the instance or on an
    #: object reached from it, for the members of :data:`INSTANCE_MEMBERS`, in statement order:
    #: ``(path after self, value text or "del", method, line)``; the path as Python reaches it
    #: through local aliases (``s = self; s.forward = f`` → ``forward``, ``m = self.model;
    #: m.layers = v`` → ``model.layers``); a member set under a computed name
    #: (``setattr(self, name, v)``) ends in ``*``; a fifth item tells whether the value reads one
    #: of the method's parameters (a setter handing on what it is given)
    instance_writes: list[tuple[str, str, str, int, bool]] = field(default_factory=list)


@cacheable
@dataclass(slots=True)
class FunctionFact:
    """A module-level function: its parameters and, when it returns a class it builds locally,
    that class's qualname (``returns_local_class``)."""

    name: str
    line: int
    params: list[str]
    returns_local_class: str | None = None
    returns_call: list[str] = field(default_factory=list)
    local_bindings: dict[str, Binding] = field(default_factory=dict)
    appends_bases: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    #: the values of its reachable ``return`` statements (short texts: a name as written,
    #: ``f(...)`` for a call, a constant's repr), and those of the functions nested in it by name
    returns: list[str] = field(default_factory=list)
    inner_returns: dict[str, list[str]] = field(default_factory=dict)
    #: what it gives back (see :class:`ReturnsFact`), to follow it as a class decorator
    gives: ReturnsFact | None = None


@cacheable
@dataclass(slots=True)
class ModuleSummary:
    """Everything the analysis reads about one module.

    ``module``: dotted module name (``vllm.model_executor.models.llama``). ``path``: POSIX path
    relative to the folder that contains ``vllm/``. ``error``: a one-line parse error (the other
    fields are then empty). ``bindings``: the final run-time binding of each module-level name
    (the later binding wins; names bound only under ``TYPE_CHECKING`` are absent, and listed in
    ``type_checking_names``). ``classes``: by qualname. ``extras``: facts from
    the extractors (see :class:`Extractor`), keyed by extractor name. ``cond_bindings`` (run time) and
    ``tc_cond_bindings`` (under ``TYPE_CHECKING``): for each name bound under an ``if`` test, every
    binding of it in statement order with its :attr:`Binding.conds` (bindings in ``except``
    handlers left out), so that a resolver that can evaluate the tests picks the binding that
    runs (:class:`auditor.index.resolve.Resolver`, ``conditions``).
    """

    module: str
    path: str
    is_package: bool
    error: str | None = None
    bindings: dict[str, Binding] = field(default_factory=dict)
    alt_bindings: dict[str, list[Binding]] = field(default_factory=dict)
    type_checking_names: set[str] = field(default_factory=set)
    tc_bindings: dict[str, Binding] = field(default_factory=dict)
    earlier: dict[str, list[Binding]] = field(default_factory=dict)
    classes: dict[str, ClassFact] = field(default_factory=dict)
    functions: dict[str, FunctionFact] = field(default_factory=dict)
    dunder_all: list[str] | None = None
    #: changes to ``__all__`` after (or instead of) a literal, which the index does not follow
    #: (``__all__.append(X)``, ``__all__ += [...]``, ``__all__ = computed()``), as ``(construct,
    #: line)``: a star import of this module may then bind any name it binds
    all_changes: list[tuple[str, int]] = field(default_factory=list)
    lazy_map: dict[str, str] = field(default_factory=dict)
    #: the module replaces itself at import by a lazy module (``sys.modules[__name__] =
    #: _LazyModule(...)``, as transformers' packages do), whose attribute access imports what the
    #: ``TYPE_CHECKING`` imports name
    lazy_self: bool = False
    extras: dict[str, Any] = field(default_factory=dict)
    cond_bindings: dict[str, list[Binding]] = field(default_factory=dict)
    tc_cond_bindings: dict[str, list[Binding]] = field(default_factory=dict)
    #: ``from M import *`` statements in order, as ``(absolute M, line)``: a later star import
    #: rebinds every public name M has
    stars: list[tuple[str, int]] = field(default_factory=list)
    #: bindings of module-level names the index cannot follow, by name (``"*"``: any name), as
    #: ``(construct, line, ordered)``: ``ordered`` when the construct runs at ``line`` of the
    #: module's import (it overrides only the bindings before it), else it may run at any time
    #: (``global X`` in a function, ``globals()[k] = v`` in a function)
    unfollowable: dict[str, list[tuple[str, int, bool]]] = field(default_factory=dict)
    #: ``(line, text)`` of an unconditional module-level ``raise``: importing the module fails
    raises_at: tuple[int, str] | None = None
    #: module-level changes to the members of a class this module does not define
    #: (``llama.LlamaModel.forward = f``, ``del Imported.m``, ``setattr(Imported, "m", v)``), as
    #: ``(dotted head as written, member or "*", construct, line)``
    foreign_changes: list[tuple[str, str, str, int]] = field(default_factory=list)
    #: changes to the members of a class made in the body of a module-level function (they run
    #: when it is called), as ``(dotted head as written, member or "*", construct, line, function
    #: name)``; heads that are the function's parameters or locals are left out
    deferred_changes: list[tuple[str, str, str, int, str]] = field(default_factory=list)
    #: calls that may change a container reached through a dotted name (``R.register_model("X",
    #: ...)``, ``R.update(...)``) and item writes through one (``R.models["X"] = ...``, ``del
    #: R[k]``), at module level or in a module-level function, as ``(dotted head, method or
    #: "__setitem__"/"__delitem__", first argument or key when it is a string constant else None,
    #: construct, line, function name or None)``; heads that are ``self``, ``cls`` or the
    #: function's own names are left out
    container_changes: list[tuple[str, str, Any, str, int, str | None]] = field(default_factory=list)
    #: the imports made inside the scopes that :attr:`deferred_changes` names other than the
    #: module-level functions (methods, nested functions: ``Patcher.__init__``,
    #: ``outer.<locals>.inner``), by scope label: what a change's head means there
    scope_bindings: dict[str, dict[str, Binding]] = field(default_factory=dict)
    #: the top-level statements whose run may make importing the module raise, in order
    #: (:func:`auditor.index.importsteps.import_steps`); None when the module was not read as
    #: this interpreter parses it (a parse error, a grammar newer than the interpreter's)
    import_steps: list[tuple] | None = None


def module_name_for(path: str) -> tuple[str, bool]:
    """Map a POSIX path (``vllm/a/b.py`` or ``vllm/a/__init__.py``) to ``(dotted name, is_package)``."""
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Absolute module for ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name or ""
    pkg_parts = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        pkg_parts = pkg_parts[: len(pkg_parts) - (level - 1)]
    base = ".".join(pkg_parts)
    if name:
        return f"{base}.{name}" if base else name
    return base


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _text(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every node ast produces
        return "<expr>"


def _construct(node: ast.AST) -> str:
    """The text of ``node`` as a finding quotes it (at most 100 characters)."""
    return _text(node)[:100]


def _is_stub_body(body: list[ast.stmt]) -> bool:
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring or bare ``...``
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            if dotted(exc) == "NotImplementedError":
                continue
        return False
    return True


def _raises_only(body: list[ast.stmt]) -> bool:
    """True when the first statement after the docstring, ``pass`` and ``...`` is a ``raise``:
    calling the function always raises."""
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) or isinstance(stmt, ast.Pass):
            continue
        return isinstance(stmt, ast.Raise)
    return False


def _is_empty_class_body(body: list[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Pass):
            continue
        return False
    return True


def _is_type_checking(test: ast.expr) -> bool:
    d = dotted(test)
    return d in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _is_self_attr(node: ast.AST, attr: str | None = None) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and (attr is None or node.attr == attr)
    )


def _mentions(node: ast.AST, attr: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == attr for n in ast.walk(node))


def _loop_fact(loop: ast.For) -> LoopFact | None:
    """Describe ``loop`` if it iterates a model's decoder layers, else None."""
    it = loop.iter
    if not (_mentions(it, "layers") or _mentions(it, "start_layer") or _mentions(it, "end_layer")):
        return None
    index_var = None
    index_kind = None
    enum_start = None
    inner = it
    if isinstance(it, ast.Call) and dotted(it.func) == "enumerate":
        index_kind = "enumerate"
        if isinstance(loop.target, ast.Tuple) and loop.target.elts and isinstance(
            loop.target.elts[0], ast.Name
        ):
            index_var = loop.target.elts[0].id
        for kw in it.keywords:
            if kw.arg == "start":
                enum_start = _text(kw.value)
        if len(it.args) > 1:
            enum_start = _text(it.args[1])
        inner = it.args[0] if it.args else it
    elif isinstance(it, ast.Call) and dotted(it.func) == "range":
        index_kind = "range"
        if isinstance(loop.target, ast.Name):
            index_var = loop.target.id
    over_slice = False
    if isinstance(inner, ast.Call) and (dotted(inner.func) or "").endswith("islice"):
        over_slice = True
    elif isinstance(inner, ast.Subscript) and isinstance(inner.slice, ast.Slice):
        over_slice = True
    elif index_kind == "range":
        over_slice = True
    captures = False
    capture_list = None
    mixin = False
    for node in ast.walk(loop):
        if isinstance(node, ast.Call):
            fname = dotted(node.func) or ""
            if fname.endswith("_maybe_add_hidden_state"):
                if not captures:
                    first = node.args[0] if node.args else None
                    capture_list = first.id if isinstance(first, ast.Name) else "?"
                captures, mixin = True, True
        if isinstance(node, ast.If):
            t = node.test
            if (
                isinstance(t, ast.Compare)
                and any(isinstance(op, ast.In) for op in t.ops)
                and any(_mentions(c, "aux_hidden_state_layers") for c in t.comparators)
            ):
                appends = [n for b in node.body for n in ast.walk(b)
                           if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append"]
                if appends:
                    if not captures:
                        capture_list = dotted(appends[0].func.value) or "?"
                    captures = True
    return LoopFact(
        line=loop.lineno,
        index_var=index_var,
        index_kind=index_kind,
        enumerate_start=enum_start,
        over_slice=over_slice,
        captures=captures,
        uses_mixin_helper=mixin,
        over_layers=_mentions(it, "layers"),
        capture_list=capture_list,
        iter_names=tuple(sorted({n.id for n in ast.walk(it) if isinstance(n, ast.Name)})),
    )


def _short(node: ast.AST) -> str:
    """Cheap display text: a dotted name as written, a call's callee with ``(...)``, else the
    node type (full unparsing of every value costs more than parsing the module)."""
    d = dotted(node)
    if d is not None:
        return d
    if isinstance(node, ast.Call):
        return f"{_short(node.func)}(...)"
    if isinstance(node, ast.Constant):
        return repr(node.value)[:80]
    return f"<{type(node).__name__}>"


_TERMINATORS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
#: statements that hold statements
_COMPOUND = tuple(getattr(ast, n) for n in ("If", "For", "AsyncFor", "While", "With", "AsyncWith", "Try", "TryStar",
                                             "FunctionDef", "AsyncFunctionDef", "ClassDef", "Match") if hasattr(ast, n))


def _const_truth(test: ast.expr) -> bool | None:
    """The truth of an ``if``/``while`` test that is a constant (``False``, ``0``, ``not True``),
    or None when it is not constant."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Constant):
        return not test.operand.value
    return None


def _prune_block(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for st in body:
        if isinstance(st, ast.If) and _const_truth(st.test) is not None:
            out.extend(_prune_block(st.body if _const_truth(st.test) else st.orelse))
            if out and isinstance(out[-1], _TERMINATORS):
                break
            continue
        if isinstance(st, ast.While) and _const_truth(st.test) is False:
            out.extend(_prune_block(st.orelse))
            continue
        if isinstance(st, _COMPOUND):
            _prune_children(st)
        out.append(st)
        if isinstance(st, _TERMINATORS):
            break  # what follows in this block never runs
    return out


def _prune_children(st: ast.stmt) -> None:
    for fld in ("body", "orelse", "finalbody"):
        sub = getattr(st, fld, None)
        if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
            new = _prune_block(sub)
            if not new and fld == "body":
                new = [ast.Pass(lineno=st.lineno, col_offset=st.col_offset, end_lineno=st.lineno,
                                end_col_offset=st.col_offset)]
            setattr(st, fld, new)
    for h in getattr(st, "handlers", ()) or ():
        h.body = _prune_block(h.body) or [ast.Pass(lineno=h.lineno, col_offset=h.col_offset)]
    for c in getattr(st, "cases", ()) or ():
        c.body = _prune_block(c.body) or [ast.Pass(lineno=st.lineno, col_offset=st.col_offset)]


def _may_catch(handler: ast.ExceptHandler, raised: ast.Raise) -> bool:
    """False only when ``raised`` raises a builtin exception class by name (``raise KeyError``,
    ``raise KeyError(...)``) and every type the handler names is a builtin exception class that
    is not among its bases (Python's own exception hierarchy); True otherwise (a bare
    ``except:``, a name the module may bind, a computed type). The builtin names are taken as
    the builtins, as elsewhere in the summary."""
    import builtins

    exc = raised.exc.func if isinstance(raised.exc, ast.Call) else raised.exc
    cls = getattr(builtins, exc.id, None) if isinstance(exc, ast.Name) else None
    if not (isinstance(cls, type) and issubclass(cls, BaseException)) or handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for t in types:
        caught = getattr(builtins, t.id, None) if isinstance(t, ast.Name) else None
        if not (isinstance(caught, type) and issubclass(caught, BaseException)) or issubclass(cls, caught):
            return True
    return False


def _first_raise(body: list[ast.stmt]) -> ast.Raise | None:
    """The ``raise`` that running the (pruned) block always reaches, else None: a ``raise`` of the
    block itself, or one that a statement of it always propagates: the body of a class statement
    (the class is built when the statement runs), a ``finally`` block, or the body of a ``try``
    whose handlers that may catch it (:func:`_may_catch`) all raise too. A ``with`` body is left out: its context manager may
    swallow the exception."""
    for st in body:
        if isinstance(st, ast.Raise):
            return st
        if isinstance(st, ast.ClassDef):
            found = _first_raise(st.body)
        elif isinstance(st, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            found = _first_raise(st.finalbody)
            if found is None:
                inner = _first_raise(st.body)
                catching = [h for h in st.handlers if inner is None or _may_catch(h, inner)]
                if inner is not None and all(_first_raise(h.body) is not None for h in catching):
                    found = next((r for h in catching for r in [_first_raise(h.body)] if r.exc is not None), inner)
        else:
            found = None
        if found is not None:
            return found
    return None


def prune_dead_code(tree: ast.Module) -> ast.Module:
    """Remove, in place, the statements of ``tree`` that never run, so that every later reading
    (the summary and the extractors) sees only code that executes: what follows an unconditional
    ``return``/``raise``/``continue``/``break`` in the same block, the false branch of an ``if``
    whose test is a constant (``if False:``, ``if 0:``, ``if not True:``), and ``while False:``
    bodies. Lines are kept (nodes are dropped, never renumbered).

    Args:
        tree: a parsed module.

    Returns:
        The same module object, pruned.
    """
    tree.body = _prune_block(tree.body)
    return tree


def _iter_stmts(body: list[ast.stmt]):
    """Every statement in ``body``, recursively through compound statements, but not into
    nested functions or classes."""
    stack = list(reversed(body))
    while stack:
        st = stack.pop()
        yield st
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for fld in ("body", "orelse", "finalbody"):
            sub = getattr(st, fld, None)
            if sub:
                stack.extend(reversed(sub))
        for h in getattr(st, "handlers", ()) or ():
            stack.extend(reversed(h.body))
        for c in getattr(st, "cases", ()) or ():
            stack.extend(reversed(c.body))


#: names that are a method's own (its instance, its class)
_OWN = frozenset({"self", "cls"})


class _Locals:
    """The names local to a function scope, worked out on first use (most heads are ``self``):
    its ``params``, what its statements (``stmts``) assign, loop over or bind with ``with ...
    as`` (less its ``global`` names), and ``self``/``cls``; ``outer``: the names of the
    enclosing function scopes."""

    __slots__ = ("stmts", "params", "outer", "_names")

    def __init__(self, stmts: list[ast.stmt], params: set[str], outer=frozenset()):
        self.stmts, self.params, self.outer, self._names = stmts, params, outer, None

    def __contains__(self, name: str) -> bool:
        if self._names is None:
            local = set(self.params)
            glob: set[str] = set()
            for st in self.stmts:
                if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
                    for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                        if isinstance(t, ast.Name):
                            local.add(t.id)
                        else:
                            local.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name)
                                         and isinstance(n.ctx, ast.Store))
                elif isinstance(st, (ast.With, ast.AsyncWith)):
                    local.update(n.id for i in st.items if i.optional_vars is not None
                                 for n in ast.walk(i.optional_vars) if isinstance(n, ast.Name))
                elif isinstance(st, ast.Global):
                    glob.update(st.names)
            self._names = (local - glob) | _OWN
        return name in self._names or name in self.outer


def _head_of(node: ast.AST) -> str:
    """The head of a member change as written: a dotted name, ``getattr(X, "a")`` as ``X.a``,
    else the expression's text (``getattr(llama, NAME)``: an object computed at run time)."""
    d = dotted(node)
    if d is not None:
        return d
    if isinstance(node, ast.Call) and dotted(node.func) == "getattr" and len(node.args) >= 2:
        key = node.args[1]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return f"{_head_of(node.args[0])}.{key.value}"
    return _text(node)[:100]


def _subclass_hook_changes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, str, int]]:
    """The changes an ``__init_subclass__`` makes to the class it is called for (its first
    parameter: ``cls.forward = f``, ``setattr(cls, ...)``, ``del cls.m``), as ``(member or "*"
    when computed, text, line)``."""
    params = fn.args.posonlyargs + fn.args.args
    if not params:
        return []
    me = params[0].arg
    out = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name) \
                and n.value.id == me:
            out.append((n.attr, _text(n)[:60], n.lineno))
        elif isinstance(n, ast.Call) and dotted(n.func) in ("setattr", "delattr", "type.__setattr__") and n.args \
                and isinstance(n.args[0], ast.Name) and n.args[0].id == me:
            key = n.args[1] if len(n.args) > 1 else None
            member = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "*"
            out.append((member, _text(n)[:60], n.lineno))
    return out


def _new_returns_other(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The first ``return`` value of a ``__new__`` that may not be an instance of the class it is
    called for (its first parameter), as text; None when every ``return`` gives
    ``super().__new__(cls, ...)`` or ``object.__new__(cls, ...)``, directly or through a local
    name or an attribute of ``cls`` assigned one (the singleton form ``cls._instance``)."""
    params = fn.args.posonlyargs + fn.args.args
    if not params:
        return "?"
    me = params[0].arg

    def makes_own(v: ast.AST | None) -> bool:
        if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "__new__"):
            return False
        owner = v.func.value
        if not (isinstance(owner, ast.Call) and dotted(owner.func) == "super" or dotted(owner) == "object"):
            return False
        return bool(v.args) and isinstance(v.args[0], ast.Name) and v.args[0].id == me

    own: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and makes_own(n.value):
            own.update(_text(tg) for tg in n.targets if isinstance(tg, (ast.Name, ast.Attribute)))
    for n in ast.walk(fn):
        if isinstance(n, ast.Return):
            if n.value is None or not (makes_own(n.value) or _text(n.value) in own):
                return _text(n.value)[:60] if n.value is not None else "None"
    return None


_DOTTED_TEXT = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
#: the calls that run text as code (``types.FunctionType(code, globals)`` makes a function of a
#: code object: calling it runs that code)
_RUNS_TEXT = frozenset({"exec", "eval", "builtins.exec", "builtins.eval", "types.FunctionType",
                        "types.LambdaType", "runpy.run_path", "runpy.run_module"})
#: the calls that make a caller of a method named by a string (``operator.methodcaller("__delattr__",
#: "m")(Cls)`` deletes a member): one whose name is a dunder or not a constant is taken as code run
_CALLS_BY_NAME = frozenset({"operator.methodcaller"})
#: the calls of :data:`_RUNS_TEXT` and :data:`_CALLS_BY_NAME` whose string argument is no code
#: (a path, a module or a method name)
_RUNS_NO_TEXT = frozenset({"runpy.run_path", "runpy.run_module"}) | _CALLS_BY_NAME
#: the calls that give back a module's object by its name (``__import__(__name__, fromlist=...)``,
#: ``importlib.import_module(__name__)``, ``sys.modules.get(__name__)``)
_MODULE_BY_NAME = frozenset({"sys.modules.get", "importlib.import_module", "__import__", "builtins.__import__",
                             "importlib.__import__"})
#: what :meth:`_Summarizer._namespaces` records as the head of a change made by text run as code
#: (any object the module reaches may be changed)
RUNS_CODE = "<text run as code>"
#: what the head of a member change made through a ``for`` target over an iterable computed at
#: run time starts with (``for c in get_classes(): c.forward = f`` → ``<items of> get_classes()``):
#: the items are any objects that iterable gives
ITEMS_OF = "<items of> "
#: dictionary methods that change the dictionary they are called on
_DICT_CHANGES = frozenset({"update", "setdefault", "pop", "clear", "__setitem__", "__delitem__", "popitem"})


def _root_name(node: ast.AST) -> str | None:
    """The name an attribute chain starts from (``self`` of ``self.__class__.forward``), or None."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _ran_text(call: ast.Call) -> str | None:
    """The source text an ``exec``/``eval`` call runs when it is a constant (or the constant
    compiled by ``compile(text, ...)``), else None."""
    arg = call.args[0] if call.args else None
    if isinstance(arg, ast.Call) and dotted(arg.func) in ("compile", "builtins.compile") and arg.args:
        arg = arg.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def _names_in(tree: ast.AST) -> set[str]:
    """Every name a piece of code mentions or binds: names, ``global`` names, what its imports
    bind, the functions and classes it defines; ``"*"`` when it star-imports."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update("*" if a.name == "*" else a.asname or a.name.split(".")[0] for a in n.names)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
    return out


def _dict_owner(node: ast.AST) -> ast.AST | None:
    """``X`` of ``X.__dict__`` or ``vars(X)`` (a namespace written through), else None."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    if isinstance(node, ast.Call) and dotted(node.func) == "vars" and len(node.args) == 1:
        return node.args[0]
    return None


#: method names of a call that may change the container it is called on
_CHANGING_CALLS = frozenset({"update", "pop", "setdefault", "clear", "popitem", "__setitem__", "__delitem__",
                             "append", "extend", "insert", "remove"})


def container_change(st: ast.stmt) -> tuple[str, str, Any] | None:
    """``(dotted head, method, first argument or key when a string constant)`` when statement
    ``st`` is a call that may change the container it is called on (a method of
    :data:`_CHANGING_CALLS` or one whose name starts with ``register``) or an item write or delete
    through a dotted name; else None."""
    def key(node):
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None

    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Attribute):
        f = st.value.func
        head = dotted(f.value)
        if head is not None and (f.attr in _CHANGING_CALLS or f.attr.startswith("register")):
            return head, f.attr, key(st.value.args[0]) if st.value.args else None
    if isinstance(st, (ast.Assign, ast.AugAssign, ast.Delete)):
        targets = st.targets if isinstance(st, (ast.Assign, ast.Delete)) else [st.target]
        for t in targets:
            if isinstance(t, ast.Subscript) and dotted(t.value) is not None:
                return dotted(t.value), "__delitem__" if isinstance(st, ast.Delete) else "__setitem__", key(t.slice)
    return None


def _return_entry(value: ast.expr | None, conds: tuple) -> tuple:
    """One ``return`` for :class:`ReturnsFact`: ``(kind, text, args, conds)``."""
    if value is None:
        return ("other", "None", (), conds)
    d = dotted(value)
    if d is not None:
        return ("name", d, (), conds)
    if isinstance(value, ast.Call) and dotted(value.func) is not None:
        args = tuple("?" if isinstance(a, ast.Starred) else (dotted(a) or "?") for a in value.args)
        return ("call", dotted(value.func), args, conds)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Call) and dotted(value.func.func) is not None:
        # ``return REGISTRY.register(...)(cls)``: a decorator factory applied in place
        args = tuple("?" if isinstance(a, ast.Starred) else (dotted(a) or "?") for a in value.args)
        inner = value.func
        return ("decorate", dotted(inner.func), args, conds, (len(inner.args), [k.arg or "**" for k in inner.keywords]))
    return ("other", _short(value), (), conds)


def _gather_returns(body: list[ast.stmt], conds: tuple, out: list, inner: dict, depth: int) -> bool:
    """Record the returns of ``body`` run under ``conds`` into ``out`` (and the functions it
    defines into ``inner``); True when the block always ends in a ``return`` or ``raise``."""
    for st in body:
        if isinstance(st, ast.Return):
            out.append(_return_entry(st.value, conds))
            return True
        if isinstance(st, ast.Raise):
            return True
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if depth < 2:
                inner[st.name] = returns_fact(st, depth + 1)
            else:
                inner.pop(st.name, None)
        elif isinstance(st, ast.ClassDef):
            inner.pop(st.name, None)
        elif isinstance(st, ast.If):
            test = _text(st.test)
            done_true = _gather_returns(st.body, conds + ((test, True),), out, inner, depth)
            done_false = _gather_returns(st.orelse, conds + ((test, False),), out, inner, depth)
            if done_true and done_false:
                return True
            if done_true:
                conds = conds + ((test, False),)  # what follows runs only when the test was false
            elif done_false:
                conds = conds + ((test, True),)
        elif isinstance(st, _COMPOUND):
            for fld in ("body", "orelse", "finalbody"):
                sub = getattr(st, fld, None)
                if sub and isinstance(sub[0], ast.stmt):
                    _gather_returns(sub, conds, out, inner, depth)
            for h in getattr(st, "handlers", ()) or ():
                _gather_returns(h.body, conds, out, inner, depth)
            for c in getattr(st, "cases", ()) or ():
                _gather_returns(c.body, conds, out, inner, depth)
    return False


def _passes_own_arguments(fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call) -> bool:
    """True when ``call`` hands on exactly the arguments ``fn`` was called with: ``f(*args,
    **kwargs)`` with ``fn``'s own ``*args``/``**kwargs``, or its positional parameters in order."""
    a = fn.args
    own = [p.arg for p in a.posonlyargs + a.args]
    star = [f"*{a.vararg.arg}"] if a.vararg else []
    got = [("*" + x.value.id) if isinstance(x, ast.Starred) and isinstance(x.value, ast.Name)
           else x.id if isinstance(x, ast.Name) else "?" for x in call.args]
    kws = [k.value.id if k.arg is None and isinstance(k.value, ast.Name) else "?" for k in call.keywords]
    if got != own + star or a.kwonlyargs:
        return False
    return kws == ([a.kwarg.arg] if a.kwarg else [])


def returns_fact(fn: ast.FunctionDef | ast.AsyncFunctionDef, depth: int = 0) -> ReturnsFact:
    """What ``fn`` gives back (see :class:`ReturnsFact`), read from its statements.

    Args:
        fn: a function or method definition (already pruned of dead code).
        depth: how deeply ``fn`` is nested in the function being described (its own nested
            functions are described up to two levels).

    Returns:
        The fact (an ``async def`` gives back a coroutine: recorded as one ``"other"`` return).
    """
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults = {p.arg: _short(d) for p, d in zip(pos[len(pos) - len(a.defaults):], a.defaults)}
    fact = ReturnsFact(params=[p.arg for p in pos], defaults=defaults)
    if depth:
        fact.calls = frozenset(d for n in ast.walk(fn) if isinstance(n, ast.Call) and (d := dotted(n.func)))
        fact.passes = frozenset(d for n in ast.walk(fn) if isinstance(n, ast.Call) and (d := dotted(n.func))
                                and _passes_own_arguments(fn, n))
    if isinstance(fn, ast.AsyncFunctionDef):
        fact.returns.append(("other", "a coroutine", (), ()))
        return fact
    if not _gather_returns(fn.body, (), fact.returns, fact.inner, depth):
        fact.returns.append(("other", "None", (), ()))  # the end of the body is reachable
    return fact


_REFERENCE_METHODS = frozenset(
    {
        "set_aux_hidden_state_layers",
        "get_eagle3_aux_hidden_state_layers",
        "get_eagle3_default_aux_hidden_state_layers",
        "get_language_model",
        "_maybe_add_hidden_state",
        "_set_aux_hidden_state_layers",
    }
)


#: the methods whose branches :attr:`MethodFact.branch_stores` describes
_BRANCH_METHODS = frozenset({"set_aux_hidden_state_layers", "_set_aux_hidden_state_layers",
                             "set_eagle3_layers_to_capture"})


def _stores(stmts, params: set[str]) -> tuple[set[str], set[str]]:
    """``(attributes a parameter is stored on, every attribute stored)`` by the assignments
    among ``stmts``."""
    with_param: set[str] = set()
    every: set[str] = set()
    for st in stmts:
        if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and st.value is not None:
            uses = any(isinstance(n, ast.Name) and n.id in params for n in ast.walk(st.value))
            for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    if isinstance(e, ast.Attribute):
                        every.add(e.attr)
                        if uses:
                            with_param.add(e.attr)
    return with_param, every


def _branch_stores(body: list[ast.stmt], params: set[str], above: frozenset, out: list) -> None:
    """Fill ``out`` (:attr:`MethodFact.branch_stores`) for the ``if`` branches of ``body``, the
    statements stored directly in the enclosing blocks being ``above``."""
    here = above | _stores(body, params)[1]
    for st in body:
        if not isinstance(st, ast.If):
            continue
        for branch in (st.body, st.orelse):
            if not branch:
                continue
            inner = [n for b in branch for n in _iter_stmts([b])]
            with_param, every = _stores(inner, params)
            if every:
                out.append((branch[0].lineno, tuple(sorted(with_param)), tuple(sorted(every)),
                            tuple(sorted(every | here))))
            _branch_stores(branch, params, here, out)


def _is_super_call(node: ast.AST, method: str) -> bool:
    """``super().<method>(...)``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method
            and isinstance(node.func.value, ast.Call) and dotted(node.func.value.func) == "super")


def _init_facts(fn: ast.FunctionDef | ast.AsyncFunctionDef, mf: MethodFact) -> None:
    """Fill ``params``, ``super_init`` and ``self_calls`` of an ``__init__``'s fact."""
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    mf.params = [(p.arg, _short(d) if d is not None else None) for p, d in zip(pos, defaults)][1:]
    mf.params += [(p.arg, _short(d) if d is not None else None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if mf.super_init is None and _is_super_call(node, "__init__"):
            mf.super_init = ([_short(x) for x in node.args], {k.arg: _short(k.value) for k in node.keywords if k.arg})
        elif isinstance(node.func.value, ast.Name) and node.func.value.id == "self" \
                and node.func.attr not in mf.self_calls:
            mf.self_calls.append(node.func.attr)


def _method_fact(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> MethodFact:
    mf = MethodFact(
        name=fn.name,
        line=fn.lineno,
        is_stub=_is_stub_body(fn.body),
        decorators=[_short(d) for d in fn.decorator_list],
        raises_only=_raises_only(fn.body),
    )
    mf.gives = returns_fact(fn)
    if fn.name in _BRANCH_METHODS:
        a = fn.args
        _branch_stores(fn.body, {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}, frozenset(), mf.branch_stores)
    if fn.name not in DETAILED_METHODS:
        # shallow: ``return X(...)`` in the body or one ``if``/``else`` level down (factories
        # such as ``_init_model``/``_build_model`` that build the inner model)
        # ``self.X = Callee(...)`` at the same depth (a helper ``__init__`` calls that builds the
        # inner model itself)
        for st in fn.body:
            for sub in [st] + (st.body + st.orelse if isinstance(st, ast.If) else []):
                if isinstance(sub, ast.Return) and isinstance(sub.value, ast.Call):
                    mf.returns_call.append(_short(sub.value.func))
                elif isinstance(sub, ast.Assign) and len(sub.targets) == 1 and _is_self_attr(sub.targets[0]) \
                        and isinstance(sub.value, ast.Call):
                    attr = sub.targets[0].attr
                    mf.self_assigns.setdefault(attr, _short(sub.value))
                    kw = {k.arg: (ast.unparse(k.value) if k.arg == "architectures" else _short(k.value))
                          for k in sub.value.keywords if k.arg}
                    mf.self_assign_calls.setdefault(attr, (_short(sub.value.func), kw, sub.lineno))
        return mf
    if fn.name == "__init__":
        _init_facts(fn, mf)
    if fn.name in _REFERENCE_METHODS:
        # small methods: every name and attribute they reference, and delegations
        names: set[str] = set()
        attrs: set[str] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                attrs.add(node.attr)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if _is_self_attr(owner):
                    mf.delegates.append((owner.attr, node.func.attr))
                elif isinstance(owner, ast.Call) and _is_self_attr(owner.func):
                    mf.delegates.append((owner.func.attr + "()", node.func.attr))
            if isinstance(node, ast.Call):
                mf.calls.append(_short(node.func))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mf.imports += [f"{node.module}.{a.name}" for a in node.names]
        mf.names = frozenset(names)
        mf.attrs = frozenset(attrs)
    aux_vars: set[str] = set()
    returns: list[ast.Return] = []
    super_vars: set[str] = set()
    for st in _iter_stmts(fn.body):
        if fn.name == "forward":
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                    and _is_super_call(st.value, fn.name):
                super_vars.add(st.targets[0].id)
            elif isinstance(st, ast.Return) and st.value is not None and (
                    _is_super_call(st.value, fn.name) or (isinstance(st.value, ast.Name) and st.value.id in super_vars)):
                mf.returns_super = True
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            value = st.value
            if value is None:
                continue
            if isinstance(st, ast.AnnAssign) and mf.config_annotation is None and isinstance(value, ast.Attribute) \
                    and value.attr == "hf_config":
                mf.config_annotation = _text(st.annotation)
            # ``self.start_layer, self.end_layer, self.layers = make_layers(...)``
            targets = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
            for t in targets:
                if _is_self_attr(t):
                    mf.self_assigns[t.attr] = _short(value)
                    if isinstance(value, ast.Call):
                        kw = {k.arg: (ast.unparse(k.value) if k.arg == "architectures" else _short(k.value))
                              for k in value.keywords if k.arg}
                        mf.self_assign_calls[t.attr] = (_short(value.func), kw, st.lineno)
                elif isinstance(t, ast.Subscript) and dotted(t.value) == "self.__dict__":
                    # ``self.__dict__["forward"] = f``: an instance attribute
                    for key in _attr_names(fn, t.slice):
                        mf.self_assigns[key] = _short(value)
                elif isinstance(t, ast.Name) and "aux" in t.id and isinstance(value, (ast.List, ast.ListComp)):
                    aux_vars.add(t.id)
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and dotted(st.value.func) == \
                "self.__dict__.update":
            mf.self_assigns["*"] = "self.__dict__.update(...)"  # any instance attribute
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and dotted(st.value.func) in (
                "setattr", "object.__setattr__", "self.__setattr__") and st.value.args:
            # ``setattr(self, "forward", f)``: an instance attribute, as ``self.forward = f``
            args = st.value.args if dotted(st.value.func) != "self.__setattr__" else [ast.Name("self")] + st.value.args
            if len(args) == 3 and isinstance(args[0], ast.Name) and args[0].id == "self":
                for key in _attr_names(fn, args[1]):
                    mf.self_assigns[key] = _short(args[2])
        elif isinstance(st, ast.Return):
            returns.append(st)
            if isinstance(st.value, ast.Call):
                mf.returns_call.append(_short(st.value.func))
        elif isinstance(st, ast.For) and fn.name == "forward":
            lf = _loop_fact(st)
            if lf is not None:
                mf.loops.append(lf)
    if fn.name == "forward" and mf.loops:
        _drop_reset_captures(fn, mf.loops)
        # the loop helpers the forward binds itself (a parameter, an assignment, an import in
        # its body): the loop calls those, not the module's
        helpers = {n for lf in mf.loops for n in lf.iter_names} - {"self"}
        if helpers:
            a = fn.args
            local = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None}
            for node in ast.walk(fn):
                if node is not fn:
                    local |= bound_by(node)
            for lf in mf.loops:
                lf.iter_local = tuple(sorted(set(lf.iter_names) & local))
    if fn.name == "forward":
        for st in returns:
            if isinstance(st.value, ast.Tuple):
                elts = st.value.elts
                hit = [e.id for e in elts[1:] if isinstance(e, ast.Name) and (e.id in aux_vars or "aux" in e.id)]
                if len(elts) >= 2 and hit:
                    mf.returns_aux = True
    return mf


def _attr_names(fn: ast.FunctionDef | ast.AsyncFunctionDef, key: ast.expr) -> list[str]:
    """The attribute names ``setattr(self, key, v)`` in ``fn`` may set: a string constant; the
    strings of a literal tuple or list that a ``for`` loops ``key`` over, when that loop is the
    only binding of the name in ``fn`` (vLLM 0.33.0 ``vllm/models/deepseek_v4/common/vl_model.py``:
    ``for name in ("image_start", ...): setattr(self, name, ...)``); else ``["*"]`` (any name)."""
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return [key.value]
    if isinstance(key, ast.Name):
        stores = [n for n in ast.walk(fn)
                  if isinstance(n, ast.Name) and n.id == key.id and not isinstance(n.ctx, ast.Load)]
        loops = [st for st in ast.walk(fn) if isinstance(st, ast.For) and isinstance(st.target, ast.Name)
                 and st.target.id == key.id and isinstance(st.iter, (ast.Tuple, ast.List))]
        if len(stores) == 1 and len(loops) == 1 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in loops[0].iter.elts):
            return [e.value for e in loops[0].iter.elts]
    return ["*"]


def _drop_reset_captures(fn: ast.FunctionDef | ast.AsyncFunctionDef, loops: list[LoopFact]) -> None:
    """A capture loop whose list is emptied again after the loop (``aux_hidden_states = []``, any
    rebinding to a value computed without the list, or ``aux_hidden_states.clear()`` in the
    statements of ``forward`` that follow it) captures nothing that ``forward`` can return: its
    ``captures`` is set False."""
    by_line = {lf.line: lf for lf in loops if lf.captures and lf.capture_list not in (None, "?")}
    live: list[LoopFact] = []
    for st in fn.body:
        lf = by_line.get(st.lineno) if isinstance(st, (ast.For, ast.AsyncFor)) else None
        if lf is not None:
            live.append(lf)
            continue
        for lf in live:
            name = lf.capture_list
            if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in st.targets) \
                    and not any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(st.value)):
                lf.captures, lf.reset_line = False, st.lineno  # ``remote + aux`` would keep what was captured
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and dotted(st.value.func) == f"{name}.clear":
                lf.captures, lf.reset_line = False, st.lineno


class _Summarizer:
    def __init__(self, module: str, path: str, is_package: bool, track_bases: bool = False, dynamic: bool = True,
                 walrus: bool = True, globals_stmt: bool = True, reflective: bool = True, namespace: bool = True,
                 self_rebound: bool = True):
        self.s = ModuleSummary(module=module, path=path, is_package=is_package)
        #: the source may rebind a method's ``self`` (:func:`_may_rebind_self`)
        self.self_rebound = self_rebound
        #: the source names ``setattr``/``delattr``/``__setattr__``/``__delattr__``/``__dict__``:
        #: look for them wherever they are, not only as statements (:meth:`_scopes`)
        self.reflective = reflective
        #: ``id()`` of the calls and attribute targets already recorded as member changes
        self._seen: set[int] = set()
        #: the source may bind names behind the index's back (``globals()``, ``vars()``,
        #: ``sys.modules``): walk the whole module for it (:meth:`_dynamic`)
        self.dynamic = dynamic
        #: the source holds ``:=``: look for walrus bindings at module scope
        self.walrus = walrus
        #: the source holds ``global``: look for ``global`` statements
        self.globals_stmt = globals_stmt
        #: the module assigns some ``__bases__``: record which functions append bases
        self.track_bases = track_bases
        #: the ``if`` tests around the statement being summarised (see :attr:`Binding.conds`)
        self.conds: tuple = ()
        self.in_handler = False
        #: the last line of the loop or ``match`` whose body is being summarised: a name bound
        #: there may be bound any number of times (or never), which the index does not follow
        self.loop_end: int | None = None
        #: module-level ``globals()[...] = v`` statements summarised as bindings
        self._handled: set[int] = set()
        self._all: dict[str, list[Binding]] = {}
        self._tc_all: dict[str, list[Binding]] = {}
        #: the source may write a namespace behind the index's back or run text as code (see
        #: :data:`_NAMESPACE`): walk every scope for it (:meth:`_namespaces`)
        self.namespace = namespace
        #: the class statements summarised, by ``id()`` of their node
        self._class_nodes: dict[int, ClassFact] = {}
        #: the module-level function definitions, by name (the last one)
        self._fn_nodes: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        #: module-level names assigned this module's object (``_me = sys.modules[__name__]``)
        self._self_names: set[str] = set()
        #: module-level names assigned this module's dictionary (``_d = sys.modules[__name__].__dict__``)
        self._self_dicts: set[str] = set()
        #: module-level ``for`` targets whose body is being summarised, with their iterables
        self.loop_iters: dict[str, ast.expr] = {}

    # -- module level -----------------------------------------------------------------
    def run(self, tree: ast.Module) -> ModuleSummary:
        """Summarise a parsed module (its statements in order)."""
        self._stmts(tree.body, guarded=False, type_checking=False)
        raising = _first_raise(tree.body)
        if raising is not None:
            self.s.raises_at = (raising.lineno, _short(raising.exc) if raising.exc is not None else "raise")
        self._dynamic(tree)
        if self.namespace:
            self._namespaces(tree)
        self._scopes(tree)
        for src, dest in ((self._all, self.s.cond_bindings), (self._tc_all, self.s.tc_cond_bindings)):
            for name, bs in src.items():
                if any(b.conds for b in bs):
                    dest[name] = bs
        return self.s

    def _mark(self, name: str, construct: str, line: int, ordered: bool = True) -> None:
        """Record a binding of ``name`` (``"*"``: any name) the index cannot follow."""
        self.s.unfollowable.setdefault(name, []).append((construct, line, ordered))

    def _dynamic(self, tree: ast.Module) -> None:
        """Bindings made behind the index's back, anywhere in the module: ``global X`` in a
        function, writes through ``globals()``/``vars()``, ``setattr`` on ``sys.modules[...]``, and
        walrus assignments in module-level expressions."""
        def is_globals(n: ast.AST) -> bool:
            # ``vars()``/``locals()`` are the module's namespace only at module level, a class body's
            # or a function's elsewhere: :meth:`_namespaces` tells them apart
            return isinstance(n, ast.Call) and not n.args and dotted(n.func) == "globals" \
                and id(n) not in self._handled

        if self.globals_stmt:  # statements only: ``global`` is one, and expressions are most of the nodes
            stack = list(tree.body)
            while stack:
                st = stack.pop()
                if isinstance(st, ast.Global):
                    for n in st.names:
                        self._mark(n, f"`global {n}` in a function (line {st.lineno})", st.lineno, False)
                elif isinstance(st, _COMPOUND):
                    for fld in ("body", "orelse", "finalbody"):
                        stack.extend(getattr(st, fld, None) or ())
                    for h in getattr(st, "handlers", ()) or ():
                        stack.extend(h.body)
                    for c in getattr(st, "cases", ()) or ():
                        stack.extend(c.body)
        for node in ast.walk(tree) if self.dynamic else ():
            if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load) and is_globals(node.value):
                key = node.slice
                name = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "*"
                self._mark(name, f"a write through {dotted(node.value.func)}() (line {node.lineno})", node.lineno,
                           False)
            elif isinstance(node, ast.Attribute) and is_globals(node.value) and node.attr in (
                    "update", "setdefault", "__setitem__", "pop", "popitem", "clear", "__delitem__"):
                self._mark("*", f"a write through {dotted(node.value.func)}() (line {node.lineno})", node.lineno,
                           False)
            elif isinstance(node, ast.Call) and dotted(node.func) in ("setattr", "delattr") and node.args \
                    and "sys.modules" in _text(node.args[0]):
                key = node.args[1] if len(node.args) > 1 else None
                name = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "*"
                self._mark(name, f"{dotted(node.func)}() on the module object (line {node.lineno})", node.lineno, False)
        # walrus at module scope (not in functions, lambdas or class bodies)
        stack = [st for st in tree.body if id(st) not in self._handled] if self.walrus else []
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name) and id(node) not in self._handled:
                self._mark(node.target.id, f"a walrus assignment (line {node.lineno})", node.lineno)
            stack.extend(ast.iter_child_nodes(node))

    def _canon(self, node: ast.AST) -> str | None:
        """The dotted name ``node`` spells, its first part followed through this module's
        bindings (``from importlib import import_module as im`` → ``importlib.import_module``,
        ``_mods = sys.modules`` → ``sys.modules``, ``import types as t`` → ``types``; a few steps at
        most); None when ``node`` is no dotted name."""
        d = dotted(node)
        for _ in range(4):
            if d is None:
                return None
            first, dot, rest = d.partition(".")
            b = self.s.bindings.get(first)
            if b is None:
                return d
            if b.kind == "import":
                head = f"{b.target[0]}.{b.target[1]}" if b.target[0] else b.target[1]
            elif b.kind == "module":
                head = b.target
            elif b.kind == "alias" and b.target.split(".")[0] != first:
                head = b.target
            else:
                return d
            if head == first:
                return d
            d = head + dot + rest
        return d

    def _runs_text_call(self, call: ast.Call) -> bool:
        """``call`` runs text or a code object as code: ``exec``/``eval`` (under any name this
        module binds them to, or handed to the call as an argument), ``getattr(builtins,
        "exec")(...)`` and ``vars(builtins)["exec"](...)`` (or a key computed at run time on
        builtins), ``types.FunctionType(code, ...)``."""
        fn = call.func
        if self._canon(fn) in _RUNS_TEXT:
            return True
        # ``functools.partial(exec, text)()``, ``map(eval, texts)``: exec or eval handed on
        if any(self._canon(a) in _RUNS_TEXT for a in call.args + [k.value for k in call.keywords]):
            return True
        if isinstance(fn, ast.Subscript):
            # ``vars(builtins)["exec"](...)``, ``builtins.__dict__[k](...)``, ``__builtins__["eval"](...)``
            owner = _dict_owner(fn.value)
            space = self._canon(owner) if owner is not None else self._canon(fn.value)
            if space in ("builtins", "__builtins__"):
                key = fn.slice
                return not isinstance(key, ast.Constant) or key.value in ("exec", "eval")
        if isinstance(fn, ast.Call) and dotted(fn.func) == "getattr" and len(fn.args) >= 2:
            obj, key = fn.args[0], fn.args[1]
            if isinstance(key, ast.Constant):
                return key.value in ("exec", "eval")
            return self._canon(obj) in ("builtins", "__builtins__")
        if isinstance(fn, ast.Attribute) and fn.attr in ("exec", "eval") and isinstance(fn.value, ast.Call) \
                and self._canon(fn.value.func) in _MODULE_BY_NAME:
            # ``importlib.import_module("built" + "ins").exec(...)``: a module found by its name
            arg = fn.value.args[0] if fn.value.args else None
            return not (isinstance(arg, ast.Constant) and arg.value not in ("builtins", "__builtins__"))
        if self._canon(fn) in _CALLS_BY_NAME:
            arg = call.args[0] if call.args else None
            return not (isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("__"))
        return False

    def _namespace_of(self, node: ast.AST, scope: str) -> str | None:
        """What ``node`` denotes when it is a namespace: ``"module"`` for this module's object
        (``sys.modules[__name__]``, ``sys.modules["<this module>"]``), ``"module-dict"`` for its
        dictionary (``globals()``, ``vars()``/``locals()`` at module level, ``vars(M)``,
        ``M.__dict__`` of the module object), ``"class-dict"`` for the namespace of the class body
        being run (``locals()``/``vars()`` in a class body, ``scope == "class"``); else None."""
        if isinstance(node, ast.Name):
            # a module-level name bound to this module (``_me = sys.modules[__name__]``, ``from .
            # import llama as _me`` in llama.py)
            b = self.s.bindings.get(node.id)
            if b is not None and (b.kind == "module" and b.target == self.s.module or b.kind == "import"
                                  and ".".join(b.target) == self.s.module or node.id in self._self_names):
                return "module"
            if node.id in self._self_dicts:
                return "module-dict"  # ``_d = sys.modules[__name__].__dict__``
            return None
        if isinstance(node, ast.Subscript) and self._canon(node.value) == "sys.modules":
            key = node.slice
            if isinstance(key, ast.Name) and key.id == "__name__" or (
                    isinstance(key, ast.Constant) and key.value == self.s.module):
                return "module"
            return None
        if isinstance(node, ast.Call) and self._canon(node.func) in _MODULE_BY_NAME and node.args:
            # ``sys.modules.get(__name__)``, ``importlib.import_module(__name__)``,
            # ``__import__(__name__, fromlist=[...])`` (without ``fromlist`` the top package: taken
            # as the module too, which can only make a verdict ``unknown``)
            key = node.args[0]
            if isinstance(key, ast.Name) and key.id == "__name__" or (
                    isinstance(key, ast.Constant) and key.value == self.s.module):
                return "module"
            return None
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            fn = dotted(node.func)
            if fn == "globals" or fn in ("locals", "vars") and scope == "module":
                return "module-dict"
            if fn in ("locals", "vars") and scope == "class":
                return "class-dict"
            return None
        owner = _dict_owner(node)
        if owner is not None and self._namespace_of(owner, scope) == "module":
            return "module-dict"
        return None

    def _namespaces(self, tree: ast.Module) -> None:
        """Changes the index cannot follow to a namespace, in every scope of the module: writes
        to this module's names through its module object or its dictionary
        (``sys.modules[__name__].X = v``, ``sys.modules[__name__].__dict__["X"] = v``,
        ``vars(sys.modules[__name__]).pop("X")``, ``locals()["X"] = v`` at module level), writes
        to a class body's namespace (``locals()``/``vars()`` there), ``self.__class__ = C`` in a
        method, and text run as code (``exec``/``eval``, of a constant or not). A module name so
        changed goes to :attr:`ModuleSummary.unfollowable` (ordered when the change runs with the
        module's import), a class member to the class's ``unfollowable``; text run as code also
        makes every class of this module, and (as :data:`RUNS_CODE`) every object it reaches,
        changed in a way not followed."""
        def key_of(node: ast.AST | None) -> str:
            return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "*"

        # ``exec``/``eval`` and the module-level names bound to them (``_run = exec``, ``from
        # builtins import exec as _run``)
        stack: list[tuple[ast.AST, str, ClassFact | None, str | None, str | None]] = \
            [(st, "module", None, None, None) for st in tree.body]
        while stack:
            node, scope, cf, me, label = stack.pop()
            line = getattr(node, "lineno", 0)
            ordered = scope == "module"
            if isinstance(node, ast.ClassDef):
                inner_cf = self._class_nodes.get(id(node))
                qual = f"{label}.{node.name}" if label else node.name
                for d in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                    stack.append((d, scope, cf, me, label))
                stack.extend((st, "class", inner_cf, None, qual) for st in node.body)
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                params = node.args.posonlyargs + node.args.args
                first = params[0].arg if params and scope == "class" else None
                sub = f"{label}.{node.name}" if label and not isinstance(node, ast.Lambda) else \
                    (label or getattr(node, "name", "<lambda>"))
                body = node.body if isinstance(node.body, list) else [node.body]
                stack.extend((st, "function", cf if scope == "class" else None, first, sub) for st in body)
                continue
            if isinstance(node, ast.Call) and self._runs_text_call(node):
                self._runs_code(node, scope, cf, label, _construct(node), line)
            elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                if node.attr == "__class__" and me is not None and isinstance(node.value, ast.Name) \
                        and node.value.id == me and cf is not None:
                    cf.unfollowable.append(("*", f"{_construct(node)} = ... (the instance's class replaced in a "
                                            "method)", line))
                elif self._namespace_of(node.value, scope) == "module":
                    self._seen.add(id(node))
                    self._mark(node.attr, f"`{_construct(node)}` (line {line}), a write through the module object",
                               line, ordered)
            elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
                kind = self._namespace_of(node.value, scope)
                if kind == "module-dict" and id(node.value) not in self._handled:
                    self._seen.add(id(node))
                    self._mark(key_of(node.slice), f"`{_construct(node)}` (line {line}), a write through the "
                               "module's namespace", line, ordered)
                elif kind == "class-dict" and cf is not None:
                    cf.unfollowable.append((key_of(node.slice), f"{_construct(node)} = ... (a write through the "
                                            "class body's namespace)", line))
            elif isinstance(node, ast.Call) and dotted(node.func) in ("setattr", "delattr", "builtins.setattr",
                                                                      "builtins.delattr") and node.args \
                    and self._namespace_of(node.args[0], scope) == "module":
                self._seen.add(id(node))
                self._mark(key_of(node.args[1] if len(node.args) > 1 else None),
                           f"`{_construct(node)}` (line {line}), a write through the module object", line, ordered)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _DICT_CHANGES:
                kind = self._namespace_of(node.func.value, scope)
                key = key_of(node.args[0]) if node.args and node.func.attr not in ("update", "clear") else "*"
                if kind == "module-dict":
                    self._seen.add(id(node))
                    self._mark(key, f"`{_construct(node)}` (line {line}), a write through the module's namespace",
                               line, ordered)
                elif kind == "class-dict" and cf is not None:
                    cf.unfollowable.append((key, f"{_construct(node)} (a write through the class body's namespace)",
                                            line))
            stack.extend((c, scope, cf, me, label) for c in ast.iter_child_nodes(node))

    def _runs_code(self, call: ast.Call, scope: str, cf: ClassFact | None, label: str | None, construct: str,
                   line: int) -> None:
        """Record what ``exec``/``eval`` of ``call`` (in ``scope``, class ``cf``, scope label
        ``label``) may change: the names its text mentions (every name when it is not a constant
        or does not parse), the members of every class of this module and of the objects it
        reaches (:data:`RUNS_CODE`). ``call`` may also be a ``runpy`` call or a method caller:
        what they run is not in their text."""
        text = _ran_text(call) if isinstance(call, ast.Call) and self._canon(call.func) not in _RUNS_NO_TEXT else None
        names: set[str] = {"*"}
        if text is not None:
            try:
                names = _names_in(ast.parse(text))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                names = {"*"}
        what = f"`{construct}` (line {line}), which runs text as code"
        self._seen.add(id(call))
        for n in sorted(names):
            self._mark(n, what, line, scope == "module")
        if cf is not None:
            cf.unfollowable.append(("*", f"{construct} (text run as code)", line))
        for c in self.s.classes.values():
            if c is not cf and ("*" in names or c.name in names):
                c.unfollowable.append(("*", f"{construct} (text run as code)", line))
        # what it may change elsewhere: any object the module reaches (text not known), else each
        # object the text names
        for head in ([RUNS_CODE] if "*" in names else sorted(names)):
            if scope == "function" and label is not None:
                self.s.deferred_changes.append((head, "*", construct, line, label))
            else:
                self.s.foreign_changes.append((head, "*", construct, line))

    def _class_for(self, name: str) -> ClassFact | None:
        """The class this module's name ``name`` is bound to now, when it is defined here
        (through plain aliases ``Alias = Cls`` of this module too)."""
        for _ in range(10):
            b = self.s.bindings.get(name)
            if b is not None and b.kind == "class":
                return self.s.classes.get(b.target)
            if b is None or b.kind != "alias" or "." in b.target:
                return None
            name = b.target
        return None

    def _loop_change(self, cname: str, member: str, construct: str, line: int, setting: bool = False,
                     value: ast.expr | None = None) -> bool:
        """A member change whose head is a module-level ``for`` target (``for c in (A, B): del
        c.m``): for each class the iterable names (a literal of names) an assignment
        (``setting``, of ``value``) is made as :meth:`_set_member` makes it, any other change is
        recorded, not followed; for an iterable computed at run time, on every class of this
        module and on the iterable as a computed head. False when the head is no loop target."""
        first, _, rest = cname.partition(".")
        it = self.loop_iters.get(first)
        if it is None:
            return False
        elts = it.elts if isinstance(it, (ast.Tuple, ast.List, ast.Set)) else []
        heads = [dotted(e) for e in elts]
        if not heads or None in heads:
            # an iterable computed at run time: any class of this module may be among its items
            heads = [n.id for n in ast.walk(it) if isinstance(n, ast.Name)]
            self.s.foreign_changes.append((ITEMS_OF + _text(it)[:100] + (f".{rest}" if rest else ""), member,
                                           construct, line))
            for c in self.s.classes.values():
                c.unfollowable.append((member, construct, line))
        for h in heads:
            full = f"{h}.{rest}" if rest else h
            cf = self._class_for(full) if "." not in full else None
            if setting and elts and h.split(".")[0] not in self.loop_iters:
                self._set_member(full, member, value, construct, line)
            elif cf is not None:
                cf.unfollowable.append((member, construct, line))
            else:
                self.s.foreign_changes.append((full, member, construct, line))
        return True

    def _self_change(self, cname: str, member: str, construct: str, line: int) -> bool:
        """A module-level change through a name bound to this module's object (``from . import
        llama as _me; del _me.X``): the name ``member`` is marked; False for any other head."""
        if "." in cname or self._namespace_of(ast.Name(cname), "module") != "module":
            return False
        self._mark(member, f"`{construct}` (line {line}), a write through the module object", line)
        return True

    def _remove_member(self, cname: str, member: str, construct: str, line: int) -> None:
        if self._loop_change(cname, member, construct, line) or self._self_change(cname, member, construct, line):
            return
        cf = self._class_for(cname)
        if cf is None:
            self.s.foreign_changes.append((cname, member, construct, line))
            return
        cf.methods.pop(member, None)
        cf.attrs.pop(member, None)
        cf.removed[member] = (construct, line)

    def _set_member(self, cname: str, member: str, value: ast.expr | None, construct: str, line: int) -> None:
        """``Cls.member = value`` (or ``setattr``) after the class: followed when the value is a
        constant, a literal, a method of another class of this module, or ``staticmethod(f)`` /
        ``classmethod(f)`` of a function of this module; else recorded as a change the index
        cannot follow."""
        if self._loop_change(cname, member, construct, line, True, value) \
                or self._self_change(cname, member, construct, line):
            return
        if member in ("__bases__", "__class__"):
            # the class's bases (its MRO) or its metaclass replaced: any member may change
            member, value = "*", None
        cf = self._class_for(cname)
        if cf is None:
            self.s.foreign_changes.append((cname, member, construct, line))
            return
        if member != "*" and isinstance(value, (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set)):
            cf.attrs[member] = _attr(member, line, value)
            cf.methods.pop(member, None)
            return
        if member != "*" and isinstance(value, ast.Call) and dotted(value.func) in ("staticmethod", "classmethod") \
                and len(value.args) == 1 and not value.keywords and isinstance(value.args[0], ast.Name) \
                and value.args[0].id in self._fn_nodes and self.s.bindings.get(value.args[0].id) is not None \
                and self.s.bindings[value.args[0].id].kind == "function":
            # the module's function, made a static or class method of the class: followed as one
            mf = _method_fact(self._fn_nodes[value.args[0].id])
            mf.name, mf.line, mf.decorators = member, line, [dotted(value.func)] + mf.decorators
            cf.methods[member] = mf
            cf.attrs.pop(member, None)
            return
        d = dotted(value) if value is not None else None
        if d is not None and d.count(".") == 1:
            other = self._class_for(d.split(".")[0])
            mf = other.methods.get(d.split(".")[1]) if other is not None else None
            if mf is not None:
                cf.methods[member] = mf
                cf.attrs.pop(member, None)
                return
        cf.unfollowable.append((member, construct, line))

    def _mutation_call(self, call: ast.Call, line: int) -> None:
        """``setattr(Cls, "m", v)`` / ``delattr(Cls, "m")`` at module level."""
        fn = dotted(call.func)
        if fn not in ("setattr", "delattr") or not call.args or dotted(call.args[0]) is None:
            return
        self._seen.add(id(call))
        cname = dotted(call.args[0])
        key = call.args[1] if len(call.args) > 1 else None
        construct = f"{_text(call)[:80]}"
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            if self._loop_change(cname, "*", construct, line) or self._self_change(cname, "*", construct, line):
                return
            cf = self._class_for(cname)
            if cf is not None:
                cf.unfollowable.append(("*", construct, line))
            else:
                self.s.foreign_changes.append((cname, "*", construct, line))
            return
        if fn == "delattr":
            self._remove_member(cname, key.value, construct, line)
        else:
            self._set_member(cname, key.value, call.args[2] if len(call.args) > 2 else None, construct, line)

    def _assign_name(self, name: str, value: ast.expr, line: int, guarded: bool, type_checking: bool) -> None:
        s = self.s
        kind = self._namespace_of(value, "module")
        if kind == "module":
            self._self_names.add(name)
        elif kind == "module-dict" and not isinstance(value, ast.Call):
            self._self_dicts.add(name)
        d = dotted(value)
        if d is not None:
            b = Binding("alias", d, line, guarded)
        elif isinstance(value, ast.Call) and dotted(value.func):
            b = Binding(
                "factory",
                (dotted(value.func), [dotted(a) or _text(a) for a in value.args]),
                line,
                guarded,
            )
        else:
            b = Binding("other", _short(value), line, guarded)
        self._bind(name, b, type_checking)
        if name == "__all__":
            try:
                s.dunder_all = list(ast.literal_eval(value))
            except Exception:
                s.all_changes.append((f"__all__ = {_short(value)}", line))
        if isinstance(value, ast.Dict) and name.startswith("_") and "MODULE" in name.upper():
            try:
                lm = ast.literal_eval(value)
                if isinstance(lm, dict) and all(isinstance(v, str) for v in lm.values()):
                    s.lazy_map.update(lm)
            except Exception:
                pass

    def _unpack(self, target: ast.expr, value: ast.expr, line: int, guarded: bool, type_checking: bool) -> None:
        """Bind an assignment target: a name, or a tuple/list unpacked from a literal of the same
        shape (followed item by item); any other unpacking is recorded as not followed."""
        if isinstance(target, ast.Attribute) and target.attr == "__code__" and isinstance(target.value, ast.Attribute) \
                and dotted(target.value.value) is not None:
            # ``C.m.__code__ = g.__code__``: the body of method ``m`` replaced, a change of ``C.m``
            self._seen.add(id(target))
            self._seen.add(id(target.value))
            self._set_member(dotted(target.value.value), target.value.attr, value,
                             f"{_text(target)} = {_short(value)}", line)
            return
        if isinstance(target, ast.Name):
            self._assign_name(target.id, value, line, guarded, type_checking)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = getattr(value, "elts", None)
            if isinstance(value, (ast.Tuple, ast.List)) and len(elts) == len(target.elts) and not any(
                    isinstance(e, ast.Starred) for e in elts + target.elts):
                for t, v in zip(target.elts, elts):
                    self._unpack(t, v, line, guarded, type_checking)
                return
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    self._mark(n.id, f"tuple unpacking (line {line})", line)
        elif isinstance(target, ast.Attribute) and self._namespace_of(target.value, "module") == "module":
            pass  # ``sys.modules[__name__].X = v``: the namespace walk marks X (:meth:`_namespaces`)
        elif isinstance(target, ast.Attribute) and dotted(target.value) is None:
            self._seen.add(id(target))  # ``getattr(M, name).forward = f``: an object computed at run time
            self.s.foreign_changes.append((_head_of(target.value), target.attr,
                                           f"{_text(target)} = {_short(value)}", line))
        elif isinstance(target, ast.Attribute) and dotted(target.value) is not None:
            self._seen.add(id(target))
            self._set_member(dotted(target.value), target.attr, value,
                             f"{_text(target)} = {_short(value)}", line)
        elif isinstance(target, ast.Subscript) and dotted(target.value) == "sys.modules" \
                and isinstance(target.slice, ast.Name) and target.slice.id == "__name__" and isinstance(value, ast.Call):
            self.s.lazy_self = True
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Call) \
                and dotted(target.value.func) in ("globals", "vars") and not target.value.args:
            key = target.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                self._handled.add(id(target.value))
                self._assign_name(key.value, value, line, guarded, type_checking)

    def _bind_names_of(self, target: ast.AST, construct: str, line: int) -> None:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                self._mark(n.id, construct, line)
            elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
                self._mark(n.name, construct, line)
            elif isinstance(n, ast.MatchMapping) and n.rest:
                self._mark(n.rest, construct, line)

    def _loop_body(self, stmt: ast.stmt, bodies: list[list[ast.stmt]], type_checking: bool) -> None:
        was = self.loop_end
        self.loop_end = getattr(stmt, "end_lineno", None) or stmt.lineno
        try:
            for body in bodies:
                self._stmts(body, True, type_checking)
        finally:
            self.loop_end = was

    def _bind(self, name: str, b: Binding, type_checking: bool) -> None:
        if self.loop_end is not None:
            self._mark(name, f"a binding inside a loop or match (line {b.line})", self.loop_end)
        b.conds = self.conds
        if not self.in_handler:
            (self._tc_all if type_checking else self._all).setdefault(name, []).append(b)
        if type_checking:
            self.s.tc_bindings.setdefault(name, b)
            if name not in self.s.bindings:
                self.s.type_checking_names.add(name)
            return
        prev = self.s.bindings.get(name)
        if prev is not None and b.guarded and prev.guarded:
            # ``try: import A as X / except: import B as X``: keep the first, remember the other
            self.s.alt_bindings.setdefault(name, []).append(b)
            return
        if prev is not None:
            self.s.earlier.setdefault(name, []).append(prev)  # a class body may have seen it
        self.s.bindings[name] = b
        self.s.type_checking_names.discard(name)

    def _stmts(self, body: list[ast.stmt], guarded: bool, type_checking: bool) -> None:
        for stmt in body:
            self._stmt(stmt, guarded, type_checking)

    def _stmt(self, stmt: ast.stmt, guarded: bool, type_checking: bool) -> None:
        s = self.s
        if isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign, ast.Delete)):
            cc = container_change(stmt)
            if cc is not None and cc[0].split(".")[0] not in ("self", "cls"):
                s.container_changes.append((*cc, _text(stmt)[:100], stmt.lineno, None))
            if cc is not None and cc[0] == "__all__" or isinstance(stmt, ast.AugAssign) and isinstance(
                    stmt.target, ast.Name) and stmt.target.id == "__all__":
                s.all_changes.append((_text(stmt)[:100], stmt.lineno))
        if isinstance(stmt, ast.ClassDef):
            cf = self._class(stmt, stmt.name, guarded, type_checking)
            self._bind(stmt.name, Binding("class", cf.qualname, stmt.lineno, guarded), type_checking)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._function(stmt)
            self._bind(stmt.name, Binding("function", stmt.name, stmt.lineno, guarded), type_checking)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    self._bind(alias.asname, Binding("module", alias.name, stmt.lineno, guarded), type_checking)
                else:
                    top = alias.name.split(".")[0]
                    self._bind(top, Binding("module", top, stmt.lineno, guarded), type_checking)
        elif isinstance(stmt, ast.ImportFrom):
            mod = resolve_relative(s.module, s.is_package, stmt.level, stmt.module)
            for alias in stmt.names:
                if alias.name == "*":
                    s.stars.append((mod, stmt.lineno))
                    continue
                self._bind(
                    alias.asname or alias.name,
                    Binding("import", (mod, alias.name), stmt.lineno, guarded),
                    type_checking,
                )
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            if value is None:
                return
            for t in targets:
                self._unpack(t, value, stmt.lineno, guarded, type_checking)
        elif isinstance(stmt, ast.Delete):
            targets = list(stmt.targets)
            while any(isinstance(t, (ast.Tuple, ast.List)) for t in targets):  # ``del (a, b)``, ``del [a]``
                targets = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
            for t in targets:
                if isinstance(t, ast.Name):
                    self._bind(t.id, Binding("deleted", f"del {t.id}", stmt.lineno, guarded), type_checking)
                elif isinstance(t, ast.Attribute) and dotted(t.value) is not None:
                    self._seen.add(id(t))
                    self._remove_member(dotted(t.value), t.attr, f"del {_text(t)}", stmt.lineno)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self._mutation_call(stmt.value, stmt.lineno)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.NamedExpr) \
                and isinstance(stmt.value.target, ast.Name):
            self._handled.add(id(stmt.value))
            self._assign_name(stmt.value.target.id, stmt.value.value, stmt.lineno, guarded, type_checking)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            end = getattr(stmt, "end_lineno", None) or stmt.lineno
            self._bind_names_of(stmt.target, f"a for loop target (line {stmt.lineno})", end)
            was = dict(self.loop_iters)
            if isinstance(stmt.target, ast.Name):
                self.loop_iters[stmt.target.id] = stmt.iter
            try:
                self._loop_body(stmt, [stmt.body, stmt.orelse], type_checking)
            finally:
                self.loop_iters = was
        elif isinstance(stmt, ast.While):
            self._loop_body(stmt, [stmt.body, stmt.orelse], type_checking)
        elif type(stmt).__name__ == "Match":
            end = getattr(stmt, "end_lineno", None) or stmt.lineno
            for case in stmt.cases:
                self._bind_names_of(case.pattern, f"a match capture pattern (line {case.pattern.lineno})", end)
            self._loop_body(stmt, [c.body for c in stmt.cases], type_checking)
        elif isinstance(stmt, ast.If):
            if _is_type_checking(stmt.test):
                self._stmts(stmt.body, guarded, True)
                self._stmts(stmt.orelse, guarded, type_checking)
            elif isinstance(stmt.test, ast.UnaryOp) and isinstance(stmt.test.op, ast.Not) and _is_type_checking(
                stmt.test.operand
            ):
                self._stmts(stmt.body, guarded, type_checking)
                self._stmts(stmt.orelse, guarded, True)
            else:
                outer = self.conds
                test = _text(stmt.test)
                self.conds = outer + ((test, True),)
                self._stmts(stmt.body, True, type_checking)
                self.conds = outer + ((test, False),)
                self._stmts(stmt.orelse, True, type_checking)
                self.conds = outer
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self._stmts(stmt.body, True, type_checking)
            was, self.in_handler = self.in_handler, True
            for h in stmt.handlers:
                if h.name:  # ``except E as N`` binds N, and unbinds it when the handler ends
                    self._bind_names_of(ast.Name(id=h.name, ctx=ast.Store(), lineno=h.lineno),
                                        f"an except ... as {h.name} (line {h.lineno}), which unbinds it after",
                                        getattr(h, "end_lineno", None) or h.lineno)
                self._stmts(h.body, True, type_checking)
            self.in_handler = was
            self._stmts(stmt.orelse, True, type_checking)
            self._stmts(stmt.finalbody, guarded, type_checking)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None:
                    self._bind_names_of(item.optional_vars, f"a with ... as target (line {stmt.lineno})", stmt.lineno)
            self._stmts(stmt.body, guarded, type_checking)

    def _function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        ff = FunctionFact(name=fn.name, line=fn.lineno, params=params)
        ff.gives = returns_fact(fn)
        local_classes: dict[str, str] = {}
        # statements are enough (imports, classes, returns) unless this module rewrites bases
        nodes = ast.walk(fn) if self.track_bases else _iter_stmts(fn.body)
        for node in nodes:
            if self.track_bases:
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    ff.calls.append(node.func.id)
                elif (
                    isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Attribute) and t.attr == "__bases__" for t in node.targets)
                    and isinstance(node.value, ast.BinOp)
                    and isinstance(node.value.right, ast.Tuple)
                ):
                    # ``cls.__bases__ = cls.__bases__ + (Wrapper,)``
                    ff.appends_bases += [d for d in map(dotted, node.value.right.elts) if d]
            if isinstance(node, ast.ImportFrom):
                mod = resolve_relative(self.s.module, self.s.is_package, node.level, node.module)
                for alias in node.names:
                    if alias.name != "*":
                        ff.local_bindings[alias.asname or alias.name] = Binding(
                            "import", (mod, alias.name), node.lineno
                        )
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    ff.local_bindings[name] = Binding("module", alias.asname and alias.name or name, node.lineno)
            if isinstance(node, ast.ClassDef) and node is not fn:
                qn = f"{fn.name}.<locals>.{node.name}"
                if qn not in self.s.classes:
                    cf = self._class(node, qn, True, False)
                    cf.factory = (fn.name, params)
                local_classes[node.name] = qn
        for st in _iter_stmts(fn.body):
            if isinstance(st, ast.Return):
                ff.returns.append(_short(st.value) if st.value is not None else "None")
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                ff.inner_returns[st.name] = [_short(r.value) if r.value is not None else "None"
                                             for r in _iter_stmts(st.body) if isinstance(r, ast.Return)]
        for stmt in fn.body:
            if isinstance(stmt, ast.Return) and stmt.value is not None:
                if isinstance(stmt.value, ast.Name) and stmt.value.id in local_classes:
                    ff.returns_local_class = local_classes[stmt.value.id]
                elif isinstance(stmt.value, ast.Call):
                    ff.returns_call.append(_text(stmt.value.func))
        self.s.functions[fn.name] = ff
        self._fn_nodes[fn.name] = fn
        self._deferred(fn, set(params))

    def _deferred(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str]) -> None:
        """Record the member changes ``fn``'s body makes to names it does not own
        (:attr:`ModuleSummary.deferred_changes`)."""
        stmts = list(_iter_stmts(fn.body))
        self._changes_in(stmts, _Locals(stmts, params), fn.name)

    def _changes_in(self, stmts: list[ast.stmt], local, label: str) -> None:
        """Record the member changes the statements ``stmts`` of one scope (a function, a method,
        a class body: ``label``; every statement, as :func:`_iter_stmts` gives them) make to
        names that are not ``local`` to it (a set, or :class:`_Locals`), and its changing calls
        on containers (:attr:`ModuleSummary.container_changes`)."""
        iters = {st.target.id: st.iter for st in stmts if isinstance(st, (ast.For, ast.AsyncFor))
                 and isinstance(st.target, ast.Name)}

        def record(head_node: ast.AST, member: str, st: ast.stmt) -> None:
            root = _root_name(head_node)
            if root is not None and root in iters and root not in _OWN:
                # ``for c in (A, B): del c.m``: a change to each class the iterable names (or to
                # the iterable, computed)
                it = iters[root]
                rest = _head_of(head_node)[len(root):]
                elts = it.elts if isinstance(it, (ast.Tuple, ast.List, ast.Set)) else []
                heads = [dotted(e) for e in elts]
                if not heads or None in heads:
                    heads = [ITEMS_OF + _text(it)[:100]]
                for h in heads:
                    self.s.deferred_changes.append((h + rest, member, _text(st)[:100], st.lineno, label))
                return
            if root is not None and (root in _OWN or root in local) \
                    and not (isinstance(head_node, ast.Attribute) and head_node.attr == "__class__"):
                return  # ``self.x = v``, a parameter's or a local's attribute: not a class of the tree
            head = _head_of(head_node)
            self.s.deferred_changes.append((head, member, _text(st)[:100], st.lineno, label))

        for st in stmts:
            if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = st.targets if isinstance(st, (ast.Assign, ast.Delete)) else [st.target]
                for t in targets:
                    if isinstance(t, ast.Attribute):
                        self._seen.add(id(t))
                        if t.attr == "__code__" and isinstance(t.value, ast.Attribute) and not (
                                t.value.attr == "forward" and (_root_name(t.value) in _OWN
                                                               or _root_name(t.value) in local)):
                            # ``C.m.__code__ = ...``: C.m replaced. A method's write to the code of its
                            # own class's forward (``self.__class__.forward.__code__ = compiled``), or a
                            # function's to a parameter's (``model.__class__.forward.__code__ = ...``),
                            # swaps in that forward compiled or back (vLLM's torch.compile wrapper,
                            # vllm/compilation/wrapper.py): left as before, like any write through them
                            record(t.value.value, t.value.attr, st)
                        else:
                            record(t.value, t.attr, st)
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) \
                    and dotted(st.value.func) in ("setattr", "delattr") and st.value.args \
                    and dotted(st.value.args[0]) is not None:
                self._seen.add(id(st.value))
                key = st.value.args[1] if len(st.value.args) > 1 else None
                member = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "*"
                record(st.value.args[0], member, st)
            if isinstance(st, (ast.Expr, ast.Assign, ast.AugAssign, ast.Delete)):
                cc = container_change(st)
                if cc is not None:
                    first = cc[0].split(".")[0]
                    if first not in _OWN and first not in local:
                        self.s.container_changes.append((*cc, _text(st)[:100], st.lineno, label))

    def _scopes(self, tree: ast.Module) -> None:
        """Member changes made where the module-level pass and :meth:`_deferred` do not look:
        class bodies (they run with the class statement), methods of classes (static and class
        methods too, at any depth), functions nested in functions; and, when the source is
        :attr:`reflective`, every ``setattr``/``delattr`` however it is reached (an alias of it,
        ``type.__setattr__(C, ...)``, ``C.__setattr__``, a comprehension, a lambda, an expression,
        a head computed by ``getattr(M, name)``), writes through ``M.__dict__`` or ``vars(M)``, and
        attributes assigned on a computed object (``getattr(M, name).forward = f``). Each goes to
        :attr:`ModuleSummary.deferred_changes` under its scope's label, or, at module level, to
        :attr:`ModuleSummary.foreign_changes` (a class of this module: its ``unfollowable``)."""
        def scope_imports(body: list[ast.stmt], label: str) -> None:
            got: dict[str, Binding] = {}
            for node in _iter_stmts(body):
                if isinstance(node, ast.ImportFrom):
                    mod = resolve_relative(self.s.module, self.s.is_package, node.level, node.module)
                    for alias in node.names:
                        if alias.name != "*":
                            got[alias.asname or alias.name] = Binding("import", (mod, alias.name), node.lineno)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        name = alias.asname or alias.name.split(".")[0]
                        got[name] = Binding("module", alias.asname and alias.name or name, node.lineno)
            if got:
                self.s.scope_bindings[label] = got

        def visit_fn(fn, label: str, outer, own: bool) -> None:
            args = fn.args
            params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
            stmts = list(_iter_stmts(fn.body))
            local = _Locals(stmts, params, outer)
            if own:
                if any(isinstance(st, (ast.Import, ast.ImportFrom)) for st in stmts):
                    scope_imports(fn.body, label)
                self._changes_in(stmts, local, label)
            if self.reflective:
                self._reflective(fn.body, local, label)
            inner(stmts, label, local)

        def visit_class(node: ast.ClassDef, qual: str, outer) -> None:
            label = f"<class {qual}>"
            stmts = list(_iter_stmts(node.body))
            self._changes_in(stmts, outer, label)
            if self.reflective:
                self._reflective(node.body, outer, label)
            cf = self._class_nodes.get(id(node))
            for st in stmts:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if cf is not None:
                        self._instance_writes(st, cf)
                    visit_fn(st, f"{qual}.{st.name}", outer, True)
                elif isinstance(st, ast.ClassDef) and st is not node:
                    visit_class(st, f"{qual}.{st.name}", outer)

        def inner(stmts: list[ast.stmt], label: str, local) -> None:
            for st in stmts:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit_fn(st, f"{label}.<locals>.{st.name}", local, True)
                elif isinstance(st, ast.ClassDef):
                    visit_class(st, f"{label}.<locals>.{st.name}", local)

        if self.reflective:
            self._reflective(tree.body, set(), None)
        for st in _iter_stmts(tree.body):
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit_fn(st, st.name, set(), False)  # its own statements: :meth:`_deferred`
            elif isinstance(st, ast.ClassDef):
                visit_class(st, st.name, set())

    def _instance_writes(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, cf: ClassFact) -> None:
        """Record in ``cf.instance_writes`` what method ``fn`` writes on its instance (its first
        parameter) or on an object reached from it, for the members of :data:`INSTANCE_MEMBERS`,
        following the local names bound once to the instance or to a dotted path from it
        (``s = self``, ``m = self.model``, ``m = getattr(self, "model")``, ``s, m = self,
        self.model``, ``(m := self.model)``); a name bound otherwise to a value that reads the
        instance (``m = self.parts[0]``, ``m = self if x else y``) reaches an object the index does
        not follow: its writes are recorded under the path ``?``. The functions nested in the
        method are read with it (their closures see its instance); nested classes are not."""
        params = fn.args.posonlyargs + fn.args.args
        if not params or any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list):
            return
        me = params[0].arg
        stmts: list[ast.stmt] = []
        todo = [fn.body]
        while todo:
            for st in _iter_stmts(todo.pop()):
                stmts.append(st)
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    todo.append(st.body)
        # the writes of a member the index records (most methods have none: nothing more is read)
        writes: list[tuple[ast.AST, str, str, int, ast.AST | None]] = []
        for st in stmts:
            if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
                targets = st.targets if isinstance(st, (ast.Assign, ast.Delete)) else [st.target]
                hits = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])
                        if isinstance(e, ast.Attribute) and e.attr in INSTANCE_MEMBERS]
                if not hits:
                    continue
                if isinstance(st, ast.Delete):
                    value = "del"
                elif st.value is None:
                    continue
                elif isinstance(st.value, (ast.Tuple, ast.List, ast.Dict, ast.Set)) and not getattr(
                        st.value, "elts", getattr(st.value, "keys", None)):
                    value = _text(st.value)  # an empty literal: ``()``, ``[]``, ``{}``
                else:
                    value = _short(st.value)
                writes += [(e.value, e.attr, value, st.lineno, getattr(st, "value", None)) for e in hits]
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and st.value.args \
                    and dotted(st.value.func) in ("setattr", "delattr", "object.__setattr__", "object.__delattr__"):
                call = st.value
                key = call.args[1] if len(call.args) > 1 else None
                value = "del" if "del" in dotted(call.func) else _short(call.args[2]) if len(call.args) > 2 else "?"
                for member in _attr_names(fn, key) if key is not None else ["*"]:
                    if member in INSTANCE_MEMBERS or member == "*":
                        writes.append((call.args[0], member, value, st.lineno,
                                       call.args[2] if len(call.args) > 2 else None))
        if not writes:
            return
        bound: dict[str, list[ast.expr | None]] = {}

        def bind(t: ast.AST, v: ast.expr | None) -> None:
            if isinstance(t, (ast.Tuple, ast.List)) and isinstance(v, (ast.Tuple, ast.List)) \
                    and len(t.elts) == len(v.elts) and not any(isinstance(e, ast.Starred) for e in t.elts + v.elts):
                for te, ve in zip(t.elts, v.elts):
                    bind(te, ve)
            elif isinstance(t, ast.Name):
                bound.setdefault(t.id, []).append(v)
            else:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        bound.setdefault(n.id, []).append(v if v is None else ast.Tuple(elts=[v]))

        for st in stmts:
            if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                    bind(t, st.value if isinstance(st, ast.Assign) else ast.Tuple(elts=[st.value])
                         if st.value is not None else None)
            elif isinstance(st, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                tgts = [(st.target, st.iter)] if isinstance(st, (ast.For, ast.AsyncFor)) else \
                    [(i.optional_vars, i.context_expr) for i in st.items if i.optional_vars is not None]
                for t, v in tgts:
                    bind(t, ast.Tuple(elts=[v]))  # an item of it: not the value itself
        if self.walrus:  # the source holds ``:=``
            for n in ast.walk(fn):
                if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                    bind(n.target, n.value)
        aliases: dict[str, str | None] = {}

        def alias(name: str) -> str | None:
            if name not in aliases:
                values = bound.get(name, ())
                v = values[0] if len(values) == 1 else None
                d = _head_of(v) if v is not None else None
                aliases[name] = None
                if d is not None and _DOTTED_TEXT.fullmatch(d) and (d == me or d.startswith(me + ".")):
                    aliases[name] = "self" + d[len(me):]
                elif any(x is not None and any(isinstance(n, ast.Name) and n.id == me for n in ast.walk(x))
                         for x in values):
                    aliases[name] = "self.?"  # an object reached from the instance, not followed
            return aliases[name]

        def path_of(node: ast.AST) -> str | None:
            d = dotted(node)
            if d is None:
                return None
            first, dot, rest = d.partition(".")
            if first == me:
                if me in bound:
                    return None
                base = "self"
            else:
                base = alias(first)
                if base is None:
                    return None
            full = base + dot + rest
            return full[5:] if full.startswith("self.") else ""

        given = {a.arg for a in fn.args.posonlyargs[1:] + fn.args.args[1:] + fn.args.kwonlyargs}
        given |= {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}
        given -= set(bound)
        for head, member, value, line, node in writes:
            p = path_of(head)
            if p is None:
                continue
            reads = node is not None and any(isinstance(n, ast.Name) and n.id in given for n in ast.walk(node))
            cf.instance_writes.append((f"{p}.{member}" if p else member, value, fn.name, line, reads))

    def _reflective(self, body: list[ast.stmt], local: set[str], label: str | None) -> None:
        """The reflective member changes of one scope's statements (see :meth:`_scopes`), not
        entering the functions and classes defined there (lambdas are entered: their body is
        an expression of this scope)."""
        setters = {"setattr", "delattr", "builtins.setattr", "builtins.delattr"}
        setters |= {n for n, b in self.s.bindings.items()
                    if (b.kind == "alias" and b.target in setters)
                    or (b.kind == "import" and b.target[0] == "builtins" and b.target[1] in ("setattr", "delattr"))}

        def key_of(node: ast.AST | None) -> str:
            return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "*"

        def record(head: str, member: str, node: ast.AST) -> None:
            line = getattr(node, "lineno", 0)
            construct = _text(node)[:100]
            if head.split(".")[0] in local and "(" not in head and "[" not in head:
                return
            if label is not None:
                self.s.deferred_changes.append((head, member, construct, line, label))
                return
            cf = self._class_for(head) if "." not in head and head.isidentifier() else None
            if cf is not None:
                cf.unfollowable.append((member, construct, line))
            else:
                self.s.foreign_changes.append((head, member, construct, line))

        stack: list[tuple[ast.AST, ast.AST | None]] = [(st, None) for st in body]
        while stack:
            node, parent = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if id(node) in self._seen:
                pass
            elif isinstance(node, ast.Call):
                f = node.func
                fd = dotted(f)
                if fd in setters and node.args:
                    record(_head_of(node.args[0]), key_of(node.args[1] if len(node.args) > 1 else None), node)
                elif isinstance(f, ast.Attribute) and f.attr in ("__setattr__", "__delattr__"):
                    if dotted(f.value) in ("object", "type", "builtins.object", "builtins.type") and node.args:
                        record(_head_of(node.args[0]), key_of(node.args[1] if len(node.args) > 1 else None), node)
                    elif not (isinstance(f.value, ast.Call) and dotted(f.value.func) == "super"):
                        record(_head_of(f.value), key_of(node.args[0] if node.args else None), node)
                elif isinstance(f, ast.Attribute) and f.attr in ("update", "setdefault", "pop", "clear", "__setitem__",
                                                                 "__delitem__", "popitem"):
                    obj = _dict_owner(f.value)
                    if obj is not None:
                        record(_head_of(obj), "*", node)
                    elif dotted(f.value) == "sys.modules" and f.attr not in ("pop", "popitem", "clear"):
                        key = node.args[0] if node.args and f.attr != "update" else None
                        record("sys.modules", key_of(key), node)
            elif isinstance(node, ast.Name) and node.id in setters and isinstance(node.ctx, ast.Load) \
                    and not (isinstance(parent, ast.Call) and parent.func is node):
                # setattr handed on (``map(setattr, ...)``, ``partial(setattr, C)``): what it sets is not known
                record(_head_of(parent) if isinstance(parent, ast.Call) else node.id, "*", parent or node)
            elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
                obj = _dict_owner(node.value)
                if obj is not None:
                    record(_head_of(obj), key_of(node.slice), node)
                elif dotted(node.value) == "sys.modules":  # a module replaced under its name
                    record("sys.modules", key_of(node.slice), node)
            elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load) and dotted(node.value) is None:
                record(_head_of(node.value), node.attr, node)  # ``getattr(M, name).forward = f``
            for child in ast.iter_child_nodes(node):
                stack.append((child, node))

    def _class(self, node: ast.ClassDef, qualname: str, guarded: bool, type_checking: bool) -> ClassFact:
        methods: dict[str, MethodFact] = {}
        attrs: dict[str, AttrFact] = {}
        removed: dict[str, tuple[str, int]] = {}
        shadowed: list[tuple[str, str, int]] = []
        self._class_body(node.body, methods, attrs, qualname, guarded, type_checking, removed, shadowed)
        cf = ClassFact(
            name=node.name,
            qualname=qualname,
            line=node.lineno,
            bases=[_text(b) for b in node.bases],
            keywords={k.arg or "**": _text(k.value) for k in node.keywords},
            decorators=[_short(d) for d in node.decorator_list],
            decorator_calls=[(len(d.args), [k.arg or "**" for k in d.keywords]) if isinstance(d, ast.Call) else None
                             for d in node.decorator_list],
            methods=methods,
            attrs=attrs,
            empty=_is_empty_class_body(node.body),
            guarded=guarded,
            type_checking=type_checking,
            removed=removed,
            unfollowable=shadowed,
        )
        self._class_nodes[id(node)] = cf
        for st in node.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == "__new__":
                other = _new_returns_other(st)
                if other is not None:
                    # it may give back an instance of another class than the one the engine built
                    cf.unfollowable.append(("*", f"{node.name}.__new__ returning {other}", st.lineno))
        for st in _iter_stmts(node.body):
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == "__init_subclass__":
                for member, text, line in _subclass_hook_changes(st):
                    cf.subclass_changes.append((member, f"{text} in {node.name}.__init_subclass__ (it runs for "
                                                        "every subclass)", line))
        old = self.s.classes.get(qualname)
        if old is not None:
            # a second definition: keep the first under ``Name@line`` for the code that saw it
            key = f"{qualname}@{old.line}"
            self.s.classes[key] = old
            for b in [self.s.bindings.get(node.name)] + self.s.earlier.get(node.name, []):
                if b is not None and b.kind == "class" and b.target == qualname and b.line == old.line:
                    b.target = key
        self.s.classes[qualname] = cf
        return cf

    def _class_body(self, body, methods, attrs, qualname, guarded, type_checking, removed=None,
                    shadowed=None) -> None:
        removed = {} if removed is None else removed
        shadowed = [] if shadowed is None else shadowed
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods[stmt.name] = _method_fact(stmt)
                attrs.pop(stmt.name, None)
                removed.pop(stmt.name, None)
                line = _self_rebound(stmt) if self.self_rebound else None
                if line is not None:  # writes through the rebound name reach another object
                    shadowed.append(("*", f"the instance parameter rebound in {stmt.name} (line {line}): the "
                                     "writes through it are not followed", line))
            elif isinstance(stmt, ast.Delete):
                todo = list(stmt.targets)
                while todo:
                    t = todo.pop(0)
                    if isinstance(t, (ast.Tuple, ast.List)):  # ``del (a, b)``, ``del [a]``
                        todo[:0] = t.elts
                    elif isinstance(t, ast.Name):
                        methods.pop(t.id, None)
                        attrs.pop(t.id, None)
                        removed[t.id] = (f"del {t.id}", stmt.lineno)
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    for n in ([t] if isinstance(t, ast.Name) else getattr(t, "elts", [])):
                        if isinstance(n, ast.Name):
                            if n.id in methods and not isinstance(stmt.value, (ast.Constant, ast.Name)):
                                # a method replaced by a value built at run time (``m =
                                # property(lambda self: None)``): what the member is is not known
                                shadowed.append((n.id, f"{n.id} = {_text(stmt.value)[:60]}", stmt.lineno))
                            attrs[n.id] = _attr(n.id, stmt.lineno, stmt.value)
                            methods.pop(n.id, None)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if stmt.value is None:
                    if stmt.target.id not in attrs:
                        attrs[stmt.target.id] = AttrFact(stmt.target.id, stmt.lineno, False)
                else:
                    attrs[stmt.target.id] = _attr(stmt.target.id, stmt.lineno, stmt.value)
                    methods.pop(stmt.target.id, None)
            elif isinstance(stmt, ast.ClassDef):
                self._class(stmt, f"{qualname}.{stmt.name}", guarded, type_checking)
                attrs[stmt.name] = AttrFact(stmt.name, stmt.lineno, True, f"<class {stmt.name}>")
                if methods.pop(stmt.name, None) is not None:  # a nested class of a method's name replaces it
                    shadowed.append((stmt.name, f"{stmt.name} rebound by the class statement at line {stmt.lineno}",
                                     stmt.lineno))
            elif isinstance(stmt, ast.If):
                # conditional members: both branches may bind; keep what either binds
                self._class_body(stmt.body, methods, attrs, qualname, guarded, type_checking, removed, shadowed)
                self._class_body(stmt.orelse, methods, attrs, qualname, guarded, type_checking, removed, shadowed)
            else:
                # any other statement that binds a name of the class body (a ``for`` or ``with``
                # target, an import, ``except ... as`` (which unbinds it after), a ``match``
                # capture, a walrus, ``+=``): a member it rebinds is not followed
                for name in sorted(_class_scope_binds(stmt)):
                    if name in methods or (name in attrs and not isinstance(stmt, ast.AugAssign)):
                        shadowed.append((name, f"{name} rebound by the statement at line {stmt.lineno} "
                                         f"(`{_text(stmt).splitlines()[0][:60]}`)", stmt.lineno))


def _self_rebound(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """The line where a method rebinds its instance parameter (``self = self.model``, ``self, _ =
    self, 0``, a walrus, a ``for`` target), or None (also for a static or class method)."""
    params = fn.args.posonlyargs + fn.args.args
    if not params or any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
                         for d in fn.decorator_list):
        return None
    me = params[0].arg
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id == me and isinstance(n.ctx, ast.Store):
            return n.lineno
    return None


def _class_scope_binds(stmt: ast.stmt) -> set[str]:
    """The names one statement of a class body binds (or unbinds) in the class's namespace
    (:func:`auditor.index.importsteps.bound_by` of each node: assignment, ``for`` and ``with``
    targets, walrus targets, imports, ``except ... as`` names, ``match`` captures and the names of
    the functions and classes it defines); not what the bodies of those functions, lambdas or
    comprehensions bind (scopes of their own), nor ``global``/``nonlocal`` names."""
    out: set[str] = set()
    todo: list[ast.AST] = [stmt]
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if not isinstance(n, (ast.Global, ast.Nonlocal)):
            out |= bound_by(n)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # a definition binds its name; its decorators and body are not the class's
        todo.extend(ast.iter_child_nodes(n))
    return out


def _attr(name: str, line: int, value: ast.expr) -> AttrFact:
    lit = None
    if isinstance(value, (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.UnaryOp)):
        try:
            lit = ast.literal_eval(value)
        except Exception:
            lit = None
    return AttrFact(name, line, True, _short(value), lit)


def char_position(node: ast.AST, lines: list[str] | None) -> tuple[int, int]:
    """``(line, character column)`` of a node, as libcst counts them (``ast`` columns count
    UTF-8 bytes); ``lines`` is the module's text split into lines (None: byte columns kept)."""
    col = node.col_offset
    if lines is not None and 0 < node.lineno <= len(lines):
        col = len(lines[node.lineno - 1].encode("utf-8")[:col].decode("utf-8", "replace"))
    return node.lineno, col


class ParentMap:
    """Parent links of a syntax tree, to find the function that encloses a node."""

    def __init__(self, tree: ast.AST):
        self.parent: dict[ast.AST, ast.AST] = {}
        for p in ast.walk(tree):
            for c in ast.iter_child_nodes(p):
                self.parent[c] = p

    def enclosing_function(self, node: ast.AST) -> ast.AST | None:
        """The function definition that contains ``node``, or None at module level."""
        cur = self.parent.get(node)
        while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
            cur = self.parent.get(cur)
        return cur


@dataclass(frozen=True)
class Extractor:
    """A fact extractor that runs in the summary pass, only on the modules it is meant for.

    ``name``: the key of its facts in :attr:`ModuleSummary.extras`; ``prefixes``/``suffixes``:
    the module paths it applies to (POSIX, relative to the folder that holds the engine
    package; a path qualifies when it starts with a prefix or ends with a suffix); ``needles``:
    byte strings that must all occur in the source; ``prefilter``: an optional cheaper test of the
    bytes; ``run``: ``ast.Module -> facts`` (plain, cacheable data; an empty result is not stored).
    Extractors are supplied by the layers above (engines, rules); the index knows none by name.
    """

    name: str
    run: Callable[[ast.Module], Any]
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    needles: tuple[bytes, ...] = ()
    prefilter: Callable[[bytes], bool] | None = None

    def wants(self, path: str, source: bytes) -> bool:
        """True when the extractor applies to the module at ``path`` with bytes ``source``."""
        if not (path.startswith(self.prefixes) or path.endswith(self.suffixes)):
            return False
        if not all(n in source for n in self.needles):
            return False
        return self.prefilter is None or self.prefilter(source)
#: Files the newer-grammar parser is tried on: at most this size, and brackets nested at most
#: this deep (Python itself refuses more than 200 nested parentheses).
_NEWER_SYNTAX_MAX_BYTES = 4 << 20
_NEWER_SYNTAX_MAX_DEPTH = 200


def _bracket_depth(source: bytes) -> int:
    """The deepest nesting of ``( [ {`` in ``source``, ignoring that brackets may sit in strings
    or comments (an upper bound, only used to refuse pathological input cheaply)."""
    depth = deepest = 0
    for ch in source.translate(None, _NOT_BRACKETS):
        if ch in b"([{":
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest


_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"()[]{}")


def _left_out(tree: ast.Module, replaced: list[int]) -> list[tuple[int, str | None, bool]]:
    """Where the statements :func:`parse_newer_syntax` replaced by ``pass`` stood, as ``(line,
    qualname of the innermost enclosing class or None, True when the statement is at module
    level)``."""
    lines = set(replaced)
    out: list[tuple[int, str | None, bool]] = []
    todo: list[tuple[list[ast.stmt], str | None, bool]] = [(tree.body, None, True)]
    while todo:
        body, qual, top = todo.pop()
        for st in body:
            if isinstance(st, ast.Pass) and st.lineno in lines:
                out.append((st.lineno, qual, top))
            if isinstance(st, ast.ClassDef):
                todo.append((st.body, f"{qual}.{st.name}" if qual else st.name, False))
                continue
            for field_name in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in getattr(st, field_name, None) or ():
                    if isinstance(child, ast.stmt):
                        todo.append(([child], qual, top and not isinstance(st, (ast.FunctionDef,
                                                                                 ast.AsyncFunctionDef))))
                    elif hasattr(child, "body"):  # an except handler, a match case
                        todo.append((child.body, qual, top))
    return out


def parse_newer_syntax(source: bytes, path: str) -> tuple[ast.Module, list[int]] | None:
    """Parse a module that this interpreter's ``ast`` rejects but that is valid Python of a newer
    grammar (``type X = int``, ``def f[T](x: T)`` on Python 3.11): libcst's parser, which accepts
    newer grammar, checks that the module is valid, and each statement that ``ast`` cannot parse is
    replaced by ``pass`` (same lines, same indentation) so that the rest of the module is indexed.

    Returns:
        ``(syntax tree, first lines of the replaced statements)``, or None when libcst rejects the
        module too (a real syntax error), the statements cannot be isolated, or the file is too
        large or too deeply nested to try (see :data:`_NEWER_SYNTAX_MAX_DEPTH`).
    """
    if len(source) > _NEWER_SYNTAX_MAX_BYTES or _bracket_depth(source) > _NEWER_SYNTAX_MAX_DEPTH:
        return None  # pathological nesting: libcst's native parser would overflow its stack
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    try:
        mod = cst.parse_module(source)
        spans = []
        for node, pos in MetadataWrapper(mod, unsafe_skip_copy=True).resolve(PositionProvider).items():
            if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                spans.append((pos.start.line, pos.end.line, pos.start.column))
        lines = source.decode(mod.encoding).splitlines(keepends=True)
    except Exception:  # libcst rejects it (ParserSyntaxError) or it cannot be decoded
        return None
    replaced: list[int] = []
    for _ in range(200):
        try:
            return ast.parse("".join(lines), filename=path), replaced
        except (SyntaxError, ValueError) as exc:
            ln = getattr(exc, "lineno", None)
            hits = [sp for sp in spans if ln is not None and sp[0] <= ln <= sp[1] and sp[0] not in replaced]
            if not hits:
                return None
            start, end, col = min(hits, key=lambda sp: sp[1] - sp[0])
            lines[start - 1] = " " * col + "pass\n"
            for i in range(start, min(end, len(lines))):
                lines[i] = "\n"
            replaced.append(start)
    return None


#: what a module must contain for the whole-module walk of :meth:`_Summarizer._dynamic` to find
#: anything in it (byte tests: far cheaper than a regular expression over the file)
_DYNAMIC = (b"globals()", b"vars()", b"sys.modules")
#: what a module must contain for :meth:`_Summarizer._namespaces` to find anything in it: one of
#: these bytes, or a match of :data:`_NAMESPACE_RE` (``exec``/``eval`` as a name, not ``.eval()``;
#: a ``__class__`` assignment)
_NAMESPACE = (b"sys.modules", b"globals()", b"locals()", b"vars(", b"import_module", b"builtins", b"__import__",
              b"FunctionType", b"LambdaType", b"runpy", b"methodcaller")
_NAMESPACE_RE = re.compile(rb"(?<![\w.])(?:exec|eval)(?!\w)|__class__[ \t]*=(?!=)|from[ \t]+sys[ \t]+import[^\n]*\bmodules\b")
#: the spellings the byte tests above miss: a space before the call's parenthesis or the
#: attribute's dot (``globals ()``, ``sys .modules``), ``sys`` imported under another name, and
#: ``from sys import (modules)`` over several lines; either pass then runs
_SPACED_RE = re.compile(rb"\b(?:globals|vars|locals)[ \t]+\(|\bsys[ \t]*\.[ \t]+modules\b|\bsys[ \t]+\.[ \t]*modules\b"
                        rb"|\bimport[ \t]+sys[ \t]+as\b|\bfrom[ \t]+sys[ \t]+import[ \t]*\(")
#: ``self = ...``, ``self, x = ...``, ``(self, x) = ...`` (checked to start its line by
#: :func:`_may_rebind_self`), and ``for self in``, ``as self``, ``self :=``; each pattern starts with
#: a literal where it can, which the regular expression engine finds fast
_SELF_ASSIGN = re.compile(rb"self[ \t]*(?:,[^\n=:]*)?\)?[ \t]*=(?!=)")
_SELF_BOUND = re.compile(rb"\b(?:for|as)[ \t]+self\b|self[ \t]*:=")


def _may_rebind_self(source: bytes) -> bool:
    """True when a line of ``source`` may rebind a method's ``self`` (a byte test that picks the
    modules :func:`_self_rebound` reads; the syntax tree decides)."""
    if b"self" not in source:
        return False
    if _SELF_BOUND.search(source) is not None:
        return True
    for m in _SELF_ASSIGN.finditer(source):
        start = source.rfind(b"\n", 0, m.start()) + 1
        if not source[start:m.start()].strip(b" \t("):  # only spaces and parentheses before it
            return True
    return False


#: what a source names when it may change an object's attributes other than by ``X.a = v``
_REFLECTIVE = (b"setattr", b"delattr", b"__dict__", b"vars(", b"sys.modules")


def parse_error_line(exc: SyntaxError) -> str:
    """One-line description of a parse error: ``line N: message``."""
    return f"line {exc.lineno}: {exc.msg}"


def _too_big(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply to analyse (RecursionError); not analysed"
    return "too large to analyse (MemoryError); not analysed"


def summarize(source: bytes, path: str, extractors: tuple[Extractor, ...] = ()) -> ModuleSummary:
    """Build the :class:`ModuleSummary` of one module.

    Args:
        source: the module's bytes as stored in the tree (any encoding Python accepts).
        path: POSIX path relative to the folder that contains ``vllm/`` (``vllm/x/y.py``).
        extractors: the fact extractors to run on this module when they want it
            (their results go to ``extras`` under their names).

    Returns:
        The summary; a file that does not parse yields a summary with ``error`` set and no facts
        (the caller reports it and goes on). Never raises for bad source.
    """
    import gc

    module, is_package = module_name_for(path)
    # Syntax trees hold no reference cycles: the cyclic collector only slows their building.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        replaced: list[int] = []
        try:
            tree = ast.parse(source, filename=path)
        except (SyntaxError, ValueError) as exc:
            try:
                newer = parse_newer_syntax(source, path)
            except (RecursionError, MemoryError) as deep:
                return ModuleSummary(module=module, path=path, is_package=is_package, error=_too_big(deep))
            if newer is None:
                msg = parse_error_line(exc) if isinstance(exc, SyntaxError) else str(exc)
                return ModuleSummary(module=module, path=path, is_package=is_package, error=msg)
            tree, replaced = newer
        except (RecursionError, MemoryError) as exc:
            return ModuleSummary(module=module, path=path, is_package=is_package, error=_too_big(exc))
        try:  # the walks below recurse too: a tree that parsed may still be too deep for them
            steps = None if replaced else import_steps(tree, module, is_package)
            left_out = _left_out(tree, replaced) if replaced else []
            prune_dead_code(tree)
            spaced = _SPACED_RE.search(source) is not None  # ``globals ()``, ``sys .modules``, ``import sys as``
            dynamic = spaced or any(n in source for n in _DYNAMIC)
            summary = _Summarizer(module, path, is_package, track_bases=b"__bases__" in source,
                                  dynamic=dynamic, walrus=b":=" in source, globals_stmt=b"global" in source,
                                  reflective=any(n in source for n in _REFLECTIVE),
                                  self_rebound=_may_rebind_self(source),
                                  namespace=spaced or any(n in source for n in _NAMESPACE)
                                  or _NAMESPACE_RE.search(source) is not None).run(tree)
            summary.import_steps = steps
            if replaced:
                # statements of a grammar newer than this interpreter's, left out of the index:
                # each may bind or change any name of its scope (``class X[T]: ...`` rebinds X,
                # ``type X = int``), which the index does not follow
                summary.extras["newer_syntax_lines"] = replaced
                for line, qualname, top in left_out:
                    construct = (f"a statement of a newer Python grammar than this interpreter's (line {line}), "
                                 "left out of the index")
                    cf = summary.classes.get(qualname) if qualname else None
                    if cf is not None:
                        cf.unfollowable.append(("*", construct, line))
                    else:
                        summary.unfollowable.setdefault("*", []).append((construct, line, top))
            for ex in extractors:
                if ex.wants(path, source):
                    found = ex.run(tree)
                    if found:
                        summary.extras[ex.name] = found
        except (RecursionError, MemoryError) as exc:
            return ModuleSummary(module=module, path=path, is_package=is_package, error=_too_big(exc))
        return summary
    finally:
        if was_enabled:
            gc.enable()
