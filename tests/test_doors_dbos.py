"""Issue 47, the DBOS door: a call in doubt is reported as ``PausedCall.kind == "in_doubt"``
(never ``"confirmation"``), approve and deny on it are refused with a typed error naming what it
accepts, ``CodeActClient.resolve`` decides it, and a message-less run on a session with nothing
pending calls no model. A real ``Worker`` (DBOS launched in this process) on a real PostgreSQL
server, a real ``DBOSClient``, real Monty, a real SQLite session store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from _postgres import postgres_server, postgres_url  # noqa: F401

pytest.importorskip("dbos")

from codeact import CodeActAgent, FunctionTool, MontyRuntime, Runner, ScriptedModel, SqliteSessionService
from codeact.integrations.dbos import CodeActClient, RunResult, Worker
from codeact.models import LlmRequest

pytestmark = pytest.mark.anyio
APP, USER = "doors", "u"
SYNCED: list[int] = []
HANG: dict[str, Any] = {"started": None}
MODEL_CALLS: list[int] = []

SYNC = """```python
n = call_tool("sync_ledger", {"n": 3})
{"type": "final_result", "value": f"synced {n}"}
```"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def sync_ledger(n: int) -> Any:
    """Syncs the ledger (asks a human when it may or may not have happened)."""
    SYNCED.append(n)
    started = HANG["started"]
    if started is not None:  # the runner "dies" here: the test cancels it
        started.set()
        await anyio.sleep_forever()
    return n


def make_runner(db: Path) -> Runner:
    def reply(request: LlmRequest) -> str:
        MODEL_CALLS.append(1)
        return SYNC

    agent = CodeActAgent(
        name="clerk",
        model=ScriptedModel(reply),
        runtime=MontyRuntime(),
        tools=[FunctionTool(sync_ledger, on_in_doubt="ask")],
    )
    return Runner(app_name=APP, agent=agent, session_service=SqliteSessionService(db), auto_create_session=True)


async def crash(db: Path, session_id: str) -> None:
    """Runs the sync script and stops the runner inside the tool, after its side effect and
    before its outcome is recorded (as a runner that died): the call is left in doubt."""
    runner = make_runner(db)
    HANG["started"] = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                async for _ in runner.run_async(user_id=USER, session_id=session_id, new_message="sync"):
                    pass

            tg.start_soon(run)
            await HANG["started"].wait()
            tg.cancel_scope.cancel()
    finally:
        HANG["started"] = None
        runner.session_service.close()


@pytest.fixture
def fleet(tmp_path: Path, postgres_url: str) -> Iterator[tuple[CodeActClient, Path]]:  # noqa: F811
    from dbos import DBOSClient

    db = tmp_path / "sessions.db"
    worker = Worker(make_runner(db), database_url=postgres_url, polling_interval=0.05, recovery_interval=0.5)
    worker.start()
    dbos_client = DBOSClient(system_database_url=postgres_url, application_name="codeact")
    try:
        yield CodeActClient(dbos_client, app_name=APP), db
    finally:
        dbos_client.destroy()
        worker.stop(grace=10)
        worker.runner.session_service.close()


def wait(handle: Any) -> RunResult:
    deadline = time.monotonic() + 60
    while handle.status() not in ("SUCCESS", "ERROR"):
        assert time.monotonic() < deadline, f"timed out on {handle.workflow_id}"
        time.sleep(0.02)
    return handle.result()


async def test_a_call_in_doubt_is_reported_refused_to_approve_and_deny_and_resolved(
    fleet: tuple[CodeActClient, Path],
) -> None:
    client, db = fleet
    SYNCED.clear()
    await crash(db, "s1")
    assert SYNCED == [3]
    recovered = wait(client.run(USER, "s1", None, run_key="recover-1"))
    assert recovered.status == "paused", recovered
    [call] = recovered.paused
    assert (call.kind, call.tool, call.args) == ("in_doubt", "sync_ledger", {"n": 3})  # before: "confirmation"

    for verb, handle in (
        ("approve", client.approve(USER, "s1", call.call_key)),
        ("deny", client.deny(USER, "s1", call.call_key, reason="no")),
    ):
        refused = wait(handle)
        assert (refused.status, refused.error_type) == ("failed", "DecisionRefusedError"), (verb, refused)
        assert "rerun" in (refused.error or "") and "skip" in (refused.error or "") and "fail" in (refused.error or "")
    assert SYNCED == [3]
    # still in doubt: a message-less run announces it again, unchanged
    again = wait(client.run(USER, "s1", None, run_key="look-again"))
    assert [(p.call_key, p.kind) for p in again.paused] == [(call.call_key, "in_doubt")]

    done = wait(client.resolve(USER, "s1", call.call_key, "skip", value=3, actor="ops"))
    assert (done.status, done.text) == ("done", "synced 3"), done
    assert SYNCED == [3]  # skipped: not run again
    # who decided went through DBOS into the journal (issue 49)
    runner = make_runner(db)
    try:
        (decided,) = await runner.decisions(APP, user_id=USER, session_id="s1")
    finally:
        runner.session_service.close()
    assert (decided.act, decided.actor, decided.call_key) == ("skip", "ops", call.call_key)


async def test_a_message_less_run_with_nothing_pending_calls_no_model(fleet: tuple[CodeActClient, Path]) -> None:
    client, _ = fleet
    SYNCED.clear()
    first = wait(client.run(USER, "s2", "sync", run_key="m-1"))
    assert (first.status, first.text) == ("done", "synced 3")
    calls = len(MODEL_CALLS)
    idle = wait(client.run(USER, "s2", None, run_key="nudge-1"))
    assert (idle.status, idle.events, idle.paused) == ("done", 0, [])
    assert len(MODEL_CALLS) == calls and SYNCED == [3]  # before: a new invocation called the model
