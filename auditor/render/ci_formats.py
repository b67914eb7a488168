"""CI formats of a scan, a gate and a matrix: SARIF 2.1.0 (through ``sarif-om``, Microsoft's SARIF
object model), JUnit XML (through ``junitparser``) and Markdown; and the rich tables that
``--format table`` prints for a gate and a matrix. Rule metadata comes from ``rules/``."""

from __future__ import annotations

import json
from dataclasses import dataclass

import attr
import sarif_om as sarif
from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from auditor.model.outcomes import ReleaseVerdict, UpgradeOutcome
from auditor.model.results import ScanReport
from auditor.render.text import clean, lines_kept_whole, markdown_text, patch_words, print_wrapped, wrap_message
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
                 "currentVerdict": _value(t.current_verdict), "candidateVerdict": t.candidate_verdict.value,
                 "patchedVerdict": _value(t.patched_verdict)}
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


def _value(v) -> str | None:
    """The string value of an optional enum member."""
    return v.value if v is not None else None


def _outcome_word(outcome) -> str:
    """The outcome as the Markdown heading shows it (broken in capitals)."""
    return outcome.value.upper() if outcome is UpgradeOutcome.BROKEN else outcome.value


def _md(text: object) -> str:
    """Text from input made inert in Markdown (see :func:`auditor.render.text.markdown_text`)."""
    return markdown_text(text)


def _gate_heading(report) -> str:
    """The outcome a gate report's heading names: a locally patched tree supports its targets
    "as is" (not natively), so the heading and the cells say the same."""
    if not report.candidate.patched_locally:
        return _outcome_word(report.outcome)
    word = "as is" if report.outcome is UpgradeOutcome.NATIVE else _outcome_word(report.outcome)
    return word + " (a locally patched tree)"


def gate_markdown(report) -> str:
    """A gate report as GitHub-flavoured Markdown (for a job summary): the outcome, a table of
    targets, then the problems, regressions and warnings."""
    patched_tree = report.candidate.patched_locally
    outcome = _gate_heading(report)
    lines = [f"## eagle-audit gate: {outcome}", "", _md(report.message()), ""]
    sides = [f"candidate: **{_md(report.candidate.described)}** (`{_md(report.candidate.source)}`)"]
    if report.current:
        sides.append(f"current: {_md(report.current.described)} (`{_md(report.current.source)}`)")
    if report.codemods:
        written = f", written for {report.codemods_source}" if report.codemods_source else ""
        sides.append(f"codemods: `{_md(report.codemods.name)}` ({_md(', '.join(report.codemods_names) + written)})")
    lines += [" · ".join(sides), ""]
    lines += ["| target | method | current | candidate | with codemods | outcome |", "|---|---|---|---|---|---|"]
    for t in report.targets:
        cand = t.candidate_verdict.value + (f" ({', '.join(t.candidate.blocking)})" if t.candidate and t.candidate.blocking else "")
        patched = _value(t.patched_verdict) or "—"
        if t.patched and t.patched.blocking:
            patched += f" ({', '.join(t.patched.blocking)})"
        if t.regression:  # the candidate is where it regressed
            cand += " — regression (supported by the current side)"
        word = "as is" if patched_tree and t.outcome is UpgradeOutcome.NATIVE else t.outcome.value
        lines.append(f"| {_md(t.architecture)} | {_md(t.method)} | {_value(t.current_verdict) or '—'} | {_md(cand)} | "
                     f"{_md(patched)} | **{word}** |")
    problems = [(t, p) for t in report.targets for p in t.problems]
    if problems:
        lines += ["", "### Why it is broken", ""]
        for t, p in problems:
            cm = ("" if not p.codemod else f" (codemod `{_md(p.codemod)}`)" if report.codemods
                  else " (a codemod fixes it)")
            where = f" `{_md(p.where)}`" if p.where else ""
            hint = f" — {_md(p.hint)}" if p.hint else ""
            lines.append(f"- **{_md(t.architecture)}** `{_md(p.gate)}`{cm}{where}: {_md(p.reason)}{hint}")
    if report.regressions:
        lines += ["", "### Regressions", ""]
        for t in report.regressions:
            lines.append(f"- **{_md(t.architecture)}** ({_md(t.method)}): supported by "
                         f"{_md(report.current.described)}, {t.candidate_verdict.value} in "
                         f"{_md(report.candidate.described)}")
    warned = [(t, f) for t in report.targets for f in t.warnings]
    if warned:
        lines += ["", "### Warnings", ""]
        for t, f in warned:
            lines.append(f"- **{_md(t.architecture)}** `{_md(f.gate)}` ({_md(f.rule)}) `{_md(f.where)}`: "
                         f"{_md(f.message)}")
    if report.next_steps:
        lines += ["", "### Next step", ""]
        for step in report.next_steps:
            command, _, note = step.partition("  (")
            lines.append(f"- {_md(command)}" + (f" ({_md(note)}" if note else ""))
    return clean("\n".join(lines), multiline=True) + "\n"


