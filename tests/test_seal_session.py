"""A sealed turn is bound to its session (issue 46 item 3, SPEC §5 v3/v4).

Under ``snapshot_key`` the turn record's seal and every journal record's seal cover
``(app_name, user_id, session_id)``: a paused turn row, or a journal record, copied from one
user's session into another's is stale there. It is not listed, a decision on it raises
``StaleCheckpointError`` before anything is claimed or stored, no tool runs and the other
transcript is unchanged; the session it belongs to still approves it. A turn paused under
0.2.0's seal (``tests/data/paused-0.2.0-sealed.sqlite``, made by
``tools/make_sealed_turn_fixture.py`` with 0.2.0's sources) is refused with a message naming
the upgrade and ``codeact sessions discard``, which drops it.

Real interpreter, real SQLite files; rows are copied with ``sqlite3`` as a writer of the
store would.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import codeact.runner
from agent_helpers import fence
from codeact import (
    CodeActAgent,
    FunctionTool,
    MontyRuntime,
    Runner,
    ScriptedModel,
    SqliteSessionService,
    StaleCheckpointError,
    ToolContext,
)
from codeact.exceptions import SnapshotError
from codeact.turns._verify import open_journal

pytestmark = pytest.mark.anyio

KEY = b"session-bound seal key, 32 bytes"
APP = "app"
ALICE = ("alice", "sa")
BOB = ("bob", "sb")
FIXTURE = Path(__file__).parent / "data" / "paused-0.2.0-sealed.sqlite"
FIXTURE_KEY = b"codeact 0.2.0 fixture key, 32 b!"  # tools/make_sealed_turn_fixture.py
PAY = 'r = call_tool("pay", {"amount": 900})\n{"type": "final_result", "value": r}'


class Ledger:
    """Side effects, one line per tool run, naming whose context the tool ran with."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, line: str) -> None:
        with self.path.open("a") as f:
            f.write(line + "\n")

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []


def agent_for(
    ledger: Ledger, replies: list[str], *, key: bytes = KEY, during_pay: Callable[[], None] | None = None
) -> CodeActAgent:
    def pay(amount: int, tool_context: ToolContext) -> str:
        """Pays (needs approval)."""
        s = tool_context.session
        ledger.add(f"pay {amount} for {s.user_id}/{s.id}")
        if during_pay is not None:
            during_pay()
        return f"paid {amount}"

    def note(text: str) -> str:
        """Writes a note."""
        ledger.add(f"note {text}")
        return f"noted {text}"

    return CodeActAgent(
        name="coder",
        model=ScriptedModel(replies),
        runtime=MontyRuntime(snapshot_key=key),
        tools=[FunctionTool(note), FunctionTool(pay, requires_confirmation=True)],
    )


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


async def pause(service: SqliteSessionService, ledger: Ledger, who: tuple[str, str]) -> str:
    """Starts a run in ``who``'s session that pauses at ``pay``; returns its call key."""
    user, sid = who
    await service.create_session(app_name=APP, user_id=user, session_id=sid)
    runner = Runner(app_name=APP, agent=agent_for(ledger, [fence(PAY)]), session_service=service)
    await collect(runner.run_async(user_id=user, session_id=sid, new_message="pay the shop"))
    (call,) = await runner.pending(user_id=user, session_id=sid)
    return call.call_key


def sql(db: Path, statement: str, *args: Any) -> list[Any]:
    con = sqlite3.connect(db, timeout=30)
    try:
        rows = con.execute(statement, args).fetchall()
        con.commit()
        return rows
    finally:
        con.close()


async def events_of(service: SqliteSessionService, who: tuple[str, str]) -> list[Any]:
    session = await service.get_session(app_name=APP, user_id=who[0], session_id=who[1])
    assert session is not None
    return [e.model_dump() for e in session.events]


async def refused_everywhere(runner: Runner, who: tuple[str, str], call_key: str) -> str:
    """Checks the session's turn is stale and refused by every verb; returns the reason."""
    user, sid = who
    info = await runner.turn_info(user_id=user, session_id=sid)
    assert info is not None and info.status == "stale" and info.seal_failed, info
    assert await runner.pending(user_id=user, session_id=sid) == []
    assert (user, sid) not in await runner.list_pending()
    for verb in (runner.approve, runner.deny):
        with pytest.raises(StaleCheckpointError, match="seal"):
            await collect(verb(user_id=user, session_id=sid, call_key=call_key))
    with pytest.raises(StaleCheckpointError, match="seal"):
        await collect(runner.approve(user_id=user, session_id=sid))
    with pytest.raises(StaleCheckpointError, match="seal"):
        await collect(runner.recover(user_id=user, session_id=sid))
    return info.reason


# --------------------------------------------------------------------- the turn record


