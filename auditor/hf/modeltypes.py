"""A target's model_type, from what the tree says about its HF config class.

A class name is not a model_type (``Qwen3VLMoeForConditionalGeneration`` is ``qwen3_vl_moe``,
``HunYuanVLForConditionalGeneration`` is ``hunyuan_vl``). :func:`infer_model_type` takes it, in
order, from:

1. for a row named for its own class, the config class the model binds its HF config to: ``config: Qwen3VLMoeConfig =
   vllm_config.model_config.hf_config`` in an ``__init__`` on the class's MRO, else the one config
   class its module imports from ``transformers.models.*`` or ``vllm.transformers_utils.configs``;
   that class's ``model_type`` attribute (vLLM's own config classes,
   ``vllm/transformers_utils/configs/*.py``), else transformers' ``CONFIG_MAPPING_NAMES`` read
   backwards (when a transformers source is at hand), else vLLM's ``_CONFIG_REGISTRY``
   (``vllm/transformers_utils/config.py``, model_type → config class) read backwards, else the
   ``transformers.models.<model_type>`` package the class is imported from; a table that maps
   several model_types to the class decides only by the one spelled like the class;
2. the alias table (:func:`auditor.hf.targets.load_alias_table`);
3. transformers' own model mappings (``MODEL_FOR_*_MAPPING_NAMES``, model_type → architecture)
   read backwards, when a transformers source is at hand (the Transformers modeling backend's
   rows are named for the checkpoint's architecture);
4. only then a guess from the class name, labelled :data:`GUESSED`.
"""

from __future__ import annotations

import re
from typing import Any

from auditor.hf.configs import TransformersFacts
from auditor.index.providers import FactProvider
from auditor.index.resolve import Resolver
from auditor.index.targets import ClassRef, External

#: The ``model_type_source`` of a model_type guessed from the architecture's name.
GUESSED = "guessed from the class name"

_CONFIG_MODULES = ("transformers.models.", "vllm.transformers_utils.configs")
_SUB_CONFIG_WORDS = ("Vision", "Audio", "Text", "Encoder", "Quantization", "Speech", "Projector", "Pretrained",
                     "PreTrained")

#: an engine's registry (``entries``, ``architectures()``, ``class_ref(arch)``, …), read duck-typed
Registry = Any


def config_class_of(resolver: Resolver, ref: ClassRef) -> tuple[ClassRef | External, str] | None:
    """The HF config class of a model class, with how it was found (a phrase), or None."""
    for e in resolver.mro(ref).entries:
        if not isinstance(e, ClassRef):
            continue
        c = resolver.cls(e)
        init = c.methods.get("__init__") if c else None
        if init is not None and init.config_annotation:
            text = init.config_annotation.strip("'\"")
            if all(p.isidentifier() for p in text.split(".")):
                t = resolver.resolve_dotted(e.module, text)
                if isinstance(t, (ClassRef, External)):
                    return t, f"{e.name}.__init__ annotates its hf_config as {text}"
    for e in resolver.mro(ref).entries:  # the class's module first, then its bases' modules
        if isinstance(e, ClassRef):
            hit = _imported_config(resolver, e)
            # a base's config counts only for a class named for it too (Qwen3ASRRealtimeGeneration
            # for Qwen3ASRConfig; never MistralForCausalLM for llama.py's LlamaConfig)
            if hit is not None and (e == ref or ref.name.lower().startswith(
                    hit[0].dotted.rsplit(".", 1)[-1].lower().removesuffix("config"))):
                return hit
    return None


def _imported_config(resolver: Resolver, ref: ClassRef) -> tuple[ClassRef | External, str] | None:
    """The one config class ``ref``'s module imports for ``ref`` itself, or None."""
    m = resolver.tree.module(ref.module)
    if m is None:
        return None
    cands = []
    for name, b in m.bindings.items():
        if b.kind == "import" and name.endswith("Config") and (b.target[0] == "transformers"
                                                               or b.target[0].startswith(_CONFIG_MODULES)) \
                and not any(w in name for w in _SUB_CONFIG_WORDS):
            cands.append(name)
    if cands:
        # keep the one named for the model class (a module also imports its encoders' and its
        # sibling classes' configs): Qwen3ASRConfig for Qwen3ASRForConditionalGeneration, not
        # Qwen3ASRThinkerConfig; DeepseekV3Config for DeepseekV3ForCausalLM, not DeepseekForCausalLM
        stem = ref.name.lower()
        cands = [c for c in cands if stem.startswith(c.lower().removesuffix("config") + "for")
                 or stem == c.lower().removesuffix("config") + "model"]
    if len(cands) == 1:
        t = resolver.resolve_name(ref.module, cands[0])
        if isinstance(t, (ClassRef, External)):
            return t, f"{m.path} imports the config class {cands[0]}"
    return None


