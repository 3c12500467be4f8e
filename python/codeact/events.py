"""The event vocabulary: ``Content`` / ``Part`` (a message), ``Event`` / ``EventActions`` (one
entry of a session's history), the function call and response parts, and ``PendingCallInfo``
(a call of a paused script, as ``Runner.pending`` lists it).

The bottom layer with ``codeact.exceptions``: models, guardrails, sessions, tools and the agent
import it; it imports nothing else from codeact. The shapes follow Google ADK's Python types
(``google.adk.events.Event``, ``google.genai.types.Content``), so agent developers meet
familiar names.
"""

from __future__ import annotations

import os
import time
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    ValidationInfo,
    field_serializer,
    field_validator,
)

__all__ = (
    "CALL_ACCEPTS",
    "CALL_AWAITS",
    "INTERMEDIATE_KINDS",
    "CallKind",
    "CodeExecutionResult",
    "Content",
    "Event",
    "EventActions",
    "ExecutableCode",
    "FunctionCall",
    "FunctionResponse",
    "Part",
    "PendingCallInfo",
    "ToolConfirmation",
    "UsageMetadata",
    "new_id",
)


_UUID4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)


def new_id() -> str:
    """A fresh random identifier: a version 4 UUID (RFC 9562) in 32 lowercase hex digits, as
    ``uuid.uuid4().hex`` gives, made without building a ``UUID`` object (a few of these are
    made per turn)."""
    return f"{int.from_bytes(os.urandom(16), 'big') & _UUID4_CLEAR | _UUID4_SET:032x}"


