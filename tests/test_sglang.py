"""SGLang trees: engine detection, the registry (EntryClass), the duck-typed EAGLE-3 setter and
the capture through delegation, on the synthetic fixtures/minisglang tree and on real SGLang
releases (fetched through pip's index, cached, never skipped), plus ``compare``."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import shutil
import tarfile
import zipfile
from pathlib import Path

import libcst
import pytest
from typer.testing import CliRunner

from auditor.cli import app
from auditor.hf.targets import resolve_targets
from auditor.index.tree import SummaryCache
from auditor.model.errors import SourceError
from auditor.model.findings import Severity
from auditor.orchestration.compare import run_compare
from auditor.orchestration.fix import plan_fix
from auditor.orchestration.scan import Auditor, make_tree, open_tree
from auditor.render.fix import fix_report
from auditor.source import digests, fetch
from auditor.source.archive import ArchiveSource
from auditor.source.folder import FolderSource
from auditor.source.opener import open_source
from rules.base import AuditTarget
from rules.cst import NotAutoFixable
from rules.interface.codemod_sglang import SGLangInterfaceCodemod
from rules.registry import RULES, run_codemod
from tests.real import release_auditor

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "fixtures" / "minisglang"
MINIVLLM = REPO / "fixtures" / "minivllm"
runner = CliRunner()


def cli(*args):
    """``python -m auditor ARGS`` (for exit codes and one-line errors on stderr)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=env)


def _auditor(folder: Path | str = MINI) -> Auditor:
    return Auditor(open_tree(str(folder), None, progress=False, use_cache=False))


def _audit(a: Auditor, arch: str):
    (spec,) = resolve_targets(a.registry, [arch])
    return a.audit(spec, "eagle3")


# -- acceptance: the SGLang cases of next.toml, on the real releases ---------------------------

def test_sglang_0_5_10_post1_reasons_point_at_the_code():
    a = release_auditor("0.5.10.post1", "sglang")
    assert a.tree.source.label == "sglang-0.5.10.post1.tar.gz"  # the sdist
    kimi = _audit(a, "KimiK25ForConditionalGeneration")
    assert kimi.holder == "sglang.srt.models.deepseek_v2.DeepseekV2Model"
    assert kimi.language_model == "DeepseekV3ForCausalLM"
    gemma = _audit(a, "Gemma3ForConditionalGeneration")
    aux = next(f for f in gemma.findings if f.gate == "aux-capture")
    assert aux.path == "sglang/srt/models/gemma3_causal.py" and "Gemma3TextModel" in aux.message
    src = a.tree.source.read(aux.path).decode().splitlines()
    assert src[aux.line - 1].lstrip().startswith("for ")
    iface = next(f for f in gemma.findings if f.gate == "interface")
    assert iface.path == "sglang/srt/models/gemma3_mm.py"
    assert a.tree.source.read(iface.path).decode().splitlines()[iface.line - 1].startswith(
        "class Gemma3ForConditionalGeneration")


def test_sglang_0_5_23_wheel_read_in_place():
    """0.5.23 publishes wheels only: the wheel for this Python is fetched and read in place."""
    a = release_auditor("0.5.23", "sglang")
    assert a.tree.source.label.startswith("sglang-0.5.23-") and a.tree.source.label.endswith(".whl")
    assert a.tree.version() == "0.5.23"
    # the runner checks hasattr first (0.5.23 attention_backend_setup.py)
    call = a.facts.runner_calls()[0]
    assert call.checked and call.path.endswith("attention_backend_setup.py")
    # spot checks read by hand in the wheel's sources
    assert _audit(a, "Gemma3ForConditionalGeneration").verdict.value == "supported"  # hasattr delegation to a capturing LM
    assert _audit(a, "Qwen3MoeForCausalLM").verdict.value == "supported"  # the inner model's own setter
    gpt2 = _audit(a, "GPT2LMHeadModel")
    assert gpt2.verdict.value == "blocked" and gpt2.blocking == ["interface", "aux-capture"]
    tele = _audit(a, "TeleFLMForCausalLM")  # TeleFLMModel.forward returns super().forward(...): LlamaModel's
    assert tele.verdict.value == "supported" and tele.holder == "sglang.srt.models.teleflm.TeleFLMModel"


@pytest.mark.parametrize("version,counts", [
    # the EAGLE workers' get_embed_and_head: Qwen2MoeForCausalLM lacks it (supported -> blocked); MiniCPMV
    # (and 0.5.23's MiniCPMV4_6/4_7) and 0.5.10.post1's Mistral3ForConditionalGeneration lack it and the
    # setter but define __getattr__ (blocked -> unknown)
    ("0.5.10.post1", {"targets": 158, "drafters": 17, "pooling": 18, "supported": 31, "blocked": 124, "unknown": 3}),
    # 0.5.23: the Qwen3-VL wrappers' language_model_cls, passed on through super().__init__, is followed,
    # and a setter's if-hasattr delegation whose else writes layers_to_capture is no silent skip
    # (8 unknown -> supported)
    ("0.5.23", {"targets": 226, "drafters": 40, "pooling": 24, "supported": 53, "blocked": 169, "unknown": 4}),
])
def test_full_scan_counts(version, counts):
    """Every registered architecture of the release: how many are EAGLE-3 capable."""
    a = release_auditor(version, "sglang")
    specs = resolve_targets(a.registry, [])
    assert len(specs) == sum(counts[k] for k in ("targets", "drafters", "pooling"))
    s = a.scan(specs, ["eagle3"]).summary()
    assert {k: s[k] for k in counts} == counts


