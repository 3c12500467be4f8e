"""Read-only tools (issue 50, SPEC §5 v4): a call to a tool declared ``read_only=True`` writes
no intent; its outcome is held and made durable in the same commit as the turn's next durable
write (the next call with effects' intent, a checkpoint, a suspension, the end of the script).
A call with effects never starts before every outcome the script saw is durable; after a
crash, read-only calls whose outcome was not durable run again, nothing else does, and
``on_in_doubt`` never applies to them.

Run on every store: memory, SQLite and PostgreSQL (a throwaway local server, tests/_postgres.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _postgres import fresh_database
from agent_helpers import APP, SESSION, USER, fence
from codeact import (
    BaseSessionService,
    CodeActAgent,
    FunctionTool,
    InMemorySessionService,
    MontyRuntime,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
    Tool,
    ToolContext,
)
from codeact.agent._turn_state import Journal
from codeact.sessions import JournalRecord, expand_batches

pytestmark = pytest.mark.anyio


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


class Crash(BaseException):
    """The process dies: nothing catches it."""


class Commits:
    """The journal commits a store made (each ``append_journal``, ``journal_appender`` or
    ``commit_turn`` write that took), and an optional crash before or after the n-th."""

    def __init__(self) -> None:
        self.writes: list[list[JournalRecord]] = []  # batch records expanded
        self.rows: list[list[JournalRecord]] = []  # as written (a batch record is one row)
        self.crash_at: tuple[int, bool] | None = None  # (n-th commit, before it)
        self.unbatched = False  # write each held outcome as its own row, as 0.3.0 and before did

    def took(self, records: list[JournalRecord]) -> None:
        self.rows.append(records)
        self.writes.append(expand_batches(records))

    def hit(self, before: bool) -> bool:
        n = len(self.writes) + (1 if before else 0)
        if self.crash_at is not None and self.crash_at == (n, before):
            self.crash_at = None
            return True
        return False


def counting(base: type[BaseSessionService], commits: Commits) -> type[BaseSessionService]:
    """``base`` with its journal commits counted (and crashed) through both write paths."""

    class Counting(base):  # type: ignore[valid-type,misc]
        async def append_journal(self, session: Any, turn: str, records: Any, **kwargs: Any) -> None:
            if commits.hit(True):
                raise Crash
            records = expand_batches(records) if commits.unbatched else records
            await super().append_journal(session, turn, records, **kwargs)
            commits.took(list(records))
            if commits.hit(False):
                raise Crash

        async def commit_turn(self, session: Any, turn: str, records: Any, **kwargs: Any) -> int:
            if commits.hit(True):
                raise Crash
            records = expand_batches(records) if commits.unbatched else records
            version: int = await super().commit_turn(session, turn, records, **kwargs)
            commits.took(list(records))
            if commits.hit(False):
                raise Crash
            return version

        def journal_appender(self) -> Any:
            own = getattr(base, "_append_journal_now", None)
            if own is None:
                return None

            def now(session: Any, turn: str, records: Any, expected_version: Any) -> bool:
                if commits.crash_at == (len(commits.writes) + 1, True):
                    commits.crash_at = None
                    raise Crash
                records = expand_batches(records) if commits.unbatched else records
                if not own(self, session, turn, records, expected_version):
                    return False
                commits.took(list(records))
                if commits.hit(False):
                    raise Crash
                return True

            return now

    return Counting


STORES = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=STORES)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """``make(commits) -> store``: a fresh store of the parameter's kind, counting commits;
    the same data each time it is called in one test (a restarted process sees what the
    crashed one stored)."""
    kind = request.param
    memory: list[BaseSessionService] = []
    url = fresh_database() if kind == "postgres" else ""
    made: list[BaseSessionService] = []

    def make(commits: Commits) -> BaseSessionService:
        if kind == "memory":
            if not memory:
                memory.append(counting(InMemorySessionService, commits)())
            store = memory[0]
            store.__class__ = counting(InMemorySessionService, commits)  # the same data, new counters
            return store
        if kind == "sqlite":
            store = counting(SqliteSessionService, commits)(tmp_path / "s.db")
        else:
            from codeact.sessions import PostgresSessionService

            store = counting(PostgresSessionService, commits)(url, max_size=2)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


class World:
    """The ledger of tool runs: ``runs[(tool, arg)]`` counts each call's runs; as each write
    (a tool with effects) starts, ``durable_at_effect`` gets ``(its argument, the positions
    whose outcome is durable in the store then)``."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, int], int] = {}
        self.store: BaseSessionService | None = None
        self.durable_at_effect: list[tuple[int, set[int]]] = []

    def tools(self, *, read_only: bool = True, **read_kwargs: Any) -> list[Tool]:
        world = self

        def read(k: int) -> int:
            """Reads record k.

            Args:
                k: the record.
            """
            world.runs[("read", k)] = world.runs.get(("read", k), 0) + 1
            return k * 10

        async def write(k: int) -> int:
            """Writes record k.

            Args:
                k: the record.
            """
            world.runs[("write", k)] = world.runs.get(("write", k), 0) + 1
            world.durable_at_effect.append((k, await world.durable()))
            return k + 1

        return [FunctionTool(read, read_only=read_only, **read_kwargs), FunctionTool(write)]

    async def durable(self) -> set[int]:
        """The positions whose outcome the store holds for the turn in flight."""
        assert self.store is not None
        slot = await self.store.load_turn(app_name=APP, user_id=USER, session_id=SESSION)
        if slot is None:
            return set()
        records = await self.store.read_journal(
            app_name=APP, user_id=USER, session_id=SESSION, turn=str(slot.data["turn"])
        )
        return {r.seq for r in records if r.kind == "outcome"}


