"""The options of the command line, declared once (in the style of pylint's checker options).

:data:`OPTIONS` is the table: each :class:`Opt` is one option with its spellings, help, metavar,
typer keywords and the settings field of ``[tool.eagle-audit]`` it feeds
(:data:`auditor.orchestration.config.SETTINGS`; ``tests/test_cli_options.py`` keeps the two
equal). A command takes an option with ``option(name)``, or a whole group (:data:`RUN_GROUP`, the
run options) with one parameter that :func:`expand_groups` spreads into the options of the group
and gathers back into one dict of settings fields. The README's options table is generated from
the commands these parameters make (:func:`auditor.cli.helpdoc.options_markdown`).

Format enums: one per distinct set of choices (:func:`format_enum`), the ``-o`` suffix of each
format from :data:`auditor.render.registry.FORMATS`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import typer

from auditor.cli.files import stdout_dash
from auditor.render.registry import FORMATS


@dataclass(frozen=True)
class Opt:
    """One option of the command line.

    Attributes:
        name: the parameter name of the command functions (``model_type``).
        decls: its spellings (``--model``, ``-m``; ``--a/--no-a`` for a switch pair).
        help: its help text; ``{placeholders}`` are filled per command by :meth:`param`.
        annotation: its Python type, as typer reads it (for the options of a group).
        default: its default value (``[]`` for a repeatable option).
        keywords: the other keywords of ``typer.Option`` (metavar, min, max, show_default...).
        setting: the field of :class:`auditor.orchestration.config.Settings` it gives, or None.
    """

    name: str
    decls: tuple[str, ...]
    help: str
    annotation: Any = None
    default: Any = None
    keywords: Mapping[str, Any] = field(default_factory=dict)
    setting: Optional[str] = None

    def param(self, **fill: str) -> Any:
        """The typer parameter of this option, its help's placeholders filled with ``fill``."""
        return typer.Option(self.default, *self.decls, help=self.help.format(**fill) if fill else self.help,
                            **self.keywords)

    @property
    def flag(self) -> str:
        """Its long spelling (``--parallel-drafting`` for a switch pair)."""
        return self.decls[0].split("/")[0]


#: What ``--method`` accepts, on every command (those that audit several methods also take ``all``).
METHOD_CHOICES = "eagle3|eagle|mtp"

_NO_DEFAULT = {"show_default": False}

