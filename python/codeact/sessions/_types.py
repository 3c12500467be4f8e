"""``Session``: a conversation (its state and its events), the unit the session services store.

The event vocabulary it is made of (``Content``, ``Part``, ``Event``, ...) is defined in
``codeact.events`` and re-exported here.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field, FieldSerializationInfo, ValidationInfo, field_serializer, field_validator

from ..events import (
    INTERMEDIATE_KINDS,
    CodeExecutionResult,
    Content,
    Event,
    EventActions,
    ExecutableCode,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
    UsageMetadata,
    new_id,
)

__all__ = (
    "INTERMEDIATE_KINDS",
    "CodeExecutionResult",
    "Content",
    "Event",
    "EventActions",
    "ExecutableCode",
    "FunctionCall",
    "FunctionResponse",
    "Part",
    "Session",
    "ToolConfirmation",
    "UsageMetadata",
    "new_id",
)


class Session(BaseModel):
    """A conversation: its state (merged app, user and session scopes) and its events."""

    id: str = Field(default_factory=new_id)
    app_name: str
    user_id: str
    state: dict[str, Any] = Field(default_factory=dict)
    events: list[Event] = Field(default_factory=list)
    last_update_time: float = Field(default_factory=time.time)

    @field_serializer("state")
    def _write_state(self, state: dict[str, Any], info: FieldSerializationInfo) -> dict[str, Any]:
        """In JSON, each value in its tagged form (as the stores keep it: ``state_to_json``)."""
        if not info.mode_is_json():
            return state
        from .._values import encode_state

        return encode_state(state)

    @field_validator("state", mode="before")
    @classmethod
    def _read_state(cls, state: Any, info: ValidationInfo) -> Any:
        """From JSON, each value read back from its tagged form."""
        if info.mode != "json" or not isinstance(state, dict):
            return state
        from .._values import decode_state

        return decode_state(state)
