"""The transient progress bar of a download or an archive read, drawn on stderr (rich is
imported only when a bar is drawn). Below :mod:`auditor.source.sources` and
:mod:`auditor.source.fetch`, which both draw it, so that neither imports the other for it."""

from __future__ import annotations


def progress_bar(description: str, total: int | None):
    """Build a transient rich progress bar drawn on stderr.

    Args:
        description: the text shown left of the bar.
        total: the expected number of bytes, or None when unknown.

    Returns:
        A ``(progress, task_id)`` pair; use ``progress`` as a context manager.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = progress.add_task(description, total=total)
    return progress, task
