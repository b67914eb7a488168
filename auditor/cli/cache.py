"""``eagle-audit cache``: where the cache folder is and its size per kind; ``prune`` and ``clear``."""

from __future__ import annotations

from typing import Optional

import typer

from auditor.cli.base import Command, app
from auditor.cli.console import out_console


cache_app = typer.Typer(name="cache", help="The on-disk cache: where it is, its size per kind, pruning it.\n\n"
                        "Without a subcommand: where the cache folder is and what each kind holds (release archives, "
                        "library wheels, module summaries, scan results, matrix audits).\n\n"
                        "\b\nExamples:\n  eagle-audit cache\n  eagle-audit cache prune --older-than 30\n"
                        "  eagle-audit cache prune --max-size 2G\n  eagle-audit cache clear",
                        invoke_without_command=True, no_args_is_help=False, rich_markup_mode=None, add_completion=False)


app.add_typer(cache_app, name="cache", short_help="Where the cache is, its size per kind; prune or clear it.")


@cache_app.callback()
def cache_cmd(ctx: typer.Context) -> None:
    """Where the cache folder is (EAGLE_AUDIT_CACHE_DIR, else the user cache folder) and the size
    of each kind it holds. Exit codes: 0 shown, 3 internal error."""
    if ctx.invoked_subcommand is None:
        from auditor.orchestration.cachedir import cache_usage
        from auditor.render.report import print_cache

        print_cache(out_console(), cache_usage())


@cache_app.command("prune", cls=Command, short_help="Remove entries by age or until a total size.")
def cache_prune(
    older_than: Optional[float] = typer.Option(None, "--older-than", metavar="DAYS", min=0, show_default=False,
                                               help="Remove the entries last written more than DAYS days ago."),
    max_size: Optional[str] = typer.Option(None, "--max-size", metavar="SIZE", show_default=False,
                                           help="Then remove the oldest entries until the cache holds at most SIZE "
                                           "(500M, 2G; binary units)."),
) -> None:
    """Remove old cache entries, by age (--older-than), by total size (--max-size), or both.
    Only files inside the cache folder are removed, never through a symbolic link.

    Exit codes: 0 pruned, 2 usage error (no limit, a bad SIZE, a cache folder that is a link).

    \b
    Examples:
      eagle-audit cache prune --older-than 30
      eagle-audit cache prune --max-size 2G
      eagle-audit cache prune --older-than 7 --max-size 500M
    """
    from auditor.orchestration.cachedir import parse_size, prune
    from auditor.render.report import print_prune

    limit = parse_size(max_size) if max_size is not None else None
    print_prune(out_console(), prune(older_than, limit))


@cache_app.command("clear", cls=Command, short_help="Remove every entry of every kind.")
def cache_clear() -> None:
    """Remove every entry of every kind of the cache (folders eagle-audit does not own stay).
    Only files inside the cache folder are removed, never through a symbolic link.

    Exit codes: 0 cleared, 2 refused (a cache folder that is a link).

    \b
    Examples:
      eagle-audit cache clear
    """
    from auditor.orchestration.cachedir import clear
    from auditor.render.report import print_prune

    print_prune(out_console(), clear())
