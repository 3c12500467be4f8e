"""Approvals you can trust (issue 17, SPEC §5 v3): what runs is what was shown, once, or
nothing. Each fault kind with several inputs, through ``Runner`` on real SQLite files with the
real interpreter; kills happen in child processes at barriers (the tool signals that its side
effect is done, then the test kills), never after sleeps.

1. a failed resume keeps the decision pending;        test_failed_resume_*
2. the call shown and the call run are one call;      test_edited_*, test_digest_*
3. no value wedges a session;                         test_value_*
4. dead runners, leases and takeover;                 test_dead_runner_*, test_lease_*
5. run keys and fenced writes;                        test_run_key_*, test_fenced_*
6. calls in doubt;                                    test_in_doubt_*
7. an edited row cannot approve by itself;            test_edited_row_*
8. the confirmation handler;                          test_handler_*
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_helpers import APP, SESSION, USER, fence, sigkill_at_barrier
from codeact import (
    AlreadyResumingError,
    CallsPendingError,
    CodeActAgent,
    FunctionTool,
    LongRunningFunctionTool,
    MontyRuntime,
    NoPendingCallError,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
    ValueConversionError,
)
from codeact.exceptions import ConfirmationHandlerError, DecisionMismatchError, TurnConflictError
from codeact.sessions import JournalRecord

pytestmark = pytest.mark.anyio

KEY = b"k" * 32


def final_script(expr: str) -> str:
    return f'{{"type": "final_result", "value": {expr}}}'


class Ledger:
    """Side effects, one line per tool run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, line: str) -> None:
        with self.path.open("a") as f:
            f.write(line + "\n")

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []


def tools_for(ledger: Ledger, *, extra: bool = False, in_doubt: str = "rerun") -> list[Any]:
    def pay(amount: int, to: str = "shop") -> str:
        """Pays (needs approval)."""
        ledger.add(f"pay {amount} {to}")
        return f"paid {amount} to {to}"

    def delete_account(user: str) -> str:
        """Deletes an account (needs approval)."""
        ledger.add(f"delete {user}")
        return f"deleted {user}"

    def note(text: str) -> str:
        """Writes a note."""
        ledger.add(f"note {text}")
        return f"noted {text}"

    def render(scene: str) -> dict:
        """Starts a render; its result arrives later."""
        ledger.add(f"render {scene}")
        return {"status": "pending"}

    tools: list[Any] = [
        FunctionTool(pay, requires_confirmation=True, on_in_doubt=in_doubt),  # type: ignore[arg-type]
        FunctionTool(delete_account, requires_confirmation=True),
        FunctionTool(note, on_in_doubt=in_doubt),  # type: ignore[arg-type]
        LongRunningFunctionTool(render),
    ]
    if extra:

        def extra_tool() -> str:
            """Added in a later deploy."""
            return "x"

        tools.append(FunctionTool(extra_tool))
    return tools


def agent_for(ledger: Ledger, replies: list[str], *, key: bytes | None = None, **kwargs: Any) -> CodeActAgent:
    tool_kw = {k: kwargs.pop(k) for k in ("extra", "in_doubt") if k in kwargs}
    return CodeActAgent(
        name="coder",
        model=ScriptedModel(replies),
        runtime=MontyRuntime(snapshot_key=key),
        tools=tools_for(ledger, **tool_kw),
        **kwargs,
    )


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


PAY = 'r = call_tool("pay", {"amount": 900})\n' + final_script("r")


async def start(db: Path, ledger: Ledger, script: str = PAY, *, key: bytes | None = None, **kwargs: Any) -> list[Any]:
    with SqliteSessionService(db) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(
            app_name=APP, agent=agent_for(ledger, [fence(script)], key=key, **kwargs), session_service=service
        )
        return await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))


def runner_on(service: SqliteSessionService, ledger: Ledger, replies: list[str] | None = None, **kwargs: Any) -> Runner:
    """A runner as a new process would build it."""
    clock = kwargs.pop("clock", time.time)
    return Runner(app_name=APP, agent=agent_for(ledger, replies or [], **kwargs), session_service=service, clock=clock)


