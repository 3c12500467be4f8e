"""``CodeActCheckpoint``: a paused script, durable in session state (SPEC §5).

A checkpoint lives under ``codeact_pending`` in session state; it is written through an
event's ``state_delta``, so the session service stores it in the same transaction as the
event. Snapshot bytes are base64 in JSON.
"""

from __future__ import annotations

import base64
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from ..sessions._types import Content

__all__ = (
    "PENDING_STATE_KEY",
    "TURN_STATE_KEY",
    "AwaitingCompletion",
    "AwaitingConfirmation",
    "CodeActCheckpoint",
    "Disposition",
    "PendingResult",
    "PendingToolCall",
    "Resolved",
)

PENDING_STATE_KEY = "codeact_pending"
"""The session state key holding the pending checkpoint (null when none)."""

TURN_STATE_KEY = "codeact_turn"
"""The session state key holding the system prompt and transcript of the turn a checkpoint
belongs to. They do not change within a turn, so they are written once per turn (with the
turn's first checkpoint, in the same event) instead of with every checkpoint."""

CHECKPOINT_VERSION = 1


class PendingToolCall(BaseModel):
    """The tool call a checkpoint is paused at.

    Attributes:
        call_key: unique within the session (``<invocation id>:<iteration>:<call id>``);
            decisions and long-running results are matched by it.
        call_id: the interpreter's per-script counter.
        tool: the tool name.
        args: the bound arguments.
    """

    call_key: str
    call_id: int
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class PendingResult(BaseModel):
    """Write-ahead checkpoint of an inline call: the tool may or may not have run;
    recovery runs it (again). At-least-once."""

    kind: Literal["pending_result"] = "pending_result"


class Resolved(BaseModel):
    """After-checkpoint: the tool's outcome is stored; recovery resumes the script with it
    and never runs the tool again."""

    kind: Literal["resolved"] = "resolved"
    value: Any = None
    error: str | None = None
    error_type: str = "RuntimeError"


class AwaitingConfirmation(BaseModel):
    """Waiting for a human decision (``RunConfig.tool_confirmation_decisions``)."""

    kind: Literal["awaiting_confirmation"] = "awaiting_confirmation"


class AwaitingCompletion(BaseModel):
    """Waiting for a long-running tool's result, sent as a function response."""

    kind: Literal["awaiting_completion"] = "awaiting_completion"
    pending_handle: Any = None


Disposition = Annotated[
    PendingResult | Resolved | AwaitingConfirmation | AwaitingCompletion, Field(discriminator="kind")
]


class CodeActCheckpoint(BaseModel):
    """A script paused at a tool call, with everything needed to resume it in another
    process.

    Attributes:
        version: checkpoint format version.
        agent_name: the agent that owns it.
        invocation_id: the invocation that paused.
        iteration: the model turn it paused in (counts toward ``max_iterations``).
        system_prompt: the system prompt of the run.
        transcript: the conversation sent to the model so far.
        turn_stdout: what the script printed this turn before pausing.
        snapshot: the interpreter continuation (bytes; base64 in JSON).
        call: the pending call.
        disposition: why it was written and how to resume.
        tool_roster: sorted tool names when it was written; a different roster makes it stale.
        namespace: with ``persist_namespace``, what carries between scripts (definitions as
            source, plain variables as values) and how to read the paused script's result.
        created_at: seconds since the epoch.
    """

    version: int = CHECKPOINT_VERSION
    agent_name: str
    invocation_id: str
    iteration: int
    system_prompt: str = ""
    transcript: list[Content] = Field(default_factory=list)
    turn: str = ""
    turn_stdout: str = ""
    snapshot: Annotated[bytes, Field(description="base64")]
    call: PendingToolCall
    disposition: Disposition
    tool_roster: list[str]
    namespace: dict[str, Any] | None = None
    created_at: float = Field(default_factory=time.time)

    def to_state(self) -> dict[str, Any]:
        """The JSON-compatible form stored in session state."""
        data = self.model_dump(mode="python", exclude={"snapshot", "transcript"})
        data["snapshot"] = base64.b64encode(self.snapshot).decode("ascii")
        data["transcript"] = [c.model_dump(mode="json", exclude_none=True) for c in self.transcript]
        return data

    @classmethod
    def from_state(cls, data: Any, turn: Any = ...) -> CodeActCheckpoint:
        """Reads a checkpoint from session state: ``data`` under ``codeact_pending`` and, when
        the checkpoint refers to its turn record, ``turn`` under ``codeact_turn``.

        Without ``turn`` the checkpoint is read on its own (its ``system_prompt`` and
        ``transcript`` then stay empty when they live in the turn record).

        Raises:
            pydantic.ValidationError / ValueError: malformed data, or a turn record that is
                missing or belongs to another turn.
        """
        if not isinstance(data, dict):
            raise ValueError(f"checkpoint must be a dict, got {type(data).__name__}")
        raw = dict(data)
        if "transcript" not in raw and raw.get("turn") and turn is not ...:
            if not isinstance(turn, dict) or turn.get("turn") != raw["turn"]:
                raise ValueError(f"the record of turn {raw['turn']!r} is missing from session state")
            raw["system_prompt"] = turn.get("system_prompt", "")
            raw["transcript"] = turn.get("transcript", [])
        snap = raw.get("snapshot")
        if isinstance(snap, str):
            raw["snapshot"] = base64.b64decode(snap.encode("ascii"), validate=True)
        return cls.model_validate(raw)
