"""Google ADK integration (``pip install 'codeact[adk]'``): ADK function tools in codeact
agents, and codeact agents in ADK.

``from_adk([FunctionTool(f, require_confirmation=True), LongRunningFunctionTool(g), h])`` gives
codeact tools with the same name, description, parameters and flags; a ``tool_context``
parameter receives codeact's ``ToolContext`` (``state`` writes become the event's
``state_delta``, as in ADK).

``CodeActAdkAgent.wrap(codeact_agent)`` is an ADK ``BaseAgent``: an ``LlmAgent`` sub-agent or an
``AgentTool``. Not yet: script, tool call and result events in ADK's shape (they come with the
durability work's event model), and approving a paused run from ADK's confirmation flow.
"""

from __future__ import annotations

from .. import require

require("google.adk", "adk")

from ._agent import CodeActAdkAgent  # noqa: E402
from ._tools import from_adk  # noqa: E402

__all__ = ("CodeActAdkAgent", "from_adk")
