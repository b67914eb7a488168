"""Facts of the model files both engines read (vLLM's ``vllm/model_executor/models/`` and SGLang's
``sglang/srt/models/`` are written alike): a target's class and MRO (:func:`target_facts`), the
holder model that runs the decoder layers (:func:`find_holder`, :class:`HolderFacts`), its
``forward`` (:func:`holder_forward`), multimodal wrappers and their language models, and the
self-capturing Transformers modelling backend. Engine-neutral: it names no engine package, and
both engines and the rules read it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from auditor.engines.base import init_argument, init_assign
from auditor.hf.configs import TransformersFacts
from auditor.index.facts import AttrFact, LoopFact, MethodFact
from auditor.index.providers import FactProvider
from auditor.index.resolve import Resolver
from auditor.index.targets import ClassRef, External, Unresolved

#: an engine's registry (``entries``, ``class_ref(arch)``, ``role(arch)``, …), read duck-typed
Registry = Any

#: Attribute names of a wrapper that hold its language model.
LANGUAGE_MODEL_ATTRS = ("language_model", "text_model", "llm")

#: Attribute names that hold the inner model, in the order they are tried.
HOLDER_ATTRS = ("model", "transformer", "language_model", "backbone", "llm", "text_model")


@dataclass
class HolderInfo:
    """The inner model that runs the decoder layers (``DeepseekV2Model``), how it was found
    (``via``: a sentence), the class whose ``__init__`` builds it (``built_by``), the line of the
    assignment, and, when it cannot be known statically, ``unknown`` with the reason. For a
    multimodal wrapper, ``language_arch`` is the architecture it builds and ``language_ref`` its
    class."""

    ref: ClassRef | None
    via: str
    path: str | None = None
    line: int | None = None
    unknown: str | None = None
    language_arch: str | None = None
    language_ref: ClassRef | None = None
    #: what the holder rests on when the checkpoint decides it (the HF config class's default
    #: text config), one sentence; None when the tree alone decides
    assumed: str | None = None


@dataclass
class TargetFacts:
    """Facts about one architecture (see the module docstring).

    ``architecture``: the registry name; ``ref``: the resolved class (or ``unresolved``);
    ``path``/``line``: where the class is defined; ``empty``: the class body is empty;
    ``code_holder``: nearest class on the MRO (itself included) whose body is not empty.
    """

    architecture: str
    ref: ClassRef | None
    unresolved: Unresolved | None = None
    path: str | None = None
    line: int | None = None
    empty: bool = False
    code_holder: ClassRef | None = None
    mro: list = field(default_factory=list)
    mro_error: str | None = None
    mro_unresolved: list[Unresolved] = field(default_factory=list)


def target_facts(resolver: Resolver, registry: Registry, arch: str) -> TargetFacts:
    """Resolve ``arch`` (a registry architecture) to :class:`TargetFacts`.

    Raises:
        KeyError: ``arch`` is not in the registry.
    """
    t = registry.class_ref(arch)
    if not isinstance(t, ClassRef):
        u = t if isinstance(t, Unresolved) else Unresolved(str(t), "not a class")
        return TargetFacts(arch, None, unresolved=u)
    loc = resolver.location(t)
    c = resolver.cls(t)
    m = resolver.mro(t)
    holder = None
    for e in m.entries:
        if isinstance(e, ClassRef):
            ce = resolver.cls(e)
            if ce is not None and not ce.empty:
                holder = e
                break
    return TargetFacts(
        architecture=arch,
        ref=t,
        path=loc[0] if loc else None,
        line=loc[1] if loc else None,
        empty=bool(c and c.empty),
        code_holder=holder,
        mro=m.entries,
        mro_error=m.error,
        mro_unresolved=m.unresolved,
    )


def _string_list(text: str) -> list[str] | None:
    try:
        v = ast.literal_eval(text)
    except Exception:
        return None
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return list(v)
    return None


_CAST_LM = re.compile(rb"cast\(\s*([A-Za-z_][\w.]*)\s*,\s*self\.(?:get_language_model\(\)|language_model)\s*\)")


def stated_language_model(resolver: Resolver, owner: ClassRef) -> tuple[ClassRef, str] | None:
    """The language model class a wrapper's module states for its own language model:
    ``cast(NemotronHForCausalLM, self.get_language_model())`` (0.33.0
    ``vllm/model_executor/models/nano_nemotron_vl.py``), found by a text scan of the module and
    resolved in it; one class, or None (absent, or several different ones)."""
    path = resolver.tree.path_of(owner.module)
    if path is None:
        return None
    try:
        data = resolver.tree.read(path)
    except (KeyError, OSError):
        return None
    names = {m.decode() for m in _CAST_LM.findall(data)}
    refs = {t for t in (resolver.resolve_dotted(owner.module, n) for n in names) if isinstance(t, ClassRef)}
    if len(refs) != 1:
        return None
    (ref,) = refs
    return ref, f"which {path} casts to {ref.name}"


def find_holder(resolver: Resolver, registry: Registry, ref: ClassRef, _depth: int = 0,
                text_default=None) -> HolderInfo:
    """Find the inner model whose ``forward`` loops over the decoder layers.

    Tries, in order: a language model built by ``init_vllm_registered_model(...,
    architectures=[...])`` (wrappers; recursion into that architecture's class), then
    ``self.model = ...`` in the first ``__init__`` on the MRO that assigns it: a class called
    directly, ``self.<method>(...)`` (the method is looked up on ``ref``'s MRO, so overrides
    count, and its ``return X(...)`` gives the class), or ``self.<attr>(...)`` where ``<attr>`` is a
    class attribute (``model_cls = DeepseekV2Model``; subclasses may rebind it), or an
    ``__init__`` parameter whose value the ``super().__init__(...)`` chain decides
    (:func:`auditor.engines.base.init_argument`). A helper the ``__init__`` calls counts as
    the ``__init__`` (:func:`auditor.engines.base.init_assign`).

    A wrapper that builds its language model from the checkpoint's text config
    (``init_vllm_registered_model(hf_config=config.text_config)``) is followed through the class
    its module states for it (:func:`stated_language_model`), else through
    ``text_default(wrapper class)`` → ``(architecture, how)`` when given (the HF config class's
    default text config; the result then carries :attr:`HolderInfo.assumed`), else unknown.
    """
    if _depth > 3:
        return HolderInfo(None, "wrapper recursion", unknown="wrapper nesting too deep")
    lm = init_assign(resolver, ref, LANGUAGE_MODEL_ATTRS)
    if lm is not None and lm[2] is not None and (lm[2][0].endswith("init_vllm_registered_model")
                                                 or _string_list(lm[2][1].get("architectures", ""))):
        # any builder handed literal architectures names a registry row (a generic rule, not a name)
        owner, attr, (callee, kwargs, line), _ = lm
        loc = resolver.location(owner)
        archs = _string_list(kwargs.get("architectures", "")) if "architectures" in kwargs else None
        path = loc[0] if loc else None
        if not archs:
            stated = stated_language_model(resolver, owner)
            if stated is not None:
                inner = find_holder(resolver, registry, stated[0], _depth + 1, text_default)
                inner.via = f"self.{attr} = {callee.rsplit('.', 1)[-1]}(hf_config=...), {stated[1]} → {inner.via}"
                inner.language_ref = inner.language_ref or stated[0]
                return inner
            default = text_default(owner) if text_default is not None else None
            if default is not None and default[0] in registry.entries and \
                    isinstance(registry.class_ref(default[0]), ClassRef):
                arch, how = default
                inner = find_holder(resolver, registry, registry.class_ref(arch), _depth + 1, text_default)
                inner.via = f"self.{attr} = {callee.rsplit('.', 1)[-1]}(hf_config=...) with {how} → {inner.via}"
                inner.language_arch = arch
                inner.language_ref = registry.class_ref(arch)
                inner.assumed = (f"the language model's architecture comes from the checkpoint; this verdict "
                                 f"assumes {how} (pass --hf-config with the checkpoint's config.json to check yours)")
                return inner
            why = (
                f"{owner.name}.__init__ builds self.{attr} with init_vllm_registered_model(hf_config=...) "
                "and no literal architectures: the language model's architecture comes from the "
                "checkpoint (pass --hf-config with the checkpoint's config.json)"
            )
            return HolderInfo(None, "language model from the checkpoint", path, line, unknown=why)
        arch = archs[0]
        if arch not in registry.entries:
            return HolderInfo(None, f"language model {arch}", path, line, unknown=f"{arch} is not in the registry")
        lref = registry.class_ref(arch)
        if not isinstance(lref, ClassRef):
            return HolderInfo(None, f"language model {arch}", path, line, unknown=f"cannot resolve {arch}")
        inner = find_holder(resolver, registry, lref, _depth + 1, text_default)
        inner.via = f"self.{attr} = {callee.rsplit('.', 1)[-1]}(architectures=[{arch!r}]) → {inner.via}"
        inner.language_arch = arch
        inner.language_ref = lref
        return inner
    found = init_assign(resolver, ref, HOLDER_ATTRS)
    if found is None:
        # the attribute the class's own setter hands the layers to (``self.decoder._set_aux_...``)
        setter = resolver.lookup(ref, "set_aux_hidden_state_layers")
        if setter is not None and isinstance(setter[1], MethodFact):
            attrs = tuple(a for a, m in setter[1].delegates
                          if m in ("set_aux_hidden_state_layers", "_set_aux_hidden_state_layers") and a.isidentifier())
            found = init_assign(resolver, ref, attrs) if attrs else None
    if found is None:
        return HolderInfo(None, "no self.model", unknown=(
            f"no __init__ on {ref.name}'s MRO assigns the inner model (self.{', self.'.join(HOLDER_ATTRS)})"))
    owner, attr, call, value = found
    loc = resolver.location(owner)
    path = loc[0] if loc else None
    if call is None:
        return HolderInfo(None, f"self.{attr} = {value}", path,
                          unknown=f"self.{attr} = {value[:60]} is not a constructor call")
    callee, _, line = call
    if callee.startswith("self."):
        name = callee[len("self."):]
        if "." in name:
            return HolderInfo(None, f"self.{attr} = {callee}(...)", path, line,
                              unknown=f"self.{attr} = {callee}(...) cannot be resolved statically")
        hit = resolver.lookup(ref, name)
        if hit is None:
            return HolderInfo(None, f"self.{attr} = {callee}(...)", path, line, unknown=f"{name} is not defined on {ref.name}'s MRO")
        defined_in, fact = hit
        if isinstance(fact, AttrFact):
            # model_cls = DeepseekV2Model
            if not fact.value:
                return HolderInfo(None, callee, path, line, unknown=f"{name} has no value")
            t = resolver.resolve_dotted(defined_in.module, fact.value)
            via = f"self.{attr} = self.{name}(...) with {defined_in.name}.{name} = {fact.value}"
        else:
            if not fact.returns_call:
                return HolderInfo(None, callee, path, line, unknown=f"{defined_in.name}.{name}() does not return a constructor call")
            t = resolver.resolve_dotted(defined_in.module, fact.returns_call[0].removesuffix("(...)"))
            via = f"self.{attr} = self.{name}(...) returning {fact.returns_call[0]}(...) ({defined_in.name})"
            if len(set(fact.returns_call)) > 1:
                via += f"; other branches return {', '.join(sorted(set(fact.returns_call[1:])))}"
    else:
        module = owner.module
        c = resolver.cls(owner)
        init = c.methods.get("__init__") if c is not None else None
        via = f"self.{attr} = {callee}(...)"
        if "." not in callee and init is not None and any(n == callee for n, _ in init.params):
            # an __init__ parameter (``language_model_cls=...``) that subclasses pass on
            arg = init_argument(resolver, ref, owner, callee)
            if arg is None:
                return HolderInfo(None, via, path, line, unknown=(
                    f"the value of {owner.name}.__init__'s parameter {callee} cannot be known statically"))
            via = f"self.{attr} = {callee}(...) with {callee}={arg[0]}"
            callee, module = arg
        t = resolver.resolve_dotted(module, callee)
        if not isinstance(t, ClassRef):
            # a factory that takes the class: initialize_model(..., model_class=Llama4ForCausalLM)
            hit = class_keyword(resolver, owner.module, call[1])
            if hit is not None:
                via = f"self.{attr} = {callee}(..., {hit[0]}={hit[1].name})"
                t = hit[1]
    if not isinstance(t, ClassRef):
        if isinstance(t, Unresolved):
            reason = t.reason
        elif isinstance(t, External):
            reason = f"the inner model is built by {t.name}, outside the {registry.display} tree"
        else:
            reason = f"{callee} is not a class"
        return HolderInfo(None, via, path, line, unknown=reason)
    if _depth < 3 and t != ref and init_assign(resolver, t, HOLDER_ATTRS + LANGUAGE_MODEL_ATTRS) is not None \
            and not _has_layer_loop(resolver, t):
        # the attribute holds another wrapper (a ForCausalLM): its own holder runs the layers
        inner = find_holder(resolver, registry, t, _depth + 1, text_default)
        inner.via = f"{via} → {inner.via}"
        return inner
    return HolderInfo(t, via, path, line)


def class_keyword(resolver: Resolver, module: str, kwargs: dict[str, str]) -> tuple[str, ClassRef] | None:
    """The first keyword argument of a call whose value is a class of the tree, as
    ``(keyword, class)``: a factory that is handed the class to build
    (``initialize_model(vllm_config=..., model_class=Llama4ForCausalLM)`` in 0.16.0
    ``vllm/model_executor/models/mllama4.py``). ``kwargs`` maps keywords to value texts as the
    index records them (:attr:`auditor.index.summary.MethodFact.self_assign_calls`)."""
    for k, v in kwargs.items():
        if not v or not all(part.isidentifier() for part in v.split(".")):
            continue
        t = resolver.resolve_dotted(module, v)
        if isinstance(t, ClassRef):
            return k, t
    return None


def _has_layer_loop(resolver: Resolver, ref: ClassRef) -> bool:
    hit = resolver.lookup(ref, "forward")
    return bool(hit and isinstance(hit[1], MethodFact) and hit[1].loops)


@dataclass
class ForwardFacts:
    """The holder's ``forward``: the class that defines it, its location, the layer loops, and
    whether it returns the aux-states list."""

    defined_in: ClassRef | None
    path: str | None
    line: int | None
    loops: list[LoopFact]
    returns_aux: bool


def holder_forward(resolver: Resolver, holder: ClassRef) -> ForwardFacts:
    """The ``forward`` the holder runs: the first on its MRO, past overrides that only return
    ``super().forward(...)`` unchanged and loop over no layers (0.16.0
    ``vllm/model_executor/models/mistral.py``: ``MistralModel.forward`` returns
    ``super().forward(...)``, so ``LlamaModel.forward`` decides what the holder captures).

    Args:
        resolver: the tree's resolver.
        holder: the inner model class.

    Returns:
        The :class:`ForwardFacts` of the forward that decides; all empty when the MRO has none
        in the tree.
    """
    hit = None
    for e in resolver.mro(holder).entries:
        c = resolver.cls(e) if isinstance(e, ClassRef) else None
        if c is None or "forward" not in c.methods:
            continue
        hit = (e, c.methods["forward"])
        if not (hit[1].returns_super and not hit[1].loops):
            break
    if hit is None or not isinstance(hit[1], MethodFact):
        return ForwardFacts(None, None, None, [], False)
    defined_in, mf = hit
    loc = resolver.location(defined_in)
    return ForwardFacts(defined_in, loc[0] if loc else None, mf.line, mf.loops, mf.returns_aux)


@dataclass
class SelfCapture:
    """A model class that captures aux hidden states itself, with no vLLM holder model: the
    class that defines both its ``forward`` (which returns ``(hidden_states, aux_states)``) and
    its ``set_aux_hidden_state_layers`` (which configures the capture, not delegating it), where
    it is, and the modules outside vLLM the setter imports (``requires``: what it needs of
    ``transformers``)."""

    defined_in: ClassRef
    path: str | None
    line: int | None
    requires: list[str]


def captures_itself(resolver: Resolver, ref: ClassRef) -> SelfCapture | None:
    """:class:`SelfCapture` when the class's own MRO captures aux hidden states (0.33.0
    ``vllm/model_executor/models/transformers/base.py``: ``set_aux_hidden_state_layers``
    installs output recorders on the model ``transformers`` built, ``forward`` returns
    ``(hidden_states, aux_hidden_states)``), else None.

    The forward (past overrides that return ``super().forward(...)`` unchanged, as the
    multimodal wrapper's does) and the setter must come from one class, the forward must return the aux
    states, and the setter must neither be a stub nor hand the layers to an inner model
    (``self.model.set_aux_hidden_state_layers(...)``, ``self.model.aux_hidden_state_layers =``)."""
    fwd = None
    for e in resolver.mro(ref).entries:  # past forwards that only return super().forward(...)
        c = resolver.cls(e) if isinstance(e, ClassRef) else None
        if c is not None and "forward" in c.methods:
            fwd = (e, c.methods["forward"])
            if not fwd[1].returns_super:
                break
    setter = resolver.lookup(ref, "set_aux_hidden_state_layers")
    if fwd is None or setter is None or fwd[0] != setter[0]:
        return None
    f, s = fwd[1], setter[1]
    if not (isinstance(f, MethodFact) and isinstance(s, MethodFact)) or not f.returns_aux or s.is_stub:
        return None
    if any(m in ("set_aux_hidden_state_layers", "_set_aux_hidden_state_layers") for _, m in s.delegates):
        return None
    if "aux_hidden_state_layers" in s.attrs or not any("aux" in a or "record" in a for a in s.attrs):
        return None
    loc = resolver.location(fwd[0])
    requires = sorted({i for i in s.imports if not i.startswith("vllm")})
    return SelfCapture(fwd[0], loc[0] if loc else None, s.line, requires)


def config_attributes(resolver: Resolver, ref: ClassRef) -> dict[str, int]:
    """Attribute names an HF config class provides, with a line: class attributes (annotated
    fields included), ``self.X`` assignments in ``__init__``, properties and ``attribute_map``
    keys, over the class's in-tree MRO."""
    out: dict[str, int] = {}
    for e in resolver.mro(ref).entries:
        if not isinstance(e, ClassRef):
            continue
        c = resolver.cls(e)
        if c is None:
            continue
        for a, af in c.attrs.items():
            # annotation-only names count: HF config classes are dataclass-like (transformers 5)
            out.setdefault(a, af.line)
            if a == "attribute_map" and isinstance(af.literal, dict):
                for k in af.literal:
                    out.setdefault(str(k), af.line)
        init = c.methods.get("__init__")
        if init:
            for a in init.self_assigns:
                out.setdefault(a, init.line)
        for name, mf in c.methods.items():
            if "property" in mf.decorators:
                out.setdefault(name, mf.line)
    return out


def is_multimodal(resolver: Resolver, ref: ClassRef) -> bool:
    """vLLM's ``supports_multimodal(model)``: the ``supports_multimodal`` flag is true on the MRO."""
    hit = resolver.lookup(ref, "supports_multimodal")
    return bool(hit and isinstance(hit[1], AttrFact) and hit[1].literal is True)


def method_requires_mixin(fact: MethodFact) -> bool:
    """True when a protocol default (``set_aux_hidden_state_layers`` in vLLM ≥ 0.18) demands
    that the holder inherit ``EagleModelMixin``."""
    return "EagleModelMixin" in fact.names


class HolderFacts(FactProvider):
    """``(HolderInfo, ForwardFacts | None)`` of a target class (the key: its ``ClassRef``): the
    holder model :func:`find_holder` finds — a wrapper whose language model the checkpoint
    picks gets the HF config class's default text config, read with the transformers at hand
    (:class:`auditor.hf.configs.TransformersFacts`) — and its ``forward``
    (:func:`holder_forward`). Read from ``vllm/model_executor/models/<module>.py``."""

    DEPENDS_ON = (TransformersFacts,)

    @classmethod
    def compute(cls, ctx, key: ClassRef):
        from auditor.hf.modeltypes import default_text_architecture

        def text_default(owner):
            return default_text_architecture(ctx.resolver, ctx.registry, owner,
                                             lambda: ctx.get(TransformersFacts).configs)

        h = find_holder(ctx.resolver, ctx.registry, key, text_default=text_default)
        fwd = holder_forward(ctx.resolver, h.ref) if h.ref is not None else None
        return h, fwd