READS_THEN_WRITE = """
total = 0
for k in range(10):
    total += call_tool("read", {"k": k})
total += call_tool("write", {"k": total})
{"type": "final_result", "value": total}
"""

INTERLEAVED = """
a = call_tool("read", {"k": 1})
b = call_tool("write", {"k": a})
c = call_tool("read", {"k": 2})
d = call_tool("read", {"k": 3})
e = call_tool("write", {"k": c + d})
f = call_tool("read", {"k": 4})
{"type": "final_result", "value": [a, b, c, d, e, f]}
"""
INTERLEAVED_RESULT = [10, 11, 20, 30, 51, 40]
# positions: 0 read, 1 write, 2 read, 3 read, 4 write, 5 read
READ_POSITIONS = {0, 2, 3, 5}


def agent_for(world: World, script: str, **kwargs: Any) -> CodeActAgent:
    tools = kwargs.pop("tools", None) or world.tools()
    return CodeActAgent(
        name="coder",
        model=ScriptedModel(lambda request: fence(script)),
        runtime=kwargs.pop("runtime", None) or MontyRuntime(),
        tools=tools,
        **kwargs,
    )


async def run_once(
    world: World, make: Any, commits: Commits, script: str, *, new: bool, **kwargs: Any
) -> list[Any] | None:
    """One process: a run (``new``: the first message, else a recovery). None when it crashed."""
    store = make(commits)
    world.store = store
    runner = Runner(app_name=APP, agent=agent_for(world, script, **kwargs), session_service=store)
    if new:
        await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    try:
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go" if new else None))
    except Crash:
        return None
    return events


def shape(records: list[JournalRecord]) -> list[tuple[str, int]]:
    """The calls' records of a commit (the OS answers of the script's advances left out)."""
    return sorted((r.kind, r.seq) for r in records if r.kind != "os")


def shapes(commits: Commits) -> list[list[tuple[str, int]]]:
    return [shape(w) for w in commits.writes]


def stored_journal(commits: Commits) -> list[JournalRecord]:
    return [r for write in commits.writes for r in write]


def final_value(events: list[Any]) -> Any:
    return json.loads(events[-1].text)


# ---------------------------------------------------------------------------------- commits


