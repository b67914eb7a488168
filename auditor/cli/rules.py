"""``eagle-audit rules``: why each gate blocks, and how to fix it."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from auditor.cli.base import Command, app
from auditor.cli.console import emit
from auditor.cli.files import check_output, report_format
from auditor.render.renderers import RENDERERS
from auditor.cli.options import format_enum, format_opt, option, output_opt


#: The formats of this command (one enum per distinct set of choices).
RulesFormat = format_enum(*RENDERERS.formats("rules"))


@app.command("rules", cls=Command, short_help="The rules: why each gate blocks, and how to fix it.")
def list_rules(
    name: Optional[str] = typer.Argument(None, metavar="CODE|GATE", show_default=False,
                                         help="One rule (EA302), or the rules of a gate id (interface: its vLLM and "
                                         "SGLang rules), with their VALID/INVALID examples. Default: every rule."),
    fmt: Optional[RulesFormat] = format_opt(RulesFormat),
    output: Optional[Path] = output_opt(RulesFormat, "the rule reference"),
    force: bool = option("force"),
) -> None:
    """The rules: code, gate, whether it blocks, whether a fix exists, why and how to fix; with
    CODE or GATE, those rules in full, with their examples.

    Exit codes: 0 listed, 2 usage error (an unknown CODE or GATE), 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit rules
      eagle-audit rules EA302
      eagle-audit rules interface --format json
      eagle-audit rules -o rules.md
    """

    check_output(output, "--output", force)
    fmt = report_format(fmt, output, RulesFormat)
    if name is not None:
        from rules.registry import select_rules

        chosen = select_rules(name)  # an unknown name: one line, exit 2, with close matches
        emit("rule-details", fmt, chosen, output)
        return
    emit("rules", fmt, None, output)
