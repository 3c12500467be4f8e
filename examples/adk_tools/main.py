"""A Google ADK ``FunctionTool`` in a CodeAct agent (codeact[adk]): same tool, same state delta.

The tool writes session state through ``tool_context.state`` as it would under ADK's
``LlmAgent``; the scripted model calls it twice from one script.

Run: ``pip install 'codeact[adk]' && python examples/adk_tools/main.py``
"""

from __future__ import annotations

from typing import Any

from google.adk.tools import FunctionTool, ToolContext

from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel
from codeact.integrations.adk import from_adk


def record(item: str, qty: int, tool_context: ToolContext) -> dict[str, Any]:
    """Records an order line.

    Args:
        item: what was ordered.
        qty: how many.
    """
    lines = list(tool_context.state.get("lines", []))
    tool_context.state["lines"] = [*lines, f"{qty} {item}"]
    return {"ok": True, "lines": len(lines) + 1}


SCRIPT = """```python
call_tool("record", {"item": "tea", "qty": 1})
n = call_tool("record", {"item": "cake", "qty": 2})["lines"]
{"type": "final_result", "value": f"{n} lines recorded"}
```"""


def main() -> None:
    agent = CodeActAgent(
        name="shop", model=ScriptedModel([SCRIPT]), runtime=MontyRuntime(), tools=from_adk([FunctionTool(record)])
    )
    runner = Runner(app_name="shop", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
    for event in runner.run(user_id="me", session_id="s1", new_message="Tea and two cakes."):
        if event.actions.state_delta.get("lines"):
            print("state delta:", event.actions.state_delta["lines"])
        if event.is_final_response():
            print(event.text)


if __name__ == "__main__":
    main()