async def test_ten_reads_and_a_write_take_two_journal_commits(make_store: Any) -> None:
    world, commits = World(), Commits()
    events = await run_once(world, make_store, commits, READS_THEN_WRITE, new=True)
    assert events is not None
    assert final_value(events) == sum(k * 10 for k in range(10)) * 2 + 1

    # two commits: the write's intent with the ten held outcomes, then its outcome
    assert len(commits.writes) == 2, commits.writes
    first, second = commits.writes
    assert shape(first) == [("intent", 10)] + [("outcome", k) for k in range(10)]
    assert shape(second) == [("outcome", 10)]
    # the ten held outcomes (and the OS answers before them) are one batch record: one row
    assert sorted(r.kind for r in commits.rows[0]) == ["batch", "intent"]
    assert [r.kind for r in commits.rows[1]] == ["outcome"]
    # no intent for a read-only call; each held outcome names its call
    for r in first:
        if r.kind == "outcome":
            data = json.loads(r.data)
            assert data["v"] == r.seq * 10 and data["c"][0] == "read" and len(data["c"][1]) == 16
    # the write started once every outcome the script had seen was durable
    assert world.durable_at_effect == [(450, set(range(10)))]
    assert all(n == 1 for n in world.runs.values())


async def test_reads_after_the_last_write_are_durable_with_the_end_of_the_script(make_store: Any) -> None:
    world, commits = World(), Commits()
    events = await run_once(world, make_store, commits, INTERLEAVED, new=True)
    assert events is not None and final_value(events) == INTERLEAVED_RESULT
    assert shapes(commits) == [
        [("intent", 1), ("outcome", 0)],  # read 0 held, durable with the first write's intent
        [("outcome", 1)],
        [("intent", 4), ("outcome", 2), ("outcome", 3)],
        [("outcome", 4)],
        [("outcome", 5)],  # the end of the script
    ]
    # each flush of held outcomes is one batch row (the crash tests below crash around each)
    assert [sorted(r.kind for r in w if r.kind != "os") for w in commits.rows] == [
        ["batch", "intent"],
        ["outcome"],
        ["batch", "intent"],
        ["outcome"],
        ["batch"],
    ]


async def test_a_script_of_reads_only_commits_once_at_its_end(make_store: Any) -> None:
    world, commits = World(), Commits()
    store = make_store(commits)
    world.store = store
    script = 'r = [call_tool("read", {"k": k}) for k in range(5)]\n{"type": "final_result", "value": r}'
    events = await run_once(world, lambda c: store, commits, script, new=True)
    assert events is not None and final_value(events) == [0, 10, 20, 30, 40]
    assert shapes(commits) == [[("outcome", k) for k in range(5)]]


# ---------------------------------------------------------------------------------- crashes


def _crash_points(n: int) -> list[tuple[int, bool]]:
    return [(i, before) for i in range(1, n + 1) for before in (True, False)]


@pytest.mark.parametrize("crash", _crash_points(5))
async def test_crash_at_each_commit_reruns_only_reads_not_yet_durable(make_store: Any, crash: tuple[int, bool]) -> None:
    """INTERLEAVED commits five times (see above); a crash before or after each, then recovery:
    the result is an uninterrupted run's; a write never started on a read whose outcome was not
    durable; a write ran again only when the crash fell between its run and its outcome's
    commit (the documented at-least-once window); a read ran again only when its outcome was
    not durable at the crash."""
    world, commits = World(), Commits()
    commits.crash_at = crash
    events = await run_once(world, make_store, commits, INTERLEAVED, new=True)
    assert events is None, "the run did not reach the crash"
    durable_at_crash = {r.seq for r in stored_journal(commits) if r.kind == "outcome"}
    runs_at_crash = dict(world.runs)
    events = await run_once(world, make_store, Commits(), INTERLEAVED, new=False)
    assert events is not None and final_value(events) == INTERLEAVED_RESULT

    # no call with effects ever started before the outcomes the script had seen were durable
    for k, seen in world.durable_at_effect:
        before = {p for p in READ_POSITIONS if p < (1 if k == 10 else 4)} | ({1} if k == 50 else set())
        assert before <= seen, f"write({k}) started with {sorted(before - seen)} not durable"
    position = {("read", 1): 0, ("write", 10): 1, ("read", 2): 2, ("read", 3): 3, ("write", 50): 4, ("read", 4): 5}
    for key, n in world.runs.items():
        if position[key] in durable_at_crash:
            assert n == runs_at_crash[key] == 1, f"{key} ran again after its outcome was durable"
        elif key[0] == "write":
            assert n <= 1 + runs_at_crash.get(key, 0) and n <= 2, f"{key} ran {n} times"
        else:
            assert n <= 1 + runs_at_crash.get(key, 0)
    assert all(n >= 1 for n in world.runs.values()) and len(world.runs) == 6


