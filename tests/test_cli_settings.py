"""The command line's inputs, settings and help (issue 12), run as subprocesses on real releases
(vLLM 0.16.0, fetched and cached like every real-release test) and on throwaway environments the
tests build (``python -m venv`` with a synthetic engine package dropped into its site-packages).

One module-scoped fixture prepares every input and runs every command concurrently; each test
then asserts on its own command(s).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import MINIVLLM

from auditor.orchestration.config import SETTINGS, load_settings, settings_markdown
from auditor.source.fetch import fetch_newest_wheel

REPO = Path(__file__).resolve().parents[1]
MINISGLANG = REPO / "fixtures" / "minisglang"
COMMANDS = ("scan", "explain", "fix", "gate", "matrix", "compare", "rules")
#: typer's type placeholders, which the help must never show
TYPE_METAVARS = re.compile(r"<(str|bool|path|text|int|float|list\[|int range|.*\|.*)>")


def run(*args, cwd: Path = REPO, env: dict | None = None, columns: int | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "FORCE_COLOR")}
    e["NO_COLOR"] = "1"
    if columns:
        e["COLUMNS"] = str(columns)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=e)


def one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-1000:], p.stderr[-1000:])
    assert "Traceback" not in p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("eagle-audit: error: "), p.stderr
    return lines[0]


def as_json(p: subprocess.CompletedProcess, rc: int) -> dict:
    assert p.returncode == rc, (p.returncode, p.stdout[-1000:], p.stderr[-2000:])
    return json.loads(p.stdout)


def make_venv(root: Path, package_tree: Path, package: str, version: str) -> Path:
    """A throwaway venv (no pip, no network) with ``package_tree/<package>`` copied into its
    site-packages, a dist-info, and a ``.pth`` file and a ``sitecustomize`` that would write a
    marker if anything ran that environment's start-up code. Returns its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    (site,) = root.glob("lib/python3.*/site-packages")
    shutil.copytree(package_tree / package, site / package)
    info = site / f"{package}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n\n")
    marker = root / "RAN"
    (site / "evil.pth").write_text(f"import os; open({str(marker)!r}, 'w').write('pth')\n")
    (site / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('sitecustomize')\n")
    return root / "bin" / "python"


def transformers_sdist(wheel: Path, out: Path) -> Path:
    """An sdist of the ``src/`` layout (``transformers-X/src/transformers/...`` + ``PKG-INFO``)
    holding the ``transformers`` package of ``wheel``, built here."""
    with zipfile.ZipFile(wheel) as z, tarfile.open(out, "w:gz") as tar:
        version = re.search(r"transformers-([^-]+)-", wheel.name).group(1)
        top = f"transformers-{version}"

        def add(name: str, data: bytes) -> None:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))

        add(f"{top}/PKG-INFO", f"Metadata-Version: 2.1\nName: transformers\nVersion: {version}\n\n".encode())
        for n in z.namelist():
            if n.startswith("transformers/") and n.endswith(".py"):
                add(f"{top}/src/{n}", z.read(n))
    return out


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> SimpleNamespace:
    tmp = tmp_path_factory.mktemp("cli-settings")
    i = SimpleNamespace(tmp=tmp)
    # -- inputs
    i.ckpt = tmp / "checkpoint"
    i.ckpt.mkdir()
    (i.ckpt / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2"}))
    (tmp / "empty").mkdir()
    i.wheel, _ = fetch_newest_wheel("transformers", "==4.57.6", progress=False)
    i.sdist = transformers_sdist(i.wheel, tmp / "transformers-4.57.6.tar.gz")
    i.venv_py = make_venv(tmp / "venv", MINIVLLM, "vllm", "9.9.1")
    i.venv_sg = make_venv(tmp / "venv-sglang", MINISGLANG, "sglang", "9.9.2")
    i.proj = tmp / "proj"
    (i.proj / "sub").mkdir(parents=True)
    (i.proj / "pyproject.toml").write_text('[tool.eagle-audit]\nmodels = ["kimi_k2"]\nmethods = ["eagle3", "mtp"]\n')
    i.old = tmp / "old"
    i.old.mkdir()
    (i.old / "pyproject.toml").write_text('[tool.eagle-audit]\ntargets = ["LlamaForCausalLM"]\n')
    i.bad = tmp / "bad"
    i.bad.mkdir()
    (i.bad / "pyproject.toml").write_text('[tool.eagle-audit]\nmodels = ["kimi_k2"]\npipeline-parallel-size = "two"\n')
    i.foreign = tmp / "foreign.toml"
    i.foreign.write_text('[tool.eagle-audit]\nmodels = ["LlamaForCausalLM"]\n')
    v16 = ("--vllm-version", "0.16.0", "--no-progress")
    jobs = {
        # 1. --hf-config folder, --transformers wheel / sdist / version
        "hf_folder": (("scan", *v16, "--hf-config", i.ckpt, "-f", "json"), REPO, None),
        "hf_empty": (("scan", *v16, "--hf-config", tmp / "empty"), REPO, None),
        **{f"tf_{k}": (("scan", *v16, "--model", "LlavaForConditionalGeneration", "--transformers", v, "-f", "json",
                        "--no-cache"), REPO, None)
           for k, v in (("wheel", i.wheel), ("sdist", i.sdist), ("version", "4.57.6"))},
        "tf_not": (("scan", *v16, "--model", "kimi_k2", "--transformers", i.ckpt / "config.json"), REPO, None),
        # 2. the installed engine of another environment
        "py": (("scan", "--python", i.venv_py, "--model", "LlamaForCausalLM", "-f", "json", "--no-progress"),
               REPO, None),
        "py_folder": (("explain", "LlamaForCausalLM", "--python", tmp / "venv", "-f", "json", "--no-progress"),
                      REPO, None),
        "venv": (("scan", "--model", "LlamaForCausalLM", "-f", "json", "--no-progress"), tmp,
                 {"VIRTUAL_ENV": str(tmp / "venv")}),
        "py_sglang": (("scan", "--python", i.venv_sg, "--model", "LlamaForCausalLM", "-f", "json", "--no-progress"),
                      REPO, None),
        "py_missing": (("scan", "--python", tmp / "nope" / "python"), REPO, None),
        "py_and_path": (("scan", MINIVLLM, "--python", i.venv_py), REPO, None),
        "py_no_vllm": (("scan", "--engine", "sglang", "--python", i.venv_py), REPO, None),
        # 3. settings for every command
        "set_scan": (("scan", *v16, "-f", "json"), i.proj / "sub", None),
        "set_explain": (("explain", *v16, "-f", "json"), i.proj, None),
        "set_fix": (("fix", *v16), i.proj, None),
        "set_flag_wins": (("scan", *v16, "--model", "LlamaForCausalLM", "--method", "eagle3", "-f", "json"),
                          i.proj, None),
        "set_old": (("scan", *v16, "-f", "json"), i.old, None),
        "set_bad": (("scan", *v16, "--model", "LlamaForCausalLM"), i.bad, None),
        "set_bad_no_config": (("scan", *v16, "--model", "LlamaForCausalLM", "--no-config", "-f", "json"), i.bad, None),
        "set_config_file": (("scan", *v16, "--config", i.foreign, "-f", "json"), i.bad, None),
        "set_both": (("scan", *v16, "--config", i.foreign, "--no-config"), REPO, None),
        # 4. old option names
        "old_candidate": (("gate", "--candidate", "0.16.0", "--model", "LlamaForCausalLM", "-f", "json",
                           "--no-progress"), REPO, None),
        "old_out": (("fix", *v16, "--model", "kimi_k2", "--out", tmp / "patches"), REPO, None),
        "old_and_new": (("gate", "--candidate", "0.16.0", "--candidate-version", "0.18.0"), REPO, None),
        "rules_json": (("rules", "--format", "json"), REPO, None),
        # 5. MTP is audited
        "mtp": (("scan", *v16, "--model", "DeepseekV3ForCausalLM", "--method", "mtp", "-f", "json"), REPO, None),
    }
    for c in ("", *COMMANDS):
        jobs[f"help_{c or 'top'}"] = (((c,) if c else ()) + ("--help",), REPO, None)
    with ThreadPoolExecutor(3) as pool:
        futs = {k: pool.submit(run, *a, cwd=c, env=e, columns=80 if k.startswith("help_") else None)
                for k, (a, c, e) in jobs.items()}
        for k, f in futs.items():
            setattr(i, k, f.result())
    return i


# -- 1. inputs a user naturally gives ----------------------------------------------------------


def test_hf_config_takes_a_checkpoint_folder(cli):
    doc = as_json(cli.hf_folder, 1)
    assert [(r["architecture"], r["text_model_type"], r["verdict"]) for r in doc["results"]] == [
        ("DeepseekV3ForCausalLM", "kimi_k2", "blocked")]
    assert "--hf-config" in one_line_error(cli.hf_empty) and "is a folder without a config.json" in cli.hf_empty.stderr


@pytest.mark.parametrize("kind", ["wheel", "sdist", "version"])
def test_transformers_takes_a_wheel_an_sdist_or_a_version(cli, kind):
    doc = as_json(getattr(cli, f"tf_{kind}"), 1)
    assert doc["transformers"]["version"] == "4.57.6", doc["transformers"]
    (r,) = doc["results"]
    # LlavaConfig (transformers) defines image_token_index: only the allowlist blocks
    assert (r["architecture"], r["blocking"]) == ("LlavaForConditionalGeneration", ["allowlist"])


def test_transformers_refuses_a_file_that_holds_no_transformers(cli):
    assert "--transformers: " in one_line_error(cli.tf_not)


# -- 2. the installed engine of another environment -----------------------------------------


def test_python_audits_the_engine_of_another_environment_without_running_it(cli):
    doc = as_json(cli.py, 0)
    assert doc["engine"] == "vllm" and doc["engine_version"] == "0.0.1+mini"
    assert str(cli.tmp / "venv") in doc["source"] and "--python" in doc["source"]
    assert [(r["architecture"], r["verdict"]) for r in doc["results"]] == [("LlamaForCausalLM", "supported")]
    info = as_json(cli.py_folder, 0)  # an environment folder works too
    assert info["architecture"] == "LlamaForCausalLM"
    assert not (cli.tmp / "venv" / "RAN").exists()  # neither its .pth nor its sitecustomize ran


def test_virtual_env_is_honoured(cli):
    doc = as_json(cli.venv, 0)
    assert str(cli.tmp / "venv") in doc["source"] and "VIRTUAL_ENV" in doc["source"]
    assert not (cli.tmp / "venv" / "RAN").exists()


def test_python_finds_sglang_too(cli):
    doc = as_json(cli.py_sglang, 0)
    assert doc["engine"] == "sglang" and str(cli.tmp / "venv-sglang") in doc["source"]
    assert not (cli.tmp / "venv-sglang" / "RAN").exists()


@pytest.mark.parametrize("case, needle", [
    ("py_missing", "no such interpreter or environment folder"),
    ("py_and_path", "--python locates an installed engine"),
    ("py_no_vllm", "no sglang installed in that environment"),
])
def test_python_errors_are_one_line(cli, case, needle):
    assert needle in one_line_error(getattr(cli, case))


# -- 3. one settings model for every command --------------------------------------------------


def test_scan_explain_and_fix_read_the_settings(cli):
    doc = as_json(cli.set_scan, 1)  # from a subfolder: the nearest pyproject.toml with the table
    rows = {(r["architecture"], r["method"]) for r in doc["results"] if r.get("role", "target") == "target"}
    assert rows == {(a, m) for a in ("DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration")
                    for m in ("eagle3", "mtp")}
    infos = as_json(cli.set_explain, 0)
    assert [i["architecture"] for i in infos] == ["DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"]
    assert cli.set_fix.returncode == 0, cli.set_fix.stderr
    assert "+++ b/vllm/model_executor/models/deepseek_v2.py" in cli.set_fix.stdout


def test_flags_override_the_settings(cli):
    doc = as_json(cli.set_flag_wins, 0)
    assert [(r["architecture"], r["method"]) for r in doc["results"]] == [("LlamaForCausalLM", "eagle3")]


def test_old_setting_names_still_work_with_a_warning(cli):
    doc = as_json(cli.set_old, 0)
    assert [r["architecture"] for r in doc["results"]] == ["LlamaForCausalLM"]
    assert "warning:" in cli.set_old.stderr and "'targets' is deprecated; call it 'models'" in cli.set_old.stderr


def test_an_invalid_setting_names_the_file_and_key_and_no_config_skips_it(cli):
    line = one_line_error(cli.set_bad)
    assert str(cli.tmp / "bad" / "pyproject.toml") in line and "pipeline-parallel-size" in line
    assert [r["architecture"] for r in as_json(cli.set_bad_no_config, 0)["results"]] == ["LlamaForCausalLM"]
    assert [r["architecture"] for r in as_json(cli.set_config_file, 0)["results"]] == ["LlamaForCausalLM"]
    assert "--no-config" in one_line_error(cli.set_both)


def test_settings_have_one_name_scheme_and_the_readme_shows_them_all():
    for s in SETTINGS:  # a repeatable flag gives a plural setting, any other flag its own name
        assert s.key in (s.flag.lstrip("-"), s.flag.lstrip("-") + "s"), s
    readme = (REPO / "README.md").read_text()
    block = readme.split("<!-- settings:begin", 1)[1].split("\n", 1)[1].split("<!-- settings:end -->")[0]
    assert block.strip() == settings_markdown().strip()
    assert "versions = " in block
    # the README's block is itself a valid settings table
    toml = block.strip().removeprefix("```toml").removesuffix("```")
    f = Path(os.environ.get("TMPDIR", "/tmp")) / f"eagle-audit-readme-{os.getpid()}.toml"
    f.write_text(toml)
    try:
        s = load_settings(f)
    finally:
        f.unlink()
    assert s.models == ("kimi_k2",) and s.versions == "0.16.0..0.18.0" and not s.deprecations


# -- 4. help and option names ------------------------------------------------------------------


@pytest.mark.parametrize("command", ["top", *COMMANDS])
def test_help_is_readable_at_80_columns_with_examples(cli, command):
    p = getattr(cli, f"help_{command}")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
    assert not TYPE_METAVARS.search(p.stdout), TYPE_METAVARS.search(p.stdout)
    assert "Examples:" in p.stdout
    assert "\\[" not in p.stdout  # no markup escapes shown


def test_method_choices_are_the_same_on_every_command(cli):
    shown = {c: re.findall(r"^  --method (\S+)", getattr(cli, f"help_{c}").stdout, re.M) for c in COMMANDS}
    assert shown == {"scan": ["eagle3|eagle|mtp|all"], "explain": [], "fix": ["eagle3|eagle|mtp"],
                     "gate": ["eagle3|eagle|mtp|all"], "matrix": ["eagle3|eagle|mtp"],
                     "compare": ["eagle3|eagle|mtp"], "rules": []}


def test_option_names_follow_one_scheme(cli):
    for c in ("scan", "explain", "gate", "matrix", "compare"):
        assert "-o, --output FILE" in getattr(cli, f"help_{c}").stdout, c
    fix_help = cli.help_fix.stdout
    assert "--out-dir DIR" in fix_help and not re.search(r"--out\b(?!-)", fix_help)
    gate_help = cli.help_gate.stdout
    assert "--candidate-version X|PATH" in gate_help and "--current-version X|PATH" in gate_help
    assert not re.search(r"--candidate\b(?!-)|--current\b(?!-)", gate_help.replace("--candidate-version", "")
                         .replace("--current-version", ""))
    for c in ("scan", "explain", "fix", "gate", "matrix"):
        assert "--config FILE" in getattr(cli, f"help_{c}").stdout and "--no-config" in getattr(cli, f"help_{c}").stdout


def test_old_option_names_still_work_with_a_warning(cli):
    doc = as_json(cli.old_candidate, 0)
    assert doc["candidate"]["spec"] == "0.16.0"
    assert "warning: --candidate is deprecated; use --candidate-version" in cli.old_candidate.stderr
    assert cli.old_out.returncode == 0, cli.old_out.stderr
    assert "warning: --out is deprecated; use --out-dir" in cli.old_out.stderr
    assert sorted(p.suffix for p in (cli.tmp / "patches").iterdir()) == [".json", ".patch"]
    assert "--candidate is the old name of --candidate-version" in one_line_error(cli.old_and_new)


def test_rules_format_json(cli):
    doc = as_json(cli.rules_json, 0)
    assert {"EA301", "EA308"} <= {r["code"] for r in doc}


# -- 5. what the package promises --------------------------------------------------------------


def test_the_summary_says_what_is_supported_and_mtp_is_audited(cli):
    import tomllib

    description = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["description"]
    top = " ".join(cli.help_top.stdout.split())
    for text in (description, top):
        assert "EAGLE-3, EAGLE-1/2, MTP" in text and "vLLM and SGLang" in text
    doc = as_json(cli.mtp, 0)
    assert [(r["architecture"], r["method"], r["verdict"]) for r in doc["results"]] == [
        ("DeepseekV3ForCausalLM", "mtp", "supported")]


def test_site_packages_come_from_the_environment_layout(tmp_path):
    """The layouts ``--python`` reads without running anything: a system prefix reached through an
    interpreter link, and a venv that includes its base's site-packages."""
    from auditor.model.errors import SourceError
    from auditor.source.environments import environment_site_packages

    base = tmp_path / "usr"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3.11").write_text("")
    (base / "bin" / "python3").symlink_to("python3.11")
    base_site = base / "lib" / "python3.11" / "site-packages"
    base_site.mkdir(parents=True)
    assert environment_site_packages(base / "bin" / "python3") == [base_site]
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3.11")
    own = venv / "lib" / "python3.11" / "site-packages"
    own.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\ninclude-system-site-packages = true\nversion = 3.11.7\n")
    assert environment_site_packages(venv / "bin" / "python") == [own, base_site]
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\ninclude-system-site-packages = false\nversion = 3.11.7\n")
    assert environment_site_packages(venv) == [own]
    with pytest.raises(SourceError, match="no site-packages folder"):
        environment_site_packages(tmp_path)
