"""EA318 ``platform-block-size``: the platform forces a KV-cache block size on an MLA target that
the drafter's attention backend refuses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from auditor.cache import cacheable
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions
from rules.base import AuditTarget, Context, Example, Rule
from rules.platform_block_size.facts import (BACKEND_EXTRACTOR, MLA_TYPES_EXTRACTOR, PLATFORM_CLASSES_EXTRACTOR,
                                             PLATFORM_EXTRACTOR, SELECT_EXTRACTOR)

_PLATFORM = '''"""A CPU platform (synthetic)."""
import torch


class CpuPlatform:
    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config):
        if attn_selector_config.use_mla:
            return "vllm.v1.attention.backends.mla.cpu_mla.CPUMLABackend"
        return AttentionBackendEnum.CPU_ATTN.get_path()

    @classmethod
    def check_and_update_config(cls, vllm_config):
        model_config = vllm_config.model_config
        cache_config = vllm_config.cache_config
        mla = model_config is not None and getattr(model_config, "use_mla", False)
        fast = mla and {fast}
        if mla and not fast:
            cache_config.block_size = 16
'''

_BACKENDS = {
    "vllm/v1/attention/backends/registry.py": '''"""Backends (synthetic)."""
import enum


class AttentionBackendEnum(enum.Enum):
    CPU_ATTN = "vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend"
''',
    "vllm/v1/attention/backends/cpu_attn.py": '''"""CPU attention (synthetic)."""


class CPUAttentionBackend:
    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None):
        return [MultipleOf(32)]
''',
    "vllm/v1/worker/utils.py": '''"""Worker helpers (synthetic)."""


def select_common_block_size(size, backends):
    if all(size % 32 == 0 for b in backends for s in b.get_supported_kernel_block_sizes()):
        return size
    raise ValueError(f"No common block size for {size}")
''',
    "vllm/platforms/__init__.py": '''"""Platforms (synthetic)."""


def cpu_platform_plugin():
    return "vllm.platforms.cpu.CpuPlatform"
''',
    "vllm/config/model.py": '''"""Model config (synthetic)."""


class ModelConfig:
    @property
    def use_mla(self):
        return self.is_deepseek_mla
''',
    "vllm/transformers_utils/model_arch_config_convertor.py": '''"""Config convertor (synthetic)."""


class Convertor:
    def is_deepseek_mla(self):
        return self.hf_text_config.model_type in ("deepseek_v3", "kimi_k2")
''',
}


def _tree(fast: str) -> dict[str, str]:
    return {"vllm/platforms/cpu.py": _PLATFORM.replace("{fast}", fast), **_BACKENDS}


@cacheable
@dataclass
class PlatformBlockSizeData:
    """EA318 details: the ``platform``, the ``size`` it forces, the drafter's ``backend`` (dotted)
    and the run-time conditions the tree cannot decide (``undecided``, their source texts)."""

    platform: str
    size: int
    backend: str
    undecided: list


def _eval(cond: list, model_type: str | None) -> tuple[bool | None, list]:
    """Kleene evaluation of a :class:`ForcedBlockSize` condition for an MLA target of
    ``model_type``: ``(value, undecided)``, ``undecided`` the ``(text, line)`` of the atoms the
    value rests on when it is None (an atom that cannot change the value is not named)."""
    op = cond[0]
    if op in ("and", "or"):
        (a, ua), (b, ub) = _eval(cond[1], model_type), _eval(cond[2], model_type)
        decisive = op == "or"  # True decides an or, False an and
        if a is decisive or b is decisive:
            return decisive, []
        if a is None or b is None:
            return None, ua + ub
        return not decisive, []
    if op == "not":
        v, u = _eval(cond[1], model_type)
        return (None if v is None else not v), u
    if op in ("mla", "true"):
        return True, []
    if op == "false":
        return False, []
    if op == "mt":
        return (None, [("the model_type", 0)]) if model_type is None else (model_type == cond[1], [])
    return None, [(cond[1], cond[2])]


def _mentions_mla(cond: list) -> bool:
    return cond[0] == "mla" or any(isinstance(c, list) and _mentions_mla(c) for c in cond[1:])


def _accepts(sizes: list, size: int) -> bool:
    """What ``_block_size_is_supported`` in ``vllm/v1/worker/utils.py`` tests: an int matches
    exactly, ``MultipleOf(b)`` any multiple of ``b``. An int that divides ``size`` is a fallback
    the worker tries against every backend, the MLA one included: accepted here too, so that the
    rule never reports a conflict it has not followed."""
    return any((k == "int" and (v == size or size % v == 0)) or (k == "multiple" and size % v == 0) for k, v in sizes)


class PlatformBlockSizeRule(Rule):
    """The platform's KV-cache block size for an MLA target, against the drafter's backend.

    What it does: for the run's ``--platform``, reads the block size its platform module forces
    on models that use MLA (``cache_config.block_size = 16`` under a test of ``use_mla``,
    ``vllm/platforms/cpu.py``), the attention backend the platform gives a model without MLA
    (the EAGLE drafter's: ``get_attn_backend_cls``) and the block sizes that backend's kernels
    take (``get_supported_kernel_block_sizes``). When the target's model_type is one of those
    that use MLA and the backend takes no such size, the worker cannot pick one block size for
    both (``select_common_block_size`` raises, ``vllm/v1/worker/utils.py``). Run-time conditions
    of the forcing (a hardware query such as AMX tiles, a user's option) leave it ``unknown``.
    """

    CODE = "EA318"
    GATE = "platform-block-size"
    NAME = "platform-forces-mla-block-size"
    SUMMARY = "the platform forces an MLA target's KV-cache block size, which the drafter's backend refuses (`--platform`)"
    WHY = (
        "vLLM 0.32.0's CPU platform sets block_size = 16 for a model that uses MLA unless the CPU has AMX tiles "
        "(vllm/platforms/cpu.py); the CPU attention backend that an EAGLE/EAGLE-3 drafter gets takes only multiples "
        "of 32 (vllm/v1/attention/backends/cpu_attn.py). Target and drafter then share no block size, and the "
        "worker raises 'No common block size' (vllm/v1/worker/utils.py) before the first step."
    )
    HOW_TO_FIX = (
        "Serve on hardware where the platform does not force that size (on CPU: one with AMX tiles), or on another "
        "platform; VLLM_MLA_DISABLE=1 runs the target without MLA. Not fixable by a model patch."
    )
    FIX_AVAILABLE = False
    METHODS = ("eagle", "eagle3")
    DATA = PlatformBlockSizeData
    VALID = [
        Example(_tree("False"), "LlamaForCausalLM", text_model_type="deepseek_v3",
                note="model_type deepseek_v3 on the default platform (cuda): the CPU platform module is not used"),
        Example(_tree("False"), "LlamaForCausalLM", options=RunOptions(platform="cpu"),
                note="a target without MLA keeps the backend's block size"),
    ]
    INVALID = [
        Example(_tree("False"), "LlamaForCausalLM", text_model_type="deepseek_v3",
                options=RunOptions(platform="cpu"), expect_severity=Severity.ERROR,
                note="model_type deepseek_v3 uses MLA: on this platform it gets 16, the drafter's backend takes "
                     "multiples of 32"),
        Example(_tree("torch.cpu._is_amx_tile_supported()"), "LlamaForCausalLM", text_model_type="deepseek_v3",
                options=RunOptions(platform="cpu"), expect_severity=Severity.UNKNOWN,
                note="forced only on CPUs without AMX tiles: the tree cannot say which CPU serves"),
    ]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        platform = target.options.platform
        module_path = f"vllm/platforms/{platform}.py"
        mt = target.text_model_type or target.model_type
        if mt is None or not _checkpoint_may_use_mla(target.hf_config):
            return
        mla = [f for _p, f in ctx.facts.found(MLA_TYPES_EXTRACTOR)]
        read = {name for f in mla if f[0] == "reads" for name in f[2]}
        if not any(f[0] == "list" and f[1] in read and mt in f[3] for f in mla):
            return
        classes = [c for _p, c in ctx.facts.found(PLATFORM_CLASSES_EXTRACTOR)
                   if c.rpartition(".")[0] == f"vllm.platforms.{platform}"]
        selects = ctx.facts.found(SELECT_EXTRACTOR)
        found = ctx.facts.found(BACKEND_EXTRACTOR)
        backends = [f for _p, f in found]
        for path, facts in ctx.facts.found(PLATFORM_EXTRACTOR):
            if path != module_path:
                continue
            for forced in facts.forced:
                if f"vllm.platforms.{platform}.{forced.cls}" not in classes:
                    continue  # not the class the platform package loads for this platform
                default = facts.default_backend.get(forced.cls)
                if not _mentions_mla(forced.cond) or default is None or not selects:
                    continue
                _line, enum, member = default
                dotted = member if not enum else next(
                    (b.members[f"{enum}.{member}"] for b in backends if f"{enum}.{member}" in b.members), None)
                sizes = _sizes_of(ctx, found, dotted)
                if sizes is None or _accepts(sizes[1], forced.size):
                    continue
                holds, undecided = _eval(forced.cond, mt)
                if holds is False:
                    continue
                undecided += [(text, line) for line, text in forced.others]
                sel_path, (sel_fn, sel_line) = selects[0]
                shown = ", ".join(f"{t} ({module_path}:{ln})" for t, ln in undecided[:4])
                base = (f"on {platform}, {forced.cls}.{forced.method} sets the KV-cache block size of a model that "
                        f"uses MLA to {forced.size} ({module_path}:{forced.line}; model_type {mt!r} uses MLA), and "
                        f"the drafter's attention backend {dotted.rpartition('.')[2]} takes only "
                        f"{_shown_sizes(sizes[1])} (get_supported_kernel_block_sizes): {sel_fn} raises "
                        f"({sel_path}:{sel_line}) before the first step")
                if holds is True and not undecided:
                    yield self.finding(Severity.ERROR, base, sel_path, sel_line, platform=platform,
                                       size=forced.size, backend=dotted, undecided=[])
                else:
                    yield self.finding(Severity.UNKNOWN, f"{base}. Whether the platform forces that size depends "
                                       f"on what the tree cannot decide: {shown}", sel_path, sel_line,
                                       platform=platform, size=forced.size, backend=dotted,
                                       undecided=[t for t, _ in undecided])
                return


def _checkpoint_may_use_mla(hf_config: dict | None) -> bool:
    """What the checkpoint's config.json says of MLA, as vLLM reads its text config
    (``vllm/config/model.py`` ``use_mla``: not for ``is_causal`` False;
    ``vllm/transformers_utils/model_arch_config_convertor.py`` ``is_deepseek_mla``: ``head_dim``
    not None when ``compress_ratios`` is set, else ``kv_lora_rank`` not None). Only a value the
    config.json states rules MLA out: a key it leaves out takes the config class's default, which
    sets ``kv_lora_rank`` and ``head_dim`` for the MLA model_types. Without a config.json: True."""
    if not isinstance(hf_config, dict):
        return True
    text = hf_config.get("text_config") if isinstance(hf_config.get("text_config"), dict) else hf_config
    if text.get("is_causal", True) is False:
        return False
    decider = "head_dim" if "compress_ratios" in text else "kv_lora_rank"
    return not (decider in text and text[decider] is None)


def _sizes_of(ctx: Context, found: list, dotted: str | None) -> list | None:
    """The ``(line, sizes)`` of backend class ``dotted`` (``pkg.module.Class``), read from the
    module Python imports for ``pkg.module`` (the tree's :meth:`path_of`: a package wins over a
    module beside it) only: a class of the same name in another module is another class."""
    if not dotted:
        return None
    module, _, name = dotted.rpartition(".")
    path = ctx.resolver.tree.path_of(module)
    return next((f.sizes[name] for p, f in found if p == path and name in f.sizes), None)


def _shown_sizes(sizes: list) -> str:
    return ", ".join(f"multiples of {v}" if k == "multiple" else str(v) for k, v in sizes)
