"""The run decides the verdict too (issue 10): run options from the command line and
``[tool.eagle-audit]`` to the rules and into every result, and the gates that depend on them, on
the real release archives and on small synthetic trees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.hf.targets import resolve_targets
from auditor.model.errors import AuditError
from auditor.model.options import RunOptions, check_methods, load_draft_config
from auditor.model.results import TargetSpec
from auditor.orchestration.config import load_settings
from auditor.render.fix import fix_report
from tests.real import expected_cases, release_auditor

REPO = Path(__file__).resolve().parents[1]


def run(*args, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["NO_COLOR"] = "1"
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


def _audit(version: str, arch: str, method: str, options: RunOptions | None = None, model_type: str | None = None,
           hf_config: dict | None = None):
    a = release_auditor(version)
    if model_type:
        spec = TargetSpec(arch, model_type, model_type, "test")
    else:
        (spec,) = resolve_targets(a.registry, [arch])
    return a.audit(spec, method, hf_config, options)


# -- the run options themselves ------------------------------------------------------------------


def test_methods_all_includes_mtp_and_older_mtp_strings_are_accepted():
    assert check_methods(["all"], "--method") == ("eagle3", "eagle", "mtp")
    assert check_methods(["deepseek_mtp", "mtp", "deepseek_mtp"], "--method") == ("deepseek_mtp", "mtp")
    for bad in ("eagle4", "DeepSeek_MTP", "x;rm -rf /_mtp", "", "_mtp"):
        with pytest.raises(AuditError, match="--method: unknown method"):
            check_methods([bad], "--method")


def test_draft_config_file_or_folder_validated(tmp_path):
    d = tmp_path / "drafter"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                               "eagle_aux_hidden_state_layer_ids": [1, 20, 39], "extra": {"a": 1}}))
    doc, path = load_draft_config(d)
    assert path == str(d / "config.json") and doc["eagle_aux_hidden_state_layer_ids"] == [1, 20, 39]
    assert load_draft_config(d / "config.json")[0] == doc
    (d / "config.json").write_text(json.dumps({"architectures": ["Llama(ForCausalLM)"]}))
    with pytest.raises(AuditError, match=r"--draft-config .*architectures\[0\]"):
        load_draft_config(d)
    (d / "config.json").write_text(json.dumps({"eagle_aux_hidden_state_layer_ids": [-1]}))
    with pytest.raises(AuditError, match="eagle_aux_hidden_state_layer_ids"):
        load_draft_config(d)
    with pytest.raises(AuditError, match="without a config.json"):
        load_draft_config(tmp_path)
    with pytest.raises(AuditError, match="no such file"):
        load_draft_config(tmp_path / "nope.json")


def test_config_file_run_options(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    (tmp_path / "pyproject.toml").write_text(
        '[tool.eagle-audit]\nmethods = ["deepseek_mtp"]\npipeline-parallel-size = 2\ndraft-config = "d"\n'
        'parallel-drafting = true\nnum-speculative-tokens = 3\n')
    cfg = load_settings(start=tmp_path)
    run_ = cfg.run_options(platform="rocm")
    assert (run_.method, run_.pipeline_parallel_size, run_.parallel_drafting, run_.num_speculative_tokens,
            run_.platform) == ("deepseek_mtp", 2, True, 3, "rocm")
    assert run_.draft_config == {"architectures": ["Qwen3ForCausalLM"]}
    assert cfg.merged(pipeline_parallel_size=4).pipeline_parallel_size == 4  # a flag overrides the file
    for bad, match in (("pipeline-parallel-size = 0", "pipeline-parallel size"),
                       ('pipeline-parallel-size = "2"', "pipeline-parallel-size: '2' is not of type 'integer'"),
                       ("parallel-drafting = 1", "parallel-drafting: 1 is not of type 'boolean'"),
                       ('methods = ["mtp2"]', "unknown method")):
        (tmp_path / "pyproject.toml").write_text(f"[tool.eagle-audit]\n{bad}\n")
        with pytest.raises(AuditError, match=match):
            load_settings(start=tmp_path)


def test_bad_run_option_flags_exit_2(tmp_path):
    for args, needle in ((["--method", "eagle4"], "unknown method"),
                         (["--pipeline-parallel-size", "0"], "pipeline-parallel-size"),
                         (["--draft-config", tmp_path / "missing"], "--draft-config")):
        p = run("scan", REPO / "fixtures" / "minivllm", "--model", "LlamaForCausalLM", *args, timeout=60)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert needle in p.stderr and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr


# -- mtp-draft on the real releases ----------------------------------------------------------------


def test_scan_mtp_0_33_0_deepseek_v3_names_its_draft():
    p = run("scan", "--vllm-version", "0.33.0", "--method", "mtp", "--model", "DeepseekV3ForCausalLM",
            "--format", "json", "--no-progress")
    assert p.returncode == 0, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    assert (r["method"], r["verdict"], r["blocking"]) == ("mtp", "supported", [])
    assert r["draft"] == {"architecture": "DeepSeekMTPModel",
                          "class": "vllm.model_executor.models.deepseek_mtp.DeepSeekMTP"}
    assert r["run_options"] == {"method": "mtp", "pipeline_parallel_size": 1, "draft_config": None,
                                "draft_architectures": None, "parallel_drafting": False,
                                "num_speculative_tokens": None, "platform": "cuda"}
    table = run("scan", "--vllm-version", "0.33.0", "--method", "mtp", "--model", "DeepseekV3ForCausalLM",
                "--no-progress")
    assert table.returncode == 0 and "draft DeepSeekMTPModel" in table.stdout


def test_mtp_draft_follows_the_tree_rewrite():
    # DeepseekV32 keeps a V3.2 draft in 0.33.0 (use_v32_mtp), the plain one in 0.27.0
    assert _audit("0.33.0", "DeepseekV32ForCausalLM", "mtp", model_type="deepseek_v32").draft_architecture == \
        "DeepseekV32MTPModel"
    assert _audit("0.27.0", "DeepseekV32ForCausalLM", "mtp", model_type="deepseek_v32").draft_architecture == \
        "DeepSeekMTPModel"
    # Llama: no branch rewrites it
    r = _audit("0.33.0", "LlamaForCausalLM", "mtp")
    assert r.blocking == ["mtp-draft"]
    (f,) = r.findings
    assert f.path == "vllm/config/speculative.py"
    src = release_auditor("0.33.0").tree.source.read(f.path).decode().splitlines()
    assert src[f.line - 1].strip().startswith("def hf_config_override(")
    # DeepSeek-V4.1: the rewrite changes the model_type but yields no draft architecture
    r = _audit("0.33.0", "DeepseekV41ForCausalLM", "mtp", model_type="deepseek_v41")
    assert r.blocking == ["mtp-draft"] and "keeps the architecture" in r.findings[0].message
    # NemotronH: the branch tests a checkpoint field; --hf-config decides it
    r = _audit("0.33.0", "NemotronHForCausalLM", "mtp", model_type="nemotron_h")
    assert r.verdict.value == "unknown" and "depends on checkpoint fields" in r.findings[0].message
    assert "--hf-config" in r.findings[0].message
    r = _audit("0.33.0", "NemotronHForCausalLM", "mtp", model_type="nemotron_h",
               hf_config={"model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"],
                          "num_nextn_predict_layers": 1})
    assert (r.verdict.value, r.draft_architecture) == ("supported", "NemotronHMTPModel")


def test_older_mtp_method_strings_as_the_tree_maps_them():
    r = _audit("0.33.0", "DeepseekV3ForCausalLM", "deepseek_mtp")
    assert (r.method, r.verdict.value, r.run_options.method) == ("mtp", "supported", "deepseek_mtp")
    # 0.11.0 lists its MTP strings in a tuple, MTP_MODEL_TYPES; qwen9_mtp is on neither list
    for v in ("0.11.0", "0.33.0"):
        r = _audit(v, "DeepseekV3ForCausalLM", "qwen9_mtp")
        assert r.blocking == ["mtp-draft"], [f.message for f in r.findings]
        assert "qwen9_mtp" in r.findings[0].message


# -- the run-option cases of next.toml -------------------------------------------------------------

RUN_CASES = [c for c in expected_cases() if "engine" not in c and (c.get("method") == "mtp" or "pipeline_parallel_size" in c)]


def test_run_option_cases_cover_pp_and_mtp():
    assert {(c["vllm"], c["architecture"], c["method"], c.get("pipeline_parallel_size", 1)) for c in RUN_CASES} >= {
        ("0.33.0", "LlamaForCausalLM", "eagle3", 2), ("0.33.0", "DeepseekV3ForCausalLM", "eagle3", 2),
        ("0.27.0", "DeepseekV3ForCausalLM", "mtp", 2), ("0.33.0", "DeepseekV3ForCausalLM", "mtp", 1)}


# -- draft-pp ---------------------------------------------------------------------------------------


def test_draft_pp_0_27_0_deepseek_mtp_refused_where_the_model_config_refuses():
    r = _audit("0.27.0", "DeepseekV3ForCausalLM", "mtp", RunOptions(pipeline_parallel_size=2), "deepseek_v3")
    assert r.blocking == ["draft-pp"]
    (f,) = [f for f in r.findings if f.gate == "draft-pp"]
    assert f.path == "vllm/config/model.py"
    src = release_auditor("0.27.0").tree.source.read(f.path).decode().splitlines()
    assert "is_pp_supported_model" in src[f.line - 1]
    assert f.data.draft_class == "vllm.model_executor.models.deepseek_mtp.DeepSeekMTP"
    assert f.data.draft_parallel.startswith("vllm/config/speculative.py:")
    assert "DeepSeekMTP neither inherits SupportsPP" in f.message
    # 0.33.0 builds the draft with pipeline_parallel_size=1
    r = _audit("0.33.0", "DeepseekV3ForCausalLM", "mtp", RunOptions(pipeline_parallel_size=2), "deepseek_v3")
    assert (r.verdict.value, r.draft_architecture) == ("supported", "DeepSeekMTPModel")


# -- pp-aux-transport -----------------------------------------------------------------------------


def test_pp_aux_transport_before_and_after_the_transport():
    pp = RunOptions(pipeline_parallel_size=2)
    r = _audit("0.33.0", "DeepseekV3ForCausalLM", "eagle3", pp, "deepseek_v3")
    (f,) = [f for f in r.findings if f.gate == "pp-aux-transport"]
    assert f.path == "vllm/model_executor/models/deepseek_v2.py"
    src = release_auditor("0.33.0").tree.source.read(f.path).decode().splitlines()
    assert src[f.line - 1].startswith("class DeepseekV2Model(")
    assert f.data.check.startswith("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:")
    # MiMoModel opts out explicitly: the finding points at its flag
    r = _audit("0.33.0", "MiMoForCausalLM", "eagle3", pp)
    (f,) = [f for f in r.findings if f.gate == "pp-aux-transport"]
    assert "opts out" in f.message
    assert "supports_aux_hidden_states_over_pp = False" in release_auditor("0.33.0").tree.source.read(
        f.path).decode().splitlines()[f.line - 1]
    # Qwen2 declares it; without pipeline parallelism the gate does not apply
    assert _audit("0.33.0", "Qwen2ForCausalLM", "eagle3", pp).verdict.value == "supported"
    assert "pp-aux-transport" not in _audit("0.33.0", "DeepseekV3ForCausalLM", "eagle3", model_type="deepseek_v3").blocking
    # 0.27.0 has no transport: blocked for every target, saying why
    for arch in ("LlamaForCausalLM", "Qwen2ForCausalLM"):
        r = _audit("0.27.0", arch, "eagle3", pp)
        assert r.blocking == ["pp-aux-transport"], [f.message for f in r.findings]
        (f,) = [f for f in r.findings if f.gate == "pp-aux-transport"]
        assert "no transport" in f.message and "never reach it" in f.message
        # the pp-relative-index warning says when it matters
        warn = [f for f in r.findings if f.gate == "pp-relative-index"]
        assert warn and "once aux states cross pipeline stages" in warn[0].message


# -- draft-registry ---------------------------------------------------------------------------------


def _drafter(tmp_path: Path, **cfg) -> Path:
    d = tmp_path / "drafter"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_draft_registry_0_33_0_qwen3_drafter_per_method(tmp_path):
    d = _drafter(tmp_path, architectures=["Qwen3ForCausalLM"], model_type="qwen3")
    p = run("scan", "--vllm-version", "0.33.0", "--model", "Qwen3ForCausalLM", "--method", "eagle", "--draft-config",
            d, "--format", "json", "--no-progress")
    assert p.returncode == 1, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    assert r["blocking"] == ["draft-registry"]
    (f,) = [f for f in r["findings"] if f["gate"] == "draft-registry"]
    assert f["path"] == "vllm/transformers_utils/configs/eagle.py"
    assert f["data"]["rewritten"] == ["EagleQwen3ForCausalLM"]
    assert f["data"]["registered_for"] == {"eagle3": "Eagle3Qwen3ForCausalLM"}
    assert r["run_options"]["draft_config"] == str(d / "config.json")
    assert r["run_options"]["draft_architectures"] == ["Qwen3ForCausalLM"]
    p = run("scan", "--vllm-version", "0.33.0", "--model", "Qwen3ForCausalLM", "--method", "eagle3", "--draft-config",
            d, "--format", "json", "--no-progress")
    (r,) = json.loads(p.stdout)["results"]
    assert (r["verdict"], r["draft"]["architecture"]) == ("supported", "Eagle3Qwen3ForCausalLM")


# -- aux-layers -------------------------------------------------------------------------------------


def test_aux_layers_against_the_checkpoint_layer_count():
    ids = {"architectures": ["LlamaForCausalLM"], "eagle_aux_hidden_state_layer_ids": [2, 16, 32, 40]}
    hf = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32}
    opts = RunOptions(draft_config=ids, draft_config_path="d/config.json")
    # 0.33.0's LlamaModel captures after each layer (positions 0..32): only 40 is out of range
    r = _audit("0.33.0", "LlamaForCausalLM", "eagle3", opts, hf_config=hf)
    (f,) = [f for f in r.findings if f.gate == "aux-layers"]
    assert (f.severity.value, f.data.out_of_range) == ("error", [40])
    # 0.16.0's captures the state entering each layer (layers 0..31): 32 is out too
    r = _audit("0.16.0", "LlamaForCausalLM", "eagle3", opts, hf_config=hf)
    (f,) = [f for f in r.findings if f.gate == "aux-layers"]
    assert f.data.out_of_range == [32, 40]
    assert f.path == "vllm/v1/worker/gpu_model_runner.py"
    # without --hf-config the layer count is unknown
    r = _audit("0.33.0", "LlamaForCausalLM", "eagle3", opts)
    assert r.verdict.value == "unknown" and "--hf-config" in r.findings[-1].message


# -- parallel-drafting-mm ---------------------------------------------------------------------------


def test_parallel_drafting_multimodal_guard_by_release():
    vl = "Qwen2_5_VLForConditionalGeneration"
    for v, k, verdict in (("0.20.0", 3, "blocked"), ("0.20.0", None, "blocked"), ("0.27.0", 3, "supported")):
        r = _audit(v, vl, "eagle3", RunOptions(parallel_drafting=True, num_speculative_tokens=k))
        assert r.verdict.value == verdict, (v, k, [f.message for f in r.findings])
    r = _audit("0.20.0", vl, "eagle3", RunOptions(parallel_drafting=True, num_speculative_tokens=3))
    (f,) = [f for f in r.findings if f.gate == "parallel-drafting-mm"]
    assert r.blocking == ["parallel-drafting-mm"] and f.path == "vllm/v1/spec_decode/llm_base_proposer.py"
    assert "_raise_if_multimodal" in f.message
    # a text-only target is never refused
    assert _audit("0.20.0", "LlamaForCausalLM", "eagle3",
                  RunOptions(parallel_drafting=True, num_speculative_tokens=3)).verdict.value == "supported"


# -- matrix with run options -------------------------------------------------------------------------


def test_matrix_names_the_first_release_where_mtp_with_pp2_works(releases):
    from auditor.orchestration.matrix import run_matrix
    from auditor.render.upgrade_text import matrix_markdown

    pp2 = RunOptions(pipeline_parallel_size=2)
    report = run_matrix(["DeepseekV3ForCausalLM"], "0.29.0..0.30.0", method="mtp", options=pp2, releases=releases,
                        jobs=1)
    rows = {r.release: r for r in report.rows}
    assert (rows["0.29.0"].verdict.value, rows["0.29.0"].blocking) == ("blocked", ["draft-pp"])
    assert rows["0.30.0"].verdict.value == "supported" and rows["0.30.0"].first_native
    assert report.first_supported == {"DeepseekV3ForCausalLM": "0.30.0"}
    assert report.as_dict()["run_options"]["pipeline_parallel_size"] == 2
    assert "(mtp, PP=2)" in matrix_markdown(report).splitlines()[0]
    # the same releases without pipeline parallelism: both supported (the per-archive cache keys the run)
    plain = run_matrix(["DeepseekV3ForCausalLM"], "0.29.0..0.30.0", method="mtp", releases=releases, jobs=1)
    assert [r.verdict.value for r in plain.rows] == ["supported", "supported"]


def test_gate_takes_the_run_options_and_says_when_no_codemod_exists():
    p = run("gate", "--candidate-version", "0.27.0", "--current-version", "0.33.0", "--model", "DeepseekV3ForCausalLM", "--method",
            "mtp", "--pipeline-parallel-size", "2", "--format", "json", "--no-progress")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    (t,) = doc["targets"]
    assert (doc["outcome"], t["current_verdict"], t["candidate_verdict"], t["regression"]) == (
        "broken", "supported", "blocked", True)
    (problem,) = t["problems"]
    assert problem["gate"] == "draft-pp" and problem["hint"].startswith("no codemod exists for draft-pp: ")


# -- fix for pp-aux-transport -------------------------------------------------------------------------


def test_fix_gives_the_holder_the_transport_0_33_0():
    from auditor.orchestration.fix import plan_fix

    pp = RunOptions(pipeline_parallel_size=2)
    a = release_auditor("0.33.0")
    spec = TargetSpec("DeepseekV3ForCausalLM", "deepseek_v3", "deepseek_v3", "test")
    res = plan_fix(a, [spec], "eagle3", None, pp)
    assert res.ok and [r.verdict.value for r in res.after] == ["supported"], fix_report(res)
    assert {i.codemod for i in res.invocations} == {"pp-aux-transport"}
    (path,) = res.patched
    text = res.patched[path]
    assert "class DeepseekV2Model(nn.Module, EagleModelMixin):" in text
    assert "remote_aux = self.collect_remote_aux_hidden_states(intermediate_tensors)" in text
    assert "**self.pack_local_aux_hidden_states(aux_hidden_states)," in text
    assert "self.model._set_aux_hidden_state_layers(layers)" in text
    compile(text, path, "exec")  # compiled, never executed
    # without pipeline parallelism there is nothing to fix
    assert plan_fix(a, [spec], "eagle3", None, RunOptions()).already_supported
    # an explicit opt-out is left alone; a release without the transport cannot be patched
    mimo = plan_fix(a, resolve_targets(a.registry, ["MiMoForCausalLM"]), "eagle3", None, pp)
    assert any(u.gate == "pp-aux-transport" and "opts out" in u.reason for u in mimo.unfixable)
    old = release_auditor("0.27.0")
    res = plan_fix(old, resolve_targets(old.registry, ["LlamaForCausalLM"]), "eagle3", None, pp)
    assert not res.ok and [u.gate for u in res.unfixable] == ["pp-aux-transport"]
    assert "no transport" in res.unfixable[0].reason
