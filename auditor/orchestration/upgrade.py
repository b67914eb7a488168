"""The pre-upgrade check (the ``gate`` command). Pure: results are objects, nothing is printed.

:func:`run_gate` scans the *candidate* release for the targets; a target the candidate supports as
it is is ``native``; otherwise the user's codemods (the file ``fix --out`` writes) are replayed on
the candidate in memory through :func:`auditor.orchestration.fix.plan_fix` — re-planned from the
candidate's own facts, restricted to the codemods the file names, validated by re-scanning the
patched tree — and the target is ``patched`` when that re-scan says supported, else ``broken``
with, per gate still blocking, the codemod concerned and why it did not apply or did not
suffice. A ``current`` release, when given, is scanned too, to report *regressions* (supported
by the current release, not by the candidate).

Words: a *gate* is a hurdle that blocks a target in one tree (``allowlist``, ``interface``, …,
checked by the rules in ``rules/``); an *upgrade check*
(:data:`auditor.orchestration.upgrade_results.UPGRADE_CHECKS`, EA390–EA392) compares two trees or
validates a patch, and only this command reports it. What it finds (the sides, each target's
outcome, the report) is :mod:`auditor.orchestration.upgrade_results`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

from packaging.version import InvalidVersion, Version

from auditor.model.errors import AuditError, UnknownModel
from auditor.model.findings import Severity, Verdict
from auditor.model.options import RunOptions
from auditor.model.outcomes import UpgradeOutcome
from auditor.model.results import TargetResult, TargetSpec
from auditor.orchestration.config import relabel_sources, setting
from auditor.orchestration.releases import Releases
from auditor.orchestration.scan import Auditor, make_tree
from auditor.orchestration.upgrade_results import Problem, Side, UpgradeReport, UpgradeTarget
from rules.registry import BLOCKING_GATES


# -- opening a side --------------------------------------------------------------------------


def side_kind(value: str) -> str:
    """``"path"`` when ``value`` names an existing file or folder, ``"version"`` when it is a
    PEP 440 version. Raises AuditError otherwise."""
    if Path(value).expanduser().exists():
        return "path"
    try:
        Version(value)
    except InvalidVersion:
        raise AuditError(f"{value!r} is neither an existing path nor a vLLM release version (e.g. 0.18.0)") from None
    return "version"


def open_side(value: str, *, releases: Releases | None = None, progress: bool = False,
              use_cache: bool = True, platform: str = "cuda", engine: str | None = None) -> Auditor:
    """An :class:`Auditor` over ``value``: a release version (its archive as ``releases``
    fetches it; default :class:`~auditor.orchestration.releases.IndexReleases`, pip's index) or
    a PATH (folder, source checkout, ``.tar.gz`` / ``.whl``), following ``platform``'s
    import-time branches. ``use_cache``: use the on-disk summary and result caches. ``engine``:
    ``sglang`` reads a PATH as an SGLang tree and fetches a version as an SGLang release; None
    detects a PATH's engine and reads a version as a vLLM release.

    Raises:
        AuditError: neither a path nor a version, a release that cannot be fetched, a tree
            that cannot be read, an unknown platform.
    """
    from auditor.index.tree import SummaryCache
    from auditor.orchestration.scan import open_tree
    from auditor.source.opener import release_source

    if side_kind(value) == "path":
        return Auditor(open_tree(value, None, progress=progress, use_cache=use_cache, engine=engine),
                       platform=platform)
    if releases is None:
        from auditor.orchestration.releases import IndexReleases

        releases = IndexReleases(progress=progress, project=engine or "vllm")
    archive = releases.fetch(value)
    return Auditor(make_tree(release_source(archive, progress=progress), SummaryCache(enabled=use_cache)),
                   platform=platform)


# -- run -------------------------------------------------------------------------------------


def _try_resolve(auditor: Auditor, names: Sequence[str], model_type: str | None,
                 hf_config: dict | None) -> tuple[list[TargetSpec], AuditError | None]:
    try:
        return auditor.engine.resolve_targets(auditor.registry, names, model_type, hf_config), None
    except AuditError as exc:
        return [], exc


def run_gate(
    candidate: Auditor | str,
    names: Sequence[str],
    *,
    candidate_spec: str = "",
    current: Auditor | str | None = None,
    current_spec: str = "",
    codemods: Path | None = None,
    methods: Iterable[str] = ("eagle3",),
    model_type: str | None = None,
    hf_config: dict | None = None,
    allowed_warnings: Iterable[str] = (),
    fail_on_warnings: bool = False,
    options: RunOptions | None = None,
    releases: Releases | None = None,
    use_cache: bool = True,
    platform: str = "cuda",
    progress: Callable[[str, int, int], None] | None = None,
    sources: dict[str, str] | None = None,
) -> UpgradeReport:
    """Check the upgrade to ``candidate`` for the targets ``names`` (architectures or
    model_types; none: the targets recorded in the ``codemods`` file), per method; ``current``
    (the release in use), when given, is scanned too to report regressions. Both sides are
    audited under the run ``options`` (pipeline-parallel size, drafter config, …).

    ``candidate`` and ``current`` are trees already opened, or specs (a version or a PATH)
    opened here with :func:`open_side` (through ``releases``, with ``use_cache``, following
    ``platform``'s import-time branches);
    ``candidate_spec``/``current_spec`` say how they were given (default: the spec itself).
    ``sources`` says where a ``--model-type`` or ``--hf-config`` no flag gave came from
    (:func:`~auditor.orchestration.config.relabel_sources`).
    ``progress(stage, done, total)`` is called as each stage starts (``scanning the candidate,
    vLLM 0.18.0``, ``scanning the current release, …``, ``replaying the codemods, re-scanning the
    candidate``; ``done`` stages of ``total``) and once at the end (``done == total``).

    Raises:
        AuditError: no target given, a target known to neither tree, an unreadable codemods
            file.
    """
    from auditor.orchestration.fix import load_codemods

    t0 = time.perf_counter()
    if isinstance(candidate, str):
        candidate_spec = candidate_spec or candidate
        candidate = open_side(candidate, releases=releases, use_cache=use_cache, platform=platform)
    if isinstance(current, str):
        current_spec = current_spec or current
        current = open_side(current, releases=releases, use_cache=use_cache, platform=platform)
    methods = list(dict.fromkeys(methods))
    allowed = tuple(allowed_warnings)
    file_specs: list[TargetSpec] = []
    file_method = None
    only: set[str] = set()
    source = None
    if codemods is not None:
        file_specs, file_method, only = load_codemods(codemods)
        source = _codemods_source(codemods)
    names = list(names)
    if names:
        specs, error = _try_resolve(candidate, names, model_type, hf_config)
        cur_specs, cur_error = (_try_resolve(current, names, model_type, hf_config) if current else ([], None))
        specs, cur_specs = relabel_sources(specs, sources), relabel_sources(cur_specs, sources)
        if error and (current is None or cur_error):
            if isinstance(error, UnknownModel):
                raise UnknownModel(error.name, f"candidate: {error}")
            raise AuditError(f"candidate: {error}")
    elif file_specs:
        specs = [s for s in file_specs if s.architecture in candidate.registry.entries]
        cur_specs = [s for s in file_specs if current and s.architecture in current.registry.entries]
        missing = [s for s in file_specs if s not in specs and s not in cur_specs]
        specs += missing  # in neither tree: reported as absent
    else:
        raise AuditError("no target: give --model NAME, models in [tool.eagle-audit] (pyproject.toml), or --codemods FILE")
    ordered: list[TargetSpec] = []
    for s in specs + cur_specs:
        if s.architecture not in {o.architecture for o in ordered}:
            ordered.append(s)

    targets: list[UpgradeTarget] = []
    next_steps: list[str] = []
    per_method = 1 + (current is not None) + (codemods is not None)
    total = per_method * len(methods)
    step = [0]

    def stage(text: str) -> None:
        if progress:
            progress(text + (f" ({method})" if len(methods) > 1 else ""), step[0], total)
        step[0] += 1

    for method in methods:
        start = step[0]
        stage(f"scanning the candidate, {_tree_name(candidate, candidate_spec)}")
        in_cand = [s for s in ordered if s.architecture in candidate.registry.entries]
        cand = {r.architecture: r for r in candidate.scan(in_cand, [method], hf_config, options=options).results}
        cur: dict[str, TargetResult] = {}
        if current is not None:
            stage(f"scanning the current release, {_tree_name(current, current_spec)}")
            in_cur = [s for s in ordered if s.architecture in current.registry.entries]
            cur = {r.architecture: r for r in current.scan(in_cur, [method], hf_config, options=options).results}
        fix = None
        need = [s for s in in_cand if cand[s.architecture].verdict is not Verdict.SUPPORTED]
        if codemods is not None:
            stage("replaying the codemods, re-scanning the candidate")
        if need and codemods is not None and method == file_method:
            from auditor.orchestration.fix import plan_fix

            fix = plan_fix(candidate, need, method, only, options, hf_config)
        step[0] = start + per_method
        judged = [_judge(s.architecture, method, cand.get(s.architecture), cur.get(s.architecture),
                         current is not None, fix, codemods, file_method, allowed, fail_on_warnings,
                         candidate.registry.path, NO_CODEMODS_HINT, candidate.engine.name) for s in ordered]
        targets += judged
        if codemods is None and any(p.codemod for t in judged for p in t.problems) and not any(
                p.hint == NO_LOCAL_PATCH_HINT for t in judged for p in t.problems):
            next_steps.append(_write_codemods_step(candidate, candidate_spec, names, method, options, model_type))
        stuck = [t for t in judged if any(p.hint == NO_LOCAL_PATCH_HINT for p in t.problems) or any(
            u.codemod is None and _codemod_for(u.gate, candidate.engine.name) for u in (fix.unfixable if fix else [])
            if u.architecture == t.architecture)]
        if stuck:
            next_steps += _elsewhere_steps(candidate, candidate_spec, names or [t.architecture for t in stuck],
                                           method, options, model_type, platform)
    if progress:
        progress("done", total, total)
    return UpgradeReport(
        model=names or [s.architecture for s in file_specs],
        methods=methods,
        candidate=Side.of(candidate_spec, candidate),
        current=Side.of(current_spec, current) if current is not None else None,
        targets=targets,
        codemods=codemods,
        codemods_names=[g for g in BLOCKING_GATES if g in only] + sorted(only - set(BLOCKING_GATES)),
        codemods_source=source,
        allowed_warnings=allowed,
        fail_on_warnings=fail_on_warnings,
        seconds=time.perf_counter() - t0,
        next_steps=next_steps,
    )


def _tree_name(auditor: Auditor, spec: str) -> str:
    """``vLLM 0.18.0`` (``SGLang X``), or the spec as given when the tree states no version."""
    version = auditor.tree.version()
    return f"{auditor.engine.display} {version}" if version else spec


#: The hint of a blocking gate a codemod fixes when no codemods were given. It is said once per
#: report, as the note of the next step (:attr:`UpgradeReport.next_steps`) that writes them or
#: names the codemods file the user has; each problem only names its codemod.
NO_CODEMODS_HINT = "a codemod fixes it; no codemods were given (--codemods): see the next step"

#: The hint of a blocking gate whose codemod cannot patch this release (the finding says why).
NO_LOCAL_PATCH_HINT = "no local patch: its codemod cannot patch this release (the reason says why); see the next step"


def _write_codemods_step(candidate: Auditor, candidate_spec: str, names: Sequence[str], method: str,
                         options: RunOptions | None, model_type: str | None) -> str:
    """The one next step of a gate broken by gates a codemod fixes: the ``fix`` command that
    writes the codemods of every target as the user named them (one file), then the gate
    command to rerun with that file."""
    spec = candidate_spec or candidate.tree.version() or "PATH"
    file = codemods_path(names, candidate.engine.name, candidate.tree.version(), method)
    have = _codemods_you_have(names, candidate.engine.name, method)
    if have is not None:
        return (f"rerun this gate with --codemods {have}  (no codemods were given (--codemods); that file, in "
                f"this folder, holds the codemods fix wrote for these targets and method; to write them for the "
                f"candidate instead: {fix_command(spec, candidate.engine.name, names, method, options, model_type)})")
    return (f"{fix_command(spec, candidate.engine.name, names, method, options, model_type)}  (no codemods were "
            f"given (--codemods): this writes them to {file}; then rerun this gate with --codemods {file})")


def _codemods_you_have(names: Sequence[str], engine: str, method: str) -> str | None:
    """The codemods file ``fix`` wrote for these targets and method, for any release, in this
    folder's :data:`FIX_OUT_DIR` (the newest release's when several), as a relative path; None
    when there is none."""
    from packaging.version import InvalidVersion, Version

    stem = codemods_path(names, engine, "X", method).removesuffix(f".{method}.codemods.json")
    folder, _, base = stem.rpartition("/")
    base = base.removesuffix("-X")
    found = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return None
    for p in entries:
        name = p.name
        if name.startswith(base + "-") and name.endswith(f".{method}.codemods.json") and p.is_file():
            release = name[len(base) + 1:-len(f".{method}.codemods.json")]
            try:
                found.append((Version(release), f"{folder}/{name}"))
            except InvalidVersion:
                continue
    return max(found)[1] if found else None


def _elsewhere_steps(candidate: Auditor, candidate_spec: str, names: Sequence[str], method: str,
                     options: RunOptions | None, model_type: str | None, platform: str) -> list[str]:
    """The next step of a gate broken by a gate no local patch fixes in the candidate: a release in
    eagle-audit's cache where ``fix`` patches the targets (or that supports them), as the gate
    command to run on it, else the ``matrix`` command that finds one."""
    import shlex

    from auditor.orchestration.elsewhere import release_with_a_way

    version = candidate.tree.version()
    other = release_with_a_way(candidate.engine.name, version, names, method, model_type, options, platform)
    label = candidate.engine.display
    if other.version:
        how = "supports these targets" if other.native else "has what the patch needs"
        return [f"{fix_command(other.version, candidate.engine.name, names, method, options, model_type)}  "
                f"({label} {other.version}, in eagle-audit's cache, {how} with this run; then gate it: "
                f"--candidate-version {other.version} --codemods "
                f"{codemods_path(names, candidate.engine.name, other.version, method)})"]
    if not version:
        return []
    argv = ["eagle-audit", "matrix", *(["--engine", candidate.engine.name] if candidate.engine.name != "vllm" else []),
            *(x for n in names for x in ("--model", n)), "--versions", f"{version}..", "--method", method,
            *(options.flags() if options else [])]
    return [f"{shlex.join(argv)}  (no release in eagle-audit's cache will do; this finds the first later release "
            "that supports the targets, or that fix can patch)"]


def _codemods_source(path: Path) -> str | None:
    """The release a codemods file was written for (``source.vllm_version``), if recorded."""
    import json

    try:
        src = json.loads(Path(path).read_text()).get("source") or {}
    except (OSError, ValueError, AttributeError):
        return None
    return src.get("vllm_version") or src.get("label")


def _judge(arch: str, method: str, cand: TargetResult | None, cur: TargetResult | None, current_given: bool,
           fix, codemods: Path | None, file_method: str | None, allowed: tuple[str, ...],
           fail_on_warnings: bool, registry_path: str | None = None,
           write_hint: str = "no codemods were given (--codemods); eagle-audit fix writes them",
           engine: str = "vllm") -> UpgradeTarget:
    """The outcome of one target: native, patched (by ``fix``, a :class:`~auditor.orchestration.fix.FixResult`)
    or broken, with the problems that break it (``write_hint``: how to write the codemods, for a
    fixable gate when none were given)."""
    t = UpgradeTarget(arch, method, cur, cand, None, UpgradeOutcome.BROKEN, current_given, allowed_warnings=allowed)
    if cand is None:
        t.problems.append(Problem("registry", f"{arch} is not in the candidate's model registry",
                                  hint="the architecture was removed or renamed upstream", path=registry_path))
        return t
    final = cand
    if cand.verdict is Verdict.SUPPORTED:
        t.outcome = UpgradeOutcome.NATIVE
    elif codemods is None:
        t.problems += _finding_problems(cand, write_hint, engine)
    elif method != file_method:
        t.problems += _finding_problems(cand, f"the codemods file is for method {file_method}, not {method}", engine)
    else:
        after = next((r for r in fix.after if r.architecture == arch), None)
        t.patched = after
        t.changes = [f"[{i.codemod}] {i.path}: {c}" for i in fix.invocations if arch in i.architectures
                     for c in i.changes]
        if after is not None and after.verdict is Verdict.SUPPORTED and not fix.problems:
            t.outcome = UpgradeOutcome.PATCHED
            final = after
        else:
            t.problems += _fix_problems(arch, cand, after, fix)
    t.warnings = [f for f in final.findings if f.severity is Severity.WARNING and f.gate not in allowed]
    if fail_on_warnings and t.warnings:
        t.outcome = UpgradeOutcome.BROKEN
        allow = setting("allow_warnings")  # its current key and flag (never the deprecated spelling)
        t.problems += [Problem(f.gate, f"warning {f.rule} is not allowed: {f.message}",
                               hint=f"fix it, or accept it with {allow.flag} {f.gate} (or {f.gate} in {allow.key} "
                               "in [tool.eagle-audit])", path=f.path, line=f.line)
                       for f in t.warnings]
    return t


#: The folder the suggested ``fix`` command writes its patch and codemods file to.
FIX_OUT_DIR = "eagle-audit"


def codemods_path(names: Sequence[str], engine: str, version: str | None, method: str) -> str:
    """The codemods file the suggested ``fix`` command (:func:`fix_command`) writes, as every
    suggestion and help text names it: ``eagle-audit/kimi_k2.vllm-0.16.0.eagle3.codemods.json``
    (:data:`FIX_OUT_DIR`, then :func:`auditor.orchestration.fix.out_name` of the targets as named,
    the engine release and the method)."""
    from auditor.orchestration.fix import out_name

    return f"{FIX_OUT_DIR}/{out_name(None, names, engine, version, method)}.codemods.json"


def fix_command(tree: str, engine: str, names: Sequence[str], method: str, options: RunOptions | None = None,
                model_type: str | None = None) -> str:
    """The exact ``eagle-audit fix`` command that writes the codemods of the targets ``names`` on
    ``tree`` (a release version, fetched as ``engine``'s, or a PATH) for ``method`` under the run
    ``options``, into :data:`FIX_OUT_DIR`; shell-quoted."""
    import shlex

    try:
        kind = side_kind(tree)
    except AuditError:
        kind = "path"
    where = [f"--{engine}-version", tree] if kind == "version" else [tree]
    argv = ["eagle-audit", "fix", *where, *(x for n in names for x in ("--model", n))]
    if model_type:
        argv += ["--model-type", model_type]
    argv += ["--method", method, *(options.flags() if options else []), "--out-dir", FIX_OUT_DIR]
    return shlex.join(argv)


def _codemod_for(gate: str, engine: str = "vllm") -> str | None:
    from rules.registry import codemod_for

    return codemod_for(gate, engine)


def _no_fix_hint(gate: str) -> str:
    from rules.registry import RULES

    rule = next((r for r in RULES.values() if r.GATE == gate), None)
    return f"no codemod exists for {gate}: {rule.HOW_TO_FIX}" if rule else f"no codemod exists for {gate}"


def _finding_problems(result: TargetResult, hint: str, engine: str = "vllm") -> list[Problem]:
    out = []
    for f in result.findings:
        if f.severity is Severity.ERROR:
            codemod = _codemod_for(f.gate, engine)
            if f.fix_available and hint == NO_CODEMODS_HINT:
                # the codemod is named here; that none were given is said once, by the next step
                out.append(Problem(f.gate, f.message, codemod, "", f.path, f.line))
            elif f.fix_available:
                out.append(Problem(f.gate, f.message, None, hint, f.path, f.line))
            elif codemod is not None:  # a codemod exists, but not for this release
                out.append(Problem(f.gate, f.message, None, NO_LOCAL_PATCH_HINT, f.path, f.line))
            else:  # a gate no codemod can fix: say so, and what to do instead (the rule's own advice)
                out.append(Problem(f.gate, f.message, None, _no_fix_hint(f.gate), f.path, f.line))
        elif f.severity is Severity.UNKNOWN:
            out.append(Problem(f.gate, f"the verdict is unknown: {f.message}", None,
                               "give what the finding says is missing (e.g. --hf-config, --model-type)", f.path, f.line))
    return out


def _fix_problems(arch: str, cand: TargetResult, after: TargetResult | None, fix) -> list[Problem]:
    """For each gate still blocking after the codemods: the codemod concerned and why it did not
    apply (the codemod refused, or the file does not carry it) or did not suffice."""
    out: list[Problem] = []
    for p in fix.problems:
        out.append(Problem("validation", p, None, "the patched files must parse and compile"))
    state = after or cand
    failing = [f for f in state.findings if f.severity in (Severity.ERROR, Severity.UNKNOWN)]
    seen: set[tuple[str, str]] = set()
    for f in failing:
        # a codemod that serves several targets records its refusal under the first one
        us = ([u for u in fix.unfixable if u.architecture == arch and u.gate == f.gate]
              or [u for u in fix.unfixable if u.gate == f.gate])
        if not us:
            if f.severity is Severity.UNKNOWN:
                reason = f"the verdict is unknown: {f.message}"
            else:
                reason = f"the codemods applied, but the patched candidate still fails this gate: {f.message}"
            key = (f.gate, reason)
            if key not in seen:
                seen.add(key)
                line = fix.original_line(f.path, f.line) if after is not None else f.line  # the candidate's line
                out.append(Problem(f.gate, reason, _codemod_for(f.gate, fix.engine), "", f.path, line))
            continue
        for u in us:
            key = (u.gate, u.reason)
            if key in seen:
                continue
            seen.add(key)
            out.append(Problem(u.gate, u.reason, u.codemod, u.hint,  # no codemod beside "no local patch"
                               u.path or f.path, u.line or (f.line if not u.path or u.path == f.path else None)))
    return out
