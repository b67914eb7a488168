"""The JSON Schemas of every JSON output (issue 21): shipped in the package, met by the real
outputs of every command (on real releases fetched through pip's index and cached, and on the
synthetic trees), strict enough to catch a drifting key, and the README's description of the
JSON generated from them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.render.schemas import OUTPUTS, output_errors, output_schema, schema_markdown
from conftest import MINIVLLM
from real import REPO

MINISGLANG = REPO / "fixtures" / "minisglang"


def _json(*args, cwd: Path = REPO, ok=(0, 1)) -> object:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS")}
    p = subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                       timeout=600, cwd=cwd, env=env)
    assert p.returncode in ok, p.stderr
    return json.loads(p.stdout)


def _valid(name: str, doc: object) -> None:
    errors = output_errors(name, doc)
    assert errors == [], errors[:5]


def test_every_schema_is_shipped_and_names_itself():
    for name in (*OUTPUTS, "common"):
        schema = output_schema(name)
        assert schema["$id"] == f"eagle-audit/outputs/{name}.json"
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"schemas/outputs/*.json"' in pyproject  # package-data: the schemas are in the wheel


def test_scan_of_a_real_release_meets_the_schema_and_a_drifting_key_does_not():
    doc = _json("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2", "--no-config", "-f", "json")
    _valid("scan", doc)
    assert {r["verdict"] for r in doc["results"]} == {"blocked"}
    assert {"targets", "drafters", "pooling"} <= set(doc["summary"])
    doc["results"][0]["verdict"] = "maybe"
    doc["summary"]["extra"] = 1
    del doc["results"][0]["findings"][0]["line"]
    errors = output_errors("scan", doc)
    assert errors and all("maybe" in e or "extra" in e or "line" in e or "(document)" in e for e in errors), errors


def test_a_full_scan_with_drafters_and_pooling_rows_meets_the_schema():
    doc = _json("scan", MINIVLLM, "--no-config", "-f", "json")
    _valid("scan", doc)
    assert "not-a-target" in {r["verdict"] for r in doc["results"]}


def test_scan_of_every_platform_meets_the_schema():
    doc = _json("scan", MINIVLLM, "-m", "LlamaForCausalLM", "--platform", "all", "--no-config", "-f", "json")
    _valid("scan", doc)
    assert doc["platform"] == "all"


def test_explain_one_and_all_meet_the_schema():
    _valid("explain", _json("explain", "kimi_k2", "--vllm-version", "0.16.0", "--no-config", "-f", "json"))
    _valid("explain", _json("explain", "--all", MINIVLLM, "--no-config", "-f", "json"))
    _valid("explain", _json("explain", "LlamaForCausalLM", MINISGLANG, "--no-config", "-f", "json"))


def test_gate_meets_the_schema():
    doc = _json("gate", "-m", "kimi_k2", "--current-version", "0.16.0", "--candidate-version", "0.18.0",
                "--no-config", "--no-progress", "-f", "json")
    _valid("gate", doc)
    assert doc["outcome"] == "native"


def test_matrix_meets_the_schema_with_gates_and_their_lines():
    doc = _json("matrix", "-m", "kimi_k2", "--versions", "0.16.0,0.18.0", "--no-config", "--no-progress", "-j", "1",
                "-f", "json")
    _valid("matrix", doc)
    blocked = [r for r in doc["rows"] if r["verdict"] == "blocked"]
    assert blocked and all(r["fix_available"] for r in blocked)
    assert all(g["path"] and g["line"] for r in blocked for g in r["gates"] if g["severity"] == "error")


def test_compare_meets_the_schema():
    doc = _json("compare", "-m", "kimi_k2", "--vllm-version", "0.16.0", "--sglang-version", "0.5.10.post1",
                "--no-config", "-f", "json")
    _valid("compare", doc)
    assert doc["rows"][0]["engines"]["vllm"]["gates"][0]["path"]


def test_rules_and_one_rule_meet_the_schema():
    _valid("rules", _json("rules", "-f", "json"))
    _valid("rules", _json("rules", "EA302", "-f", "json"))
    _valid("rules", _json("rules", "interface", "-f", "json"))


def test_verify_meets_the_schema(tmp_path):
    from test_verify import run_without_a_config_class

    p = run_without_a_config_class(tmp_path)
    assert p.returncode == 1, p.stderr
    _valid("verify", json.loads(p.stdout))


def test_the_readme_json_section_is_generated_from_the_schemas():
    text = (REPO / "README.md").read_text()
    begin = text.index("-->\n", text.index("<!-- json:begin")) + len("-->\n")
    assert text[begin:text.index("<!-- json:end -->")] == schema_markdown()
    section = schema_markdown()
    for word in ("not-a-target", "`summary.targets`", "`summary.drafters`", "`summary.pooling`"):
        assert word in section


@pytest.mark.parametrize("name", OUTPUTS)
def test_every_property_says_what_it_is(name):
    """A field without a description would give the README an empty cell."""
    missing = []

    def walk(node, path):
        if isinstance(node, dict):
            for key, sub in node.get("properties", {}).items():
                if isinstance(sub, dict) and "description" not in sub and "$ref" not in sub:  # a $ref: its target says
                    missing.append(f"{path}.{key}")
            for key, sub in node.items():
                walk(sub, f"{path}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{path}[{i}]")

    walk(output_schema(name), name)
    walk(output_schema("common"), "common")
    assert missing == []
