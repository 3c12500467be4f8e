"""Moved to ``codeact.runtime._stepper`` (issue 47); this old private path re-exports it so
code written against it still imports. New code imports the new path."""

from ..runtime._stepper import INLINE_WAIT, await_ticket, run_step

__all__ = ("INLINE_WAIT", "await_ticket", "run_step")
