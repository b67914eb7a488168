"""The text hygiene every reporter shares: :func:`clean` (a string from the scanned tree made unable
to move the cursor or reorder what the reader sees), :func:`markdown_text` (made inert in Markdown),
the colour of each verdict, and the wrapping of messages and commands at a console's width
(:func:`wrap_message`, :func:`shell_lines`, :func:`print_wrapped`).

Every string that comes from the scanned tree (registry keys, class names, paths, messages that
quote them) goes through :func:`clean` before it reaches a terminal or a Markdown document, and
through :func:`rich.markup.escape` where rich would read markup: a tree cannot repaint the screen
or restyle the report.
"""

from __future__ import annotations

import re
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported by the functions that print, so that JSON never loads it
    from rich.console import Console


#: The colour of each verdict in a table.
VERDICT_STYLE = {"supported": "green", "blocked": "red", "unknown": "yellow", "not-a-target": "dim"}


# C0 and C1 controls, DEL, and the Unicode format characters that reorder or hide text
# (bidirectional overrides and isolates, line and paragraph separators).
_BIDI = r"\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f" + _BIDI + "]")
_CONTROL_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + "]")


def patch_words(fix_available: bool) -> str:
    """How a blocked cell of a matrix or a comparison says whether ``eagle-audit fix`` can patch
    every blocking gate of it: ``a patch exists`` or ``no local patch`` (the same words in the
    table, Markdown and HTML reports)."""
    return "a patch exists" if fix_available else "no local patch"


def clean(text: object, multiline: bool = False) -> str:
    """``text`` with every control character shown as an escape (``ESC`` becomes ``\\x1b``,
    a right-to-left override ``\\u202e``), so that printing it cannot move the cursor, clear the
    screen, change colours or reorder what the reader sees.

    Args:
        text: any value (``str()`` of it is cleaned).
        multiline: keep newlines and tabs (for reports and diffs); otherwise they are escaped too.

    Returns:
        The neutralised text.
    """
    pattern = _CONTROL_TEXT if multiline else _CONTROL_LINE
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                       else f"\\u{ord(m.group()):04x}", str(text))


#: What :func:`markdown_text` replaces: the table's cell separator, and what opens an HTML tag, an
#: entity or a link.
_MARKDOWN = str.maketrans({"|": "\\|", "[": "\\[", "]": "\\]", "<": "&lt;", ">": "&gt;", "&": "&amp;"})


def markdown_text(text: object) -> str:
    """``text`` (anything taken from input: a name, a path, a message) made inert in GitHub-flavoured
    Markdown, for job summaries and PR comments: one line (controls and newlines escaped as by
    :func:`clean`), ``|`` escaped for table cells, ``<``, ``>`` and ``&`` as entities (no HTML tag
    or entity), ``[`` and ``]`` escaped (no link or image). Inside a code span the entities show
    as typed."""
    return clean(text).translate(_MARKDOWN)