async def test_a_read_only_call_in_doubt_runs_again_without_asking(make_store: Any) -> None:
    """A journal holding an intent and no outcome for a call of a tool now declared read-only
    (written by a build or a declaration before it): recovery runs it again, with no in-doubt
    notice and whatever its ``on_in_doubt`` says."""
    world, commits = World(), Commits()
    store = make_store(commits)
    world.store = store
    # the first run: the read is not read-only (an intent, then the crash before its outcome)
    commits.crash_at = (2, True)
    first = await run_once(
        world,
        lambda c: store,
        commits,
        INTERLEAVED,
        new=True,
        tools=[world.tools(read_only=False)[0], world.tools()[1]],
    )
    assert first is None and world.runs == {("read", 1): 1}
    assert shape(stored_journal(commits)) == [("intent", 0)]
    commits.writes.clear()
    read = world.tools(on_in_doubt="ask")[0]
    events = await run_once(world, lambda c: store, commits, INTERLEAVED, new=False, tools=[read, world.tools()[1]])
    assert events is not None and final_value(events) == INTERLEAVED_RESULT
    assert world.runs[("read", 1)] == 2
    assert not [e for e in events if e.kind == "in_doubt"]


# ---------------------------------------------------------------------------------- the rule's edges


async def test_a_pause_makes_the_held_outcomes_durable_and_approval_reruns_nothing(make_store: Any) -> None:
    world, commits = World(), Commits()
    store = make_store(commits)
    world.store = store
    script = (
        'a = call_tool("read", {"k": 1})\nb = call_tool("read", {"k": 2})\n'
        'c = call_tool("pay", {"k": a + b})\n{"type": "final_result", "value": [a, b, c]}'
    )

    def pay(k: int) -> int:
        """Pays.

        Args:
            k: the amount.
        """
        world.runs[("pay", k)] = world.runs.get(("pay", k), 0) + 1
        return -k

    tools = [world.tools()[0], FunctionTool(pay, requires_confirmation=True)]
    events = await run_once(world, lambda c: store, commits, script, new=True, tools=tools)
    assert events is not None
    slot = await store.load_turn(app_name=APP, user_id=USER, session_id=SESSION)
    assert slot is not None and slot.data["status"] == "suspended"
    records = await store.read_journal(app_name=APP, user_id=USER, session_id=SESSION, turn=slot.data["turn"])
    assert shape(records) == [("outcome", 0), ("outcome", 1)]
    runner = Runner(app_name=APP, agent=agent_for(world, script, tools=tools), session_service=store)
    (call,) = await runner.pending(user_id=USER, session_id=SESSION)
    done = await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=call.call_key))
    assert final_value(done) == [10, 20, -30]
    assert world.runs == {("read", 1): 1, ("read", 2): 1, ("pay", 30): 1}


async def test_a_read_only_call_that_changes_state_or_emits_events_is_written_at_once(tmp_path: Path) -> None:
    """Its events are stored when they happen, so its outcome is written right after them (one
    commit, still no intent): a stored event never shows a call whose outcome could be lost."""
    commits = Commits()
    store = counting(SqliteSessionService, commits)(tmp_path / "s.db")

    def remember(k: int, tool_context: ToolContext) -> int:
        """Reads and notes.

        Args:
            k: the record.
        """
        tool_context.state["seen"] = k
        return k

    def plain(k: int) -> int:
        """Reads.

        Args:
            k: the record.
        """
        return k

    script = (
        'a = call_tool("remember", {"k": 1})\nb = call_tool("plain", {"k": 2})\n'
        '{"type": "final_result", "value": [a, b]}'
    )
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([fence(script)]),
        runtime=MontyRuntime(),
        tools=[FunctionTool(remember, read_only=True), FunctionTool(plain, read_only=True)],
    )
    with store:
        runner = Runner(app_name=APP, agent=agent, session_service=store)
        await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        assert final_value(events) == [1, 2]
        assert shapes(commits) == [[("outcome", 0)], [("outcome", 1)]]
        session = await store.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None and session.state["seen"] == 1

        commits.writes.clear()
        await store.create_session(app_name=APP, user_id=USER, session_id="s2")
        agent.model = ScriptedModel([fence(script)])
        events = await collect(
            runner.run_async(
                user_id=USER, session_id="s2", new_message="go", run_config=RunConfig(emit_tool_events=True)
            )
        )
        assert final_value(events) == [1, 2]
        # with tool events every read-only outcome is written at once (its events are stored)
        assert shapes(commits) == [[("outcome", 0)], [("outcome", 1)]]