def stored(db: Path) -> dict[str, Any]:
    con = sqlite3.connect(db)
    try:
        (data,) = con.execute("SELECT data FROM turns").fetchone()
    finally:
        con.close()
    return json.loads(data)


def store(db: Path, data: dict[str, Any]) -> None:
    con = sqlite3.connect(db)
    con.execute("UPDATE turns SET data = ?", (json.dumps(data),))
    con.commit()
    con.close()


# --------------------------------------------------------------------- 1. a failed resume keeps the decision


async def test_failed_resume_with_an_older_roster_leaves_the_call_pending(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger)
    with SqliteSessionService(db) as service:
        stale = runner_on(service, ledger, extra=True)  # another deploy: one more tool
        events = await collect(stale.approve(user_id=USER, session_id=SESSION))
        assert events[-1].error_code == "codeact.stale_checkpoint"
        assert "roster" in events[-1].error_message
        right = runner_on(service, ledger)
        (info,) = await right.pending(user_id=USER, session_id=SESSION)  # still listed
        assert (info.tool, info.args) == ("pay", {"amount": 900})
        with pytest.raises(CallsPendingError):  # a new message follows on_pending_message
            await collect(right.run_async(user_id=USER, session_id=SESSION, new_message="never mind"))
        events = await collect(right.approve(user_id=USER, session_id=SESSION, call_key=info.call_key))
        assert events[-1].text == "paid 900 to shop"
    assert ledger.lines() == ["pay 900 shop"]


async def test_failed_resume_with_a_store_error_leaves_the_call_pending(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger)

    class Failing(SqliteSessionService):
        async def append_journal(self, *args: Any, **kwargs: Any) -> None:
            from codeact import SessionStoreError

            raise SessionStoreError("disk full")

    with Failing(db) as service:
        from codeact import SessionStoreError

        with pytest.raises(SessionStoreError):
            await collect(runner_on(service, ledger).approve(user_id=USER, session_id=SESSION))
    assert ledger.lines() == []
    with SqliteSessionService(db) as service:
        runner = runner_on(service, ledger, [fence(final_script('"stopped"'))])
        info = await runner.turn_info(user_id=USER, session_id=SESSION)
        assert info is not None and info.status == "suspended" and info.claim is None  # released
        (pending,) = info.pending
        events = await collect(runner.deny(user_id=USER, session_id=SESSION, call_key=pending.call_key, reason="no"))
        assert events[-1].text == "stopped"
    assert ledger.lines() == []


# --------------------------------------------------------------------- 2. shown == run


@pytest.mark.parametrize("key", [None, KEY], ids=["unsigned", "signed"])
@pytest.mark.parametrize(
    "edit",
    [
        {"pending": [{"tool": "delete_account", "args": {"user": "admin"}}]},
        {"at": [{"tool": "pay", "keyword": {"amount": 999999}}]},
    ],
    ids=["pending-args", "at-args"],
)
async def test_edited_record_cannot_change_what_runs(tmp_path: Path, key: bytes | None, edit: dict) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger, key=key)
    data = stored(db)
    for field, changes in edit.items():
        data[field] = [{**data[field][0], **changes[0]}]
    store(db, data)
    with SqliteSessionService(db) as service:
        runner = runner_on(service, ledger, key=key)
        (info,) = await runner.pending(user_id=USER, session_id=SESSION)
        assert (info.tool, info.args) == ("pay", {"amount": 900})  # from the continuation
        events = await collect(runner.approve(user_id=USER, session_id=SESSION, digest=info.digest))
        assert events[-1].text == "paid 900 to shop"
    assert ledger.lines() == ["pay 900 shop"]


async def test_edited_positions_under_a_key_are_refused(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger, key=KEY)
    data = stored(db)
    data["pending"][0]["kind"] = "completion"
    store(db, data)
    with SqliteSessionService(db) as service:
        runner = runner_on(service, ledger, key=KEY)
        info = await runner.turn_info(user_id=USER, session_id=SESSION)
        assert info is not None and info.status == "stale" and "seal" in info.reason
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION))
        assert events[-1].error_code == "codeact.stale_checkpoint"
    assert ledger.lines() == []


