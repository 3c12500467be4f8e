"""Issue 47, the ADK door: a call in doubt (it started before its runner stopped and may have
run) is announced as ADK's ``adk_request_input`` whose ``response_schema`` names rerun, skip
(with a value) or fail, never as ``adk_request_confirmation``; a ``confirmed: true/false``
answer on it is refused; the answer to the input request resolves it. Real google-adk
``InMemoryRunner``, real Monty, a real SQLite codeact store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("google.adk", reason="codeact[adk] is not installed")

from google.adk.runners import InMemoryRunner
from google.genai import types

from codeact import CodeActAgent, FunctionTool, MontyRuntime, Runner, ScriptedModel, SqliteSessionService
from codeact.integrations.adk import (
    IN_DOUBT_SCHEMA,
    REQUEST_CONFIRMATION,
    REQUEST_INPUT,
    CodeActAdkAgent,
    confirmation_call_id,
)

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]  # ADK is asyncio-only

SYNCED: list[int] = []
HANG: dict[str, Any] = {"started": None}
SYNC = """```python
n = call_tool("sync_ledger", {"n": 3})
{"type": "final_result", "value": f"synced {n}"}
```"""


async def sync_ledger(n: int) -> Any:
    """Syncs the ledger (asks a human when it may or may not have happened)."""
    SYNCED.append(n)
    started = HANG["started"]
    if started is not None:  # the runner "dies" here: the test cancels it
        started.set()
        await anyio.sleep_forever()
    return n


def reply(request: Any) -> str:
    """The sync script; after a failed call, an answer saying so."""
    if any("may or may not have run" in c.text for c in request.contents):
        return '```python\n{"type": "final_result", "value": "gave up"}\n```'
    return SYNC


def clerk() -> CodeActAgent:
    return CodeActAgent(
        name="clerk",
        model=ScriptedModel(reply),
        runtime=MontyRuntime(),
        tools=[FunctionTool(sync_ledger, on_in_doubt="ask")],
    )


async def crash(store: SqliteSessionService) -> None:
    """A codeact run of the ADK session's codeact twin stopped inside the tool, after its side
    effect and before its outcome is recorded: the call is left in doubt."""
    runner = Runner(app_name="a", agent=clerk(), session_service=store, auto_create_session=True)
    HANG["started"] = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                async for _ in runner.run_async(user_id="u", session_id="s", new_message="sync"):
                    pass

            tg.start_soon(run)
            await HANG["started"].wait()
            tg.cancel_scope.cancel()
    finally:
        HANG["started"] = None


async def send(runner: InMemoryRunner, *parts: types.Part) -> list[Any]:
    message = types.Content(role="user", parts=list(parts))
    return [e async for e in runner.run_async(user_id="u", session_id="s", new_message=message)]


def answer(name: str, request_id: str, response: dict[str, Any]) -> types.Part:
    return types.Part(function_response=types.FunctionResponse(name=name, id=request_id, response=response))


async def test_a_call_in_doubt_is_an_input_request_not_a_confirmation(anyio_backend: str, tmp_path: Path) -> None:
    SYNCED.clear()
    with SqliteSessionService(tmp_path / "codeact.db") as store:
        await crash(store)
        assert SYNCED == [3]
        runner = InMemoryRunner(agent=CodeActAdkAgent.wrap(clerk(), session_service=store), app_name="a")
        await runner.session_service.create_session(app_name="a", user_id="u", session_id="s")

        events = await send(runner, types.Part(text="sync again"))  # recovers the interrupted turn
        calls = [fc for e in events for fc in e.get_function_calls()]
        assert [fc.name for fc in calls] == [REQUEST_INPUT]  # before: adk_request_confirmation
        [request] = calls
        [asking] = [e for e in events if e.get_function_calls()]
        assert asking.long_running_tool_ids == {request.id} and request.args["interruptId"] == request.id
        assert request.args["response_schema"] == IN_DOUBT_SCHEMA
        assert IN_DOUBT_SCHEMA["properties"]["action"]["enum"] == ["rerun", "skip", "fail"]
        payload = request.args["payload"]
        assert (payload["tool"], payload["args"]) == ("sync_ledger", {"n": 3})
        # ADK's loop (`if event.is_final_response(): ... break`) stops at the request, not at a notice
        assert next(e for e in events if e.is_final_response()) is asking

        key = payload["callKey"]
        for confirmed in (True, False):
            refused = await send(
                runner, answer(REQUEST_CONFIRMATION, confirmation_call_id(key), {"confirmed": confirmed})
            )
            assert [e.error_code for e in refused] == ["codeact.decision_refused"], refused
            assert "rerun" in refused[0].error_message and "fail" in refused[0].error_message
        assert SYNCED == [3]  # before: a denial settled it ("denied by a human reviewer")

        bad = await send(runner, answer(REQUEST_INPUT, request.id, {"action": "approve"}))
        assert [e.error_code for e in bad] == ["codeact.bad_decision"]

        resolved = await send(runner, answer(REQUEST_INPUT, request.id, {"action": "skip", "value": 3}))
        final = resolved[-1]
        assert final.is_final_response() and final.content.parts[0].text == "synced 3"
        assert SYNCED == [3]  # skipped: not run again

        again = await send(runner, answer(REQUEST_INPUT, request.id, {"action": "rerun"}))
        assert [e.error_code for e in again] == ["codeact.no_pending_call"] and SYNCED == [3]


@pytest.mark.parametrize(
    ("response", "runs"), [({"action": "rerun"}, [3, 3]), ({"result": {"action": "fail", "reason": "checked"}}, [3])]
)
async def test_rerun_and_fail_answers_resolve_the_call(
    anyio_backend: str, tmp_path: Path, response: dict[str, Any], runs: list[int]
) -> None:
    SYNCED.clear()
    with SqliteSessionService(tmp_path / "codeact.db") as store:
        await crash(store)
        runner = InMemoryRunner(agent=CodeActAdkAgent.wrap(clerk(), session_service=store), app_name="a")
        await runner.session_service.create_session(app_name="a", user_id="u", session_id="s")
        events = await send(runner, types.Part(text="sync again"))
        [request] = [fc for e in events for fc in e.get_function_calls() if fc.name == REQUEST_INPUT]
        resolved = await send(runner, answer(REQUEST_INPUT, request.id, response))
        assert SYNCED == runs
        final = resolved[-1]
        assert final.is_final_response()
        assert final.content.parts[0].text == ("synced 3" if response.get("action") == "rerun" else "gave up")