def _cell(row) -> str:
    """A matrix cell: the verdict, with the blocking gates or the warnings."""
    if row.verdict is ReleaseVerdict.BLOCKED:
        return f"blocked, {patch_words(row.fix_available)}: {', '.join(row.blocking)}"
    if row.verdict is ReleaseVerdict.SUPPORTED:
        w = f" (warnings: {', '.join(dict.fromkeys(row.warnings))})" if row.warnings else ""
        return (f"**supported** ← first native{w}" if row.first_native else f"supported{w}")
    return row.verdict.value


def matrix_legend(report) -> str | None:
    """What the two kinds of blocked cell of a matrix mean, with the ``fix`` command of the run
    (None when no cell is blocked)."""
    rows = [r for r in report.rows if r.verdict is ReleaseVerdict.BLOCKED]
    if not rows:
        return None
    return (f"blocked, {patch_words(True)}: eagle-audit fix patches every blocking gate in that release; blocked, "
            f"{patch_words(False)}: some gate of it cannot be patched there (its release lacks what the fix "
            "needs, or no codemod exists)")


def matrix_markdown(report) -> str:
    """A matrix report (:class:`auditor.orchestration.matrix.MatrixReport`) as Markdown: one row per release,
    one column per architecture (verdict and blocking gates); the first of the releases listed
    with native support is in bold (said so: "among the releases listed"); skipped releases are listed with the reason below the table."""
    archs = report.architectures
    run = report.run_options.describe() if getattr(report, "run_options", None) else ""
    engine = {"vllm": "vLLM", "sglang": "SGLang"}.get(getattr(report, "engine", "vllm"), "vLLM")
    lines = [f"## eagle-audit matrix: {_md(', '.join(report.model))} ({_md(report.method)}"
             f"{', ' + _md(run) if run else ''}), {engine} {_md(report.versions)}", ""]
    lines.append(f"| {engine} | " + " | ".join(_md(a) for a in archs) + " |")
    lines.append("|---" * (len(archs) + 1) + "|")
    by = {(r.release, r.architecture): r for r in report.rows}
    for v in report.releases:
        cells = [_md(_cell(by[(v, a)])) if (v, a) in by else "—" for a in archs]
        first = any(by.get((v, a)) is not None and by[(v, a)].first_native for a in archs)
        lines.append(f"| {'**' + _md(v) + '**' if first else _md(v)} | " + " | ".join(cells) + " |")
    lines.append("")
    legend = matrix_legend(report)
    if legend:
        lines += [_md(legend), ""]
    for a, v in report.first_supported.items():
        lines.append(f"- first with native support for {_md(a)}, among the releases listed: {_md(v or 'none of them')}")
    if len(archs) > 1:
        lines.append(f"- first with native support for all, among the releases listed: "
                     f"{_md(report.first_all_supported or 'none of them')}")
    skipped: dict[str, str] = {}
    for r in report.rows:
        if r.verdict is ReleaseVerdict.SKIPPED:
            skipped.setdefault(r.release, r.reason)
    for v, why in skipped.items():
        lines.append(f"- skipped {_md(v)}: {_md(why)}")
    return clean("\n".join(lines), multiline=True) + "\n"


# -- the same reports as rich tables (``--format table``) --------------------------------------


def _verdict_text(verdict: str, gates: list[str] | tuple[str, ...] = ()):
    """A verdict cell: the verdict in its colour, then each gate on a line of its own (a gate id
    is never cut)."""
    from rich.text import Text

    style = {"supported": "green", "blocked": "red", "unknown": "yellow"}.get(verdict, "")
    t = Text(verdict, style=style)
    for g in gates:
        t.append(f"\n{g}")
    return t


