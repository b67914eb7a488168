"""The ``eagle-audit`` command line. Printing, colour, exit codes and file writes live here only.

Exit codes (ruff-shaped): 0 every requested target is supported; 1 a target is blocked or its
verdict is unknown; 2 usage or input error (bad path, corrupt archive, unknown model); 3 internal
error (a bug: one line with a hint to report it; ``eagle-audit --debug ...`` shows the traceback).

One module per command or command family (:mod:`auditor.cli.scan`, ``verify``, ``explain``,
``rules``, ``fix``, ``gate``, ``matrix``, ``compare``, ``cache``); the typer application and the
global options in :mod:`auditor.cli.base`, the consoles and messages in :mod:`auditor.cli.console`,
output paths in :mod:`auditor.cli.files`, the options in :mod:`auditor.cli.options`, the entry
point in :mod:`auditor.cli.entry`. Importing this package registers every command, in the order
``--help`` lists them.
"""

from auditor.cli import scan, verify, explain, rules, fix, gate, matrix, compare, cache  # noqa: F401  (registers)
from auditor.cli.base import app
from auditor.cli.entry import main
from auditor.cli.helpdoc import command_options, options_markdown

__all__ = ["app", "main", "command_options", "options_markdown"]
