"""Escalation on the two paths that resume a script: after an approval, and in crash recovery.

A tool escalates by setting ``tool_context.actions.escalate`` (docs/first-agent.md: the run
ends and the parent decides). The run then ends with one event carrying ``escalate``, the
paused script is never resumed (no later tool runs, its final result is never reached), the
turn slot is cleared, and nothing is left to approve or recover. These tests check that this
holds when the escalating call is reached by ``Runner.approve`` from another process's
service, and when it is re-run by the recovery of a turn whose process was killed (SIGKILL)
around that call (docs/durability.md, "The at-least-once window").

Real parts throughout: ``MontyRuntime``, the ``service`` stores of conftest.py (in memory and a
SQLite file), child processes killed at journal boundaries.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from codeact import (
    CodeActAgent,
    MontyRuntime,
    NoPendingCallError,
    Runner,
    ScriptedModel,
    ToolContext,
    tool,
)
from conftest import ServiceFactory

APP, USER, SESSION = "desk", "u", "s"

SCRIPT = """```python
receipt = call_tool("refund", {"order": 8, "amount": 450})
call_tool("check", {"order": 8})
call_tool("notify", {"text": "refunded " + str(receipt["refunded"])})
{"type": "final_result", "value": "UNREACHED"}
```"""


def build_agent(ledger: list[str], escalator: str) -> CodeActAgent:
    """``refund`` needs a human's approval; ``escalator`` (``refund`` or ``check``) escalates
    after doing its work; ``notify`` comes after both and must never run."""

    def work(name: str, tool_context: ToolContext) -> None:
        ledger.append(name)
        if name == escalator:
            tool_context.state["escalated_by"] = name
            tool_context.actions.escalate = True

    @tool(requires_confirmation=True)
    def refund(order: int, amount: int, tool_context: ToolContext) -> dict[str, Any]:
        """Refunds an order (needs approval)."""
        work("refund", tool_context)
        return {"order": order, "refunded": amount}

    def check(order: int, tool_context: ToolContext) -> str:
        """Checks an order after its refund."""
        work("check", tool_context)
        return "ok"

    def notify(text: str, tool_context: ToolContext) -> str:
        """Tells the customer."""
        work("notify", tool_context)
        return "sent"

    return CodeActAgent(
        name="desk", model=ScriptedModel(lambda request: SCRIPT), runtime=MontyRuntime(), tools=[refund, check, notify]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("escalator", ["refund", "check"], ids=["the-approved-call", "a-later-call"])
async def test_escalation_after_an_approval_ends_the_run_and_the_script_never_resumes(
    make_service: ServiceFactory, escalator: str
) -> None:
    ledger: list[str] = []
    first = Runner(app_name=APP, agent=build_agent(ledger, escalator), session_service=make_service())
    await first.session_service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    paused = [e async for e in first.run_async(user_id=USER, session_id=SESSION, new_message="refund order 8")]
    assert paused[-1].actions.requested_tool_confirmations, "the refund should wait for approval"
    [call] = await first.pending(user_id=USER, session_id=SESSION)
    assert (call.tool, ledger) == ("refund", [])

    # Another process (a new service on the same store, a new agent) approves.
    service = make_service()
    second = Runner(app_name=APP, agent=build_agent(ledger, escalator), session_service=service)
    events = [e async for e in second.approve(user_id=USER, session_id=SESSION, call_key=call.call_key)]

    last = events[-1]
    assert last.actions.escalate is True and last.is_final_response()
    assert [e for e in events if e.actions.escalate] == [last]
    assert ledger == (["refund"] if escalator == "refund" else ["refund", "check"]), ledger
    assert all("UNREACHED" not in (e.text or "") for e in events)

    stored = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert stored is not None
    assert stored.events[-1].actions.escalate is True
    assert stored.state["escalated_by"] == escalator
    assert await service.load_turn(app_name=APP, user_id=USER, session_id=SESSION) is None
    assert await second.turn_info(user_id=USER, session_id=SESSION) is None
    assert await second.pending(user_id=USER, session_id=SESSION) == []
    with pytest.raises(NoPendingCallError):
        await second.approve(user_id=USER, session_id=SESSION, call_key=call.call_key).__anext__()
    with pytest.raises(NoPendingCallError):
        await second.recover(user_id=USER, session_id=SESSION).__anext__()
    assert "notify" not in ledger


# ------------------------------------------------------------------ crash recovery

CHILD = textwrap.dedent(
    '''
    import asyncio, json, os, signal, sys
    from pathlib import Path
    from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel, SqliteSessionService, tool

    db, ledger, phase, kill, approval = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    def note(name):
        with ledger.open("a") as f:
            f.write(name + "\\n")
            f.flush()
            os.fsync(f.fileno())

    def charge(item: str) -> str:
        """Charges an item."""
        note("charge")
        return "charged " + item

    def alert(reason: str, tool_context) -> str:
        """Hands the case to a person."""
        note("alert")
        tool_context.state["escalated"] = reason
        tool_context.actions.escalate = True
        if kill == "after_effect":
            die()
        return "escalated"

    def notify(text: str) -> str:
        """Tells the customer."""
        note("notify")
        return "sent"

    TOOLS = [charge, tool(requires_confirmation=True)(alert) if approval == "yes" else alert, notify]
    SCRIPT = ('r = call_tool("charge", {"item": "a"})\\n'
              'call_tool("alert", {"reason": "odd charge"})\\n'
              'call_tool("notify", {"text": r})\\n'
              '{"type": "final_result", "value": "UNREACHED"}')

    class KillingSqlite(SqliteSessionService):
        async def append_journal(self, session, turn, records, **kwargs):
            hit = any(r.kind == "intent" and json.loads(r.data)[0] == "alert" for r in records)
            if hit and kill == "before_intent":
                die()
            await super().append_journal(session, turn, records, **kwargs)
            if hit and kill == "after_intent":
                die()

    async def main():
        with KillingSqlite(db) as service:
            agent = CodeActAgent(name="desk", model=ScriptedModel(lambda r: "```python\\n" + SCRIPT + "\\n```"),
                                 runtime=MontyRuntime(), tools=TOOLS)
            runner = Runner(app_name="app", agent=agent, session_service=service)
            if phase == "go":
                await service.create_session(app_name="app", user_id="u", session_id="s")
                events = runner.run_async(user_id="u", session_id="s", new_message="go")
            elif phase == "approve":
                [call] = await runner.pending(user_id="u", session_id="s")
                events = runner.approve(user_id="u", session_id="s", call_key=call.call_key)
            else:
                events = runner.recover(user_id="u", session_id="s")
            ran = [e async for e in events]
            s = await service.get_session(app_name="app", user_id="u", session_id="s")
            print(json.dumps({
                "run": [{"escalate": e.actions.escalate, "text": e.text, "kind": e.kind} for e in ran],
                "stored_escalate": [e.actions.escalate for e in s.events],
                "texts": [e.text for e in s.events],
                "state": s.state,
                "slot": await service.load_turn(app_name="app", user_id="u", session_id="s") is not None,
                "turn_info": (await runner.turn_info(user_id="u", session_id="s")) is not None,
            }))

    asyncio.run(main())
    '''
)


def run_child(tmp: Path, phase: str, kill: str = "none", approval: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp / "s.db"), str(tmp / "ledger"), phase, kill, "yes" if approval else "no"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def report(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def ledger(tmp: Path) -> list[str]:
    path = tmp / "ledger"
    return path.read_text().split() if path.exists() else []


def assert_escalated_and_never_resumed(state: dict[str, Any], tmp: Path) -> None:
    assert state["run"], "the recovery ran nothing"
    last = state["run"][-1]
    assert last["escalate"] is True, state["run"]
    assert [r for r in state["run"] if r["escalate"]] == [last]
    assert state["stored_escalate"][-1] is True
    assert state["stored_escalate"].count(True) == 1, "the escalation was stored more than once"
    assert state["state"]["escalated"] == "odd charge"
    assert "UNREACHED" not in state["texts"], "the script's final result was reached"
    assert not state["slot"] and not state["turn_info"], "the turn is still in flight after the escalation"
    assert "notify" not in ledger(tmp), f"the script resumed after the escalation: {ledger(tmp)}"


@pytest.mark.parametrize("kill", ["before_intent", "after_intent", "after_effect"])
def test_escalation_in_crash_recovery_ends_the_run_and_the_script_never_resumes(tmp_path: Path, kill: str) -> None:
    first = run_child(tmp_path, "go", kill)
    assert first.returncode == -signal.SIGKILL, f"the child was not killed at {kill}\n{first.stderr[-3000:]}"
    assert ledger(tmp_path) == (["charge", "alert"] if kill == "after_effect" else ["charge"])

    state = report(run_child(tmp_path, "recover"))
    assert_escalated_and_never_resumed(state, tmp_path)
    if kill == "before_intent":
        assert not any(r["kind"] == "in_doubt" for r in state["run"])
    else:  # the alert may have run: in doubt, re-run (on_in_doubt="rerun"), and it escalates again
        assert any(r["kind"] == "in_doubt" for r in state["run"]), state["run"]
    alerts = 2 if kill == "after_effect" else 1  # the at-least-once window
    assert ledger(tmp_path) == ["charge"] + ["alert"] * alerts  # charge is answered from the journal

    # Nothing is left to recover: a second recovery is refused and runs nothing.
    again = run_child(tmp_path, "recover")
    assert again.returncode != 0 and "NoPendingCallError" in again.stderr
    assert ledger(tmp_path) == ["charge"] + ["alert"] * alerts


@pytest.mark.parametrize("kill", ["after_intent", "after_effect"])
def test_escalation_of_an_approved_call_in_crash_recovery(tmp_path: Path, kill: str) -> None:
    """Both paths at once: the approved call escalates in a process that is killed, and the
    recovery re-runs it (the approval is durable with its intent) and ends with the escalation."""
    paused = report(run_child(tmp_path, "go", approval=True))
    assert paused["slot"] and ledger(tmp_path) == ["charge"]

    killed = run_child(tmp_path, "approve", kill, approval=True)
    assert killed.returncode == -signal.SIGKILL, f"the child was not killed at {kill}\n{killed.stderr[-3000:]}"

    state = report(run_child(tmp_path, "recover", approval=True))
    assert_escalated_and_never_resumed(state, tmp_path)
    assert ledger(tmp_path) == ["charge"] + ["alert"] * (2 if kill == "after_effect" else 1)
