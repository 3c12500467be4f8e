"""Google ADK integration (``pip install 'codeact[adk]'``), first part: ADK function tools in
codeact agents.

``from_adk([FunctionTool(f, require_confirmation=True), LongRunningFunctionTool(g), h])`` gives
codeact tools with the same name, description, parameters and flags; a ``tool_context``
parameter receives codeact's ``ToolContext`` (``state`` writes become the event's
``state_delta``, as in ADK). Not yet: a ``BaseAgent`` wrapper so a ``CodeActAgent`` can be an
``LlmAgent`` sub-agent or an ``AgentTool`` (it builds on the durability work's event model).
"""

from __future__ import annotations

from .. import require

require("google.adk", "adk")

from ._tools import from_adk  # noqa: E402

__all__ = ("from_adk",)
