"""How the server is started: the run options a verdict depends on besides the tree and the target.

A verdict is a property of (release, architecture, method) *and* of the run: ``vllm serve
--speculative-config '{"method": "mtp", ...}' --pipeline-parallel-size 2`` meets gates that
``--pipeline-parallel-size 1`` never reaches, and an EAGLE drafter checkpoint brings its own
``config.json``. :class:`RunOptions` is that run, as one typed record: the command line (``scan``,
``fix``, ``gate``, ``matrix``) and ``[tool.eagle-audit]`` build it, the rules read it
(``rules.base.AuditTarget.options``), and every result records it (``run_options`` in JSON).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from auditor.cache import cacheable
from auditor.model.errors import AuditError

#: The speculative methods eagle-audit audits, in report order (``all`` expands to these).
METHODS = ("eagle3", "eagle", "mtp")

#: Platforms the tool audits for (vLLM's model packages pick their classes per platform at import
#: time, see :mod:`auditor.engines.vllm.platforms`); ``cuda`` is what most users run (the default).
PLATFORMS = ("cuda", "rocm", "xpu", "cpu")
DEFAULT_PLATFORM = "cuda"


def effective_method(method: str) -> str:
    """The method a tree runs for a requested ``method``: ``eagle3``, ``eagle`` and ``mtp`` as
    they are; an older MTP method string (``deepseek_mtp``) is audited as ``mtp`` (whether the
    tree accepts that string is the ``mtp-draft`` gate's to say)."""
    return method if method in METHODS else "mtp"

#: vLLM's older MTP method strings (``deepseek_mtp``, ``qwen3_next_mtp``, …): a model_type-shaped
#: name ending in ``_mtp``. Whether a release still accepts one, and maps it to ``mtp``, is read
#: from that release (``rules/mtp_draft/facts.py``), never assumed here.
MTP_ALIAS_RE = re.compile(r"[a-z0-9][a-z0-9_]{0,58}_mtp")

#: Largest pipeline-parallel size accepted (vLLM has no limit; a typo such as 20000 is refused).
MAX_PIPELINE_PARALLEL_SIZE = 1024

#: Largest number of speculative tokens accepted.
MAX_SPECULATIVE_TOKENS = 1024


def is_method(value: object) -> bool:
    """True when ``value`` is a method eagle-audit audits (:data:`METHODS`) or an older vLLM MTP
    method string (:data:`MTP_ALIAS_RE`)."""
    return isinstance(value, str) and (value in METHODS or MTP_ALIAS_RE.fullmatch(value) is not None)


def method_family(value: str) -> str:
    """The method of :data:`METHODS` a requested method belongs to: itself, or ``mtp`` for an
    older MTP method string (``deepseek_mtp``; whether a release still accepts that string is its
    ``mtp-draft`` gate's to say). Used to tell whether an engine audits the method at all."""
    return value if value in METHODS or MTP_ALIAS_RE.fullmatch(value) is None else "mtp"


def check_methods(values: list[str] | tuple[str, ...], label: str) -> tuple[str, ...]:
    """Expand and validate requested methods: ``all`` is every method of :data:`METHODS`;
    repeats are dropped, order kept.

    Raises:
        AuditError: a value that is neither a method, an older MTP method string nor ``all``
            (one line naming ``label``).
    """
    out: list[str] = []
    for m in values:
        expanded = list(METHODS) if m == "all" else [m]
        for e in expanded:
            if not is_method(e):
                shown = repr(e) if len(repr(e)) <= 60 else repr(e)[:57] + "..."
                raise AuditError(f"{label}: unknown method {shown} (expected {', '.join(METHODS)}, all, "
                                 "or one of vLLM's older MTP method strings such as deepseek_mtp)")
            if e not in out:
                out.append(e)
    return tuple(out)


def check_pipeline_parallel_size(value: object, label: str) -> int:
    """Return ``value`` when it is a pipeline-parallel size (an int from 1 to
    :data:`MAX_PIPELINE_PARALLEL_SIZE`). Raises AuditError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PIPELINE_PARALLEL_SIZE:
        raise AuditError(f"{label}: expected a pipeline-parallel size from 1 to {MAX_PIPELINE_PARALLEL_SIZE}, "
                         f"got {value!r}")
    return value


def check_num_speculative_tokens(value: object, label: str) -> int:
    """Return ``value`` when it is a number of speculative tokens (1 to
    :data:`MAX_SPECULATIVE_TOKENS`). Raises AuditError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SPECULATIVE_TOKENS:
        raise AuditError(f"{label}: expected a number of speculative tokens from 1 to {MAX_SPECULATIVE_TOKENS}, "
                         f"got {value!r}")
    return value


def load_draft_config(path: str | Path, label: str = "--draft-config") -> tuple[dict, str]:
    """Read a drafter checkpoint's ``config.json`` (``path`` is the file or the checkpoint folder
    that holds it), validated against ``auditor/model/schemas/draft-config.json`` (the keys
    eagle-audit reads must have their form; other keys are kept as they are).

    Returns:
        ``(parsed config, the path of the file read)``.
    Raises:
        AuditError: no such file or folder, a folder without ``config.json``, not a regular
            file, too large, not JSON, too deep, not an object, or a key of the wrong form.
    """
    from auditor.model.inputs import checkpoint_config, read_json

    p = checkpoint_config(path, label)
    doc = read_json(p, label, "draft-config")
    return doc, str(p)  # type: ignore[return-value]


@cacheable
@dataclass(frozen=True)
class RunOptions:
    """The run a verdict assumes (see the module docstring).

    ``method``: the speculative method as requested (``eagle3``, ``eagle``, ``mtp``, or an older
    MTP method string such as ``deepseek_mtp``, which the release itself maps to ``mtp``);
    ``pipeline_parallel_size``: the target's ``--pipeline-parallel-size``;
    ``draft_config``: the drafter checkpoint's parsed ``config.json`` (``draft_config_path``: where
    it was read), None when not given; ``parallel_drafting`` and ``num_speculative_tokens``: the
    speculative config's fields of those names (None: not given); ``platform``: the platform
    whose import-time branches were followed.
    """

    method: str = "eagle3"
    pipeline_parallel_size: int = 1
    draft_config: dict | None = None
    draft_config_path: str | None = None
    parallel_drafting: bool = False
    num_speculative_tokens: int | None = None
    platform: str = "cuda"

    def with_method(self, method: str) -> "RunOptions":
        """These options for another method."""
        return dataclasses.replace(self, method=method)

    def with_platform(self, platform: str) -> "RunOptions":
        """These options on another platform."""
        return dataclasses.replace(self, platform=platform)

    @property
    def pipeline_parallel(self) -> bool:
        """True when the target is split into more than one pipeline stage."""
        return self.pipeline_parallel_size > 1

    def key(self) -> list:
        """Every field as JSON values (the draft config in full), for cache keys."""
        return [self.method, self.pipeline_parallel_size, self.draft_config, self.parallel_drafting,
                self.num_speculative_tokens, self.platform]

    def as_dict(self) -> dict:
        """The options as JSON-ready data (the draft config by its path and the keys read from it)."""
        dc = self.draft_config or {}
        return {
            "method": self.method,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "draft_config": self.draft_config_path,
            "draft_architectures": dc.get("architectures") if self.draft_config is not None else None,
            "parallel_drafting": self.parallel_drafting,
            "num_speculative_tokens": self.num_speculative_tokens,
            "platform": self.platform,
        }

    def flags(self) -> list[str]:
        """The command-line flags that give these options (those that differ from a default
        run, the method excepted), as argv items: ``["--pipeline-parallel-size", "2",
        "--draft-config", "d/config.json"]``; empty for the defaults."""
        out: list[str] = []
        if self.platform != "cuda":
            out += ["--platform", self.platform]
        if self.pipeline_parallel_size != 1:
            out += ["--pipeline-parallel-size", str(self.pipeline_parallel_size)]
        if self.draft_config_path:
            out += ["--draft-config", self.draft_config_path]
        if self.parallel_drafting:
            out.append("--parallel-drafting")
        if self.num_speculative_tokens is not None:
            out += ["--num-speculative-tokens", str(self.num_speculative_tokens)]
        return out

    def describe(self) -> str:
        """The options that differ from a default run, as a short text (``PP=2, draft config
        d/config.json, 3 speculative tokens per step``); empty for the
        defaults."""
        parts = []
        if self.pipeline_parallel:
            parts.append(f"PP={self.pipeline_parallel_size}")
        if self.draft_config_path:
            parts.append(f"draft config {self.draft_config_path}")
        if self.parallel_drafting:
            parts.append("parallel drafting")
        if self.num_speculative_tokens is not None:
            n = self.num_speculative_tokens  # in words: "k=3" left readers guessing
            parts.append(f"{n} speculative token{'' if n == 1 else 's'} per step")
        return ", ".join(parts)
