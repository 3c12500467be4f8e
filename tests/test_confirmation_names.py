"""Issue 46 item 2: ``require_tool_confirmation`` names a tool by its exposed name or by its name
before a toolset prefix, in every kind of toolset and in a sub-agent reached by transfer; a name
that matches no tool is an ``UnknownToolError`` with a did-you-mean, when the agent is built, or
(for a toolset listed at run start) from ``run_async`` before anything runs.

Real interpreter (``MontyRuntime``), real SQLite files, a scripted model; the MCP server is the
SDK's own, in process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from codeact import (
    CodeActAgent,
    FunctionTool,
    MontyRuntime,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
    Tool,
    Toolset,
    UnknownToolError,
)
from codeact.toolsets import FunctionToolset, tool_names

pytestmark = pytest.mark.anyio

APP, USER, SESSION = "app", "u", "s"
NAMES = [["delete_record"], ["crm_delete_record"]]
DELETE_SCRIPT = 'r = call_tool("crm_delete_record", {"record_id": 7})\n{"type": "final_result", "value": r}'


def fence(code: str) -> str:
    return f"```python\n{code}\n```"


class Ledger:
    """What the tools did (the test's view of side effects)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def tools(self) -> list[Any]:
        def delete_record(record_id: int) -> str:
            """Deletes a CRM record."""
            self.lines.append(f"delete {record_id}")
            return f"deleted {record_id}"

        def lookup(record_id: int) -> dict[str, Any]:
            """Reads a CRM record."""
            return {"id": record_id}

        return [delete_record, lookup]


class StateToolset(Toolset):
    """A toolset listed at run start (its tools depend on the session's state)."""

    def __init__(self, ledger: Ledger, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ledger = ledger

    async def get_tools(self, ctx: Any) -> Sequence[Tool]:
        tools = self.ledger.tools()
        if ctx.state.get("read_only"):
            tools = tools[1:]
        return [FunctionTool(t) for t in tools]


def mcp_toolset(ledger: Ledger, **kwargs: Any) -> Any:
    """An MCP toolset on an in-process server of the official SDK with ``delete_record``."""
    pytest.importorskip("mcp", reason="codeact[mcp] is not installed")
    from mcp.server.mcpserver import MCPServer

    from codeact.integrations.mcp import McpToolset

    server = MCPServer("crm", log_level="WARNING")

    @server.tool()
    def delete_record(record_id: int) -> str:
        """Deletes a CRM record."""
        ledger.lines.append(f"delete {record_id}")
        return f"deleted {record_id}"

    @server.tool()
    def lookup(record_id: int) -> dict[str, int]:
        """Reads a CRM record."""
        return {"id": record_id}

    return McpToolset(server, **kwargs)


def build(kind: str, ledger: Ledger, names: list[str], replies: list[str]) -> CodeActAgent:
    """The agent whose run reaches ``crm_delete_record`` through a toolset of ``kind``."""
    if kind == "function":
        toolset: Any = FunctionToolset(ledger.tools(), prefix="crm")
    elif kind == "dynamic":
        toolset = StateToolset(ledger, prefix="crm")
    elif kind == "mcp":
        toolset = mcp_toolset(ledger, prefix="crm")
    else:  # a sub-agent reached by transfer holds the gated toolset
        sub = CodeActAgent(
            name="crm_agent",
            model=ScriptedModel(replies),
            runtime=MontyRuntime(),
            toolsets=[FunctionToolset(ledger.tools(), prefix="crm")],
            require_tool_confirmation=names,
        )
        return CodeActAgent(
            name="root",
            model=ScriptedModel([fence('{"type": "transfer_to_agent", "agent_name": "crm_agent"}')]),
            runtime=MontyRuntime(),
            sub_agents=[sub],
        )
    return CodeActAgent(
        name="coder",
        model=ScriptedModel(replies),
        runtime=MontyRuntime(),
        toolsets=[toolset],
        require_tool_confirmation=names,
    )


async def collect(events: Any) -> list[Any]:
    return [e async for e in events if e.kind is None]


@pytest.mark.parametrize("names", NAMES, ids=["unprefixed", "exposed"])
@pytest.mark.parametrize("kind", ["function", "dynamic", "mcp", "sub_agent"])
async def test_a_prefixed_tool_pauses_for_confirmation_by_either_name(
    kind: str, names: list[str], tmp_path: Path, anyio_backend: str
) -> None:
    ledger = Ledger()
    agent = build(kind, ledger, names, [fence(DELETE_SCRIPT)])
    with SqliteSessionService(tmp_path / "s.db") as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(app_name=APP, agent=agent, session_service=service)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="delete record 7"))
        asked = events[-1].actions.requested_tool_confirmations
        assert len(asked) == 1, [e.error_message or e.text for e in events]
        assert ledger.lines == []  # nothing ran before the decision
        [pending] = await runner.pending(user_id=USER, session_id=SESSION)
        assert (pending.tool, pending.args, pending.kind) == ("crm_delete_record", {"record_id": 7}, "confirmation")
        events = await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=pending.call_key))
        assert events[-1].text == "deleted 7"
        assert ledger.lines == ["delete 7"]


