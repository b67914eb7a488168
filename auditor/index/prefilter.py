"""Byte tests over a module's source that pick which of the summary's whole-module walks can find
anything in it (:func:`summarizer_flags`); far cheaper than the walks, and never wrong the other way.
"""

from __future__ import annotations

import re

#: what a module must contain for the whole-module walk of ``NamespacesMixin._dynamic``
#: (:mod:`auditor.index.namespaces`) to find anything in it (byte tests: far cheaper than a regular
#: expression over the file)
_DYNAMIC = (b"globals()", b"vars()", b"sys.modules")
#: what a module must contain for ``NamespacesMixin._namespaces`` to find anything in it: one of
#: these bytes, or a match of :data:`_NAMESPACE_RE` (``exec``/``eval`` as a name, not ``.eval()``;
#: a ``__class__`` assignment)
_NAMESPACE = (b"sys.modules", b"globals()", b"locals()", b"vars(", b"import_module", b"builtins", b"__import__",
              b"FunctionType", b"LambdaType", b"runpy", b"methodcaller")
_NAMESPACE_RE = re.compile(rb"(?<![\w.])(?:exec|eval)(?!\w)|__class__[ \t]*=(?!=)|from[ \t]+sys[ \t]+import[^\n]*\bmodules\b")
#: the spellings the byte tests above miss: a space before the call's parenthesis or the
#: attribute's dot (``globals ()``, ``sys .modules``), ``sys`` imported under another name, and
#: ``from sys import (modules)`` over several lines; either pass then runs
_SPACED_RE = re.compile(rb"\b(?:globals|vars|locals)[ \t]+\(|\bsys[ \t]*\.[ \t]+modules\b|\bsys[ \t]+\.[ \t]*modules\b"
                        rb"|\bimport[ \t]+sys[ \t]+as\b|\bfrom[ \t]+sys[ \t]+import[ \t]*\(")
#: ``self = ...``, ``self, x = ...``, ``(self, x) = ...`` (checked to start its line by
#: :func:`_may_rebind_self`), and ``for self in``, ``as self``, ``self :=``; each pattern starts with
#: a literal where it can, which the regular expression engine finds fast
_SELF_ASSIGN = re.compile(rb"self[ \t]*(?:,[^\n=:]*)?\)?[ \t]*=(?!=)")
_SELF_BOUND = re.compile(rb"\b(?:for|as)[ \t]+self\b|self[ \t]*:=")


def _may_rebind_self(source: bytes) -> bool:
    """True when a line of ``source`` may rebind a method's ``self`` (a byte test that picks the
    modules :func:`self_rebound_line` reads; the syntax tree decides)."""
    if b"self" not in source:
        return False
    if _SELF_BOUND.search(source) is not None:
        return True
    for m in _SELF_ASSIGN.finditer(source):
        start = source.rfind(b"\n", 0, m.start()) + 1
        if not source[start:m.start()].strip(b" \t("):  # only spaces and parentheses before it
            return True
    return False


#: what a source names when it may change an object's attributes other than by ``X.a = v``
_REFLECTIVE = (b"setattr", b"delattr", b"__dict__", b"vars(", b"sys.modules")


def summarizer_flags(source: bytes) -> dict[str, bool]:
    """Which passes of the summary may find something in ``source``.

    Args:
        source: the module's bytes.

    Returns:
        The keyword arguments of :class:`auditor.index.summary._Summarizer` that switch its passes:
        ``track_bases``, ``dynamic``, ``walrus``, ``globals_stmt``, ``reflective``, ``self_rebound``,
        ``namespace`` (each False when the pass can find nothing in the module).
    """
    spaced = _SPACED_RE.search(source) is not None  # ``globals ()``, ``sys .modules``, ``import sys as``
    return {
        "track_bases": b"__bases__" in source,
        "dynamic": spaced or any(n in source for n in _DYNAMIC),
        "walrus": b":=" in source,
        "globals_stmt": b"global" in source,
        "reflective": any(n in source for n in _REFLECTIVE),
        "self_rebound": _may_rebind_self(source),
        "namespace": spaced or any(n in source for n in _NAMESPACE) or _NAMESPACE_RE.search(source) is not None,
    }
