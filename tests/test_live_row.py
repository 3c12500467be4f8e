"""The live row (issue 51): a streaming run keeps what it streamed so far in the store, for
watchers in other processes; bounded, overwritten, at most 5 writes a second (plus one right
after a stored event), deleted when the run ends, never an event; a run that does not stream
writes none; a store without a live channel, or one that fails, never fails the run."""

from __future__ import annotations

import itertools
import logging
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from _postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from codeact import CodeActAgent, FunctionTool, MontyRuntime, RunConfig, Runner, ScriptedModel
from codeact.agent._streaming import LIVE_INTERVAL, LiveRowWriter
from codeact.events import Content, Event, Part
from codeact.exceptions import SessionStoreError
from codeact.sessions import BaseSessionService, InMemorySessionService, SqliteSessionService
from codeact.sessions._live import LIVE_MAX_CHARS, LiveRow

pytestmark = pytest.mark.anyio

APP, USER, SID = "live", "u", "s"

SCRIPT = """```python
for i in range(3):
    print("tick", i)
    call_tool("wait", {"i": i})
{"type": "final_result", "value": "done"}
```"""


class Recording(InMemorySessionService):
    """The memory store, recording each live write: (monotonic time, row or None)."""

    def __init__(self) -> None:
        super().__init__()
        self.live_writes: list[tuple[float, LiveRow | None]] = []

    async def save_live(self, *, app_name: str, user_id: str, session_id: str, live: LiveRow | None) -> int:
        self.live_writes.append((time.monotonic(), live))
        return await super().save_live(app_name=app_name, user_id=user_id, session_id=session_id, live=live)


class NoLive(InMemorySessionService):
    """A store without a live channel (a third party's): the base class's methods."""

    save_live = BaseSessionService.save_live
    load_live = BaseSessionService.load_live


class Failing(InMemorySessionService):
    """A store whose live writes fail."""

    calls = 0

    async def save_live(self, *, app_name: str, user_id: str, session_id: str, live: LiveRow | None) -> int:
        self.calls += 1
        raise SessionStoreError("the live table is gone")


def _agent(seen: list[LiveRow | None], watcher: BaseSessionService | None, **pace: Any) -> CodeActAgent:
    async def wait(i: int) -> int:
        """Waits a little (longer than the live intervals), and looks at the live row from
        another handle on the store."""
        await anyio.sleep(0.3 if watcher is not None else 0.05)
        if watcher is not None:
            seen.append(await watcher.load_live(app_name=APP, user_id=USER, session_id=SID))
        return i

    return CodeActAgent(
        name="coder",
        model=ScriptedModel([SCRIPT], chars_per_token=3, **pace),
        runtime=MontyRuntime(),
        tools=[FunctionTool(wait)],
    )


async def _run(runner: Runner, streaming: bool = True) -> list[Event]:
    return [
        e
        async for e in runner.run_async(
            user_id=USER, session_id=SID, new_message="tick", run_config=RunConfig(streaming=streaming)
        )
    ]