# -- the synthetic tree -------------------------------------------------------------------------

def test_minisglang_registry_and_roles():
    a = _auditor()
    assert a.engine.name == "sglang" and a.tree.package == "sglang"
    assert a.registry.architectures() == [
        "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration",
        "Gemma3SilentForConditionalGeneration", "KimiK25ForConditionalGeneration", "LlamaEmbeddingModel",
        "LlamaForCausalLM", "LlamaForCausalLMEagle3", "Phi3ForCausalLM", "Qwen2MoeForCausalLM",
    ]
    assert a.registry.role("LlamaForCausalLMEagle3") == "drafter"
    assert a.registry.role("LlamaEmbeddingModel") == "pooling"
    assert a.registry.role("KimiK25ForConditionalGeneration") == "target"
    assert a.registry.entries["Phi3ForCausalLM"].path == "sglang/srt/models/llama.py"


@pytest.mark.parametrize("arch,verdict,blocking,warnings", [
    ("LlamaForCausalLM", "supported", [], []),           # holder built by a factory method (_init_model)
    ("Phi3ForCausalLM", "supported", [], []),            # empty subclass inherits setter and holder
    ("DeepseekV3ForCausalLM", "supported", [], []),      # loop over local bounds
    ("KimiK25ForConditionalGeneration", "supported", [], []),  # delegation, class imported inside __init__
    ("Qwen2MoeForCausalLM", "supported", [], []),        # inner setter; the layer is handed the aux list
    ("Gemma3ForConditionalGeneration", "blocked", ["interface", "aux-capture"], []),
    ("Gemma3SilentForConditionalGeneration", "blocked", ["aux-capture"], ["silent-delegation"]),
])
def test_minisglang_verdicts(arch, verdict, blocking, warnings):
    r = _audit(_auditor(), arch)
    assert r.verdict.value == verdict, [f.message for f in r.findings]
    assert r.blocking == blocking
    assert [f.gate for f in r.findings if f.severity is Severity.WARNING] == warnings


def test_minisglang_holder_and_language_model():
    a = _auditor()
    r = _audit(a, "KimiK25ForConditionalGeneration")
    assert r.holder == "sglang.srt.models.deepseek_v2.DeepseekV2Model"
    assert r.language_model == "DeepseekV3ForCausalLM"
    r = _audit(a, "Gemma3ForConditionalGeneration")
    interface = next(f for f in r.findings if f.gate == "interface")
    assert "sglang/srt/model_executor/model_runner.py:14" in interface.message  # the runner's call


def test_not_a_target_rows():
    r = _audit(_auditor(), "LlamaForCausalLMEagle3")
    assert r.verdict.value == "not-a-target" and r.role == "drafter"
    assert "sglang/srt/models/llama_eagle3.py" in r.note


def test_runner_without_the_call_makes_interface_unknown(tmp_path):
    tree = tmp_path / "t"
    shutil.copytree(MINI, tree)
    (tree / "sglang/srt/model_executor/model_runner.py").write_text("class ModelRunner:\n    pass\n")
    r = _audit(_auditor(tree), "LlamaForCausalLM")
    assert r.verdict.value == "unknown"
    (f,) = [f for f in r.findings if f.gate == "interface"]
    assert f.severity is Severity.UNKNOWN and "never calls" in f.message


def test_setter_through_an_unknown_attribute_is_unknown(tmp_path):
    tree = tmp_path / "t"
    shutil.copytree(MINI, tree)
    p = tree / "sglang/srt/models/llama.py"
    p.write_text(p.read_text().replace("self.model = self._init_model(config)", "self.model = build(config)"))
    r = _audit(_auditor(tree), "LlamaForCausalLM")
    assert r.verdict.value == "unknown"
    assert any(f.gate == "aux-capture" and "build" in f.message for f in r.findings)


