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