def model_type_of_config(resolver: Resolver, registry: Registry, cfg: ClassRef | External,
                         transformers=None) -> tuple[str, str] | None:
    """``(model_type, how)`` of an HF config class, or None.

    Args:
        transformers: a :class:`auditor.hf.configs.TransformersConfigs` to read
            classes of ``transformers`` from, a function returning one (called only when a
            transformers class must be read), or None.
    """
    name = cfg.dotted.rsplit(".", 1)[-1]
    if isinstance(cfg, ClassRef):
        hit = resolver.lookup(cfg, "model_type")
        if hit is not None and isinstance(getattr(hit[1], "literal", None), str) and hit[1].literal:
            return hit[1].literal, f"model_type of {name}"
    if isinstance(cfg, External) and cfg.name.startswith("transformers."):
        # transformers' own table says which model_type its class is for
        transformers = transformers() if callable(transformers) else transformers
        if transformers is not None:
            mt = _one_for([m for m, c in transformers.names.items() if c == name], name.removesuffix("Config"))
            if mt:
                return mt, f"transformers' CONFIG_MAPPING_NAMES maps {mt} to {name}"
    keys = []
    table = getattr(registry, "config_registry", None)  # vLLM's _CONFIG_REGISTRY (SGLang has none)
    for mt, val in (table().items() if table is not None else ()):
        vname = val if isinstance(val, str) else (val[1] if isinstance(val, tuple) and len(val) > 1 else None)
        if isinstance(vname, str) and vname.rsplit(".", 1)[-1] == name:
            keys.append(mt)
    mt = _one_for(keys, name.removesuffix("Config"))
    if mt:
        return mt, f"vLLM's _CONFIG_REGISTRY maps {mt} to {name}"
    if isinstance(cfg, External) and cfg.name.startswith("transformers."):
        parts = cfg.name.split(".")
        if len(parts) >= 4 and parts[1] == "models":
            return parts[2], f"{name} comes from transformers.models.{parts[2]}"
    return None


def _one_for(model_types: list[str], stem: str) -> str | None:
    """One model_type of several that a table maps to the same class: the only one, else the one
    spelled like the class's stem (``deepseek_v3`` for ``DeepseekV3Config``, ``llama`` for
    ``LlamaForCausalLM`` rather than ``code_llama``); None when that does not decide."""
    model_types = list(dict.fromkeys(model_types))
    if len(model_types) == 1:
        return model_types[0]
    key = stem.lower().replace("_", "")
    same = [m for m in model_types if m.replace("_", "").replace("-", "").lower() == key]
    return same[0] if len(same) == 1 else None


def _arch_model_type(transformers, arch: str) -> str | None:
    """model_type of an architecture in transformers' model mappings (case-insensitive: vLLM
    writes ``LightOnOCRForConditionalGeneration`` where transformers writes ``LightOnOcr...``)."""
    if transformers is None:
        return None
    stem = derive_stem(arch)
    if arch in transformers.architectures:
        return _one_for(transformers.architectures[arch], stem)
    low: dict[str, list[str]] = {}
    for a, mts in transformers.architectures.items():
        low.setdefault(a.lower(), []).extend(mts)
    return _one_for(low.get(arch.lower(), []), stem)


def derive_stem(arch: str) -> str:
    """The architecture name without its head suffix (``LlamaForCausalLM`` → ``Llama``)."""
    for suf in ("ForConditionalGeneration", "ForCausalLM", "LMHeadModel", "Model"):
        if arch.endswith(suf) and arch != suf:
            return arch[: -len(suf)]
    return arch


_TEXT_DEFAULTS = (
    re.compile(rb'"text_config"\s*:\s*SubConfigSpec\((?:[^()]|\([^()]*\))*?model_type\s*=\s*"([\w-]+)"', re.S),
    re.compile(rb'text_config\.get\(\s*"model_type"\s*,\s*"([\w-]+)"\s*\)'),
    re.compile(rb'text_config\s*=\s*CONFIG_MAPPING\[\s*"([\w-]+)"\s*\]\('),
)