async def test_the_unprefixed_name_gates_the_tool_under_every_prefix(anyio_backend: str) -> None:
    ledger = Ledger()
    script = 'a = call_tool("crm_lookup", {"record_id": 1})\nb = call_tool("erp_delete_record", {"record_id": 2})'
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([fence(script)]),
        runtime=MontyRuntime(),
        toolsets=[FunctionToolset(ledger.tools(), prefix="crm"), FunctionToolset(ledger.tools(), prefix="erp")],
        require_tool_confirmation=["delete_record", "erp_lookup"],
    )
    runner = Runner(app_name=APP, agent=agent, auto_create_session=True)
    await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    # crm_lookup is not gated (only erp_lookup is) and ran; erp_delete_record waits
    [pending] = await runner.pending(user_id=USER, session_id=SESSION)
    assert (pending.tool, pending.call_key.endswith(":1")) == ("erp_delete_record", True)
    assert ledger.lines == []


def test_tool_names_gives_the_exposed_name_then_the_unprefixed_one() -> None:
    [_, prefixed] = FunctionToolset(Ledger().tools(), prefix="crm").static_tools() or []
    assert tool_names(prefixed) == ("crm_lookup", "lookup")
    assert tool_names(FunctionTool(Ledger().tools()[0])) == ("delete_record",)


# ---------------------------------------------------------------------- misspelt names


@pytest.mark.parametrize(
    ("misspelt", "suggested"),
    [("delete_recrod", "delete_record"), ("crm_delete_recrod", "crm_delete_record"), ("crm_lookp", "crm_lookup")],
)
def test_a_misspelt_name_is_refused_when_the_agent_is_built(misspelt: str, suggested: str) -> None:
    with pytest.raises(UnknownToolError) as caught:
        CodeActAgent(
            name="coder",
            model=ScriptedModel([]),
            runtime=MontyRuntime(),
            tools=[],
            toolsets=[FunctionToolset(Ledger().tools(), prefix="crm")],
            require_tool_confirmation=["lookup", misspelt],
        )
    err = caught.value
    assert isinstance(err, LookupError)
    assert (err.setting, err.agent_name, err.names) == ("require_tool_confirmation", "coder", [misspelt])
    assert suggested in err.suggestions[misspelt]
    assert f"did you mean {suggested!r}" in str(err)


def test_a_misspelt_name_among_static_tools_and_in_a_sub_agent_is_refused_when_built() -> None:
    with pytest.raises(UnknownToolError, match="did you mean 'delete_record'"):
        CodeActAgent(
            name="sub",
            model=ScriptedModel([]),
            runtime=MontyRuntime(),
            tools=Ledger().tools(),
            require_tool_confirmation=["delete_records"],
        )
    with pytest.raises(UnknownToolError, match="names no tool of the agent: 'wipe'"):
        CodeActAgent(name="bare", model=ScriptedModel([]), runtime=MontyRuntime(), require_tool_confirmation=["wipe"])


def lease_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "codeact-lease"}


@pytest.mark.parametrize("kind", ["dynamic", "mcp"])
async def test_a_misspelt_name_for_a_run_time_toolset_aborts_the_run_at_start(
    kind: str, tmp_path: Path, anyio_backend: str
) -> None:
    ledger = Ledger()
    before = lease_threads()
    # built: the name might be one of the toolset's, listed only when a run starts
    agent = build(kind, ledger, ["delete_recrod"], [fence(DELETE_SCRIPT)])
    with SqliteSessionService(tmp_path / "s.db") as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(app_name=APP, agent=agent, session_service=service)
        with pytest.raises(UnknownToolError) as caught:
            await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="delete record 7"))
        assert caught.value.suggestions["delete_recrod"][0] in {"delete_record", "crm_delete_record"}
        assert "did you mean" in str(caught.value)
        assert len(agent.model.requests) == 0  # type: ignore[attr-defined]  # the model was not asked
        assert ledger.lines == []
        assert await service.load_turn(app_name=APP, user_id=USER, session_id=SESSION) is None
        assert await runner.pending(user_id=USER, session_id=SESSION) == []
        deadline = time.monotonic() + 5
        while lease_threads() - before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not lease_threads() - before  # nothing of the run is left running

        # fixed, the same message is sent again: it is stored once and the call pauses
        fixed = build(kind, ledger, ["delete_record"], [fence(DELETE_SCRIPT)])
        runner = Runner(app_name=APP, agent=fixed, session_service=service)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="delete record 7"))
        assert len(events[-1].actions.requested_tool_confirmations) == 1
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        assert [e.text for e in session.events if e.author == "user"] == ["delete record 7"]
        assert ledger.lines == []


