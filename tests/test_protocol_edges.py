"""Edges of the suspension protocol (SPEC §3, §5) through ``Runner`` on real SQLite files with
the real interpreter: completion values that cannot cross the boundary, stored turn records
that cannot be read, confirmation of a call that can never validate, a loser of two
concurrent approvals, approve with a discard, and what a missing session tells the caller."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_helpers import APP, SESSION, USER, fence, slot_of
from codeact import (
    AlreadyResumingError,
    CodeActAgent,
    Content,
    FunctionTool,
    MontyRuntime,
    NoPendingCallError,
    RunConfig,
    Runner,
    ScriptedModel,
    SessionNotFoundError,
    SqliteSessionService,
    ValueConversionError,
)
from codeact.sessions._types import FunctionResponse, Part
from codeact.turns._codec import MAX_VALUE_BYTES
from test_faults import Ledger, agent_for, collect, final_script, fresh_runner, start

pytestmark = pytest.mark.anyio

RENDER = 'r = call_tool("render", {"scene": "a"})\n' + final_script("r")
CHARGE = 'r = call_tool("charge", {"item": "a"})\n' + final_script("r")


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


BAD_VALUES = {
    "deep-200": (lambda: nested(200), "nests deeper than 100 levels"),
    "deep-5000": (lambda: nested(5000), "nests deeper than 100 levels"),
    "complex": (lambda: 1j, "is a complex, which cannot cross the boundary"),
    "object": (lambda: object(), "is an object, which cannot cross the boundary"),
    "in-a-set": (lambda: {"rows": [1, {2j}]}, "['rows'][1][0] is a complex, which cannot cross the boundary"),
    "too-large": (lambda: "x" * (MAX_VALUE_BYTES + 1), f"larger than {MAX_VALUE_BYTES} bytes"),
}


@pytest.mark.parametrize("via", ["complete", "run_async"])
@pytest.mark.parametrize("case", list(BAD_VALUES))
async def test_bad_completion_value_is_refused_before_anything_is_claimed(tmp_path: Path, case: str, via: str) -> None:
    make, phrase = BAD_VALUES[case]
    ledger = Ledger(tmp_path / "ledger")
    db = tmp_path / "s.db"
    await start(db, ledger, RENDER)
    with SqliteSessionService(db) as service:
        runner = fresh_runner(service, ledger)
        [info] = await runner.pending(user_id=USER, session_id=SESSION)
        before = await slot_of(service)
        events_before = len((await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)).events)
        with pytest.raises(ValueConversionError, match="nothing was claimed or stored") as caught:
            if via == "complete":
                await collect(runner.complete(user_id=USER, session_id=SESSION, call_key=info.call_key, value=make()))
            else:
                response = FunctionResponse.model_construct(name="render", response=make(), id=info.call_key)
                message = Content.model_construct(role="user", parts=[Part.model_construct(function_response=response)])
                await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message=message))
        assert phrase in str(caught.value)
        after = await slot_of(service)
        assert (after.version, after.data) == (before.version, before.data)
        assert await runner.pending(user_id=USER, session_id=SESSION) == [info]
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert len(session.events) == events_before
        # An idle run only re-announces (the bad value was never claimed); a good value
        # then completes the call.
        await collect(runner.run_async(user_id=USER, session_id=SESSION))
        assert (await slot_of(service)).version == before.version
        assert ledger.lines() == ["render a"]
        events = await collect(runner.complete(user_id=USER, session_id=SESSION, call_key=info.call_key, value=[1]))
    assert json.loads(events[-1].text) == [1]
    assert ledger.lines() == ["render a"]


UNREADABLE = {"too-deep-to-parse": "[" * 5000 + "]" * 5000, "not-json": "{not json", "not-an-object": "[1, 2]"}


@pytest.mark.parametrize("case", list(UNREADABLE))
async def test_unreadable_turn_record_is_stale_and_can_be_discarded(tmp_path: Path, case: str) -> None:
    ledger = Ledger(tmp_path / "ledger")
    db = tmp_path / "s.db"
    await start(db, ledger, RENDER)
    with sqlite3.connect(db) as conn:
        assert conn.execute("UPDATE turns SET data = ?", (UNREADABLE[case],)).rowcount == 1
    with SqliteSessionService(db) as service:
        model = ScriptedModel([fence(final_script('"fresh"'))])
        runner = Runner(app_name=APP, agent=agent_for(ledger, model), session_service=service)
        assert await runner.pending(user_id=USER, session_id=SESSION) == []
        with pytest.raises(NoPendingCallError):
            await collect(runner.complete(user_id=USER, session_id=SESSION, call_key="k", value=1))
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION))
        assert events[-1].error_code == "codeact.stale_checkpoint"
        assert "the stored turn record" in events[-1].error_message
        assert await runner.discard_pending_checkpoint(user_id=USER, session_id=SESSION) is True
        assert await slot_of(service) is None
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="again"))
    assert events[-1].text == "fresh"
    assert ledger.lines() == ["render a"]


BAD_ARGS = {"list": "[1]", "tuple": "(1,)", "nested": "[[[]]]", "dict": '{"a": 1}', "missing": None}


@pytest.mark.parametrize("case", list(BAD_ARGS))
async def test_confirmation_is_not_requested_for_arguments_that_can_never_validate(tmp_path: Path, case: str) -> None:
    ledger = Ledger(tmp_path / "ledger")
    arg = BAD_ARGS[case]
    args = "{}" if arg is None else '{"item": ' + arg + "}"
    script = f'try:\n    r = call_tool("charge", {args})\nexcept TypeError as e:\n    r = "caught: " + str(e)\n'
    model = ScriptedModel([fence(script + final_script("r"))])
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent_for(ledger, model), session_service=service, auto_create_session=True)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        assert all(not e.actions.requested_tool_confirmations for e in events)
        assert await runner.pending(user_id=USER, session_id=SESSION) == []
    text = events[-1].text
    assert text.startswith("caught: tool 'charge' got invalid arguments: "), text
    assert "ToolArgumentError" not in text
    assert "no confirmation was requested" in text
    assert ledger.lines() == []


async def test_tool_argument_error_reaches_the_script_without_a_doubled_prefix(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    script = 'try:\n    r = call_tool("note", {"text": [1]})\nexcept TypeError as e:\n    r = "caught: " + str(e)\n'
    model = ScriptedModel([fence(script + final_script("r"))])
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent_for(ledger, model), session_service=service, auto_create_session=True)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    assert events[-1].text.startswith("caught: tool 'note' got invalid arguments: text: "), events[-1].text
    assert "ToolArgumentError" not in events[-1].text
    assert ledger.lines() == []


@pytest.mark.parametrize("delay", [0.0, 0.05])
@pytest.mark.parametrize("with_key", [True, False])
async def test_the_loser_of_two_approvals_gets_already_resuming(tmp_path: Path, delay: float, with_key: bool) -> None:
    ledger = Ledger(tmp_path / "ledger")
    db = tmp_path / "s.db"
    release = anyio.Event()

    def charge(item: str) -> str:
        """Charges an item (needs approval)."""
        ledger.add(f"charge {item}")
        return f"charged {item}"

    async def slow_charge(item: str) -> str:
        """Charges an item (needs approval), slowly."""
        await release.wait()
        return charge(item)

    def runner_for(service: SqliteSessionService, replies: list[str]) -> Runner:
        tool = FunctionTool(slow_charge, name="charge", requires_confirmation=True)
        agent = CodeActAgent(name="coder", model=ScriptedModel(replies), runtime=MontyRuntime(), tools=[tool])
        return Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)

    with SqliteSessionService(db) as service:
        await collect(
            runner_for(service, [fence(CHARGE)]).run_async(user_id=USER, session_id=SESSION, new_message="go")
        )
        [info] = await runner_for(service, []).pending(user_id=USER, session_id=SESSION)
        first, second = runner_for(service, []), runner_for(service, [])
        results: dict[str, Any] = {}

        async def winner() -> None:
            results["first"] = await collect(first.approve(user_id=USER, session_id=SESSION, call_key=info.call_key))

        async with anyio.create_task_group() as tg:
            tg.start_soon(winner)
            while (await slot_of(service)).data.get("claim") is None:  # the first runner claimed it
                await anyio.sleep(0.01)
            await anyio.sleep(delay)
            with pytest.raises(AlreadyResumingError, match="another runner"):
                await collect(
                    second.approve(user_id=USER, session_id=SESSION, call_key=info.call_key if with_key else None)
                )
            release.set()
    assert results["first"][-1].text == "charged a"
    assert ledger.lines() == ["charge a"]


@pytest.mark.parametrize("verb", ["approve", "deny", "complete"])
async def test_approve_with_discard_is_refused_before_anything_changes(tmp_path: Path, verb: str) -> None:
    ledger = Ledger(tmp_path / "ledger")
    db = tmp_path / "s.db"
    await start(db, ledger, RENDER if verb == "complete" else CHARGE)
    rc = RunConfig(discard_pending_checkpoint=True)
    with SqliteSessionService(db) as service:
        runner = fresh_runner(service, ledger)
        [info] = await runner.pending(user_id=USER, session_id=SESSION)
        before = await slot_of(service)
        with pytest.raises(ValueError, match="discard_pending_checkpoint=True"):
            if verb == "approve":
                await collect(runner.approve(user_id=USER, session_id=SESSION, run_config=rc))
            elif verb == "deny":
                await collect(runner.deny(user_id=USER, session_id=SESSION, run_config=rc))
            else:
                await collect(
                    runner.complete(user_id=USER, session_id=SESSION, call_key=info.call_key, value=1, run_config=rc)
                )
        after = await slot_of(service)
        assert (after.version, after.data) == (before.version, before.data)
        assert await runner.pending(user_id=USER, session_id=SESSION) == [info]
    assert ledger.lines() == (["render a"] if verb == "complete" else [])


async def test_a_run_that_can_create_a_session_still_advises_auto_create(tmp_path: Path) -> None:
    # the calls that never create a session: tests/test_faults.py::test_unmatched_session_raises_and_is_not_created
    ledger = Ledger(tmp_path / "ledger")
    with SqliteSessionService(tmp_path / "s2.db") as service:
        runner = Runner(app_name=APP, agent=agent_for(ledger, []), session_service=service)
        with pytest.raises(SessionNotFoundError, match="auto_create_session=True"):
            await collect(runner.run_async(user_id=USER, session_id="missing", new_message="hi"))