def default_text_architecture(resolver: Resolver, registry: Registry, owner: ClassRef,
                              transformers=None) -> tuple[str, str] | None:
    """``(architecture, how)`` of the language model a wrapper builds from its checkpoint's
    text config when the checkpoint keeps the HF config class's default: the config class's
    default ``text_config`` model_type (transformers 5 ``sub_configs_defaults`` /
    ``SubConfigSpec(model_type=...)``, transformers 4 ``text_config.get("model_type", ...)`` or
    ``CONFIG_MAPPING[...]()``, found by a text scan of the config module), mapped to its causal-LM
    architecture by transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``; that architecture must be
    in vLLM's registry. None when any step is missing. ``transformers``: as for
    :func:`model_type_of_config`."""
    get = transformers if callable(transformers) else (lambda: transformers)
    found = config_class_of(resolver, owner)
    mt = None
    if found is not None:
        got = model_type_of_config(resolver, registry, found[0], get)
        mt = got[0] if got else None
        if isinstance(found[0], ClassRef):
            text = _config_module_text(resolver, found[0])
            arch = _default_arch(text, get(), registry) if text else None
            if arch:
                return arch[0], f"the default text_config of {found[0].name} (model_type {arch[1]})"
    tf = get()
    if tf is None:
        return None
    mt = mt or _arch_model_type(tf, owner.name)
    cfg = tf.config_class(mt) if mt else None
    if cfg is None:
        return None
    text = _config_module_text(tf.resolver, cfg)
    arch = _default_arch(text, tf, registry) if text else None
    if arch is None:
        return None
    return arch[0], f"the default text_config of {cfg.name} (model_type {arch[1]}, transformers {tf.version or '?'})"


def _config_module_text(resolver: Resolver, cfg: ClassRef) -> bytes | None:
    path = resolver.tree.path_of(cfg.module)
    try:
        return resolver.tree.read(path) if path else None
    except (KeyError, OSError):
        return None


def _default_arch(text: bytes, tf, registry: Registry) -> tuple[str, str] | None:
    if tf is None:
        return None
    for pat in _TEXT_DEFAULTS:
        m = pat.search(text)
        if m:
            mt = m.group(1).decode()
            arch = tf.causal_lm.get(mt)
            return (arch, mt) if arch and arch in registry.entries else None
    return None


def infer_model_type(resolver: Resolver, registry: Registry, arch: str, aliases: dict,
                     transformers=None) -> tuple[str, str, str]:
    """``(model_type, text model_type, source)`` for a registry architecture (see the module
    docstring for the order). ``source`` says how it was found; a name guess says
    :data:`GUESSED`. ``transformers``: as for :func:`model_type_of_config`."""
    from auditor.hf.targets import derive_model_type

    ref = registry.class_ref(arch) if arch in registry.entries else None
    alias = aliases.get("architecture", {}).get(arch)
    # a row named for another class (AquilaForCausalLM → LlamaForCausalLM) shares that class's code,
    # not its checkpoint config: the class's config class tells only its own architecture's model_type
    if isinstance(ref, ClassRef) and ref.name == arch:
        found = config_class_of(resolver, ref)
        if found is not None:
            got = model_type_of_config(resolver, registry, found[0], transformers)
            if got is not None:
                mt, how = got
                text = alias.get("text_model_type") if alias and alias.get("model_type") == mt else None
                return mt, text or mt, f"{found[1]}; {how}"
    if alias:
        return alias.get("model_type"), alias.get("text_model_type"), "alias table"
    transformers = transformers() if callable(transformers) else transformers
    hit = _arch_model_type(transformers, arch)
    if hit is not None:
        return hit, hit, f"transformers' model mappings map {hit} to {arch}"
    mt = derive_model_type(arch)
    return mt, mt, GUESSED


class ModelTypeFacts(FactProvider):
    """``(model_type, text model_type, how)`` of a registry architecture (the key), as
    :func:`infer_model_type` finds it with the alias table (``targets.toml``) and the
    transformers at hand (:class:`auditor.hf.configs.TransformersFacts`, asked only
    when the tree's own config classes do not tell)."""

    DEPENDS_ON = (TransformersFacts,)

    @classmethod
    def compute(cls, ctx, key: str) -> tuple[str, str, str]:
        from auditor.hf.targets import load_alias_table

        return infer_model_type(ctx.resolver, ctx.registry, key, load_alias_table(),
                                lambda: ctx.get(TransformersFacts).configs)
