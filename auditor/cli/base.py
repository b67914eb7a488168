"""The typer application, its global options, and what every command does before its work: the
run's settings (``[tool.eagle-audit]`` merged with the flags), the flag checks shared by several
commands, and opening the tree the user named."""

from __future__ import annotations

import os

import sys
from pathlib import Path
from typing import List, Optional

import typer

from auditor.model.errors import AuditError
from auditor.cli.console import STATE, fail, progress_enabled, warn, warn_unverified
from auditor.cli.options import EngineOpt


app = typer.Typer(
    name="eagle-audit",
    help=(
        "Static compatibility auditor for speculative decoding (EAGLE-3, EAGLE-1/2, MTP) in vLLM and SGLang.\n\n"
        "Reads an engine source tree without importing it and tells, per target architecture and method, "
        "whether the engine will accept it and which gate blocks it, with file:line.\n\n"
        "Settings: [tool.eagle-audit] in pyproject.toml (scan, explain, fix, gate, matrix, compare; flags override it; --no-config "
        "ignores it).\n\n"
        "\b\n"
        "Examples:\n"
        "  eagle-audit scan --vllm-version 0.16.0 --model kimi_k2\n"
        "  eagle-audit explain DeepseekV3ForCausalLM --vllm-version 0.16.0\n"
        "  eagle-audit scan site-packages/vllm --format json\n"
        "  eagle-audit scan --python ~/serve/.venv/bin/python --method mtp"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
)


class Command(typer.core.TyperCommand):
    """A command whose help names each argument by its metavar alone (typer would add its Python
    type, ``[PATH] <str>``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, typer.core.TyperArgument):
                param.display_type_rich = lambda ctx: None


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("eagle-audit")
        except PackageNotFoundError:  # run from a checkout that is not installed
            v = "unknown (not installed)"
        sys.stdout.write(f"eagle-audit {v}\n")
        raise typer.Exit(0)


@app.callback()
def _global_options(
    show_version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                      help="Print the version of eagle-audit and exit."),
    debug: bool = typer.Option(False, "--debug", help="On an internal error, show the Python traceback "
                               "(also EAGLE_AUDIT_DEBUG=1)."),
    allow_unverified: bool = typer.Option(
        False, "--allow-unverified", help="Use a release archive whose package-index entry publishes no sha256 "
        "(reports then mark its source 'unverified'; also EAGLE_AUDIT_ALLOW_UNVERIFIED=1)."),
) -> None:
    STATE["debug"] = debug
    if allow_unverified:
        import os

        from auditor.source.digests import ALLOW_UNVERIFIED_ENV

        os.environ[ALLOW_UNVERIFIED_ENV] = "1"  # an environment variable: worker processes see it too


def run_settings(config: Optional[Path], no_config: bool, **flags):
    """The run's settings: ``[tool.eagle-audit]`` (``--config FILE``, else the nearest
    pyproject.toml; none with ``--no-config``) with the flags given in place of its values.
    Deprecated setting names are announced on stderr. Exit 2 on an invalid setting or flag."""
    from auditor.orchestration.config import load_settings

    cfg = load_settings(config, enabled=not no_config).merged(**flags)
    STATE["settings"] = cfg  # an unknown model the file named is blamed on the file and key
    if cfg.path is not None:  # said once: where the values no flag gave come from
        used = [f for f, _ in cfg.origins]
        what = f" (it gives {', '.join(_setting_key(f) for f in used)})" if used else " (every value it sets is " \
            "given by a flag)"
        # said once, when the command ends without an error (an error stays one line, and names
        # the file and key itself when the file gave the value)
        STATE["settings_note"] = (f"eagle-audit: settings: [tool.eagle-audit] of {shown_path(cfg.path)}{what}; "
                                   "--no-config ignores it")
    for note in cfg.deprecations:
        warn(note)
    return cfg


def _setting_key(field: str) -> str:
    """The key of the settings file that sets ``field`` (``model-type``)."""
    from auditor.orchestration.config import SETTINGS

    return next((st.key for st in SETTINGS if st.field == field), field)


def shown_path(path: Path) -> str:
    """``path`` relative to the working folder when it lies inside it, else as it is."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def source_labels(specs, settings):
    """``specs`` with each ``model_type_source`` naming the settings file and key when the file,
    not a flag, gave ``--model-type`` or ``--hf-config`` (``pyproject.toml model-type``)."""
    from auditor.orchestration.config import relabel_sources

    return relabel_sources(specs, settings.sources(shown_path(settings.path) if settings.path else None))


def renamed(old_value, old: str, new_value, new: str):
    """The value of an option given under its old name ``old`` (a deprecation warning on
    stderr) or its new name ``new``; both given is a usage error."""
    if old_value is None or old_value == []:
        return new_value
    if new_value is not None and new_value != []:
        fail(f"{old} is the old name of {new}: give only {new}")
    warn(f"{old} is deprecated; use {new}")
    return old_value


def check_method(value: str, all_ok: bool = True) -> list[str]:
    """``--method`` validated and expanded (``all``: eagle3, eagle and mtp); exit 2 when unknown."""
    from auditor.model.options import check_methods

    if value == "all" and not all_ok:
        fail("--method all is not accepted here: give one method")
    return list(check_methods([value], "--method"))


