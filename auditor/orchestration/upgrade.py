"""The pre-upgrade CI gate and the release matrix. Pure: results are objects, nothing is printed.

**Gate** (:func:`run_gate`): scan the *candidate* release for the targets; a target the candidate
supports as it is is ``native``; otherwise the user's codemods (the file ``fix --out`` writes)
are replayed on the candidate in memory through :func:`auditor.orchestration.fix.plan_fix` — re-planned from
the candidate's own facts, restricted to the codemods the file names, validated by re-scanning
the patched tree — and the target is ``patched`` when that re-scan says supported, else
``broken`` with, per gate still blocking, the codemod concerned and why it did not apply or
did not suffice. A ``current`` release, when given, is scanned too, to report *regressions*
(supported by the current release, not by the candidate).

**Matrix** (:func:`run_matrix`): one row per release and architecture of a version list or
range, read from the package index (:func:`index_listing`); releases without a source archive
are listed as ``skipped`` with the reason. Archives are fetched by a thread pool (the cache
writes through a temporary file and an atomic rename, so concurrent fetches of different
releases are safe) and audited as they arrive, in worker processes or in this one.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from packaging.version import InvalidVersion, Version

from auditor.model.errors import AuditError
from auditor.model.findings import Finding, Severity, Verdict
from auditor.orchestration.scan import Auditor
from auditor.engines.vllm.targets import load_alias_table, resolve_targets
from auditor.model.results import TargetResult, TargetSpec
from rules.registry import BLOCKING_GATES

OUTCOMES = ("native", "patched", "broken")
MATRIX_VERDICTS = ("supported", "blocked", "unknown", "absent", "skipped")

#: ``progress(stage, done, total)``: stage is ``"fetch"`` or ``"audit"``.


@dataclass(frozen=True)
class GateCheck:
    """A gate-level check (it compares trees or validates a patch, so it is no rule of one
    tree): the same metadata as a rule in ``rules/``, for the SARIF and JUnit outputs."""

    CODE: str
    GATE: str
    NAME: str
    SUMMARY: str
    WHY: str
    HOW_TO_FIX: str
    BLOCKING: bool = True
    FIX_AVAILABLE: bool = False


#: Gate-level checks by code.
GATE_CHECKS: dict[str, GateCheck] = {c.CODE: c for c in (
    GateCheck("EA390", "regression", "TargetRegressed",
              "A target supported by the current release is not supported by the candidate.",
              "Upgrading would lose EAGLE-3 support that works today.",
              "Keep the current release, or carry codemods that make the candidate pass (eagle-audit fix).",
              BLOCKING=False),
    GateCheck("EA391", "registry", "TargetAbsent",
              "The target architecture is not in the candidate's model registry.",
              "vLLM cannot build the target at all: it was removed or renamed upstream.",
              "Use the architecture name the candidate registers (eagle-audit explain --all)."),
    GateCheck("EA392", "validation", "PatchInvalid",
              "The codemods produced a file that does not parse or compile.",
              "A patch that does not compile cannot be shipped.",
              "Regenerate the codemods on the candidate (eagle-audit fix --out)."),
)}
Progress = Callable[[str, int, int], None]


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


def open_side(value: str, *, progress: bool = False, use_cache: bool = True) -> Auditor:
    """An :class:`Auditor` over ``value``: a release version (fetched and cached) or a PATH
    (folder, source checkout, ``.tar.gz`` / ``.whl``)."""
    from auditor.orchestration.scan import open_tree

    if side_kind(value) == "path":
        return Auditor(open_tree(value, None, progress=progress, use_cache=use_cache))
    return Auditor(open_tree(None, value, progress=progress, use_cache=use_cache))


@dataclass
class Side:
    """What was scanned on one side of the gate: as given (``spec``), and as found."""

    spec: str
    vllm_version: str | None
    source: str

    @classmethod
    def of(cls, spec: str, auditor: Auditor) -> "Side":
        return cls(spec, auditor.tree.version(), getattr(auditor.tree.source, "label", ""))

    @property
    def name(self) -> str:
        return f"vLLM {self.vllm_version}" if self.vllm_version else self.spec

    def as_dict(self) -> dict:
        return {"spec": self.spec, "vllm_version": self.vllm_version, "source": self.source}


# -- gate results ----------------------------------------------------------------------------


@dataclass
class Problem:
    """Why a target is broken: the ``gate``, the ``codemod`` concerned (None when no codemod
    covers it or none was given), what went wrong (``reason``), what to do (``hint``), and where."""

    gate: str
    reason: str
    codemod: str | None = None
    hint: str = ""
    path: str | None = None
    line: int | None = None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.path and self.line else (self.path or "")

    def text(self) -> str:
        cm = f" (codemod {self.codemod})" if self.codemod else ""
        where = f" [{self.where}]" if self.where else ""
        hint = f" — {self.hint}" if self.hint else ""
        return f"{self.gate}{cm}{where}: {self.reason}{hint}"

    def as_dict(self) -> dict:
        return {"gate": self.gate, "codemod": self.codemod, "reason": self.reason, "hint": self.hint,
                "path": self.path, "line": self.line}


@dataclass
class GateTarget:
    """The gate's account of one target and method.

    ``current``/``candidate``: the scans (None: not given / not in that tree's registry);
    ``patched``: the re-scan of the candidate with the codemods applied (None: not attempted);
    ``outcome``: ``native``, ``patched`` or ``broken``; ``problems``: why it is broken;
    ``changes``: what the codemods changed for this target; ``warnings``: the warning findings
    of the final state (candidate, or patched candidate) that are not allowed.
    """

    architecture: str
    method: str
    current: TargetResult | None
    candidate: TargetResult | None
    patched: TargetResult | None
    outcome: str
    current_given: bool = False
    problems: list[Problem] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    allowed_warnings: tuple[str, ...] = ()

    @property
    def current_verdict(self) -> str | None:
        """``supported``/``blocked``/``unknown``, ``absent`` (not in its registry) or None (no
        ``--current``)."""
        if not self.current_given:
            return None
        return self.current.verdict.value if self.current else "absent"

    @property
    def candidate_verdict(self) -> str:
        return self.candidate.verdict.value if self.candidate else "absent"

    @property
    def patched_verdict(self) -> str | None:
        return self.patched.verdict.value if self.patched else None

    @property
    def regression(self) -> bool:
        """Supported by the current release and not by the candidate (before any codemod)."""
        return self.current_verdict == "supported" and self.candidate_verdict != "supported"

    @property
    def fixed_gates(self) -> list[str]:
        """Gates that block the candidate and no longer block once the codemods are applied (none
        when the patched files do not compile)."""
        if self.candidate is None or self.patched is None or any(p.gate == "validation" for p in self.problems):
            return []
        after = set(self.patched.blocking)
        return [g for g in self.candidate.blocking if g not in after]

    def as_dict(self) -> dict:
        fixed = set(self.fixed_gates)
        findings = []
        for f in (self.candidate.findings if self.candidate else []):
            d = f.as_dict()
            d["fixed_by_codemod"] = f.gate if f.gate in fixed and f.severity is Severity.ERROR else None
            if f.severity is Severity.WARNING:
                d["allowed"] = f.gate in self.allowed_warnings
            findings.append(d)
        return {
            "architecture": self.architecture,
            "method": self.method,
            "current_verdict": self.current_verdict,
            "candidate_verdict": self.candidate_verdict,
            "patched_verdict": self.patched_verdict,
            "outcome": self.outcome,
            "regression": self.regression,
            "blocking": self.candidate.blocking if self.candidate else [],
            "fixed_by_codemods": self.fixed_gates,
            "problems": [p.as_dict() for p in self.problems],
            "codemod_changes": self.changes,
            "warnings": [{"rule": f.rule, "gate": f.gate, "message": f.message, "path": f.path, "line": f.line}
                         for f in self.warnings],
            "findings": findings,
        }


@dataclass
class GateReport:
    """The gate's result: every target's :class:`GateTarget` and the overall outcome."""

    model: list[str]
    methods: list[str]
    candidate: Side
    current: Side | None
    targets: list[GateTarget]
    codemods: Path | None = None
    codemods_names: list[str] = field(default_factory=list)
    codemods_source: str | None = None
    allowed_warnings: tuple[str, ...] = ()
    fail_on_warnings: bool = False
    config: Path | None = None
    seconds: float = 0.0

    @property
    def outcome(self) -> str:
        """``broken`` if any target is broken, else ``patched`` if any needs the codemods, else
        ``native``."""
        outs = {t.outcome for t in self.targets}
        for o in ("broken", "patched"):
            if o in outs:
                return o
        return "native"

    @property
    def exit_code(self) -> int:
        """0 for native or patched, 1 for broken."""
        return 1 if self.outcome == "broken" else 0

    @property
    def regressions(self) -> list[GateTarget]:
        return [t for t in self.targets if t.regression]

    def message(self) -> str:
        """One sentence for humans: the outcome and what to do."""
        cand = self.candidate.name
        if self.outcome == "native":
            tail = ": drop your codemods" if self.codemods else ""
            return f"{cand} supports every target natively{tail}."
        if self.outcome == "patched":
            native = [t.architecture for t in self.targets if t.outcome == "native"]
            extra = f" ({', '.join(native)} natively)" if native else ""
            return (f"{cand} needs the codemods: they apply cleanly and the patched tree re-scans as "
                    f"supported{extra}.")
        broken = [t for t in self.targets if t.outcome == "broken"]
        parts = []
        for t in broken:
            gates = ", ".join(dict.fromkeys(
                f"{p.gate} (codemod {p.codemod})" if p.codemod else p.gate for p in t.problems)) or "?"
            parts.append(f"{t.architecture} [{t.method}]: {gates}")
        return f"{cand} is broken for {'; '.join(parts)}."

    def as_dict(self) -> dict:
        return {
            "outcome": self.outcome,
            "message": self.message(),
            "model": self.model,
            "methods": self.methods,
            "candidate": self.candidate.as_dict(),
            "current": self.current.as_dict() if self.current else None,
            "codemods": ({"path": str(self.codemods), "codemods": self.codemods_names,
                          "written_for": self.codemods_source} if self.codemods else None),
            "allowed_warnings": list(self.allowed_warnings),
            "fail_on_warnings": self.fail_on_warnings,
            "config": str(self.config) if self.config else None,
            "regressions": [{"architecture": t.architecture, "method": t.method,
                             "current_verdict": t.current_verdict, "candidate_verdict": t.candidate_verdict}
                            for t in self.regressions],
            "targets": [t.as_dict() for t in self.targets],
            "summary": {o: sum(1 for t in self.targets if t.outcome == o) for o in OUTCOMES},
            "seconds": round(self.seconds, 3),
        }


# -- gate ------------------------------------------------------------------------------------


def _try_resolve(auditor: Auditor, names: Sequence[str], model_type: str | None,
                 hf_config: dict | None) -> tuple[list[TargetSpec], str | None]:
    try:
        return resolve_targets(auditor.registry, names, model_type, hf_config), None
    except AuditError as exc:
        return [], str(exc)


def run_gate(
    candidate: Auditor,
    names: Sequence[str],
    *,
    candidate_spec: str = "",
    current: Auditor | None = None,
    current_spec: str = "",
    codemods: Path | None = None,
    methods: Iterable[str] = ("eagle3",),
    model_type: str | None = None,
    hf_config: dict | None = None,
    allowed_warnings: Iterable[str] = (),
    fail_on_warnings: bool = False,
) -> GateReport:
    """Gate ``candidate`` for the targets ``names`` (architectures or model_types; none: the
    targets recorded in the ``codemods`` file).

    Raises:
        AuditError: no target given, a target known to neither tree, an unreadable codemods
            file.
    """
    from auditor.orchestration.fix import load_codemods

    t0 = time.perf_counter()
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
        if error and (current is None or cur_error):
            raise AuditError(f"candidate: {error}")
    elif file_specs:
        specs = [s for s in file_specs if s.architecture in candidate.registry.entries]
        cur_specs = [s for s in file_specs if current and s.architecture in current.registry.entries]
        missing = [s for s in file_specs if s not in specs and s not in cur_specs]
        specs += missing  # in neither tree: reported as absent
    else:
        raise AuditError("no target: give --model NAME, targets in pyproject.toml (tool.eagle-audit), or --codemods FILE")
    ordered: list[TargetSpec] = []
    for s in specs + cur_specs:
        if s.architecture not in {o.architecture for o in ordered}:
            ordered.append(s)

    targets: list[GateTarget] = []
    for method in methods:
        in_cand = [s for s in ordered if s.architecture in candidate.registry.entries]
        cand = {r.architecture: r for r in candidate.scan(in_cand, [method], hf_config).results}
        cur: dict[str, TargetResult] = {}
        if current is not None:
            in_cur = [s for s in ordered if s.architecture in current.registry.entries]
            cur = {r.architecture: r for r in current.scan(in_cur, [method], hf_config).results}
        fix = None
        need = [s for s in in_cand if cand[s.architecture].verdict is not Verdict.SUPPORTED]
        if need and codemods is not None and method == file_method:
            from auditor.orchestration.fix import plan_fix

            fix = plan_fix(candidate, need, method, only)
        for s in ordered:
            targets.append(_judge(s.architecture, method, cand.get(s.architecture), cur.get(s.architecture),
                                  current is not None, fix, codemods, file_method, allowed, fail_on_warnings,
                                  candidate.registry.path))
    return GateReport(
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
    )


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
           fail_on_warnings: bool, registry_path: str | None = None) -> GateTarget:
    """The outcome of one target: native, patched (by ``fix``, a :class:`~auditor.orchestration.fix.FixResult`)
    or broken, with the problems that break it."""
    t = GateTarget(arch, method, cur, cand, None, "broken", current_given, allowed_warnings=allowed)
    if cand is None:
        t.problems.append(Problem("registry", f"{arch} is not in the candidate's model registry",
                                  hint="the architecture was removed or renamed upstream", path=registry_path))
        return t
    final = cand
    if cand.verdict is Verdict.SUPPORTED:
        t.outcome = "native"
    elif codemods is None:
        t.problems += _finding_problems(cand, "no codemods were given (--codemods); eagle-audit fix writes them")
    elif method != file_method:
        t.problems += _finding_problems(cand, f"the codemods file is for method {file_method}, not {method}")
    else:
        after = next((r for r in fix.after if r.architecture == arch), None)
        t.patched = after
        t.changes = [f"[{i.codemod}] {i.path}: {c}" for i in fix.invocations if arch in i.architectures
                     for c in i.changes]
        if after is not None and after.verdict is Verdict.SUPPORTED and not fix.problems:
            t.outcome = "patched"
            final = after
        else:
            t.problems += _fix_problems(arch, cand, after, fix)
    t.warnings = [f for f in final.findings if f.severity is Severity.WARNING and f.gate not in allowed]
    if fail_on_warnings and t.warnings:
        t.outcome = "broken"
        t.problems += [Problem(f.gate, f"warning {f.rule} is not in allowed-warnings: {f.message}",
                               hint="fix it, or add it to allowed-warnings", path=f.path, line=f.line)
                       for f in t.warnings]
    return t


def _codemod_for(gate: str) -> str | None:
    from rules.codemods import codemod_classes

    return gate if gate in codemod_classes() else None


def _finding_problems(result: TargetResult, hint: str) -> list[Problem]:
    out = []
    for f in result.findings:
        if f.severity is Severity.ERROR:
            out.append(Problem(f.gate, f.message, None, hint, f.path, f.line))
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
                out.append(Problem(f.gate, reason, _codemod_for(f.gate), "", f.path, f.line))
            continue
        for u in us:
            key = (u.gate, u.reason)
            if key in seen:
                continue
            seen.add(key)
            out.append(Problem(u.gate, u.reason, _codemod_for(u.gate), u.hint,
                               u.path or f.path, u.line or (f.line if not u.path or u.path == f.path else None)))
    return out


# -- release listing and version specs ---------------------------------------------------------


@dataclass(frozen=True)
class IndexListing:
    """What the package index lists for vllm: ``sdists`` (versions with a source archive that
    is not yanked), ``known`` (every release version, any file type) and ``yanked``."""

    sdists: tuple[str, ...]
    known: tuple[str, ...]
    yanked: tuple[str, ...] = ()


def index_listing() -> IndexListing:
    """Read the vllm page of pip's index once (see :mod:`auditor.source.fetch`)."""
    from auditor.source.fetch import _Client, _release_sdists, index_url

    sdists, known = _release_sdists(_Client(index_url()))
    ok = {s.version for s in sdists if not s.yanked}
    yanked = {s.version for s in sdists if s.yanked} - ok
    return IndexListing(
        sdists=tuple(str(v) for v in sorted(ok)),
        known=tuple(str(v) for v in sorted(set(known) | ok | yanked)),
        yanked=tuple(str(v) for v in sorted(yanked)),
    )


@dataclass(frozen=True)
class PlannedRelease:
    """One release of a matrix: its version, and why it is skipped (None: it is read)."""

    version: str
    skip: str | None = None


def _version(text: str, spec: str) -> Version:
    try:
        return Version(text.strip())
    except InvalidVersion:
        raise AuditError(f"--versions {spec!r}: {text.strip()!r} is not a version (expected e.g. "
                         "0.16.0,0.18.0 or 0.12.0..0.33.0)") from None


def parse_versions(spec: str, listing: IndexListing) -> list[PlannedRelease]:
    """The releases a ``--versions`` SPEC names, in version order, without repeats.

    SPEC is a comma-separated list of versions and inclusive ranges ``A..B`` (``A..``: from A to
    the newest release, ``..B``: up to B). A range covers every release the index lists (final
    releases only, unless an end is itself a pre-release); a listed version the index does not
    know is an error. Releases without a source archive are kept, with the reason they are
    skipped.

    Raises:
        AuditError: a malformed SPEC, an empty range, or a version not on the index.
    """
    known = sorted({Version(v) for v in listing.known})
    sdists = {Version(v) for v in listing.sdists}
    yanked = {Version(v) for v in listing.yanked}
    chosen: list[Version] = []
    items = [i.strip() for i in spec.split(",")]
    if not spec.strip() or any(not i for i in items):
        raise AuditError(f"--versions {spec!r}: expected a comma-separated list of versions or ranges A..B")
    for item in items:
        if ".." in item:
            lo_text, _, hi_text = item.partition("..")
            if ".." in hi_text:
                raise AuditError(f"--versions {spec!r}: {item!r} has more than one '..'")
            lo = _version(lo_text, spec) if lo_text.strip() else None
            hi = _version(hi_text, spec) if hi_text.strip() else None
            if lo is not None and hi is not None and lo > hi:
                raise AuditError(f"--versions {spec!r}: the range {item} is empty ({lo} > {hi})")
            picked = [v for v in known
                      if (lo is None or v >= lo) and (hi is None or v <= hi)
                      and (not (v.is_prerelease or v.is_devrelease) or v in (lo, hi))]
            if not picked:
                raise AuditError(f"--versions {spec!r}: no release on the index in {item}")
            chosen += picked
        else:
            v = _version(item, spec)
            if v not in known:
                from auditor.source.fetch import _nearest

                near = ", ".join(str(n) for n in _nearest(v, [k for k in known if k in sdists]))
                raise AuditError(f"--versions: vLLM {item} is not on the package index"
                                 + (f"; nearest releases: {near}" if near else ""))
            chosen.append(v)
    out = []
    for v in sorted(set(chosen)):
        if v in sdists:
            out.append(PlannedRelease(str(v)))
        elif v in yanked:
            out.append(PlannedRelease(str(v), "its source archive is yanked on the package index"))
        else:
            out.append(PlannedRelease(str(v), "no source archive (sdist) on the package index, only wheels"))
    return out


# -- matrix ----------------------------------------------------------------------------------


@dataclass
class ReleaseAudit:
    """One release's audit, as a worker returns it (picklable): the results of the names that
    resolved, and each name that did not with the reason."""

    version: str
    source: str
    results: list[TargetResult]
    unresolved: dict[str, str]
    seconds: float


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """sha256 of the analysis code itself (``auditor/``, ``rules/`` and the alias table): a
    cached matrix result is only valid for the code that computed it."""
    import hashlib

    import auditor
    import rules

    h = hashlib.sha256()
    for pkg in (auditor, rules):
        base = Path(pkg.__file__).parent
        for p in sorted(base.rglob("*")):
            if p.suffix in (".py", ".toml") and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(base)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _release_cache_path(archive: str, names: Sequence[str], method: str, model_type: str | None) -> Path | None:
    """Where the audit of a fetched release archive is cached: keyed on the archive's sha256 as
    recorded by :func:`auditor.source.fetch.fetch_release` (which has just verified the file against
    it), the request, and :func:`_code_digest`. None when no digest is recorded (an archive
    that was not fetched)."""
    import hashlib
    import json

    from auditor.source.fetch import recorded_sha256
    from auditor.index.tree import cache_root

    digest = recorded_sha256(Path(archive))
    if digest is None:
        return None
    key = hashlib.sha256(json.dumps([_code_digest(), digest, list(names), method, model_type]).encode()).hexdigest()
    return cache_root() / "matrix" / key[:2] / f"{key}.pkl"


def cached_release_audit(archive: str, names: Sequence[str], method: str, model_type: str | None) -> ReleaseAudit | None:
    """The cached audit of a release archive, or None."""
    from auditor.index.tree import load_cached

    path = _release_cache_path(archive, names, method, model_type)
    audit = load_cached(path) if path is not None else None
    return audit if isinstance(audit, ReleaseAudit) else None


def _store_release_audit(archive: str, names, method, model_type, audit: ReleaseAudit) -> None:
    from auditor.index.tree import store_cached

    path = _release_cache_path(archive, names, method, model_type)
    if path is not None:
        store_cached(path, audit)


def audit_release(version: str, archive: str, names: Sequence[str], method: str,
                  model_type: str | None = None, use_cache: bool = True) -> ReleaseAudit:
    """Audit ``names`` in the release archive ``archive`` (a top-level function, so that a
    process pool can run it). With ``use_cache``, the result is cached per archive sha256 (see
    :func:`cached_release_audit`), besides the index and result caches of the scan itself."""
    from auditor.source.sources import ArchiveSource
    from auditor.index.tree import SummaryCache, Tree

    if use_cache:
        hit = cached_release_audit(archive, names, method, model_type)
        if hit is not None:
            return hit
    t0 = time.perf_counter()
    auditor = Auditor(Tree(ArchiveSource(archive), SummaryCache(enabled=use_cache)))
    specs: list[TargetSpec] = []
    unresolved: dict[str, str] = {}
    for name in names:
        found, error = _try_resolve(auditor, [name], model_type, None)
        if error:
            unresolved[name] = error
        for s in found:
            if s.architecture not in {x.architecture for x in specs}:
                specs.append(s)
    results = auditor.scan(specs, [method]).results if specs else []
    audit = ReleaseAudit(version, Path(archive).name, results, unresolved, time.perf_counter() - t0)
    if use_cache:
        _store_release_audit(archive, names, method, model_type, audit)
    return audit


@dataclass
class MatrixRow:
    """One release and architecture: the verdict (``supported``, ``blocked``, ``unknown``,
    ``absent`` from the registry, or ``skipped`` with the ``reason``) and the blocking gates."""

    vllm_version: str
    architecture: str
    method: str
    verdict: str
    blocking: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reason: str = ""
    first_native: bool = False

    def as_dict(self) -> dict:
        return {"vllm_version": self.vllm_version, "architecture": self.architecture, "method": self.method,
                "verdict": self.verdict, "blocking": self.blocking, "warnings": self.warnings,
                "reason": self.reason or None, "first_native": self.first_native}


@dataclass
class MatrixReport:
    """The matrix: rows in release order, then architecture order."""

    model: list[str]
    versions: str
    method: str
    architectures: list[str]
    rows: list[MatrixRow]
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    jobs: int = 1

    @property
    def releases(self) -> list[str]:
        return list(dict.fromkeys(r.vllm_version for r in self.rows))

    @property
    def first_supported(self) -> dict[str, str | None]:
        """Architecture → the first release that supports it natively (None: none does)."""
        out: dict[str, str | None] = {a: None for a in self.architectures}
        for r in self.rows:
            if r.first_native:
                out[r.architecture] = r.vllm_version
        return out

    @property
    def first_all_supported(self) -> str | None:
        """The first release that supports every architecture natively."""
        for v in self.releases:
            rows = [r for r in self.rows if r.vllm_version == v]
            if rows and all(r.verdict == "supported" for r in rows):
                return v
        return None

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "versions": self.versions,
            "method": self.method,
            "architectures": self.architectures,
            "first_supported": self.first_supported,
            "first_all_supported": self.first_all_supported,
            "rows": [r.as_dict() for r in self.rows],
            "errors": [{"vllm_version": v, "error": e} for v, e in sorted(self.errors.items(), key=lambda x: Version(x[0]))],
            "seconds": round(self.seconds, 3),
            "jobs": self.jobs,
        }