async def test_digest_of_another_call_is_refused(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger)
    with SqliteSessionService(db) as service:
        runner = runner_on(service, ledger)
        (info,) = await runner.pending(user_id=USER, session_id=SESSION)
        with pytest.raises(DecisionMismatchError):
            await collect(runner.approve(user_id=USER, session_id=SESSION, digest="0" * 16))
        rc = RunConfig(tool_confirmation_decisions={info.call_key: True}, decision_digests={info.call_key: "f" * 16})
        with pytest.raises(DecisionMismatchError):
            await collect(runner.run_async(user_id=USER, session_id=SESSION, run_config=rc))
        assert [p.call_key for p in await runner.pending(user_id=USER, session_id=SESSION)] == [info.call_key]
    assert ledger.lines() == []


# --------------------------------------------------------------------- 3. no value wedges a session


@pytest.mark.parametrize("kind", ["surrogate", "bad-str", "system-exit"])
async def test_value_that_cannot_be_encoded_is_recorded_once(tmp_path: Path, kind: str) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")

    class Unreadable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    def odd() -> str:
        """Returns or raises something odd."""
        ledger.add("odd")
        if kind == "surrogate":
            return os.fsdecode(b"caf\xe9.txt")
        if kind == "bad-str":
            raise Unreadable()
        raise SystemExit(3)

    script = 'try:\n    r = call_tool("odd", {})\nexcept Exception as e:\n    r = "error: " + str(e)\n' + final_script(
        "r"
    )
    agent = CodeActAgent(
        name="coder", model=ScriptedModel([fence(script)]), runtime=MontyRuntime(), tools=[FunctionTool(odd)]
    )
    with SqliteSessionService(db) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(app_name=APP, agent=agent, session_service=service)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        text = events[-1].text
        if kind == "surrogate":
            assert text == "caf\\udce9.txt"
        elif kind == "bad-str":
            assert "error:" in text and "cannot be read" in text
        else:
            assert "SystemExit" in text
        assert await runner.turn_info(user_id=USER, session_id=SESSION) is None  # nothing left to re-run
        with pytest.raises(NoPendingCallError):
            await collect(runner.recover(user_id=USER, session_id=SESSION))
    assert ledger.lines() == ["odd"]


async def test_value_lone_surrogate_in_a_message_is_refused_naming_the_field(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    with SqliteSessionService(tmp_path / "s.db") as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = runner_on(service, ledger)
        with pytest.raises(ValueConversionError, match="part 0 text"):
            await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="hi \udcff"))
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None and session.events == []


# --------------------------------------------------------------------- 4. dead runners, leases, takeover

CHILD = textwrap.dedent(
    """
    import os, sys, time
    import anyio
    from codeact import CodeActAgent, FunctionTool, LongRunningFunctionTool, MontyRuntime, Runner
    from codeact import ScriptedModel, SqliteSessionService

    db, ledger, barrier, mode = sys.argv[1:5]

    def pay(amount: int, to: str = "shop") -> str:
        \"\"\"Pays.\"\"\"
        with open(ledger, "a") as f:
            f.write(f"pay {amount} {to}\\n")
        open(barrier, "w").close()  # the side effect is done: the test may kill now
        time.sleep(600)
        return "never"

    def delete_account(user: str) -> str:
        \"\"\"Deletes.\"\"\"
        return user

    def note(text: str) -> str:
        \"\"\"Writes a note.\"\"\"
        with open(ledger, "a") as f:
            f.write(f"note {text}\\n")
        return f"noted {text}"

    def render(scene: str) -> dict:
        \"\"\"Starts a render.\"\"\"
        return {}

    async def main():
        with SqliteSessionService(db) as service:
            agent = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime(),
                                 tools=[FunctionTool(pay, requires_confirmation=True,
                                             on_in_doubt=os.environ.get("APPROVALS_IN_DOUBT", "rerun")),
                                        FunctionTool(delete_account, requires_confirmation=True), note,
                                        LongRunningFunctionTool(render)])
            runner = Runner(app_name="app", agent=agent, session_service=service)
            if mode == "approve":
                events = runner.approve(user_id="u", session_id="s", run_key="approve-1")
            else:
                events = runner.run_async(user_id="u", session_id="s", new_message="go", run_key="run-1")
            async for _ in events:
                pass

    anyio.run(main)
    """
)


