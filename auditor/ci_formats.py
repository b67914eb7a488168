"""CI formats of a scan: SARIF 2.1.0 (through ``sarif-om``, Microsoft's SARIF object model) and
JUnit XML (through ``junitparser``). Rule metadata comes from ``rules/``."""

from __future__ import annotations

import json

import attr
import sarif_om as sarif
from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from auditor.scan import ScanReport
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


def scan_sarif(report: ScanReport) -> str:
    """The scan as a SARIF 2.1.0 log: one result per finding, rules from ``rules/``; locations
    are relative to the folder that contains ``vllm/`` (``uriBaseId: SRCROOT``)."""
    from auditor import __version__

    rules = [
        sarif.ReportingDescriptor(
            id=code,
            name=r.NAME,
            short_description=sarif.MultiformatMessageString(text=r.SUMMARY),
            full_description=sarif.MultiformatMessageString(text=r.WHY),
            help=sarif.MultiformatMessageString(text=r.HOW_TO_FIX),
            default_configuration=sarif.ReportingConfiguration(level="error" if r.BLOCKING else "warning"),
            properties={"gate": r.GATE, "fixAvailable": r.FIX_AVAILABLE},
        )
        for code, r in RULES.items()
    ]
    index = {code: i for i, code in enumerate(RULES)}
    results = []
    for res in report.results:
        for f in res.findings:
            loc = None
            if f.path:
                region = sarif.Region(start_line=f.line) if f.line else None
                loc = [sarif.Location(physical_location=sarif.PhysicalLocation(
                    artifact_location=sarif.ArtifactLocation(uri=f.path, uri_base_id="SRCROOT"), region=region))]
            results.append(sarif.Result(
                rule_id=f.rule,
                rule_index=index.get(f.rule),
                level=_LEVEL[f.severity.value],
                message=sarif.Message(text=f"{res.architecture} ({res.method}): {f.message}"),
                locations=loc,
                properties={"architecture": res.architecture, "method": res.method, "gate": f.gate,
                            "severity": f.severity.value, "verdict": res.verdict.value},
            ))
    log = sarif.SarifLog(
        version="2.1.0",
        schema_uri=SARIF_SCHEMA,
        runs=[sarif.Run(
            tool=sarif.Tool(driver=sarif.ToolComponent(
                name="eagle-audit", version=__version__, rules=rules)),
            results=results,
            properties={"vllmVersion": report.vllm_version, "source": report.source},
        )],
    )
    return json.dumps(_to_json(log), indent=2)


def scan_junit(report: ScanReport) -> str:
    """The scan as JUnit XML: one suite per method, one test case per target and blocking gate
    (a failure when the gate blocks, an error when it is unknown, passed otherwise)."""
    from rules.registry import BLOCKING_GATES

    xml = JUnitXml(name=f"eagle-audit vLLM {report.vllm_version}")
    suites: dict[str, TestSuite] = {}
    for res in report.results:
        suite = suites.get(res.method)
        if suite is None:
            suite = suites[res.method] = TestSuite(f"eagle-audit.{res.method}")
            xml.add_testsuite(suite)
        for gate in BLOCKING_GATES:
            case = TestCase(name=gate, classname=res.architecture)
            fs = [f for f in res.findings if f.gate == gate]
            errors = [f for f in fs if f.severity.value == "error"]
            unknown = [f for f in fs if f.severity.value == "unknown"]
            if errors:
                case.result = [Failure(f"{f.where}: {f.message}", type_=f.rule) for f in errors]
            elif unknown:
                case.result = [Error(f"{f.where}: {f.message}", type_=f.rule) for f in unknown]
            elif res.class_name is None:
                case.result = [Skipped("class not resolved")]
            suite.add_testcase(case)
    return xml.tostring().decode() if isinstance(xml.tostring(), bytes) else str(xml.tostring())
