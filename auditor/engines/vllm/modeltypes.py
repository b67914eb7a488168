"""A target's model_type, from what the tree says about its HF config class.

A class name is not a model_type (``Qwen3VLMoeForConditionalGeneration`` is ``qwen3_vl_moe``,
``HunYuanVLForConditionalGeneration`` is ``hunyuan_vl``). :func:`infer_model_type` takes it, in
order, from:

1. the config class the model binds its HF config to: ``config: Qwen3VLMoeConfig =
   vllm_config.model_config.hf_config`` in an ``__init__`` on the class's MRO, else the one config
   class its module imports from ``transformers.models.*`` or ``vllm.transformers_utils.configs``;
   that class's ``model_type`` attribute (vLLM's own config classes,
   ``vllm/transformers_utils/configs/*.py``, or a transformers source when one is given), else
   vLLM's ``_CONFIG_REGISTRY`` (``vllm/transformers_utils/config.py``, model_type → config class)
   read backwards, else transformers' ``CONFIG_MAPPING_NAMES`` read backwards, else the
   ``transformers.models.<model_type>`` package the class is imported from;
2. the alias table (:func:`auditor.engines.vllm.targets.load_alias_table`);
3. transformers' own model mappings (``MODEL_FOR_*_MAPPING_NAMES``, model_type → architecture)
   read backwards, when a transformers source is at hand (the Transformers modeling backend's
   rows are named for the checkpoint's architecture);
4. only then a guess from the class name, labelled :data:`GUESSED`.
"""

from __future__ import annotations

from auditor.engines.vllm.registry import Registry
from auditor.index.resolve import ClassRef, External, Resolver

#: The ``model_type_source`` of a model_type guessed from the architecture's name.
GUESSED = "guessed from the class name"

_CONFIG_MODULES = ("transformers.models.", "vllm.transformers_utils.configs")
_SUB_CONFIG_WORDS = ("Vision", "Audio", "Text", "Encoder", "Quantization", "Speech", "Projector", "Pretrained",
                     "PreTrained")


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
    m = resolver.tree.module(ref.module)
    if m is None:
        return None
    cands = []
    for name, b in m.bindings.items():
        if b.kind == "import" and name.endswith("Config") and (b.target[0] == "transformers"
                                                               or b.target[0].startswith(_CONFIG_MODULES)) \
                and not any(w in name for w in _SUB_CONFIG_WORDS):
            cands.append(name)
    if len(cands) == 1:
        t = resolver.resolve_name(ref.module, cands[0])
        if isinstance(t, (ClassRef, External)):
            return t, f"{m.path} imports the config class {cands[0]}"
    return None


def model_type_of_config(resolver: Resolver, registry: Registry, cfg: ClassRef | External,
                         transformers=None) -> tuple[str, str] | None:
    """``(model_type, how)`` of an HF config class, or None.

    Args:
        transformers: a :class:`auditor.engines.vllm.hfconfigs.TransformersConfigs` to read
            classes of ``transformers`` from, a function returning one (called only when a
            transformers class must be read), or None.
    """
    name = cfg.dotted.rsplit(".", 1)[-1]
    if isinstance(cfg, ClassRef):
        hit = resolver.lookup(cfg, "model_type")
        if hit is not None and isinstance(getattr(hit[1], "literal", None), str) and hit[1].literal:
            return hit[1].literal, f"model_type of {name}"
    for mt, val in registry.config_registry().items():
        vname = val if isinstance(val, str) else (val[1] if isinstance(val, tuple) and len(val) > 1 else None)
        if isinstance(vname, str) and vname.rsplit(".", 1)[-1] == name:
            return mt, f"vLLM's _CONFIG_REGISTRY maps {mt} to {name}"
    if isinstance(cfg, External) and cfg.name.startswith("transformers."):
        transformers = transformers() if callable(transformers) else transformers
        if transformers is not None:
            for mt, cname in transformers.names.items():
                if cname == name:
                    return mt, f"transformers' CONFIG_MAPPING_NAMES maps {mt} to {name}"
        parts = cfg.name.split(".")
        if len(parts) >= 4 and parts[1] == "models":
            return parts[2], f"{name} comes from transformers.models.{parts[2]}"
    return None


def infer_model_type(resolver: Resolver, registry: Registry, arch: str, aliases: dict,
                     transformers=None) -> tuple[str, str, str]:
    """``(model_type, text model_type, source)`` for a registry architecture (see the module
    docstring for the order). ``source`` says how it was found; a name guess says
    :data:`GUESSED`. ``transformers``: as for :func:`model_type_of_config`."""
    from auditor.engines.vllm.targets import derive_model_type

    ref = registry.class_ref(arch) if arch in registry.entries else None
    alias = aliases.get("architecture", {}).get(arch)
    if isinstance(ref, ClassRef):
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
    if transformers is not None and arch in transformers.architectures:
        mt = transformers.architectures[arch]
        return mt, mt, f"transformers' model mappings map {mt} to {arch}"
    mt = derive_model_type(arch)
    return mt, mt, GUESSED
