"""The session-state keys of codeact 0.1.0's checkpoints (format 1).

0.1.0 kept a paused script under ``codeact_pending`` in session state. This version stores
turns in the session's turn slot (``codeact.sessions.TurnRecord``) and only recognizes a
format-1 checkpoint to refuse it clearly (``codeact.stale_checkpoint``) and to discard it
(``Runner.discard_pending_checkpoint``); see docs/durability.md.
"""

from __future__ import annotations

__all__ = ("PENDING_STATE_KEY", "TURN_STATE_KEY")

PENDING_STATE_KEY = "codeact_pending"
"""The session state key under which codeact 0.1.0 kept a paused script (null when none)."""

TURN_STATE_KEY = "codeact_turn"
"""The session state key under which codeact 0.1.0 kept the prompt and transcript of the turn
a checkpoint belonged to."""