async def test_a_run_time_toolset_that_lacks_the_tool_in_this_run_is_refused(anyio_backend: str) -> None:
    """A name is checked against the tools of each run: a run whose toolset does not expose it
    (here: the session is read-only) is refused before the model is asked."""
    ledger = Ledger()
    agent = build("dynamic", ledger, ["delete_record"], [fence(DELETE_SCRIPT)])
    runner = Runner(app_name=APP, agent=agent, auto_create_session=True)
    await runner.session_service.create_session(app_name=APP, user_id=USER, session_id="ro", state={"read_only": True})
    with pytest.raises(UnknownToolError, match="'delete_record'"):
        await collect(runner.run_async(user_id=USER, session_id="ro", new_message="go"))


async def test_a_misspelt_name_in_a_sub_agent_with_a_run_time_toolset_aborts_after_the_transfer(
    anyio_backend: str,
) -> None:
    ledger = Ledger()
    sub = CodeActAgent(
        name="crm_agent",
        model=ScriptedModel([fence(DELETE_SCRIPT)]),
        runtime=MontyRuntime(),
        toolsets=[StateToolset(ledger, prefix="crm")],
        require_tool_confirmation=["crm_delete_recrod"],
    )
    root = CodeActAgent(
        name="root",
        model=ScriptedModel([fence('{"type": "transfer_to_agent", "agent_name": "crm_agent"}')]),
        runtime=MontyRuntime(),
        sub_agents=[sub],
    )
    runner = Runner(app_name=APP, agent=root, auto_create_session=True)
    with pytest.raises(UnknownToolError, match="did you mean 'crm_delete_record'"):
        await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    assert ledger.lines == []


async def test_the_confirmation_handler_sees_the_exposed_name(anyio_backend: str) -> None:
    ledger = Ledger()
    seen: list[str] = []

    def handler(info: Any) -> str:
        seen.append(info.tool)
        return "approve"

    agent = build("function", ledger, ["delete_record"], [fence(DELETE_SCRIPT)])
    runner = Runner(app_name=APP, agent=agent, auto_create_session=True)
    events = await collect(
        runner.run_async(
            user_id=USER,
            session_id=SESSION,
            new_message="go",
            run_config=RunConfig(tool_confirmation_handler=handler),
        )
    )
    assert events[-1].text == "deleted 7"
    assert seen == ["crm_delete_record"]
    assert ledger.lines == ["delete 7"]


async def test_an_mcp_toolsets_own_confirmation_list_takes_the_prefixed_name(anyio_backend: str) -> None:
    ledger = Ledger()
    toolset = mcp_toolset(ledger, prefix="crm", require_confirmation=["crm_delete_record"])
    agent = CodeActAgent(
        name="coder", model=ScriptedModel([fence(DELETE_SCRIPT)]), runtime=MontyRuntime(), toolsets=[toolset]
    )
    runner = Runner(app_name=APP, agent=agent, auto_create_session=True)
    await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    [pending] = await runner.pending(user_id=USER, session_id=SESSION)
    assert pending.tool == "crm_delete_record"
    assert ledger.lines == []


async def test_a_filter_predicate_defers_the_check_to_run_start(anyio_backend: str) -> None:
    ledger = Ledger()
    toolset = FunctionToolset(ledger.tools(), prefix="crm", tool_filter=lambda tool, ctx: True)
    assert toolset.static_tools() is None
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([fence(DELETE_SCRIPT)]),
        runtime=MontyRuntime(),
        toolsets=[toolset],
        require_tool_confirmation=["crm_delete_recrod"],
    )  # built: the predicate reads the run's context
    runner = Runner(app_name=APP, agent=agent, auto_create_session=True)
    with pytest.raises(UnknownToolError, match="did you mean 'crm_delete_record'"):
        await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))


async def test_a_resume_under_a_misspelt_name_leaves_the_call_pending(tmp_path: Path, anyio_backend: str) -> None:
    """An approval under a deploy whose run-time toolset does not match a name is refused
    before the tool runs; the call stays pending and the fixed deploy approves it once."""
    ledger = Ledger()
    with SqliteSessionService(tmp_path / "s.db") as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        good = Runner(
            app_name=APP,
            agent=build("dynamic", ledger, ["delete_record"], [fence(DELETE_SCRIPT)]),
            session_service=service,
        )
        await collect(good.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        [pending] = await good.pending(user_id=USER, session_id=SESSION)
        bad = Runner(app_name=APP, agent=build("dynamic", ledger, ["delete_recrod"], []), session_service=service)
        with pytest.raises(UnknownToolError):
            await collect(bad.approve(user_id=USER, session_id=SESSION, call_key=pending.call_key))
        assert ledger.lines == []
        assert [p.call_key for p in await good.pending(user_id=USER, session_id=SESSION)] == [pending.call_key]
        events = await collect(good.approve(user_id=USER, session_id=SESSION, call_key=pending.call_key))
        assert events[-1].text == "deleted 7"
        assert ledger.lines == ["delete 7"]
