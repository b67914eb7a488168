"""The declarative option table of the command line (:data:`auditor.cli.options.OPTIONS`): every
option that gives a setting names a key of ``[tool.eagle-audit]`` whose flag is that option, the
run-option group gives exactly the run settings, and the commands' ``--format`` enums are one per
distinct set of choices."""

from __future__ import annotations

import typer

from auditor.cli import app
from auditor.cli.options import OPTIONS, RUN_OPTIONS, format_enum
from auditor.orchestration.config import SETTINGS


def test_every_option_that_gives_a_setting_is_the_flag_of_that_setting():
    by_field = {s.field: s for s in SETTINGS}
    given = {o.setting: o.flag for o in OPTIONS.values() if o.setting is not None}
    assert given == {f: by_field[f].flag for f in given}
    assert set(given) == {"models", "methods", "model_type", "hf_config", "pipeline_parallel_size", "draft_config",
                          "parallel_drafting", "num_speculative_tokens"}


def test_the_run_group_spreads_into_four_options_on_each_command_that_takes_it():
    assert [OPTIONS[n].setting for n in RUN_OPTIONS] == list(RUN_OPTIONS)
    root = typer.main.get_command(app)
    flags = {OPTIONS[n].flag for n in RUN_OPTIONS}
    takers = sorted(name for name, cmd in root.commands.items()
                    if flags <= {o for p in cmd.params for o in p.opts + p.secondary_opts})
    assert takers == ["compare", "fix", "gate", "matrix", "scan"]


def test_one_format_enum_per_distinct_set_of_choices():
    import inspect
    import typing

    enums = {}
    for info in app.registered_commands:
        fmt = inspect.signature(info.callback, eval_str=True).parameters.get("fmt")
        if fmt is not None:
            enums[info.name or info.callback.__name__] = next(a for a in typing.get_args(fmt.annotation)
                                                              if a is not type(None))
    assert {name: tuple(c.value for c in e) for name, e in enums.items()} == {
        "scan": ("table", "json", "markdown", "sarif", "junit"), "verify": ("table", "json"),
        "explain": ("table", "json"), "rules": ("table", "json", "markdown"),
        "gate": ("table", "json", "markdown", "sarif", "junit"), "matrix": ("table", "json", "markdown", "html"),
        "compare": ("table", "json", "markdown", "html")}
    assert len(set(enums.values())) == 4  # the same set of choices, the same enum
    assert enums["scan"] is enums["gate"] and enums["matrix"] is enums["compare"] and enums["explain"] is enums["verify"]
    assert format_enum("table", "json") is enums["verify"]


def test_compare_exit_zero_turns_only_the_no_winner_answer_into_0():
    import subprocess
    import sys

    from tests.conftest import REPO

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "auditor", "compare", "-m", "ToyV2ForCausalLM", "--vllm-version",
                               str(REPO / "fixtures/minivllm"), "--sglang-version", str(REPO / "fixtures/minisglang"),
                               "--no-progress", "--no-config", "-f", "json", *extra],
                              capture_output=True, text=True, cwd=REPO)
    # ToyV2 is blocked in both trees: no engine supports it (1), unless --exit-zero (0), same report
    plain, zero = run(), run("--exit-zero")
    assert plain.returncode == 1 and zero.returncode == 0, (plain.stderr, zero.stderr)
    assert plain.stdout == zero.stdout
    # bad input stays 2
    assert run("--exit-zero", "--method", "nope").returncode == 2