async def test_a_streaming_run_keeps_its_output_live_in_the_store_then_deletes_it(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    seen: list[LiveRow | None] = []
    with SqliteSessionService(db) as store, SqliteSessionService(db) as watcher:  # two handles: two processes
        runner = Runner(app_name=APP, agent=_agent(seen, watcher), session_service=store, auto_create_session=True)
        events = await _run(runner)
        assert events[-1].text == "done"
        session = await watcher.get_session(app_name=APP, user_id=USER, session_id=SID)
        assert session is not None and not any(e.partial for e in session.events)
        reply_id = next(e.id for e in session.events if e.kind == "model_reply")
        # inside each tool call, the row holds what the script printed so far, after the stored reply
        assert [r.output if r is not None else None for r in seen] == [
            "tick 0\n",
            "tick 0\ntick 1\n",
            "tick 0\ntick 1\ntick 2\n",
        ]
        assert seen[0] is not None and seen[0].reply == "" and seen[0].after == reply_id
        assert seen[0].author == "coder" and seen[0].invocation_id == events[-1].invocation_id
        assert await watcher.load_live(app_name=APP, user_id=USER, session_id=SID) is None  # deleted at the end


async def test_the_reply_grows_in_the_row_at_most_five_writes_a_second() -> None:
    store = Recording()
    runner = Runner(
        app_name=APP,
        agent=_agent([], None, time_to_first_token=0.05, tokens_per_second=60),
        session_service=store,
        auto_create_session=True,
    )
    started = time.monotonic()
    await _run(runner)
    took = time.monotonic() - started
    rows = [(t, row) for t, row in store.live_writes if row is not None]
    replies = [row.reply for _, row in rows if row.reply]
    assert len(replies) >= 3, replies  # the reply as it grows ...
    assert all(b.startswith(a) and len(b) > len(a) for a, b in itertools.pairwise(replies))
    assert SCRIPT.startswith(replies[-1])  # ... the text the model streamed, never past it
    # at most one write per interval, plus one right after each stored event
    session = await store.get_session(app_name=APP, user_id=USER, session_id=SID)
    assert session is not None
    assert len(rows) <= took / LIVE_INTERVAL + len(session.events) + 1
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(rows)]
    assert sum(g < LIVE_INTERVAL * 0.9 for g in gaps) <= len(session.events)
    assert store.live_writes[-1][1] is None  # deleted when the run ended


async def test_a_run_that_does_not_stream_writes_no_live_row() -> None:
    store = Recording()
    runner = Runner(app_name=APP, agent=_agent([], None), session_service=store, auto_create_session=True)
    events = await _run(runner, streaming=False)
    assert events[-1].text == "done" and store.live_writes == []


async def test_a_store_without_a_live_channel_streams_as_before() -> None:
    store = NoLive()
    assert not store.keeps_live and InMemorySessionService().keeps_live
    runner = Runner(app_name=APP, agent=_agent([], None), session_service=store, auto_create_session=True)
    events = await _run(runner)
    assert events[-1].text == "done" and any(e.partial for e in events)
    assert await store.load_live(app_name=APP, user_id=USER, session_id=SID) is None


async def test_a_failing_live_write_never_fails_the_run(caplog: pytest.LogCaptureFixture) -> None:
    store = Failing()
    runner = Runner(app_name=APP, agent=_agent([], None), session_service=store, auto_create_session=True)
    with caplog.at_level(logging.WARNING, logger="codeact"):
        events = await _run(runner)
    assert events[-1].text == "done"
    assert store.calls == 1  # one failure, then no more writes this run
    assert sum("live row" in r.getMessage() for r in caplog.records) == 1


async def test_the_writer_bounds_the_text_and_follows_the_last_stored_event() -> None:
    store = InMemorySessionService()
    session = await store.create_session(app_name=APP, user_id=USER, session_id=SID)
    stored = await store.append_event(session, Event(author="user", content=Content.from_text("go")))
    clock = [0.0]
    writer = LiveRowWriter(store, session, clock=lambda: clock[0])

    def partial(kind: str, text: str) -> Event:
        return Event(
            author="coder",
            invocation_id="i",
            content=Content(role="model", parts=[Part(text=text)]),
            custom_metadata={"codeact_kind": kind},
            partial=True,
        )

    async def row() -> LiveRow | None:
        return await store.load_live(app_name=APP, user_id=USER, session_id=SID)

    await writer.see(partial("model_reply", "x" * LIVE_MAX_CHARS))
    first = await row()
    assert first is not None and first.version == 1 and first.after == stored.id and not first.truncated
    await writer.see(partial("model_reply", "yz"))  # within the interval: held
    assert (await row()) == first
    clock[0] += LIVE_INTERVAL
    await writer.see(partial("model_reply", "!"))
    got = await row()
    assert got is not None and got.version == 2 and got.truncated and len(got.reply) == LIVE_MAX_CHARS
    assert got.reply.endswith("xyz!")
    reply = Event(author="coder", content=Content.from_text("..."), custom_metadata={"codeact_kind": "model_reply"})
    await store.append_event(session, reply)
    await writer.see(reply)  # the complete reply is stored: the live reply ends, nothing is left to write
    assert (await row()) == got  # the old row stays, but follows an older event: readers hide it
    await writer.see(partial("script_output", "hello\n"))  # the first write after a stored event: at once
    got = await row()
    assert got is not None and (got.reply, got.output, got.after) == ("", "hello\n", reply.id)
    await writer.close()
    assert await row() is None
    assert writer.writes == 3