def check_model_type_flag(value: Optional[str]) -> None:
    """Refuse (exit 2) a ``--model-type`` that is not shaped like a model_type, before any work."""
    if value is not None:
        from auditor.model.inputs import check_model_type

        check_model_type(value, "--model-type")


def _read_as_path(path: str) -> str:
    """The hint for a PATH that reads like a model's name (``kimi_k2``: no folder separator, no
    archive suffix, nothing of that name here): it was taken as the tree to audit. Empty for
    anything else."""
    if "/" in path or os.sep in path or path.endswith((".tar.gz", ".tgz", ".whl", ".zip", ".py")) \
            or os.path.lexists(path):
        return ""
    return (f" ({path} was read as PATH, the tree to audit: a package folder, a checkout or an archive; a "
            f"target is named with --model {path}, e.g. eagle-audit scan --vllm-version 0.16.0 --model {path})")


def open_auditor(path: Optional[str], version: Optional[str], no_progress: bool, no_cache: bool,
                 transformers: Optional[str] = None, platform: str = "cuda", sglang_version: Optional[str] = None,
                 engine: Optional[EngineOpt] = None, python: Optional[str] = None):
    """The :class:`auditor.orchestration.scan.Auditor` of the tree the user named: a PATH, a
    ``--vllm-version``/``--sglang-version`` release, or the engine installed beside ``--python``.

    Args:
        path, version, sglang_version, python: the tree as given (at most one of them).
        no_progress, no_cache: ``--no-progress``, ``--no-cache``.
        transformers: ``--transformers`` (refused up front when the index does not have it).
        platform: the platform whose import-time branches to follow.
        engine: ``--engine`` (None: detected from the tree).

    Returns:
        The auditor, its progress bars on when stderr is a terminal.

    Errors: exit 2 (one line) for two trees given at once; an AuditError for a bad tree.
    """
    from auditor.orchestration.scan import Auditor, TransformersMissing, check_transformers, open_tree

    if path and version:
        fail("give either a PATH or --vllm-version, not both" + _read_as_path(path))
    if sglang_version and (path or version):
        fail(f"give either {'a PATH' if path else '--vllm-version'} or --sglang-version, not both"
             + (_read_as_path(path) if path else ""))
    if path and not os.path.lexists(path) and _read_as_path(path):
        fail(f"{path} does not exist" + _read_as_path(path))
    if python and (path or version or sglang_version):
        fail("--python locates an installed engine: give it without a PATH or a release version")
    missing = None
    if not transformers:
        from auditor.hf.configs import check_transformers_env

        check_transformers_env()  # refused like a --transformers that names no transformers
    if transformers:
        try:
            check_transformers(transformers)  # before the tree is fetched or read
        except TransformersMissing as exc:
            missing = exc  # refused once the tree says which releases it accepts (the suggestions)
    name = engine.value if engine is not None else None
    tree = open_tree(path, version, progress=progress_enabled(no_progress), use_cache=not no_cache,
                     sglang_version=sglang_version, engine=name, python=python)
    if missing is not None:
        check_transformers(transformers, tree.source.requirement("transformers"))
        raise missing
    warn_unverified(tree.source)
    a = Auditor(tree, transformers=transformers, platform=platform, engine=name)
    a.progress = progress_enabled(no_progress)
    return a


def one_codemods(files: List[Path]) -> Optional[Path]:
    """The one ``--codemods`` FILE given, or None; a repeated ``--codemods`` is refused (exit 2):
    a codemods file names all its targets, and ``fix`` with several ``--model`` writes one."""
    if len(files) > 1:
        fail(f"--codemods given {len(files)} times ({', '.join(f.name for f in files)}): give one file; "
             "write one for every target with eagle-audit fix --model A --model B ... --out-dir DIR")
    return files[0] if files else None


def check_sides(*sides: tuple[str, Optional[str]]) -> None:
    """Refuse, before either release is fetched or read, a side that is neither an existing path
    nor a release version (one line naming its option, exit 2); ``sides`` are ``(label, value)``,
    a None value skipped."""
    from auditor.orchestration.upgrade import side_kind

    for label, value in sides:
        if value is None:
            continue
        try:
            side_kind(value)
        except AuditError as exc:
            fail(f"{label} {value}: {exc}")


def open_release_side(label: str, value: str, no_progress: bool, no_cache: bool, platform: str = "cuda",
                      engine: Optional[str] = None):
    """One side of ``gate`` (``label`` names its option): the release ``value`` (a version or
    a PATH) opened by :func:`auditor.orchestration.upgrade.open_side`; exit 2 with one line naming
    the option when it cannot be opened."""
    from auditor.orchestration.upgrade import open_side

    try:
        side = open_side(value, progress=progress_enabled(no_progress), use_cache=not no_cache, platform=platform,
                         engine=engine)
    except AuditError as exc:
        fail(f"{label} {value}: {exc}")
    warn_unverified(side.tree.source)
    return side
