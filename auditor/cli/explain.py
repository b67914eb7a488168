"""``eagle-audit explain``: the resolved class hierarchy of an architecture."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from auditor.cli.base import Command, app, open_auditor, run_settings
from auditor.cli.console import emit, fail, progress_enabled, with_progress
from auditor.cli.files import check_output, report_format
from auditor.render.renderers import RENDERERS
from auditor.cli.options import (
    EngineOpt, OnePlatform, PathArg, format_enum, format_opt, model_opt, option, output_opt, platform_opt
)


#: The formats of this command (one enum per distinct set of choices).
ExplainFormat = format_enum(*RENDERERS.formats("explain"))


@app.command(cls=Command, short_help="The resolved class hierarchy of an architecture.")
def explain(
    arch: Optional[str] = typer.Argument(None, metavar="ARCH", show_default=False,
                                         help="Architecture (DeepseekV3ForCausalLM) or model_type (kimi_k2; each of "
                                         "its architectures is explained). Default: --model."),
    path: Optional[str] = PathArg,
    vllm_version: Optional[str] = option("vllm_version"),
    sglang_version: Optional[str] = option("sglang_version"),
    python: Optional[str] = option("python"),
    model: List[str] = model_opt("give ARCH or --all"),
    all_archs: bool = typer.Option(False, "--all", help="Every registry architecture."),
    fmt: Optional[ExplainFormat] = format_opt(ExplainFormat),
    output: Optional[Path] = output_opt(ExplainFormat, "the explanation"),
    force: bool = option("force"),
    no_cache: bool = option("no_cache"),
    no_progress: bool = option("no_progress"),
    platform: OnePlatform = platform_opt(),
    engine: Optional[EngineOpt] = option("engine"),
    config: Optional[Path] = option("config"),
    no_config: bool = option("no_config"),
) -> None:
    """The resolved class hierarchy of an architecture: MRO with file:line, empty subclasses,
    protocol members and where each comes from, the holder model and its forward loop, and the
    import-time branches followed for the platform.

    Exit codes: 0 explained, 2 usage or input error (an unknown architecture, a bad tree), 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit explain DeepseekV3ForCausalLM --vllm-version 0.16.0
      eagle-audit explain kimi_k2 site-packages/vllm --format json
      eagle-audit explain --all --vllm-version 0.16.0 -o explain.json
    """
    import shlex

    from auditor.orchestration.explain import explain as do_explain
    from auditor.orchestration.explain import positional_is_tree

    if (arch and path is None and not (vllm_version or sglang_version or python)
            and positional_is_tree(arch, loose=all_archs)):
        arch, path = None, arch  # ``explain PATH``: the one positional is a tree, not a class name
    if all_archs and (arch or model):
        fail(f"--all takes no {'ARCH' if arch else '--model'}: it explains every architecture of the registry; "
             "give either --all or the architectures")
    settings = run_settings(config, no_config, models=model)
    names = [arch] if arch else ([] if all_archs else list(settings.models))
    if not names and not all_archs:
        fail(f"explain {path}: give the architecture to explain (eagle-audit explain ARCH {shlex.quote(path)}), --model NAME, "
             "or --all" if path else "give an architecture (or --model NAME, or models in [tool.eagle-audit]), "
             "or --all")
    check_output(output, "--output", force)
    fmt = report_format(fmt, output, ExplainFormat)
    auditor = open_auditor(path, vllm_version, no_progress, no_cache, platform=platform.value,
                           sglang_version=sglang_version, engine=engine, python=python)
    if all_archs:
        with_progress(progress_enabled(no_progress), "indexing modules", auditor.prefetch_all)
        infos = [do_explain(auditor, a) for a in auditor.registry.architectures()]
        emit("explain", fmt, infos, output)
        return
    archs: list[str] = []
    for name in names:
        found = [name]
        if name not in auditor.registry.entries:  # a model_type names its architectures, as in scan
            from auditor.hf.targets import resolve_targets

            # an unknown name: resolve_targets' error, as scan says it (closest architectures and
            # model_types, or how to give a Hugging Face repo id's config)
            from auditor.model.errors import UnknownModel

            try:
                found = [s.architecture for s in resolve_targets(auditor.registry, [name])]
            except UnknownModel as exc:
                from rules.registry import RULES

                gates = {r.GATE.lower() for r in RULES.values()} | {c.lower() for c in RULES}
                if name.lower() in gates:  # a gate's name or code, as scan's table shows them
                    what = "rule" if name.upper() in RULES else "gate"
                    fail(f"{exc}; {name} is a {what}: eagle-audit rules {name} explains it (explain takes a target)")
                raise
        archs += [a for a in found if a not in archs]
    infos = [do_explain(auditor, a) for a in archs]
    emit("explain", fmt, infos, output, one=len(infos) == 1)
