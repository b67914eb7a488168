"""Issue 20, the fourth hostile pass: code Python reaches that a static reader may miss.

Each test builds its own input (fixtures/minivllm with a few files changed, moved or linked; an
environment folder; a settings file or a JSON input), runs the real command line and checks the
verdict (correct, or ``unknown`` naming the construct and its ``file:line``; never
``supported``), the exit code, and that nothing was written: symbolic links to folders (followed
inside the tree, reported when they leave it), compiled modules beside a source, module imports
that must fail, protocol members that only raise, the environment's start-up code (plugins,
``.pth`` files), and a few inputs whose refusal was slow, silent or worded by Python.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import REPO, make_tree
from tests.test_hostile import alarm, cli, one_line_error, tree_hash  # noqa: F401 (alarm: a fixture)

MODELS = "vllm/model_executor/models"
LLAMA = (REPO / "fixtures" / "minivllm" / MODELS / "llama.py").read_text()
SPEC_PATH = "vllm/config/speculative.py"
ALLOW = 'eagle3_target_supported = ["llama", "qwen"]'


def scan_json(root: Path, arch: str = "LlamaForCausalLM", *extra: str) -> tuple[int, dict, str]:
    """``(exit code, the JSON document, stderr)`` of a scan of ``arch``; asserts it wrote nothing."""
    before = tree_hash(root)
    r = cli("scan", str(root), "--model", arch, "--format", "json", "--no-progress", "--no-cache", "--no-config",
            *extra)
    assert tree_hash(root) == before, "the scan changed the tree"
    assert "Traceback" not in r.stderr and r.exit_code in (0, 1), (r.exit_code, r.stderr)
    return r.exit_code, json.loads(r.stdout), r.stderr


def result_of(doc: dict, arch: str = "LlamaForCausalLM") -> dict:
    return next(x for x in doc["results"] if x["architecture"] == arch)


def refusing_allowlist(tmp_path: Path) -> Path:
    """minivllm whose EAGLE-3 allowlist no longer admits llama (so Llama is blocked there)."""
    root = make_tree(tmp_path)
    spec = root / SPEC_PATH
    assert ALLOW in spec.read_text()
    spec.write_text(spec.read_text().replace(ALLOW, 'eagle3_target_supported = ["qwen"]'))
    return root


# -- 1. folders that are symbolic links -----------------------------------------------------


def test_a_folder_linked_from_outside_the_tree_makes_the_verdicts_unknown_and_fix_writes_nothing(tmp_path):
    root = refusing_allowlist(tmp_path)
    outside = tmp_path / "elsewhere" / "config"
    outside.parent.mkdir()
    (root / "vllm" / "config").rename(outside)
    (root / "vllm" / "config").symlink_to(outside, target_is_directory=True)
    outside_hash = tree_hash(outside.parent)
    code, doc, _ = scan_json(root)
    # Python imports vllm.config through the link (and its allowlist refuses llama): the tool
    # does not read outside the tree, says so, and never answers supported
    assert code == 1
    errors = {e["path"]: e["error"] for e in doc["parse_errors"]}
    assert "outside the tree" in errors["vllm/config/"] and str(outside) in errors["vllm/config/"]
    r = result_of(doc)
    assert r["verdict"] == "unknown"
    allow = next(f for f in r["findings"] if f["gate"] == "allowlist")
    assert allow["severity"] == "unknown" and allow["path"] == "vllm/config/"
    assert "may hold the eagle3 allowlist" in allow["message"]
    # a target blocked elsewhere stays blocked, never supported
    assert result_of(scan_json(root, "ToyV2ForCausalLM")[1], "ToyV2ForCausalLM")["verdict"] != "supported"
    # fix: the allowlist cannot be patched through the link, so nothing is written at all
    before = tree_hash(root)
    r = cli("fix", str(root), "--model", "ToyV2ForCausalLM", "--apply", "--no-config", "--no-progress")
    assert r.exit_code == 1, r.stderr
    assert "vllm/config/" in r.stderr and "nothing was written" in r.stderr
    assert tree_hash(root) == before and tree_hash(outside.parent) == outside_hash


def test_a_folder_linked_inside_the_tree_is_read_and_never_written_through(tmp_path):
    root = refusing_allowlist(tmp_path)
    (root / "vllm" / "config").rename(root / "vllm" / "real_config")
    (root / "vllm" / "config").symlink_to("real_config", target_is_directory=True)
    code, doc, _ = scan_json(root)
    assert code == 1 and doc["parse_errors"] == []
    r = result_of(doc)
    assert r["verdict"] == "blocked"  # read through the link, as Python imports it
    allow = next(f for f in r["findings"] if f["gate"] == "allowlist")
    assert allow["severity"] == "error" and allow["path"] == SPEC_PATH
    before = tree_hash(root)
    r = cli("fix", str(root), "--model", "ToyV2ForCausalLM", "--apply", "--no-config", "--no-progress")
    assert r.exit_code == 2 and "Traceback" not in r.stderr  # the plan is shown, then the write is refused
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("eagle-audit: error:") and "symbolic link" in line and "vllm/config" in line
    assert tree_hash(root) == before
    assert not (root / ".eagle-audit-backup").exists() and not (root / ".eagle-audit.lock").exists()


def test_a_folder_link_that_loops_is_bounded_and_named(tmp_path, alarm):
    root = make_tree(tmp_path)
    (root / "vllm" / "loop").symlink_to("..", target_is_directory=True)
    (root / MODELS / "again").symlink_to("..", target_is_directory=True)
    code, doc, _ = scan_json(root)
    errors = {e["path"]: e["error"] for e in doc["parse_errors"]}
    assert "a loop" in errors["vllm/loop/"] and "a loop" in errors[f"{MODELS}/again/"]
    # the files under a loop are the tree's own, read under their own names: the verdict stands
    assert code == 0 and result_of(doc)["verdict"] == "supported"


# -- 2. compiled modules ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llama.cpython-311-x86_64-linux-gnu.so", "llama.abi3.so", "llama.so",
                                  "llama.cp311-win_amd64.pyd", "llama.pyc"])
def test_a_compiled_model_module_makes_its_target_unknown_naming_the_file(tmp_path, name):
    root = make_tree(tmp_path)
    (root / MODELS / name).write_bytes(b"\x7fELF not really")
    if name.endswith(".pyc"):
        (root / MODELS / "llama.py").unlink()  # a sourceless module: only the bytecode is there
    code, doc, _ = scan_json(root)
    assert code == 1
    r = result_of(doc)
    assert r["verdict"] == "unknown"
    assert any(f"{MODELS}/{name}" in f["message"] and f["severity"] == "unknown" for f in r["findings"]), r
    assert f"{MODELS}/llama.py" in {e["path"] for e in doc["parse_errors"]}


@pytest.mark.parametrize("kind", ["tar.gz", "whl"])
def test_a_compiled_module_in_an_archive_is_seen_as_in_a_folder(tmp_path, kind):
    import io
    import tarfile
    import zipfile

    src = REPO / "fixtures" / "minivllm"
    so = f"{MODELS}/llama.cpython-311-x86_64-linux-gnu.so"
    if kind == "tar.gz":
        archive = tmp_path / "vllm-0.0.1.tar.gz"
        with tarfile.open(archive, "w:gz") as tf:
            tf.add(src / "vllm", arcname="vllm-0.0.1/vllm", filter=lambda ti: None if "__pycache__" in ti.name else ti)
            for name in (so, "vllm/_C.abi3.so"):
                ti = tarfile.TarInfo(f"vllm-0.0.1/{name}")
                ti.size = 4
                tf.addfile(ti, io.BytesIO(b"\x7fELF"))
    else:
        archive = tmp_path / "vllm-0.0.1-py3-none-any.whl"
        with zipfile.ZipFile(archive, "w") as z:
            for p in sorted((src / "vllm").rglob("*.py")):
                if "__pycache__" not in p.parts:
                    z.write(p, p.relative_to(src).as_posix())
            z.writestr(so, b"\x7fELF")
            z.writestr("vllm/_C.abi3.so", b"\x7fELF")
    r = cli("scan", str(archive), "--model", "LlamaForCausalLM", "--format", "json", "--no-progress", "--no-cache",
            "--no-config")
    assert r.exit_code == 1, r.stderr
    doc = json.loads(r.stdout)
    assert result_of(doc)["verdict"] == "unknown"
    errors = {e["path"]: e["error"] for e in doc["parse_errors"]}
    assert so in errors[f"{MODELS}/llama.py"] and "vllm/_C.py" not in errors


def test_a_compiled_module_elsewhere_makes_supported_verdicts_unknown(tmp_path):
    root = make_tree(tmp_path)
    (root / MODELS / "toy.abi3.so").write_bytes(b"compiled")
    code, doc, _ = scan_json(root)
    assert code == 1
    r = result_of(doc)
    assert r["verdict"] == "unknown"
    f = next(f for f in r["findings"] if f["rule"] == "EA300")
    assert f"{MODELS}/toy.abi3.so" in f["message"] and "cannot read" in f["message"]
    # a compiled module with no source beside it (vllm/_C.abi3.so) hides nothing of the tree
    (root / MODELS / "toy.abi3.so").unlink()
    (root / "vllm" / "_C.abi3.so").write_bytes(b"compiled")
    code, doc, _ = scan_json(root)
    assert code == 0 and result_of(doc)["verdict"] == "supported"


# -- 3. module imports that must fail ---------------------------------------------------------


@pytest.mark.parametrize("edit, construct, words", [
    (lambda t: t + "\nfrom .does_not_exist import thing\n", "from .does_not_exist import thing",
     "ModuleNotFoundError"),
    (lambda t: t + "\nfrom .toy import NoSuchName\n", "from .toy import NoSuchName", "does not bind NoSuchName"),
    (lambda t: t + "\nimport vllm.model_executor.gone\n", "import vllm.model_executor.gone", "ModuleNotFoundError"),
    (lambda t: t + '\nassert False, "this fork disables llama"\n', "assert False", "AssertionError"),
    (lambda t: t + '\n\ndef _refuse():\n    raise ImportError("disabled")\n\n\n_refuse()\n', "_refuse()",
     "which always raises"),
    (lambda t: t.replace("class LlamaForCausalLM(", "class LlamaForCausalLM(UndefinedBase, "), "UndefinedBase",
     "NameError"),
    (lambda t: t.replace("class LlamaForCausalLM(", "@undefined_decorator\nclass LlamaForCausalLM("),
     "undefined_decorator", "NameError"),
    (lambda t: t.replace("class LlamaForCausalLM(nn.Module, SupportsPP, SupportsEagle, SupportsEagle3):\n",
                         "class LlamaForCausalLM(nn.Module, SupportsPP, SupportsEagle, SupportsEagle3):\n"
                         "    _x = undefined_name_here\n"), "undefined_name_here", "NameError"),
])
def test_a_module_import_that_must_fail_makes_the_target_unknown(tmp_path, edit, construct, words):
    changed = edit(LLAMA)
    assert changed != LLAMA
    root = make_tree(tmp_path, {f"{MODELS}/llama.py": changed})
    code, doc, _ = scan_json(root)
    assert code == 1
    r = result_of(doc)
    assert r["verdict"] == "unknown"
    f = next(f for f in r["findings"] if f["rule"] == "EA300")
    assert construct in f["message"], f
    if construct == "undefined_decorator":  # the class itself does not resolve: said at its registry row
        assert "is not bound in vllm/model_executor/models/llama.py" in f["message"]
        return
    lines = list(enumerate(changed.splitlines(), 1))
    line = next((i for i, text in lines if text == construct), None) or next(i for i, text in lines if construct in text)
    assert f["path"] == f"{MODELS}/llama.py" and f["line"] == line, f
    assert words in f["message"] and f"{MODELS}/llama.py:{line}" in f["message"]


@pytest.mark.parametrize("edit", [
    lambda t: t + "\ntry:\n    from .does_not_exist import thing\nexcept ImportError:\n    thing = None\n",
    lambda t: t + "\nif False:\n    from .does_not_exist import thing\n",
    lambda t: t + "\nfrom .toy import ToyV2ForCausalLM\nfrom . import toy\n",
    lambda t: t + "\nassert True\n",
    lambda t: t + '\n\ndef _refuse():\n    raise ImportError("disabled")\n\n\n_refuse = print\n_refuse()\n',
    lambda t: t + '\n\ndef _refuse():\n    raise ImportError("disabled")\n\n\nif False:\n    _refuse()\n',
    lambda t: t.replace("class LlamaForCausalLM(", "LATER = 1\n\n\nclass LlamaForCausalLM("),
])
def test_an_import_that_may_work_is_not_counted_as_a_failure(tmp_path, edit):
    root = make_tree(tmp_path, {f"{MODELS}/llama.py": edit(LLAMA)})
    code, doc, _ = scan_json(root)
    assert code == 0 and result_of(doc)["verdict"] == "supported", result_of(doc)["findings"]


@pytest.mark.parametrize("old, new, member", [
    ("        self.model.aux_hidden_state_layers = layers\n",
     '        raise NotImplementedError("EAGLE-3 is not supported yet")\n', "set_aux_hidden_state_layers"),
    ("        num_layers = len(self.model.layers)\n",
     '        raise NotImplementedError("no")\n        num_layers = len(self.model.layers)\n',
     "get_eagle3_aux_hidden_state_layers"),
])
def test_a_protocol_member_that_only_raises_does_not_pass(tmp_path, old, new, member):
    assert old in LLAMA
    changed = LLAMA.replace(old, new)
    root = make_tree(tmp_path, {f"{MODELS}/llama.py": changed})
    code, doc, _ = scan_json(root)
    assert code == 1
    r = result_of(doc)
    assert r["verdict"] == "unknown"
    f = next(f for f in r["findings"] if f["gate"] == "interface")
    line = next(i for i, text in enumerate(changed.splitlines(), 1) if f"def {member}(" in text)
    assert f["severity"] == "unknown" and f["line"] == line and f"LlamaForCausalLM.{member}" in f["message"]
    assert "only raises" in f["message"]


# -- 4-7. reports, JSON inputs, settings, environment variables, the cache --------------------


def test_the_apply_report_keeps_a_newline_of_the_tree_path_on_its_line(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "2000")  # the report wraps at the terminal's width; here it has one line per item
    forged = "eagle-audit: every target is already supported, nothing was written"
    folder = tmp_path / f"tree\n{forged}"
    root = make_tree(folder)
    r = cli("fix", str(root), "--model", "ToyV2ForCausalLM", "--apply", "--no-config", "--no-progress")
    assert r.exit_code == 0, r.stderr
    assert not any(line.startswith(forged) for line in r.stderr.splitlines()), r.stderr
    applied = next(line for line in r.stderr.splitlines() if line.startswith("applied to "))
    assert "tree\\x0a" + forged in applied
    assert cli("fix", "--revert", str(root), "--no-config").exit_code == 0


def test_an_oversized_list_in_a_draft_config_is_refused_by_its_length(tmp_path):
    draft = tmp_path / "drafter.json"
    draft.write_text(json.dumps({"architectures": ["Eagle3LlamaForCausalLM"], "model_type": "llama",
                                 "eagle_aux_hidden_state_layer_ids": [1] * 300_000}, separators=(",", ":")))
    root = make_tree(tmp_path)
    line = one_line_error(cli("scan", str(root), "--model", "LlamaForCausalLM", "--no-config", "--no-cache",
                              "--draft-config", str(draft)))
    assert "eagle_aux_hidden_state_layer_ids: 300000 items, more than the 1024 allowed" in line


@pytest.mark.parametrize("text, shape", [
    ('[[tool.eagle-audit]]\nmodels = ["NoSuchModel"]\n', "an array of tables"),
    ('[tool]\neagle-audit = "models = NoSuchModel"\n', "a string"),
    ('[tool]\neagle-audit = 3\n', "an integer"),
])
def test_a_settings_table_of_another_shape_is_refused(tmp_path, monkeypatch, text, shape):
    root = make_tree(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text(text)
    monkeypatch.chdir(work)
    line = one_line_error(cli("scan", str(root), "--no-cache"))
    assert str(work / "pyproject.toml") in line and shape in line and "not a table" in line
    line = one_line_error(cli("scan", str(root), "--no-cache", "--config", str(work / "pyproject.toml")))
    assert shape in line


def test_a_transformers_variable_naming_nothing_is_refused_like_the_flag(tmp_path, monkeypatch):
    root = make_tree(tmp_path)
    missing = tmp_path / "nonexistent"
    assert "--transformers" in one_line_error(cli("scan", str(root), "--no-config", "--transformers", str(missing)))
    monkeypatch.setenv("EAGLE_AUDIT_TRANSFORMERS", str(missing))
    line = one_line_error(cli("scan", str(root), "--no-config", "--no-cache"))
    assert f"EAGLE_AUDIT_TRANSFORMERS={missing}" in line and "no transformers package" in line


def test_huge_integers_in_inputs_get_our_own_message(tmp_path, monkeypatch):
    root = make_tree(tmp_path)
    cfg = tmp_path / "config.json"
    cfg.write_text('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": ' + "9" * 5000 + "}")
    line = one_line_error(cli("scan", str(root), "--no-config", "--hf-config", str(cfg)))
    assert "holds an integer of more than" in line and "set_int_max_str_digits" not in line
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text("[tool.eagle-audit]\npipeline-parallel-size = " + "9" * 5000 + "\n")
    monkeypatch.chdir(work)
    line = one_line_error(cli("scan", str(root), "--no-cache"))
    assert "holds an integer of more than" in line and "set_int_max_str_digits" not in line


def test_the_cache_listing_does_not_follow_a_linked_kind_folder(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.json").write_bytes(b"x" * 50_000)
    (cache / "results").symlink_to(outside, target_is_directory=True)
    monkeypatch.setenv("EAGLE_AUDIT_CACHE_DIR", str(cache))
    from auditor.orchestration.cachedir import cache_usage

    usage = cache_usage()
    results = next(k for k in usage.kinds if k.folder.name == "results")
    assert results.entries == [] and results.link is not None and usage.size == 0
    r = cli("cache")
    assert r.exit_code == 0, r.stderr
    assert "not followed" in r.stdout and "48.8 KiB" not in r.stdout and "49 KiB" not in r.stdout
    assert (outside / "big.json").stat().st_size == 50_000


def test_a_second_run_in_one_process_lays_out_for_its_own_columns(tmp_path, monkeypatch):
    # the stdout console was made once per process: a run with COLUMNS=40 left every later run
    # of main() in the same process wrapped at 40 (a CI run saw "not followed" split in two)
    cache = tmp_path / "cache"
    (cache / "results").mkdir(parents=True)
    monkeypatch.setenv("EAGLE_AUDIT_CACHE_DIR", str(cache))
    monkeypatch.setenv("COLUMNS", "40")
    narrow = cli("cache")
    assert narrow.exit_code == 0, narrow.stderr
    assert max(len(line) for line in narrow.stdout.splitlines() if not line.startswith("  /")) <= 40
    monkeypatch.delenv("COLUMNS")
    whole = cli("cache")
    assert whole.exit_code == 0, whole.stderr
    line = next(x for x in whole.stdout.splitlines() if "free space with" in x)
    assert line.endswith("eagle-audit cache clear") and len(line) > 40


# -- 8. the environment's start-up code -------------------------------------------------------


def _environment(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """An environment folder laid out as a venv with minivllm installed: (prefix, site-packages)."""
    import shutil

    prefix = tmp_path / name
    site = prefix / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    shutil.copytree(REPO / "fixtures" / "minivllm" / "vllm", site / "vllm",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.0\n")
    return prefix, site


def test_plugins_and_pth_files_of_an_environment_are_named_on_the_report(tmp_path):
    prefix, site = _environment(tmp_path, "env")
    marker = tmp_path / "RAN"
    (site / "toyplug").mkdir()
    (site / "toyplug" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    info = site / "toyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[console_scripts]\ntoy = toyplug:main\n\n"
                                           "[vllm.general_plugins]\ntoy = toyplug:register\n"
                                           "inner = vllm.model_executor.models:register\n")
    # the engine's own distribution: its entry points into its own package are part of the release
    own = site / "vllm-0.0.1.dist-info"
    own.mkdir()
    (own / "RECORD").write_text("vllm/__init__.py,sha256=x,1\n")
    (own / "entry_points.txt").write_text("[vllm.general_plugins]\nlora = vllm.plugins.lora:register\n")
    # a .pth line calling a function whose import reaches a module that names the engine
    (site / "toyhack.py").write_text("import os\n\ndef patch():\n    import toyhack_inner\n")
    (site / "toyhack_inner.py").write_text(f"open({str(marker)!r}, 'w').close()\n"
                                           "import vllm.model_executor.models.registry as r\n")
    (site / "zz_patch.pth").write_text("import os; import toyhack; toyhack.patch()\n")
    # a relative import inside a package is read too
    (site / "relpkg").mkdir()
    (site / "relpkg" / "__init__.py").write_text("from . import sub\n")
    (site / "relpkg" / "sub.py").write_text("import importlib\nimportlib.import_module('vl' + 'lm')\n")
    (site / "rel.pth").write_text("import relpkg\n")
    (site / "yy_exec.pth").write_text("import os; exec(os.environ.get('X', ''))\n")
    # setuptools' distutils-precedence.pth in shape: a guarded call of a module that never names
    # the engine and runs no text as code
    (site / "quiet_hack").mkdir()
    (site / "quiet_hack" / "__init__.py").write_text(
        "import os\nimport sys\n\ndef add_shim():\n    insert_shim()\n\ndef insert_shim():\n"
        "    sys.meta_path.insert(0, object())\n\ndef unused():\n    import toyhack_inner\n")
    (site / "quiet.pth").write_text("import os; var = 'A'; enabled = os.environ.get(var, 'x') == 'x'; "
                                    "enabled and __import__('quiet_hack').add_shim(); \n")
    (site / "plain.pth").write_text("/some/folder\n")
    r = cli("scan", "--python", str(prefix), "--model", "LlamaForCausalLM", "--no-config", "--no-cache",
            "--format", "json", "--no-progress")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    code = {(e["path"], e["what"]) for e in doc["environment_code"]}
    assert any(p == str(info / "entry_points.txt") and "vllm.general_plugins" in w and "toyplug:register" in w
               for p, w in code)
    # the same target declared by another distribution is named: it is not the release's own
    assert any(p == str(info / "entry_points.txt") and "vllm.model_executor.models:register" in w
               for p, w in code)
    assert any(p == str(site / "zz_patch.pth") and "toyhack_inner" in w and "names vllm" in w for p, w in code)
    assert any(p == str(site / "rel.pth") and "relpkg.sub" in w and "computed module name" in w for p, w in code)
    assert any(p == str(site / "yy_exec.pth") and "exec()" in w for p, w in code)
    # neither the console script, nor the engine's own plugin, nor the quiet .pth, nor a .pth
    # that only adds a folder
    assert len(code) == 5, code
    assert r.stderr.count("code outside the tree runs when vllm starts") == 5
    from auditor.render.schemas import output_errors

    assert output_errors("scan", doc) == []
    table = cli("scan", "--python", str(prefix), "--model", "LlamaForCausalLM", "--no-config", "--no-cache",
                "--no-progress")
    warned = [line for line in table.stdout.splitlines() if line.startswith("warning: code outside the tree")]
    # a long tmp path wraps the line: the file names are read from the joined text
    assert len(warned) == 5 and "zz_patch.pth" in " ".join(table.stdout.split()).replace(" ", "")
    assert not marker.exists()  # read, never run
    # an environment without such code: no field, no warning
    plain, _ = _environment(tmp_path, "plain")
    r = cli("scan", "--python", str(plain), "--model", "LlamaForCausalLM", "--no-config", "--no-cache",
            "--format", "json", "--no-progress")
    assert "environment_code" not in json.loads(r.stdout) and "code outside the tree" not in r.stderr


def test_a_tree_given_as_a_folder_reports_no_environment_code(tmp_path):
    root = make_tree(tmp_path)
    (root / "zz.pth").write_text("import os\n")
    code, doc, _ = scan_json(root)
    assert "environment_code" not in doc and os.path.exists(root / "zz.pth")


def test_a_namespace_package_is_a_module_python_imports(tmp_path):
    # a folder without __init__.py is a namespace package: importing from it works
    root = make_tree(tmp_path, {f"{MODELS}/nsdir/helpers.py": "VALUE = 1\n",
                                f"{MODELS}/llama.py": LLAMA + "\nfrom .nsdir import helpers\n"})
    code, doc, _ = scan_json(root)
    assert code == 0 and result_of(doc)["verdict"] == "supported", result_of(doc)["findings"]


def test_a_compiled_module_added_after_a_cached_scan_is_seen(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE_AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    root = make_tree(tmp_path)
    args = ("scan", str(root), "--model", "LlamaForCausalLM", "--format", "json", "--no-progress", "--no-config")
    for _ in range(2):  # the second answer comes from the cache
        r = cli(*args)
        assert r.exit_code == 0 and result_of(json.loads(r.stdout))["verdict"] == "supported"
    (root / MODELS / "llama.abi3.so").write_bytes(b"compiled")
    r = cli(*args)
    assert r.exit_code == 1 and result_of(json.loads(r.stdout))["verdict"] == "unknown"
