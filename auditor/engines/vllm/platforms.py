"""The platforms vLLM picks model classes for, as data for the index's condition evaluation.

Newer model packages choose their implementation when imported (0.33.0
``vllm/models/deepseek_v4/__init__.py``, ``kimi_k3``, ``minimax_m3``): ``if
current_platform.is_rocm(): from .amd... elif current_platform.is_xpu(): ... else: from
.nvidia...``. ``current_platform`` is the platform object of ``vllm/platforms/__init__.py``; its
predicates are defined in ``vllm/platforms/interface.py`` (``is_cuda``, ``is_rocm``, ``is_xpu``,
``is_cpu``, ``is_tpu``, ``is_cuda_alike`` = CUDA or ROCm, ``is_out_of_tree``, ``is_unspecified``)
and ``device_type`` is set by each platform class (``"cuda"`` for CUDA and ROCm alike).

:func:`platform_conditions` gives, for one platform, the value of each of those expressions; the
resolver (:class:`auditor.index.resolve.Resolver`) uses them to follow the branch that runs.
"""

from __future__ import annotations

from auditor.model.options import PLATFORMS

_PREDICATES = ("is_cuda", "is_rocm", "is_xpu", "is_cpu", "is_tpu")
_DEVICE_TYPE = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "cpu": "cpu"}


def platform_conditions(platform: str) -> dict[str, object]:
    """Expression text → run-time value on ``platform`` (one of :data:`PLATFORMS`).

    Raises:
        ValueError: an unknown platform name.
    """
    if platform not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r} (one of {', '.join(PLATFORMS)})")
    out: dict[str, object] = {f"current_platform.{p}()": p == f"is_{platform}" for p in _PREDICATES}
    out["current_platform.is_cuda_alike()"] = platform in ("cuda", "rocm")
    out["current_platform.is_out_of_tree()"] = False
    out["current_platform.is_unspecified()"] = False
    out["current_platform.device_type"] = _DEVICE_TYPE[platform]
    return out
