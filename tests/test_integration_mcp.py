"""codeact[mcp]: an MCP server's tools as a codeact toolset, over stdio and streamable HTTP,
against the small in-repo server (examples/mcp_toolset/server.py) started by the tests."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="codeact[mcp] is not installed")

from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel
from codeact.integrations.mcp import McpToolError, McpToolset

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).resolve().parent.parent / "examples" / "mcp_toolset" / "server.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The example server over streamable HTTP, in a child process (a fresh inventory)."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the MCP test server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(params=["stdio", "http"])
def make_toolset(request: pytest.FixtureRequest):
    def make(**kwargs: object) -> McpToolset:
        if request.param == "stdio":
            return McpToolset.stdio(sys.executable, [str(SERVER)], **kwargs)  # type: ignore[arg-type]
        return McpToolset.http(request.getfixturevalue("http_url"), **kwargs)  # type: ignore[arg-type]

    return make


async def test_lists_the_server_tools_with_their_schemas(make_toolset, anyio_backend):
    async with make_toolset() as toolset:
        tools = {t.name: t for t in await toolset.get_tools()}
    assert set(tools) == {"stock", "items", "restock"}
    assert tools["restock"].parameters["required"] == ["item", "count"]
    assert tools["stock"].description == "How many of an item are in stock."


def py(code: str) -> str:
    return f"```python\n{code.strip()}\n```"


async def test_a_codeact_agent_script_calls_mcp_tools(make_toolset, anyio_backend):
    script = """
levels = {name: call_tool("inv_stock", {"item": name}) for name in call_tool("inv_items")}
try:
    call_tool("inv_stock", {"item": "caviar"})
except RuntimeError as e:
    missing = str(e)
print(levels)
{"type": "final_result", "value": f"{levels['cheese']} {levels['wine']} | {missing}"}
"""
    model = ScriptedModel([py(script)])
    async with make_toolset(prefix="inv") as toolset:
        agent = CodeActAgent(name="shop", model=model, runtime=MontyRuntime(), toolsets=[toolset])
        runner = Runner(app_name="a", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
        events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="levels?")]
    assert events[-1].error_code is None, events[-1].error_message
    assert events[-1].text == "3 0 | McpToolError: Error executing tool stock: unknown item 'caviar'"
    assert 'call_tool("inv_restock", {"item": <str>, "count": <int>})' in model.requests[0].system_instruction


async def test_confirmation_is_required_before_an_mcp_call(make_toolset, anyio_backend):
    model = ScriptedModel(
        [py('call_tool("restock", {"item": "wine", "count": 5})\n{"type": "final_result", "value": 1}')]
    )
    async with make_toolset(require_confirmation=["restock"]) as toolset:
        tools = {t.name: t for t in await toolset.get_tools()}
        assert tools["restock"].requires_confirmation and not tools["stock"].requires_confirmation
        agent = CodeActAgent(name="shop", model=model, runtime=MontyRuntime(), toolsets=[toolset])
        runner = Runner(app_name="a", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
        events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="restock")]
        [asked] = events[-1].actions.requested_tool_confirmations.values()
        assert (asked.tool_name, asked.args) == ("restock", {"item": "wine", "count": 5})
        # the server was not called
        assert await tools["stock"].run({"item": "wine"}, None) == 0  # type: ignore[arg-type]


async def test_without_async_with_each_call_opens_its_own_connection(make_toolset, anyio_backend):
    toolset = make_toolset()
    tools = {t.name: t for t in await toolset.get_tools()}
    assert await tools["items"].run({}, None) == ["bread", "cheese", "wine"]  # type: ignore[arg-type]
    with pytest.raises(McpToolError, match="unknown item 'x'"):
        await tools["stock"].run({"item": "x"}, None)  # type: ignore[arg-type]


async def test_one_call_runtime_api_with_mcp_tools(make_toolset, anyio_backend):
    async with make_toolset() as toolset:
        callables = toolset.as_callables(await toolset.get_tools())
        code = (
            'before = call_tool("stock", {"item": "bread"})\nr = call_tool("restock", {"item": "bread", "count": 2})\n'
        )
        code += 'print(r)\n[before, r["item_count"]]'
        result = await MontyRuntime().arun(code, tools=callables)
    before, after = result.value
    assert after == before + 2 and result.stdout == f"{{'item_count': {after}}}\n" and result.tool_calls == 2
