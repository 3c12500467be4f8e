"""The worked traces of reference §22, end to end: MontyRuntime, real scripts in fenced
replies, a SqliteSessionService file under tmp_path (reopened between invocations)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_helpers import APP, SESSION, USER, fence, journal_of, outcomes_of, run, slot_of, texts
from codeact import (
    PENDING_STATE_KEY,
    CodeActAgent,
    Content,
    FunctionResponse,
    LongRunningFunctionTool,
    MontyRuntime,
    Part,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
    ToolConfirmation,
    tool,
)

pytestmark = pytest.mark.anyio


async def stored_session(db: Path):
    with SqliteSessionService(db) as service:
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert session is not None
    return session


def service_of(db: Path) -> SqliteSessionService:
    """A service on ``db`` for reading the journal (the helper reads the file directly)."""
    return SqliteSessionService(db)


# --------------------------------------------------------------------- 22.1

CART_REPLY = """Let me price the cart.
```python
cart = call_tool("fetch_cart", {"user_id": "u-42"})
print("items:", len(cart["items"]))
rate = call_tool("tax_rate", {"region": "CA"})
{"type": "observation", "value": {"n": len(cart["items"]), "rate": rate}}
```"""

TOTAL_REPLY = fence('{"type": "final_result", "value": {"total": 141.57, "lines": 3}}')


async def test_trace_22_1_two_inline_tools(tmp_path: Path) -> None:
    calls: list[str] = []
    cart = {"items": [{"sku": "a", "price": 12.0}, {"sku": "b", "price": 40.0}, {"sku": "c", "price": 80.0}]}

    def fetch_cart(user_id: str) -> dict:
        """Returns the user's cart."""
        calls.append(f"fetch_cart {user_id}")
        return cart

    def tax_rate(region: str) -> float:
        """Returns the tax rate."""
        calls.append(f"tax_rate {region}")
        return 0.0725

    model = ScriptedModel([CART_REPLY, TOTAL_REPLY])
    after: list[str] = []
    agent = CodeActAgent(
        name="coder",
        model=model,
        runtime=MontyRuntime(),
        tools=[fetch_cart, tax_rate],
        output_key="quote",
        after_agent=lambda ctx: after.append("ran"),
    )
    db = tmp_path / "sessions.db"
    with SqliteSessionService(db) as service:
        events, _session, _ = await run(agent, service=service, message="What's the total of my cart?")

    assert calls == ["fetch_cart u-42", "tax_rate CA"]
    # each call: an intent (tool and argument digest) and its outcome, in call order
    journal = journal_of(service_of(db))
    calls_journal = [(kind, seq) for kind, seq, _ in journal if kind != "os"]
    assert calls_journal == [("intent", 0), ("outcome", 0), ("intent", 1), ("outcome", 1)]
    # the OS answers the interpreter gave (on Monty 1.4: the script's random seed) are journaled per advance
    assert all(isinstance(data, list) for kind, _, data in journal if kind == "os")
    assert [data[0] for kind, _, data in journal if kind == "intent"] == ["fetch_cart", "tax_rate"]
    assert [data for kind, _, data in journal if kind == "outcome"] == [{"v": cart}, {"v": 0.0725}]

    # turn 1 as the model saw it, and turn 2's transcript
    first, second = model.requests
    assert "You act by writing code" in first.system_instruction
    assert texts(first.contents) == ["What's the total of my cart?"]
    assert [(c.role, c.text) for c in second.contents] == [
        ("user", "What's the total of my cart?"),
        ("model", CART_REPLY),
        ("user", 'Observation:\n{"n":3,"rate":0.0725}'),
        ("user", "Output (stdout):\nitems: 3\n"),
    ]

    last = events[-1]
    assert last.text == '{\n  "total": 141.57,\n  "lines": 3\n}'
    assert PENDING_STATE_KEY not in last.actions.state_delta
    assert last.actions.state_delta["quote"] == {"total": 141.57, "lines": 3}
    assert after == ["ran"]
    assert len(events) == 1  # the event log holds no per-call records

    stored = await stored_session(db)
    assert PENDING_STATE_KEY not in stored.state
    assert stored.state["quote"] == {"total": 141.57, "lines": 3}
    # besides the progress events (the model's reply and the script's result, docs/events.md)
    stored_events = [e for e in stored.events if e.kind is None]
    assert [e.author for e in stored_events] == ["user", "coder"]
    assert [e.id for e in stored_events[1:]] == [e.id for e in events]


# --------------------------------------------------------------------- 22.2

