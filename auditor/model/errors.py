"""User-facing error types of eagle-audit.

Every error the tool raises on purpose carries a single, clear, one-line message that
the command line prints as-is (no traceback). Anything else escaping is a bug.
"""

from __future__ import annotations


class AuditError(Exception):
    """Base class of every error meant for the user.

    Args:
        message: one line describing what went wrong and, when possible, what to do.
    """

    def __init__(self, message: str) -> None:
        """Store ``message`` (newlines are folded into spaces to keep it on one line).

        Args:
            message: the user-facing description of the problem.
        """
        message = " ".join(str(message).split())
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        """Return the one-line user-facing message."""
        return self.message


class UnknownModel(AuditError):
    """A model name (``--model``, or ``models`` in the settings) that names neither an
    architecture of the tree's registry nor a known model_type.

    Args:
        name: the name as the user gave it (kept as :attr:`name`, so that the command line can
            blame the file and key that set it).
        message: the one-line description, with the closest names.
    """

    def __init__(self, name: str, message: str) -> None:
        """Store ``message`` and the unknown ``name``."""
        super().__init__(message)
        self.name = name


class SourceError(AuditError):
    """The vLLM source tree to audit cannot be located, fetched or read.

    Raised for a missing path, a folder that is not a vLLM tree, a corrupt archive, an
    unknown release version, an unreachable package index, or a failed hash check.
    """
