"""The install for users (issue 21): a wheel built from the repository (``pip wheel``, what a
release attaches and what ``pip``/``pipx install git+…@TAG`` builds on the fly) installs into a
fresh venv with no clone beside it, and the installed tool runs: ``--version``, ``rules``, a scan
whose JSON meets the shipped schema (so the package data — schemas, the alias table — is in the
wheel). The Actions example installs it the same way, from a tag."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from real import REPO

MINIVLLM = REPO / "fixtures" / "minivllm"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """``bin/`` of a fresh venv with eagle-audit installed from a wheel built from a copy of the
    repository (the build writes nothing into the checkout)."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                                            ".pytest_cache", ".hypothesis", "__pycache__"))
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("eagle_audit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for data in ("auditor/model/schemas/outputs/scan.json", "auditor/model/schemas/settings.json",
                 "auditor/hf/targets.toml", "rules/registry.py"):
        assert data in names, data
    assert not any(n.startswith(("tests/", "fixtures/")) for n in names)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    p = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return venv / "bin"


def _run(bin_: Path, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_ / "eagle-audit"), *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(cwd),
                                                     "COLUMNS": "120"})


def test_the_wheel_installs_in_a_fresh_venv_and_runs(installed, tmp_path):
    from auditor import __version__
    from auditor.render.schemas import output_errors

    p = _run(installed, "--version", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == f"eagle-audit {__version__}", p.stdout + p.stderr
    p = _run(installed, "rules", cwd=tmp_path)
    assert p.returncode == 0 and "EA301" in p.stdout and "EA405" in p.stdout, p.stderr
    p = _run(installed, "scan", MINIVLLM, "--no-config", "-f", "json", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    assert output_errors("scan", json.loads(p.stdout)) == []
    # it runs its own copy: nothing of the checkout is on its path
    where = subprocess.run([str(installed / "python"), "-c", "import auditor; print(auditor.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path).stdout
    assert str(REPO) not in where and "site-packages" in where


def test_the_readme_and_the_actions_example_install_without_a_clone():
    text = (REPO / "README.md").read_text()
    assert text.startswith("# eagle-audit\n")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    assert blocks[0].startswith("python3 -m venv .venv") and "pip install -e ." in blocks[0]  # still the two commands
    assert "pip install -e '.[test]'" in blocks[1]
    install = text[text.index("### Install without a clone"):]
    assert "pipx install" in install and "git+https://" in install and "pip wheel" in install
    wf = yaml.safe_load((REPO / "examples" / "github-actions.yml").read_text())
    spec = wf["env"]["EAGLE_AUDIT_SPEC"]
    assert re.fullmatch(r"eagle-audit @ git\+https://github\.com/[\w-]+/eagle-audit@v\d+\.\d+\.\d+", spec), spec
    for job in wf["jobs"].values():
        assert any('pip install "$EAGLE_AUDIT_SPEC"' in s.get("run", "") for s in job["steps"])
