"""A CodeAct agent whose tools come from an MCP server (codeact[mcp]).

The server (``server.py`` beside this file) is launched over stdio; the scripted model writes
one script that calls three of its tools. Swap ``McpToolset.stdio(...)`` for
``McpToolset.http("http://127.0.0.1:8765/mcp")`` to use streamable HTTP
(start the server with ``python examples/mcp_toolset/server.py --http 8765``).

Run: ``pip install 'codeact[mcp]' && python examples/mcp_toolset/main.py``
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel
from codeact.integrations.mcp import McpToolset

SCRIPT = """```python
low = [name for name in call_tool("items") if call_tool("stock", {"item": name}) < 5]
for name in low:
    call_tool("restock", {"item": name, "count": 10})
print("restocked", low)
{"type": "final_result", "value": {name: call_tool("stock", {"item": name}) for name in low}}
```"""


async def main() -> None:
    server = Path(__file__).with_name("server.py")
    async with McpToolset.stdio(sys.executable, [str(server)]) as inventory:
        agent = CodeActAgent(name="shop", model=ScriptedModel([SCRIPT]), runtime=MontyRuntime(), toolsets=[inventory])
        runner = Runner(
            app_name="shop", agent=agent, session_service=InMemorySessionService(), auto_create_session=True
        )
        async for event in runner.run_async(user_id="me", session_id="s1", new_message="Restock what is low."):
            if event.is_final_response():
                print(f"[{event.author}] {event.text}")


if __name__ == "__main__":
    anyio.run(main)