@pytest.mark.parametrize("bob_paused", [False, True], ids=["into-an-idle-session", "over-a-paused-turn"])
async def test_turn_copied_to_another_session_is_refused_there(tmp_path: Path, bob_paused: bool) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    with SqliteSessionService(db) as service:
        alice_key = await pause(service, ledger, ALICE)
        if bob_paused:
            await pause(service, ledger, BOB)
        else:
            await service.create_session(app_name=APP, user_id=BOB[0], session_id=BOB[1])
        bob_before = await events_of(service, BOB)
    # a writer of the store copies Alice's paused turn into Bob's session
    sql(db, "DELETE FROM turns WHERE user_id = ?", BOB[0])
    sql(
        db,
        "INSERT INTO turns SELECT app_name, ?, ?, version, data, snapshot FROM turns WHERE user_id = ?",
        *BOB,
        ALICE[0],
    )
    row_before = sql(db, "SELECT version, data, snapshot FROM turns WHERE user_id = ?", BOB[0])
    with SqliteSessionService(db) as service:
        runner = Runner(app_name=APP, agent=agent_for(ledger, []), session_service=service)
        reason = await refused_everywhere(runner, BOB, alice_key)
        assert "another session" in reason
        assert await events_of(service, BOB) == bob_before  # nothing stored in Bob's transcript
        assert sql(db, "SELECT version, data, snapshot FROM turns WHERE user_id = ?", BOB[0]) == row_before
        assert ledger.lines() == []
        # Alice's own turn is untouched and approves as before
        assert [p.call_key for p in await runner.pending(user_id=ALICE[0], session_id=ALICE[1])] == [alice_key]
        events = await collect(runner.approve(user_id=ALICE[0], session_id=ALICE[1], call_key=alice_key))
        assert events[-1].text == "paid 900"
    assert ledger.lines() == ["pay 900 for alice/sa"]