def _expected_architectures(name: str) -> list[str]:
    """The architectures a name stands for before any tree is read: the alias table's targets
    for a model_type it lists, else the name itself when it looks like an architecture."""
    entry = load_alias_table().get("model_type", {}).get(name)
    if entry:
        return [t["architecture"] for t in entry["targets"]]
    return [name] if name[:1].isupper() else []


def run_matrix(
    names: Sequence[str],
    versions: str,
    *,
    method: str = "eagle3",
    model_type: str | None = None,
    jobs: int | None = None,
    fetch_workers: int = 4,
    use_cache: bool = True,
    listing: IndexListing | None = None,
    progress: Progress | None = None,
    fetch: Callable[..., Path] | None = None,
) -> MatrixReport:
    """Audit ``names`` in every release of ``versions`` (see :func:`parse_versions`).

    Archives are fetched by ``fetch_workers`` threads; each is audited as soon as it is there:
    from the per-archive result cache when it holds it (``use_cache``), else by a pool of
    ``jobs`` worker processes (default: the CPU count; started on the first miss), or in this
    process when ``jobs`` is 1. A release that cannot be fetched or read is kept as
    ``skipped`` with the reason, and listed in ``errors``.

    Raises:
        AuditError: a bad SPEC, or a name that resolves in none of the releases read.
    """
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed

    if fetch is None:
        from auditor.source.fetch import fetch_release as fetch
    t0 = time.perf_counter()
    names = list(names)
    if not names:
        raise AuditError("no target: give --model NAME (or targets in pyproject.toml, tool.eagle-audit)")
    plan = parse_versions(versions, listing if listing is not None else index_listing())
    to_read = [p.version for p in plan if p.skip is None]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(to_read) or 1))
    audits: dict[str, ReleaseAudit] = {}
    errors: dict[str, str] = {}
    done = {"fetch": 0, "audit": 0}

    def tick(stage: str) -> None:
        done[stage] += 1
        if progress:
            progress(stage, done[stage], len(to_read))

    if progress:
        progress("fetch", 0, len(to_read))
        progress("audit", 0, len(to_read))
    pool = None
    try:
        with ThreadPoolExecutor(max(1, min(fetch_workers, len(to_read) or 1))) as threads:
            fetching = {threads.submit(fetch, v, progress=False): v for v in to_read}
            auditing = {}
            for fut in as_completed(fetching):
                v = fetching[fut]
                try:
                    archive = str(fut.result())
                except AuditError as exc:
                    errors[v] = str(exc)
                    tick("fetch")
                    tick("audit")
                    continue
                tick("fetch")
                args = (v, archive, tuple(names), method, model_type, use_cache)
                hit = cached_release_audit(*args[1:5]) if use_cache else None
                if hit is not None:
                    audits[v] = hit
                    tick("audit")
                    continue
                if pool is None and jobs > 1:
                    import multiprocessing

                    # spawn, not fork: the download threads may hold locks at fork time
                    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
                if pool is None:
                    _collect(v, lambda: audit_release(*args), audits, errors)
                    tick("audit")
                else:
                    auditing[pool.submit(audit_release, *args)] = v
            for fut in as_completed(auditing):
                _collect(auditing[fut], fut.result, audits, errors)
                tick("audit")
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return _matrix(names, versions, method, plan, audits, errors, time.perf_counter() - t0,
                   jobs if pool is not None else 1)


