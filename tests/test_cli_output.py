"""What the command line prints, as a user reads it (issue 12, output and command behaviour): the
scan table at 80 columns and piped, stderr in a log, counts, the next step after a blocked scan,
gates not evaluated for a run, the ``gate`` wording, ``fix --method eagle``, roles, and where
``fix --apply`` keeps its backup. Every command runs as a subprocess on real releases (fetched
through pip's index and cached) or on the synthetic minivllm tree."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import MINIVLLM
from real import REPO
from test_fix import extract

from auditor.model.wording import count


def run(*args, columns: int | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """``eagle-audit ARGS`` with stdout and stderr piped (``COLUMNS`` set when given)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS", "TTY_INTERACTIVE")}
    env["NO_COLOR"] = "1"
    if columns:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


def target_blocks(text: str) -> list[list[str]]:
    """The block per target that ``scan`` prints when its table would not fit (issue 21, ux3b):
    per block ``[architecture, role, method, verdict, blocking gates joined with a space or —]``
    (the role ``target`` unless the heading names another), from its heading line
    (``ARCH (role): method, verdict``) and its ``  gate: file:line`` lines (a gate whose label has
    no ``(severity)`` is a blocking one)."""
    out: list[list[str]] = []
    for line in text.splitlines():
        m = re.fullmatch(r"(\S+?)(?: \((\w+)\))?: (\w+), (.+)", line)
        if m:
            out.append([m.group(1), m.group(2) or "target", m.group(3), m.group(4), []])
            continue
        g = re.fullmatch(r"  ([\w-]+): \S+", line)
        if g and out:
            out[-1][4].append(g.group(1))
    return [[a, role, m, v, " ".join(gates) or "—"] for a, role, m, v, gates in out]


def table_rows(text: str) -> list[list[str]]:
    """The rows of the first rich table in ``text``: each row's cells, the lines of a folded or
    stacked cell joined (architecture names are joined without a space, gates with a space)."""
    rows: list[list[list[str]]] = []
    for line in text.splitlines():
        if not line.startswith("│"):
            if rows and line.startswith("└"):
                break
            continue
        cells = [c.strip() for c in line.strip("│").split("│")]
        if cells[0] and (not rows or cells[2]):  # a new row starts with its architecture and method
            rows.append([[c] if c else [] for c in cells])
        else:
            for acc, c in zip(rows[-1], cells):
                if c:
                    acc.append(c)
    return [["".join(c[:1] + c[1:]) if i == 0 else " ".join(c) for i, c in enumerate(r)] for r in rows]


@pytest.fixture(scope="module")
def full033() -> SimpleNamespace:
    """The full scan of vLLM 0.33.0, run once: at 80 columns, piped at the default width, and JSON."""
    jobs = {"narrow": (("scan", "--vllm-version", "0.33.0", "--no-progress"), 80),
            "piped": (("scan", "--vllm-version", "0.33.0", "--no-progress"), None),
            "json": (("scan", "--vllm-version", "0.33.0", "--no-progress", "-f", "json"), None)}
    with ThreadPoolExecutor(3) as pool:
        futs = {k: pool.submit(run, *a, columns=c) for k, (a, c) in jobs.items()}
        out = SimpleNamespace(**{k: f.result() for k, f in futs.items()})
    out.doc = json.loads(out.json.stdout)
    return out


def scan_json(*args) -> dict:
    p = run("scan", *args, "-f", "json", "--no-progress")
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


# -- 1. the table: readable at 80 columns and piped -----------------------------------------


