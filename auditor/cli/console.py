"""The consoles (stdout, stderr), the one wrapping rule of messages, errors (exit 2), output
writes and progress bars. rich is imported on first use only: ``scan --format json`` (the warm
path of CI) never needs it."""

from __future__ import annotations

import contextlib

import functools
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from auditor.render.text import clean



#: Exit code of an unexpected error (a bug in eagle-audit, never a verdict).
EXIT_INTERNAL = 3


STATE = {"debug": False}


class _PipedLines:
    """A text stream over ``sys.stdout`` (looked up at each write) that drops the spaces rich
    pads lines with: piped output ends each line with its last character."""

    encoding = "utf-8"

    def __init__(self) -> None:
        self._pending = ""

    def write(self, text: str) -> int:
        head, sep, tail = (self._pending + text).rpartition("\n")
        if sep:
            sys.stdout.write("\n".join(line.rstrip(" ") for line in head.split("\n")) + "\n")
        self._pending = tail
        return len(text)

    def flush(self) -> None:
        if self._pending:
            sys.stdout.write(self._pending)
            self._pending = ""
        sys.stdout.flush()

    def isatty(self) -> bool:
        return False


def env_columns() -> Optional[int]:
    """The width the user set with ``COLUMNS`` (None when unset or not a positive number)."""
    value = os.environ.get("COLUMNS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def out_console():
    """The rich console on stdout. On a terminal: its width, lines wrapped there. Piped or
    captured: no colour, no trailing spaces, tables laid out in ``COLUMNS`` when set, else in up to
    160 columns; report lines (a finding's details) wrapped at ``COLUMNS`` keeping their indent
    when set, else whole on one line. One console per value of ``COLUMNS``: a process that runs
    the command line again with another ``COLUMNS`` (or without it) gets the layout it asks for."""
    return _out_console(env_columns())


@functools.cache
def _out_console(columns: Optional[int]):
    from rich.console import Console

    from auditor.render.text import keep_lines_whole

    console = Console(soft_wrap=False)
    if console.is_terminal:
        return console
    piped = Console(file=_PipedLines(), width=columns or 160, soft_wrap=True)
    return piped if columns else keep_lines_whole(piped)


@functools.cache
def err_console():
    """The rich console on stderr: wrapped at the terminal's width on a terminal, never
    hard-wrapped when stderr is a file or a pipe (a log keeps each message on one line)."""
    from rich.console import Console

    console = Console(stderr=True)
    if console.is_terminal:
        return console
    return Console(stderr=True, soft_wrap=True)


def escape(text: str) -> str:
    """``text`` with rich markup escaped."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _err_width() -> Optional[int]:
    """The width stderr messages wrap at: the terminal's on a terminal; piped, ``COLUMNS`` when
    set, else None (each message kept on one line, for a log)."""
    console = err_console()
    return console.width if console.is_terminal else env_columns()


def say(text: str) -> None:
    """A message on stderr under the one wrapping rule of every command
    (:func:`auditor.render.text.wrap_message`: between words at :func:`_err_width`, a command
    to copy on lines of its own with shell continuations). Errors are the exception: an
    ``eagle-audit: error:`` stays one line (:func:`fail`)."""
    from auditor.render.text import wrap_message

    for line in wrap_message(clean(text, multiline=True), _err_width()):
        err_console().print(line, markup=False, highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    """One warning on stderr (wrapped as every message is, :func:`say`)."""
    say(f"eagle-audit: warning: {clean(message)}")


def _plain_text(draw) -> str:
    """What ``draw(console)`` prints, as plain text: no colour, laid out as piped output is
    (:func:`out_console`: ``COLUMNS``, else 160 columns and report lines whole), no trailing spaces (a
    table written to a file reads as it does piped)."""
    import io

    from rich.console import Console

    from auditor.render.text import keep_lines_whole

    buf = io.StringIO()
    console = Console(file=buf, width=env_columns() or 160, color_system=None, force_terminal=False, soft_wrap=True,
                      highlight=False)
    draw(console if env_columns() else keep_lines_whole(console))
    return "\n".join(line.rstrip(" ") for line in buf.getvalue().split("\n"))


def emit_table(draw, output: Optional[Path]) -> None:
    """A ``table`` report: ``draw(console)`` on stdout (rich on a terminal, plain piped), or its
    plain text written to ``output``."""
    if output is None:
        draw(out_console())
    else:
        write_output(_plain_text(draw), output)


def fail(message: str) -> None:
    """A usage or input error: ``eagle-audit: error: MESSAGE`` on stderr (one line) and exit 2."""
    err_console().print(f"[bold red]eagle-audit: error:[/bold red] {escape(clean(message))}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def progress_enabled(no_progress: bool) -> bool:
    """Progress bars only on a terminal (as rich sees it; stderr that is no tty, without an
    environment variable forcing a terminal, answers without importing rich)."""
    import os

    if no_progress:
        return False
    if not sys.stderr.isatty() and not any(os.environ.get(v) for v in ("FORCE_COLOR", "TTY_INTERACTIVE")):
        return False
    return err_console().is_terminal


def warn_unverified(source) -> None:
    """A warning on stderr when ``source`` (a tree's source) was read from an archive whose
    package-index entry published no sha256 (``--allow-unverified``)."""
    from auditor.source.digests import UNVERIFIED

    if UNVERIFIED in getattr(source, "label", ""):
        err_console().print(f"eagle-audit: warning: {clean(source.label)}", markup=False, highlight=False, soft_wrap=True)


def write_output(text: str, output: Optional[Path]) -> None:
    """Write ``text`` to stdout, or to ``output`` (checked by :func:`check_output` before the
    work): a regular file is replaced atomically (temporary file + rename; permissions: the
    existing file's, else what the umask gives), a FIFO or device (``/dev/stdout``) is written
    directly."""
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    import os
    import secrets
    import stat

    data = (text if text.endswith("\n") else text + "\n").encode("utf-8")
    try:
        st = os.stat(output)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            with open(output, "wb") as fh:
                fh.write(data)
            return
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = output.parent / f".{output.name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")
    try:
        with os.fdopen(fd, "wb") as fh:
            if st is not None:
                os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
            fh.write(data)
        os.replace(tmp, output)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            fail(f"cannot write {output}: {exc.strerror or exc}")
        raise
    err_console().print(f"eagle-audit: wrote {clean(str(output))}", markup=False, highlight=False, soft_wrap=True)


def exit_on_internal_errors(failed) -> None:
    """After a complete report: exit 3 with one line when the audit of some target failed inside
    the tool (those targets are ``unknown`` in the report; ``--exit-zero`` never hides it)."""
    if not failed:
        return
    names = ", ".join(dict.fromkeys(r.architecture for r in failed))
    err_console().print(f"[bold red]eagle-audit: internal error:[/bold red] {escape(clean(names))}: the audit failed inside "
                 "eagle-audit (the report above is complete; those targets are unknown) — this is a bug in "
                 "eagle-audit; please report it with the command line", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_INTERNAL)


@contextlib.contextmanager
def _bars(labels: list[str]):
    """Progress bars on stderr, one per label (gone when the block ends); yields one
    ``cb(done, total)`` per bar, in order."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console(), transient=True) as prog:
        def make(task):
            def cb(done: int, total: int) -> None:
                prog.update(task, completed=done, total=total)
            return cb

        yield [make(prog.add_task(label, total=None)) for label in labels]


def with_progress(show: bool, label: str, fn):
    """Run ``fn(cb)`` with one progress bar labelled ``label`` on stderr (``cb(done, total)``);
    without ``show``, ``fn(None)``."""
    if not show:
        return fn(None)
    with _bars([label]) as (cb,):
        return fn(cb)


def with_stages(show: bool, title: str, fn):
    """Run ``fn(cb)`` with one line on stderr naming the stage in progress (a spinner, ``title:
    stage``, stages done of all; gone when ``fn`` returns). ``cb(stage, done, total)`` is called
    as each stage starts; each call redraws the line at once, so no stage goes unnamed, and the
    line shows only from the first stage on. Without ``show`` (not a terminal, ``--no-progress``),
    ``fn(None)``."""
    if not show:
        return fn(None)
    from rich.markup import escape as rich_escape
    from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), MofNCompleteColumn(),
                  console=err_console(), transient=True) as prog:
        task = prog.add_task(title, total=None, visible=False)

        def cb(stage: str, done: int, total: int) -> None:
            prog.update(task, description=rich_escape(clean(f"{title}: {stage}")), completed=done, total=total,
                        visible=True)
            prog.refresh()

        return fn(cb)


def with_two_progress(show: bool, labels: tuple[str, str], fn):
    """Run ``fn(first_cb, second_cb)`` with two progress bars (one per phase) on stderr."""
    if not show:
        return fn(None, None)
    with _bars(list(labels)) as (first, second):
        return fn(first, second)


def append_summary(text: str, path: Optional[Path]) -> None:
    """Append ``text`` to the ``--summary`` FILE ``path`` (nothing when None); exit 2 with one
    line when it cannot be written."""
    if path is None:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        fail(f"--summary: cannot write {path}: {exc}")


def size_words(n: int) -> str:
    """``n`` bytes in a unit a person reads (``29 MB``, ``1.2 GB``)."""
    if n >= 10**9:
        return f"{n / 10**9:.1f} GB"
    return f"{max(1, round(n / 10**6))} MB"


def matrix_progress(show: bool, fn):
    """Run ``fn(callback)`` under two progress bars: archives fetched, releases audited
    (``callback(stage, done, total)``, stage ``fetch`` or ``audit``)."""
    if not show:
        return fn(None)
    with _bars(["fetching archives", "auditing releases"]) as (fetch, audit):
        return fn(lambda stage, done, total: (fetch if stage == "fetch" else audit)(done, total))


def emit(kind: str, fmt: Enum, report, output: Optional[Path], **context) -> Optional[str]:
    """Render ``report`` (of the report ``kind``) in ``fmt`` with its renderer of
    :data:`auditor.render.renderers.RENDERERS`, and show it: a table drawn on stdout (or its plain
    text written to ``output``), a document written to stdout or ``output``.

    Args:
        kind: the report kind (``scan``, ``gate``, ...).
        fmt: the member of the command's format enum.
        report: the report the renderer reads.
        output: the ``-o`` file (None: stdout).
        context: what the renderer needs beside the report (``verbose``, ``settings_file``...).

    Returns:
        The document written, or None for a table.

    Raises:
        KeyError: no renderer for ``(kind, fmt)``.
    """
    from auditor.render.renderers import RENDERERS

    renderer = RENDERERS.get(kind, fmt.value)
    if renderer.draws:
        emit_table(lambda console: renderer.draw(report, console, **context), output)
        return None
    text = renderer.text(report, **context)
    write_output(text, output)
    return text