async def test_a_gather_of_reads_and_a_write_writes_the_write_intent_only(tmp_path: Path) -> None:
    commits = Commits()
    world = World()
    store = counting(SqliteSessionService, commits)(tmp_path / "s.db")
    world.store = store
    tools = world.tools()
    tools[1] = FunctionTool(lambda k: k + 1, name="write")
    script = (
        "import asyncio\n"
        "async def main():\n"
        '    return await asyncio.gather(call_tool("read", {"k": 1}), call_tool("write", {"k": 5}), '
        'call_tool("read", {"k": 2}))\n'
        'r = await main()\n{"type": "final_result", "value": list(r)}'
    )
    with store:
        events = await run_once(world, lambda c: store, commits, script, new=True, tools=tools)
    assert events is not None
    assert final_value(events) == [10, 6, 20]
    journal = stored_journal(commits)
    assert [r.seq for r in journal if r.kind == "intent"] == [1]
    assert sorted(r.seq for r in journal if r.kind == "outcome") == [0, 1, 2]


async def test_a_runtime_that_writes_files_holds_nothing(tmp_path: Path) -> None:
    """With a read-write mount the script's advances may write host files (effects): a
    read-only call's outcome is written before the script goes on (still no intent)."""
    from codeact import Mount

    (tmp_path / "data").mkdir()
    commits = Commits()
    world = World()
    store = counting(SqliteSessionService, commits)(tmp_path / "s.db")
    world.store = store
    runtime = MontyRuntime(mounts=[Mount(virtual_path="/data", host_path=tmp_path / "data", access="read-write")])
    script = (
        'a = call_tool("read", {"k": 1})\nb = call_tool("read", {"k": 2})\n{"type": "final_result", "value": [a, b]}'
    )
    with store:
        events = await run_once(world, lambda c: store, commits, script, new=True, runtime=runtime)
    assert events is not None and final_value(events) == [10, 20]
    assert shapes(commits) == [[("outcome", 0)], [("outcome", 1)]]


async def test_clock_reads_between_reads_are_kept_until_the_next_write(tmp_path: Path) -> None:
    """The OS answers of several advances of read-only calls all reach the journal with the
    next write (each advance's own record), so a recovery replays the same clock."""
    commits = Commits()
    world = World()
    store = counting(SqliteSessionService, commits)(tmp_path / "s.db")
    world.store = store
    tools = world.tools()
    script = (
        "import time\n"
        't0 = time.time()\na = call_tool("read", {"k": 1})\nt1 = time.time()\nb = call_tool("read", {"k": 2})\n'
        't2 = time.time()\nc = call_tool("write", {"k": a + b})\n{"type": "final_result", "value": [t0, t1, t2, c]}'
    )
    commits.crash_at = (2, True)  # the write ran; its outcome's commit never happens

    async def write(k: int) -> int:
        """Writes.

        Args:
            k: the value.
        """
        world.runs[("write", k)] = world.runs.get(("write", k), 0) + 1
        return k + 1

    tools[1] = FunctionTool(write)
    with store:
        first = await run_once(world, lambda c: store, commits, script, new=True, tools=tools)
        assert first is None
        os_records = [r for r in stored_journal(commits) if r.kind == "os"]
        assert len(os_records) >= 3, os_records  # the advances before each read and the write
        clock = [v for r in sorted(os_records, key=lambda r: r.seq) for k, v in json.loads(r.data) if k == "clock"]
        events = await run_once(world, lambda c: store, Commits(), script, new=False, tools=tools)
    assert events is not None
    value = final_value(events)
    assert value[:3] == clock[:3] and value[3] == 31
    assert world.runs[("read", 1)] == 1 and world.runs[("read", 2)] == 1


