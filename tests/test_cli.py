"""The ``eagle-audit`` command line, run as a subprocess (``python -m auditor``) on minivllm.

Every invocation is independent, and each costs ~0.7 s of interpreter start-up and imports, so a
module-scoped fixture prepares all inputs once and runs every command concurrently; each test
then asserts on the result of its own command(s).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
from conftest import MINIVLLM, add_registry_row, make_tree

from rules.registry import RULES

REPO = Path(__file__).resolve().parents[1]


def run(*args, timeout: int = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("FORCE_COLOR", None)
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "auditor", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env,
    )


def _no_pycache(ti: tarfile.TarInfo):
    return None if "__pycache__" in ti.name else ti


# -- inputs ------------------------------------------------------------------------------------


def _prepare(tmp: Path) -> SimpleNamespace:
    i = SimpleNamespace(tmp=tmp)
    # a registry row whose module does not exist: verdict unknown
    i.ghost = make_tree(tmp / "ghost")
    add_registry_row(i.ghost, "GhostForCausalLM", "ghost")
    # one file that does not parse
    i.broken = make_tree(tmp / "broken", {"vllm/model_executor/models/broken.py":
                                          "class BrokenForCausalLM(nn.Module:\n    pass\n"})
    add_registry_row(i.broken, "BrokenForCausalLM", "broken")
    # modules that would write a marker file if anything imported them
    i.marker = tmp / "PWNED"
    plant = f"open({str(i.marker)!r}, 'w').write('imported')\n"
    evil = (
        "import os\n"
        + plant
        + f"os.system('touch {i.marker}')\n"
        "from torch import nn\n\n"
        "class EvilForCausalLM(nn.Module):\n"
        f"    open({str(i.marker)!r}, 'w').write('class body ran')\n\n"
        "    def __init__(self, vllm_config=None, prefix=''):\n"
        "        super().__init__()\n"
        "        self.model = nn.Linear(1, 1)\n"
    )
    i.evil = make_tree(tmp / "evil", {
        "vllm/model_executor/models/evil.py": evil,
        "vllm/model_executor/models/__init__.py":
            (MINIVLLM / "vllm/model_executor/models/__init__.py").read_text() + plant,
        "vllm/config/__init__.py": (MINIVLLM / "vllm/config/__init__.py").read_text() + plant,
        "vllm/v1/spec_decode/eagle.py": (MINIVLLM / "vllm/v1/spec_decode/eagle.py").read_text() + plant,
    })
    add_registry_row(i.evil, "EvilForCausalLM", "evil")
    # a release archive with the sdist layout (vllm-X/vllm/...)
    i.archive = tmp / "vllm-0.0.1.tar.gz"
    with tarfile.open(i.archive, "w:gz") as tf:
        tf.add(MINIVLLM / "vllm", arcname="vllm-0.0.1/vllm", filter=_no_pycache)
    # a corrupt and a truncated archive
    i.corrupt = tmp / "corrupt" / "vllm-0.0.1.tar.gz"
    i.corrupt.parent.mkdir()
    i.corrupt.write_bytes(b"\x1f\x8b\x08\x00 this is not really gzip data" * 10)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        tf.add(MINIVLLM / "vllm", arcname="vllm-0.0.2/vllm", filter=_no_pycache)
    data = gzip.compress(buf.getvalue())
    i.truncated = tmp / "vllm-0.0.2.tar.gz"
    i.truncated.write_bytes(data[: len(data) // 2])
    # a Python project that is not vLLM
    i.not_vllm = tmp / "project"
    (i.not_vllm / "pkg").mkdir(parents=True)
    (i.not_vllm / "pkg" / "__init__.py").write_text("x = 1\n")
    i.output = tmp / "out" / "sub" / "report.json"
    i.output.parent.mkdir(parents=True)  # -o never creates folders: a missing one is refused
    return i


TOY = ["--model", "ToyV3ForCausalLM", "--model-type", "toy"]

COMMANDS = {
    "llama": lambda i: ["scan", MINIVLLM, "--model", "LlamaForCausalLM"],
    "toy": lambda i: ["scan", MINIVLLM, *TOY],
    "toy-exit-zero": lambda i: ["scan", MINIVLLM, *TOY, "--exit-zero"],
    "ghost": lambda i: ["scan", i.ghost, "--model", "GhostForCausalLM", "--model-type", "llama", "-f", "json"],
    "three-json": lambda i: ["scan", MINIVLLM, "--model", "ToyV3ForCausalLM", "--model", "LlamaForCausalLM",
                             "--model", "ToyVLForConditionalGeneration", "--model-type", "toy", "-f", "json"],
    "full-all-json": lambda i: ["scan", MINIVLLM, "--method", "all", "-f", "json"],
    "output-file": lambda i: ["scan", MINIVLLM, "--model", "LlamaForCausalLM", "-f", "json", "-o", i.output],
    "archive": lambda i: ["scan", i.archive, *TOY, "-f", "json"],
    "broken": lambda i: ["scan", i.broken, "-f", "json"],
    "evil-scan": lambda i: ["scan", i.evil, "-f", "json"],
    # `explain --all PATH` takes PATH as the architecture (see test_explain_all_with_path):
    # an empty architecture lets PATH reach its own slot
    "evil-explain-all": lambda i: ["explain", "", i.evil, "--all", "-f", "json"],
    "evil-explain": lambda i: ["explain", "EvilForCausalLM", i.evil],
    "explain-all-path": lambda i: ["explain", "--all", MINIVLLM, "-f", "json"],
    "explain-toy3": lambda i: ["explain", "ToyV3ForCausalLM", MINIVLLM, "-f", "json"],
    "explain-toy32": lambda i: ["explain", "ToyV32ForCausalLM", MINIVLLM, "-f", "json"],
    "explain-toyvl": lambda i: ["explain", "ToyVLForConditionalGeneration", MINIVLLM, "-f", "json"],
    "explain-llama": lambda i: ["explain", "LlamaForCausalLM", MINIVLLM],
    "rules": lambda i: ["rules"],
    # bad inputs
    "bad:missing-path": lambda i: ["scan", i.tmp / "does-not-exist"],
    "bad:not-vllm": lambda i: ["scan", i.not_vllm],
    "bad:corrupt-targz": lambda i: ["scan", i.corrupt],
    "bad:truncated-targz": lambda i: ["scan", i.truncated],
    "bad:explain-unknown-arch": lambda i: ["explain", "ToyV9ForCausalLM", MINIVLLM],
    "bad:scan-unknown-model": lambda i: ["scan", MINIVLLM, "--model", "LlamaForCausalLMM"],
    "bad:explain-without-arch": lambda i: ["explain"],
    "bad:explain-path-only": lambda i: ["explain", MINIVLLM],
    "bad:missing-hf-config": lambda i: ["scan", MINIVLLM, "--hf-config", i.tmp / "nope.json"],
    "bad:path-and-version": lambda i: ["scan", MINIVLLM, "--vllm-version", "0.16.0"],
}


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """Prepare every input, run every command of COMMANDS concurrently; ``cli.r[name]`` is the
    CompletedProcess, ``cli.i`` the inputs."""
    inputs = _prepare(tmp_path_factory.mktemp("cli"))
    with ThreadPoolExecutor(max_workers=(os.cpu_count() or 2) + 2) as ex:
        futures = {name: ex.submit(run, *build(inputs)) for name, build in COMMANDS.items()}
        results = {name: f.result() for name, f in futures.items()}
    return SimpleNamespace(i=inputs, r=results)


def ok_json(p: subprocess.CompletedProcess, rc: int):
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == rc, (p.returncode, p.stderr)
    return json.loads(p.stdout)


# -- exit codes ----------------------------------------------------------------------------


def test_supported_target_exits_0(cli):
    p = cli.r["llama"]
    assert p.returncode == 0, p.stdout + p.stderr
    assert "supported" in p.stdout
    assert "0.0.1+mini" in p.stdout
    assert "1 target: 1 supported, 0 blocked, 0 unknown" in p.stdout
    assert p.stderr == ""


def test_blocked_target_exits_1_and_exit_zero_overrides(cli):
    p = cli.r["toy"]
    assert p.returncode == 1, p.stdout + p.stderr
    for gate in ("allowlist", "interface", "aux-capture"):  # the blocking gates, one per line in their cell
        assert re.search(rf"│ {gate} +│", p.stdout), gate
    assert "vllm/config/speculative.py:" in p.stdout
    assert cli.r["toy-exit-zero"].returncode == 0
    assert cli.r["toy-exit-zero"].stdout == p.stdout


def test_unknown_verdict_exits_1(cli):
    doc = ok_json(cli.r["ghost"], 1)
    assert doc["results"][0]["verdict"] == "unknown"
    assert doc["results"][0]["findings"][0]["rule"] == "EA300"


# -- JSON ------------------------------------------------------------------------------------

FINDING = {
    "type": "object",
    "required": ["rule", "gate", "severity", "message", "path", "line", "fix_available"],
    "properties": {
        "rule": {"type": "string", "pattern": "^EA3[0-9][0-9]$"},
        "gate": {"type": "string"},
        "severity": {"enum": ["error", "warning", "unknown"]},
        "message": {"type": "string", "minLength": 1},
        "path": {"type": ["string", "null"]},
        "line": {"type": ["integer", "null"], "minimum": 1},
        "fix_available": {"type": "boolean"},
    },
}
SCAN_SCHEMA = {
    "type": "object",
    "required": ["vllm_version", "results", "parse_errors"],
    "properties": {
        "vllm_version": {"type": ["string", "null"]},
        "parse_errors": {"type": "array", "items": {
            "type": "object", "required": ["path", "error"],
            "properties": {"path": {"type": "string"}, "error": {"type": "string"}}}},
        "results": {"type": "array", "items": {
            "type": "object",
            "required": ["architecture", "role", "class", "method", "verdict", "findings"],
            "properties": {
                "architecture": {"type": "string"},
                "role": {"enum": ["target", "drafter", "pooling"]},
                "class": {"type": ["string", "null"]},
                "method": {"enum": ["eagle3", "eagle", "mtp"]},
                "run_options": {"type": ["object", "null"], "required": ["method", "pipeline_parallel_size"]},
                "verdict": {"enum": ["supported", "blocked", "unknown", "not-a-target"]},
                "findings": {"type": "array", "items": FINDING},
            },
        }},
    },
}


def test_scan_json_schema_and_values(cli):
    doc = ok_json(cli.r["three-json"], 1)
    jsonschema.validate(doc, SCAN_SCHEMA)
    assert doc["vllm_version"] == "0.0.1+mini"
    res = {r["architecture"]: r for r in doc["results"]}
    assert set(res) == {"ToyV3ForCausalLM", "LlamaForCausalLM", "ToyVLForConditionalGeneration"}
    toy = res["ToyV3ForCausalLM"]
    assert toy["class"] == "vllm.model_executor.models.toy.ToyV3ForCausalLM"
    assert toy["method"] == "eagle3" and toy["verdict"] == "blocked"
    assert [f["gate"] for f in toy["findings"] if f["severity"] == "error"] == ["allowlist", "interface", "aux-capture"]
    assert [f["rule"] for f in toy["findings"] if f["severity"] == "error"] == ["EA301", "EA302", "EA303"]
    assert all(f["fix_available"] and f["path"] and f["line"] for f in toy["findings"] if f["severity"] == "error")
    vl = res["ToyVLForConditionalGeneration"]
    assert vl["blocking"] == ["allowlist", "interface", "aux-capture", "image-token"]
    assert vl["language_model"] == "ToyV2ForCausalLM"
    # --model-type is the text model_type for every target: llama's allowlist gate now fails too
    assert res["LlamaForCausalLM"]["blocking"] == ["allowlist"]


def test_full_scan_json_and_method_all(cli):
    doc = ok_json(cli.r["full-all-json"], 1)
    jsonschema.validate(doc, SCAN_SCHEMA)
    assert doc["parse_errors"] == []
    assert doc["drafters"] == ["Eagle3LlamaForCausalLM"]
    archs = sorted({r["architecture"] for r in doc["results"]})
    assert archs == ["Eagle3LlamaForCausalLM", "LlamaForCausalLM", "ToyV2ForCausalLM", "ToyV32ForCausalLM",
                     "ToyV3ForCausalLM", "ToyVLForConditionalGeneration"]
    assert len(doc["results"]) == 3 * len(archs)  # all: eagle3, eagle and mtp
    by = {(r["architecture"], r["method"]): r for r in doc["results"]}
    # minivllm's speculative config has no MTP rewrite: no target has an MTP draft
    mtp = by[("LlamaForCausalLM", "mtp")]
    assert (mtp["verdict"], [f["gate"] for f in mtp["findings"]]) == ("blocked", ["mtp-draft"])
    assert mtp["run_options"]["method"] == "mtp" and mtp["run_options"]["pipeline_parallel_size"] == 1
    assert by[("LlamaForCausalLM", "eagle3")]["verdict"] == "supported"
    # the drafter row is not a target: no verdict of its own, not counted with the targets
    drafter = by[("Eagle3LlamaForCausalLM", "eagle3")]
    assert (drafter["role"], drafter["verdict"], drafter["findings"]) == ("drafter", "not-a-target", [])
    assert "_SPECULATIVE_DECODING_MODELS" in drafter["note"] and "drafter" in drafter["note"]
    targets = [r for r in doc["results"] if r["role"] == "target"]
    assert {r["role"] for r in doc["results"]} == {"target", "drafter"}
    # the toys implement SupportsEagle (EAGLE-1/2) and are not multimodal: eagle is fine
    assert by[("ToyV2ForCausalLM", "eagle")]["verdict"] == "supported"
    assert by[("ToyV3ForCausalLM", "eagle3")]["verdict"] == "blocked"
    assert by[("ToyV32ForCausalLM", "eagle3")]["class"] == "vllm.model_executor.models.toy.ToyV3ForCausalLM"
    assert doc["summary"] == {"supported": sum(r["verdict"] == "supported" for r in targets),
                              "blocked": sum(r["verdict"] == "blocked" for r in targets),
                              "unknown": sum(r["verdict"] == "unknown" for r in targets),
                              "targets": 5, "drafters": 1, "pooling": 0}


def test_output_file(cli):
    p = cli.r["output-file"]
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert json.loads(cli.i.output.read_text())["results"][0]["verdict"] == "supported"
    assert [x.name for x in cli.i.output.parent.iterdir()] == ["report.json"]  # no temp file left


def test_release_archive_layout(cli):
    """A .tar.gz with a ``vllm-X/`` prefix (the sdist layout) is read in place."""
    doc = ok_json(cli.r["archive"], 1)
    assert doc["vllm_version"] == "0.0.1+mini"
    assert doc["results"][0]["blocking"] == ["allowlist", "interface", "aux-capture"]
    assert doc["results"][0]["findings"][0]["path"] == "vllm/config/speculative.py"


# -- bad inputs: one line on stderr, exit 2 -------------------------------------------------

BAD_NEEDLES = {
    "bad:missing-path": "does not exist",
    "bad:not-vllm": "not a vLLM tree",
    "bad:corrupt-targz": "cannot read archive",
    "bad:truncated-targz": "archive",
    "bad:explain-unknown-arch": "did you mean: ToyV",
    "bad:scan-unknown-model": "did you mean: LlamaForCausalLM",
    "bad:explain-without-arch": "give an architecture",
    "bad:explain-path-only": "give the architecture to explain (eagle-audit explain ARCH ",
    "bad:missing-hf-config": "no such file",
    "bad:path-and-version": "not both",
}


@pytest.mark.parametrize("case", sorted(BAD_NEEDLES))
def test_bad_input_one_line_exit_2(cli, case):
    p = cli.r[case]
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("eagle-audit: error:"), lines[0]
    assert BAD_NEEDLES[case] in lines[0], lines[0]
    assert p.stdout == ""


def test_unknown_names_are_quoted_in_the_message(cli):
    assert "'ToyV9ForCausalLM'" in cli.r["bad:explain-unknown-arch"].stderr
    assert "'LlamaForCausalLMM'" in cli.r["bad:scan-unknown-model"].stderr


# -- robustness -----------------------------------------------------------------------------


def test_syntax_error_file_is_reported_and_others_still_audited(cli):
    doc = ok_json(cli.r["broken"], 1)
    jsonschema.validate(doc, SCAN_SCHEMA)
    errs = {e["path"]: e["error"] for e in doc["parse_errors"]}
    assert list(errs) == ["vllm/model_executor/models/broken.py"]
    assert errs["vllm/model_executor/models/broken.py"].startswith("line 1:")
    res = {r["architecture"]: r for r in doc["results"]}
    assert res["BrokenForCausalLM"]["verdict"] == "unknown"
    assert res["LlamaForCausalLM"]["verdict"] == "supported"
    assert res["ToyV3ForCausalLM"]["verdict"] == "blocked"
    assert res["ToyVLForConditionalGeneration"]["verdict"] == "blocked"
    assert res["Eagle3LlamaForCausalLM"]["verdict"] == "not-a-target"
    assert len(res) == 7


def test_scanned_code_is_never_executed(cli):
    doc = ok_json(cli.r["evil-scan"], 1)
    assert "EvilForCausalLM" in {r["architecture"] for r in doc["results"]}
    p = cli.r["evil-explain-all"]
    assert p.returncode == 0, p.stderr
    assert "EvilForCausalLM" in {i["architecture"] for i in json.loads(p.stdout)}
    assert cli.r["evil-explain"].returncode == 0, cli.r["evil-explain"].stderr
    assert not cli.i.marker.exists()
    assert not list(cli.i.evil.rglob("__pycache__"))


# -- explain -------------------------------------------------------------------------------


def test_explain_empty_subclass(cli):
    info = ok_json(cli.r["explain-toy3"], 0)
    assert info["architecture"] == "ToyV3ForCausalLM"
    assert info["class"] == "vllm.model_executor.models.toy.ToyV3ForCausalLM"
    assert info["path"] == "vllm/model_executor/models/toy.py"
    src = (MINIVLLM / info["path"]).read_text().splitlines()
    assert src[info["line"] - 1].startswith("class ToyV3ForCausalLM(")
    assert info["empty_subclass"] is True
    assert info["mro"][1].endswith("toy.ToyV2ForCausalLM")
    assert info["mro"][2] == "torch.nn.Module"
    assert info["mro"][-1] == "object"
    assert "vllm.model_executor.models.interfaces.SupportsEagle" in info["mro"]
    assert "vllm.model_executor.models.interfaces.SupportsEagle3" not in info["mro"]
    assert info["code_holder"] == "vllm.model_executor.models.toy.ToyV2ForCausalLM"
    eagle3 = info["protocols"]["SupportsEagle3"]
    assert eagle3["set_aux_hidden_state_layers"] is None
    assert eagle3["has_own_lm_head"] == "vllm.model_executor.models.interfaces.SupportsEagleBase"
    assert info["holder"]["class"] == "vllm.model_executor.models.toy.ToyV2Model"
    (loop,) = info["holder"]["forward"]["loops"]
    assert loop["index_var"] is None and loop["captures"] is False


def test_explain_all_with_path(cli):
    p = cli.r["explain-all-path"]
    assert p.returncode == 0, p.stderr
    assert len(json.loads(p.stdout)) == 6


def test_explain_registry_alias(cli):
    info = ok_json(cli.r["explain-toy32"], 0)
    assert info["architecture"] == "ToyV32ForCausalLM"
    assert info["class"] == "vllm.model_executor.models.toy.ToyV3ForCausalLM"


def test_explain_multimodal_wrapper(cli):
    info = ok_json(cli.r["explain-toyvl"], 0)
    assert info["language_model"] == "ToyV2ForCausalLM"
    assert info["holder"]["class"] == "vllm.model_executor.models.toy.ToyV2Model"
    assert "vllm.model_executor.models.interfaces.SupportsMultiModal" in info["mro"]
    assert info["registry_tables"] == ["_MULTIMODAL_MODELS"]


def test_explain_llama_table_output(cli):
    p = cli.r["explain-llama"]
    assert p.returncode == 0, p.stderr
    assert "vllm.model_executor.models.llama.LlamaModel" in p.stdout
    assert "captures aux hidden states: yes" in p.stdout
    assert "returns aux hidden states: yes" in p.stdout


def test_rules_command_lists_every_rule(cli):
    p = cli.r["rules"]
    assert p.returncode == 0
    for code in RULES:
        assert code in p.stdout


def test_rules_as_json_lists_every_rule_of_the_registry():
    p = run("rules", "--format", "json")
    assert p.returncode == 0, p.stderr
    rules = json.loads(p.stdout)
    assert [r["code"] for r in rules] == list(RULES)
    assert {r["gate"] for r in rules if r["blocking"] and "vllm" in r["engines"]} == {
        "allowlist", "interface", "aux-capture", "image-token", "mtp-draft", "draft-pp", "pp-aux-transport",
        "draft-registry", "aux-layers", "parallel-drafting-mm", "embed-sharing", "platform-spec-decode",
        "platform-block-size"}
    assert all(r["why"] and r["how_to_fix"] for r in rules)


def test_verdicts_and_gates_stay_whole_in_80_columns():
    env = dict(os.environ, COLUMNS="80", NO_COLOR="1")
    p = subprocess.run([sys.executable, "-m", "auditor", "scan", str(MINIVLLM), "--model", "ToyV3ForCausalLM",
                        "--model-type", "toy_v3", "--no-progress"], capture_output=True, text=True, cwd=REPO, env=env)
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    # the table with its file:line would be wider: a block per target, each gate whole (ux3b)
    assert "ToyV3ForCausalLM: eagle3, blocked" in lines
    for gate in ("allowlist", "interface", "aux-capture"):
        assert any(line.startswith(f"  {gate}: vllm/") for line in lines), gate
    wide = subprocess.run([*p.args[:-1], "--no-progress"], capture_output=True, text=True, cwd=REPO,
                          env=dict(env, COLUMNS="120"))
    table = [line for line in wide.stdout.splitlines() if line.startswith(("┃", "│", "┏", "└"))]
    assert table and all(len(line) <= 120 for line in table)
    assert any("│ blocked │" in line for line in table)
    for gate in ("allowlist", "interface", "aux-capture"):
        assert any(f"│ {gate} " in line for line in table), gate


def test_explain_refuses_formats_it_does_not_write():
    p = run("explain", "LlamaForCausalLM", MINIVLLM, "--format", "markdown")
    assert p.returncode == 2 and "Traceback" not in p.stderr


def test_model_type_without_model_is_refused():
    p = run("scan", MINIVLLM, "--model-type", "kimi_k2")
    assert p.returncode == 2 and "give --model" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_version_flag_and_bare_command_print_once():
    p = run("--version")
    assert p.returncode == 0 and p.stdout.startswith("eagle-audit ")
    bare = run()
    assert bare.returncode == 0 and bare.stdout.count("Usage") == 1


def test_output_suffix_picks_the_format_and_the_write_is_confirmed(tmp_path):
    target = tmp_path / "report.sarif"
    p = run("scan", MINIVLLM, "--model", "LlamaForCausalLM", "-o", target)
    assert p.returncode == 0, p.stderr
    assert json.loads(target.read_text())["version"] == "2.1.0"
    assert f"wrote {target}" in p.stderr
    clash = run("scan", MINIVLLM, "--model", "LlamaForCausalLM", "-o", tmp_path / "r.json", "-f", "sarif")
    assert clash.returncode == 2 and "contradicts" in clash.stderr
    assert not (tmp_path / "r.json").exists()


def test_explain_takes_a_model_type_alias():
    p = run("explain", "toy_vl", MINIVLLM, "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    names = [d["architecture"] for d in (doc if isinstance(doc, list) else [doc])]
    assert "ToyVLForConditionalGeneration" in names