def test_full_scan_table_at_80_columns_keeps_method_verdict_and_gates_whole(full033):
    p, doc = full033.narrow, full033.doc
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    # a table with every file:line does not fit in 80 columns: a block per target (ux3b)
    assert not [ln for ln in lines if ln and ln[0] in "┏┃┡│└"]
    assert max(len(ln) for ln in lines[:lines.index("")]) <= 80
    assert "…" not in p.stdout and not any(ln.endswith(" ") for ln in lines)
    rows = target_blocks(p.stdout[:p.stdout.index("\n\n")])
    expected = {(r["architecture"], r["method"], r["verdict"], " ".join(r["blocking"]) or "—")
                for r in doc["results"] if r["role"] == "target" and r["verdict"] != "supported"}
    assert len(expected) > 150
    assert {(r[0], r[2], r[3], r[4]) for r in rows} == expected
    # each finding's file:line is in its target's block, then under the blocks with its message
    blocked = next(r for r in doc["results"] if r["verdict"] == "blocked")
    f = blocked["findings"][0]
    assert f"  {f['rule']} {f['gate']} {f['severity']} {f['path']}:{f['line']} (fix available)" in lines


def test_piped_scan_is_neither_padded_nor_wrapped(full033):
    p, doc = full033.piped, full033.doc
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert not any(ln.endswith(" ") for ln in lines)
    assert max(len(ln) for ln in lines if ln[:1] in "┏┃┡│└") <= 160
    assert "…" not in p.stdout
    messages = [f["message"] for r in doc["results"] if r["role"] == "target" for f in r["findings"]
                if f["severity"] != "warning"]
    assert max(map(len, messages)) > 160  # long details stay long, on one line each
    for m in messages:
        assert f"    {m}" in lines
    summary = [ln for ln in lines if ln.startswith("supported (")]
    assert len(summary) == 1 and summary[0].endswith("VaultGemmaForCausalLM")


def test_a_few_targets_piped_show_where_in_the_table():
    p = run("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2", "--no-progress")
    rows = table_rows(p.stdout)
    assert [r[:4] for r in rows] == [
        ["DeepseekV3ForCausalLM", "eagle3", "blocked", "allowlist interface aux-capture"],
        ["KimiK25ForConditionalGeneration", "eagle3", "blocked", "allowlist interface aux-capture image-token"]]
    # each location on the line of its gate: the gate is not named again (issue 21)
    assert rows[1][4].split(" ")[-1] == "vllm/v1/spec_decode/eagle.py:1366" and "image-token" not in rows[1][4]
    assert not any(ln.endswith(" ") for ln in p.stdout.splitlines())


# -- 2. stderr in a log is not hard-wrapped; with COLUMNS it is (one rule, issue 21) ---------------


def test_stderr_lines_are_not_wrapped_in_a_log_and_wrapped_at_columns():
    p = run("fix", "--vllm-version", "0.16.0", "-m", "kimi_k2", "--method", "eagle", "--no-progress")
    assert p.returncode == 0, p.stderr
    err = p.stderr.splitlines()
    assert re.fullmatch(r"1 file changed, 4 insertions\(\+\), 0 deletions\(-\) \(checked: re-scan gives "
                        r"supported; [0-9.]+s; not run by the engine: fix --apply --verify runs it\)", err[-1]), err[-1]
    long = [ln for ln in err if len(ln) > 80]
    assert any(ln.startswith("not evaluated for this run") for ln in long)
    narrow = run("fix", "--vllm-version", "0.16.0", "-m", "kimi_k2", "--method", "eagle", "--no-progress",
                 columns=80)
    assert narrow.returncode == 0, narrow.stderr
    assert all(len(ln) <= 80 or len(ln.split()) == 1 for ln in narrow.stderr.splitlines()), narrow.stderr
    assert " ".join(narrow.stderr.split()) == " ".join(p.stderr.split()).replace(
        re.search(r"[0-9.]+s; not run", p.stderr).group(), re.search(r"[0-9.]+s; not run", narrow.stderr).group())


# -- 3. counts agree with their nouns --------------------------------------------------------


