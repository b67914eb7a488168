"""Small wording helpers shared by every layer that writes sentences for people."""

from __future__ import annotations


def count(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun that agrees with it: ``count(1, "result")`` is ``"1 result"``,
    ``count(2, "result")`` is ``"2 results"``, ``count(0, "pooling model")`` is ``"0 pooling
    models"``.

    Args:
        n: the number.
        singular: the noun for one.
        plural: the noun for several (default: ``singular`` + ``s``).

    Returns:
        ``"<n> <noun>"``.
    """
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


#: What breaks a line on a terminal or for ``str.splitlines``: line feed, carriage return, the
#: other ASCII separators, NEL, and the Unicode line and paragraph separators.
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def one_line(text: object) -> str:
    """``text`` (``str()`` of it) with every line break shown as an escape (a line feed becomes
    ``\\x0a``), so that a name taken from input can never start a line of its own in a report.

    Args:
        text: any value.

    Returns:
        The text on one line.
    """
    s = str(text)
    if not any(c in s for c in _LINE_BREAKS):
        return s
    return "".join(f"\\x{ord(c):02x}" if c in _LINE_BREAKS and ord(c) < 0x100 else
                   f"\\u{ord(c):04x}" if c in _LINE_BREAKS else c for c in s)


def shell_quote(text: object) -> str:
    """``text`` quoted for a POSIX shell as one word on one line: :func:`shlex.quote` when it holds
    no control character, else ANSI-C quoting (``$'a\\nb'``, read by bash, zsh, ksh and POSIX
    ``sh`` of 2024), so that a command printed for copying still names the same path.

    Args:
        text: the word (a path, a model name).

    Returns:
        The quoted word.
    """
    import shlex

    s = str(text)
    if not any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 or c in _LINE_BREAKS for c in s):
        return shlex.quote(s)
    out = []
    for c in s:
        if c in "\\'":
            out.append("\\" + c)
        elif ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0:
            out.append(f"\\x{ord(c):02x}")
        elif c in _LINE_BREAKS:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "$'" + "".join(out) + "'"


def shell_join(words: list) -> str:
    """The words quoted with :func:`shell_quote` and joined by spaces: a command line to copy.

    Args:
        words: the command and its arguments.

    Returns:
        One line.
    """
    return " ".join(shell_quote(w) for w in words)
