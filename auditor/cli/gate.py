"""``eagle-audit gate``: before an upgrade, does the candidate release still work for the targets?"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from auditor.cli.base import (
    Command, app, check_sides, one_codemods, open_release_side, renamed, run_settings, shown_path
)
from auditor.cli.console import emit, append_summary, fail, progress_enabled, say, with_stages
from auditor.cli.files import check_output, report_format
from auditor.render.renderers import RENDERERS
from auditor.cli.options import (
    RUN_GROUP, EngineOpt, OnePlatform, expand_groups, format_enum, format_opt, method_opt, model_opt, option,
    output_opt, platform_opt
)


#: The formats of this command (one enum per distinct set of choices).
GateFormat = format_enum(*RENDERERS.formats("gate"))


@app.command("gate", cls=Command, short_help="Before an upgrade: does the candidate release still work?")
@expand_groups
def gate_cmd(
    candidate_version: Optional[str] = typer.Option(
        None, "--candidate-version", help="The release to upgrade to: a version (fetched, cached) or a PATH "
        "(folder, .tar.gz, .whl).", metavar="X|PATH", show_default=False),
    current_version: Optional[str] = typer.Option(
        None, "--current-version", help="The release in use, to report regressions: a version or a PATH.",
        metavar="X|PATH", show_default=False),
    candidate_old: Optional[str] = typer.Option(None, "--candidate", hidden=True, help="Deprecated: --candidate-version."),
    current_old: Optional[str] = typer.Option(None, "--current", hidden=True, help="Deprecated: --current-version."),
    model: List[str] = model_opt("those of the --codemods file"),
    codemods: List[Path] = typer.Option(
        [], "--codemods", metavar="FILE", help="The codemods file written by 'eagle-audit fix --out-dir', "
        "replayed on the candidate in memory (one file: fix with several --model writes one for them all).",
        show_default=False),
    method: Optional[str] = method_opt(all_ok=True),
    model_type: Optional[str] = option("model_type"),
    hf_config: Optional[Path] = option("hf_config"),
    run_flags: dict = RUN_GROUP,
    allow_warning: List[str] = typer.Option(
        [], "--allow-warning", metavar="GATE", show_default=False,
        help="A warning to accept (gate id such as stale-member, or rule code). Repeatable."),
    fail_on_warnings: Optional[bool] = typer.Option(
        None, "--fail-on-warnings/--no-fail-on-warnings", help="Break the gate on a warning that is not allowed "
        "(default: report it only).", show_default=False),
    fmt: Optional[GateFormat] = format_opt(GateFormat),
    output: Optional[Path] = output_opt(GateFormat),
    force: bool = option("force"),
    summary: Optional[Path] = option("summary"),
    no_cache: bool = option("no_cache"),
    no_progress: bool = option("no_progress"),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when the gate is broken."),
    platform: OnePlatform = platform_opt(),
    engine: Optional[EngineOpt] = typer.Option(
        None, "--engine", metavar="vllm|sglang", help="sglang: read the candidate and current versions as SGLang "
        "releases (PATHs: their engine is detected).", show_default=False),
    config: Optional[Path] = option("config"),
    no_config: bool = option("no_config"),
) -> None:
    """Pre-upgrade gate: does the CANDIDATE release still work for your targets?

    native: the candidate supports every target without patches (drop your codemods).

    patched: it does not, but your codemods apply cleanly and the patched candidate re-scans as supported.

    broken: a target is blocked and the codemods do not apply or do not suffice (the report names the gate and the codemod).

    With --current-version, regressions are reported too. Settings default to [tool.eagle-audit] in pyproject.toml; flags override them.

    Exit codes: 0 native or patched, 1 broken, 2 usage or input error, 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit gate -m kimi_k2 --current-version 0.16.0 \\
                       --candidate-version 0.18.0
      eagle-audit gate --candidate-version 0.17.1 --codemods \\
                       eagle-audit/kimi_k2.vllm-0.16.0.eagle3.codemods.json
      eagle-audit gate -f sarif -o gate.sarif   # settings: pyproject.toml
    """
    from auditor.hf.targets import load_hf_config
    from auditor.orchestration.upgrade import run_gate

    codemods = one_codemods(codemods)
    candidate_version = renamed(candidate_old, "--candidate", candidate_version, "--candidate-version")
    current_version = renamed(current_old, "--current", current_version, "--current-version")
    cfg = run_settings(config, no_config, models=model, candidate_version=candidate_version,
                       current_version=current_version, codemods=codemods,
                       methods=None if method is None else [method], model_type=model_type, hf_config=hf_config,
                       allow_warnings=allow_warning, fail_on_warnings=fail_on_warnings,
                       **run_flags)
    run = cfg.run_options(platform=platform.value)
    if not cfg.candidate_version:
        fail("give --candidate-version X|PATH (or candidate-version in [tool.eagle-audit], pyproject.toml)")
    check_output(output, "--output", force)
    check_output(summary, "--summary", force, append=True)
    fmt = report_format(fmt, output, GateFormat)
    if cfg.codemods is not None and not Path(cfg.codemods).is_file():
        fail(f"{cfg.label('codemods')}: no such file: {cfg.codemods}")
    if cfg.codemods is not None:
        from auditor.orchestration.fix import load_codemods

        load_codemods(cfg.codemods, cfg.label("codemods"))  # validated before any work
    hf = load_hf_config(cfg.hf_config, cfg.label("hf_config")) if cfg.hf_config else None
    name = engine.value if engine is not None else None
    check_sides((cfg.label("candidate_version"), cfg.candidate_version),
                (cfg.label("current_version"), cfg.current_version))
    cand = open_release_side(cfg.label("candidate_version"), cfg.candidate_version, no_progress, no_cache, platform.value,
                             name)
    cur = (open_release_side(cfg.label("current_version"), cfg.current_version, no_progress, no_cache, platform.value, name)
           if cfg.current_version else None)
    report = with_stages(
        progress_enabled(no_progress), "eagle-audit gate",
        lambda cb: run_gate(cand, cfg.models, candidate_spec=cfg.candidate_version, current=cur,
                            current_spec=cfg.current_version or "",
                            codemods=cfg.codemods, methods=cfg.methods, model_type=cfg.model_type, hf_config=hf,
                            allowed_warnings=cfg.allow_warnings, fail_on_warnings=cfg.fail_on_warnings,
                            options=run, progress=cb,
                            sources=cfg.sources(shown_path(cfg.path) if cfg.path else None)))
    report.config = cfg.path
    emit("gate", fmt, report, output, settings_file=cfg.path)
    if summary is not None:
        append_summary(RENDERERS.get("gate", "markdown").text(report), summary)
    if output is not None or fmt is not GateFormat.table:
        say(f"eagle-audit gate: {report.outcome.value}: {report.message()}")
    raise typer.Exit(0 if exit_zero else report.exit_code)