def test_counts_agree_with_their_nouns():
    assert [count(n, "result") for n in (0, 1, 2)] == ["0 results", "1 result", "2 results"]
    assert count(1, "pooling model") == "1 pooling model" and count(1, "deletion") == "1 deletion"
    p = run("scan", "--vllm-version", "0.16.0", "-m", "LlamaForCausalLM", "-m", "EagleLlamaForCausalLM",
            "--no-progress")
    assert "1 target: 1 supported, 0 blocked, 0 unknown; 1 drafter and 0 pooling models not audited" in p.stdout
    p2 = run("scan", "--vllm-version", "0.16.0", "-m", "LlamaForCausalLM", "--method", "all", "--no-progress")
    assert "1 target (3 results):" in p2.stdout
    for out in (p.stdout, p.stderr, p2.stdout, p2.stderr):
        assert "(s)" not in out and not re.search(r"\b1 (targets|results|drafters|files|insertions|deletions)\b", out)


# -- 4. the next step after a blocked scan ---------------------------------------------------


def test_a_blocked_scan_prints_the_exact_fix_command(tmp_path, full033):
    p = run("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2", "-m", "LlamaForCausalLM", "--no-progress")
    assert p.returncode == 1
    step = [ln for ln in p.stderr.splitlines() if ln.startswith("next step")]
    assert len(step) == 1
    assert "(2 blocked targets with a fix available): eagle-audit fix --vllm-version 0.16.0 --model kimi_k2 " \
           "--method eagle3  (" in step[0]
    argv = shlex.split(step[0].split(": ", 1)[1].split("  (")[0])
    fixed = run(*argv[1:], "--out-dir", tmp_path, "--no-progress")  # the command works as printed
    assert fixed.returncode == 0, fixed.stderr
    assert "-> supported after the patch" in fixed.stderr
    # a tree given as a PATH is named as given; CI formats keep stderr for errors
    p = run("scan", MINIVLLM, "-m", "ToyV3ForCausalLM", "--model-type", "toy", "--no-progress")
    assert f"eagle-audit fix {MINIVLLM} --model ToyV3ForCausalLM --model-type toy --method eagle3" in p.stderr
    for fmt in ("json", "sarif", "junit"):
        p = run("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2", "-f", fmt, "--no-progress")
        assert p.returncode == 1 and "next step" not in p.stderr + p.stdout
    # a full scan names no 129 targets one by one
    assert "next step" not in full033.json.stderr
    p = full033.piped
    # 102 before issue 19: MistralModel.forward's super().forward(...) is followed to LlamaModel's capture
    # (Mistral, Ministral3, Mistral3 blocked -> supported on 0.33.0); 100 -> 113 with the embed-sharing
    # codemod (issue 17): the text targets whose embed_input_ids path is plain (GPT-2, Falcon, BLOOM, ...);
    # 113 -> 112 when embed-sharing follows the Transformers backend's inner model into transformers:
    # InternLM2's inner model is a class handed in as a parameter, so that gate is unknown
    assert ("next step (112 blocked targets with a fix available; name one or several with --model): "
            "eagle-audit fix --vllm-version 0.33.0 --model ARCHITECTURE --method eagle3") in p.stderr


# -- 5. gates not evaluated for the run are not reported as passing ------------------------


def test_gates_not_evaluated_are_skipped_in_junit_and_marked_in_json():
    p = run("scan", "--vllm-version", "0.16.0", "-m", "kimi_k2", "--method", "eagle", "-f", "junit", "--no-progress")
    cases = {(c.get("classname"), c.get("name")): c for c in ET.fromstring(p.stdout).iter("testcase")}
    kimi = "KimiK25ForConditionalGeneration"
    assert cases[(kimi, "image-token")].find("failure") is not None
    skipped = cases[(kimi, "draft-registry")].find("skipped")
    assert skipped is not None and "--draft-config" in skipped.get("message")
    assert "applies to eagle3" in cases[(kimi, "allowlist")].find("skipped").get("message")
    assert cases[("DeepseekV3ForCausalLM", "image-token")].find("skipped") is None  # evaluated, and passed
    doc = scan_json("--vllm-version", "0.16.0", "-m", "kimi_k2", "--method", "eagle")
    gates = {g["gate"]: g["reason"] for g in doc["results"][0]["not_evaluated"]}
    assert gates["draft-registry"] == "needs --draft-config with the drafter checkpoint's config"
    assert gates["allowlist"] == "applies to eagle3, not eagle"
    assert "image-token" not in gates