DELETE_SCRIPT = """
try:
    r = call_tool("delete_file", {"path": "/tmp/x"})
except PermissionError as e:
    r = "refused: " + str(e)
{"type": "final_result", "value": r}
"""


def delete_agent(deleted: list[str], replies: list[str]) -> CodeActAgent:
    def delete_file(path: str) -> str:
        """Deletes a file."""
        deleted.append(path)
        return f"deleted {path}"

    return CodeActAgent(
        name="coder",
        model=ScriptedModel(replies),
        runtime=MontyRuntime(),
        tools=[delete_file],
        require_tool_confirmation=["delete_file"],
        after_agent=lambda ctx: "after-done",
    )


@pytest.mark.parametrize("decision", ["approve", "deny", None])
async def test_trace_22_2_confirmation_across_two_invocations(tmp_path: Path, decision: str | None) -> None:
    db = tmp_path / "sessions.db"
    deleted: list[str] = []
    with SqliteSessionService(db) as service:
        events_a, _, _ = await run(delete_agent(deleted, [fence(DELETE_SCRIPT)]), service=service, message="rm it")
    (suspend,) = events_a
    key = f"{suspend.invocation_id}:1:0"
    assert suspend.text.startswith("Tool confirmation required for 'delete_file'")
    asked = suspend.actions.requested_tool_confirmations
    assert re.fullmatch("[0-9a-f]{16}", asked[key].digest)  # names the call (PendingCallInfo.digest)
    assert {k: c.model_copy(update={"digest": ""}) for k, c in asked.items()} == {
        key: ToolConfirmation(tool_name="delete_file", function_call_id=key, args={"path": "/tmp/x"})
    }
    assert suspend.interrupted and suspend.turn_complete
    with SqliteSessionService(db) as service:
        slot = await slot_of(service)
        pending = await Runner(app_name=APP, agent=delete_agent(deleted, []), session_service=service).pending(
            user_id=USER, session_id=SESSION
        )
    assert slot.data["status"] == "suspended"
    assert [(p.call_key, p.tool, p.args, p.kind) for p in pending] == [
        (key, "delete_file", {"path": "/tmp/x"}, "confirmation")
    ]
    assert deleted == []
    stored_before = len((await stored_session(db)).events)

    # invocation B: a new process would build everything again; so do we
    decisions = {key: decision} if decision else {}
    with SqliteSessionService(db) as service:
        events_b, session, _ = await run(
            delete_agent(deleted, []),
            service=service,
            message=None,
            run_config=RunConfig(tool_confirmation_decisions=decisions),
        )
    with SqliteSessionService(db) as service:
        slot_after = await slot_of(service)
    outcomes = outcomes_of(service_of(db))
    if decision == "approve":
        # the approved call is claimed in the slot, journaled (intent, outcome), then the script goes on
        assert outcomes == [{"v": "deleted /tmp/x"}]
        assert [e.text for e in events_b] == ["deleted /tmp/x", "after-done"]
        assert deleted == ["/tmp/x"]
        assert slot_after is None
    elif decision == "deny":
        denied = "call to 'delete_file' was denied by a human reviewer"
        assert outcomes == [{"e": denied, "t": "PermissionError"}]
        assert [e.text for e in events_b] == ["refused: " + denied, "after-done"]
        assert deleted == []
        assert slot_after is None
    else:
        # no decision: the same calls are announced again and nothing stored changes
        (again,) = events_b
        assert again.text == suspend.text
        assert again.actions.requested_tool_confirmations == suspend.actions.requested_tool_confirmations
        assert slot_after == slot
        assert len(session.events) == stored_before
        assert deleted == []


# --------------------------------------------------------------------- 22.3

VIDEO_SCRIPT = """
print("rendering")
r = call_tool("render_video", {"scene": "intro"})
{"type": "final_result", "value": r}
"""


def video_agent(started: list[str], replies: list[str]) -> CodeActAgent:
    def render_video(scene: str) -> dict:
        """Starts rendering; the result arrives later."""
        started.append(scene)
        return {"status": "pending", "task_id": "t1"}

    return CodeActAgent(
        name="coder",
        model=ScriptedModel(replies),
        runtime=MontyRuntime(),
        tools=[LongRunningFunctionTool(render_video)],
    )