#: Every option more than one command takes, and the run options.
OPTIONS: dict[str, Opt] = {o.name: o for o in (
    Opt("python", ("--python",), "Without PATH: audit the vllm (or sglang) installed in the environment of this "
        "interpreter (or environment folder), found from its layout; the interpreter is never run. Default: the "
        "activated environment (VIRTUAL_ENV, CONDA_PREFIX), else eagle-audit's own.",
        keywords={"metavar": "PYTHON", **_NO_DEFAULT}),
    Opt("model", ("--model", "-m"), "Target: an architecture (DeepseekV3ForCausalLM) or a model_type (kimi_k2, "
        "qwen3_moe). Repeatable. Default: models in [tool.eagle-audit], else {default}.", default=[],
        keywords={"metavar": "NAME", **_NO_DEFAULT}, setting="models"),
    Opt("method", ("--method",), "Speculative method: eagle3, eagle or mtp (vLLM's older MTP method strings such "
        "as deepseek_mtp are read as mtp){which}. Default: methods in [tool.eagle-audit], else eagle3.",
        keywords={"metavar": METHOD_CHOICES, **_NO_DEFAULT}, setting="methods"),
    Opt("model_type", ("--model-type",), "The targets' text model_type that vLLM's allowlist checks (default: "
        "inferred, and the report says how).", keywords={"metavar": "TYPE", **_NO_DEFAULT}, setting="model_type"),
    Opt("hf_config", ("--hf-config",), "The checkpoint's config.json, or the checkpoint folder that holds it: "
        "architectures, model_type, text_config.model_type.", keywords={"metavar": "FILE|DIR", **_NO_DEFAULT},
        setting="hf_config"),
    Opt("pipeline_parallel_size", ("--pipeline-parallel-size", "-pp"), "The target's pipeline-parallel size, as "
        "in vllm serve (default 1).", Optional[int], keywords={"min": 1, "max": 1024, "metavar": "N", **_NO_DEFAULT},
        setting="pipeline_parallel_size"),
    Opt("draft_config", ("--draft-config",), "The drafter checkpoint's config.json (or its folder): its "
        "architectures (rewritten as the release rewrites EAGLE drafters) and eagle_aux_hidden_state_layer_ids.",
        Optional[Path], keywords={"metavar": "FILE|DIR", **_NO_DEFAULT}, setting="draft_config"),
    Opt("parallel_drafting", ("--parallel-drafting/--no-parallel-drafting",), "The speculative config's "
        "parallel_drafting (default off).", Optional[bool], keywords=_NO_DEFAULT, setting="parallel_drafting"),
    Opt("num_speculative_tokens", ("--num-speculative-tokens",), "The speculative config's num_speculative_tokens "
        "(where a gate depends on it).", Optional[int], keywords={"min": 1, "max": 1024, "metavar": "N", **_NO_DEFAULT},
        setting="num_speculative_tokens"),
    Opt("output", ("--output", "-o"), "Write {what} to FILE (- or absent: stdout). Its suffix names the format "
        "when --format is absent: {suffixes}.", keywords={"metavar": "FILE", "callback": stdout_dash, **_NO_DEFAULT}),
    Opt("force", ("--force",), "Overwrite an existing output file.", default=False),
    Opt("no_cache", ("--no-cache",), "Do not read or write the index cache.", default=False),
    Opt("transformers", ("--transformers",), "The transformers whose HF config classes to read: a folder, a "
        "wheel, an sdist, or a release version (one the index does not have is refused up front; it is fetched "
        "through pip's index only when a verdict needs it). Default: for an archive or release, the newest "
        "release that satisfies the tree's own transformers requirement (fetched, sha256-checked, cached); for a "
        "folder or an installed vllm, the transformers installed beside it, else here.",
        keywords={"metavar": "PATH|VERSION", **_NO_DEFAULT}),
    Opt("no_progress", ("--no-progress",),
        "No progress output: no bars on a terminal, and no plain progress lines when stderr is piped (verify writes "
        "one per phase).", default=False),
    Opt("config", ("--config",), "Read [tool.eagle-audit] from this pyproject.toml (default: the nearest one with "
        "that table, from the working folder up).", keywords={"metavar": "FILE", **_NO_DEFAULT}),
    Opt("no_config", ("--no-config",), "Read no pyproject.toml: flags and defaults only.", default=False),
    Opt("vllm_version", ("--vllm-version",), "Fetch this vLLM release's source archive through pip's configured "
        "index (sha256-checked, cached) and audit it.", keywords={"metavar": "X.Y.Z"}),
    Opt("sglang_version", ("--sglang-version",), "Fetch this SGLang release through pip's configured index (its "
        "source archive, else the wheel for this Python; sha256-checked, cached) and audit it.",
        keywords={"metavar": "X.Y.Z"}),
    Opt("engine", ("--engine",), "The engine whose tree to read (default: detected from the tree, a vllm/ or an "
        "sglang/ package; vllm when it holds both).", keywords={"metavar": "vllm|sglang", **_NO_DEFAULT}),
    Opt("platform", ("--platform",), "The platform whose branches to follow where a model package picks its "
        "classes at import time (if current_platform.is_rocm(): ...).{all}"),
    Opt("summary", ("--summary",), "Also append the Markdown report to FILE (e.g. \"$GITHUB_STEP_SUMMARY\").",
        keywords={"metavar": "FILE", **_NO_DEFAULT}),
)}

#: The run options (the speculative config and the parallelism a gate may depend on): one
#: parameter of a command (``run_flags: dict = RUN_GROUP``) that stands for all of them.
RUN_OPTIONS = ("pipeline_parallel_size", "draft_config", "parallel_drafting", "num_speculative_tokens")


