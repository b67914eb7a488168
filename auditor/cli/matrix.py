"""``eagle-audit matrix``: the verdicts of the targets across releases."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from auditor.model.errors import AuditError
from auditor.model.wording import count
from auditor.render.text import clean
from auditor.cli.base import Command, app, check_method, run_settings, shown_path
from auditor.cli.console import emit, append_summary, err_console, escape, fail, matrix_progress, progress_enabled, say
from auditor.cli.files import check_output, report_format
from auditor.cli.nextsteps import say_fetch_plan
from auditor.render.renderers import RENDERERS
from auditor.cli.options import (
    RUN_GROUP, EngineOpt, OnePlatform, expand_groups, format_enum, format_opt, method_opt, model_opt, option,
    output_opt, platform_opt
)


#: The formats of this command (one enum per distinct set of choices).
MatrixFormat = format_enum(*RENDERERS.formats("matrix"))


@app.command("matrix", cls=Command, short_help="Verdicts of the targets across releases.")
@expand_groups
def matrix_cmd(
    versions: Optional[str] = typer.Option(
        None, "--versions", help="Releases: a list (0.16.0,0.18.0), a range over released versions "
        "(0.12.0..0.33.0; A.. and ..B are open), or both, comma-separated.", metavar="SPEC", show_default=False),
    model: List[str] = model_opt("give --model"),
    method: Optional[str] = method_opt(all_ok=False),
    model_type: Optional[str] = option("model_type"),
    run_flags: dict = RUN_GROUP,
    jobs: Optional[int] = typer.Option(
        None, "--jobs", "-j", min=1, metavar="N", help="Worker processes auditing releases (default: the CPU "
        "count; 1: in this process).", show_default=False),
    fmt: Optional[MatrixFormat] = format_opt(MatrixFormat),
    output: Optional[Path] = output_opt(MatrixFormat),
    force: bool = option("force"),
    summary: Optional[Path] = option("summary"),
    no_cache: bool = option("no_cache"),
    no_progress: bool = option("no_progress"),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when no release listed supports "
                                   "every target."),
    platform: OnePlatform = platform_opt(),
    engine: EngineOpt = typer.Option(EngineOpt.vllm, "--engine", metavar="vllm|sglang", help="Whose releases: "
                                     "vllm (source archives) or sglang (source archives, else the wheel for this "
                                     "Python)."),
    config: Optional[Path] = option("config"),
    no_config: bool = option("no_config"),
) -> None:
    """Support matrix: one row per release with the verdict and blocking gates of each target; in bold, the first of the releases listed with native support (not the first ever released: widen --versions to find that).

    Archives are fetched in parallel and cached; releases with no source archive on the index are listed as skipped, with the reason.

    Exit codes: 0 some release listed supports every target (natively); 1 none of them does (every release has a target blocked, unknown, absent or skipped; --exit-zero turns this into 0); 2 usage or input error, or a release that could not be fetched or read (it is listed as skipped, with the error; the matrix is still written); 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit matrix --model kimi_k2 --versions 0.12.0..0.33.0
      eagle-audit matrix --model qwen3_moe --versions 0.16.0,0.18.0 --method mtp
      eagle-audit matrix --engine sglang -m kimi_k2 --versions 0.5.9.. -f json
      eagle-audit matrix -m kimi_k2 --versions 0.16.0..0.18.0 -o matrix.html
    """
    from auditor.orchestration.matrix import run_matrix

    if method is not None:
        check_method(method, all_ok=False)
    cfg = run_settings(config, no_config, models=model, versions=versions, methods=[method] if method else None,
                       model_type=model_type, **run_flags)
    if not cfg.versions:
        fail("give --versions SPEC (or versions in [tool.eagle-audit], pyproject.toml)")
    check_output(output, "--output", force)
    check_output(summary, "--summary", force, append=True)
    fmt = report_format(fmt, output, MatrixFormat)
    run = cfg.run_options(platform=platform.value)
    from auditor.orchestration.matrix import check_spec

    try:
        check_spec(cfg.versions)  # its form, before the package index is read or anything fetched
        report = matrix_progress(progress_enabled(no_progress), lambda cb: run_matrix(
            cfg.models, cfg.versions, method=cfg.methods[0], model_type=cfg.model_type, jobs=jobs,
            use_cache=not no_cache, progress=cb, platform=platform.value, options=run, engine=engine.value,
            sources=cfg.sources(shown_path(cfg.path) if cfg.path else None), on_plan=say_fetch_plan))
    except AuditError as exc:  # a SPEC from the settings file: name the file and the key, not the flag
        text = str(exc)
        fail(cfg.label("versions") + text[len("--versions"):] if text.startswith("--versions") else text)
    emit("matrix", fmt, report, output)
    if summary is not None:
        append_summary(RENDERERS.get("matrix", "markdown").text(report), summary)
    n = len(report.releases)  # one table row per release, one column per target
    say(f"eagle-audit matrix: {count(n, 'release')} × {count(len(report.architectures), 'target')} in "
        f"{report.seconds:.1f}s ({count(report.jobs, 'worker')})")
    for v, e in sorted(report.errors.items()):
        name = "vLLM" if engine is EngineOpt.vllm else "SGLang"
        err_console().print(f"[bold red]eagle-audit: error:[/bold red] {name} {escape(clean(v))}: {escape(clean(e))}",
                  highlight=False, soft_wrap=True)
    raise typer.Exit(2 if report.errors else 0 if exit_zero or report.first_all_supported else 1)