def test_sglang_rule_examples_run_on_minisglang(tmp_path):
    """Every SGLang rule's VALID/INVALID examples, laid over fixtures/minisglang."""
    ran = 0
    for code, rule in RULES.items():
        if not rule.judges("sglang"):
            continue
        for kind in ("VALID", "INVALID"):
            for i, ex in enumerate(getattr(rule, kind)):
                if ex.engine not in (None, "sglang"):
                    continue  # laid over fixtures/minivllm (tests/test_rule_examples.py)
                folder = tmp_path / f"{code}-{kind}-{i}"
                shutil.copytree(MINI, folder)
                for rel, src in ex.files.items():
                    (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                    (folder / rel).write_text(src)
                a = _auditor(folder)
                from auditor.engines.modelfiles import target_facts

                facts = target_facts(a.resolver, a.registry, ex.architecture)
                target = AuditTarget(ex.architecture, ex.method, facts,
                                     options=ex.options if ex.options.method != "eagle3" else ex.options.with_method(ex.method))
                assert rule().applies(target), (code, kind, i)
                found = list(rule().check(a.ctx, target))
                if kind == "VALID":
                    assert found == [], (code, i, [f.message for f in found])
                else:
                    assert [f.severity for f in found] == [ex.expect_severity], (code, i, [f.message for f in found])
                ran += 1
    assert ran >= 6


# -- sources and engine detection ----------------------------------------------------------------

def _pack_tar(dest: Path, root: Path, top: str) -> Path:
    with tarfile.open(dest, "w:gz") as tar:
        for p in sorted(root.rglob("*.py")):
            tar.add(p, arcname=f"{top}/{p.relative_to(root).as_posix()}")
        info = tarfile.TarInfo(f"{top}/PKG-INFO")
        data = b"Metadata-Version: 2.1\nName: sglang\nVersion: 0.0.1\n\n"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return dest


def _pack_wheel(dest: Path, root: Path, version: str = "0.0.1") -> Path:
    with zipfile.ZipFile(dest, "w") as z:
        for p in sorted(root.rglob("*.py")):
            rel = p.relative_to(root).as_posix()
            if rel != "sglang/_version.py":
                z.write(p, rel)
        z.writestr(f"sglang-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n\n")
    return dest


def test_engine_is_detected_for_folders_archives_and_wheels(tmp_path):
    assert FolderSource(MINI).package == "sglang"
    assert FolderSource(MINI / "sglang").package == "sglang"
    assert FolderSource(MINIVLLM).package == "vllm"
    sdist = ArchiveSource(_pack_tar(tmp_path / "sglang-0.0.1.tar.gz", MINI, "sglang-0.0.1"))
    assert sdist.package == "sglang" and sdist.version() == "0.0.1"
    assert "sglang/srt/models/llama.py" in sdist.files()
    whl = ArchiveSource(_pack_wheel(tmp_path / "sglang-0.0.2-py3-none-any.whl", MINI, "0.0.2"))
    assert whl.package == "sglang" and whl.version() == "0.0.2"  # from the dist-info METADATA
    a = Auditor(make_tree(whl, SummaryCache(enabled=False)))
    assert a.engine.name == "sglang" and _audit(a, "LlamaForCausalLM").verdict.value == "supported"


def test_a_folder_with_both_packages_reads_vllm_unless_told(tmp_path):
    both = tmp_path / "both"
    shutil.copytree(MINIVLLM / "vllm", both / "vllm")
    shutil.copytree(MINI / "sglang", both / "sglang")
    assert FolderSource(both).package == "vllm"
    assert FolderSource(both, package="sglang").package == "sglang"
    assert open_source(str(both), None, package="sglang").package == "sglang"
    with pytest.raises(SourceError, match="not a SGLang tree"):
        FolderSource(MINIVLLM, package="sglang")


def test_installed_sglang_found_without_import(tmp_path, monkeypatch):
    import importlib

    site = tmp_path / "site"
    shutil.copytree(MINI / "sglang", site / "sglang")
    (site / "sglang/__init__.py").write_text("raise SystemExit('imported!')\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    src = open_source(None, None, package="sglang")
    assert src.package == "sglang" and src.root() == site.resolve()


def _file_index(tmp_path: Path, files: dict[str, bytes], sha: dict[str, str] | None = None) -> str:
    """A PEP 503 simple index on disk (file:// URL) listing ``files`` for sglang."""
    (tmp_path / "files").mkdir(parents=True, exist_ok=True)
    links = []
    for name, data in files.items():
        (tmp_path / "files" / name).write_bytes(data)
        digest = (sha or {}).get(name, hashlib.sha256(data).hexdigest())
        links.append(f'<a href="../../files/{name}#sha256={digest}">{name}</a>')
    page = tmp_path / "simple" / "sglang"
    page.mkdir(parents=True)
    (page / "index.html").write_text("<html><body>" + "\n".join(links) + "</body></html>")
    return (tmp_path / "simple").as_uri()


def test_fetch_sglang_wheel_when_no_sdist(tmp_path, monkeypatch):
    good = _pack_wheel(tmp_path / "w.whl", MINI, "9.9.9").read_bytes()
    url = _file_index(tmp_path / "idx", {
        "sglang-9.9.9-cp27-cp27m-win32.whl": b"not for this platform",
        "sglang-9.9.9-py3-none-any.whl": good,
        "sglang-9.9.8.tar.gz": b"an older sdist",
    })
    monkeypatch.setenv("PIP_INDEX_URL", url)
    cache = tmp_path / "cache"
    got = fetch.fetch_release("9.9.9", project="sglang", progress=False, cache_dir=cache)
    assert got.name == "sglang-9.9.9-py3-none-any.whl"
    assert digests.recorded_sha256(got) == hashlib.sha256(good).hexdigest()
    # cached and verified against its sidecar: no index needed any more
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "nowhere").as_uri())
    assert fetch.fetch_release("9.9.9", project="sglang", progress=False, cache_dir=cache) == got
    monkeypatch.setenv("PIP_INDEX_URL", url)
    with pytest.raises(SourceError, match="SGLang 9.9.7 is not on the package index"):
        fetch.fetch_release("9.9.7", project="sglang", progress=False, cache_dir=cache)