def gate_table(report, console) -> None:
    """Print a gate report (:class:`auditor.orchestration.upgrade_results.UpgradeReport`) as
    ``--format table`` shows it: the outcome and what it means, the sides compared, a rich table
    of targets (current, candidate and patched verdicts with their blocking gates, the outcome;
    the current and patched columns only when some target has one) when it fits the console
    with every name and gate id whole, else a block of labelled lines per target (never a name
    cut), then why it is broken, the regressions and the warnings. The same content as :func:`gate_markdown`."""
    from rich.table import Table
    from rich.text import Text

    patched_tree = report.candidate.patched_locally
    outcome = _gate_heading(report)
    head = Text("eagle-audit gate: ", style="bold")
    head.append(outcome, style={"broken": "red", "patched": "yellow"}.get(report.outcome.value, "green") + " bold")
    console.print(head)
    print_wrapped(console, Text(clean(report.message())), indent=0, hanging=2)
    print_wrapped(console, Text(clean(f"candidate: {report.candidate.described} ({report.candidate.source})")),
                  indent=0, hanging=2)
    if report.current:
        print_wrapped(console, Text(clean(f"current: {report.current.described} ({report.current.source})")),
                      indent=0, hanging=2)
    if report.codemods:
        written = f", written for {report.codemods_source}" if report.codemods_source else ""
        print_wrapped(console, Text(clean(f"codemods: {report.codemods.name} ({', '.join(report.codemods_names)}"
                                          f"{written})")), indent=0, hanging=2)
    # a column that would say "—" on every row (no current tree, no codemods) is left out; the
    # table is printed when it fits the console with every name whole, else a block per target
    show_current = any(t.current_verdict for t in report.targets)
    show_patched = any(t.patched_verdict for t in report.targets)
    names = [clean(t.architecture) for t in report.targets]
    table = Table()
    table.add_column("target", no_wrap=True)
    table.add_column("method", no_wrap=True)
    if show_current:
        table.add_column("current", no_wrap=True)
    table.add_column("candidate", no_wrap=True)
    if show_patched:
        table.add_column("with codemods", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    blocks = []
    for t, name in zip(report.targets, names):
        cells = [Text(name), t.method]
        lines = []
        if show_current:
            cells.append(_verdict_text(t.current_verdict.value) if t.current_verdict else Text("—"))
            lines.append(("current", t.current_verdict.value if t.current_verdict else "—", ()))
        cand = _verdict_text(t.candidate_verdict.value, t.candidate.blocking if t.candidate else ())
        if t.regression:
            cand.append("\nregression", style="red")
        cells.append(cand)
        lines.append(("candidate", t.candidate_verdict.value + (", a regression" if t.regression else ""),
                      t.candidate.blocking if t.candidate else ()))
        if show_patched:
            cells.append(_verdict_text(t.patched_verdict.value, t.patched.blocking if t.patched else ())
                         if t.patched_verdict else Text("—"))
            lines.append(("with codemods", t.patched_verdict.value if t.patched_verdict else "—",
                          t.patched.blocking if t.patched and t.patched_verdict else ()))
        word = "as is" if patched_tree and t.outcome is UpgradeOutcome.NATIVE else t.outcome.value
        table.add_row(*cells, Text(word, style="bold"))
        blocks.append((name, t.method, word, lines))
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update_width(1 << 20), table).maximum
    if natural <= console.width:
        console.print(table)
    else:  # too narrow for whole names: one block of labelled lines per target
        for name, method, word, lines in blocks:
            print_wrapped(console, [Text(name + ":", style="bold"), Text(f"{method},"), Text(word, style="bold")],
                          indent=0, hanging=2)
            for label, verdict, gates in lines:
                style = {"supported": "green", "blocked": "red", "unknown": "yellow"}.get(verdict.split(",")[0], "")
                pieces = [Text(f"{label}:"), Text(verdict + (":" if gates else ""), style=style)]
                pieces += [Text(g + ("," if i < len(gates) - 1 else "")) for i, g in enumerate(gates)]
                print_wrapped(console, pieces, indent=2, hanging=4)
    problems = [(t, p) for t in report.targets for p in t.problems]
    if problems:
        console.print("why it is broken:", style="bold")
        for t, p in problems:
            cm = ("" if not p.codemod else f" (codemod {p.codemod})" if report.codemods
                  else " (a codemod fixes it)")  # that none were given: said once, by the next step
            where = f" {p.where}" if p.where else ""
            hint = f" — {p.hint}" if p.hint else ""
            print_wrapped(console, Text(clean(f"{t.architecture} {p.gate}{cm}{where}: {p.reason}{hint}")))
    if report.regressions:
        console.print("regressions:", style="bold")
        for t in report.regressions:
            print_wrapped(console, Text(clean(f"{t.architecture} ({t.method}): supported by "
                                              f"{report.current.described}, {t.candidate_verdict.value} in "
                                              f"{report.candidate.described}")))
    warned = [(t, f) for t in report.targets for f in t.warnings]
    if warned:
        console.print("warnings:", style="bold")
        for t, f in warned:
            print_wrapped(console, Text(clean(f"{t.architecture} {f.gate} ({f.rule}) {f.where}: {f.message}")))
    for step in report.next_steps:
        console.print("next step:", style="bold")
        width = None if lines_kept_whole(console) else console.width
        for line in wrap_message("  " + clean(step), width):  # a command starts a line of its own
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def matrix_table(report, console) -> None:
    """Print a matrix report (:class:`auditor.orchestration.matrix.MatrixReport`) as ``--format
    table`` shows it: a rich table with one row per release and one column per architecture (the
    verdict, then each blocking gate or warning on a line of its own; the first release with
    native support in bold), then the first native release per architecture and the skipped
    releases with the reason. The same content as :func:`matrix_markdown`."""
    from rich.table import Table
    from rich.text import Text

    archs = report.architectures
    run = report.run_options.describe() if getattr(report, "run_options", None) else ""
    engine = {"vllm": "vLLM", "sglang": "SGLang"}.get(getattr(report, "engine", "vllm"), "vLLM")
    title = clean(f"eagle-audit matrix: {', '.join(report.model)} ({report.method}{', ' + run if run else ''}), "
                  f"{engine} {report.versions}")
    table = Table(title=Text(title))
    table.add_column(engine, no_wrap=True)
    for a in archs:
        table.add_column(Text(clean(a)), overflow="fold", min_width=9)
    by = {(r.release, r.architecture): r for r in report.rows}
    for v in report.releases:
        cells = []
        for a in archs:
            row = by.get((v, a))
            if row is None:
                cells.append(Text("—"))
            elif row.verdict is ReleaseVerdict.BLOCKED:
                t = _verdict_text("blocked")
                t.append(f"\n{patch_words(row.fix_available)}", style="italic")
                for g in row.blocking:
                    t.append(f"\n{g}")
                cells.append(t)
            elif row.verdict is ReleaseVerdict.SUPPORTED:
                t = _verdict_text("supported")
                if row.first_native:
                    t.stylize("bold")
                    t.append("\n← first native")
                if row.warnings:
                    t.append("\nwarnings:")
                    for w in dict.fromkeys(row.warnings):
                        t.append(f"\n{w}")
                cells.append(t)
            else:
                cells.append(Text(row.verdict.value, style="dim"))
        first = any(by.get((v, a)) is not None and by[(v, a)].first_native for a in archs)
        table.add_row(Text(v, style="bold" if first else ""), *cells)
    console.print(table)
    legend = matrix_legend(report)
    if legend:
        print_wrapped(console, Text(clean(legend)), indent=0, hanging=2)
    for a, v in report.first_supported.items():
        print_wrapped(console, Text(clean(f"first with native support for {a}, among the releases listed: "
                                          f"{v or 'none of them'}")), indent=0, hanging=2)
    if len(archs) > 1:
        print_wrapped(console, Text("first with native support for all, among the releases listed: "
                                    f"{report.first_all_supported or 'none of them'}"), indent=0, hanging=2)
    skipped: dict[str, str] = {}
    for r in report.rows:
        if r.verdict is ReleaseVerdict.SKIPPED:
            skipped.setdefault(r.release, r.reason)
    for v, why in skipped.items():
        console.print(clean(f"skipped {v}: {why}"), markup=False, highlight=False)