def clean_all(value):
    """A copy of a JSON-like value with every string cleaned (for explanations)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {k: clean_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_all(v) for v in value]
    return value


#: Consoles whose report lines are printed whole (piped without ``COLUMNS``): see :func:`keep_lines_whole`.
_WHOLE_LINES: "weakref.WeakSet" = weakref.WeakSet()


def shell_lines(command: str, width: int, indent: int = 2) -> list[str]:
    """``command`` (shell-quoted) laid out in lines of at most ``width`` columns where its words
    allow, the first indented by ``indent`` spaces, each but the last ending with `` \\`` (a shell
    line continuation: the lines copied together still run as one command), continuation lines
    indented two more spaces. A word is never cut; a command that cannot be split as shell words
    is returned whole on one line."""
    import shlex

    try:
        words = [shlex.quote(w) for w in shlex.split(command)]
    except ValueError:
        return [" " * indent + command]
    if not words:
        return []
    lines = [" " * indent + words[0]]
    for w in words[1:]:
        if len(lines[-1]) + 1 + len(w) + 2 <= width:
            lines[-1] += " " + w
        else:
            lines[-1] += " \\"
            lines.append(" " * (indent + 2) + w)
    return lines


#: Where a command to copy starts inside a message line: after ``: `` (``next step (…): eagle-audit
#: fix …``, ``undo with: eagle-audit fix --revert …``) or at the start of the line.
_COMMAND = re.compile(r"(?:(?<=: )|(?<![^ ]))(?=eagle-audit (?:scan|fix|gate|matrix|compare|explain|rules|cache|verify) )")


def _wrap_prose(text: str, width: int, indent: int, hanging: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text.strip(), width, initial_indent=" " * indent, subsequent_indent=" " * hanging,
                         break_long_words=False, break_on_hyphens=False) or [" " * indent]


def wrap_message(text: str, width: int | None) -> list[str]:
    """The one wrapping rule of every command's messages on stderr (and of a report's next steps):
    each line of ``text`` wrapped between words at ``width`` (None: lines kept whole, as for a log
    or a pipe without ``COLUMNS``), continuations indented two spaces more than the line; a word
    (a path, a ``file:line``) is never cut. A command to copy (see :data:`_COMMAND`) in a line too
    long for ``width`` starts a line of its own and is laid out by :func:`shell_lines` (shell
    continuations, so that the lines copied together still run); a note after it (two spaces, then
    ``(``) follows on lines of its own. A line that starts with a command always has its note on a
    line of its own, so that the command's line is copied alone.

    Args:
        text: the message, one or more lines (already cleaned of control characters).
        width: the columns to fit, or None.

    Returns:
        The lines to print.
    """
    out: list[str] = []
    room = width or 10**6
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        m = _COMMAND.match(line, indent) or _COMMAND.search(line, indent)
        if m is None:
            out += [line] if len(line) <= room else _wrap_prose(line, room, indent, indent + 2)
            continue
        prose, rest = line[:m.start()], line[m.start():]
        command, sep, note = rest.partition("  (")
        if prose.strip() and len(line) <= room:
            out.append(line)  # it fits (or a log's line, kept whole): the command is copied from it as it is
            continue
        # a command that starts the line, or a line too long: the command on lines of its own,
        # runnable as copied, its note after it
        if prose.strip():
            out += _wrap_prose(prose, room, indent, indent + 2)
            out += shell_lines(command, room, indent + 2)
        else:
            out += shell_lines(command, room, indent)
        if sep:
            at = indent + 2 if prose.strip() else indent
            out += _wrap_prose("(" + note, room, at, at + 1)
    return out


def lines_kept_whole(console: Console) -> bool:
    """Whether ``console`` prints report lines whole (see :func:`keep_lines_whole`)."""
    return console in _WHOLE_LINES


def keep_lines_whole(console: Console) -> Console:
    """Mark ``console`` so that :func:`print_wrapped` prints each report line whole, on one line
    (the tables still fit the console's width). Returns ``console``."""
    _WHOLE_LINES.add(console)
    return console


def print_wrapped(console: Console, units, indent: int = 2, hanging: int = 4) -> None:
    """Print one report line wrapped at the console's width (a terminal's, or ``COLUMNS``): the
    first line indented by ``indent`` spaces, each continuation by ``hanging``; nothing is cut. On
    a console marked by :func:`keep_lines_whole`, the line is printed whole.

    Args:
        console: the rich console printed on.
        units: a :class:`rich.text.Text` or str (wrapped between words; a word longer than the
            line folds), or a list of them: pieces kept whole on one line when they fit (a
            ``file:line``, ``(fix available)``), joined by spaces.
    """
    from rich.text import Text

    pieces = [u if isinstance(u, Text) else Text(u) for u in (units if isinstance(units, list) else [units])]
    whole = Text(" ").join(pieces)
    if console in _WHOLE_LINES:
        console.print(Text(" " * indent) + whole, soft_wrap=True, highlight=False)
        return
    first, rest = max(console.width - indent, 20), max(console.width - hanging, 20)
    lines: list = []
    line = None
    for piece in (pieces if len(pieces) > 1 else [whole]):
        room = rest if lines else first
        if line is not None and line.cell_len + 1 + piece.cell_len <= room:
            line.append(" ")
            line.append_text(piece)
            continue
        if line is not None:
            lines.append(line)
        line = piece.copy()
    lines.append(line)
    out: list = []
    for line in lines:  # a line still too long (one piece, or the whole text) wraps between words
        room = rest if out else first
        if line.cell_len <= room:
            out.append(line)
            continue
        head = line.wrap(console, room, overflow="fold")[0]
        out.append(head)
        tail = line[len(head.plain):]
        tail = tail[len(tail.plain) - len(tail.plain.lstrip(" ")):]
        if tail.plain:
            out += list(tail.wrap(console, rest, overflow="fold"))
    for i, line in enumerate(out):
        console.print(Text(" " * (hanging if i else indent)) + line, soft_wrap=True, highlight=False)


def optional_value(v) -> str | None:
    """The string value of an optional enum member (None for None)."""
    return v.value if v is not None else None