def test_fetch_sglang_wheel_sha256_mismatch_is_refused(tmp_path, monkeypatch):
    good = _pack_wheel(tmp_path / "w.whl", MINI, "9.9.9").read_bytes()
    name = "sglang-9.9.9-py3-none-any.whl"
    monkeypatch.setenv("PIP_INDEX_URL", _file_index(tmp_path / "idx", {name: good}, {name: "0" * 64}))
    with pytest.raises(SourceError, match="does not match the sha256"):
        fetch.fetch_release("9.9.9", project="sglang", progress=False, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache" / name).exists()


# -- command line ----------------------------------------------------------------------------------

def test_scan_json_and_sarif_carry_the_engine(tmp_path):
    res = runner.invoke(app, ["scan", str(MINI), "--no-cache", "--no-progress", "-f", "json",
                              "-m", "Gemma3ForConditionalGeneration"])
    assert res.exit_code == 1, res.output
    doc = json.loads(res.output)
    assert doc["engine"] == "sglang" and doc["engine_version"] == "0.0.1" and doc["vllm_version"] is None
    assert doc["results"][0]["blocking"] == ["interface", "aux-capture"]
    res = runner.invoke(app, ["scan", str(MINI), "--no-cache", "--no-progress", "-f", "sarif",
                              "-m", "Gemma3ForConditionalGeneration"])
    sarif = json.loads(res.output)
    props = sarif["runs"][0]["properties"]
    assert props["engine"] == "sglang" and props["engineVersion"] == "0.0.1"
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} == {"EA402", "EA403"}
    res = runner.invoke(app, ["scan", str(MINIVLLM), "--no-cache", "--no-progress", "-f", "json", "-m", "LlamaForCausalLM"])
    assert json.loads(res.output)["engine"] == "vllm"


def test_scan_exit_codes_and_engine_override(tmp_path):
    ok = runner.invoke(app, ["scan", str(MINI), "--no-cache", "--no-progress", "-m", "LlamaForCausalLM"])
    assert ok.exit_code == 0, ok.output
    bad = cli("scan", MINI, "--engine", "vllm", "--no-cache", "--no-progress")
    assert bad.returncode == 2 and "not a vLLM tree" in bad.stderr and "Traceback" not in bad.stderr
    # EAGLE-1 is audited on SGLang trees (issue 19: its workers call get_embed_and_head on the target)
    eagle = cli("scan", MINI, "--method", "eagle", "--no-cache", "--no-progress", "-m", "LlamaForCausalLM",
                "--format", "json")
    assert eagle.returncode in (0, 1), eagle.stderr
    assert {r["method"] for r in json.loads(eagle.stdout)["results"]} == {"eagle"}


