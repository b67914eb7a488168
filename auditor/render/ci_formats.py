"""CI formats of a scan, a gate and a matrix: SARIF 2.1.0 (through ``sarif-om``, Microsoft's SARIF
object model) and JUnit XML (through ``junitparser``). Rule metadata comes from ``rules/``. The
Markdown of a gate and a matrix, and the rich tables ``--format table`` prints for them, are in
:mod:`auditor.render.upgrade_text`."""

from __future__ import annotations

import json
from dataclasses import dataclass

import attr
import sarif_om as sarif
from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from auditor.model.outcomes import UpgradeOutcome
from auditor.model.results import ScanReport
from auditor.render.text import clean, optional_value
from rules.registry import RULES

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "unknown": "note"}


def _to_json(obj):
    """Serialise a sarif-om object tree with SARIF's property names, dropping unset fields."""
    if attr.has(type(obj)):
        out = {}
        for f in attr.fields(type(obj)):
            value = getattr(obj, f.name)
            default = f.default.factory() if isinstance(f.default, attr.Factory) else f.default
            if f.name != "version" and (value is None or value == default):
                continue
            out[f.metadata.get("schema_property_name", f.name)] = _to_json(value)
        return out
    if isinstance(obj, (list, tuple)):
        return [_to_json(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _to_json(v) for k, v in obj.items()}
    return obj


def _descriptors(checks: dict) -> list:
    """SARIF rule descriptors for rule classes (or upgrade checks) keyed by code."""
    return [
        sarif.ReportingDescriptor(
            id=code,
            name=r.NAME,
            short_description=sarif.MultiformatMessageString(text=r.SUMMARY),
            full_description=sarif.MultiformatMessageString(text=r.WHY),
            help=sarif.MultiformatMessageString(text=r.HOW_TO_FIX),
            default_configuration=sarif.ReportingConfiguration(level="error" if r.BLOCKING else "warning"),
            properties={"gate": r.GATE, "fixAvailable": r.FIX_AVAILABLE},
        )
        for code, r in checks.items()
    ]


#: The uriBaseId of the engine's tree in SARIF: the folder that contains ``vllm/`` (or ``sglang/``).
#: It is not in the user's repository, so ``originalUriBaseIds`` describes it without a ``uri``:
#: a consumer knows it cannot resolve it (SARIF 2.1.0 §3.14.14, §3.4.4).
ENGINE_ROOT = "ENGINEROOT"
#: The uriBaseId of the anchor in the user's repository: the folder eagle-audit ran in.
REPO_ROOT = "%SRCROOT%"


@dataclass(frozen=True)
class Anchor:
    """Where a SARIF result is placed in the user's repository: the settings file that names the
    targets (``uri`` relative to the folder eagle-audit ran in, POSIX) and the line of its
    ``[tool.eagle-audit]`` table."""

    uri: str
    line: int


def settings_anchor(path, cwd=None) -> Anchor | None:
    """The :class:`Anchor` of a settings file (the ``pyproject.toml`` read): its path relative to
    ``cwd`` (default: the working folder), at the line of ``[tool.eagle-audit]``; None when
    there is no file, or it lies outside ``cwd`` (a code-scanning service could not place it)."""
    import os
    import re
    from pathlib import Path

    if path is None:
        return None
    path, cwd = Path(path).resolve(), Path(cwd or os.getcwd()).resolve()
    try:
        rel = path.relative_to(cwd)
    except ValueError:
        return None
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    header = re.compile(r"^\s*\[\s*tool\s*\.\s*[\"']?eagle-audit[\"']?\s*\]")
    line = next((i for i, text in enumerate(lines, 1) if header.match(text)), 1)
    return Anchor(rel.as_posix(), line)


def _engine_location(path: str | None, line: int | None, tree: str, id_: int = 1):
    """The engine-side location of a finding, as a SARIF related location (``ENGINEROOT``)."""
    region = sarif.Region(start_line=line) if line else None
    where = f"{path}:{line}" if line else path
    return sarif.Location(id=id_, message=sarif.Message(text=f"{tree}: {where} (not in this repository)"),
                          physical_location=sarif.PhysicalLocation(
                              artifact_location=sarif.ArtifactLocation(uri=path, uri_base_id=ENGINE_ROOT),
                              region=region))


def _placed(text: str, path: str | None, line: int | None, tree: str, anchor: Anchor | None):
    """A result's message, ``locations`` and ``relatedLocations`` (see the README, "SARIF
    locations"): with a finding's file, the engine location is related location 1, linked from the
    message (``[path:line](1)``); the primary location is the ``anchor`` in the user's repository
    when there is one, else the engine location itself (under ``ENGINEROOT``, which a
    code-scanning service shows without a file)."""
    if not path:
        primary = ([sarif.Location(physical_location=sarif.PhysicalLocation(
            artifact_location=sarif.ArtifactLocation(uri=anchor.uri, uri_base_id=REPO_ROOT),
            region=sarif.Region(start_line=anchor.line)))] if anchor else None)
        return sarif.Message(text=text), primary, None
    where = f"{path}:{line}" if line else path
    # the link to related location 1 (SARIF §3.11.6); a "](" of the text itself is escaped so that
    # it cannot read as another link
    message = sarif.Message(text=f"{text.replace('](', chr(92) + '](')} [{tree}: {where}](1)")
    related = [_engine_location(path, line, tree)]
    if anchor is None:
        region = sarif.Region(start_line=line) if line else None
        primary = [sarif.Location(physical_location=sarif.PhysicalLocation(
            artifact_location=sarif.ArtifactLocation(uri=path, uri_base_id=ENGINE_ROOT), region=region))]
    else:
        primary = [sarif.Location(
            message=sarif.Message(text=f"the settings that name this target; the finding is in {tree} at {where}"),
            physical_location=sarif.PhysicalLocation(
                artifact_location=sarif.ArtifactLocation(uri=anchor.uri, uri_base_id=REPO_ROOT),
                region=sarif.Region(start_line=anchor.line)))]
    return message, primary, related


def _base_ids(tree: str, anchor: Anchor | None) -> dict:
    """``run.originalUriBaseIds``: the engine's tree (no ``uri``: not in this repository), and
    the repository root when a result is anchored there."""
    out = {ENGINE_ROOT: sarif.ArtifactLocation(description=sarif.Message(
        text=f"the folder that contains the engine's package in {tree}: not in this repository, so it has no uri"))}
    if anchor is not None:
        out[REPO_ROOT] = sarif.ArtifactLocation(description=sarif.Message(
            text="the folder eagle-audit ran in (the repository root in CI)"))
    return out


def _log(rules: list, results: list, properties: dict, base_ids: dict | None = None) -> str:
    from auditor import __version__

    log = sarif.SarifLog(
        version="2.1.0",
        schema_uri=SARIF_SCHEMA,
        runs=[sarif.Run(
            tool=sarif.Tool(driver=sarif.ToolComponent(
                name="eagle-audit", version=__version__, rules=rules)),
            results=results,
            properties=properties,
            original_uri_base_ids=base_ids,
        )],
    )
    from auditor.render.fastjson import dumps_indent2

    return dumps_indent2(_to_json(log))


def scan_sarif(report: ScanReport, anchor: Anchor | None = None) -> str:
    """The scan as a SARIF 2.1.0 log: one result per finding, rules from ``rules/``. The file and
    line in the engine's tree (``uriBaseId: ENGINEROOT``, not in the user's repository) are the
    result's related location 1, linked from its message; the primary location is ``anchor`` (the
    settings file, :func:`settings_anchor`) when given, else that same engine location."""
    index = {code: i for i, code in enumerate(RULES)}
    results = []
    for res in report.results:
        for f in res.findings:
            message, locations, related = _placed(f"{res.architecture} ({res.method}): {f.message}", f.path, f.line,
                                                  report.title, anchor)
            results.append(sarif.Result(
                rule_id=f.rule,
                rule_index=index.get(f.rule),
                level=_LEVEL[f.severity.value],
                message=message,
                locations=locations,
                related_locations=related,
                properties={"architecture": res.architecture, "method": res.method, "gate": f.gate,
                            "severity": f.severity.value, "verdict": res.verdict.value},
            ))
    return _log(_descriptors(RULES), results, {"vllmVersion": report.vllm_version, "source": report.source,
                                               "engine": report.engine, "engineVersion": report.version},
                _base_ids(f"{report.title} ({report.source})", anchor))


def _suite(xml: JUnitXml, suites: dict[str, TestSuite], name: str) -> TestSuite:
    """The test suite called ``name`` in ``xml``, added on first use."""
    if name not in suites:
        suites[name] = TestSuite(name)
        xml.add_testsuite(suites[name])
    return suites[name]


def scan_junit(report: ScanReport) -> str:
    """The scan as JUnit XML: one suite per method, one test case per target and blocking gate
    (a failure when the gate blocks, an error when it is unknown, skipped with the reason when
    the gate was not evaluated for the run, passed otherwise), then a passed case per warning gate
    whose system-out is the warning (:func:`_warning_cases`)."""
    from rules.registry import blocking_gates

    gates = blocking_gates(report.engine)
    name = f"vLLM {report.vllm_version}" if report.engine == "vllm" else report.title
    xml = JUnitXml(name=f"eagle-audit {name}")
    suites: dict[str, TestSuite] = {}
    for res in report.targets:
        suite = _suite(xml, suites, f"eagle-audit.{res.method}")
        for gate in gates:
            case = TestCase(name=gate, classname=res.architecture)
            fs = [f for f in res.findings if f.gate == gate]
            errors = [f for f in fs if f.severity.value == "error"]
            unknown = [f for f in fs if f.severity.value == "unknown"]
            if errors:
                case.result = [Failure(f"{f.where}: {f.message}", type_=f.rule) for f in errors]
            elif unknown:
                case.result = [Error(f"{f.where}: {f.message}", type_=f.rule) for f in unknown]
            elif gate in res.not_evaluated:
                case.result = [Skipped(f"not evaluated: {res.not_evaluated[gate]}")]
            elif res.class_name is None:
                case.result = [Skipped("class not resolved")]
            suite.add_testcase(case)
        _warning_cases(suite, res.architecture,
                       [f for f in res.findings if f.severity.value == "warning" and f.gate not in gates])
    out = xml.tostring()
    return clean(out.decode() if isinstance(out, bytes) else str(out), multiline=True)  # XML 1.0 forbids controls


# -- gate and matrix ---------------------------------------------------------------------------


def _gate_checks() -> dict:
    """Every check the ``gate`` command reports: the rules and the upgrade checks, by code."""
    from auditor.orchestration.upgrade_results import UPGRADE_CHECKS

    return {**RULES, **UPGRADE_CHECKS}


def _accepted_text() -> str:
    """How SARIF justifies a suppressed warning: the flag and the current settings key that
    accepted it."""
    from auditor.orchestration.config import setting

    allow = setting("allow_warnings")
    return f"accepted with {allow.flag} or {allow.key} in [tool.eagle-audit]"


def gate_sarif(report, anchor: Anchor | None = None) -> str:
    """A gate report (:class:`auditor.orchestration.upgrade_results.UpgradeReport`) as a SARIF 2.1.0 log, for code-scanning
    upload. One result per finding of the candidate: ``error`` for a gate that breaks the
    target (the message says which codemod failed and why), ``note`` for a gate the codemods
    fix, ``warning`` for a warning, suppressed (``suppressions``, kind ``external``) when
    ``--allow-warning`` (``allow-warnings``) accepts it; plus one result per regression (EA390) and per problem that
    has no finding (EA391 target absent, EA392 invalid patch). Locations as in
    :func:`scan_sarif`: the candidate's file and line as related location 1, the primary
    location on ``anchor`` (the settings file) when given."""
    from auditor.orchestration.upgrade_results import UPGRADE_CHECKS

    checks = _gate_checks()
    index = {code: i for i, code in enumerate(checks)}
    by_gate = {c.GATE: code for code, c in UPGRADE_CHECKS.items()}
    results = []
    tree = report.candidate.name

    def add(code, level, text, path, line, t, extra=None, suppressed=False):
        props = {"architecture": t.architecture, "method": t.method, "outcome": t.outcome.value,
                 "currentVerdict": optional_value(t.current_verdict), "candidateVerdict": t.candidate_verdict.value,
                 "patchedVerdict": optional_value(t.patched_verdict)}
        props.update(extra or {})
        message, locations, related = _placed(f"{t.architecture} ({t.method}): {text}", path, line, tree, anchor)
        results.append(sarif.Result(
            rule_id=code, rule_index=index.get(code), level=level, message=message,
            locations=locations, related_locations=related, properties=props,
            suppressions=[sarif.Suppression(kind="external", justification=_accepted_text())]
            if suppressed else None,
        ))

    for t in report.targets:
        broken = {p.gate: p for p in t.problems}
        fixed = set(t.fixed_gates)
        for f in (t.candidate.findings if t.candidate else []):
            sev = f.severity.value
            if sev == "warning":
                allowed = f.gate in report.allowed_warnings
                level = "error" if f.gate in broken else "warning"
                add(f.rule, level, f.message, f.path, f.line, t, {"gate": f.gate, "allowed": allowed}, allowed)
                continue
            if f.gate in broken:
                p = broken[f.gate]
                why = "" if p.reason == f.message else (
                    f" Codemod {p.codemod}: {p.reason}" if p.codemod else f" {p.reason}")
                hint = f" ({p.hint})" if p.hint else ""
                add(f.rule, "error", f"{f.message}{why}{hint}", f.path, f.line, t,
                    {"gate": f.gate, "codemod": p.codemod})
            elif f.gate in fixed:
                add(f.rule, "note", f"{f.message} Fixed in the patched candidate by codemod {f.gate}.",
                    f.path, f.line, t, {"gate": f.gate, "fixedByCodemod": f.gate})
            else:
                add(f.rule, _LEVEL[sev], f.message, f.path, f.line, t, {"gate": f.gate})
        found = {f.gate for f in t.candidate.findings} if t.candidate else set()
        for p in t.problems:
            if p.gate in found:
                continue  # reported on its finding above
            code = by_gate.get(p.gate) or next((c for c, r in RULES.items() if r.GATE == p.gate), None)
            add(code or "EA392", "error", p.text(), p.path, p.line, t, {"gate": p.gate, "codemod": p.codemod})
        if t.regression:
            first = next((f for f in t.candidate.findings if f.severity.value != "warning"), None) if t.candidate else None
            add("EA390", "error" if t.outcome is UpgradeOutcome.BROKEN else "warning",
                f"supported by {report.current.name} but {t.candidate_verdict.value} in {report.candidate.name}"
                + (f" (patched: {t.patched_verdict.value})" if t.patched_verdict else ""),
                first.path if first else None, first.line if first else None, t, {"gate": "regression"})
    props = {"outcome": report.outcome.value, "message": report.message(),
             "candidate": report.candidate.as_dict(),
             "current": report.current.as_dict() if report.current else None,
             "codemods": str(report.codemods) if report.codemods else None}
    return _log(_descriptors(checks), results, props, _base_ids(f"{tree} ({report.candidate.source})", anchor))


def gate_junit(report) -> str:
    """A gate report as JUnit XML: one suite per method, one test case per target and blocking
    gate (classname the architecture, name the gate): a failure when the gate breaks the target
    (the message names the codemod and why), an error when it is unknown, skipped with the reason
    when the run did not evaluate it (as :func:`scan_junit` does) or the target is absent, passed
    when the gate passes natively or once patched (the system-out says which codemod fixed it). A problem on
    another gate (a disallowed warning, an absent target, an invalid patch) adds a failing case; each
    other warning gate a passed case whose system-out is the warning (:func:`_warning_cases`)."""
    from rules.registry import blocking_gates

    BLOCKING_GATES = blocking_gates(getattr(report.candidate, "engine", "vllm"))  # the candidate engine's
    xml = JUnitXml(name=f"eagle-audit gate: {report.candidate.name} ({report.outcome.value})")
    suites: dict[str, TestSuite] = {}
    for t in report.targets:
        suite = _suite(xml, suites, f"eagle-audit.gate.{t.method}")
        problems: dict[str, list] = {}
        for p in t.problems:
            problems.setdefault(p.gate, []).append(p)
        fixed = set(t.fixed_gates)
        skipped = t.not_evaluated
        regression = (f" Regression: supported by {report.current.name}." if t.regression and report.current else "")
        for gate in list(BLOCKING_GATES) + [g for g in problems if g not in BLOCKING_GATES]:
            case = TestCase(name=gate, classname=t.architecture)
            ps = problems.get(gate, [])
            if ps:
                unknown = all(p.reason.startswith("the verdict is unknown") for p in ps)
                kind = Error if unknown else Failure
                case.result = [kind(p.text() + regression, type_=p.codemod or gate) for p in ps]
            elif gate in fixed:
                case.system_out = f"blocks {report.candidate.name}; fixed in the patched candidate by codemod {gate}"
            elif gate in skipped:
                case.result = [Skipped(f"not evaluated: {skipped[gate]}")]
            elif t.candidate is None:
                case.result = [Skipped(f"not in the registry of {report.candidate.name}")]
            suite.add_testcase(case)
        _warning_cases(suite, t.architecture, t.warnings, skip=set(problems))
    out = xml.tostring()
    return clean(out.decode() if isinstance(out, bytes) else str(out), multiline=True)  # XML 1.0 forbids controls


def _warning_cases(suite: TestSuite, architecture: str, warnings, skip: set = frozenset()) -> None:
    """Add to ``suite`` one passed test case per warning gate of ``architecture`` (name the gate,
    classname the architecture), its system-out each warning (``warning RULE where: message``):
    a warning does not fail the run but a CI report lists it, as the table does. Gates in ``skip``
    (already a failing case) are left out."""
    by_gate: dict[str, list] = {}
    for f in warnings:
        if f.gate not in skip:
            by_gate.setdefault(f.gate, []).append(f)
    for gate, fs in by_gate.items():
        case = TestCase(name=gate, classname=architecture)
        case.system_out = "\n".join(f"warning {f.rule} {f.where}: {f.message}" for f in fs)
        suite.add_testcase(case)
