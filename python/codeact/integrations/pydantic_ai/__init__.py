"""pydantic-ai integration (``pip install 'codeact[pydantic-ai]'``).

- ``CodeActToolset(wrapped)``: one ``run_code`` tool whose scripts call ``wrapped``'s tools in
  process (approvals become codeact suspensions, surfaced as pydantic-ai deferred approvals;
  each pause settled once, across processes with ``session_service=``); what a script prints
  reaches the caller while it runs as ``ScriptOutputEvent`` (``RunContext.emit``).
- ``PydanticAIModel(model)``: any pydantic-ai model as a codeact model.
"""

from __future__ import annotations

from .. import require

require("pydantic_ai", "pydantic-ai")

from ._model import PydanticAIModel, to_messages  # noqa: E402
from ._toolset import PAUSE_METADATA_KEY, CodeActToolset, ScriptOutputEvent, pause_digest  # noqa: E402

__all__ = (
    "PAUSE_METADATA_KEY",
    "CodeActToolset",
    "PydanticAIModel",
    "ScriptOutputEvent",
    "pause_digest",
    "to_messages",
)
