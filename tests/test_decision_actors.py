"""Who decided (issue 49, item 2), on SQLite and PostgreSQL: every decision carries an actor
and an optional reason, journaled (sealed) with the record the decision produces, shown on
the first event of the resumed run (``custom_metadata["codeact_decisions"]``), in ``codeact
sessions show``, and listed by ``Runner.decisions``; a kill -9 between the decision and the
tool leaves the actor in the journal, and the recovered run shows it."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from agent_helpers import sigkill_at_barrier
from codeact import (
    CodeActAgent,
    FunctionTool,
    InMemorySessionService,
    LongRunningFunctionTool,
    MontyRuntime,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.exceptions import StoreMethodMissingError
from codeact.sessions import BaseSessionService

pytestmark = pytest.mark.anyio

APP, USER, SESSION = "app", "u", "s"
PAY = '```python\nr = call_tool("pay", {"amount": 5})\n{"type": "final_result", "value": r}\n```'
RENDER = '```python\nr = call_tool("render", {"scene": "a"})\n{"type": "final_result", "value": r}\n```'


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


def runner_on(service: BaseSessionService, replies: list[str], ran: list[str], *, render_too: bool = True) -> Runner:
    def pay(amount: int) -> str:
        """Pays."""
        ran.append(f"pay {amount}")
        return f"paid {amount}"

    def render(scene: str) -> dict:
        """Starts a render."""
        return {"status": "started"}

    tools = [FunctionTool(pay, requires_confirmation=True)] + ([LongRunningFunctionTool(render)] if render_too else [])
    agent = CodeActAgent(
        name="coder", model=ScriptedModel(replies), runtime=MontyRuntime(snapshot_key=b"a" * 32), tools=tools
    )
    return Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


def shown(events: list[Any]) -> list[dict[str, Any]]:
    return list((events[0].custom_metadata or {}).get("codeact_decisions", []))


async def test_each_verb_records_its_actor_and_reason(store: BaseSessionService) -> None:
    ran: list[str] = []
    done = '```python\n{"type": "final_result", "value": "ok"}\n```'
    runner = runner_on(store, [PAY, RENDER, PAY, done], ran)
    await collect(runner.run_async(user_id=USER, session_id="a", new_message="go"))
    events = await collect(runner.approve(user_id=USER, session_id="a", actor="alice", reason="budgeted"))
    assert [(d["act"], d["actor"], d["reason"]) for d in shown(events)] == [("approve", "alice", "budgeted")]
    await collect(runner.run_async(user_id=USER, session_id="b", new_message="go"))
    (render,) = await runner.pending(user_id=USER, session_id="b")
    events = await collect(
        runner.complete(user_id=USER, session_id="b", call_key=render.call_key, value={"f": 1}, actor="carol")
    )
    assert [(d["act"], d["actor"]) for d in shown(events)] == [("complete", "carol")]
    await collect(runner.run_async(user_id=USER, session_id="c", new_message="go"))
    config = RunConfig(on_pending_message="deny")
    events = await collect(runner.run_async(user_id=USER, session_id="c", new_message="never mind", run_config=config))
    assert [(d["act"], d.get("actor")) for d in shown(events)] == [("deny", None)]  # decided without an actor
    listed = await runner.decisions()
    assert [(d.act, d.actor, d.session_id) for d in listed] == [
        ("deny", None, "c"),
        ("complete", "carol", "b"),
        ("approve", "alice", "a"),
    ]
    assert listed[2].reason == "budgeted" and listed[2].tool == "pay" and ran == ["pay 5"]
    with pytest.raises(ValueError, match="serves app"):
        await runner.decisions("other")


async def test_a_store_without_list_decisions_gets_a_typed_error() -> None:
    class OldStore(InMemorySessionService):
        list_decisions = BaseSessionService.list_decisions  # type: ignore[assignment]

    runner = runner_on(OldStore(), [], [])
    with pytest.raises(StoreMethodMissingError, match="list_decisions") as missing:
        await runner.decisions()
    assert missing.value.method == "list_decisions" and isinstance(missing.value, NotImplementedError)


CHILD = textwrap.dedent(
    """
    import json, sys, threading
    import anyio
    from codeact import CodeActAgent, FunctionTool, MontyRuntime, Runner, ScriptedModel, SqliteSessionService

    url, ledger, barrier, spec = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])

    def halt():
        open(barrier, "w").close()
        threading.Event().wait(600)  # killed here

    def base():
        if url.startswith("postgresql://"):
            from codeact.sessions import PostgresSessionService
            return PostgresSessionService
        return SqliteSessionService

    class Halting(base()):
        async def append_journal(self, session, turn, records, **kw):
            await super().append_journal(session, turn, records, **kw)
            if spec["stop"] == "decided" and any(r.kind == "decision" for r in records):
                halt()  # the decision and the intent are durable; the tool has not run

        def journal_appender(self):
            return None  # every write goes through append_journal above

    def pay(amount: int) -> str:
        \"\"\"Pays.\"\"\"
        with open(ledger, "a") as f:
            f.write(f"pay {amount}\\n")
        return f"paid {amount}"

    async def main():
        service = Halting(url, max_size=2) if url.startswith("postgresql://") else Halting(url)
        with service:
            agent = CodeActAgent(name="coder", model=ScriptedModel([spec["reply"]]),
                                 runtime=MontyRuntime(snapshot_key=b"a" * 32),
                                 tools=[FunctionTool(pay, requires_confirmation=True)])
            runner = Runner(app_name="app", agent=agent, session_service=service, auto_create_session=True)
            if spec["action"] == "start":
                calls = runner.run_async(user_id="u", session_id="s", new_message="go")
            else:
                calls = runner.approve(user_id="u", session_id="s", actor="alice", reason="ok by me")
            async for _ in calls:
                pass

    anyio.run(main)
    """
)


def child(tmp: Path, url: str, spec: dict[str, Any], *, killed: bool) -> None:
    import subprocess

    script, barrier = tmp / "child.py", tmp / "barrier"
    script.write_text(CHILD)
    args = [sys.executable, str(script), url, str(tmp / "ledger"), str(barrier), json.dumps({"reply": PAY, **spec})]
    if killed:
        sigkill_at_barrier(args, barrier)
        return
    done = subprocess.run(args, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]


async def test_the_actor_survives_a_kill_between_the_decision_and_the_tool(tmp_path: Path, store_url: str) -> None:
    child(tmp_path, store_url, {"action": "start", "stop": "none"}, killed=False)
    child(tmp_path, store_url, {"action": "approve", "stop": "decided"}, killed=True)
    assert not (tmp_path / "ledger").exists()  # killed before the tool ran
    ran: list[str] = []
    with open_store(store_url) as service:
        runner = runner_on(service, [PAY], ran, render_too=False)
        (before,) = await runner.decisions()
        assert (before.act, before.actor, before.reason) == ("approve", "alice", "ok by me")
        events = await collect(runner.recover(user_id=USER, session_id=SESSION))
        assert [(d["act"], d["actor"], d["reason"]) for d in shown(events)] == [("approve", "alice", "ok by me")]
        assert events[-1].text == "paid 5" and ran == ["pay 5"]  # the approved call ran once, on recovery
        (after,) = await runner.decisions()
        assert after == before  # one decision, journaled once


def test_sessions_show_lists_who_decided(tmp_path: Path) -> None:
    """``codeact sessions show`` prints each decision (when, who, what, on which call), and
    ``--json`` adds them under ``"decisions"``; ``sessions decide`` records the OS user when
    no ``--actor`` is given."""
    import getpass

    import anyio

    import cli_fixtures
    from codeact.cli import app

    db = tmp_path / "g.db"

    async def suspend() -> None:
        with SqliteSessionService(db) as service:
            runner = Runner(
                app_name="codeact", agent=cli_fixtures.GATED_AGENT, session_service=service, auto_create_session=True
            )
            await collect(runner.run_async(user_id="cli", session_id="g1", new_message="send 5"))

    anyio.run(suspend)
    cli = CliRunner()
    agent = ["--agent", "cli_fixtures:GATED_AGENT", "--db", str(db), "--app", "codeact", "--user", "cli"]
    decided = cli.invoke(app, ["sessions", "decide", "g1", "approve", *agent, "--reason", "fine"])
    assert decided.exit_code == 0, decided.output
    common = ["--db", str(db), "--app", "codeact", "--user", "cli"]
    printed = cli.invoke(app, ["sessions", "show", "g1", *common])
    assert printed.exit_code == 0, printed.output
    assert f"{getpass.getuser()} approve call" in printed.stdout and "'send'" in printed.stdout
    assert "fine" in printed.stdout
    data = json.loads(cli.invoke(app, ["sessions", "show", "g1", *common, "--json"]).stdout)
    ((entry),) = data["decisions"]
    assert (entry["act"], entry["actor"], entry["reason"], entry["tool"]) == (
        "approve",
        getpass.getuser(),
        "fine",
        "send",
    )