def kill_at_barrier(tmp_path: Path, db: Path, ledger: Ledger, mode: str) -> None:
    child, barrier = tmp_path / "child.py", tmp_path / "barrier"
    child.write_text(CHILD)
    sigkill_at_barrier([sys.executable, str(child), str(db), str(ledger.path), str(barrier), mode], barrier)


@pytest.mark.parametrize("in_doubt", ["rerun", "fail", "ask"])
async def test_dead_runner_is_reported_and_recovered(tmp_path: Path, in_doubt: str) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger)
    kill_at_barrier(tmp_path, db, ledger, "approve")
    assert ledger.lines() == ["pay 900 shop"]
    with SqliteSessionService(db) as service:
        runner = runner_on(service, ledger, [fence(final_script('"gave up"'))], in_doubt=in_doubt)
        info = await runner.turn_info(user_id=USER, session_id=SESSION)
        assert info is not None and info.status == "interrupted" and len(info.in_flight) == 1
        assert info.claim is not None and str(info.claim.pid) in info.claim.owner
        assert await runner.pending(user_id=USER, session_id=SESSION) == []
        with pytest.raises(AlreadyResumingError, match="recover"):
            await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=info.in_flight[0]))
        events = await collect(runner.recover(user_id=USER, session_id=SESSION))
        assert any(e.kind == "in_doubt" for e in events)
        if in_doubt == "rerun":
            assert events[-1].text == "paid 900 to shop"
            assert ledger.lines() == ["pay 900 shop", "pay 900 shop"]
        elif in_doubt == "fail":
            assert ledger.lines() == ["pay 900 shop"]
            assert events[-1].text == "gave up"
            assert any("may or may not have run" in (e.text or "") for e in events)
            assert await runner.turn_info(user_id=USER, session_id=SESSION) is None
        else:
            (p,) = await runner.pending(user_id=USER, session_id=SESSION)
            assert p.kind == "in_doubt" and p.tool == "pay"
            events = await collect(
                runner.resolve_in_doubt(
                    user_id=USER, session_id=SESSION, call_key=p.call_key, action="skip", value="paid (checked)"
                )
            )
            assert events[-1].text == "paid (checked)"
            assert ledger.lines() == ["pay 900 shop"]


async def test_lease_of_another_host_expires_on_the_clock(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger)
    data = stored(db)
    now = time.time()
    data["claim"] = {
        "owner": "elsewhere:1:abc",
        "host": "elsewhere",
        "pid": 1,
        "taken_at": now,
        "renewed_at": now,
        "lease": 30.0,
    }
    store(db, data)
    clock = [now]
    with SqliteSessionService(db) as service:
        runner = runner_on(service, ledger, clock=lambda: clock[0])
        with pytest.raises(AlreadyResumingError, match="elsewhere:1:abc"):
            await collect(runner.approve(user_id=USER, session_id=SESSION))
        assert (await runner.turn_info(user_id=USER, session_id=SESSION)).status == "running"
        clock[0] = now + 31  # the lease ran out
        assert (await runner.turn_info(user_id=USER, session_id=SESSION)).status == "interrupted"
        events = await collect(runner.approve(user_id=USER, session_id=SESSION))
        assert events[-1].text == "paid 900 to shop"
    assert ledger.lines() == ["pay 900 shop"]


