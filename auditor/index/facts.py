"""The records of the static index: what :func:`auditor.index.summary.summarize` finds in one module.

:class:`ModuleSummary` (one module) holds :class:`Binding` (a module-level name), :class:`ClassFact`
(a class statement, with its :class:`MethodFact` and :class:`AttrFact` members and the
:class:`LoopFact` and :class:`ReturnsFact` of its methods) and :class:`FunctionFact` (a module-level
function). They are plain, picklable and :func:`~auditor.cache.cacheable` data, read by name
resolution, the MRO and the rules instead of the syntax tree. Also here: the method names the index
details (:data:`DETAILED_METHODS`, :data:`INSTANCE_MEMBERS`) and the heads a change record may name
that are no dotted name (:data:`RUNS_CODE`, :data:`ITEMS_OF`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from auditor.cache import cacheable

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


#: what :meth:`auditor.index.namespaces.NamespacesMixin._namespaces` records as the head of a
#: change made by text run as code (any object the module reaches may be changed)
RUNS_CODE = "<text run as code>"
#: what the head of a member change made through a ``for`` target over an iterable computed at
#: run time starts with (``for c in get_classes(): c.forward = f`` → ``<items of> get_classes()``):
#: the items are any objects that iterable gives
ITEMS_OF = "<items of> "


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
    #: the setters only (``_BRANCH_METHODS`` of :mod:`auditor.index.methods`): for each branch of
    #: an ``if`` in the body that stores an attribute, ``(line, attributes the branch stores a
    #: parameter on, attributes the branch stores, attributes stored on the way to and in the branch)``
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
    #: module-level names bound to what the index does not follow (a container, a subscript, a
    #: ``with ... as`` or a ``match`` capture), with the names their value expression reads
    #: (``_c = [LlamaForCausalLM][0]``: ``["LlamaForCausalLM"]``): a change written through one
    #: may change what those names hold
    holders: dict[str, list[str]] = field(default_factory=dict)
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
