"""Validation of values that come from the user or from files the user hands in.

Every value that may end up written into a patched vLLM file, a file name or a terminal goes
through one of these checks at the input boundary (command-line flags, ``--hf-config``,
``--codemods`` files, ``[tool.eagle-audit]``), so that nothing downstream has to trust it.
"""

from __future__ import annotations

import re

from auditor.model.errors import AuditError

#: What a Hugging Face ``model_type`` looks like: a short identifier-like token
#: (``llama``, ``qwen3_vl_moe``, ``gpt_oss``, ``hunyuan_v1_dense``, ``xlm-roberta``). Upper case
#: is admitted for old remote-code configs (``RefinedWeb``). No quotes, spaces, brackets or
#: control characters, so a model_type can never change the meaning of the code it is written into.
MODEL_TYPE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def is_model_type(value: object) -> bool:
    """True when ``value`` is a string shaped like a model_type (see :data:`MODEL_TYPE_RE`)."""
    return isinstance(value, str) and MODEL_TYPE_RE.fullmatch(value) is not None


def check_model_type(value: object, label: str) -> str:
    """Return ``value`` when it is a valid model_type.

    Args:
        value: the candidate (from a flag, a JSON or TOML file).
        label: where it came from, for the message (``--model-type``, ``--codemods FILE``).

    Returns:
        ``value`` unchanged.

    Raises:
        AuditError: one line naming ``label`` and showing (a shortened, escaped form of) the value.
    """
    if is_model_type(value):
        return value  # type: ignore[return-value]
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise AuditError(f"{label}: {shown} is not a model_type (expected 1-64 letters, digits, '_', '.' or '-', "
                     "starting with a letter or digit, e.g. qwen3_moe)")
