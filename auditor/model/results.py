"""What a scan returns: requested targets, one result per target and method, the whole report.

Plain data with ``as_dict`` (JSON-ready); every renderer in :mod:`auditor.render` serialises these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from auditor.cache import cacheable
from auditor.model.findings import Finding, Verdict
from auditor.model.options import RunOptions


@cacheable
@dataclass
class TargetSpec:
    """A requested target before analysis: architecture and what is known of its model_types."""

    architecture: str
    model_type: str | None
    text_model_type: str | None
    source: str


@cacheable
@dataclass
class TargetResult:
    """The audit of one target for one method: verdict and findings, plus what the tool assumed."""

    architecture: str
    class_name: str | None
    method: str
    verdict: Verdict
    findings: list[Finding]
    model_type: str | None = None
    text_model_type: str | None = None
    model_type_source: str = ""
    holder: str | None = None
    language_model: str | None = None
    #: ``target``, ``drafter`` or ``pooling``: the role of the registry row (only targets are audited)
    role: str = "target"
    #: for a row that is not a target, what it is (one sentence)
    note: str | None = None
    #: the run the verdict assumes (method as requested, pipeline-parallel size, drafter config, …)
    run_options: RunOptions | None = None
    #: the draft the run builds (MTP: the rewritten architecture; EAGLE with a drafter config: its
    #: rewritten architecture), and its class
    draft_architecture: str | None = None
    draft_class: str | None = None
    #: gate id → why the gate was not evaluated for this run (it applies to other methods, or
    #: needs a run option such as --draft-config, or the class is not resolved); such a gate
    #: neither passes nor blocks
    not_evaluated: dict[str, str] = field(default_factory=dict)

    @property
    def blocking(self) -> list[str]:
        """Gate ids of the error findings, in rule order, without repeats."""
        out: list[str] = []
        for f in self.findings:
            if f.severity.value == "error" and f.gate not in out:
                out.append(f.gate)
        return out

    def as_dict(self) -> dict:
        return {
            "architecture": self.architecture,
            "role": self.role,
            "class": self.class_name,
            "method": self.method,
            "verdict": self.verdict.value,
            "blocking": self.blocking,
            "model_type": self.model_type,
            "text_model_type": self.text_model_type,
            "model_type_source": self.model_type_source,
            "holder": self.holder,
            "language_model": self.language_model,
            "findings": [f.as_dict() for f in self.findings],
            "run_options": self.run_options.as_dict() if self.run_options else None,
            "draft": ({"architecture": self.draft_architecture, "class": self.draft_class}
                      if self.draft_architecture else None),
            "not_evaluated": [{"gate": g, "reason": why} for g, why in self.not_evaluated.items()],
            **({"note": self.note} if self.note else {}),
        }


@cacheable
@dataclass
class ScanReport:
    """A scan's results: the tree's version and label, one :class:`TargetResult` per requested
    row and method, the files that did not parse, and the drafter and pooling architectures the
    tree registers."""

    source: str
    results: list[TargetResult]
    #: the platform whose import-time branches were followed (``cuda``, ``rocm``, ``xpu``, ``cpu``)
    platform: str = "cuda"
    #: the transformers source whose HF config classes the verdicts read: ``{"version", "how"}``,
    #: or None when no verdict needed one
    transformers: dict | None = None
    parse_errors: dict[str, str] = field(default_factory=dict)
    drafters: list[str] = field(default_factory=list)
    pooling: list[str] = field(default_factory=list)
    #: the engine of the tree (``vllm``, ``sglang``) and its release as the tree states it
    engine: str = "vllm"
    engine_version: str | None = None
    #: for an installed engine: code of its environment, outside the tree, that runs when the
    #: engine starts, as ``{"path", "what"}`` (see
    #: :func:`auditor.source.startup.environment_startup_code`); the verdicts assume it changes nothing
    environment_code: list[dict] = field(default_factory=list)

    @property
    def version(self) -> str | None:
        """The tree's engine release (vLLM's or SGLang's)."""
        return self.engine_version

    @property
    def vllm_version(self) -> str | None:
        """The release under the output's ``vllm_version`` key (the JSON schema's name, kept
        stable): the tree's release for a vLLM tree, None for another engine's (whose release is
        ``engine_version``)."""
        return self.engine_version if self.engine == "vllm" else None

    @property
    def title(self) -> str:
        """``vLLM 0.16.0`` / ``SGLang 0.5.10.post1`` (``?`` for an unknown version)."""
        name = {"vllm": "vLLM", "sglang": "SGLang"}.get(self.engine, self.engine)
        return f"{name} {self.version or '?'}"

    @property
    def targets(self) -> list[TargetResult]:
        """The results of target rows (the ones with a verdict)."""
        return [r for r in self.results if r.role == "target"]

    def internal_errors(self) -> list[TargetResult]:
        """The targets whose audit failed inside the tool (a rule or the index raised): each is
        ``unknown`` with an :data:`~auditor.model.findings.INTERNAL_RULE` finding saying why.

        Returns:
            Those results, in report order (empty when every audit ran to its end).
        """
        from auditor.model.findings import INTERNAL_RULE

        return [r for r in self.results if any(f.rule == INTERNAL_RULE for f in r.findings)]

    def fixable(self) -> dict[str, list[str]]:
        """Method → the blocked targets (architectures, in report order) that ``eagle-audit fix``
        can patch: every blocking finding has a fix available and no verdict is left unknown."""
        out: dict[str, list[str]] = {}
        for r in self.targets:
            if r.verdict is not Verdict.BLOCKED or any(f.severity.value == "unknown" for f in r.findings):
                continue
            if all(f.fix_available for f in r.findings if f.severity.value == "error"):
                archs = out.setdefault(r.method, [])
                if r.architecture not in archs:
                    archs.append(r.architecture)
        return out

    def summary(self) -> dict[str, int]:
        """Verdict counts over target results (``supported``, ``blocked``, ``unknown``), and the
        number of architectures of each role among the results (``targets``, ``drafters``,
        ``pooling``)."""
        out = {v.value: sum(1 for r in self.targets if r.verdict is v) for v in Verdict.of_targets()}
        for role, key in (("target", "targets"), ("drafter", "drafters"), ("pooling", "pooling")):
            out[key] = len({r.architecture for r in self.results if r.role == role})
        return out

    def as_dict(self) -> dict:
        return {
            "engine": self.engine,
            "engine_version": self.version,
            "vllm_version": self.vllm_version,
            "source": self.source,
            "platform": self.platform,
            "transformers": self.transformers,
            "results": [r.as_dict() for r in self.results],
            **({"environment_code": self.environment_code} if self.environment_code else {}),
            "parse_errors": [{"path": p, "error": e} for p, e in sorted(self.parse_errors.items())],
            "drafters": self.drafters,
            "pooling": self.pooling,
            "summary": self.summary(),
        }
