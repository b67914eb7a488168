"""``eagle-audit fix``: the patch that makes the targets pass (printed, written to ``--out-dir``,
or applied to a folder tree; ``--revert`` undoes an apply)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from auditor.model.wording import count
from auditor.render.fix import diffstat, fix_report
from auditor.render.text import clean
from auditor.cli.base import (
    Command, app, check_method, check_model_type_flag, one_codemods, open_auditor, renamed, run_settings,
    source_labels
)
from auditor.cli.console import (
    err_console, exit_on_internal_errors, fail, progress_enabled, say, with_stages, write_output
)
from auditor.cli.files import check_folder, check_output
from auditor.cli.nextsteps import dead_end_steps, tree_words
from auditor.cli.options import (
    RUN_GROUP, EngineOpt, OnePlatform, PathArg, expand_groups, method_opt, model_opt, option, platform_opt
)
from auditor.cli.verify import sigterm_interrupts, verify_applied
from auditor.workspace.backup import backup_home
from auditor.workspace.folder import FixRefused
from auditor.workspace.transaction import apply_to_folder, check_apply_target, revert_folder


@app.command("fix", cls=Command, short_help="Write the patch that makes the targets pass.")
@expand_groups
def fix_cmd(
    path: Optional[str] = PathArg,
    vllm_version: Optional[str] = option("vllm_version"),
    sglang_version: Optional[str] = option("sglang_version"),
    python: Optional[str] = option("python"),
    model: List[str] = model_opt("give --model or --codemods"),
    model_type: Optional[str] = option("model_type"),
    hf_config: Optional[Path] = option("hf_config"),
    method: Optional[str] = method_opt(all_ok=False),
    run_flags: dict = RUN_GROUP,
    out_dir: Optional[Path] = typer.Option(
        None, "--out-dir", metavar="DIR", show_default=False,
        help="Write DIR/<name>.patch and DIR/<name>.codemods.json instead of printing the diff."),
    out_old: Optional[Path] = typer.Option(None, "--out", hidden=True, help="Deprecated: --out-dir."),
    codemods: List[Path] = typer.Option(
        [], "--codemods", metavar="FILE", show_default=False,
        help="Replay a codemods file written by --out-dir on this tree (re-planned from its scan)."),
    apply: bool = typer.Option(False, "--apply", help="Edit the folder tree in place (atomic writes, backup kept)."),
    revert: bool = typer.Option(False, "--revert", help="Restore the files changed by the last --apply on this tree (PATH, or the vllm "
                                "of --python ENV, as --apply took it)."),
    verify_run: bool = typer.Option(
        False, "--verify", help="With --apply on an installed vLLM: RUN the engine on the patched tree (as "
        "eagle-audit verify does) and revert on its own when the engine does not prove every target."),
    timeout: float = typer.Option(600.0, "--timeout", min=10, max=86400, metavar="SECONDS",
                                  help="With --verify: the limit per target."),
    dtype: str = typer.Option("bfloat16", "--dtype", metavar="bfloat16|float32", help="With --verify: the dtype "
                              "of the tiny models."),
    force: bool = typer.Option(False, "--force", help="With --out-dir: overwrite existing patch and codemods files."),
    no_cache: bool = option("no_cache"),
    transformers: Optional[str] = option("transformers"),
    no_progress: bool = option("no_progress"),
    platform: OnePlatform = platform_opt(),
    engine: Optional[EngineOpt] = option("engine"),
    config: Optional[Path] = option("config"),
    no_config: bool = option("no_config"),
) -> None:
    """Write the patch that makes the targets pass every gate of the method (EAGLE-3 unless --method
    says eagle or mtp): a unified diff on stdout
    (dry run, the default), DIR/<name>.patch plus a re-runnable codemods file (--out-dir), or the
    tree itself (--apply; --revert undoes it). Nothing is written unless the patched tree,
    re-scanned in memory, gives supported for every target.

    Exit codes: 0 patch produced (or nothing to do), 1 some gate cannot be fixed automatically
    (nothing written; the report says why), 2 usage error or refused write, 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit fix --model kimi_k2 --vllm-version 0.16.0 > kimi_k2.patch
      eagle-audit fix --model kimi_k2 --vllm-version 0.16.0 --out-dir eagle-audit
      eagle-audit fix site-packages/vllm --apply --codemods \\
                      eagle-audit/kimi_k2.vllm-0.16.0.eagle3.codemods.json
      eagle-audit fix --revert site-packages/vllm
    """
    from auditor.hf.targets import resolve_targets
    from auditor.orchestration import fix as fx

    out_dir = renamed(out_old, "--out", out_dir, "--out-dir")
    codemods = one_codemods(codemods)
    if apply and out_dir is not None:
        fail("give one of --out-dir DIR (write the patch and codemods files) or --apply (edit the tree), not both")
    if verify_run and not apply:
        fail("--verify runs the engine on the tree --apply patched: give --apply too")
    if revert:
        if apply or out_dir or codemods or model or vllm_version or sglang_version:
            fail("--revert takes only the PATH of the tree to restore (or --python, as --apply did)")
        _revert(path, python)
    if method is not None:
        check_method(method, all_ok=False)
    if codemods and model:
        fail("give either --model or --codemods, not both")
    check_model_type_flag(model_type)
    if codemods and hf_config:
        fail("give either --hf-config or --codemods, not both (the codemods file names its targets)")
    settings = run_settings(config, no_config, models=None if codemods else model,
                            methods=None if method is None else [method], model_type=model_type, hf_config=hf_config,
                            **run_flags)
    method, model_type = settings.methods[0], settings.model_type
    model = [] if codemods else list(settings.models)
    loaded = fx.load_codemods(codemods) if codemods else None  # validated before any work
    from auditor.hf.targets import load_hf_config

    hf = (load_hf_config(settings.hf_config, settings.label("hf_config")) if settings.hf_config and not codemods
          else None)
    if out_dir is not None:
        _check_out_dir(out_dir, force, fx.out_name, codemods, model, hf, vllm_version, sglang_version,
                       loaded[1] if loaded else method)
    auditor = open_auditor(path, vllm_version, no_progress, no_cache, transformers, platform=platform.value,
                           python=python, sglang_version=sglang_version, engine=engine)
    # DIR/<targets>.vllm-<release>.<method>.patch: the patches of two releases or methods never collide
    named = model or [a for a in (hf or {}).get("architectures") or [] if isinstance(a, str)]  # --hf-config alone
    name = fx.out_name(codemods, named, auditor.engine.name, auditor.tree.version(), loaded[1] if loaded else method)
    if out_dir is not None:
        check_output(out_dir / f"{name}.patch", "--out-dir", force, make_folders=True)
        check_output(out_dir / f"{name}.codemods.json", "--out-dir", force, make_folders=True)
    only = None
    if loaded is not None:
        specs, method, only = loaded
        missing = [s.architecture for s in specs if s.architecture not in auditor.registry.entries]
        if missing:
            fail(f"--codemods: {', '.join(missing)} not in this tree's registry")
    elif model or hf is not None:
        specs = source_labels(resolve_targets(auditor.registry, model, model_type, hf), settings)
    else:
        fail("give --model NAME (or --hf-config with the checkpoint's architectures, --codemods FILE, or --revert)")
    root = auditor.tree.source.root()
    if apply and root is None:
        fail("--apply needs a folder tree (an archive cannot be edited in place); use --out-dir and patch -p1")
    home = backup_home(root, Path(path) if path else None, auditor.tree.source.package) if apply else None
    if apply:
        check_apply_target(root, home)  # refused before the work
    run = settings.run_options(method, platform.value)
    result = with_stages(progress_enabled(no_progress), "eagle-audit fix",
                         lambda cb: fx.plan_fix(auditor, specs, method, only, run, hf, progress=cb))
    _stop_unless_fixed(result, lambda: dead_end_steps(
        auditor, specs, [] if loaded else model, method, model_type, hf, None if loaded else settings.hf_config, run,
        platform.value, tree_words(path, vllm_version, sglang_version, python), progress_enabled(no_progress)),
        auditor.engine.name)
    say(fix_report(result))
    say(f"{diffstat(result)} (checked: re-scan gives supported; {result.seconds:.1f}s; "
        f"{'the engine runs it next' if verify_run else _not_run(auditor.engine)})")
    if out_dir is None and not apply:
        diff = result.diff()
        sys.stdout.write(clean(diff, multiline=True) if sys.stdout.isatty() else diff)  # a pipe gets the exact patch
        raise typer.Exit(0)
    if out_dir is not None:
        write_output(result.diff(), out_dir / f"{name}.patch")
        write_output(json.dumps(result.codemods_document(), indent=2), out_dir / f"{name}.codemods.json")
        say(f"apply {out_dir / (name + '.patch')} from the folder that contains {auditor.engine.package}/ with "
            f"patch -p1 or git apply; replay {out_dir / (name + '.codemods.json')} on another release with "
            "fix --codemods FILE or gate --codemods FILE")
    if apply:
        _apply(root, result, home)
        if verify_run:
            raise typer.Exit(verify_applied(python, root, home, specs, method, run, hf, timeout, dtype, no_progress))
    raise typer.Exit(0)


def _revert(path: Optional[str], python: Optional[str]) -> None:
    """``fix --revert``: restore the files the last ``--apply`` changed in the folder tree
    ``path`` (or the vllm of ``--python``), then exit 0; exit 2 with one line when refused."""
    if python is not None and not path:
        # the vllm package --apply --python patched
        from auditor.model.errors import AuditError
        from auditor.orchestration.verify import locate_engine

        try:
            path = str(locate_engine(python).site_packages / "vllm")
        except AuditError as exc:
            fail(str(exc))
    if not path or not Path(path).is_dir():
        fail("--revert needs the PATH of the folder tree that --apply changed")
    from auditor.source.folder import FolderSource

    src = FolderSource(path)
    root = src.root()
    sigterm_interrupts()
    try:
        bdir, paths = revert_folder(root, backup_home(root, Path(path), src.package))
    except FixRefused as exc:
        fail(str(exc))
    err_console().print(f"restored {count(len(paths), 'file')} from {clean(bdir)}", markup=False, highlight=False)
    raise typer.Exit(0)


def _check_out_dir(out_dir: Path, force: bool, out_name, codemods, model, hf, vllm_version, sglang_version,
                   method: str) -> None:
    """Refuse, before any work, an ``--out-dir`` that is no folder or cannot be created, and with
    a release version (the files' names known before it is fetched) files that exist without
    ``--force``. ``out_name`` is :func:`auditor.orchestration.fix.out_name`."""
    try:
        if out_dir.exists() and not out_dir.is_dir():
            fail(f"--out-dir {out_dir} is not a folder")
    except OSError as exc:
        fail(f"--out-dir {out_dir}: {exc.strerror or exc}")
    check_folder(out_dir, "--out-dir")
    given = vllm_version or sglang_version
    if given:  # the files' names are known before the release is fetched: refused before it
        early = out_name(codemods, model or [a for a in (hf or {}).get("architectures") or [] if isinstance(a, str)],
                         "vllm" if vllm_version else "sglang", given, method)
        check_output(out_dir / f"{early}.patch", "--out-dir", force, make_folders=True)
        check_output(out_dir / f"{early}.codemods.json", "--out-dir", force, make_folders=True)


def _stop_unless_fixed(result, dead_end, engine: str) -> None:
    """Print the account of a fix that is not written and exit: 3 when the audit failed inside
    the tool, 0 when every target is already supported, 1 when not fixed (with the next steps
    ``dead_end()`` gives, when a gate whose codemod exists cannot be patched in this tree).
    Returns only when the fix is ok."""
    from auditor.orchestration.fix import FixOutcome

    outcome = result.outcome
    if outcome is FixOutcome.FAILED:
        say(fix_report(result))
        err_console().print("[bold red]not fixed:[/bold red] nothing was written", highlight=False)
        exit_on_internal_errors(result.failed_inside)
    if outcome is FixOutcome.ALREADY_SUPPORTED:
        say(fix_report(result))
        err_console().print("every target is already supported: nothing to change (empty diff)", highlight=False)
        raise typer.Exit(0)
    if outcome is FixOutcome.NOT_FIXED:
        say(fix_report(result))
        err_console().print("[bold red]not fixed:[/bold red] nothing was written", highlight=False)
        from auditor.orchestration.elsewhere import codemod_exists

        # a dead end (a gate whose codemod exists cannot be patched here): where to go instead
        if not result.problems and any(u.codemod is None and codemod_exists(u.gate, engine)
                                       for u in result.unfixable):
            for line in dead_end():
                say(line)
        raise typer.Exit(1)


def _apply(root, result, home) -> None:
    """``fix --apply``: write the patch into the folder tree (atomic writes, originals kept) and
    say how to undo it; exit 2 with one line when refused."""
    sigterm_interrupts()
    try:
        bdir = apply_to_folder(root, result, home)
    except FixRefused as exc:
        fail(str(exc))
    from auditor.model.wording import shell_quote

    # the paths on one line each (a newline in a folder name must not forge report lines);
    # the undo command is quoted for the shell instead
    say(f"applied to {clean(str(home))}; originals kept in {clean(str(bdir))}; undo with: eagle-audit fix --revert "
        f"{shell_quote(home)}")


def _not_run(engine) -> str:
    """How the fix report says the patch was not run by ``engine`` (an
    :class:`auditor.engines.base.Engine`), and what would run it."""
    if engine.verifiable:
        return "not run by the engine: fix --apply --verify runs it"
    return f"not run by the engine: verify runs vLLM only, not {engine.display}"
