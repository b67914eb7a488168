"""What a new user still found after the ux3b round (the ux4 leftovers), each item checked as the
user meets it: ``eagle-audit`` run as a subprocess (piped, ``COLUMNS=80``, no colour), or the
function that renders what it prints, on synthetic trees (``fixtures/minivllm``,
``fixtures/minisglang``, with files laid over them by the tests)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from real import REPO

from auditor.model.findings import Severity
from rules.base import Example, Rule


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "FORCE_COLOR")}
    env.update(NO_COLOR="1", COLUMNS="80")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")  # this checkout's code
    env.update(extra)
    return env


def piped(*args, cwd: Path = REPO, **extra: str) -> subprocess.CompletedProcess:
    """``eagle-audit ARGS`` with stdout and stderr piped, ``COLUMNS=80``, no colour."""
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=_env(**extra))


# -- 1. rules CODE: an example's files that the rule's earlier examples showed are not repeated ---

_SHARED = {f"vllm/shared_{n}.py": f'"""Shared file {n} (synthetic)."""\n\n\ndef helper_{n}():\n    return {n}\n'
           for n in range(3)}
_LONG = "\n".join(f"X_{n} = {n}" for n in range(12)) + "\n"


class _RepeatingRule(Rule):
    """A rule whose examples repeat files: all of them, some of them, or one with a line changed."""

    CODE, GATE, NAME = "EA999", "repeating", "repeating"
    SUMMARY, WHY, HOW_TO_FIX = "a synthetic rule", "for the test", "nothing to fix"
    VALID = [
        Example({**_SHARED, "vllm/long.py": _LONG}, "LlamaForCausalLM", note="first"),
        Example({**_SHARED, "vllm/long.py": _LONG}, "LlamaForCausalLM", note="the same files"),
    ]
    INVALID = [
        Example({**_SHARED, "vllm/long.py": _LONG.replace("X_5 = 5", "X_5 = 55")}, "LlamaForCausalLM",
                expect_severity=Severity.ERROR, note="one line changed"),
        Example({"vllm/shared_0.py": _SHARED["vllm/shared_0.py"], "vllm/long.py": "Y = 1\n"}, "LlamaForCausalLM",
                expect_severity=Severity.ERROR, note="one shared file, another new"),
    ]


def test_rule_details_show_a_repeated_file_once():
    from auditor.render.rules import rule_details_text

    text = rule_details_text([_RepeatingRule])
    sections = re.split(r"\n\n(?=(?:VALID|INVALID) \d+: )", text.rstrip("\n"))
    by_head = {s.split(":")[0]: s for s in sections[1:]}
    assert text.count("def helper_1():") == 1 and text.count("X_11 = 11") == 1  # each source once
    assert by_head["VALID 1"].count("    def helper_") == 3  # shown in full the first time
    assert by_head["VALID 2"].splitlines()[2:] == ["  the 4 files of VALID 1, as shown there"]
    assert by_head["INVALID 1"].splitlines()[2:] == [
        "  vllm/long.py: as in VALID 1, except:",
        "    @@ -5,3 +5,3 @@",
        "     X_4 = 4",
        "    -X_5 = 5",
        "    +X_5 = 55",
        "     X_6 = 6",
        "  the other 3 files of VALID 1, as shown there",
    ]
    assert by_head["INVALID 2"].splitlines()[2:] == [
        "  vllm/long.py:",
        "    Y = 1",
        "  as in VALID 1: vllm/shared_0.py",
    ]


def test_rule_details_markdown_and_json_of_repeated_files():
    from auditor.render.rules import rule_details_json, rule_details_markdown

    md = rule_details_markdown([_RepeatingRule])
    assert md.count("def helper_2():") == 1
    assert "`vllm/long.py`: as in VALID 1, except:\n\n```diff\n@@ -5,3 +5,3 @@\n X_4 = 4\n-X_5 = 5\n+X_5 = 55\n" in md
    assert "\nas in VALID 1: `vllm/shared_0.py`.\n" in md
    assert md.count("the 4 files of VALID 1, as shown there.") == 1
    doc = json.loads(rule_details_json([_RepeatingRule]))  # JSON keeps every example's files whole
    assert [e["files"] for e in doc[0]["examples"]] == [dict(e.files) for e in
                                                        _RepeatingRule.VALID + _RepeatingRule.INVALID]


def test_rules_ea318_prints_its_shared_files_once():
    p = piped("rules", "EA318")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert out.count("class CpuPlatform:") == 1 and out.count("def select_common_block_size") == 1
    assert out.count("  the 7 files of VALID 1, as shown there\n") == 2  # VALID 2, INVALID 1
    assert ("  vllm/platforms/cpu.py: as in VALID 1, except:\n"
            "    @@ -16,3 +16,3 @@\n") in out
    assert "    -        fast = mla and False\n    +        fast = mla and torch.cpu._is_amx_tile_supported()\n" in out
    assert "  the other 6 files of VALID 1, as shown there\n" in out
    assert len(out.splitlines()) < 110  # 275 lines when every example printed its 7 files
    # the examples after VALID 1 run on the CPU platform: said with their run (new-user round 29:
    # VALID 1 and INVALID 1 read the same without it)
    assert "with method eagle3; text model_type deepseek_v3; --platform cpu\n" in out
    assert "with method eagle3; text model_type deepseek_v3\n" in out  # VALID 1: the default platform


# -- 2. did you mean: a mistyped --model is offered targets before pooling and drafter rows -------

_POOLING_ROWS = '''

_EMBEDDING_MODELS = {
    "LlamaModel": ("llama", "LlamaModel"),
    "ToyV2Model": ("toy", "ToyV2ForCausalLM"),
}
'''


def _tree_with_pooling_rows(tmp_path: Path) -> Path:
    """minivllm with a pooling table (``_EMBEDDING_MODELS``: ``LlamaModel``, ``ToyV2Model``) beside
    its generation tables."""
    from conftest import MINIVLLM, make_tree

    reg = "vllm/model_executor/models/registry.py"
    text = (MINIVLLM / reg).read_text().replace("\n_VLLM_MODELS = {\n", _POOLING_ROWS + "\n_VLLM_MODELS = {\n"
                                                "    **_EMBEDDING_MODELS,\n", 1)
    assert "**_EMBEDDING_MODELS" in text
    return make_tree(tmp_path, {reg: text})


def test_close_names_of_a_mistyped_model_prefer_target_rows(tmp_path):
    from conftest import open_auditor

    from auditor.hf.targets import _close

    reg = open_auditor(_tree_with_pooling_rows(tmp_path)).registry
    assert (reg.role("LlamaModel"), reg.role("ToyV2Model"), reg.role("LlamaForCausalLM")) == (
        "pooling", "pooling", "target")
    # the pooling rows were offered first (LlamaModel, ToyV2Model before the targets); now after them
    assert _close("LlamaModl", reg) == "; did you mean: LlamaForCausalLM, LlamaModel?"
    assert _close("ToyV2Modl", reg) == "; did you mean: ToyV2ForCausalLM, ToyV32ForCausalLM, ToyV2Model?"
    assert _close("llamamodel", reg) == "; did you mean: LlamaModel, LlamaForCausalLM, ToyV2Model?"  # same spelling: first
    # a drafter row one letter away comes after the targets (here: none of the four shown)
    assert _close("Eagle3LlamaForCausalLMM", reg) == (
        "; did you mean: LlamaForCausalLM, ToyV3ForCausalLM, ToyV32ForCausalLM, ToyV2ForCausalLM?")


def test_scan_and_fix_suggest_a_target_for_a_mistyped_model(tmp_path):
    from clitools import one_line_error

    tree = _tree_with_pooling_rows(tmp_path)
    for command in ("scan", "fix"):
        assert one_line_error(piped(command, tree, "--model", "LlamaModl", "--no-config")) == (
            "unknown model 'LlamaModl': not an architecture in this tree's registry nor a known model_type; "
            "did you mean: LlamaForCausalLM, LlamaModel?"), command


# -- 4. explain's JSON names its engine for vLLM too; the README's matrix count ----------------------


def test_explain_json_always_names_the_engine():
    from conftest import MINIVLLM

    minisglang = REPO / "fixtures" / "minisglang"
    for tree, arch, engine in ((MINIVLLM, "LlamaForCausalLM", "vllm"), (MINIVLLM, "ToyV3ForCausalLM", "vllm"),
                               (minisglang, "LlamaForCausalLM", "sglang")):
        p = piped("explain", arch, tree, "--no-config", "-f", "json")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert list(doc)[:2] == ["architecture", "engine"] and doc["engine"] == engine, (tree, arch)
    everything = json.loads(piped("explain", "--all", MINIVLLM, "--no-config", "-f", "json").stdout)
    assert len(everything) > 5 and {d["engine"] for d in everything} == {"vllm"}
    schema = json.loads((REPO / "auditor/model/schemas/outputs/explain.json").read_text())["$defs"]["explained"]
    assert schema["required"] == ["architecture", "engine"] and schema["properties"]["engine"]["enum"] == [
        "vllm", "sglang"]


def test_the_readme_matrix_plan_is_what_matrix_says_for_its_range(capsys):
    """The README quotes the message ``matrix`` prints before it downloads, for a range it names:
    the count, the span and the size must be those of the index for that range (it said 26
    releases for the open range ``0.16.0..``, which had grown past that)."""
    import re as _re

    from auditor.cli.nextsteps import say_fetch_plan
    from auditor.orchestration.matrix import FetchPlan, check_spec, parse_versions
    from auditor.orchestration.releases import IndexReleases

    text = " ".join((REPO / "README.md").read_text().split())
    found = _re.search(r"\(`(eagle-audit matrix: \d+ releases to audit [^`]*)`, (?:measured )?for `--versions "
                       r"([^`]+)` with an empty cache\)", text)
    assert found, "the README's matrix plan sentence"
    quoted, spec = found.groups()
    listing = IndexReleases().listing()
    releases = tuple(p.version for p in parse_versions(spec, listing) if p.skip is None)
    say_fetch_plan(FetchPlan(releases, (), releases, sum(listing.size(v) for v in releases)))
    said = " ".join(capsys.readouterr().err.split())
    assert said.startswith(quoted.removesuffix("; …)")), (said, quoted)
    ((_item, bounds),) = check_spec(spec)
    assert bounds is not None and None not in bounds, f"{spec}: a closed range, whose count does not grow"


# -- 5. every command's --help, subcommands included, ends its text with examples ----------------


def _commands():
    """Every command of the command line as the words that run it (``["cache", "prune"]``)."""
    import typer

    from auditor.cli.base import app

    out = []

    def visit(words, command):
        out.append(words)
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            visit([*words, name], sub)

    for name, command in sorted(typer.main.get_command(app).commands.items()):
        visit([name], command)
    return out


def test_every_commands_help_has_examples_of_that_command(tmp_path):
    commands = _commands()
    assert ["cache", "prune"] in commands and ["cache", "clear"] in commands and ["scan"] in commands
    examples = {}
    for words in commands:
        p = piped(*words, "--help")
        assert p.returncode == 0, (words, p.stderr)
        assert "\n  Examples:\n" in p.stdout, f"eagle-audit {' '.join(words)} --help has no examples"
        block = p.stdout.split("\n  Examples:\n", 1)[1].split("\n\n", 1)[0].replace(" \\\n", " ").splitlines()
        examples[" ".join(words)] = [" ".join(line.split()) for line in block]
        assert block and all(line.startswith(f"    eagle-audit {' '.join(words)}") for line in block), (words, block)
    assert examples["cache prune"] == ["eagle-audit cache prune --older-than 30", "eagle-audit cache prune --max-size 2G",
                                       "eagle-audit cache prune --older-than 7 --max-size 500M"]
    assert examples["cache clear"] == ["eagle-audit cache clear"]
    # the examples of cache prune and clear run as written (on a cache folder of the test's own)
    cache = tmp_path / "cache"
    (cache / "archives").mkdir(parents=True)
    (cache / "archives" / "vllm-9.9.9.tar.gz").write_bytes(b"x" * 100)
    for line in examples["cache prune"] + examples["cache clear"]:
        p = piped(*line.split()[1:], EAGLE_AUDIT_CACHE_DIR=str(cache))
        assert p.returncode == 0, (line, p.stderr)
    assert not (cache / "archives" / "vllm-9.9.9.tar.gz").exists()  # cleared by the last one


# -- 3. fix on SGLang: a forward with a layer loop per branch says its capture once ---------------

_TWO_LOOPS = '''    def forward(self, input_ids, positions):
        hidden_states = input_ids
        if positions is None:
            for layer in self.layers:
                hidden_states = layer(None, hidden_states)
        else:
            for layer in self.layers:
                hidden_states = layer(positions, hidden_states)
        return hidden_states
'''


def test_fix_sglang_says_a_capture_in_two_layer_loops_once(tmp_path):
    """minisglang's Gemma3TextModel with a layer loop in each branch of its forward, as SGLang
    0.5.10.post1's (one loop for CPUs with AMX, one for the rest): the patch captures in both,
    and the report said the same capture sentence twice, one line per loop."""
    import shutil

    tree = tmp_path / "t"
    shutil.copytree(REPO / "fixtures" / "minisglang", tree)
    model = tree / "sglang/srt/models/gemma3_causal.py"
    text = model.read_text()
    one_loop = text[text.index("    def forward(self, input_ids, positions):"):text.index("\n\nclass Gemma3ForCausalLM")]
    model.write_text(text.replace(one_loop + "\n", _TWO_LOOPS))
    p = piped("fix", tree, "--model", "Gemma3ForCausalLM", "--no-cache", "--no-progress", "--no-config",
              COLUMNS="400")
    assert p.returncode == 0, p.stderr
    added = [line for line in p.stdout.splitlines() if line.startswith("+")]
    assert added.count("+            for idx, layer in enumerate(self.layers):") == 2  # both loops capture
    assert added.count("+                    aux_hidden_states.append(hidden_states)") == 2
    report = p.stderr.splitlines()
    assert report.count("  [sglang-aux-capture] sglang/srt/models/gemma3_causal.py: Gemma3TextModel.forward captures "
                        "hidden_states entering the layers in layers_to_capture, keyed on the absolute layer index "
                        "idx (in each of its 2 layer loops)") == 1
    codemod_lines = [line for line in report if line.startswith("  [")]
    assert len(codemod_lines) == len(set(codemod_lines)) > 4, codemod_lines


def test_a_derived_model_type_is_offered_as_its_architecture_never_as_a_name(tmp_path):
    # LLaMAForCausalLM derives the model_type 'lla_ma', which no config uses; `--model Llama` offered
    # it, and `--model lla_ma` then audited a model_type the allowlist never admits (new-user round 29)
    from conftest import MINIVLLM, make_tree, open_auditor

    from auditor.hf.targets import _close, derive_model_type

    reg_path = "vllm/model_executor/models/registry.py"
    text = (MINIVLLM / reg_path).read_text().replace(
        '    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),\n',
        '    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),\n    "LLaMAForCausalLM": ("llama", "LlamaForCausalLM"),\n', 1)
    reg = open_auditor(make_tree(tmp_path, {reg_path: text})).registry
    assert derive_model_type("LLaMAForCausalLM") == "lla_ma" and reg.role("LLaMAForCausalLM") == "target"
    hint = _close("Llama", reg)
    assert "lla_ma" not in hint, hint
    offered = hint.removeprefix("; did you mean: ").rstrip("?").split(", ")
    assert hint.startswith("; did you mean: ") and "LLaMAForCausalLM" in offered and "llama" in offered, hint