@pytest.mark.parametrize("with_key", [True, False], ids=["keyed", "keyless"])
async def test_trace_22_3_long_running_across_invocations(tmp_path: Path, with_key: bool) -> None:
    db = tmp_path / "sessions.db"
    started: list[str] = []
    with SqliteSessionService(db) as service:
        events_a, _, _ = await run(video_agent(started, [fence(VIDEO_SCRIPT)]), service=service, message="render")
    (suspend,) = events_a
    with SqliteSessionService(db) as service:
        slot = await slot_of(service)
    (pending,) = slot.data["pending"]
    key = pending["call_key"]
    assert (pending["kind"], pending["hint"]) == ("completion", '{"status":"pending","task_id":"t1"}')
    assert slot.data["turn_stdout"] == "rendering\n"
    assert suspend.long_running_tool_ids == [key]
    (part,) = suspend.content.parts
    assert part.function_call.model_dump() == {"name": "render_video", "args": {"scene": "intro"}, "id": key}
    assert started == ["intro"]

    response = FunctionResponse(
        name="render_video", id=key if with_key else None, response={"url": "https://cdn/intro.mp4"}
    )
    with SqliteSessionService(db) as service:
        events_b, _session, _ = await run(
            video_agent(started, []),
            service=service,
            message=Content(role="user", parts=[Part(function_response=response)]),
        )
    assert outcomes_of(service_of(db)) == [{"v": {"url": "https://cdn/intro.mp4"}}]
    assert events_b[-1].text == '{\n  "url": "https://cdn/intro.mp4"\n}'
    assert started == ["intro"]
    with SqliteSessionService(db) as service:
        assert await slot_of(service) is None


# --------------------------------------------------------------------- 22.4 and max iterations

BAD_SCRIPT = """
cart = {"items": [1, 2, 3]}
print("looking")
n = cart["itms"]
{"type": "final_result", "value": n}
"""


async def test_trace_22_4_script_error_then_retry(tmp_path: Path) -> None:
    model = ScriptedModel([fence(BAD_SCRIPT), fence('{"type": "final_result", "value": 3}')])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime())
    with SqliteSessionService(tmp_path / "s.db") as service:
        events, _, _ = await run(agent, service=service)
    assert [e.text for e in events] == ["3"]
    error, stdout = texts(model.requests[1].contents)[-2:]
    assert error.startswith("Error during execution:\nTraceback (most recent call last):\n")
    assert "line 3, in <module>" in error
    assert 'n = cart["itms"]' in error
    assert error.splitlines()[-1].startswith("KeyError") and "itms" in error
    assert stdout == "Output (stdout):\nlooking\n"


async def test_trace_22_4_long_traceback_is_truncated(tmp_path: Path) -> None:
    script = 'raise ValueError("' + "x" * 6000 + '")'
    model = ScriptedModel([fence(script), fence('{"type": "final_result", "value": 1}')])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime())
    with SqliteSessionService(tmp_path / "s.db") as service:
        await run(agent, service=service)
    feedback = model.requests[1].contents[-1].text
    assert "\n...[truncated]...\n" in feedback
    body = feedback.removeprefix("Error during execution:\n")
    assert len(body) == 4000 + len("\n...[truncated]...\n")
    assert body.startswith("Traceback (most recent call last):")


async def test_trace_max_iterations(tmp_path: Path) -> None:
    model = ScriptedModel(lambda request: fence(BAD_SCRIPT))
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime())
    db = tmp_path / "s.db"
    with SqliteSessionService(db) as service:
        events, _, _ = await run(agent, service=service)
    assert len(model.requests) == 12
    (last,) = events
    assert last.error_code == "codeact.max_iterations"
    assert last.error_message.startswith("max iterations (12) exceeded without a final result.")
    stored = await stored_session(db)
    assert stored.events[-1].error_code == "codeact.max_iterations"
    # 11 failed turns fed back: reply + error + stdout note each
    assert len(model.requests[-1].contents) == 1 + 11 * 3


async def test_trace_max_iterations_clears_a_resumed_checkpoint(tmp_path: Path) -> None:
    @tool
    def ping() -> str:
        """Pings."""
        return "pong"

    script = 'p = call_tool("ping")\n{"type": "observation", "value": p}'
    db = tmp_path / "s.db"
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([fence(script)]),
        runtime=MontyRuntime(),
        tools=[ping],
        max_iterations=1,
        require_tool_confirmation=["ping"],
    )
    with SqliteSessionService(db) as service:
        events, _, _ = await run(agent, service=service)
        key = next(iter(events[-1].actions.requested_tool_confirmations))
        events, _session, _ = await run(
            agent, service=service, message=None, run_config=RunConfig(tool_confirmation_decisions={key: True})
        )
        slot_after = await slot_of(service)
    assert outcomes_of(service_of(db)) == [{"v": "pong"}]
    assert events[-1].error_code == "codeact.max_iterations"
    assert slot_after is None
