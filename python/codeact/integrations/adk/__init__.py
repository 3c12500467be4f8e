"""Google ADK integration (``pip install 'codeact[adk]'``): ADK function tools in codeact
agents, and codeact agents in ADK.

``from_adk([FunctionTool(f, require_confirmation=True), LongRunningFunctionTool(g), h])`` gives
codeact tools with the same name, description, parameters and flags (a ``require_confirmation``
predicate is asked per call); a ``tool_context`` parameter receives codeact's ``ToolContext``
(``state`` writes become the event's ``state_delta``, as in ADK).

``CodeActAdkAgent.wrap(codeact_agent)`` is an ADK ``BaseAgent``: the root agent of an ADK
``Runner``, an ``LlmAgent`` sub-agent or an ``AgentTool``. Its runs show as ADK events (the
model's reply with its ``executable_code``, the script's ``code_execution_result``, tool
``function_call`` / ``function_response`` pairs, the answer, state deltas, usage:
``to_adk_events``), and a call awaiting a human goes through ADK's ``adk_request_confirmation``
flow; a call in doubt (it may have run before its runner stopped) through ADK's
``adk_request_input``, answered with rerun, skip (with a value) or fail.
"""

from __future__ import annotations

from .. import require

require("google.adk", "adk")

from ._agent import (  # noqa: E402
    IN_DOUBT_SCHEMA,
    REQUEST_CONFIRMATION,
    REQUEST_INPUT,
    CodeActAdkAgent,
    confirmation_call_id,
    in_doubt_call_id,
    input_call_id,
    to_adk_events,
)
from ._tools import from_adk  # noqa: E402

__all__ = (
    "IN_DOUBT_SCHEMA",
    "REQUEST_CONFIRMATION",
    "REQUEST_INPUT",
    "CodeActAdkAgent",
    "confirmation_call_id",
    "from_adk",
    "in_doubt_call_id",
    "input_call_id",
    "to_adk_events",
)
