"""Findings: what a rule reports about one target, and the verdict they add up to.

A :class:`Finding` is plain data with :meth:`Finding.as_dict`, so every output format (table,
JSON, SARIF, JUnit, Markdown) is a serialiser of the same records.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from auditor.cache import cacheable


#: The rule code of the finding that stands for a failure of the tool itself while auditing one
#: target (a rule or the index raised): the target is ``unknown`` and the command exits 3 after
#: its complete report.
INTERNAL_RULE = "EA000"


@cacheable
class Severity(str, Enum):
    """How a finding bears on the verdict."""

    ERROR = "error"  #: the gate blocks the target: vLLM refuses or crashes
    WARNING = "warning"  #: the target runs, but something is wrong or fragile
    UNKNOWN = "unknown"  #: the gate cannot be decided from what the tool can read


@cacheable
class Verdict(str, Enum):
    """The verdict for one target and method."""

    SUPPORTED = "supported"
    BLOCKED = "blocked"
    UNKNOWN = "unknown"
    #: a registry row that is not a target (a drafter or a pooling model): nothing to audit
    NOT_A_TARGET = "not-a-target"

    @classmethod
    def of_targets(cls) -> tuple["Verdict", ...]:
        """The verdicts a target can get (every one but :attr:`NOT_A_TARGET`)."""
        return (cls.SUPPORTED, cls.BLOCKED, cls.UNKNOWN)


@cacheable
@dataclass
class Finding:
    """One rule's report on one target.

    ``rule``: the rule code (``EA301``); ``gate``: the gate id (``allowlist``); ``severity``;
    ``message``: one or two sentences; ``path``/``line``: where to look (POSIX path relative to
    the folder that contains ``vllm/``, 1-based line), or None; ``fix_available``: the rule has a
    codemod for this finding; ``data``: machine-readable details, a dataclass of the rule's own
    kind (its ``DATA``: missing members, the allowlist entries, …) or None.
    """

    rule: str
    gate: str
    severity: Severity
    message: str
    path: str | None = None
    line: int | None = None
    fix_available: bool = False
    data: Any = None

    def as_dict(self) -> dict:
        """The finding as JSON-ready data (severity as its string value)."""
        d = asdict(self)
        d["severity"] = self.severity.value
        d["data"] = d["data"] or {}
        return d

    def location(self) -> dict:
        """The finding as a gate of a matrix or compare cell: ``gate``, ``rule``, ``severity``,
        ``message``, ``path``, ``line``, ``fix_available`` (no rule-specific data)."""
        return {"gate": self.gate, "rule": self.rule, "severity": self.severity.value, "message": self.message,
                "path": self.path, "line": self.line, "fix_available": self.fix_available}

    @property
    def where(self) -> str:
        """``path:line`` (or ``path``, or ``""``)."""
        if self.path and self.line:
            return f"{self.path}:{self.line}"
        return self.path or ""


def fixable(verdict: Verdict, findings: list[Finding]) -> bool:
    """Blocked, every blocking finding has a codemod, and no gate is left unknown: what
    ``eagle-audit fix`` can patch (a matrix or compare cell's "blocked, a patch exists")."""
    errors = [f for f in findings if f.severity is Severity.ERROR]
    return (verdict is Verdict.BLOCKED and bool(errors) and all(f.fix_available for f in errors)
            and not any(f.severity is Severity.UNKNOWN for f in findings))


def verdict_of(findings: list[Finding]) -> Verdict:
    """``blocked`` if any finding is an error, else ``unknown`` if any is unknown, else
    ``supported``."""
    if any(f.severity is Severity.ERROR for f in findings):
        return Verdict.BLOCKED
    if any(f.severity is Severity.UNKNOWN for f in findings):
        return Verdict.UNKNOWN
    return Verdict.SUPPORTED