async def test_fenced_write_of_a_runner_that_lost_its_claim(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger)
    with SqliteSessionService(db) as service:
        slot = await service.load_turn(app_name=APP, user_id=USER, session_id=SESSION)
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        old = slot.version
        await service.save_turn(
            app_name=APP, user_id=USER, session_id=SESSION, data=slot.data, snapshot=slot.snapshot, expected_version=old
        )
        with pytest.raises(TurnConflictError):
            await service.append_journal(session, "t", [JournalRecord("outcome", 0, "{}")], expected_version=old)
        await service.append_journal(session, "t", [JournalRecord("outcome", 0, '{"v": 1}')], expected_version=old + 1)
        await service.append_journal(session, "t", [JournalRecord("outcome", 0, '{"v": 2}')])  # first writer wins
        (rec,) = await service.read_journal(app_name=APP, user_id=USER, session_id=SESSION, turn="t")
        assert rec.data == '{"v": 1}'


# --------------------------------------------------------------------- 5. run keys


async def test_run_key_redelivered_after_finish_replays_without_running(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    script = 'call_tool("note", {"text": "a"})\n' + final_script('"done"')
    with SqliteSessionService(tmp_path / "s.db") as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = runner_on(service, ledger, [fence(script)])
        first = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go", run_key="m-1"))
        again = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go", run_key="m-1"))
        assert [e.id for e in again] == [e.id for e in first]
        assert all(e.custom_metadata["codeact_replayed"] for e in again)
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert [e.author for e in session.events].count("user") == 1
    assert ledger.lines() == ["note a"]


async def test_run_key_redelivered_to_an_interrupted_turn_recovers_it_once(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    script = 'a = call_tool("note", {"text": "a"})\nb = call_tool("pay", {"amount": 5})\n' + final_script("b")
    with SqliteSessionService(db) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    # the first delivery dies inside the gated call after approval, in a child process
    with SqliteSessionService(db) as service:
        runner = runner_on(service, ledger, [fence(script)])
        await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go", run_key="m-1"))
    kill_at_barrier(tmp_path, db, ledger, "approve")
    with SqliteSessionService(db) as service:
        runner = runner_on(service, ledger)
        events = await collect(runner.approve(user_id=USER, session_id=SESSION, run_key="approve-1"))
        assert events[-1].text == "paid 5 to shop"  # recovered (rerun), not decided again
        again = await collect(runner.approve(user_id=USER, session_id=SESSION, run_key="approve-1"))
        assert again and all(e.custom_metadata.get("codeact_replayed") for e in again)
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert [e.author for e in session.events].count("user") == 1
    assert ledger.lines() == ["note a", "pay 5 shop", "pay 5 shop"]


# --------------------------------------------------------------------- 7. an edited row cannot approve


@pytest.mark.parametrize("key", [None, KEY], ids=["unsigned", "signed"])
async def test_edited_row_marked_approved_runs_nothing(tmp_path: Path, key: bytes | None) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger, key=key)
    data = stored(db)
    key_ = data["pending"][0]["call_key"]
    data["claim"] = {"decisions": {key_: True}}  # the 0.2-dev shape of a stored approval
    data["status"] = "running"
    store(db, data)
    with SqliteSessionService(db) as service:
        runner = runner_on(service, ledger, key=key)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION))
        assert not any("paid" in (e.text or "") for e in events)
    assert ledger.lines() == []


async def test_edited_row_forged_intent_under_a_key_is_refused(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger, key=KEY)
    data = stored(db)
    turn, pos = data["turn"], data["pending"][0]["pos"]
    con = sqlite3.connect(db)
    con.execute(
        "INSERT INTO journal VALUES (?, ?, ?, ?, 'intent', ?, ?)",
        (APP, USER, SESSION, turn, pos, json.dumps(["pay", "0" * 16, "approved"])),
    )
    con.commit()
    con.close()
    data["status"] = "running"
    store(db, data)
    with SqliteSessionService(db) as service:
        events = await collect(runner_on(service, ledger, key=KEY).run_async(user_id=USER, session_id=SESSION))
        assert events[-1].error_code in ("codeact.stale_checkpoint", "codeact.nondeterministic_replay")
    assert ledger.lines() == []


