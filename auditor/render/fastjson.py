"""``json.dumps(obj, indent=2)``, the same text, faster.

Python's encoder writes indented JSON in pure Python (its C encoder only serves ``indent=None``);
a full scan's report is about 100,000 values, whose indented encoding cost more than the rest of a
warm scan. :func:`dumps_indent2` walks the same data in one tight recursive function and leaves
every scalar to the standard library (its C string escaper, ``int.__repr__``, ``float.__repr__``),
so the text is byte for byte that of ``json.dumps(obj, indent=2)``; any value it does not know (a
non-string key, a subclass, a NaN) sends the whole document back to ``json.dumps``.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _esc


class _Unusual(Exception):
    """A value :func:`dumps_indent2` leaves to ``json.dumps``."""


def dumps_indent2(obj) -> str:
    """``json.dumps(obj, indent=2)`` (the same string; see the module docstring)."""
    out: list[str] = []
    try:
        _write(obj, out, "\n")
    except (_Unusual, RecursionError):
        return json.dumps(obj, indent=2)
    return "".join(out)


def _write(v, out: list[str], nl: str) -> None:
    t = type(v)
    if t is str:
        out.append(_esc(v))
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif t is int:
        out.append(int.__repr__(v))
    elif t is float:
        if v != v or v in (float("inf"), float("-inf")):
            raise _Unusual
        out.append(float.__repr__(v))
    elif t is dict:
        if not v:
            out.append("{}")
            return
        inner = nl + "  "
        sep = "{" + inner
        for k, x in v.items():
            if type(k) is not str:
                raise _Unusual
            out.append(sep)
            out.append(_esc(k))
            out.append(": ")
            _write(x, out, inner)
            sep = "," + inner
        out.append(nl + "}")
    elif t is list or t is tuple:
        if not v:
            out.append("[]")
            return
        inner = nl + "  "
        sep = "[" + inner
        for x in v:
            out.append(sep)
            _write(x, out, inner)
            sep = "," + inner
        out.append(nl + "]")
    else:
        raise _Unusual
