"""What the pre-upgrade check (the ``gate`` command, :func:`auditor.orchestration.upgrade.run_gate`)
finds, as objects: the upgrade checks it alone reports (:data:`UPGRADE_CHECKS`, EA390–EA392), the
sides it scanned (:class:`Side`), each target's outcome (:class:`UpgradeTarget`, with its
:class:`Problem` list) and the whole :class:`UpgradeReport` (its outcome, exit code, message and
JSON). Pure: nothing is printed.

Words: a *gate* is a hurdle that blocks a target in one tree (``allowlist``, ``interface``, …,
checked by the rules in ``rules/``); an *upgrade check* compares two trees or validates a patch,
and only the ``gate`` command reports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from auditor.engines.catalog import engine_for
from auditor.model.findings import Finding, Severity
from auditor.model.outcomes import ReleaseVerdict, UpgradeOutcome
from auditor.model.results import TargetResult
from auditor.orchestration.scan import Auditor


@dataclass(frozen=True)
class UpgradeCheck:
    """A check of the ``gate`` command (it compares trees or validates a patch, so it is no
    rule of one tree): the same metadata as a rule in ``rules/``, for the SARIF and JUnit
    outputs. ``GATE`` is the id its problems and SARIF results carry."""

    CODE: str
    GATE: str
    NAME: str
    SUMMARY: str
    WHY: str
    HOW_TO_FIX: str
    BLOCKING: bool = True
    FIX_AVAILABLE: bool = False


#: The upgrade checks by code.
UPGRADE_CHECKS: dict[str, UpgradeCheck] = {c.CODE: c for c in (
    UpgradeCheck("EA390", "regression", "TargetRegressed",
                 "A target supported by the current release is not supported by the candidate.",
                 "Upgrading would lose EAGLE-3 support that works today.",
                 "Keep the current release, or carry codemods that make the candidate pass (eagle-audit fix).",
                 BLOCKING=False),
    UpgradeCheck("EA391", "registry", "TargetAbsent",
                 "The target architecture is not in the candidate's model registry.",
                 "vLLM cannot build the target at all: it was removed or renamed upstream.",
                 "Use the architecture name the candidate registers (eagle-audit explain --all)."),
    UpgradeCheck("EA392", "validation", "PatchInvalid",
                 "The codemods produced a file that does not parse or compile.",
                 "A patch that does not compile cannot be shipped.",
                 "Regenerate the codemods on the candidate (eagle-audit fix --out)."),
)}


@dataclass
class Side:
    """What was scanned on one side of the upgrade (current or candidate release): as given
    (``spec``), and as found."""

    spec: str
    #: the tree's release, as it states it (the JSON's ``vllm_version``, whichever engine)
    release: str | None
    source: str
    #: the engine of the tree (``vllm``, ``sglang``)
    engine: str = "vllm"
    #: given as a PATH (a folder or an archive on disk) rather than a release version
    local: bool = False
    #: a folder that carries a backup of ``eagle-audit fix --apply``: patched locally, so its
    #: verdicts are the patched tree's, not the release's
    patched_locally: bool = False

    @classmethod
    def of(cls, spec: str, auditor: Auditor) -> "Side":
        """The side ``spec`` as read by ``auditor`` (its tree's version and source label, whether
        it was given as a path, and whether it carries a backup of ``fix --apply``)."""
        from auditor.workspace.backup import BACKUP_DIR

        local = bool(spec) and Path(spec).expanduser().exists()
        root = auditor.tree.source.root() if hasattr(auditor.tree.source, "root") else None
        package = getattr(auditor.tree.source, "package", "vllm")
        patched = root is not None and any((d / BACKUP_DIR).is_dir() for d in (Path(root), Path(root) / package))
        return cls(spec, auditor.tree.version(), getattr(auditor.tree.source, "label", ""),
                   getattr(getattr(auditor, "engine", None), "name", "vllm"), local, patched)

    @property
    def name(self) -> str:
        """``vLLM X`` (``SGLang X``) when the tree states its version, else the spec as given."""
        engine = engine_for(self.engine).display
        return f"{engine} {self.release}" if self.release else self.spec

    @property
    def described(self) -> str:
        """What was compared, in words: ``the release vLLM 0.18.0``, ``the tree PATH (vLLM
        0.16.0)``, ``the tree PATH (vLLM 0.16.0, patched locally by eagle-audit fix --apply)``."""
        if not self.local:
            return f"the release {self.name}"
        what = self.name if self.release else "version not stated"
        if self.patched_locally:
            what += ", patched locally by eagle-audit fix --apply"
        return f"the tree {self.spec} ({what})"

    def as_dict(self) -> dict:
        return {"spec": self.spec, "vllm_version": self.release, "source": self.source, "engine": self.engine,
                "local": self.local, "patched_locally": self.patched_locally}


# -- results ---------------------------------------------------------------------------------


@dataclass
class Problem:
    """Why a target is broken: the ``gate`` (a gate id such as ``aux-capture``, a warning's
    gate id, or an upgrade check's: ``registry``, ``validation``), the ``codemod`` concerned
    (None when no codemod covers it or none was given), what went wrong (``reason``), what to do
    (``hint``), and where."""

    gate: str
    reason: str
    codemod: str | None = None
    hint: str = ""
    path: str | None = None
    line: int | None = None

    @property
    def where(self) -> str:
        """``path:line`` (or ``path``, or ``""``)."""
        return f"{self.path}:{self.line}" if self.path and self.line else (self.path or "")

    def text(self) -> str:
        """One line: gate, codemod, where, reason and hint."""
        cm = f" (codemod {self.codemod})" if self.codemod else ""
        where = f" [{self.where}]" if self.where else ""
        hint = f" — {self.hint}" if self.hint else ""
        return f"{self.gate}{cm}{where}: {self.reason}{hint}"

    def as_dict(self) -> dict:
        return {"gate": self.gate, "codemod": self.codemod, "reason": self.reason, "hint": self.hint,
                "path": self.path, "line": self.line}


@dataclass
class UpgradeTarget:
    """The ``gate`` command's account of one target and method.

    ``current``/``candidate``: the scans (None: not given / not in that tree's registry);
    ``patched``: the re-scan of the candidate with the codemods applied (None: not attempted);
    ``outcome``: native, patched or broken; ``problems``: why it is broken;
    ``changes``: what the codemods changed for this target; ``warnings``: the warning findings
    of the final state (candidate, or patched candidate) that are not allowed.
    """

    architecture: str
    method: str
    current: TargetResult | None
    candidate: TargetResult | None
    patched: TargetResult | None
    outcome: UpgradeOutcome
    current_given: bool = False
    problems: list[Problem] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    allowed_warnings: tuple[str, ...] = ()

    @property
    def current_verdict(self) -> ReleaseVerdict | None:
        """The verdict in the current release (``absent``: not in its registry), or None (no
        current release given)."""
        if not self.current_given:
            return None
        return ReleaseVerdict.of(self.current.verdict if self.current else None)

    @property
    def candidate_verdict(self) -> ReleaseVerdict:
        """The verdict in the candidate release, before any codemod (``absent``: not in its
        registry)."""
        return ReleaseVerdict.of(self.candidate.verdict if self.candidate else None)

    @property
    def patched_verdict(self) -> ReleaseVerdict | None:
        """The verdict in the patched candidate, or None (the codemods were not replayed)."""
        return ReleaseVerdict.of(self.patched.verdict) if self.patched else None

    @property
    def regression(self) -> bool:
        """Supported by the current release and not by the candidate (before any codemod)."""
        return (self.current_verdict is ReleaseVerdict.SUPPORTED
                and self.candidate_verdict is not ReleaseVerdict.SUPPORTED)

    @property
    def fixed_gates(self) -> list[str]:
        """Gates that block the candidate and no longer block once the codemods are applied (none
        when the patched files do not compile)."""
        if self.candidate is None or self.patched is None or any(p.gate == "validation" for p in self.problems):
            return []
        after = set(self.patched.blocking)
        return [g for g in self.candidate.blocking if g not in after]

    @property
    def not_evaluated(self) -> dict[str, str]:
        """Gate id → why this run did not check it (a gate of another method, or one that needs a
        run option such as ``--draft-config``), as the candidate's scan says (see
        :attr:`auditor.model.results.TargetResult.not_evaluated`); empty when the target is absent."""
        scan = self.patched or self.candidate
        return dict(scan.not_evaluated) if scan is not None else {}

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
            "current_verdict": _value(self.current_verdict),
            "candidate_verdict": self.candidate_verdict.value,
            "patched_verdict": _value(self.patched_verdict),
            "outcome": self.outcome.value,
            "regression": self.regression,
            "blocking": self.candidate.blocking if self.candidate else [],
            "fixed_by_codemods": self.fixed_gates,
            "problems": [p.as_dict() for p in self.problems],
            "codemod_changes": self.changes,
            "warnings": [{"rule": f.rule, "gate": f.gate, "message": f.message, "path": f.path, "line": f.line}
                         for f in self.warnings],
            "findings": findings,
            "not_evaluated": [{"gate": g, "reason": why} for g, why in self.not_evaluated.items()],
        }


def _value(v: ReleaseVerdict | None) -> str | None:
    return v.value if v is not None else None


@dataclass
class UpgradeReport:
    """The ``gate`` command's result: every target's :class:`UpgradeTarget` and the overall
    outcome."""

    model: list[str]
    methods: list[str]
    candidate: Side
    current: Side | None
    targets: list[UpgradeTarget]
    codemods: Path | None = None
    codemods_names: list[str] = field(default_factory=list)
    codemods_source: str | None = None
    allowed_warnings: tuple[str, ...] = ()
    fail_on_warnings: bool = False
    config: Path | None = None
    seconds: float = 0.0
    #: What to do next, each said once (e.g. the ``fix`` command that writes the missing codemods).
    next_steps: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> UpgradeOutcome:
        """Broken if any target is broken, else patched if any needs the codemods, else
        native."""
        return UpgradeOutcome.worst(t.outcome for t in self.targets)

    @property
    def exit_code(self) -> int:
        """0 for native or patched, 1 for broken."""
        return 1 if self.outcome is UpgradeOutcome.BROKEN else 0

    @property
    def regressions(self) -> list[UpgradeTarget]:
        """The targets that regressed (see :attr:`UpgradeTarget.regression`)."""
        return [t for t in self.targets if t.regression]

    def message(self) -> str:
        """One sentence for humans: the outcome and what to do."""
        cand = self.candidate.name
        if self.outcome is UpgradeOutcome.NATIVE:
            tail = ": drop your codemods" if self.codemods else ""
            if self.candidate.patched_locally:
                return (f"{self.candidate.described} supports every target as it is, with its local patch; this "
                        f"says nothing of the unpatched release{' ' + cand if self.candidate.release else ''}.")
            if self.candidate.local:
                return f"{self.candidate.described} supports every target as it is, without codemods{tail}."
            return f"{cand} supports every target natively{tail}."
        if self.outcome is UpgradeOutcome.PATCHED:
            native = [t.architecture for t in self.targets if t.outcome is UpgradeOutcome.NATIVE]
            extra = f" ({', '.join(native)} natively)" if native else ""
            return (f"{cand} needs the codemods: they apply cleanly and the patched tree re-scans as "
                    f"supported{extra}.")
        broken = [t for t in self.targets if t.outcome is UpgradeOutcome.BROKEN]
        parts = []
        for t in broken:
            gates = ", ".join(dict.fromkeys(
                f"{p.gate} (codemod {p.codemod})" if p.codemod and self.codemods else p.gate
                for p in t.problems)) or "?"
            parts.append(f"{t.architecture} [{t.method}]: {gates}")
        return f"{cand} is broken for {'; '.join(parts)}."

    def as_dict(self) -> dict:
        return {
            "outcome": self.outcome.value,
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
                             "current_verdict": _value(t.current_verdict),
                             "candidate_verdict": t.candidate_verdict.value}
                            for t in self.regressions],
            "targets": [t.as_dict() for t in self.targets],
            "summary": {o.value: sum(1 for t in self.targets if t.outcome is o) for o in UpgradeOutcome},
            "next_steps": list(self.next_steps),
            "seconds": round(self.seconds, 3),
        }