def test_a_held_outcome_names_its_call_for_replay() -> None:
    records = [
        JournalRecord("intent", 1, '["write", "00000000000000aa"]'),
        JournalRecord("outcome", 0, '{"v":10,"c":["read","0123456789abcdef"]}'),
        JournalRecord("outcome", 1, '{"v":11}'),
        JournalRecord("outcome", 2, '{"v":1}'),  # an outcome naming no call, without an intent: not a call
    ]
    journal = Journal.from_records(records)
    assert journal.calls[0].tool == "read" and journal.calls[0].digest == "0123456789abcdef"
    assert journal.calls[0].outcome["v"] == 10
    assert journal.calls[1].tool == "write" and journal.calls[1].outcome == {"v": 11}
    assert 2 not in journal.calls


async def test_a_held_outcome_whose_call_differs_ends_the_run_as_a_divergence(tmp_path: Path) -> None:
    commits = Commits()
    world = World()
    store = counting(SqliteSessionService, commits)(tmp_path / "s.db")
    world.store = store
    commits.crash_at = (1, False)  # the write's intent (with the held read) is durable, then the crash
    with store:
        assert await run_once(world, lambda c: store, commits, INTERLEAVED, new=True) is None
        import sqlite3

        con = sqlite3.connect(tmp_path / "s.db")
        with con:
            # the held outcome is in the batch record written with the intent
            (data,) = con.execute("SELECT data FROM journal WHERE kind = 'batch' AND seq = 0").fetchone()
            batch = json.loads(data)
            ((kind, seq, outcome),) = [item for item in batch if item[0] != "os"]
            assert (kind, seq) == ("outcome", 0)
            tampered = json.loads(outcome)
            tampered["c"][1] = "ffffffffffffffff"
            batch = [[k, q, json.dumps(tampered) if k == "outcome" else d] for k, q, d in batch]
            con.execute("UPDATE journal SET data = ? WHERE kind = 'batch' AND seq = 0", (json.dumps(batch),))
        con.close()
        events = await run_once(world, lambda c: store, Commits(), INTERLEAVED, new=False)
    assert events is not None
    assert events[-1].error_code == "codeact.nondeterministic_replay"
    assert ("write", 10) not in world.runs  # no tool runs on a divergent journal


# ---------------------------------------------------------------------------------- the flag


def test_the_flag_is_declared_once_and_carried_by_prefixes() -> None:
    from codeact import tool
    from codeact.toolsets import FunctionToolset

    @tool(read_only=True)
    def look(k: int) -> int:
        """Looks.

        Args:
            k: the key.
        """
        return k

    assert look.read_only and not FunctionTool(lambda: 1, name="x").read_only
    assert Tool("t", read_only=True).read_only and not Tool("u").read_only
    prefixed = FunctionToolset([look], prefix="crm")._finish([look], None)[0]
    assert prefixed.name == "crm_look" and prefixed.read_only


def test_langchain_and_adk_tools_are_declared_read_only_by_name_or_all() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.tools import tool as lc_tool

    from codeact.integrations.langchain import from_langchain

    @lc_tool
    def search(q: str) -> str:
        """Searches."""
        return q

    @lc_tool
    def send(q: str) -> str:
        """Sends."""
        return q

    assert [t.read_only for t in from_langchain([search, send], read_only=True)] == [True, True]
    assert [t.read_only for t in from_langchain([search, send], read_only=["search"])] == [True, False]
    assert [t.read_only for t in from_langchain([search, send])] == [False, False]

    pytest.importorskip("google.adk")
    from google.adk.tools import FunctionTool as AdkFunctionTool

    from codeact.integrations.adk import from_adk

    def lookup(k: int) -> int:
        """Looks up."""
        return k

    def pay(k: int) -> int:
        """Pays."""
        return k

    converted = from_adk([AdkFunctionTool(lookup), AdkFunctionTool(pay)], read_only=["lookup"])
    assert [t.read_only for t in converted] == [True, False]
    assert all(t.read_only for t in from_adk([AdkFunctionTool(lookup), pay], read_only=True))


