"""The console entry point :func:`main`: every error the user can cause ends as one line and exit
2, a bug as one line and exit 3, output to a closed pipe is dropped."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from auditor.model.errors import AuditError
from auditor.render.text import clean
from auditor.cli.base import app
from auditor.cli.console import EXIT_INTERNAL, STATE, err_console, escape, say


class _ClosedPipeSafe:
    """``sys.stdout`` that outlives its reader: once the reader has gone (``eagle-audit ... | head``),
    further output is dropped silently and the command runs to its own exit code (the reader
    closing early changes nothing about the answer)."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self._closed = False

    def _drop(self) -> None:
        """Point file descriptor 1 at the null device, so that no later flush (ours or Python's at
        exit) can fail on the closed pipe."""
        self._closed = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError):
            pass

    def write(self, text: str) -> int:
        if not self._closed:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self._closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main(argv: Optional[list[str]] = None) -> None:
    """Console entry point. Every error the user can cause ends as one line on stderr and exit
    2: an AuditError from the analysis, or a usage error from the command line. Output to a
    reader that stops early (``| head``) is dropped silently; the exit code stays the answer's."""
    if not isinstance(sys.stdout, _ClosedPipeSafe):
        sys.stdout = _ClosedPipeSafe(sys.stdout)
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="eagle-audit")
    except AuditError as exc:
        err_console().print(f"[bold red]eagle-audit: error:[/bold red] {escape(clean(_blamed(exc)))}", highlight=False,
                     soft_wrap=True)
        sys.exit(2)
    except (KeyboardInterrupt, typer.Abort):
        err_console().print("eagle-audit: interrupted")
        sys.exit(130)
    except Exception as exc:  # click's exceptions (typer may vendor its own copy of click), or a bug
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            _internal_error(exc)
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare ``eagle-audit``: the help, once, on stdout
            sys.stdout.write(exc.format_message() + "\n")
            sys.exit(0)
        hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
        message = exc.format_message().replace("Value error, ", "")  # the prefix of typer's (pydantic's) validation
        err_console().print(f"[bold red]eagle-audit: error:[/bold red] {escape(clean(message))}{escape(clean(hint))}",
                  highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    if rv == 130:  # click turned a KeyboardInterrupt (Ctrl-C, or SIGTERM during fix) into this code
        err_console().print("eagle-audit: interrupted")
    elif rv in (None, 0, 1) and STATE.get("settings_note"):
        say(STATE.pop("settings_note"))
    sys.exit(rv if isinstance(rv, int) else 0)


def _blamed(exc: AuditError) -> str:
    """The message of ``exc``, prefixed with the file and key that set the value it is about
    (``FILE [tool.eagle-audit] models: unknown model ...``) when the settings file named it."""
    from auditor.model.errors import UnknownModel

    cfg = STATE.get("settings")
    if isinstance(exc, UnknownModel) and cfg is not None and exc.name in cfg.models:
        where = dict(cfg.origins).get("models")
        if where:
            return f"{where}: {exc}"
    return str(exc)


def _internal_error(exc: BaseException) -> None:
    """Report an unexpected exception: one line and exit 3, or the traceback with ``--debug``."""
    import os

    if STATE["debug"] or os.environ.get("EAGLE_AUDIT_DEBUG", "") not in ("", "0"):
        import traceback

        sys.stderr.write("".join(traceback.format_exception(exc)))
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:197] + "..."
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    err_console().print(f"[bold red]eagle-audit: internal error:[/bold red] {escape(clean(what))} — this is a bug in eagle-audit; "
              "please report it with the command line (rerun with --debug for the traceback)",
              highlight=False, soft_wrap=True)
    sys.exit(EXIT_INTERNAL)
