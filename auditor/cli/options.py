"""The options the commands share, and the format enums."""

from __future__ import annotations

from enum import Enum

import typer

from auditor.cli.files import stdout_dash


class Format(str, Enum):
    """Output formats of ``scan``."""
    table = "table"
    json = "json"
    markdown = "markdown"
    sarif = "sarif"
    junit = "junit"


class ExplainFormat(str, Enum):
    """Output formats of ``explain``."""
    table = "table"
    json = "json"


class RulesFormat(str, Enum):
    """Output formats of ``rules``."""
    table = "table"
    json = "json"
    markdown = "markdown"


#: What ``--method`` accepts, on every command (those that audit several methods also take ``all``).
_METHOD_CHOICES = "eagle3|eagle|mtp"


def method_opt(all_ok: bool):
    """``--method``: the same choices on every command; ``all_ok`` adds ``all``."""
    return typer.Option(
        None, "--method", metavar=_METHOD_CHOICES + ("|all" if all_ok else ""), show_default=False,
        help="Speculative method: eagle3, eagle or mtp (vLLM's older MTP method strings such as deepseek_mtp "
        "are read as mtp)" + ("; all: each of them" if all_ok else "; one method") + ". Default: methods in "
        "[tool.eagle-audit], else eagle3.")


def model_opt(default_help: str = "every architecture in the registry"):
    return typer.Option(
        [], "--model", "-m", metavar="NAME", show_default=False,
        help="Target: an architecture (DeepseekV3ForCausalLM) or a model_type (kimi_k2, qwen3_moe). "
        f"Repeatable. Default: models in [tool.eagle-audit], else {default_help}.")


def model_type_opt():
    return typer.Option(None, "--model-type", metavar="TYPE", show_default=False,
                        help="The targets' text model_type that vLLM's allowlist checks (default: inferred, and "
                        "the report says how).")


def hf_config_opt():
    return typer.Option(None, "--hf-config", metavar="FILE|DIR", show_default=False,
                        help="The checkpoint's config.json, or the checkpoint folder that holds it: "
                        "architectures, model_type, text_config.model_type.")


#: How ``-o`` help names each format's suffix.
_SUFFIX_HELP = {"table": ".txt table", "json": ".json", "markdown": ".md markdown", "sarif": ".sarif",
                "junit": ".xml JUnit", "html": ".html page"}


def output_opt(choices: type[Enum], what: str = "the report"):
    """``-o``: its help lists only the suffixes of the formats in ``choices`` (the command's format enum)."""
    suffixes = ", ".join(_SUFFIX_HELP[c.value] for c in choices)
    return typer.Option(None, "--output", "-o", metavar="FILE", show_default=False, callback=stdout_dash,
                        help=f"Write {what} to FILE (- or absent: stdout). Its suffix names the format when "
                        f"--format is absent: {suffixes}.")


def no_cache_opt():
    return typer.Option(False, "--no-cache", help="Do not read or write the index cache.")


def no_progress_opt():
    return typer.Option(False, "--no-progress", help="No progress bars.")


def python_opt():
    return typer.Option(
        None, "--python", metavar="PYTHON", show_default=False,
        help="Without PATH: audit the vllm (or sglang) installed in the environment of this interpreter (or "
        "environment folder), found from its layout; the interpreter is never run. Default: the activated "
        "environment (VIRTUAL_ENV, CONDA_PREFIX), else eagle-audit's own.")


def config_opt():
    return typer.Option(None, "--config", metavar="FILE", show_default=False,
                        help="Read [tool.eagle-audit] from this pyproject.toml (default: the nearest one with "
                        "that table, from the working folder up).")


def no_config_opt():
    return typer.Option(False, "--no-config", help="Read no pyproject.toml: flags and defaults only.")


def pp_opt():
    return typer.Option(None, "--pipeline-parallel-size", "-pp", min=1, max=1024, metavar="N",
                        help="The target's pipeline-parallel size, as in vllm serve (default 1).",
                        show_default=False)


def draft_config_opt():
    return typer.Option(None, "--draft-config", metavar="FILE|DIR", help="The drafter checkpoint's config.json "
                        "(or its folder): its architectures (rewritten as the release rewrites EAGLE drafters) and "
                        "eagle_aux_hidden_state_layer_ids.", show_default=False)


def parallel_drafting_opt():
    return typer.Option(None, "--parallel-drafting/--no-parallel-drafting",
                        help="The speculative config's parallel_drafting (default off).", show_default=False)


def num_spec_opt():
    return typer.Option(None, "--num-speculative-tokens", min=1, max=1024, metavar="N",
                        help="The speculative config's num_speculative_tokens (where a gate depends on it).",
                        show_default=False)


PathArg = typer.Argument(
    None, metavar="PATH",
    help="vLLM (or SGLang) tree: a package folder (site-packages/vllm), a source checkout, or a release archive "
    "(.tar.gz / .whl, read in place). Omit it to audit the installed vllm (see --python).",
    show_default=False,
)


VersionOpt = typer.Option(
    None, "--vllm-version", help="Fetch this vLLM release's source archive through pip's configured index "
    "(sha256-checked, cached) and audit it.", metavar="X.Y.Z",
)


SglangVersionOpt = typer.Option(
    None, "--sglang-version", help="Fetch this SGLang release through pip's configured index (its source "
    "archive, else the wheel for this Python; sha256-checked, cached) and audit it.", metavar="X.Y.Z",
)


class EngineOpt(str, Enum):
    """Serving engines."""
    vllm = "vllm"
    sglang = "sglang"


EngineOption = typer.Option(
    None, "--engine", metavar="vllm|sglang", help="The engine whose tree to read (default: detected from the tree, a vllm/ or an "
    "sglang/ package; vllm when it holds both).", show_default=False)


class PlatformOpt(str, Enum):
    """Platforms whose import-time branches to follow (``all``: each, and where verdicts differ)."""
    cuda = "cuda"
    rocm = "rocm"
    xpu = "xpu"
    cpu = "cpu"
    all = "all"


class OnePlatform(str, Enum):
    """One platform."""
    cuda = "cuda"
    rocm = "rocm"
    xpu = "xpu"
    cpu = "cpu"


_PLATFORM_HELP = ("The platform whose branches to follow where a model package picks its classes at import "
                  "time (if current_platform.is_rocm(): ...).")


def platform_opt(all_ok: bool = False):
    choices = PlatformOpt if all_ok else OnePlatform
    return typer.Option(choices.cuda, "--platform", metavar="|".join(c.value for c in choices),
                        help=_PLATFORM_HELP + (" all: audit every platform and show where verdicts differ." if all_ok else ""))


ForceOpt = typer.Option(False, "--force", help="Overwrite an existing output file.")


class VerifyFormat(str, Enum):
    """Output formats of ``verify``."""
    table = "table"
    json = "json"


class GateFormat(str, Enum):
    """Output formats of ``gate``."""
    table = "table"
    json = "json"
    markdown = "markdown"
    sarif = "sarif"
    junit = "junit"


class MatrixFormat(str, Enum):
    """Output formats of ``matrix``."""
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


SummaryOpt = typer.Option(
    None, "--summary", metavar="FILE", help="Also append the Markdown report to FILE (e.g. \"$GITHUB_STEP_SUMMARY\").",
    show_default=False)


class CompareFormat(str, Enum):
    """Output formats of ``compare``."""
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"