# --------------------------------------------------------------------- 8. the confirmation handler


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("verdict", "expect"),
    [("approve", "paid 900 to shop"), (("deny", "over budget"), "over budget"), ("ask", None)],
    ids=["approve", "deny", "ask"],
)
async def test_handler_decides_inside_the_run(tmp_path: Path, mode: str, verdict: Any, expect: str | None) -> None:
    ledger = Ledger(tmp_path / "ledger")
    seen: list[Any] = []

    def sync_handler(info: Any) -> Any:
        seen.append(info)
        return verdict

    async def async_handler(info: Any) -> Any:
        await anyio.sleep(0)
        seen.append(info)
        return verdict

    script = 'try:\n    r = call_tool("pay", {"amount": 900})\nexcept PermissionError as e:\n    r = str(e)\n'
    script += final_script("r")
    rc = RunConfig(tool_confirmation_handler=sync_handler if mode == "sync" else async_handler)
    with SqliteSessionService(tmp_path / "s.db") as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = runner_on(service, ledger, [fence(script)])
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go", run_config=rc))
        (info,) = seen
        assert (info.tool, info.args, info.kind) == ("pay", {"amount": 900}, "confirmation") and info.digest
        if expect is None:
            (p,) = await runner.pending(user_id=USER, session_id=SESSION)
            assert p.digest == info.digest
        else:
            assert expect in events[-1].text
    assert ledger.lines() == (["pay 900 shop"] if verdict == "approve" else [])


async def test_handler_that_raises_ends_the_run_and_leaves_the_call_pending(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")

    def handler(info: Any) -> Any:
        raise OSError("approval service down")

    with SqliteSessionService(tmp_path / "s.db") as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = runner_on(service, ledger, [fence(PAY)])
        rc = RunConfig(tool_confirmation_handler=handler)
        with pytest.raises(ConfirmationHandlerError) as caught:
            await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go", run_config=rc))
        assert isinstance(caught.value.__cause__, OSError)
        (p,) = await runner.pending(user_id=USER, session_id=SESSION)
        assert p.tool == "pay"
        events = await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=p.call_key))
        assert events[-1].text == "paid 900 to shop"
    assert ledger.lines() == ["pay 900 shop"]


async def test_unmatched_in_doubt_decision_is_refused(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger)
    with SqliteSessionService(db) as service:
        runner = runner_on(service, ledger)
        (p,) = await runner.pending(user_id=USER, session_id=SESSION)
        with pytest.raises(NoPendingCallError):
            await collect(
                runner.resolve_in_doubt(user_id=USER, session_id=SESSION, call_key=p.call_key, action="rerun")
            )
    assert ledger.lines() == []


AGENT_MODULE = textwrap.dedent(
    """
    import os
    from codeact import CodeActAgent, FunctionTool, LongRunningFunctionTool, MontyRuntime, ScriptedModel

    LEDGER = os.environ["APPROVALS_LEDGER"]

    def _add(line):
        with open(LEDGER, "a") as f:
            f.write(line + "\\n")

    def pay(amount: int, to: str = "shop") -> str:
        \"\"\"Pays.\"\"\"
        _add(f"pay {amount} {to}")
        return f"paid {amount} to {to}"

    def delete_account(user: str) -> str:
        \"\"\"Deletes.\"\"\"
        return user

    def note(text: str) -> str:
        \"\"\"Writes a note.\"\"\"
        return text

    def render(scene: str) -> dict:
        \"\"\"Starts a render.\"\"\"
        return {}

    AGENT = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime(),
                         tools=[FunctionTool(pay, requires_confirmation=True,
                                             on_in_doubt=os.environ.get("APPROVALS_IN_DOUBT", "rerun")),
                                FunctionTool(delete_account, requires_confirmation=True), note,
                                LongRunningFunctionTool(render)])
    """
)