def test_explain_sglang_json():
    res = runner.invoke(app, ["explain", "KimiK25ForConditionalGeneration", str(MINI), "--no-cache",
                              "--no-progress", "-f", "json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["engine"] == "sglang"
    assert info["setter"]["defined_in"] == "sglang.srt.models.kimi_k25.KimiK25ForConditionalGeneration"
    assert info["capture"]["holder"] == "sglang.srt.models.deepseek_v2.DeepseekV2Model"
    assert info["capture"]["forward"]["returns_aux"] is True
    assert info["registered_in"]["path"] == "sglang/srt/models/kimi_k25.py"


def test_compare_paths_json_and_markdown(tmp_path):
    args = ["compare", "--model", "LlamaForCausalLM", "--model", "Gemma3ForConditionalGeneration",
            "--vllm-version", str(MINIVLLM), "--sglang-version", str(MINI), "--no-cache", "--no-progress"]
    res = runner.invoke(app, args + ["-f", "json"])
    doc = json.loads(res.output)
    rows = {r["architecture"]: r["engines"] for r in doc["rows"]}
    assert rows["LlamaForCausalLM"]["vllm"]["verdict"] == "supported"
    assert rows["LlamaForCausalLM"]["sglang"]["verdict"] == "supported"
    assert rows["Gemma3ForConditionalGeneration"]["vllm"]["verdict"] == "absent"
    assert rows["Gemma3ForConditionalGeneration"]["sglang"]["blocking"] == ["interface", "aux-capture"]
    assert doc["ok"] is False and res.exit_code == 1
    res = runner.invoke(app, ["compare", "--model", "LlamaForCausalLM", "--vllm-version", str(MINIVLLM),
                              "--sglang-version", str(MINI), "--no-cache", "--no-progress", "-f", "markdown"])
    assert res.exit_code == 0
    assert "| LlamaForCausalLM | eagle3 | supported | supported |" in res.output
    bad = cli("compare", "--model", "LlamaForCausalLM", "--vllm-version", MINI, "--sglang-version", MINI,
              "--no-cache", "--no-progress")
    assert bad.returncode == 2 and "not a vLLM tree" in bad.stderr


def test_compare_kimi_k2_vllm_0_16_0_against_sglang_0_5_10_post1():
    report = run_compare(["kimi_k2"], [("0.16.0", release_auditor("0.16.0")),
                                       ("0.5.10.post1", release_auditor("0.5.10.post1", "sglang"))])
    assert [s.name for s in report.sides] == ["vLLM 0.16.0", "SGLang 0.5.10.post1"]
    rows = {r.architecture: r.cells for r in report.rows}
    assert list(rows) == ["DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"]
    vllm_kimi, sglang_kimi = rows["KimiK25ForConditionalGeneration"]
    assert vllm_kimi.verdict == "blocked"
    assert vllm_kimi.blocking == ["allowlist", "interface", "aux-capture", "image-token"]
    assert any(x.startswith("image-token:") and "media_placeholder_token_id" in x for x in vllm_kimi.reasons)
    assert sglang_kimi.verdict == "supported" and sglang_kimi.reasons == []
    assert rows["DeepseekV3ForCausalLM"][0].blocking == ["allowlist", "interface", "aux-capture"]
    assert report.supports_all == [False, True] and report.ok


# -- gate and matrix on SGLang releases ----------------------------------------------------------

def test_matrix_over_sglang_releases_sdists_and_wheels():
    """0.5.9 and 0.5.10.post1 are sdists, 0.5.23 a wheel: all three are read (none skipped)."""
    from auditor.orchestration.matrix import run_matrix
    from auditor.orchestration.releases import IndexReleases

    report = run_matrix(["kimi_k2", "Gemma3ForConditionalGeneration"], "0.5.9,0.5.10.post1,0.5.23", jobs=1,
                        releases=IndexReleases(project="sglang"), engine="sglang")
    assert report.engine == "sglang" and report.errors == {}
    assert report.releases == ["0.5.9", "0.5.10.post1", "0.5.23"]
    assert report.first_supported == {"DeepseekV3ForCausalLM": "0.5.9",
                                      "KimiK25ForConditionalGeneration": "0.5.10.post1",  # 0.5.9 has no setter
                                      "Gemma3ForConditionalGeneration": "0.5.23"}
    from auditor.render.upgrade_text import matrix_markdown

    assert "| SGLang | DeepseekV3ForCausalLM |" in matrix_markdown(report)


def test_gate_on_sglang_paths(tmp_path):
    res = cli("gate", "--model", "LlamaForCausalLM", "--candidate-version", MINI, "--no-cache", "--no-progress", "-f", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["candidate"]["engine"] == "sglang" and doc["outcome"] == "native"


# -- fix on SGLang trees --------------------------------------------------------------------------

def _tree_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "sglang").rglob("*.py"))}


def test_fix_sglang_apply_rescan_refix_and_revert(tmp_path):
    """minisglang's Gemma3 wrapper: the setter delegates to the language model, whose class gets the
    setter, flag and forward of the tree's donor (LlamaForCausalLM, default layers [2, 3]) and whose
    inner model gets the capture; applied, the tree re-scans supported, a second fix is empty, and
    --revert restores every byte."""
    tree = tmp_path / "t"
    shutil.copytree(MINI, tree)
    before = _tree_files(tree)
    dry = cli("fix", tree, "--model", "Gemma3ForConditionalGeneration", "--no-cache", "--no-progress")
    assert dry.returncode == 0, dry.stderr
    assert "(as in LlamaForCausalLM)" in dry.stderr and "SGLang 0.0.1" in dry.stderr
    diff = dry.stdout
    assert diff.startswith("--- a/sglang/srt/models/gemma3_causal.py")
    for line in ("+        self.language_model.set_eagle3_layers_to_capture(layer_ids)",
                 "+            self.model.layers_to_capture = [2, 3]",
                 "+            self.model.layers_to_capture = [val + 1 for val in layer_ids]",
                 "+        for idx, layer in enumerate(self.layers):",
                 "+                aux_hidden_states.append(hidden_states)",
                 "+            return hidden_states, aux_hidden_states",
                 "+        self.capture_aux_hidden_states = False",
                 "+            hidden_states, aux_hidden_states = hidden_states"):
        assert line in diff.splitlines(), line
    assert _tree_files(tree) == before  # a dry run writes nothing
    res = cli("fix", tree, "--model", "Gemma3ForConditionalGeneration", "--apply", "--no-cache", "--no-progress")
    assert res.returncode == 0, res.stderr
    changed = {p for p, data in _tree_files(tree).items() if before[p] != data}
    assert changed == {"sglang/srt/models/gemma3_causal.py", "sglang/srt/models/gemma3_mm.py"}
    for p in changed:
        ast.parse((tree / p).read_text())
    a = _auditor(tree)
    for arch in ("Gemma3ForConditionalGeneration", "Gemma3ForCausalLM"):
        assert _audit(a, arch).verdict.value == "supported", arch
    assert _audit(a, "LlamaForCausalLM").verdict.value == "supported"  # the donor is untouched
    again = cli("fix", tree, "--model", "Gemma3ForConditionalGeneration", "--no-cache", "--no-progress")
    assert again.returncode == 0 and again.stdout == "" and "already supported" in again.stderr
    back = cli("fix", "--revert", tree)
    assert back.returncode == 0, back.stderr
    assert _tree_files(tree) == before


