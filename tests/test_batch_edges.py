"""Batch journal records at their edges (issue 50, docs/durability.md): a batch row that is
truncated or corrupted in the store makes the turn stale (nothing of it runs again, the
session stays usable and inspectable), as an altered row does; it does not crash the runner.

Real parts: the Monty interpreter, the runner, a SQLite file edited with sqlite3.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_helpers import APP, SESSION, USER
from codeact import Runner, SqliteSessionService
from test_read_only_calls import INTERLEAVED, Commits, World, agent_for, counting, run_once

pytestmark = pytest.mark.anyio

CORRUPTIONS = {
    "truncated": lambda data: data[: len(data) // 2],
    "not a list": lambda data: '{"not": "a list"}',
    "a malformed item": lambda data: '[["outcome", "zero", 1]]',
}


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
async def test_a_corrupted_batch_row_makes_the_turn_stale_and_nothing_runs_again(tmp_path: Path, corrupt: Any) -> None:
    world, commits = World(), Commits()
    db = tmp_path / "s.db"
    store = counting(SqliteSessionService, commits)(db)
    world.store = store
    commits.crash_at = (1, False)  # write10's intent with read1's outcome held (a batch): committed
    with store:
        assert await run_once(world, lambda c: store, commits, INTERLEAVED, new=True) is None
    assert world.runs == {("read", 1): 1}
    con = sqlite3.connect(db)
    ((data,),) = con.execute("SELECT data FROM journal WHERE kind = 'batch'").fetchall()
    con.execute("UPDATE journal SET data = ? WHERE kind = 'batch'", (corrupt(data),))
    con.commit()
    con.close()

    store = SqliteSessionService(db)
    with store:
        runner = Runner(app_name=APP, agent=agent_for(world, INTERLEAVED), session_service=store)
        pending = await runner.pending(user_id=USER, session_id=SESSION)  # inspecting it does not raise
        assert pending is not None
        events = [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message=None)]
    assert world.runs == {("read", 1): 1}  # nothing ran again: neither the write nor the read
    assert [e.error_code for e in events] == ["codeact.stale_checkpoint"]
    assert "unreadable" in (events[0].error_message or "")
