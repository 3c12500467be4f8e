"""Approving a call with edited arguments (issue 49, item 1), on SQLite and PostgreSQL.

A reviewer approves the call the script made with other arguments: they are validated
against the tool's schema before anything runs (a bad edit is a ``DecisionValueError``, a tool
with ``editable=False`` refuses with ``EditNotSupportedError``; the call stays pending), the
decision is bound to the call the reviewer saw by its digest, and the journal keeps the
script's call (its intent, which replay matches) with a sealed decision record naming the
edited arguments and their digest (what ran). A kill -9 inside the edited call's tool is
recovered by running the edited call again or asking about it, never the script's original.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic_core
import pytest
from pydantic import ValidationError

from _postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from agent_helpers import sigkill_at_barrier
from codeact import (
    CodeActAgent,
    Decision,
    DecisionMismatchError,
    DecisionValueError,
    EditNotSupportedError,
    FunctionTool,
    MontyRuntime,
    NoPendingCallError,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.sessions import BaseSessionService
from codeact.turns import args_digest, open_journal

pytestmark = pytest.mark.anyio

APP, USER, SESSION = "app", "u", "s"
WIRE = '```python\nw = call_tool("wire", {"amount": 9, "to": "bob"})\n{"type": "final_result", "value": w}\n```'
KEY = b"k" * 32


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue("postgres_url"))


def open_store(url: str) -> BaseSessionService:
    if url.startswith("postgresql://"):
        from codeact.sessions import PostgresSessionService

        return PostgresSessionService(url, max_size=2)
    return SqliteSessionService(url)


@pytest.fixture
def store(store_url: str) -> Iterator[BaseSessionService]:
    service = open_store(store_url)
    yield service
    service.close()


def runner_on(service: BaseSessionService, ran: list[str], *, editable: bool = True, doubt: str = "rerun") -> Runner:
    def wire(amount: int, to: str) -> str:
        """Wires money.

        Args:
            amount: how much, in cents.
            to: the payee.
        """
        ran.append(f"wire {amount} to {to}")
        return f"wired {amount} to {to}"

    tool = FunctionTool(wire, requires_confirmation=True, editable=editable, on_in_doubt=doubt)  # type: ignore[arg-type]
    runtime = MontyRuntime(snapshot_key=KEY)
    agent = CodeActAgent(name="coder", model=ScriptedModel([WIRE]), runtime=runtime, tools=[tool])
    return Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


async def paused(runner: Runner) -> Any:
    await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    (call,) = await runner.pending(user_id=USER, session_id=SESSION)
    return call


async def journal_of(runner: Runner, turn: str) -> list[Any]:
    records = await runner.session_service.read_journal(app_name=APP, user_id=USER, session_id=SESSION, turn=turn)
    return open_journal(runner.agent.runtime, (APP, USER, SESSION), turn, records)  # type: ignore[attr-defined]


async def test_an_edited_approval_runs_the_edited_call_once(store: BaseSessionService) -> None:
    ran: list[str] = []
    runner = runner_on(store, ran)
    call = await paused(runner)
    assert call.editable and call.args_schema is not None and set(call.args_schema["properties"]) == {"amount", "to"}
    edited = {"amount": 3, "to": "bob"}
    events = await collect(
        runner.approve(user_id=USER, session_id=SESSION, call_key=call.call_key, digest=call.digest, args=edited)
    )
    assert events[-1].text == "wired 3 to bob" and ran == ["wire 3 to bob"]
    assert await runner.pending(user_id=USER, session_id=SESSION) == []
    with pytest.raises(NoPendingCallError):
        await collect(
            runner.approve(user_id=USER, session_id=SESSION, call_key=call.call_key, digest=call.digest, args=edited)
        )
    assert ran == ["wire 3 to bob"]
    turn, pos = call.call_key.rsplit(":", 1)
    journal = await journal_of(runner, turn)
    intent = next(r for r in journal if r.kind == "intent" and r.seq == int(pos))
    tool, digest, how = pydantic_core.from_json(intent.data)
    assert (tool, digest, how) == ("wire", args_digest({"amount": 9, "to": "bob"}), "approved")  # the script's call
    (decision,) = [pydantic_core.from_json(r.data) for r in journal if r.kind == "decision"]
    assert decision["args"] == edited and decision["args_digest"] == args_digest(edited)  # what ran
    assert (decision["act"], decision["call_key"], decision["tool"]) == ("approve", call.call_key, "wire")


async def test_a_stale_digest_is_refused_and_nothing_runs(store: BaseSessionService) -> None:
    ran: list[str] = []
    runner = runner_on(store, ran)
    call = await paused(runner)
    stale = Decision(verb="approve", call_key=call.call_key, digest="0" * 16, args={"amount": 3, "to": "bob"})
    with pytest.raises(DecisionMismatchError, match="stale view"):
        await collect(runner.decide(stale, user_id=USER, session_id=SESSION))
    assert ran == [] and await runner.pending(user_id=USER, session_id=SESSION) == [call]


def test_an_edit_needs_the_digest_of_the_call_it_edits() -> None:
    with pytest.raises(ValidationError, match="needs the digest"):
        Decision(verb="approve", call_key="t:0", args={"amount": 1})


@pytest.mark.parametrize(
    ("args", "field", "message"),
    [
        ({"amount": "lots", "to": "bob"}, "amount", "valid integer"),
        ({"amount": 3}, "to", "missing"),
        ({"amount": 3, "to": "bob", "memo": "x"}, "memo", "unexpected argument"),
    ],
    ids=["wrong-type", "missing", "unknown"],
)
async def test_an_edit_that_fails_the_schema_leaves_the_call_pending(
    store: BaseSessionService, args: dict[str, Any], field: str, message: str
) -> None:
    ran: list[str] = []
    runner = runner_on(store, ran)
    call = await paused(runner)
    decision = Decision(verb="approve", call_key=call.call_key, digest=call.digest, args=args)
    with pytest.raises(DecisionValueError, match=message) as refused:
        await collect(runner.decide(decision, user_id=USER, session_id=SESSION))
    assert refused.value.what == "args" and field in [f for f, _ in refused.value.errors]
    assert refused.value.call_key == call.call_key and isinstance(refused.value, ValueError)
    assert ran == [] and await runner.pending(user_id=USER, session_id=SESSION) == [call]
    info = await runner.turn_info(user_id=USER, session_id=SESSION)
    assert info is not None and info.status == "suspended"  # nothing claimed
    events = await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=call.call_key))
    assert events[-1].text == "wired 9 to bob" and ran == ["wire 9 to bob"]  # still approvable as it was


async def test_a_tool_may_forbid_edits(store: BaseSessionService) -> None:
    ran: list[str] = []
    runner = runner_on(store, ran, editable=False)
    call = await paused(runner)
    assert call.editable is False
    decision = Decision(verb="approve", call_key=call.call_key, digest=call.digest, args={"amount": 1, "to": "bob"})
    with pytest.raises(EditNotSupportedError, match="editable=False") as refused:
        await collect(runner.decide(decision, user_id=USER, session_id=SESSION))
    assert refused.value.tool == "wire" and isinstance(refused.value, NotImplementedError)
    assert ran == [] and await runner.pending(user_id=USER, session_id=SESSION) == [call]


CHILD = textwrap.dedent(
    """
    import json, sys, threading
    import anyio
    from codeact import CodeActAgent, FunctionTool, MontyRuntime, Runner, ScriptedModel, SqliteSessionService

    url, ledger, barrier, spec = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])

    def wire(amount: int, to: str) -> str:
        \"\"\"Wires money.\"\"\"
        with open(ledger, "a") as f:
            f.write(f"wire {amount} to {to}\\n")
        if spec["stop"] == "tool":
            open(barrier, "w").close()
            threading.Event().wait(600)  # killed here: the effect happened, its outcome is not recorded
        return f"wired {amount} to {to}"

    def store():
        if url.startswith("postgresql://"):
            from codeact.sessions import PostgresSessionService
            return PostgresSessionService(url, max_size=2)
        return SqliteSessionService(url)

    async def main():
        with store() as service:
            tool = FunctionTool(wire, requires_confirmation=True, on_in_doubt=spec["doubt"])
            agent = CodeActAgent(name="coder", model=ScriptedModel([spec["reply"]]),
                                 runtime=MontyRuntime(snapshot_key=b"k" * 32), tools=[tool])
            runner = Runner(app_name="app", agent=agent, session_service=service, auto_create_session=True)
            if spec["action"] == "start":
                calls = runner.run_async(user_id="u", session_id="s", new_message="go")
            else:
                calls = runner.approve(user_id="u", session_id="s", call_key=spec["call_key"], digest=spec["digest"],
                                       args=spec["args"], actor=spec.get("actor"), reason=spec.get("reason"))
            async for _ in calls:
                pass

    anyio.run(main)
    """
)


def child(tmp: Path, url: str, spec: dict[str, Any], *, killed: bool) -> None:
    import subprocess

    script, barrier = tmp / "child.py", tmp / "barrier"
    script.write_text(CHILD)
    args = [sys.executable, str(script), url, str(tmp / "ledger"), str(barrier), json.dumps({"reply": WIRE, **spec})]
    if killed:
        sigkill_at_barrier(args, barrier)
        return
    done = subprocess.run(args, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]


@pytest.mark.parametrize("doubt", ["rerun", "ask"])
async def test_a_kill_inside_an_edited_call_recovers_the_edited_call(
    tmp_path: Path, store_url: str, doubt: str
) -> None:
    """kill -9 inside the tool of an edited approval: recovery reaches the script's call (no
    nondeterministic replay) and runs the edited call again (``on_in_doubt="rerun"``) or asks
    about the edited call (``"ask"``, then rerun): the script's original never runs."""
    ledger = tmp_path / "ledger"
    child(tmp_path, store_url, {"action": "start", "stop": "none", "doubt": doubt}, killed=False)
    ran: list[str] = []
    with open_store(store_url) as service:
        runner = runner_on(service, ran, doubt=doubt)
        (call,) = await runner.pending(user_id=USER, session_id=SESSION)
    edited = {"amount": 3, "to": "carol"}
    spec = {"action": "approve", "stop": "tool", "doubt": doubt, "call_key": call.call_key, "digest": call.digest}
    child(tmp_path, store_url, {**spec, "args": edited, "actor": "alice", "reason": "wrong payee"}, killed=True)
    assert ledger.read_text().splitlines() == ["wire 3 to carol"]
    with open_store(store_url) as service:
        runner = runner_on(service, ran, doubt=doubt)
        info = await runner.turn_info(user_id=USER, session_id=SESSION)
        assert info is not None and info.status == "interrupted" and info.in_flight == [call.call_key]
        events = await collect(runner.recover(user_id=USER, session_id=SESSION))
        assert not any(e.error_code for e in events), [e.error_code for e in events]
        shown = (events[0].custom_metadata or {}).get("codeact_decisions")
        assert shown and shown[0]["actor"] == "alice" and shown[0]["args"] == edited  # the actor survived the kill
        if doubt == "ask":
            (asked,) = await runner.pending(user_id=USER, session_id=SESSION)
            assert asked.kind == "in_doubt" and asked.args == edited and asked.script_args == {"amount": 9, "to": "bob"}
            events = await collect(
                runner.resolve_in_doubt(user_id=USER, session_id=SESSION, call_key=asked.call_key, action="rerun")
            )
        assert events[-1].text == "wired 3 to carol"
        assert ran == ["wire 3 to carol"]  # the edited call ran again here; the original never ran
        assert await runner.pending(user_id=USER, session_id=SESSION) == []
