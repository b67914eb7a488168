"""Targets as users name them: registry architectures, model_types (alias table
``auditor/hf/targets.toml``), a checkpoint's ``config.json``.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from auditor.model.errors import AuditError, UnknownModel
from auditor.model.inputs import check_model_type, checkpoint_config, read_json
from auditor.model.results import TargetSpec

_SUFFIXES = (
    "ForConditionalGeneration", "ForCausalLM", "LMHeadModel", "ForSequenceClassification",
    "ForTokenClassification", "ForEmbedding", "ForRewardModel", "Model",
)

#: an engine's registry (``entries``, ``architectures()``, ``class_ref(arch)``, …), read duck-typed
Registry = Any


def derive_model_type(arch: str) -> str:
    """The HF convention for a model_type from an architecture name:
    ``DeepseekV3ForCausalLM`` → ``deepseek_v3``, ``Qwen3NextForCausalLM`` → ``qwen3_next``."""
    stem = arch
    for suf in _SUFFIXES:
        if stem.endswith(suf) and stem != suf:
            stem = stem[: -len(suf)]
            break
    stem = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", stem)
    return stem.lower()


def load_alias_table() -> dict:
    """The alias table ``auditor/hf/targets.toml`` (model_type → targets, architecture → model_types)."""
    text = resources.files("auditor.hf").joinpath("targets.toml").read_text()
    return tomllib.loads(text)


def load_hf_config(path: str | Path, label: str = "--hf-config") -> dict:
    """Parse and validate a checkpoint's ``config.json`` (schema
    ``auditor/model/schemas/hf-config.json``: ``architectures`` a list of strings, ``model_type``
    a string shaped like a model_type, ``text_config`` an object; bounded size and nesting).
    ``path`` is the file or the checkpoint folder that holds it; ``label`` names where it came
    from in a message (the flag, or the settings file and key).

    Raises:
        AuditError: one line naming the file and the offending field, or a folder without a
            ``config.json``.
    """
    p = checkpoint_config(path, label)
    data = read_json(p, label, "hf-config")
    if data.get("model_type") is not None:
        check_model_type(data["model_type"], f"{label} {p}: model_type")
    tc = data.get("text_config")
    if isinstance(tc, dict) and tc.get("model_type") is not None:
        check_model_type(tc["model_type"], f"{label} {p}: text_config.model_type")
    return data


def resolve_targets(
    registry: Registry,
    names: Iterable[str],
    model_type: str | None = None,
    hf_config: dict | None = None,
) -> list[TargetSpec]:
    """Turn ``--model`` names (architectures or model_types), ``--model-type`` and a checkpoint
    config into target specs. No names and no config: every registry architecture.

    Raises:
        AuditError: a name that is neither an architecture nor a known model_type (the message
            lists the closest matches); a ``model_type`` (or one in ``hf_config``) that is not
            shaped like a model_type.
    """
    if model_type is not None:
        check_model_type(model_type, "--model-type")
    aliases = load_alias_table()
    names = list(names)
    specs: list[TargetSpec] = []
    if hf_config is not None:
        archs = [a for a in hf_config.get("architectures") or [] if isinstance(a, str)]
        if not archs and not names:
            raise AuditError("--hf-config names no architectures (its 'architectures' list is missing or empty): "
                             "pass --model NAME for the target")
        mt = hf_config.get("model_type")
        tc = hf_config.get("text_config") if isinstance(hf_config.get("text_config"), dict) else None
        tmt = (tc or {}).get("model_type") or mt
        for label, value in (("model_type", mt), ("text_config.model_type", tmt)):
            if value is not None:
                check_model_type(value, f"--hf-config: {label}")
        for a in archs:
            if a not in registry.entries:
                raise AuditError(f"--hf-config: architecture {a} is not in this tree's registry{_close(a, registry)}")
            specs.append(TargetSpec(a, mt, model_type or tmt, "--model-type" if model_type else "--hf-config"))
        if not names:
            return specs
    if not names:
        return [_arch_spec(a, aliases, model_type) for a in registry.architectures()]
    for name in names:
        if name in registry.entries:
            specs.append(_arch_spec(name, aliases, model_type))
            continue
        entry = aliases.get("model_type", {}).get(name)
        if entry:
            found = [t for t in entry["targets"] if t["architecture"] in registry.entries]
            if not found:
                raise AuditError(f"model_type {name!r}: none of its architectures is in this tree "
                                 f"({', '.join(t['architecture'] for t in entry['targets'])})")
            for t in found:
                specs.append(TargetSpec(t["architecture"], t.get("model_type"), model_type or t.get("text_model_type"),
                                        "--model-type" if model_type else "alias table"))
            continue
        derived = [a for a in registry.architectures() if derive_model_type(a) == name and not registry.entries[a].is_drafter]
        if derived:
            for a in derived:
                specs.append(TargetSpec(a, name, model_type or name, "--model-type" if model_type else "given model_type"))
            continue
        if "/" in name.strip("/"):  # a Hugging Face repo id (org/name): no hub is read
            repo = name.strip("/").rsplit("/", 1)[1]
            raise UnknownModel(name, f"unknown model {name!r}: a Hugging Face repo id, and eagle-audit reads no hub; give "
                             "the checkpoint's config.json (or its folder) with --hf-config, or its model_type or "
                             f"architecture with --model{_close(repo.lower().replace('-', '_'), registry)}")
        raise UnknownModel(name, f"unknown model {name!r}: not an architecture in this tree's registry nor a known "
                                 f"model_type{_close(name, registry)}")
    seen: set[str] = set()
    out = []
    for s in specs:
        if s.architecture not in seen:
            seen.add(s.architecture)
            out.append(s)
    return out


def _arch_spec(arch: str, aliases: dict, model_type: str | None) -> TargetSpec:
    """A spec for a registry architecture: with ``--model-type``, that text model_type; the
    model_types left None are inferred when the target is audited, from the tree
    (:func:`auditor.hf.modeltypes.infer_model_type`)."""
    if model_type:
        return TargetSpec(arch, None, model_type, "--model-type")
    return TargetSpec(arch, None, None, "")


def _spelling(name: str) -> str:
    """``name`` as :func:`close_names` compares it: lower case, without ``_``, ``-``, ``.`` or
    spaces (``Qwen3-MoE``, ``qwen3moe`` and ``qwen3_moe`` are one spelling)."""
    return "".join(c for c in name.lower() if c not in "_-. ")


def close_names(name: str, pool: list[str], same: Iterable[str] = (), n: int = 4) -> list[str]:
    """The names closest to ``name``, for a "did you mean" hint, compared as :func:`_spelling`
    writes them (case, ``_``, ``-`` and ``.`` set aside): first every name of ``pool`` or ``same``
    spelled the same (``qwen3moe`` → ``qwen3_moe``), then the nearest of ``pool`` by
    :func:`difflib.get_close_matches` over those spellings, else the names of ``pool`` that
    contain ``name``; at most ``n``, without repeats, in that order. ``same`` holds names offered
    only when spelled the same (the model_types derived from architecture names: many, and close
    to one another)."""
    want = _spelling(name)
    by: dict[str, list[str]] = {}
    for p in pool:
        by.setdefault(_spelling(p), []).append(p)
    out = [p for p in dict.fromkeys([*pool, *same]) if _spelling(p) == want]
    for key in difflib.get_close_matches(want, list(by), n=n, cutoff=0.5):
        out += [p for p in by[key] if p not in out]
    if not out:
        out = [p for p in pool if want and want in _spelling(p)]
    return out[:n]


def _close(name: str, registry: Registry) -> str:
    """The "did you mean" hint for a ``--model`` (or ``--hf-config`` architecture) the tree does
    not know, preferring what the commands that take ``--model`` audit, patch or run: targets.
    :func:`close_names` over the target rows' architectures and the alias table's model_types
    (with every name spelled the same, of any role, and the model_types derived from the target
    rows' names: ``qwen3_moe`` from ``Qwen3MoeForCausalLM``; of those spelled alike, only the one
    split the least: ``lla_ma`` from ``LLaMAForCausalLM``, which no config uses, is offered as its
    architecture beside ``llama``); when none is close, the nearest of
    those derived model_types, as their architectures (``LlamaForCausalLM`` for ``llama3``); after
    them, in the places left of four, the close rows of another role (a drafter, a pooling model:
    the registry's ``role``)."""
    archs = registry.architectures()
    targets = [a for a in archs if registry.role(a) == "target"]
    others = [a for a in archs if registry.role(a) != "target"]
    by_type: dict[str, list[str]] = {}
    for a in targets:
        by_type.setdefault(derive_model_type(a), []).append(a)
    derived = sorted(by_type)
    pool = targets + sorted(load_alias_table().get("model_type", {}))
    # of the derived model_types spelled alike, the one split the least is offered as it is
    # (``llama`` from ``LlamaForCausalLM``); the others are no names to type (``lla_ma`` from
    # ``LLaMAForCausalLM``, which no config uses) and are offered as their architectures
    want = _spelling(name)
    fewest: dict[str, int] = {}
    for t in derived:
        fewest[_spelling(t)] = min(fewest.get(_spelling(t), 99), t.count("_"))
    clean = [t for t in derived if t.count("_") == fewest[_spelling(t)]]
    spelled = [a for t in derived if t not in clean and _spelling(t) == want for a in by_type[t]]
    m = list(dict.fromkeys(spelled + close_names(name, pool, clean + others))) \
        or [a for t in close_names(name, derived) for a in by_type[t]]
    m = list(dict.fromkeys(m + close_names(name, others)))[:4]
    return f"; did you mean: {', '.join(m)}?" if m else ""
