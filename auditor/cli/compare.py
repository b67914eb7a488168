"""``eagle-audit compare``: the same targets audited in vLLM and in SGLang, side by side."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from auditor.model.errors import AuditError
from auditor.cli.base import Command, app, check_method, check_sides, run_settings, shown_path
from auditor.cli.console import emit, fail, progress_enabled, say
from auditor.cli.files import check_output, report_format
from auditor.cli.nextsteps import compare_next_steps
from auditor.render.renderers import RENDERERS
from auditor.cli.options import (
    RUN_GROUP, expand_groups, format_enum, format_opt, method_opt, model_opt, option, output_opt
)


#: The formats of this command (one enum per distinct set of choices).
CompareFormat = format_enum(*RENDERERS.formats("compare"))


@app.command("compare", cls=Command, short_help="The same targets in vLLM and in SGLang, side by side.")
@expand_groups
def compare_cmd(
    model: List[str] = model_opt("give --model"),
    vllm_version: Optional[str] = typer.Option(
        None, "--vllm-version", help="The vLLM side: a release (fetched, cached) or a PATH (folder, .tar.gz, .whl).",
        metavar="X|PATH", show_default=False),
    sglang_version: Optional[str] = typer.Option(
        None, "--sglang-version", help="The SGLang side: a release (sdist, else the wheel for this Python; "
        "fetched, cached) or a PATH.", metavar="X|PATH", show_default=False),
    method: Optional[str] = method_opt(all_ok=False),
    model_type: Optional[str] = option("model_type"),
    hf_config: Optional[Path] = option("hf_config"),
    run_flags: dict = RUN_GROUP,
    fmt: Optional[CompareFormat] = format_opt(CompareFormat),
    output: Optional[Path] = output_opt(CompareFormat),
    force: bool = option("force"),
    no_cache: bool = option("no_cache"),
    no_progress: bool = option("no_progress"),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when no engine supports every target."),
    config: Optional[Path] = option("config"),
    no_config: bool = option("no_config"),
) -> None:
    """Where to serve: the same targets audited in vLLM and in SGLang, side by side (verdict and
    blocking gates per engine, with the reasons).

    Exit codes: 0 some engine supports every target, 1 none does (--exit-zero turns this into 0), 2 usage or input error, 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit compare -m kimi_k2 --vllm-version 0.16.0 --sglang-version 0.5.9
      eagle-audit compare -m qwen3_moe --vllm-version site-packages/vllm \\
                          --sglang-version 0.5.9
      eagle-audit compare -m kimi_k2 --vllm-version 0.16.0 \\
                          --sglang-version 0.5.9 -o compare.html
    """
    from auditor.hf.targets import load_hf_config
    from auditor.orchestration.compare import open_engine_side, run_compare

    if method is not None:
        check_method(method, all_ok=False)
    cfg = run_settings(config, no_config, models=model, methods=None if method is None else [method],
                       model_type=model_type, hf_config=hf_config, **run_flags)
    hf = load_hf_config(cfg.hf_config, cfg.label("hf_config")) if cfg.hf_config else None
    run = cfg.run_options()
    if not cfg.models and not (hf or {}).get("architectures"):
        fail("give --model NAME (or models in [tool.eagle-audit], pyproject.toml)")
    if not vllm_version or not sglang_version:
        fail("give both --vllm-version X|PATH and --sglang-version Y|PATH")
    check_output(output, "--output", force)
    fmt = report_format(fmt, output, CompareFormat)
    check_sides(("--vllm-version", vllm_version), ("--sglang-version", sglang_version))
    sides = []
    for engine, value in (("vllm", vllm_version), ("sglang", sglang_version)):
        try:
            sides.append((value, open_engine_side(engine, value, progress=progress_enabled(no_progress),
                                                  use_cache=not no_cache)))
        except AuditError as exc:
            fail(f"--{engine}-version {value}: {exc}")
    report = run_compare(cfg.models, sides, method=cfg.methods[0], model_type=cfg.model_type, hf_config=hf,
                         options=run, sources=cfg.sources(shown_path(cfg.path) if cfg.path else None))
    emit("compare", fmt, report, output)
    if not report.ok and fmt is not CompareFormat.json:  # never mixed with JSON's stream
        for line in compare_next_steps(report, cfg, run):
            say(line)
    raise typer.Exit(0 if report.ok or exit_zero else 1)
