"""The install for users (issue 21): a wheel built from the repository (``pip wheel``, what a
release attaches and what ``pip``/``pipx install git+…@TAG`` builds on the fly) installs into a
fresh venv with no clone beside it, and the installed tool runs: ``--version``, ``rules``, a scan
whose JSON meets the shipped schema (so the package data — schemas, the alias table — is in the
wheel). The README's ``pip install "eagle-audit @ git+…@TAG"`` runs for real too, against a copy
of the repository served as a git URL, at the tag the README names (the version pyproject.toml
states). The Actions example installs it the same way, from a tag."""

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

#: Building a wheel and a fresh venv is packaging, not a unit: the full tier (a minute of pip).
pytestmark = pytest.mark.full

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


def _readme_pip_line() -> str:
    text = (REPO / "README.md").read_text()
    install = text[text.index("### Install without a clone"):]
    (line,) = [x for x in install.splitlines() if x.startswith("python -m pip install \"eagle-audit @ git+")]
    return line


def test_the_readme_pip_line_installs_from_its_tag_in_a_fresh_venv(tmp_path):
    """The README's ``python -m pip install "eagle-audit @ git+https://HOST/ORG/eagle-audit@TAG"``
    with the host replaced by a clone of this repository (``git+file://localhost/…``): the tag is
    ``v`` + the version of pyproject.toml; the clone gets it at its HEAD when the repository has
    not got it yet (a tag is made on the release commit), and pip builds and installs from it."""
    import shlex
    import tomllib

    from auditor import __version__

    line = _readme_pip_line()
    spec = shlex.split(line.split("#")[0])[-1]
    m = re.fullmatch(r"eagle-audit @ git\+https://github\.com/YOUR-ORG/eagle-audit@(v[\w.]+)", spec)
    assert m, spec
    tag = m.group(1)
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert tag == f"v{version}" and version == __version__
    clone = tmp_path / "eagle-audit"
    git = ["git", "-c", "advice.detachedHead=false"]
    subprocess.run([*git, "clone", "-q", "--no-hardlinks", str(REPO), str(clone)], check=True, timeout=300)
    if subprocess.run(["git", "-C", str(clone), "rev-parse", "-q", "--verify", f"refs/tags/{tag}"],
                      capture_output=True).returncode != 0:
        subprocess.run(["git", "-C", str(clone), "tag", tag], check=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    local = spec.replace("https://github.com/YOUR-ORG/eagle-audit", f"file://localhost{clone}")
    p = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", local],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    p = _run(venv / "bin", "--version", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == f"eagle-audit {version}", p.stdout + p.stderr
    p = _run(venv / "bin", "scan", MINIVLLM, "-m", "ToyV3ForCausalLM", "--no-config", "-f", "json", cwd=tmp_path)
    assert p.returncode == 1 and json.loads(p.stdout)["results"][0]["verdict"] == "blocked", p.stderr
