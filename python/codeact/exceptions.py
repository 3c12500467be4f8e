"""The exception tree of codeact, defined once.

``CodeActError`` is the root. Script mistakes (a syntax error, an uncaught exception, a
resource limit) are never exceptions on the host: they come back as ``Raised`` steps and
are fed back to the model. The classes here are for host failures, which abort a run.
"""

from __future__ import annotations

__all__ = ("CodeActError", "CodeRuntimeError", "SnapshotError", "ValueConversionError")


class CodeActError(Exception):
    """Root of every exception codeact raises on purpose."""


class CodeRuntimeError(CodeActError):
    """A host failure of a code runtime: bad snapshot bytes, an interpreter bug, misuse
    of a single-use ``PendingCall``. Never used for mistakes in a script."""


class SnapshotError(CodeRuntimeError):
    """Snapshot bytes that cannot be loaded: truncated, altered, foreign, written by another
    Monty version or snapshot format, or signed with another key (or unsigned when a key is
    required)."""


class ValueConversionError(CodeRuntimeError):
    """A host value that cannot cross into a script. Only None, bool, int, float, str, bytes,
    list, tuple and dict cross; the message names the offending type and where it sits."""
