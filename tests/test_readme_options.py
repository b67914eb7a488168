"""The README's options table (issue 21, ux3b item 3): it claimed that every command but ``rules``
takes ``--no-config`` (``verify`` and ``cache`` do not), among others. The table is generated
from the typer commands (:func:`auditor.cli.options_markdown`); these tests keep the README's
copy equal to it, and check it against what each command's ``--help`` really prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from auditor.cli import command_options, options_markdown
from real import REPO


def _block(readme: str, name: str) -> str:
    return readme.split(f"<!-- {name}:begin", 1)[1].split("\n", 1)[1].split(f"<!-- {name}:end -->")[0]


def _help(*command: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR",)}
    env.update(COLUMNS="200", NO_COLOR="1")
    p = subprocess.run([sys.executable, "-m", "auditor", *command, "--help"], capture_output=True, text=True,
                       timeout=120, cwd=REPO, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_the_readme_options_table_is_the_generated_one():
    readme = (REPO / "README.md").read_text()
    assert _block(readme, "options") == options_markdown()


def test_every_row_says_what_each_commands_help_prints():
    rows = re.findall(r"^\| `([^`]+)` \| (.+) \|$", options_markdown(), re.M)
    assert len(rows) > 15
    top = [c for c in command_options() if " " not in c]
    helps = {c: _help(*c.split()) for c in top}
    for option, who in rows:
        named = re.findall(r"`([^`]+)`", who)
        takers = [c for c in top if c not in named] if who.startswith("every command but") else named
        long = option.split(" (")[0].split("/")[0]
        for c in top:
            shown = re.search(rf"(^|[\s,]){re.escape(long)}([\s/=,]|$)", helps[c], re.M) is not None
            assert shown == (c in takers), (option, c, who)


def test_the_claims_beside_the_table_are_true():
    options = command_options()
    with_no_config = sorted(c for c, opts in options.items() if "--no-config" in opts)
    from auditor.orchestration.config import COMMANDS

    assert with_no_config == sorted(COMMANDS)  # the commands that read settings, as config.py says
    readme = (REPO / "README.md").read_text()
    assert ("The commands that audit (`scan`, `explain`, `fix`, `gate`, `matrix`, `compare`; not `rules`, `cache` or "
            "`verify`) read their settings") in readme
    exit_zero = [c for c, opts in options.items() if "--exit-zero" in opts]
    assert exit_zero == ["scan", "gate", "matrix", "compare"]
    assert "`--exit-zero` (`scan`, `gate`, `matrix`, `compare`) turns `1` into `0`" in readme
    summary = [c for c, opts in options.items() if "--summary" in opts]
    assert summary == ["gate", "matrix"]
    assert "| `--summary` | `gate`, `matrix` |" in readme
    assert "every command but `rules`, which reads no settings" not in readme  # the old claim
    claim = re.search(r"`-o/--output FILE` \(a report: ([^;]*);", readme).group(1).split(", ")
    assert sorted(claim) == sorted(c for c, opts in options.items() if "--output (-o)" in opts)
