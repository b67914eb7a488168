"""Which gate an engine exception belongs to, decided by where the engine raised it.

The scan records, for each blocking finding, the ``file:line`` of the construct that fails. An
exception the engine raised is attributed to a gate when one of its traceback frames inside the
engine's package is in the same function as one of the target's findings (the allowlist test,
the proposer's sharing of the embedding, the holder's ``forward``) or as the place the finding
says the engine enforces it (``enforced_at``), or is the function that
tests the gate's protocol with the tree's own checker (``supports_eagle3(model)`` in the model
runner, for ``interface``). The innermost such frame wins. An error a library re-raised without
the frames of the code that raised it (pydantic's ``ValidationError`` around the allowlist's
``ValueError``) is matched by its message: the text of a ``raise`` in a finding's function. No match is ``unmodelled``: the engine
refused for a reason the tool does not model, which is a finding about the tool.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from auditor.model.findings import Finding, Severity

UNMODELLED = "unmodelled"


@dataclass
class Attribution:
    """``gate``: the gate id, or :data:`UNMODELLED`; ``where``: ``path:line`` of the innermost frame
    inside the engine's package (POSIX, relative to the folder that holds the package), or None
    when no frame is inside it; ``function``: that frame's function."""

    gate: str
    where: str | None
    function: str | None = None


def engine_frames(frames: list[dict], package_root: str, package: str) -> list[tuple[str, int, str]]:
    """The frames inside the engine's package, innermost last, as ``(relative path, line, function)``.

    Args:
        frames: the child's frames (``file``, ``line``, ``function``), innermost last.
        package_root: the folder that contains the package (``site-packages``).
        package: ``vllm`` or ``sglang``.
    """
    root = package_root.rstrip("/") + "/"
    out = []
    for fr in frames:
        file = str(fr.get("file", ""))
        line = fr.get("line")
        if not file.startswith(root + package + "/") or not isinstance(line, int):
            continue
        out.append((file[len(root):], line, str(fr.get("function", ""))))
    return out


class FunctionSpans:
    """The function definitions of the tree's modules, parsed once each (never executed)."""

    def __init__(self, read) -> None:
        """``read``: a callable ``relative path -> bytes`` (the tree's :meth:`Tree.read`)."""
        self._read = read
        self._cache: dict[str, list[ast.AST] | None] = {}

    def defs(self, path: str) -> list[ast.AST]:
        """Every ``def`` of the module at ``path`` (empty when it cannot be read or parsed)."""
        if path not in self._cache:
            try:
                mod = ast.parse(self._read(path), filename=path)
                self._cache[path] = [n for n in ast.walk(mod) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            except (KeyError, OSError, SyntaxError, ValueError, RecursionError):
                self._cache[path] = None
        return self._cache[path] or []

    def enclosing(self, path: str, line: int) -> ast.AST | None:
        """The innermost ``def`` of ``path`` whose lines hold ``line``."""
        best = None
        for d in self.defs(path):
            start = min([d.lineno] + [x.lineno for x in d.decorator_list])
            if start <= line <= (d.end_lineno or d.lineno):
                if best is None or d.lineno >= best.lineno:
                    best = d
        return best


def _protocol_checker(protocol: str) -> str:
    """The runner's checker function of a protocol: ``SupportsEagle3`` -> ``supports_eagle3``."""
    name = protocol[len("Supports"):] if protocol.startswith("Supports") else protocol
    return "supports_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _calls(node: ast.AST, name: str) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            fn = sub.func
            if (isinstance(fn, ast.Name) and fn.id == name) or (isinstance(fn, ast.Attribute) and fn.attr == name):
                return True
    return False


def _raise_texts(fn: ast.AST) -> list[str]:
    """The constant text pieces (12 characters or more) of the messages ``fn`` raises."""
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for c in ast.walk(node.exc):
                if isinstance(c, ast.Constant) and isinstance(c.value, str) and len(c.value.strip()) >= 12:
                    out.append(c.value.strip())
    return out


def attribute(frames: list[tuple[str, int, str]], findings: list[Finding], spans: FunctionSpans,
              message: str = "") -> Attribution:
    """The gate of the innermost engine frame that matches a finding (see the module docstring).

    Args:
        frames: :func:`engine_frames`, innermost last.
        findings: the target's findings from the scan of the same tree.
        spans: the tree's function spans.
    Returns:
        An :class:`Attribution` (``gate`` :data:`UNMODELLED` when nothing matches).
    """
    where = f"{frames[-1][0]}:{frames[-1][1]}" if frames else None
    function = frames[-1][2] if frames else None
    blocking = [f for f in findings if f.severity in (Severity.ERROR, Severity.UNKNOWN) and f.path and f.line]
    checkers = {}
    for f in blocking:
        protocol = getattr(f.data, "protocol", None)
        if f.gate == "interface" and isinstance(protocol, str):
            checkers[_protocol_checker(protocol)] = f.gate
    for path, line, _fn in reversed(frames):
        fdef = spans.enclosing(path, line)
        for f in blocking:
            if f.path != path:
                continue
            if f.line == line or (fdef is not None and spans.enclosing(path, f.line) is fdef):
                return Attribution(f.gate, where, function)
        for f in blocking:
            # where the engine enforces the gate, when the scan recorded it apart from the
            # finding's own place (aux-capture: the protocol default that asserts the holder
            # inherits EagleModelMixin)
            at = getattr(f.data, "enforced_at", None)
            if isinstance(at, (list, tuple)) and len(at) == 2 and at[0] == path and isinstance(at[1], int) and (
                    at[1] == line or (fdef is not None and spans.enclosing(path, at[1]) is fdef)):
                return Attribution(f.gate, where, function)
        if fdef is not None:
            for checker, gate in checkers.items():
                if _calls(fdef, checker):
                    return Attribution(gate, where, function)
    if message:
        # a validator's error re-raised by a library without its frames (pydantic's ValidationError
        # carries the message of the ValueError raised in SpeculativeConfig._verify_args): the
        # gate whose recorded function raises a message with the same text
        for f in blocking:
            fdef = spans.enclosing(f.path, f.line)
            if fdef is not None and any(t in message for t in _raise_texts(fdef)):
                return Attribution(f.gate, where, function)
    return Attribution(UNMODELLED, where, function)