async def test_a_dbos_worker_with_streaming_keeps_the_live_row_and_returns_the_stored_events() -> None:
    pytest.importorskip("dbos", reason="codeact[dbos] is not installed")
    from codeact.integrations.dbos import Worker
    from codeact.integrations.dbos._protocol import RunRequest

    results = []
    for streaming in (False, True):
        store = Recording()
        runner = Runner(app_name=APP, agent=_agent([], None), session_service=store, auto_create_session=True)
        worker = Worker(runner, database_url="postgresql://127.0.0.1:1/unused", streaming=streaming)
        request = RunRequest(kind="run", app_name=APP, user_id=USER, session_id=SID, run_key="k1", message="tick")
        result = await worker._call("run", request, "wf-1")  # the workflow's body, without DBOS
        session = await store.get_session(app_name=APP, user_id=USER, session_id=SID)
        assert session is not None
        results.append((result, len(session.events), store.live_writes))
    (plain, stored, none), (live, stored_live, writes) = results
    assert none == [] and writes and writes[-1][1] is None  # written while it ran, deleted at the end
    assert any(row is not None and "tick 0" in row.output for _, row in writes)
    assert live.status == plain.status == "done" and live.text == plain.text == "done"
    assert stored == stored_live and live.events == plain.events  # no partial event in the result


async def test_a_schema_2_sqlite_file_gains_the_live_table_in_place(tmp_path: Path) -> None:
    import sqlite3

    from codeact.sessions._sqlite import SCHEMA_VERSION

    db = tmp_path / "old.db"
    with SqliteSessionService(db) as store:
        await store.create_session(app_name=APP, user_id=USER, session_id=SID)
    con = sqlite3.connect(db)  # what the build before the live row wrote: schema 2, no live table
    con.execute("DROP TABLE live")
    con.execute("UPDATE schema_version SET version = 2")
    con.commit()
    con.close()
    with SqliteSessionService(db) as store:
        assert await store.load_live(app_name=APP, user_id=USER, session_id=SID) is None
        assert await store.save_live(app_name=APP, user_id=USER, session_id=SID, live=LiveRow(reply="hi")) == 1
    con = sqlite3.connect(db)
    assert con.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,) == (3,)
    con.close()


async def test_a_schema_1_postgres_database_gains_the_live_table_in_place(postgres_url: str) -> None:  # noqa: F811
    psycopg = pytest.importorskip("psycopg")
    from codeact.sessions import PostgresSessionService
    from codeact.sessions._postgres import SCHEMA_VERSION

    with PostgresSessionService(postgres_url) as store:
        await store.create_session(app_name=APP, user_id=USER, session_id=SID)
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # the layout before the live row
        conn.execute("DROP TABLE codeact_live")
        conn.execute("UPDATE codeact_schema_version SET version = 1")
    with PostgresSessionService(postgres_url) as store:
        assert await store.save_live(app_name=APP, user_id=USER, session_id=SID, live=LiveRow(output="o")) == 1
        row = await store.load_live(app_name=APP, user_id=USER, session_id=SID)
        assert row is not None and row.output == "o"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM codeact_schema_version").fetchone() == (SCHEMA_VERSION,) == (2,)