def test_mcp_read_only_hints_are_trusted_only_when_asked() -> None:
    pytest.importorskip("mcp")
    from mcp.types import Tool as McpToolInfo
    from mcp.types import ToolAnnotations

    from codeact.integrations.mcp._toolset import _read_only_hint

    hinted = McpToolInfo(name="a", input_schema={"type": "object"}, annotations=ToolAnnotations(read_only_hint=True))
    plain = McpToolInfo(name="b", input_schema={"type": "object"})
    assert _read_only_hint(hinted) and not _read_only_hint(plain)


def test_pydantic_ai_metadata_read_only() -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.tools import ToolDefinition

    from codeact.integrations.pydantic_ai._toolset import read_only_tool

    assert read_only_tool(ToolDefinition(name="a", metadata={"read_only": True}))
    assert not read_only_tool(ToolDefinition(name="b"))
    assert not read_only_tool(ToolDefinition(name="c", metadata={"read_only": "yes"}))


async def test_a_journal_of_one_row_per_held_outcome_recovers_and_goes_on_in_batches(make_store: Any) -> None:
    """The journal format before batch records (each held outcome its own row): a turn
    interrupted with such rows (the crash after INTERLEAVED's third commit) recovers under this
    version, which reads them as before: no read whose outcome is stored runs again, and what
    the turn holds next is written as a batch record, beside the old rows."""
    world, commits = World(), Commits()
    commits.unbatched, commits.crash_at = True, (3, False)
    assert await run_once(world, make_store, commits, INTERLEAVED, new=True) is None
    assert [sorted(r.kind for r in w if r.kind != "os") for w in commits.rows] == [
        ["intent", "outcome"],
        ["outcome"],
        ["intent", "outcome", "outcome"],
    ]
    later = Commits()
    events = await run_once(world, make_store, later, INTERLEAVED, new=False)
    assert events is not None and final_value(events) == INTERLEAVED_RESULT
    # write(50)'s intent was durable and it had not run (in doubt: it runs, once in all)
    assert set(world.runs.values()) == {1} and len(world.runs) == 6
    assert [sorted(r.kind for r in w if r.kind != "os") for w in later.rows] == [["outcome"], ["batch"]]


# ---------------------------------------------------------------------------------- a 0.2.0 journal

FIXTURE_020 = Path(__file__).parent / "data" / "interrupted-0.2.0.sqlite"  # tools/make_journal_fixture.py


async def test_a_stored_0_2_0_journal_recovers_with_read_only_tools(tmp_path: Path) -> None:
    """A turn interrupted under 0.2.0 (intents and outcomes for ``lookup(1)`` and ``note``, an
    intent without outcome for ``lookup(2)``) recovers under a roster that now declares
    ``lookup`` read-only: recorded calls are answered from the journal, ``lookup(2)`` runs
    again with no in-doubt notice, ``pay`` runs once."""
    import shutil

    db = tmp_path / "s.db"
    shutil.copyfile(FIXTURE_020, db)
    ran: list[str] = []

    def lookup(k: int) -> int:
        """Looks up record k.

        Args:
            k: the record.
        """
        ran.append(f"lookup {k}")
        return k * 10

    def note(text: str) -> str:
        """Notes text.

        Args:
            text: the text.
        """
        ran.append("note")
        return f"noted {text}"

    def pay(amount: int) -> str:
        """Pays.

        Args:
            amount: the amount.
        """
        ran.append(f"pay {amount}")
        return f"paid {amount}"

    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([]),
        runtime=MontyRuntime(),
        tools=[FunctionTool(lookup, read_only=True, on_in_doubt="ask"), FunctionTool(note), FunctionTool(pay)],
    )
    with SqliteSessionService(db) as store:
        runner = Runner(app_name="app", agent=agent, session_service=store)
        info = await runner.turn_info(user_id="u", session_id="s")
        assert info is not None and info.status == "interrupted"
        events = await collect(runner.run_async(user_id="u", session_id="s"))
        assert json.loads(events[-1].text) == [10, "noted x", 20, "paid 30"]
        assert not [e for e in events if e.kind == "in_doubt"]
        assert await store.load_turn(app_name="app", user_id="u", session_id="s") is None
    assert ran == ["lookup 2", "pay 30"]