# -- 6. gate: absent targets, a locally patched tree, regressions --------------------------


def _site_packages(tmp_path: Path) -> Path:
    """An installed-looking vLLM 0.16.0: ``site-packages/vllm`` and its dist-info."""
    root = extract("0.16.0", tmp_path / "x")
    site = tmp_path / "site-packages"
    site.mkdir()
    shutil.move(root / "vllm", site / "vllm")
    info = site / "vllm-0.16.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.16.0\n")
    return site


def test_fix_apply_on_site_packages_keeps_the_backup_in_the_tree_and_gate_words_the_patched_tree(tmp_path):
    site = _site_packages(tmp_path)
    pkg = site / "vllm"
    before = sorted(os.listdir(site))
    p = run("fix", pkg, "-m", "kimi_k2", "--apply", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(site)) == before  # nothing written in site-packages/ itself
    assert (pkg / ".eagle-audit-backup" / "1" / "manifest.json").is_file()
    revert = re.search(r"undo with: (eagle-audit fix --revert .+)$", p.stderr, re.M).group(1)
    assert shlex.split(revert)[3:] == [str(pkg)]
    # the backup inside vllm/ is no module of the tree: the patched tree scans as supported
    scan = scan_json(pkg, "-m", "kimi_k2")
    assert [r["verdict"] for r in scan["results"]] == ["supported", "supported"]
    # gate on the patched tree: the release is not said to support anything natively
    g = run("gate", "--candidate-version", pkg, "--current-version", "0.16.0", "-m", "kimi_k2", "--no-progress")
    assert g.returncode == 0, g.stderr
    assert "natively" not in g.stdout and "patched locally by eagle-audit fix --apply" in g.stdout
    row = next(line for line in g.stdout.splitlines() if line.startswith("│ DeepseekV3ForCausalLM"))
    assert [c.strip() for c in row.strip("│").split("│")] == ["DeepseekV3ForCausalLM", "eagle3", "blocked",
                                                              "supported", "as is"]  # no codemods column
    assert "as is (a locally patched tree)" in g.stdout  # the title says what the cells say
    doc = json.loads(run("gate", "--candidate-version", pkg, "-m", "kimi_k2", "-f", "json", "--no-progress").stdout)
    assert doc["candidate"]["local"] and doc["candidate"]["patched_locally"]
    # the release against the patched tree: the regression is marked on the candidate's side
    g = run("gate", "--candidate-version", "0.16.0", "--current-version", pkg, "-m", "kimi_k2", "--no-progress")
    assert g.returncode == 1
    cells = next(r for r in table_rows(g.stdout) if r[0] == "DeepseekV3ForCausalLM")
    assert cells[2] == "supported" and cells[3].startswith("blocked ") and cells[3].endswith(" regression")
    assert "supported by the tree " in g.stdout and "blocked in the release vLLM 0.16.0" in g.stdout
    # the printed revert command restores every file and removes the backup
    r = run(*shlex.split(revert)[1:])
    assert r.returncode == 0, r.stderr
    assert "restored 4 files from" in r.stderr
    assert not (pkg / ".eagle-audit-backup").exists()
    assert not (pkg / ".eagle-audit.lock").exists() and not (site / ".eagle-audit.lock").exists()  # the tool's own lock
    assert sorted(os.listdir(site)) == before


def test_gate_reports_a_codemods_target_absent_from_the_candidate(tmp_path):
    p = run("fix", "--vllm-version", "0.16.0", "-m", "DeepseekV3ForCausalLM", "--out-dir", tmp_path, "--no-progress")
    assert p.returncode == 0, p.stderr
    cm = tmp_path / "DeepseekV3ForCausalLM.vllm-0.16.0.eagle3.codemods.json"
    doc = json.loads(cm.read_text())
    doc["targets"].append({"architecture": "GoneForCausalLM"})
    cm.write_text(json.dumps(doc))
    g = run("gate", "--candidate-version", "0.16.0", "--codemods", cm, "-f", "json", "--no-progress")
    assert g.returncode == 1
    out = json.loads(g.stdout)
    assert out["outcome"] == "broken"
    gone = next(t for t in out["targets"] if t["architecture"] == "GoneForCausalLM")
    assert gone["candidate_verdict"] == "absent" and gone["problems"][0]["gate"] == "registry"


