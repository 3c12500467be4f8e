"""A read-only call's events and state deltas (issue 50 item 2, SPEC §5 v4): held with its
outcome and stored in the same commit as the turn's next durable write (``commit_events``),
yielded to the caller at once. Crashes before and after that commit on every store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_helpers import APP, SESSION, USER, fence
from codeact import (
    CodeActAgent,
    FunctionTool,
    MontyRuntime,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
    Tool,
    ToolContext,
)
from codeact.events import Event, EventActions
from test_read_only_calls import (  # noqa: F401  (make_store: the fixture)
    Commits,
    Crash,
    World,
    _crash_points,
    agent_for,
    collect,
    counting,
    final_value,
    make_store,
    run_once,
    shapes,
)

pytestmark = pytest.mark.anyio


def remembering(world: World) -> Tool:
    """A read-only tool that changes state (a ``ToolContext`` delta), its runs counted in ``world``."""

    def remember(k: int, tool_context: ToolContext) -> int:
        """Reads record k and notes it."""
        world.runs[("remember", k)] = world.runs.get(("remember", k), 0) + 1
        tool_context.state["seen"] = tool_context.state.get("seen", 0) + k
        return k

    return FunctionTool(remember, read_only=True)


async def test_a_read_only_calls_events_and_state_commit_with_its_outcome(tmp_path: Path) -> None:
    """Its events and its state delta are held with its outcome (SPEC §5 v4) and stored in the
    same commit as the turn's next durable write: here the end of the script, one commit for
    both calls; the later tools saw the delta at once (the live session), and the caller got
    the events as they happened."""
    world, commits = World(), Commits()
    store = counting(SqliteSessionService, commits)(tmp_path / "s.db")

    def plain(k: int, tool_context: ToolContext) -> int:
        """Reads (what ``remember`` noted)."""
        return k + tool_context.state["seen"]

    script = (
        'a = call_tool("remember", {"k": 1})\nb = call_tool("plain", {"k": 2})\n'
        '{"type": "final_result", "value": [a, b]}'
    )
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([fence(script)]),
        runtime=MontyRuntime(),
        tools=[remembering(world), FunctionTool(plain, read_only=True)],
    )
    with store:
        runner = Runner(app_name=APP, agent=agent, session_service=store)
        await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        assert final_value(events) == [1, 3]
        assert shapes(commits) == [[("outcome", 0), ("outcome", 1)]]
        held = commits.events[0]
        assert [e.actions.state_delta for e in held] == [{"seen": 1}]
        assert held[0].id in {e.id for e in events}  # yielded to the caller too
        session = await store.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None and session.state["seen"] == 1
        assert [e.id for e in session.events if e.actions.state_delta] == [held[0].id]

        commits.writes.clear()
        await store.create_session(app_name=APP, user_id=USER, session_id="s2")
        agent.model, emit = ScriptedModel([fence(script)]), RunConfig(emit_tool_events=True)
        events = await collect(runner.run_async(user_id=USER, session_id="s2", new_message="go", run_config=emit))
        assert final_value(events) == [1, 3]
        # with tool events too: one commit, the calls' events (after the first held one) in it
        assert shapes(commits) == [[("outcome", 0), ("outcome", 1)]]
        responses = [e for e in commits.events[0] if e.get_function_responses()]
        assert [r.get_function_responses()[0].name for r in responses] == ["remember", "plain"]
        s2 = await store.get_session(app_name=APP, user_id=USER, session_id="s2")
        assert s2 is not None and s2.state["seen"] == 1
        stored = {e.id for e in s2.events}  # each once
        assert len(stored) == len(s2.events) and {e.id for e in commits.events[0]} <= stored


REMEMBER_THEN_WRITE = """
a = call_tool("remember", {"k": 1})
b = call_tool("write", {"k": a})
{"type": "final_result", "value": [a, b]}
"""


@pytest.mark.parametrize("crash", _crash_points(2))
async def test_a_crash_around_the_commit_of_held_events(make_store: Any, crash: tuple[int, bool]) -> None:  # noqa: F811
    """A read-only call with a state delta, then a write: two commits (the write's intent with
    the held outcome, event and delta; the write's outcome). Crashed before the first, the
    event and the delta are not stored and the read-only call runs again; after it, they are
    stored once and it does not run again."""
    world, commits = World(), Commits()
    store = make_store(commits)
    world.store = store
    tools = [remembering(world), world.tools()[1]]
    events = await run_once(world, lambda c: store, commits, REMEMBER_THEN_WRITE, new=True, tools=tools)
    assert events is not None and final_value(events) == [1, 2]
    assert shapes(commits) == [[("intent", 1), ("outcome", 0)], [("outcome", 1)]]
    assert [e.actions.state_delta for e in commits.events[0]] == [{"seen": 1}]

    world, commits = World(), Commits()
    commits.crash_at = crash
    store = make_store(commits)
    world.store = store
    sid = f"c{crash[0]}{crash[1]}"
    await store.create_session(app_name=APP, user_id=USER, session_id=SESSION + sid)
    tools = [remembering(world), world.tools()[1]]

    async def one(new: bool) -> list[Any] | None:
        runner = Runner(app_name=APP, agent=agent_for(world, REMEMBER_THEN_WRITE, tools=tools), session_service=store)
        try:
            return await collect(
                runner.run_async(user_id=USER, session_id=SESSION + sid, new_message="go" if new else None)
            )
        except Crash:
            return None

    assert await one(True) is None
    durable = await store.get_session(app_name=APP, user_id=USER, session_id=SESSION + sid)
    assert durable is not None
    if crash == (1, True):
        assert "seen" not in durable.state and not any(e.actions.state_delta for e in durable.events)
    else:
        assert durable.state["seen"] == 1
    store = make_store(Commits())
    events = await one(False)
    assert events is not None and final_value(events) == [1, 2]
    session = await store.get_session(app_name=APP, user_id=USER, session_id=SESSION + sid)
    assert session is not None and session.state["seen"] == 1
    assert len([e for e in session.events if e.actions.state_delta]) == 1  # stored once
    assert world.runs[("remember", 1)] == (2 if crash == (1, True) else 1)
    assert world.runs[("write", 1)] == 1 + (crash == (2, True))  # its own at-least-once window


async def test_held_events_are_stored_before_a_suspension(tmp_path: Path) -> None:
    """A suspension as the turn's first durable write: the held outcome and event are stored
    (one commit) before the suspended slot; the approved call then finds them."""
    world, commits = World(), Commits()
    store = counting(SqliteSessionService, commits)(tmp_path / "s.db")
    world.store = store
    pay = FunctionTool(lambda k: k + 1, name="write", requires_confirmation=True)
    with store:
        events = await run_once(
            world, lambda c: store, commits, REMEMBER_THEN_WRITE, new=True, tools=[remembering(world), pay]
        )
        assert events is not None
        assert shapes(commits) == [[("outcome", 0)]] and [e.actions.state_delta for e in commits.events[0]] == [
            {"seen": 1}
        ]
        session = await store.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None and session.state["seen"] == 1
        runner = Runner(
            app_name=APP,
            agent=agent_for(world, REMEMBER_THEN_WRITE, tools=[remembering(world), pay]),
            session_service=store,
        )
        (call,) = await runner.pending(user_id=USER, session_id=SESSION)
        done = await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=call.call_key))
        assert final_value(done) == [1, 2] and world.runs == {("remember", 1): 1}
        session = await store.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None and len([e for e in session.events if e.actions.state_delta]) == 1


async def test_held_events_retry_once_on_a_session_stored_to_meanwhile(tmp_path: Path) -> None:
    """Another writer stored an event after this run loaded the session (the runner it took
    the turn from, say): the held commit brings the live session up to date, applies the held
    events again and retries once; the fence still decides whose turn it is."""
    with SqliteSessionService(tmp_path / "s.db") as store:

        async def remember(k: int, tool_context: ToolContext) -> int:
            """Reads record k and notes it; meanwhile another writer stores an event."""
            tool_context.state["seen"] = k
            other = await store.get_session(app_name=APP, user_id=USER, session_id=SESSION)
            assert other is not None
            await store.append_event(other, Event(author="other", actions=EventActions(state_delta={"o": 1})))
            return k

        script = 'a = call_tool("remember", {"k": 1})\n{"type": "final_result", "value": a}'
        agent = CodeActAgent(
            name="coder",
            model=ScriptedModel([fence(script)]),
            runtime=MontyRuntime(),
            tools=[FunctionTool(remember, read_only=True)],
        )
        await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(app_name=APP, agent=agent, session_service=store)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        assert final_value(events) == 1
        session = await store.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None and session.state["seen"] == 1 and session.state["o"] == 1
        assert [e.author for e in session.events if e.actions.state_delta] == ["other", "coder"]