async def test_held_outcomes_are_sealed_like_every_journal_record(tmp_path: Path) -> None:
    """Under a ``snapshot_key`` the held outcomes are sealed when they are written (with an
    intent, at the end of the script, with a pause's slot), and a recovery opens them."""
    key = b"k" * 32
    world, commits = World(), Commits()
    store = counting(SqliteSessionService, commits)(tmp_path / "s.db")
    world.store = store
    commits.crash_at = (3, True)  # write50's intent, with read2 and read3 held: never committed
    with store:
        runtime = MontyRuntime(snapshot_key=key)
        assert await run_once(world, lambda c: store, commits, INTERLEAVED, new=True, runtime=runtime) is None
        stored = stored_journal(commits)
        assert stored and all(set(json.loads(r.data)) == {"p", "m", "s"} for r in stored)  # each one sealed
        held = [json.loads(json.loads(r.data)["p"]) for r in stored if r.kind == "outcome" and r.seq == 0]
        assert held and held[0]["c"][0] == "read"
        events = await run_once(
            world, lambda c: store, Commits(), INTERLEAVED, new=False, runtime=MontyRuntime(snapshot_key=key)
        )
    assert events is not None and final_value(events) == INTERLEAVED_RESULT
    assert world.runs[("read", 1)] == 1 and world.runs[("write", 10)] == 1
    assert world.runs[("read", 2)] == 2 and world.runs[("write", 50)] == 1


async def test_a_batch_record_as_a_store_returns_it_unexpanded_is_opened_and_checked(tmp_path: Path) -> None:
    """A third-party store's ``read_journal`` may return a ``batch`` record as written:
    ``open_journal`` expands it and checks the seal of each record it holds (a batch is not
    sealed as a whole: each of its records keeps its own seal); an altered or malformed batch
    makes the turn stale (``SnapshotError``), as an altered row does."""
    import sqlite3

    from codeact.exceptions import SnapshotError
    from codeact.turns._verify import open_journal

    key = b"k" * 32
    world, commits = World(), Commits()
    store = counting(SqliteSessionService, commits)(tmp_path / "s.db")
    world.store = store
    commits.crash_at = (1, False)  # write10's intent with read1's outcome held: committed
    with store:
        runtime = MontyRuntime(snapshot_key=key)
        assert await run_once(world, lambda c: store, commits, INTERLEAVED, new=True, runtime=runtime) is None
    con = sqlite3.connect(tmp_path / "s.db")
    rows = con.execute("SELECT turn, kind, seq, data FROM journal").fetchall()
    con.close()
    turn = rows[0][0]
    raw = [JournalRecord(k, q, d) for _, k, q, d in rows]
    assert sorted(r.kind for r in raw if r.kind != "os") == ["batch", "intent"]
    opened = open_journal(runtime, (APP, USER, SESSION), turn, raw)
    assert [(r.kind, r.seq) for r in opened if r.kind != "os"] == [("outcome", 0), ("intent", 1)]
    assert json.loads(next(r for r in opened if r.kind == "outcome").data)["c"][0] == "read"
    batch = next(r for r in raw if r.kind == "batch")
    items = json.loads(batch.data)

    def alter(kind: str, data: str) -> str:  # the outcome's value changed, its seal kept
        if kind != "outcome":
            return data
        sealed = json.loads(data)
        return json.dumps({**sealed, "p": sealed["p"].replace('"v":10', '"v":11')})

    altered = [[k, q, alter(k, d)] for k, q, d in items]
    assert altered != items
    altered_items = [JournalRecord("batch", batch.seq, json.dumps(altered))]
    for bad in (altered_items, [JournalRecord("batch", batch.seq, '{"not": "a list"}')]):
        with pytest.raises(SnapshotError):
            open_journal(runtime, (APP, USER, SESSION), turn, [r for r in raw if r.kind != "batch"] + bad)