def test_dead_runner_cli_reports_and_recovers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from codeact.cli import app

    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    anyio.run(start, db, ledger)
    kill_at_barrier(tmp_path, db, ledger, "approve")
    (tmp_path / "appr_agent.py").write_text(AGENT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("APPROVALS_LEDGER", str(ledger.path))
    cli = CliRunner()
    common = ["--db", str(db), "--app", APP, "--user", USER]
    shown = cli.invoke(app, ["sessions", "pending", SESSION, *common])
    assert shown.exit_code == 0, shown.output
    assert "interrupted" in shown.stdout and "codeact sessions recover" in shown.stdout
    denied = cli.invoke(app, ["sessions", "deny", SESSION, *common, "--agent", "appr_agent:AGENT"])
    assert denied.exit_code == 1 and "recover" in denied.output
    recovered = cli.invoke(app, ["sessions", "recover", SESSION, *common, "--agent", "appr_agent:AGENT"])
    assert recovered.exit_code == 0, recovered.output
    assert "paid 900 to shop" in recovered.stdout
    assert ledger.lines() == ["pay 900 shop", "pay 900 shop"]  # in doubt, rerun (the default)


def test_dead_runner_cli_resolves_a_call_in_doubt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`codeact sessions resolve --action skip` answers a call paused in doubt without running it."""
    from typer.testing import CliRunner

    from codeact.cli import app

    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    anyio.run(start, db, ledger)
    kill_at_barrier(tmp_path, db, ledger, "approve")
    # its own module name: sys.modules keeps the other test's appr_agent (with the default policy)
    (tmp_path / "appr_agent_doubt.py").write_text(AGENT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("APPROVALS_LEDGER", str(ledger.path))
    monkeypatch.setenv("APPROVALS_IN_DOUBT", "ask")
    cli = CliRunner()
    common = ["--db", str(db), "--app", APP, "--user", USER, "--agent", "appr_agent_doubt:AGENT"]
    recovered = cli.invoke(app, ["sessions", "recover", SESSION, *common])
    assert recovered.exit_code == 0, recovered.output
    shown = cli.invoke(app, ["sessions", "pending", SESSION, *common])
    assert shown.exit_code == 0 and "pay" in shown.stdout, shown.output

    async def call_key() -> str:
        with SqliteSessionService(db) as service:
            (p,) = await runner_on(service, ledger, []).pending(user_id=USER, session_id=SESSION)
            assert p.kind == "in_doubt"
            return p.call_key

    key = anyio.run(call_key)
    bad = cli.invoke(app, ["sessions", "resolve", SESSION, *common, "--call", key, "--action", "skip", "--value", "{"])
    assert bad.exit_code == 2 and "not JSON" in bad.output
    resolved = cli.invoke(
        app,
        ["sessions", "resolve", SESSION, *common, "--call", key, "--action", "skip", "--value", '"paid (checked)"'],
    )
    assert resolved.exit_code == 0, resolved.output
    assert "paid (checked)" in resolved.stdout
    assert ledger.lines() == ["pay 900 shop"]  # skipped: not run again


async def test_value_lone_surrogate_in_a_model_reply_is_stored_escaped(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    reply = "thinking \udcff\n" + fence(final_script('"ok"'))
    with SqliteSessionService(tmp_path / "s.db") as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        events = await collect(
            runner_on(service, ledger, [reply]).run_async(user_id=USER, session_id=SESSION, new_message="go")
        )
        assert events[-1].text == "ok"
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert any("\\udcff" in (e.text or "") for e in session.events)


async def test_value_cancellation_propagates_and_leaves_the_turn_recoverable(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    started = anyio.Event()

    async def wait_forever(x: int) -> int:
        """Never returns."""
        started.set()
        await anyio.sleep_forever()
        return x

    def make(tool: Any) -> Runner:
        agent = CodeActAgent(
            name="coder",
            model=ScriptedModel([fence('r = call_tool("wait", {"x": 1})\n' + final_script("r"))]),
            runtime=MontyRuntime(),
            tools=[FunctionTool(tool, name="wait")],
        )
        return Runner(app_name=APP, agent=agent, session_service=service)

    with SqliteSessionService(db) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = make(wait_forever)
        with anyio.move_on_after(30) as scope:
            async with anyio.create_task_group() as tg:

                async def go() -> None:
                    await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))

                tg.start_soon(go)
                await started.wait()
                tg.cancel_scope.cancel()  # cancellation is never swallowed
        assert not scope.cancelled_caught
        info = await runner.turn_info(user_id=USER, session_id=SESSION)
        assert info is not None and info.status == "interrupted" and info.in_flight == []

        def wait_done(x: int) -> int:
            """Returns at once."""
            return x + 41

        events = await collect(make(wait_done).recover(user_id=USER, session_id=SESSION))
        assert events[-1].text == "42"  # the call was in doubt and ran again


DECIDER = textwrap.dedent(
    """
    import json, sys
    import anyio
    from codeact import CodeActAgent, FunctionTool, LongRunningFunctionTool, MontyRuntime, Runner
    from codeact import ScriptedModel, SqliteSessionService

    db, ledger, roster, key = sys.argv[1:5]

    def pay(amount: int, to: str = "shop") -> str:
        \"\"\"Pays.\"\"\"
        with open(ledger, "a") as f:
            f.write(f"pay {amount} {to}\\n")
        return f"paid {amount} to {to}"

    def delete_account(user: str) -> str:
        \"\"\"Deletes.\"\"\"
        with open(ledger, "a") as f:
            f.write(f"delete {user}\\n")
        return user

    def note(text: str) -> str:
        \"\"\"Writes a note.\"\"\"
        return text

    def render(scene: str) -> dict:
        \"\"\"Starts a render.\"\"\"
        return {}

    def extra_tool() -> str:
        \"\"\"Added in a later deploy.\"\"\"
        return "x"

    async def main():
        tools = [FunctionTool(pay, requires_confirmation=True),
                 FunctionTool(delete_account, requires_confirmation=True), note, LongRunningFunctionTool(render)]
        if roster == "extra":
            tools.append(FunctionTool(extra_tool))
        runtime = MontyRuntime(snapshot_key=key.encode() if key != "-" else None)
        with SqliteSessionService(db) as service:
            agent = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=runtime, tools=tools)
            runner = Runner(app_name="app", agent=agent, session_service=service)
            pending = [(p.tool, p.args) for p in await runner.pending(user_id="u", session_id="s")]
            events = [e async for e in runner.approve(user_id="u", session_id="s")]
            print(json.dumps({"pending": pending, "text": events[-1].text, "error": events[-1].error_code}))

    anyio.run(main)
    """
)


def decide_in_child(tmp_path: Path, db: Path, ledger: Ledger, roster: str, key: bytes | None) -> dict[str, Any]:
    child = tmp_path / "decider.py"
    child.write_text(DECIDER)
    done = subprocess.run(
        [sys.executable, str(child), str(db), str(ledger.path), roster, key.decode() if key else "-"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


async def test_failed_resume_in_another_process_leaves_the_call_pending(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger)
    older = decide_in_child(tmp_path, db, ledger, "extra", None)  # a process of another deploy
    assert older["error"] == "codeact.stale_checkpoint" and ledger.lines() == []
    right = decide_in_child(tmp_path, db, ledger, "right", None)
    assert right["pending"] == [["pay", {"amount": 900}]] and right["text"] == "paid 900 to shop"
    assert ledger.lines() == ["pay 900 shop"]


@pytest.mark.parametrize("key", [None, KEY], ids=["unsigned", "signed"])
async def test_edited_record_approved_in_another_process_runs_the_shown_call(tmp_path: Path, key: bytes | None) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger, key=key)
    data = stored(db)
    data["pending"][0] |= {"tool": "delete_account", "args": {"user": "admin"}}
    data["at"][0] |= {"tool": "delete_account", "keyword": {"user": "admin"}}
    store(db, data)
    result = decide_in_child(tmp_path, db, ledger, "right", key)
    assert result["pending"] == [["pay", {"amount": 900}]]
    assert result["text"] == "paid 900 to shop"
    assert ledger.lines() == ["pay 900 shop"]
