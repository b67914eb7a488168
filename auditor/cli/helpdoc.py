"""The options of every command as ``--help`` lists them, and the README's options table made
from them (``tests/test_readme_options.py`` keeps the README equal)."""

from __future__ import annotations

import typer

from auditor.cli.base import app


def command_options() -> dict[str, dict[str, str]]:
    """Every command of the command line (``cache prune`` for a subcommand) → its options as
    its ``--help`` lists them: the option's spellings (``--model (-m)``, without the value's
    metavar, which differs between commands) → the first sentence of its help. Hidden options (old spellings) are left out. Read from the typer
    application itself, so the README's options table (:func:`options_markdown`) cannot drift."""
    root = typer.main.get_command(app)
    out: dict[str, dict[str, str]] = {}

    def visit(name: str, command) -> None:
        options = {}
        for param in command.params:
            if not isinstance(param, typer.core.TyperOption) or param.hidden:
                continue
            long = [o for o in param.opts if o.startswith("--")] + list(param.secondary_opts)
            short = [o for o in param.opts if not o.startswith("--")]
            spelled = "/".join(long) + (f" ({', '.join(short)})" if short else "")
            options[spelled] = " ".join((param.help or "").split()).split(". ")[0].rstrip(".")
        out[name] = options
        for sub_name, sub in getattr(command, "commands", {}).items():
            visit(f"{name} {sub_name}", sub)

    for name, command in root.commands.items():
        visit(name, command)
    return out


def options_markdown() -> str:
    """The README's table of the options more than one command takes: each option with the
    commands that take it, from :func:`command_options` (``tests/test_readme_options.py`` keeps
    the README's copy equal). Options of a single command are left to its ``--help``."""
    commands = command_options()
    taken: dict[str, list[str]] = {}
    for name, options in commands.items():
        for spelled in options:
            taken.setdefault(spelled, []).append(name)
    everyone = [n for n in commands if " " not in n]
    rows = ["| option | taken by |", "|---|---|"]
    for spelled, names in sorted(taken.items(), key=lambda kv: (-len(kv[1]), list(taken).index(kv[0]))):
        if len(names) < 2:
            continue
        missing = [n for n in everyone if n not in names]
        who = (", ".join(f"`{n}`" for n in names) if len(missing) > len(names) // 2 or len(missing) > 3
               else f"every command but {', '.join(f'`{n}`' for n in missing)}")
        rows.append(f"| `{spelled}` | {who} |")
    return "\n".join(rows) + "\n"
