"""``Runner``: blocking and async forms, sessions, persistence before the next step,
transfers and checkpoint ownership."""

from __future__ import annotations

from contextlib import aclosing

import pytest

from agent_helpers import APP, SESSION, USER, FakeTool, fence, journal_of, run, scripted_agent
from codeact import (
    BaseAgent,
    CodeActAgent,
    Content,
    Event,
    EventActions,
    FunctionResponse,
    InMemorySessionService,
    MontyRuntime,
    Part,
    Runner,
    ScriptedModel,
    SessionNotFoundError,
    SqliteSessionService,
)
from codeact.testing import PlannedCall, PlannedComplete

pytestmark = pytest.mark.anyio


def final(value: object) -> PlannedComplete:
    return PlannedComplete({"type": "final_result", "value": value})


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_run_blocking_form(backend: str) -> None:
    echo = FakeTool("echo", 5)
    agent, _, _ = scripted_agent([[PlannedCall("echo", {}), final("five")]], tools=[echo])
    runner = Runner(app_name=APP, agent=agent, auto_create_session=True)
    events = runner.run(user_id=USER, session_id=SESSION, new_message="hi", backend=backend)
    # the call is in the journal; the events show the script and its result, then the answer
    assert [e.kind for e in events] == ["model_reply", "script_result", None]
    assert events[-1].text == "five"


async def test_missing_session_raises_unless_auto_create() -> None:
    agent, _, model = scripted_agent([[final("x")]])
    runner = Runner(app_name=APP, agent=agent)
    with pytest.raises(SessionNotFoundError):
        async for _ in runner.run_async(user_id=USER, session_id="nope", new_message="hi"):
            pass
    assert model.requests == []
    runner = Runner(app_name=APP, agent=agent, auto_create_session=True)
    events = [e async for e in runner.run_async(user_id=USER, session_id="nope", new_message="hi")]
    assert events[-1].text == "x"
    session = await runner.session_service.get_session(app_name=APP, user_id=USER, session_id="nope")
    assert session is not None


async def test_user_message_is_stored_as_an_event() -> None:
    agent, _, _ = scripted_agent([[final("answer")]])
    events, session, _ = await run(agent, message="the question")
    first = session.events[0]
    assert first.author == "user"
    assert first.text == "the question"
    assert first.invocation_id == events[0].invocation_id
    assert [e.id for e in session.events[1:] if e.kind is None] == [e.id for e in events]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_events_are_persisted_before_the_next_step(store: str, tmp_path) -> None:
    seen: list[object] = []
    service = InMemorySessionService() if store == "memory" else SqliteSessionService(tmp_path / "s.db")

    async def peek(args, ctx):
        stored = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        seen.append(len(stored.events))
        seen.append(await service.load_turn(app_name=APP, user_id=USER, session_id=SESSION))
        seen.append(journal_of(service))
        return "peeked"

    agent, _, _ = scripted_agent([[PlannedCall("peek", {}), final("ok")]], tools=[FakeTool("peek", fn=peek)])
    with service:
        events, _, _ = await run(agent, service=service)
        journal_after = journal_of(service)
    count, slot, journal = seen
    assert count == 2  # the user message and the model's reply (the script)
    # before the tool ran: the turn record is in the slot and the intent is durable
    assert slot.data["turn"] == f"{events[0].invocation_id}:1" and slot.data["status"] == "running"
    assert [(kind, seq, data[0]) for kind, seq, data in journal] == [("intent", 0, "peek")]
    assert journal_after[-1] == ("outcome", 0, {"v": "peeked"})


class Router(BaseAgent):
    """Hands every run to ``target``."""

    target: str = "coder"

    async def run_async(self, ctx):  # type: ignore[override]
        yield Event(
            invocation_id=ctx.invocation_id, author=self.name, actions=EventActions(transfer_to_agent=self.target)
        )


class Echoer(BaseAgent):
    async def run_async(self, ctx):  # type: ignore[override]
        yield Event(invocation_id=ctx.invocation_id, author=self.name, content=Content.from_text("peer here", "model"))


async def test_runner_gives_a_sub_agent_its_parent_and_peers() -> None:
    agent, _, model = scripted_agent(
        [[PlannedComplete({"type": "transfer_to_agent", "agent_name": "peer"})]], name="coder"
    )
    root = Router(name="router", sub_agents=[agent, Echoer(name="peer")])
    service = InMemorySessionService()
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    runner = Runner(app_name=APP, agent=root, session_service=service)
    events = [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message="hi")]
    assert [(e.author, e.actions.transfer_to_agent, e.text) for e in events if e.kind is None] == [
        ("router", "coder", ""),
        ("coder", "peer", ""),
        ("peer", None, "peer here"),
    ]
    assert "Valid agents: router, peer." in model.requests[0].system_instruction


async def test_a_pending_checkpoint_resumes_with_its_owner_agent() -> None:
    slow = FakeTool("slow", "handle", is_long_running=True)
    agent, _, _ = scripted_agent([[PlannedCall("slow", {}), final("resumed")]], tools=[slow], name="coder")
    root = Router(name="router", sub_agents=[agent])
    service = InMemorySessionService()
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    runner = Runner(app_name=APP, agent=root, session_service=service)
    first = [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message="go")]
    assert first[-1].long_running_tool_ids
    msg = Content(role="user", parts=[Part(function_response=FunctionResponse(name="slow", response=1))])
    second = [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message=msg)]
    assert {e.author for e in second} == {"coder"}  # the router did not run again
    assert second[-1].text == "resumed"


async def test_monty_runner_round_trip_with_sqlite(tmp_path) -> None:
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    model = ScriptedModel([fence('{"type": "final_result", "value": call_tool("add", {"a": 1, "b": 2})}')])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[add])
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
        events = [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message="1+2?")]
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert events[-1].text == "3"
    # the question, the model's reply (the script), the script's result and the answer;
    # the call is in the journal
    assert [e.kind for e in session.events] == [None, "model_reply", "script_result", None]


class Closable(BaseAgent):
    """Yields two events and records whether its generator was closed."""

    closed: list[str] = []

    async def run_async(self, ctx):  # type: ignore[override]
        try:
            yield Event(invocation_id=ctx.invocation_id, author=self.name, content=Content.from_text("one", "model"))
            yield Event(invocation_id=ctx.invocation_id, author=self.name, content=Content.from_text("two", "model"))
        finally:
            self.closed.append("closed")


async def test_closing_a_run_early_closes_the_agent_generator() -> None:
    agent = Closable(name="closable", closed=[])
    runner = Runner(app_name=APP, agent=agent, auto_create_session=True)
    async with aclosing(runner.run_async(user_id=USER, session_id=SESSION, new_message="hi")) as stream:
        async for event in stream:
            assert event.text == "one"
            break
    assert agent.closed == ["closed"]