def test_fix_sglang_without_a_donor_says_what_is_missing(tmp_path):
    """With no model of the tree in the plain pattern to copy (LlamaForCausalLM's default layer
    choice made a call), nothing is guessed: exit 1, the reason names the donors tried, nothing
    written."""
    tree = tmp_path / "t"
    shutil.copytree(MINI, tree)
    llama = tree / "sglang/srt/models/llama.py"
    llama.write_text(llama.read_text().replace("self.model.layers_to_capture = [2, 3]",
                                               "self.model.layers_to_capture = default_layers(self.config)"))
    before = _tree_files(tree)
    res = cli("fix", tree, "--model", "Gemma3ForConditionalGeneration", "--apply", "--no-cache", "--no-progress")
    assert res.returncode == 1, res.stderr
    said = " ".join(res.stderr.split())  # the report wraps at the terminal's width, where the tmp path puts it
    assert "no model of this tree to copy the EAGLE-3 setter from" in said
    assert "none of the 5 models of this tree that define the setter has the plain pattern" in said
    assert "nothing was written" in said
    assert _tree_files(tree) == before


def test_fix_sglang_refuses_a_forward_it_cannot_read(tmp_path):
    """A wrapper whose forward reaches past the language model (to its inner model) would get the
    tuple unpacked nowhere: the delegation is refused with the reason."""
    tree = tmp_path / "t"
    shutil.copytree(MINI, tree)
    mm = tree / "sglang/srt/models/gemma3_mm.py"
    mm.write_text(mm.read_text().replace("return self.language_model(input_ids, positions, forward_batch)",
                                         "return self.language_model.model(input_ids, positions)"))
    res = cli("fix", tree, "--model", "Gemma3ForConditionalGeneration", "--no-cache", "--no-progress")
    assert res.returncode == 1
    assert "Gemma3ForConditionalGeneration.forward reaches self.language_model.model itself" in " ".join(
        res.stderr.split())  # however the report wraps


_HEAD = """class M(nn.Module):
    def __init__(self):
        self.layers = make_layers(4)

    def forward(self, x):
        hidden_states = x
"""


@pytest.mark.parametrize("body,reason", [
    ("        while self.layers:\n            hidden_states = self.layers.pop()(hidden_states)\n"
     "        return hidden_states\n", "has no loop over its decoder layers"),
    ("        for layer, norm in zip(self.layers, self.norms):\n            hidden_states = layer(hidden_states)\n"
     "        return hidden_states\n", "is not one the codemod can index"),
    ("        for layer in self.layers:\n            out = layer(hidden_states)\n            x = out\n"
     "        return hidden_states\n", "cannot tell which variables carry the hidden state"),
    ("        aux = []\n        for i in range(4):\n            if i in self.layers_to_capture:\n"
     "                aux.append(hidden_states)\n            hidden_states = self.layers[i](hidden_states)\n"
     "        for layer in self.layers:\n            hidden_states = layer(hidden_states)\n"
     "        return hidden_states, aux\n", "some of its layer loops capture"),
])
def test_sglang_capture_codemod_refuses_unclear_loops(body, reason):
    with pytest.raises(NotAutoFixable, match=reason):
        run_codemod("sglang-aux-capture", _HEAD + body, {"class": "M", "capture_attr": "layers_to_capture"})


_WRAP = """class W(nn.Module):
    def __init__(self, config):
        self.config = config
        self.model = M(config)

    def forward(self, input_ids, positions, forward_batch):
{body}"""


@pytest.mark.parametrize("body,reason", [
    ("        h = self.model(input_ids)\n        h = self.model(h)\n"
     "        return self.logits_processor(input_ids, h, self.lm_head, forward_batch)\n", "more than one plain assignment"),
    ("        if positions is None:\n            h = self.model(input_ids)\n"
     "        return self.logits_processor(input_ids, h, self.lm_head, forward_batch)\n", "no plain assignment"),
    ("        h = self.model(input_ids)\n        return self.logits_processor(input_ids, h, forward_batch)\n",
     "with 3 positional arguments"),
    ("        h = self.model(input_ids)\n        return self.pooler(h, forward_batch)\n", "never hands h to"),
])
def test_sglang_setter_codemod_refuses_an_unclear_forward(body, reason):
    ex = SGLangInterfaceCodemod.EXAMPLES[0]
    with pytest.raises(NotAutoFixable, match=reason):
        run_codemod("sglang-interface", _WRAP.format(body=body), dict(ex.params, **{"class": "W"}))


