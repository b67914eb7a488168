"""``eagle-audit compare``: the same targets audited in two engines (vLLM and SGLang), side by
side, so that a team can choose where to serve before spending a GPU-day. Pure: returns a
:class:`CompareReport`; the command line prints it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from auditor.engines.catalog import engine_for
from auditor.model.errors import AuditError
from auditor.model.findings import fixable
from auditor.model.options import RunOptions, method_family
from auditor.model.results import TargetResult
from auditor.orchestration.config import relabel_sources
from auditor.orchestration.scan import Auditor, open_tree
from auditor.orchestration.upgrade import side_kind


@dataclass
class EngineSide:
    """One engine of the comparison: the engine, the release or PATH as given (``spec``), and
    the version and source label of the tree read."""

    engine: str
    spec: str
    version: str | None
    source: str

    @property
    def name(self) -> str:
        """``vLLM 0.16.0`` / ``SGLang 0.5.10.post1`` (the spec when the tree states no version)."""
        return f"{engine_for(self.engine).display} {self.version or self.spec}"

    def as_dict(self) -> dict:
        return {"engine": self.engine, "spec": self.spec, "version": self.version, "source": self.source}


@dataclass
class Cell:
    """One target in one engine: the verdict (``absent`` when the engine's tree does not register
    the architecture), the blocking gates, and the reasons (``gate: message (file:line)``, the
    error and unknown findings); ``fix_available``: blocked, and ``eagle-audit fix`` can patch
    every blocking gate (no verdict left unknown); ``gates``: the findings with their
    ``file:line`` (:meth:`~auditor.model.findings.Finding.location`)."""

    verdict: str
    blocking: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    fix_available: bool = False
    gates: list[dict] = field(default_factory=list)

    @classmethod
    def of(cls, r: TargetResult | None) -> "Cell":
        """The cell of a result (None: absent)."""
        if r is None:
            return cls("absent")
        reasons = [f"{f.gate}: {f.message} ({f.where})" for f in r.findings if f.severity.value in ("error", "unknown")]
        if r.note:
            reasons.append(r.note)
        return cls(r.verdict.value, list(r.blocking), reasons, fixable(r.verdict, r.findings),
                   [f.location() for f in r.findings])

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "blocking": self.blocking, "reasons": self.reasons,
                "fix_available": self.fix_available, "gates": self.gates}


@dataclass
class CompareRow:
    """One target architecture and method, with a :class:`Cell` per engine (in side order)."""

    architecture: str
    method: str
    cells: list[Cell]

    def as_dict(self, sides: list[EngineSide]) -> dict:
        return {"architecture": self.architecture, "method": self.method,
                "engines": {s.engine: c.as_dict() for s, c in zip(sides, self.cells)}}


@dataclass
class CompareReport:
    """The comparison: the engine sides, one row per target, and per side whether it supports
    every target (``supports_all``). ``ok``: some engine supports every target."""

    sides: list[EngineSide]
    rows: list[CompareRow]
    unresolved: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def supports_all(self) -> list[bool]:
        """Per side: every row's cell is ``supported``."""
        return [bool(self.rows) and all(r.cells[i].verdict == "supported" for r in self.rows)
                for i in range(len(self.sides))]

    @property
    def ok(self) -> bool:
        """True when some engine supports every target (the command then exits 0)."""
        return any(self.supports_all)

    def supported_by(self, i: int) -> list[str]:
        """The architectures side ``i`` supports, in row order."""
        return [r.architecture for r in self.rows if r.cells[i].verdict == "supported"]

    def fixable_by(self, i: int) -> list[str]:
        """The architectures side ``i`` blocks with a fix available for every blocking gate."""
        return [r.architecture for r in self.rows if r.cells[i].fix_available]

    def as_dict(self) -> dict:
        return {
            "sides": [s.as_dict() for s in self.sides],
            "rows": [r.as_dict(self.sides) for r in self.rows],
            "supports_all": {s.engine: ok for s, ok in zip(self.sides, self.supports_all)},
            "ok": self.ok,
            "unresolved": self.unresolved,
        }


def open_engine_side(engine: str, value: str, *, progress: bool = False, use_cache: bool = True) -> Auditor:
    """An :class:`Auditor` over ``value`` read as a tree of ``engine``: a release version (fetched
    and cached: vLLM's sdist, SGLang's sdist or wheel) or a PATH (folder or archive).

    Raises:
        AuditError: a value that is neither a path nor a version, a tree of another engine, a
            release that cannot be fetched.
    """
    eng = engine_for(engine)
    if side_kind(value) == "path":
        tree = open_tree(value, None, progress=progress, use_cache=use_cache, engine=eng.name)
    else:  # the engine's own release option (``vllm_version``, ``sglang_version``)
        release = {"vllm_version": None, eng.release_option: value}
        tree = open_tree(None, progress=progress, use_cache=use_cache, **release)
    return Auditor(tree, engine=eng)


def run_compare(names: Sequence[str], auditors: Sequence[tuple[str, Auditor]], *, method: str = "eagle3",
                model_type: str | None = None, hf_config: dict | None = None,
                options: RunOptions | None = None, sources: dict[str, str] | None = None) -> CompareReport:
    """Audit the targets ``names`` (architectures or model_types, as ``scan --model`` takes them)
    in each engine's tree.

    Args:
        names: the targets.
        auditors: ``(spec as given, auditor)`` per engine, in column order.
        method: the speculative method (every engine must audit it).
        model_type: the targets' text model_type (vLLM's allowlist reads it).
        hf_config: the checkpoint's parsed ``config.json`` (``--hf-config``), read by both
            engines' audits; its ``architectures`` are targets too.
        options: the run both engines are audited for (pipeline-parallel size, drafter config,
            …; default: a plain run).
        sources: where a ``--model-type`` or ``--hf-config`` no flag gave came from
            (:func:`~auditor.orchestration.config.relabel_sources`).

    Returns:
        The :class:`CompareReport`: rows in the order the targets first resolve.

    Raises:
        AuditError: no target; a method an engine does not audit; a name that resolves in no
            engine.
    """
    names = list(names) or [a for a in (hf_config or {}).get("architectures") or [] if isinstance(a, str)]
    if not names:
        raise AuditError("no target: give --model NAME (or models in [tool.eagle-audit], pyproject.toml)")
    sides, results, order, unresolved = [], [], [], {}
    for spec, a in auditors:
        if method_family(method) not in a.engine.methods:  # deepseek_mtp is read as mtp
            raise AuditError(f"--method {method}: {a.engine.display} trees are audited for "
                             f"{', '.join(a.engine.methods)} only")
        sides.append(EngineSide(a.engine.name, spec, a.tree.version(), getattr(a.tree.source, "label", "")))
        specs = []
        for name in names:
            try:
                found = relabel_sources(a.engine.resolve_targets(a.registry, [name], model_type, hf_config), sources)
            except AuditError as exc:
                unresolved.setdefault(name, {})[a.engine.name] = str(exc)
                continue
            specs += [s for s in found if s.architecture not in {x.architecture for x in specs}]
        rep = a.scan(specs, [method], hf_config, options=options) if specs else None
        by_arch = {r.architecture: r for r in (rep.results if rep else [])}
        results.append(by_arch)
        order += [s.architecture for s in specs if s.architecture not in order]
    if not order:
        raise AuditError("no target resolves in any engine: " + "; ".join(
            f"{n}: {', '.join(f'{e}: {m}' for e, m in per.items())}" for n, per in unresolved.items()))
    rows = [CompareRow(arch, method, [Cell.of(res.get(arch)) for res in results]) for arch in order]
    return CompareReport(sides, rows, unresolved)