def _collect(version: str, get: Callable[[], ReleaseAudit], audits: dict, errors: dict) -> None:
    try:
        audits[version] = get()
    except AuditError as exc:
        errors[version] = str(exc)


def _matrix(names, versions, method, plan, audits, errors, seconds, jobs) -> MatrixReport:
    archs: list[str] = []
    for n in names:
        archs += [a for a in _expected_architectures(n) if a not in archs]
    for v in sorted(audits, key=Version):
        archs += [r.architecture for r in audits[v].results if r.architecture not in archs]
    resolved = {n for a in audits.values() for n in names if n not in a.unresolved}
    unknown = [n for n in names if n not in resolved]
    if audits and unknown:
        first = next(a.unresolved[unknown[0]] for a in audits.values() if unknown[0] in a.unresolved)
        read = ", ".join(sorted(audits, key=Version))
        raise AuditError(f"{unknown[0]!r} is in none of the releases read ({read}): {first}")
    rows: list[MatrixRow] = []
    seen_native: set[str] = set()
    for p in plan:
        a = audits.get(p.version)
        by_arch = {r.architecture: r for r in a.results} if a else {}
        for arch in archs:
            if p.skip or a is None:
                reason = p.skip or f"could not be read: {errors.get(p.version, 'unknown error')}"
                rows.append(MatrixRow(p.version, arch, method, "skipped", reason=reason))
                continue
            r = by_arch.get(arch)
            if r is None:
                rows.append(MatrixRow(p.version, arch, method, "absent", reason="not in the model registry"))
                continue
            row = MatrixRow(p.version, arch, method, r.verdict.value, r.blocking,
                            [f.gate for f in r.findings if f.severity is Severity.WARNING])
            if row.verdict == "unknown":
                row.reason = "; ".join(f.message for f in r.findings if f.severity is Severity.UNKNOWN)
            if row.verdict == "supported" and arch not in seen_native:
                seen_native.add(arch)
                row.first_native = True
            rows.append(row)
    return MatrixReport(names, versions, method, archs, rows, errors, seconds, jobs)