def option(name: str, **fill: str) -> Any:
    """The typer parameter of the option ``name`` of :data:`OPTIONS` (``fill``: its help's placeholders).

    Raises:
        KeyError: no option of that name.
    """
    return OPTIONS[name].param(**fill)


def method_opt(all_ok: bool) -> Any:
    """``--method``: the same choices on every command; ``all_ok`` adds ``all``."""
    base = OPTIONS["method"]
    return dataclasses.replace(base, keywords={**base.keywords, "metavar": METHOD_CHOICES + ("|all" if all_ok else "")}
                               ).param(which="; all: each of them" if all_ok else "; one method")


def model_opt(default_help: str = "every architecture in the registry") -> Any:
    """``--model``: ``default_help`` says what a command audits without it."""
    return option("model", default=default_help)


def output_opt(choices: type[Enum], what: str = "the report") -> Any:
    """``-o``: its help lists only the suffixes of the formats in ``choices`` (the command's format enum)."""
    return option("output", what=what, suffixes=", ".join(FORMATS[c.value].help for c in choices))


def platform_opt(all_ok: bool = False) -> Any:
    """``--platform``: one platform (default cuda); ``all_ok`` adds ``all`` (every platform)."""
    choices = PlatformOpt if all_ok else OnePlatform
    base = OPTIONS["platform"]
    return dataclasses.replace(base, default=choices.cuda, keywords={"metavar": "|".join(c.value for c in choices)}
                               ).param(all=" all: audit every platform and show where verdicts differ." if all_ok
                                       else "")


@dataclass(frozen=True)
class Group:
    """A group of options a command takes as one parameter (see :func:`expand_groups`)."""

    names: tuple[str, ...]


#: The run options, as one parameter.
RUN_GROUP = Group(RUN_OPTIONS)


def expand_groups(fn: Callable) -> Callable:
    """``fn`` (a command function) with each parameter whose default is a :class:`Group` spread,
    in its place, into the options of the group (so ``--help`` lists them there), and their values
    gathered back into that parameter as one dict ``{settings field: value}``.

    Raises:
        KeyError: a group names an option :data:`OPTIONS` does not have.
    """
    sig = inspect.signature(fn, eval_str=True)
    params, groups = [], {}
    for p in sig.parameters.values():
        if isinstance(p.default, Group):
            groups[p.name] = p.default
            params += [inspect.Parameter(n, p.kind, default=OPTIONS[n].param(), annotation=OPTIONS[n].annotation)
                       for n in p.default.names]
        else:
            params.append(p)

    @functools.wraps(fn)
    def command(**kwargs):
        for pname, group in groups.items():
            kwargs[pname] = {OPTIONS[n].setting: kwargs.pop(n) for n in group.names}
        return fn(**kwargs)

    command.__signature__ = sig.replace(parameters=params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def format_enum(*choices: str) -> type[Enum]:
    """The enum of ``--format`` for these choices: one enum per distinct set (the same set, the
    same class), its members named like their values."""
    return _format_enum(tuple(choices))


@functools.cache
def _format_enum(choices: tuple[str, ...]) -> type[Enum]:
    return Enum("Format_" + "_".join(choices), {c: c for c in choices}, type=str)


def format_opt(choices: type[Enum]) -> Any:
    """``--format``/``-f`` with the choices of ``choices``."""
    return typer.Option(None, "--format", "-f", metavar="|".join(c.value for c in choices), show_default=False,
                        help="Output format (default: as the -o suffix says, else table).")


PathArg = typer.Argument(
    None, metavar="PATH",
    help="vLLM (or SGLang) tree: a package folder (site-packages/vllm), a source checkout, or a release archive "
    "(.tar.gz / .whl, read in place). Omit it to audit the installed vllm (see --python).",
    show_default=False,
)


class EngineOpt(str, Enum):
    """Serving engines."""
    vllm = "vllm"
    sglang = "sglang"


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
