"""codeact[mcp]: an MCP server's tools as a codeact toolset, over stdio and streamable HTTP,
against the small in-repo server (examples/mcp_toolset/server.py) started by the tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
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
    assert events[-1].text == "3 0 | McpToolError: unknown item 'caviar'"
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


# ------------------------------------------------------------------ a stdio server that dies


def _kill_stdio_servers(marker: str) -> int:
    """SIGKILLs this process's children whose command line holds ``marker`` (the stdio servers
    of these tests; the HTTP fixture's server is left alone)."""
    killed = 0
    for path in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        for pid in path.read_text().split():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline and "--http" not in cmdline:
                os.kill(int(pid), signal.SIGKILL)
                killed += 1
    return killed


WRAPPER = """
import os, runpy, sys
if os.path.exists(sys.argv[1]):
    sys.exit(3)  # the server cannot start any more
sys.argv = [{server!r}]
runpy.run_path({server!r}, run_name="__main__")
"""

LEVELS = py('{"type": "final_result", "value": call_tool("items")}')


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_killed_stdio_server_is_reconnected_within_the_call(anyio_backend, tmp_path):
    wrapper = tmp_path / "serve_once.py"
    wrapper.write_text(WRAPPER.format(server=str(SERVER)))
    model = ScriptedModel([LEVELS, LEVELS])
    async with McpToolset.stdio(sys.executable, [str(wrapper), str(tmp_path / "stop")]) as toolset:
        agent = CodeActAgent(name="shop", model=model, runtime=MontyRuntime(), toolsets=[toolset])
        runner = Runner(app_name="a", agent=agent, auto_create_session=True)
        first = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="items?")]
        assert first[-1].text is not None and "cheese" in first[-1].text
        assert _kill_stdio_servers(str(wrapper)) == 1
        await anyio.sleep(0.2)
        second = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="again")]
    assert second[-1].error_code is None, second[-1].error_message
    assert second[-1].text is not None and "cheese" in second[-1].text  # the script never saw the outage
    assert _kill_stdio_servers(str(wrapper)) == 0  # async with stopped the new server


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_server_that_stays_down_is_a_host_error_not_a_script_error(anyio_backend, tmp_path):
    from codeact import ToolHostError
    from codeact.integrations.mcp import McpConnectionError

    wrapper = tmp_path / "serve_once.py"
    wrapper.write_text(WRAPPER.format(server=str(SERVER)))
    script = py(
        'try:\n    r = call_tool("items")\nexcept Exception as e:\n    r = "caught"\n'
        '{"type": "final_result", "value": r}'
    )
    model = ScriptedModel([script, script])
    async with McpToolset.stdio(sys.executable, [str(wrapper), str(tmp_path / "stop")]) as toolset:
        agent = CodeActAgent(name="shop", model=model, runtime=MontyRuntime(), toolsets=[toolset])
        runner = Runner(app_name="a", agent=agent, auto_create_session=True)
        await toolset.get_tools()
        (tmp_path / "stop").write_text("")
        assert _kill_stdio_servers(str(wrapper)) == 1
        await anyio.sleep(0.2)
        with pytest.raises(McpConnectionError, match="unreachable: the connection broke") as info:
            async for _ in runner.run_async(user_id="u", session_id="s", new_message="items?"):
                pass
        assert isinstance(info.value, ToolHostError)
        assert len(model.requests) == 1  # the failure never went back to the model
        # The server is back: the next run on the session picks the turn up as after a crash.
        (tmp_path / "stop").unlink()
        events = [e async for e in runner.run_async(user_id="u", session_id="s")]
    assert events[-1].text is not None and "cheese" in events[-1].text
    assert len(model.requests) == 1


async def test_an_mcp_tool_error_is_one_clean_message_logged_at_info(anyio_backend, caplog):
    import logging

    toolset = McpToolset.stdio(sys.executable, [str(SERVER)])
    caplog.set_level(logging.DEBUG, logger="codeact")
    async with toolset:
        callables = toolset.as_callables(await toolset.get_tools())
        code = 'try:\n    call_tool("stock", {"item": "caviar"})\nexcept RuntimeError as e:\n    m = str(e)\nm'
        result = await MontyRuntime().arun(code, tools=callables)
    assert result.value == "McpToolError: unknown item 'caviar'"
    [record] = [r for r in caplog.records if "caviar" in r.getMessage()]
    assert record.levelno == logging.INFO