class FunctionCall(BaseModel):
    """A tool call surfaced to the caller (a long-running call awaiting its result)."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class FunctionResponse(BaseModel):
    """The result of a tool call, sent back by the caller (completes a long-running call).

    ``id`` is the call key of the pending call; it may be omitted only when exactly one call
    is pending. ``error`` (text) instead of ``response`` says the call failed: the script's
    ``call_tool`` raises ``RuntimeError`` with that text, which the script may catch
    (``Runner.complete(error=...)``; ADK's ``{"error": ...}`` function responses map to it)."""

    name: str
    response: Any = None
    id: str | None = None
    error: str | None = None


class ExecutableCode(BaseModel):
    """A script the model wrote and the agent ran (``google.genai.types.ExecutableCode``).

    Attributes:
        code: the script as run (extracted from the model's reply).
        language: always ``"PYTHON"``.
    """

    code: str
    language: str = "PYTHON"


class CodeExecutionResult(BaseModel):
    """How a script ended (``google.genai.types.CodeExecutionResult``).

    Attributes:
        outcome: ``"OUTCOME_OK"`` (the script returned a value), ``"OUTCOME_FAILED"`` (it
            raised or returned an error) or ``"OUTCOME_DEADLINE_EXCEEDED"`` (it broke a
            per-script budget: ``max_tool_calls`` / ``max_script_seconds``).
        output: what the script printed (its stdout, secret values redacted, middle
            truncated beyond ``CodeActAgent.max_observation_chars``).
    """

    outcome: str = "OUTCOME_OK"
    output: str = ""


class Part(BaseModel):
    """One piece of a message: text, a function call or response, a script
    (``executable_code``) or its result (``code_execution_result``)."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    thought: bool = False
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    executable_code: ExecutableCode | None = None
    code_execution_result: CodeExecutionResult | None = None

    @classmethod
    def from_text(cls, text: str) -> Part:
        """A text part."""
        return cls(text=text)


class Content(BaseModel):
    """A message: a ``role`` (``"user"`` or ``"model"``) and its parts."""

    role: str = "user"
    parts: list[Part] = Field(default_factory=list)

    @classmethod
    def from_text(cls, text: str, role: str = "user") -> Content:
        """A message of one text part, from ``role`` (``"user"`` or ``"model"``)."""
        return cls(role=role, parts=[Part(text=text)])

    @property
    def text(self) -> str:
        """The non-thought text parts, concatenated without separator."""
        return "".join(p.text for p in self.parts if p.text is not None and not p.thought)


class UsageMetadata(BaseModel):
    """Model usage (the names of ``google.genai.types.GenerateContentResponseUsageMetadata``).

    On a model-reply event: that one call. On the event ending a run: the run's totals.

    Attributes:
        prompt_token_count / candidates_token_count / total_token_count: tokens as the
            model reported them (``None`` when it did not say).
        model_calls: model calls counted (codeact's addition; 1 on a model-reply event).
    """

    prompt_token_count: int | None = None
    candidates_token_count: int | None = None
    total_token_count: int | None = None
    model_calls: int = 0


class ToolConfirmation(BaseModel):
    """A human-in-the-loop request: the call ``function_call_id`` of ``tool_name`` with
    ``args`` waits for an approve / deny decision."""

    tool_name: str
    function_call_id: str
    args: dict[str, Any] = Field(default_factory=dict)
    hint: str = ""


class EventActions(BaseModel):
    """Side effects an event carries. The session service applies ``state_delta`` in the
    same transaction that appends the event.

    Attributes:
        state_delta: keys to set in session state (a ``None`` value is stored as null).
            ``app:`` keys are app-wide, ``user:`` keys per user, ``temp:`` keys are never
            persisted.
        artifact_delta: artifact name -> new version.
        transfer_to_agent: hand the conversation to this agent.
        escalate: end the run and let the parent decide.
        skip_summarization: end the run with the tool result as is.
        requested_tool_confirmations: call key -> confirmation request (human in the loop).
        route: a route (or list of routes) for a workflow graph edge, as ADK 2's
            ``EventActions.route``; a tool sets ``tool_context.actions.route`` and the next
            stored event carries it (codeact's extension: the model loop itself ignores it).
    """

    # NaN and the infinities in a state delta are stored as JSON's NaN/Infinity constants
    # (read back as floats), never as null.
    model_config = ConfigDict(ser_json_inf_nan="constants")

    state_delta: dict[str, Any] = Field(default_factory=dict)
    artifact_delta: dict[str, int] = Field(default_factory=dict)
    transfer_to_agent: str | None = None
    escalate: bool = False
    skip_summarization: bool = False
    requested_tool_confirmations: dict[str, ToolConfirmation] = Field(default_factory=dict)
    route: bool | int | str | list[bool | int | str] | None = None

    @field_serializer("state_delta")
    def _write_state_delta(self, delta: dict[str, Any], info: FieldSerializationInfo) -> dict[str, Any]:
        """In JSON, each value in its tagged form (``codeact._values.encode_value``):
        a tuple, a set, bytes or a dict with non-str keys is stored exactly, never lost."""
        if not info.mode_is_json():
            return delta
        from ._values import encode_state

        return encode_state(delta)

    @field_validator("state_delta", mode="before")
    @classmethod
    def _read_state_delta(cls, delta: Any, info: ValidationInfo) -> Any:
        """From JSON, each value read back from its tagged form (plain JSON as it is)."""
        if info.mode != "json" or not isinstance(delta, dict):
            return delta
        from ._values import decode_state

        return decode_state(delta)


class Event(BaseModel):
    """One entry of a session's history.

    Attributes:
        id: unique id.
        invocation_id: the run that produced it.
        author: ``"user"`` or the agent's name.
        content: the message, if any.
        actions: side effects (state delta, transfer, ...).
        timestamp: seconds since the epoch.
        long_running_tool_ids: call keys of long-running calls this event suspends on.
        error_code / error_message: set when the run ended with a run-level error.
        interrupted / turn_complete: the run paused for human input.
        usage_metadata: model usage: of one call on a model-reply event, the run's totals
            on the event that ends a run.
        custom_metadata: ``{"codeact_kind": ...}`` on the intermediate events of a run
            (``"model_reply"``, ``"script_result"``, ``"tool_call"``, ``"tool_response"``);
            see docs/events.md.
        partial: True on a live preview yielded under ``RunConfig(streaming=True)``: a piece
            of the model's reply as it arrives (kind ``"model_reply"``, one text part holding
            the new text) or of what the script prints while it runs (kind
            ``"script_output"``). A partial event is never stored, never part of the event
            log and never ``is_final_response()``; the stored ``model_reply`` /
            ``script_result`` that follows holds the complete text. ``None`` otherwise (and
            left out of the stored JSON).
    """

    model_config = ConfigDict(ser_json_inf_nan="constants")  # as EventActions: NaN is never null

    id: str = Field(default_factory=new_id)
    invocation_id: str = ""
    author: str
    content: Content | None = None
    actions: EventActions = Field(default_factory=EventActions)
    timestamp: float = Field(default_factory=time.time)
    branch: str | None = None
    long_running_tool_ids: list[str] = Field(default_factory=list)
    error_code: str | None = None
    error_message: str | None = None
    interrupted: bool = False
    turn_complete: bool = False
    usage_metadata: UsageMetadata | None = None
    custom_metadata: dict[str, Any] | None = None
    partial: bool | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def text(self) -> str:
        """The content's text (``Content.text``), or ``""`` when there is no content."""
        return self.content.text if self.content is not None else ""

    def get_function_calls(self) -> list[FunctionCall]:
        """The ``function_call`` parts of the content."""
        parts = self.content.parts if self.content is not None else []
        return [p.function_call for p in parts if p.function_call is not None]

    def get_function_responses(self) -> list[FunctionResponse]:
        """The ``function_response`` parts of the content."""
        parts = self.content.parts if self.content is not None else []
        return [p.function_response for p in parts if p.function_response is not None]

    @property
    def kind(self) -> str | None:
        """``custom_metadata["codeact_kind"]``: what an intermediate event of a run shows, or None."""
        return (self.custom_metadata or {}).get("codeact_kind")

    def is_final_response(self) -> bool:
        """True when the event ends the run from the caller's point of view: a final
        answer, an error, a transfer, an escalation, or a pause for a long-running tool's
        result. A pause for a human decision (``interrupted``) is not final: a confirmation
        request (as in Google ADK, it asks the caller for a decision;
        ``actions.requested_tool_confirmations`` holds the calls) or the announcement of a
        call in doubt (it awaits rerun, skip or fail). Progress events (``INTERMEDIATE_KINDS``)
        are never final, nor is a ``partial`` event."""
        if self.partial:
            return False
        a = self.actions
        if (a.requested_tool_confirmations or self.interrupted) and not self.error_code:
            return False  # a pause for a human decision (a confirmation, a call in doubt)
        if not self.error_code and (self.kind is not None and self.kind in INTERMEDIATE_KINDS):
            return False
        return bool(
            self.error_code
            or a.transfer_to_agent
            or a.escalate
            or a.skip_summarization
            or self.long_running_tool_ids
            or (self.content is not None and self.author != "user")
        )


INTERMEDIATE_KINDS = frozenset(
    {"model_reply", "script_result", "tool_call", "tool_response", "in_doubt", "turn_discarded", "script_output"}
)
"""``Event.kind`` values of events that show a run's progress (never final)."""


class PendingCallInfo(BaseModel):
    """A tool call of a suspended script waiting for the caller.

    Attributes:
        call_key: unique within the session; pass it to ``Runner.approve`` / ``deny`` /
            ``complete`` (also ``ToolContext.function_call_id`` and the key of
            ``Event.actions.requested_tool_confirmations``).
        tool: the tool name.
        args: the bound arguments.
        kind: ``"confirmation"`` (waits for approve / deny), ``"completion"`` (a
            long-running tool started; waits for its result) or ``"in_doubt"`` (a recovered
            call that may have run before the runner stopped; waits for
            ``Runner.resolve_in_doubt``: re-run, skip with a value, or fail).
        invocation_id: the invocation whose turn paused.
        hint: what the long-running tool returned when it started, or the confirmation
            hint, as text (None when there is none).
        digest: 16 hex digits identifying this exact call (key, tool, arguments); pass it as
            ``Runner.approve(digest=...)`` so a decision made on a stale view is refused.

    ``tool`` and ``args`` are read from the verified continuation, never from the stored
    record (SPEC §5 v3).
    """

    call_key: str
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    kind: Literal["confirmation", "completion", "in_doubt"]
    invocation_id: str
    hint: str | None = None
    digest: str = ""

    @property
    def accepts(self) -> tuple[str, ...]:
        """The decisions this call accepts (``CALL_ACCEPTS``): ``("approve", "deny")`` for a
        confirmation, ``("complete", "deny")`` for a completion, ``("rerun", "skip", "fail")``
        (``Decision(verb="resolve", action=...)``) for a call in doubt."""
        return CALL_ACCEPTS[self.kind]

    @property
    def awaits(self) -> str:
        """What the call waits for, as a phrase (``CALL_AWAITS``): ``"awaits approval or
        denial"``, ``"awaits its result"`` or ``"is in doubt: awaits rerun, skip or fail"``."""
        return CALL_AWAITS[self.kind]


CallKind = Literal["confirmation", "completion", "in_doubt"]
"""What a pending call waits for: the one kind vocabulary of the suspension protocol."""

CALL_ACCEPTS: dict[str, tuple[str, ...]] = {
    "confirmation": ("approve", "deny"),
    "completion": ("complete", "deny"),
    "in_doubt": ("rerun", "skip", "fail"),
}
"""The decisions each kind of pending call accepts (SPEC §5 v4); any other is refused before
anything runs."""

CALL_AWAITS: dict[str, str] = {
    "confirmation": "awaits approval or denial",
    "completion": "awaits its result",
    "in_doubt": "is in doubt: awaits rerun, skip or fail",
}
"""What each kind of pending call waits for, as refusals and listings say it."""