@pytest.mark.parametrize("change", [
    {"guard": "os.system('id') or self.pp_group"}, {"attr": "model; import os"},
    {"shape": {**SGLangInterfaceCodemod.EXAMPLES[0].params["shape"], "default": [["const", 10 ** 9]]}},
    {"shape": {**SGLangInterfaceCodemod.EXAMPLES[0].params["shape"], "default": [["**", 2]]}},
    {"shape": {**SGLangInterfaceCodemod.EXAMPLES[0].params["shape"], "num_layers": ["config", "n()"]}},
])
def test_sglang_setter_codemod_writes_only_names_and_small_numbers(change):
    """Replayed parameters are never pasted: a guard outside the two known texts, a name that is not
    an identifier, a layer number that is not a small integer, an unknown operator are refused."""
    ex = SGLangInterfaceCodemod.EXAMPLES[0]
    with pytest.raises(NotAutoFixable):
        run_codemod("sglang-interface", ex.before, {**ex.params, **change})


def _extract_sglang(archive: Path, dest: Path) -> Path:
    """The sdist's ``sglang/`` package and PKG-INFO, extracted as a folder tree (the test's copy to patch)."""
    with tarfile.open(archive) as tar:
        top = tar.getnames()[0].split("/")[0]
        members = [m for m in tar.getmembers()
                   if m.name.startswith(f"{top}/sglang/") or m.name == f"{top}/PKG-INFO"]
        tar.extractall(dest, members=members, filter="data")
    return dest / top


def test_fix_gemma3_on_sglang_0_5_10_post1(tmp_path):
    """The acceptance case on the real sdist: Gemma3ForConditionalGeneration is blocked (interface,
    aux-capture); the plan delegates the setter to Gemma3ForCausalLM, gives it the setter of the
    tree's donors (layers [2, n // 2, n - 3], ids + 1), the flag and the forward that hands the aux
    states to the logits processor, and makes Gemma3TextModel.forward capture in both its layer
    loops (CPU and GPU branches); the EAGLE worker's get_embed_and_head is delegated by the wrapper
    and implemented on Gemma3ForCausalLM as the tree's donors write it. Applied to an extracted copy,
    the tree re-scans supported, the patched files parse, and a second fix is empty."""
    a = release_auditor("0.5.10.post1", "sglang")
    (spec,) = resolve_targets(a.registry, ["Gemma3ForConditionalGeneration"])
    res = plan_fix(a, [spec], "eagle3")
    assert res.ok and res.engine == "sglang", fix_report(res)
    assert [r.blocking for r in res.before] == [["interface", "aux-capture"]]
    assert [r.verdict.value for r in res.after] == ["supported"]
    assert sorted(res.patched) == ["sglang/srt/models/gemma3_causal.py", "sglang/srt/models/gemma3_mm.py"]
    assert [(i.codemod, i.params["class"]) for i in res.invocations] == [
        ("sglang-interface", "Gemma3ForConditionalGeneration"), ("sglang-interface", "Gemma3ForCausalLM"),
        ("sglang-aux-capture", "Gemma3TextModel")]
    for text in res.patched.values():
        ast.parse(text)
        libcst.parse_module(text)
    diff = res.diff().splitlines()
    assert diff.count("+            for idx, layer in enumerate(self.layers):") == 2  # both platform branches
    assert "+            self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]" in diff
    assert "+            num_layers = self.config.num_hidden_layers" in diff
    assert "+        self.language_model.set_eagle3_layers_to_capture(layer_ids)" in diff
    # the EAGLE worker's get_embed_and_head (eagle_worker.py:158): delegated, and in the donors' shape
    assert "+        return self.language_model.get_embed_and_head()" in diff
    assert "+        return self.model.embed_tokens.weight, self.lm_head.weight" in diff
    for path, cls in (("sglang/srt/models/gemma3_mm.py", "Gemma3ForConditionalGeneration"),
                      ("sglang/srt/models/gemma3_causal.py", "Gemma3ForCausalLM")):
        tree = ast.parse(res.patched[path])
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        assert "get_embed_and_head" in [m.name for m in node.body if isinstance(m, ast.FunctionDef)], cls
    # applied to an extracted copy with the CLI, re-scanned from disk, fixed again: nothing left to do
    root = _extract_sglang(fetch.fetch_release("0.5.10.post1", progress=False, project="sglang"), tmp_path)
    out = cli("fix", root, "--model", "Gemma3ForConditionalGeneration", "--apply", "--no-progress")
    assert out.returncode == 0, out.stderr
    for p, text in res.patched.items():
        assert (root / p).read_text() == text
    b = _auditor(root)
    assert _audit(b, "Gemma3ForConditionalGeneration").verdict.value == "supported"
    assert _audit(b, "Gemma3ForCausalLM").verdict.value == "supported"
    again = cli("fix", root, "--model", "Gemma3ForConditionalGeneration", "--no-progress")
    assert again.returncode == 0 and again.stdout == ""