async def test_turn_in_its_own_session_is_listed_and_approved(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    with SqliteSessionService(db) as service:
        alice_key = await pause(service, ledger, ALICE)
        bob_key = await pause(service, ledger, BOB)
        runner = Runner(app_name=APP, agent=agent_for(ledger, []), session_service=service)
        listed = await runner.list_pending()
        assert [p.call_key for p in listed[ALICE]] == [alice_key] and [p.call_key for p in listed[BOB]] == [bob_key]
        info = await runner.turn_info(user_id=BOB[0], session_id=BOB[1])
        assert info is not None and info.status == "suspended" and not info.seal_failed
        events = await collect(runner.approve(user_id=BOB[0], session_id=BOB[1], call_key=bob_key))
        assert events[-1].text == "paid 900"
    assert ledger.lines() == ["pay 900 for bob/sb"]


async def test_record_resealed_under_the_new_scheme_carries_its_version(tmp_path: Path) -> None:
    import json

    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    with SqliteSessionService(db) as service:
        await pause(service, ledger, ALICE)
    ((data,),) = sql(db, "SELECT data FROM turns")
    record = json.loads(data)
    assert record["seal"] == 2 and isinstance(record["mac"], str)


# --------------------------------------------------------------------- journal records


async def test_journal_record_copied_from_another_session_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alice's and Bob's turns share a turn id (forced here; a session copied with its turn
    gets the same). While Alice's approved ``pay`` runs, its journal intent (the durable
    approval) is copied into Bob's journal: under 0.2.0's seals Bob's turn then looked
    interrupted mid-call and ``recover`` ran ``pay`` for Bob, unapproved."""
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    with SqliteSessionService(db) as service:
        with monkeypatch.context() as m:
            m.setattr(codeact.runner, "new_id", lambda: "0" * 32)  # one invocation id for both runs
            alice_key = await pause(service, ledger, ALICE)
            bob_key = await pause(service, ledger, BOB)
        assert alice_key == bob_key
        bob_before = await events_of(service, BOB)

        def copy_alice_journal_to_bob() -> None:
            sql(
                db,
                "INSERT OR REPLACE INTO journal SELECT app_name, ?, ?, turn, kind, seq, data FROM journal "
                "WHERE user_id = ?",
                *BOB,
                ALICE[0],
            )

        alice = Runner(
            app_name=APP, agent=agent_for(ledger, [], during_pay=copy_alice_journal_to_bob), session_service=service
        )
        events = await collect(alice.approve(user_id=ALICE[0], session_id=ALICE[1], call_key=alice_key))
        assert events[-1].text == "paid 900"
    # the durable approval: its intent and the decision record journaled with it (issue 49)
    assert sorted(sql(db, "SELECT kind FROM journal WHERE user_id = ?", BOB[0])) == [("decision",), ("intent",)]
    with SqliteSessionService(db) as service:
        runner = Runner(app_name=APP, agent=agent_for(ledger, []), session_service=service)
        reason = await refused_everywhere(runner, BOB, bob_key)
        assert "journal record intent 0" in reason and "another session" in reason
        assert await events_of(service, BOB) == bob_before
        # run_async without a decision: a stale event, nothing claimed, nothing runs
        events = await collect(runner.run_async(user_id=BOB[0], session_id=BOB[1]))
        assert events[-1].error_code == "codeact.stale_checkpoint"
    assert ledger.lines() == ["pay 900 for alice/sa"]


# --------------------------------------------------------------------- a turn sealed by 0.2.0


def fixture_db(tmp_path: Path) -> Path:
    db = tmp_path / "paused-0.2.0.sqlite"
    shutil.copyfile(FIXTURE, db)
    return db


async def test_turn_sealed_by_0_2_0_is_refused_naming_the_upgrade_and_discard(tmp_path: Path) -> None:
    db, ledger = fixture_db(tmp_path), Ledger(tmp_path / "ledger")
    with SqliteSessionService(db) as service:
        runner = Runner(app_name=APP, agent=agent_for(ledger, [], key=FIXTURE_KEY), session_service=service)
        info = await runner.turn_info(user_id="alice", session_id="s1")
        assert info is not None and info.status == "stale" and info.seal_failed
        assert "0.2.0" in info.reason and "codeact sessions discard s1 --db ... --app app --user alice" in info.reason
        assert await runner.pending(user_id="alice", session_id="s1") == []
        assert await runner.list_pending() == {}
        before = await events_of(service, ("alice", "s1"))
        with pytest.raises(StaleCheckpointError, match=r"sealed by codeact 0\.2\.0.*codeact sessions discard s1"):
            await collect(runner.approve(user_id="alice", session_id="s1"))
        events = await collect(runner.run_async(user_id="alice", session_id="s1"))
        assert events[-1].error_code == "codeact.stale_checkpoint" and "codeact sessions discard" in (
            events[-1].error_message or ""
        )
        assert len(await events_of(service, ("alice", "s1"))) == len(before) + 1  # only the stale event
    assert ledger.lines() == []


async def test_journal_sealed_by_0_2_0_is_refused_naming_the_upgrade(tmp_path: Path) -> None:
    db = fixture_db(tmp_path)
    with SqliteSessionService(db) as service:
        slot = await service.load_turn(app_name=APP, user_id="alice", session_id="s1")
        assert slot is not None and "seal" not in slot.data and slot.data["mac"]
        turn = slot.data["turn"]
        records = await service.read_journal(app_name=APP, user_id="alice", session_id="s1", turn=turn)
    assert {"intent", "outcome"} <= {r.kind for r in records}  # note("before") ran
    with pytest.raises(SnapshotError, match=r"journal of turn .* sealed by codeact 0\.2\.0.*sessions discard s1"):
        open_journal(MontyRuntime(snapshot_key=FIXTURE_KEY), (APP, "alice", "s1"), turn, records)
    with pytest.raises(SnapshotError, match="fails its seal"):  # another key: not the upgrade's message
        open_journal(MontyRuntime(snapshot_key=KEY), (APP, "alice", "s1"), turn, records)


def test_cli_discards_the_0_2_0_turn_and_the_session_runs_again(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from codeact.cli import app

    db, ledger = fixture_db(tmp_path), Ledger(tmp_path / "ledger")
    cli = CliRunner()
    args = ["sessions", "discard", "s1", "--db", str(db), "--app", APP, "--user", "alice"]
    done = cli.invoke(app, args)
    assert done.exit_code == 0, done.output
    assert "discarded" in done.stdout
    again = cli.invoke(app, args)
    assert again.exit_code == 0 and "no turn in flight" in again.stdout
    missing = cli.invoke(app, ["sessions", "discard", "nope", "--db", str(db), "--app", APP, "--user", "alice"])
    assert missing.exit_code == 1

    async def rerun() -> list[Any]:
        with SqliteSessionService(db) as service:
            runner = Runner(
                app_name=APP, agent=agent_for(ledger, [fence(PAY)], key=FIXTURE_KEY), session_service=service
            )
            assert await runner.turn_info(user_id="alice", session_id="s1") is None
            await collect(runner.run_async(user_id="alice", session_id="s1", new_message="again"))
            (call,) = await runner.pending(user_id="alice", session_id="s1")
            return await collect(runner.approve(user_id="alice", session_id="s1", call_key=call.call_key))

    import anyio

    events = anyio.run(rerun)
    assert events[-1].text == "paid 900"
    assert ledger.lines() == ["pay 900 for alice/s1"]


def test_a_pending_call_without_a_position_signs_as_before() -> None:
    # Issue 46: the paused call's position joined the pending entries; a record sealed before
    # it (no position) must sign the same data, and a stored position is covered by the seal.
    from codeact.turns._record import TURN_FORMAT, TurnRecord

    entry = {"call_key": "t:0", "pos": 0, "call_id": 0, "kind": "confirmation", "hint": None}
    base = {
        "format": TURN_FORMAT,
        "status": "suspended",
        "agent_name": "a",
        "turn": "t",
        "invocation_id": "i",
        "iteration": 0,
        "script": "x",
    }
    old = TurnRecord.model_validate({**base, "pending": [entry]})
    assert old.signed_part(("app", "u", "s"))["pending"] == [entry]
    new = TurnRecord.model_validate({**base, "pending": [{**entry, "position": [2, 5, 2, 25]}]})
    assert new.signed_part(("app", "u", "s"))["pending"] == [{**entry, "position": [2, 5, 2, 25]}]
    with pytest.raises(ValueError):
        TurnRecord.model_validate({**base, "pending": [{**entry, "position": [2]}]})