# -- 7. fix --method eagle -------------------------------------------------------------------


def test_fix_eagle_says_what_is_already_supported_and_lists_only_its_gates():
    p = run("fix", "--vllm-version", "0.16.0", "-m", "kimi_k2", "--method", "eagle", "--no-progress")
    assert p.returncode == 0, p.stderr
    err = p.stderr
    assert "  DeepseekV3ForCausalLM: already supported, nothing to patch" in err
    assert "  KimiK25ForConditionalGeneration: blocked (image-token) -> supported after the patch" in err
    assert "supported -> supported" not in err
    assert "scope: the patch makes the gates evaluated for this run pass (image-token, embed-sharing, platform-spec-decode, platform-block-size), as re-scanned" in err
    skipped = next(ln for ln in err.splitlines() if ln.startswith("not evaluated for this run"))
    for gate in ("draft-pp", "draft-registry", "parallel-drafting-mm"):
        assert f"{gate} (needs --" in skipped
    for gate in ("allowlist", "interface", "aux-capture", "aux-layers", "pp-aux-transport", "mtp-draft"):
        assert gate not in err  # eagle3's and mtp's gates are no part of an eagle run


# -- 8. roles in the table and the summary ---------------------------------------------------


def test_drafters_and_pooling_models_show_their_role(full033):
    p = run("scan", "--vllm-version", "0.16.0", "-m", "LlamaForCausalLM", "-m", "EagleLlamaForCausalLM",
            "--no-progress", columns=80)
    rows = target_blocks(p.stdout)  # at 80 columns, a block per target (ux3b)
    assert [r[:4] for r in rows] == [["LlamaForCausalLM", "target", "eagle3", "supported"],
                                     ["EagleLlamaForCausalLM", "drafter", "eagle3", "not audited"]]
    wide = run("scan", "--vllm-version", "0.16.0", "-m", "LlamaForCausalLM", "-m", "EagleLlamaForCausalLM",
               "--no-progress", columns=160)
    assert [r[:4] for r in table_rows(wide.stdout)] == [r[:4] for r in rows]
    full = full033.piped
    # issue 19: Mistral, Ministral3 and Mistral3 blocked -> supported (MistralModel.forward's
    # super().forward(...) reaches LlamaModel's capture); issue 17's sweep: GPT-BigCode and GPT-NeoX
    # (Transformers backend; transformers' models hold .wte / .embed_in) supported -> blocked by
    # embed-sharing, and the generic Transformers classes and Nanbeige supported -> unknown
    assert re.search(r"^278 targets: 85 supported, 185 blocked, 8 unknown; 70 drafters and 67 pooling models "
                     r"not audited$", full.stdout, re.M)


# -- 9. fix --out names ----------------------------------------------------------------------


def test_fix_out_of_two_releases_writes_four_files(tmp_path):
    for v in ("0.16.0", "0.17.1"):
        p = run("fix", "--vllm-version", v, "-m", "kimi_k2", "--out-dir", tmp_path, "--no-progress")
        assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == [
        "kimi_k2.vllm-0.16.0.eagle3.codemods.json", "kimi_k2.vllm-0.16.0.eagle3.patch",
        "kimi_k2.vllm-0.17.1.eagle3.codemods.json", "kimi_k2.vllm-0.17.1.eagle3.patch"]
    doc = json.loads((tmp_path / "kimi_k2.vllm-0.17.1.eagle3.codemods.json").read_text())
    assert doc["source"]["label"] == "vLLM 0.17.1" and "/" not in doc["source"]["label"]
    assert {t["text_model_type"] for t in doc["targets"]} == {"kimi_k2"}