def test_fix_plans_on_sglang_0_5_23_wheel_read_in_place():
    """The wheel is read in place (nothing extracted): GraniteForCausalLM gets a validated patch (its
    setter and forward, get_embed_and_head as the tree's donors write it, GraniteModel's capture);
    Gemma2ForCausalLM ties its head to the embedding (no self.lm_head), so no donor's
    get_embed_and_head fits it: refused with that reason; GPT2's inner model iterates self.h, which
    is no layer loop the codemod can read: refused with that reason. No file is patched for those."""
    a = release_auditor("0.5.23", "sglang")
    (granite,) = resolve_targets(a.registry, ["GraniteForCausalLM"])
    res = plan_fix(a, [granite], "eagle3")
    assert res.ok and [r.verdict.value for r in res.after] == ["supported"], fix_report(res)
    assert [(i.codemod, i.params["class"]) for i in res.invocations] == [
        ("sglang-interface", "GraniteForCausalLM"), ("sglang-aux-capture", "GraniteModel")]
    assert res.invocations[0].params["getters"][0]["donor"] == "ApertusForCausalLM"
    assert "+        return self.model.embed_tokens.weight, self.lm_head.weight" in res.diff().splitlines()
    (gemma2,) = resolve_targets(a.registry, ["Gemma2ForCausalLM"])
    res = plan_fix(a, [gemma2], "eagle3")
    assert not res.ok
    assert [(u.gate, u.reason) for u in res.unfixable] == [
        ("interface", "the donor ApertusForCausalLM.get_embed_and_head returns self.lm_head.weight, and no __init__ on "
                      "Gemma2ForCausalLM's MRO sets self.lm_head (nor do the other 3 shapes of the tree's donors fit)")]
    (gpt2,) = resolve_targets(a.registry, ["GPT2LMHeadModel"])
    res = plan_fix(a, [gpt2], "eagle3")
    assert not res.ok
    assert ("aux-capture", "GPT2Model.forward has no loop over its decoder layers") in [
        (u.gate, u.reason) for u in res.unfixable]


# -- hostile SGLang trees ---------------------------------------------------------------------------

_LOOP = '''
import torch.nn as nn


class LoopA(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.model = LoopB(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.model.set_eagle3_layers_to_capture(layer_ids)


class LoopB(nn.Module):
    def __init__(self, config=None):
        super().__init__()
        self.model = LoopA(config)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.model.set_eagle3_layers_to_capture(layer_ids)


EntryClass = [LoopA, Missing, 42]
'''


def test_hostile_entryclass_and_delegation_cycle(tmp_path):
    """A setter chain that loops, an EntryClass naming an unbound name and a constant: verdicts say
    unknown with the reason; nothing crashes, nothing is imported."""
    tree = tmp_path / "t"
    shutil.copytree(MINI, tree)
    (tree / "sglang/srt/models/loop.py").write_text(_LOOP)
    (tree / "sglang/srt/models/broken.py").write_text("EntryClass = [\n")  # does not parse
    a = _auditor(tree)
    assert ("sglang/srt/models/loop.py", "EntryClass (line 23) is not a class or a list of classes") in a.registry.problems
    assert any(p == "sglang/srt/models/broken.py" for p, _ in a.registry.problems)
    # the constant 42 in the list stops SGLang's registry at start-up (it reads each item's
    # __name__): every target is unknown for that reason
    loop = _audit(a, "LoopA")
    assert loop.verdict.value == "unknown" and any("holds a constant" in f.message for f in loop.findings)
    # without it: the looping setter chain and the unbound name, each for its own target
    (tree / "sglang/srt/models/loop.py").write_text(_LOOP.replace("EntryClass = [LoopA, Missing, 42]",
                                                                   "EntryClass = [LoopA, Missing]"))
    a = _auditor(tree)
    loop = _audit(a, "LoopA")
    assert loop.verdict.value == "unknown" and any("too deep" in f.message for f in loop.findings)
    missing = _audit(a, "Missing")
    assert missing.verdict.value == "unknown" and "Missing is not bound" in missing.findings[0].message
    res = cli("scan", tree, "--no-cache", "--no-progress", "-f", "json")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert json.loads(res.stdout)["summary"]["unknown"] == 2


# -- NextN/MTP draft mapping --------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["0.5.10.post1", "0.5.23"])
def test_mtp_draft_mapping_on_real_releases(version):
    a = release_auditor(version, "sglang")
    ds = _audit_method(a, "DeepseekV3ForCausalLM", "mtp")
    assert ds.verdict.value == "supported", [f.message for f in ds.findings]
    llama = _audit_method(a, "LlamaForCausalLM", "mtp")
    assert llama.verdict.value == "blocked" and llama.blocking == ["mtp-draft"]
    (f,) = llama.findings
    assert f.path == "sglang/srt/models/llama.py" and "no branch for LlamaForCausalLM" in f.message


def test_mtp_without_a_rewrite_is_unknown():
    r = _audit_method(_auditor(), "DeepseekV3ForCausalLM", "mtp")
    assert r.verdict.value == "unknown" and "no draft-architecture rewrite" in r.findings[0].message


def _audit_method(a: Auditor, arch: str, method: str):
    (spec,) = resolve_targets(a.registry, [arch])
    return a.audit(spec, method)
