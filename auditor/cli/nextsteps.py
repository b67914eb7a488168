"""The next steps printed after a blocked result: the exact ``eagle-audit fix`` or ``matrix``
command to run, with the tree and run options the user gave."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from auditor.model.errors import AuditError
from auditor.model.wording import count
from auditor.cli.console import say, size_words, with_stages


#: Most targets named one by one in the suggested ``fix`` command (more: one placeholder).
FIX_COMMAND_TARGETS = 5


def fix_commands(result, auditor, path: Optional[str], vllm_version: Optional[str], model: List[str],
                 model_type: Optional[str], hf_config: Optional[dict], run, platform: str,
                 python: Optional[str] = None, sglang_version: Optional[str] = None,
                 hf_path: Optional[Path] = None) -> list[str]:
    """The next step after a blocked scan: the exact ``eagle-audit fix`` command (the same tree
    argument, run options and platform) for the blocked targets that have a fix, one per method.
    Targets are named as the user named them (a model_type such as kimi_k2 keeps the allowlist
    entry it implies); beyond :data:`FIX_COMMAND_TARGETS` a placeholder stands for them."""
    from auditor.model.wording import shell_join

    from auditor.hf.targets import resolve_targets

    fixable = result.fixable()
    if not fixable:
        return []
    if path:
        tree = [path]
    elif vllm_version or sglang_version:
        tree = ["--vllm-version", vllm_version] if vllm_version else ["--sglang-version", sglang_version]
    else:
        tree = ["--python", python] if python else []
    if result.engine != "vllm" and not path and not sglang_version:
        tree += ["--engine", result.engine]
    extra = run.flags()  # the platform and run options (``run`` was made for ``platform``), as every next step spells them
    lines = []
    for method, archs in fixable.items():
        names: list[str] = []
        if model:  # the user's names whose targets include a fixable one, as given
            for name in model:
                try:
                    covers = {s.architecture for s in resolve_targets(auditor.registry, [name], model_type, hf_config)}
                except AuditError:
                    continue
                if covers & set(archs) and name not in names:
                    names.append(name)
        else:
            names = list(archs)
        types: list[str] = []
        if model_type:
            types = ["--model-type", model_type]
        if hf_path is not None:  # the checkpoint the scan read, read by fix the same way
            types += ["--hf-config", str(hf_path)]
        what = f"{count(len(archs), 'blocked target')} with a fix available"
        if len(names) > FIX_COMMAND_TARGETS:
            argv = ["eagle-audit", "fix", *tree, "--model", "ARCHITECTURE", *types, "--method", method, *extra]
            lines.append(f"next step ({what}; name one or several with --model): {shell_join(argv)}")
            continue
        targets = [x for n in names for x in ("--model", n)]
        argv = ["eagle-audit", "fix", *tree, *targets, *types, "--method", method, *extra]
        lines.append(f"next step ({what}): {shell_join(argv)}  (prints the patch; --out-dir DIR writes it, "
                     "--apply edits a folder tree)")
    return lines


def tree_words(path: Optional[str], vllm_version: Optional[str], sglang_version: Optional[str] = None,
               python: Optional[str] = None) -> list[str]:
    """The tree argument of a suggested command, as the user gave it."""
    if path:
        return [path]
    if vllm_version or sglang_version:
        return ["--vllm-version", vllm_version] if vllm_version else ["--sglang-version", sglang_version]
    return ["--python", python] if python else []


def dead_end_steps(auditor, specs, names: List[str], method: str, model_type: Optional[str],
                   hf: Optional[dict], hf_path: Optional[Path], run, platform: str, tree: list[str],
                   show: bool = False, audit: bool = True) -> list[str]:
    """The next steps when a gate of the targets has no local patch in this tree (a release
    without the pipeline-parallel transport): the ``fix`` command on a release in eagle-audit's
    cache that supports the targets or that ``fix`` can patch (or the ``matrix`` command that
    finds one), and the ``fix`` command without pipeline parallelism when that patches every
    gate here (``audit``: audit the newest cached release when no cached audit decides; scan
    reads the cache only, so that it stays as fast). Each line is ``next step (why): command
    (note)``."""
    from auditor.model.wording import shell_join
    from auditor.orchestration.elsewhere import release_with_a_way, without_pp
    from auditor.orchestration.upgrade import fix_command

    engine, version = auditor.engine.name, auditor.tree.version()
    names = names or [s.architecture for s in specs]
    extra = ["--hf-config", str(hf_path)] if hf_path is not None else []
    lines = []

    def look(cb):
        if cb:
            cb("reading the releases in the cache for one that has a way", 0, 1)
        return release_with_a_way(engine, version, names, method, model_type, run, platform, audit_newest=audit)

    other = with_stages(show, "eagle-audit", look)
    label = auditor.engine.display
    if other.version:
        how = "supports these targets" if other.native else "has what the patch needs"
        which = ("the newest release in eagle-audit's cache" if other.looked_at == [other.version]
                 else f"the oldest newer release in eagle-audit's cache that will do, of the "
                 f"{count(len(other.looked_at), 'release')} read")
        cmd = fix_command(other.version, engine, names, method, run, model_type).replace(" --out-dir eagle-audit", "")
        lines.append(f"next step ({label} {other.version}, {which}, {how} with this run): "
                     f"{cmd}{' ' + shell_join(extra) if extra else ''}")
    elif version:
        argv = ["eagle-audit", "matrix", *(["--engine", engine] if engine != "vllm" else []),
                *(x for n in names for x in ("--model", n)), "--versions", f"{version}..", "--method", method,
                *run.flags()]
        seen = (f"none of the {count(len(other.looked_at), 'release')} read of the {other.newer} newer ones in "
                "eagle-audit's cache will do" if other.looked_at else
                f"no audit of the {other.newer} newer releases in eagle-audit's cache says which will do"
                if other.newer else "no newer release is in eagle-audit's cache")
        lines.append(f"next step ({seen}): {shell_join(argv)}  (finds the first later release that supports them, "
                     "or that fix can patch)")
    plain_run = without_pp(auditor, specs, method, hf, run)
    if plain_run == "supported":
        lines.append(f"without pipeline parallelism, {label} {version or 'this tree'} supports these targets as it "
                     "is: nothing to patch")
    elif plain_run == "patchable":
        import dataclasses

        plain = dataclasses.replace(run, pipeline_parallel_size=1)
        argv = ["eagle-audit", "fix", *tree, *(x for n in names for x in ("--model", n)),
                *(["--model-type", model_type] if model_type else []), *extra, "--method", method, *plain.flags()]
        lines.append(f"next step (without pipeline parallelism, every gate has a patch in {label} "
                     f"{version or 'this tree'}): {shell_join(argv)}")
    return lines


def compare_next_steps(report, cfg, run) -> list[str]:
    """After a comparison where no engine supports every target: which engine supports which
    target, then per engine the exact ``eagle-audit fix`` command for its blocked targets that
    have a fix, or the ``eagle-audit matrix`` command that finds a later release of it that
    supports the others (for a release given by version)."""
    from auditor.orchestration.upgrade import codemods_path, fix_command, side_kind

    lines = []
    for i, side in enumerate(report.sides):
        good = report.supported_by(i)
        lines.append(f"{side.name} supports {', '.join(good) if good else 'none of the targets'}")
    method = report.rows[0].method if report.rows else cfg.methods[0]
    for i, side in enumerate(report.sides):
        blocked = [r.architecture for r in report.rows if r.cells[i].verdict != "supported"]
        fixable = report.fixable_by(i)
        if fixable:
            what = f"{side.name}: {count(len(fixable), 'blocked target')} with a fix available"
            file = codemods_path(fixable, side.engine, side.version, method)
            lines.append(f"next step ({what}): {fix_command(side.spec, side.engine, fixable, method, run, cfg.model_type)}"
                         f"  (writes {file.removesuffix('.codemods.json')}.patch and {file})")
        rest = [a for a in blocked if a not in fixable]
        try:
            by_version = side_kind(side.spec) == "version"
        except AuditError:
            by_version = False
        if rest and by_version:
            argv = ["eagle-audit", "matrix", *(["--engine", side.engine] if side.engine != "vllm" else []),
                    *(x for a in rest for x in ("--model", a)), "--versions", f"{side.spec}..", "--method", method,
                    *run.flags()]
            from auditor.model.wording import shell_join

            lines.append(f"next step ({side.name}: {', '.join(rest)} with no fix available): {shell_join(argv)}"
                         "  (finds the first later release that supports them)")
    return lines


def say_fetch_plan(plan) -> None:
    """Before a matrix fetches anything, when it must download: how many releases, how many of
    them are cached, how many to download and their size (one message on stderr, under the one
    wrapping rule); nothing when every archive is cached."""
    if not plan.to_fetch:
        return
    n = len(plan.releases)
    span = f"{plan.releases[0]} … {plan.releases[-1]}" if n > 1 else plan.releases[0]
    size = (f", about {size_words(plan.download_bytes)}" if plan.download_bytes is not None
            else " (the index publishes no size for some)")
    say(f"eagle-audit matrix: {count(n, 'release')} to audit ({span}): {len(plan.cached)} in eagle-audit's cache, "
        f"{len(plan.to_fetch)} to download{size} (kept in the cache; to see its size or prune it: eagle-audit "
        "cache)")


def scan_next_steps(result, auditor, specs, path, vllm_version, sglang_version, python, model, model_type, cfg,
                    hf_path, run, platform: str, show: bool, full: bool) -> list[str]:
    """The next steps after a scan (printed under a table or Markdown report): the ``fix``
    command of :func:`fix_commands`, then for a dead end (blocked, and a gate whose codemod
    exists cannot be patched in this tree) the steps of :func:`dead_end_steps`, from the cache
    only (a scan stays as fast).

    Args:
        result: the scan's report; ``auditor``: its auditor; ``specs``: its targets (None for a
            report from the result cache: resolved here when a dead end needs them).
        path, vllm_version, sglang_version, python: the tree as the user gave it.
        model, model_type, cfg, hf_path: the targets as given (``cfg``: the parsed ``--hf-config``).
        run: the run options; ``platform``: the platform; ``show``: progress on a terminal.
        full: a full scan (no dead-end steps: they name targets).
    """
    from auditor.orchestration.elsewhere import codemod_exists

    steps = fix_commands(result, auditor, path, vllm_version, model, model_type, cfg, run, platform, python,
                         sglang_version, hf_path)
    stuck = [r for r in result.targets if r.verdict.value == "blocked" and not any(
        r.architecture in a for a in result.fixable().values()) and any(
        not f.fix_available and codemod_exists(f.gate, result.engine)
        for f in r.findings if f.severity.value == "error")]
    if stuck and not full and len(stuck) <= FIX_COMMAND_TARGETS:
        if specs is None:
            # the report came from the result cache, whose targets were not resolved: resolve them now
            from auditor.hf.targets import resolve_targets

            specs = resolve_targets(auditor.registry, model, model_type, cfg)
        steps += dead_end_steps(auditor, [s for s in specs if s.architecture in {r.architecture for r in stuck}],
                                model, stuck[0].method, model_type, cfg, hf_path, run, platform,
                                tree_words(path, vllm_version, sglang_version, python), show, audit=False)
    return steps + unknown_steps(result, full, python)


def unknown_steps(result, full: bool, python: str | None = None) -> list[str]:
    """For the targets a scan of named targets left ``unknown``: the rules that say what decides
    each unknown gate and how to fix it (``eagle-audit rules CODE``), then, for a vLLM installed in
    the environment of ``python`` (the scan's ``--python``) and EAGLE-3 targets, ``verify``, which
    runs that engine and decides what the tree cannot. Empty for a full scan or when no target is
    unknown."""
    from auditor.model.wording import shell_join

    unknown = [r for r in result.targets if r.verdict.value == "unknown"]
    if full or not unknown or len(unknown) > FIX_COMMAND_TARGETS:
        return []
    codes = list(dict.fromkeys(f.rule for r in unknown for f in r.findings if f.severity.value == "unknown"))
    lines = []
    if codes:
        lines.append(f"next step (what decides each unknown gate, and how to fix it): "
                     f"{shell_join(['eagle-audit', 'rules', *codes])}")
    eagle3 = [r for r in unknown if r.method == "eagle3"]
    if result.engine == "vllm" and python and eagle3:
        argv = ["eagle-audit", "verify", "--python", python]
        for r in eagle3:
            argv += ["-m", r.architecture]
        lines.append(f"next step (run this environment's engine: it decides what the tree cannot): {shell_join(argv)}")
    return lines
