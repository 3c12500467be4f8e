"""``PostgresSessionService`` on a real throwaway server (tests/_postgres.py): what only a
shared database server has: several processes at once, set-up races, dropped connections,
connection errors, a host's pool, the CLI with a URL. The store contract itself runs in
tests/test_store_contract.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from _postgres import PostgresServer, postgres_server, postgres_url  # noqa: F401  (fixtures)
from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel
from codeact.exceptions import SessionStoreConnectionError, SessionStoreError

pytestmark = pytest.mark.anyio

APP, USER, SID = "app", "u", "s"


def _service(url: str, **kwargs: Any) -> Any:
    from codeact.sessions import PostgresSessionService

    return PostgresSessionService(url, **kwargs)


def _children(code: str, n: int, *args: str, timeout: float = 120) -> list[subprocess.CompletedProcess[str]]:
    """Runs ``code`` in ``n`` processes at once (``sys.argv[1:]`` = ``args``, ``sys.argv[-1]``
    = the child's index); waits for all."""
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    tests = str(Path(__file__).parent)
    env["PYTHONPATH"] = os.pathsep.join([tests, env.get("PYTHONPATH", "")])
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), *args, str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(n)
    ]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


# ------------------------------------------------------------------ several processes


APPROVER = """
import sys, time
from pathlib import Path
import anyio
from codeact import CodeActAgent, FunctionTool, MontyRuntime, Runner, ScriptedModel
from codeact.exceptions import AlreadyResumingError, NoPendingCallError
from codeact.sessions import PostgresSessionService

url, ledger, go, mode = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]

def pay(amount: int) -> str:
    \"\"\"Pays.

    Args:
        amount: how much.
    \"\"\"
    with ledger.open("a") as f:
        f.write(f"pay {amount}\\n")
    return f"paid {amount}"

SCRIPT = '```python\\nr = call_tool("pay", {"amount": 7})\\n{"type": "final_result", "value": r}\\n```'

def runner(service):
    agent = CodeActAgent(name="coder", model=ScriptedModel([SCRIPT]), runtime=MontyRuntime(),
                         tools=[FunctionTool(pay, requires_confirmation=True)])
    return Runner(app_name="app", agent=agent, session_service=service)

async def main():
    with PostgresSessionService(url) as service:
        if mode == "start":
            await service.create_session(app_name="app", user_id="u", session_id="s")
            async for _ in runner(service).run_async(user_id="u", session_id="s", new_message="go"):
                pass
            return
        r = runner(service)
        (call,) = await r.pending(user_id="u", session_id="s")
        print("ready", flush=True)
        while not go.exists():
            time.sleep(0.001)
        try:
            async for _ in r.approve(user_id="u", session_id="s", call_key=call.call_key):
                pass
            print("done")
        except (AlreadyResumingError, NoPendingCallError) as e:
            print("lost", type(e).__name__)

anyio.run(main)
"""


def test_two_processes_approving_at_once_run_the_tool_once(postgres_url: str, tmp_path: Path) -> None:  # noqa: F811
    ledger, go = tmp_path / "ledger", tmp_path / "go"
    (started,) = _children(APPROVER, 1, postgres_url, str(ledger), str(go), "start")
    assert started.returncode == 0, started.stderr
    env = dict(os.environ)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPROVER, postgres_url, str(ledger), str(go), "approve"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    for proc in procs:  # both have read the pending call before either approves
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(out.strip().split()[0])
    assert sorted(results) == ["done", "lost"], results
    assert ledger.read_text().splitlines() == ["pay 7"]


SET_UP = """
import sys, time
from pathlib import Path
import anyio
from codeact.sessions import PostgresSessionService

go = Path(sys.argv[2])
Path(f"{go}.{sys.argv[-1]}").touch()  # imported: ready
while not go.exists():  # every worker ready: they connect together
    time.sleep(0.001)

async def main():
    with PostgresSessionService(sys.argv[1]) as service:
        await service.create_session(app_name="app", user_id="u", session_id=f"s{sys.argv[-1]}")
anyio.run(main)
"""


def test_concurrent_set_up_creates_the_schema_once(postgres_server: PostgresServer, tmp_path: Path) -> None:  # noqa: F811
    import psycopg

    from codeact.sessions._postgres import SCHEMA_VERSION

    url = postgres_server.new_database()
    go = tmp_path / "go"

    def release() -> None:
        while len(list(tmp_path.glob("go.*"))) < 8:
            time.sleep(0.01)
        go.touch()

    threading.Thread(target=release, daemon=True).start()
    done = _children(SET_UP, 8, url, str(go))
    assert [p.returncode for p in done] == [0] * 8, [p.stderr for p in done if p.returncode]
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM codeact_schema_version").fetchall() == [(SCHEMA_VERSION,)]
        assert conn.execute("SELECT count(*) FROM codeact_sessions").fetchone() == (8,)


# ------------------------------------------------------------------ values


async def test_nul_in_printed_output_is_stored_and_read_back(postgres_url: str) -> None:  # noqa: F811
    script = '```python\nprint("before\\x00after")\n{"type": "final_result", "value": "a" + chr(0) + "b"}\n```'
    with _service(postgres_url) as service:
        agent = CodeActAgent(name="coder", model=ScriptedModel([script]), runtime=MontyRuntime())
        runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
        events = [e async for e in runner.run_async(user_id=USER, session_id=SID, new_message="print a NUL")]
        assert events[-1].error_code is None, events[-1].error_message
        assert events[-1].text == "a\x00b"
    with _service(postgres_url) as again:
        session = await again.get_session(app_name=APP, user_id=USER, session_id=SID)
        assert session is not None
        dumped = session.model_dump_json()
        assert "before\\u0000after" in dumped and session.events[-1].text == "a\x00b"


# ------------------------------------------------------------------ connections


def _terminate(server: PostgresServer, url: str) -> int:
    dbname = url.rsplit("/", 1)[1]
    rows = server.admin(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE datname = '{dbname}' AND application_name = 'codeact'"
    )
    return len(rows)


async def test_dropped_connections_are_retried_and_nothing_is_lost(
    postgres_server: PostgresServer,  # noqa: F811
    postgres_url: str,  # noqa: F811
) -> None:
    from codeact.sessions import Content, Event

    with _service(postgres_url, min_size=2, max_size=2) as service:
        session = await service.create_session(app_name=APP, user_id=USER, session_id=SID)
        await service.append_event(session, Event(author="user", content=Content.from_text("one")))
        assert _terminate(postgres_server, postgres_url) >= 1
        await service.append_event(session, Event(author="user", content=Content.from_text("two")))
        got = await service.get_session(app_name=APP, user_id=USER, session_id=SID)
        assert got is not None and [e.text for e in got.events] == ["one", "two"]


async def test_a_connection_that_keeps_dropping_is_a_clear_error_then_the_next_call_works(
    postgres_server: PostgresServer,  # noqa: F811
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from codeact.sessions import _postgres

    with _service(postgres_url, min_size=1, max_size=1) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SID)
        monkeypatch.setattr(_postgres, "_ATTEMPTS", 1)  # no retry: the drop itself is reported
        assert _terminate(postgres_server, postgres_url) == 1
        with pytest.raises(SessionStoreConnectionError, match=r"failed 1 times \(nothing was written\)") as info:
            await service.list_sessions(app_name=APP, user_id=None)
        assert "terminat" in str(info.value) or "closed" in str(info.value)
        assert info.value.__cause__ is not None
        assert [s.id for s in await service.list_sessions(app_name=APP, user_id=None)] == [SID]


async def test_connection_errors_name_the_cause(postgres_server: PostgresServer) -> None:  # noqa: F811
    missing = postgres_server.url("no_such_db")
    with pytest.raises(SessionStoreConnectionError, match='database "no_such_db" does not exist'):
        await _service(missing).list_sessions(app_name=APP, user_id=None)
    with pytest.raises(SessionStoreConnectionError, match=r"127\.0\.0\.1:1: cannot connect: .*refused"):
        await _service("postgresql://postgres@127.0.0.1:1/x", connect_timeout=2).list_sessions(
            app_name=APP, user_id=None
        )
    with pytest.raises(SessionStoreError, match="invalid PostgreSQL connection string"):
        await _service("postgresql://a b").list_sessions(app_name=APP, user_id=None)
    with pytest.raises(ValueError, match="durability"):
        _service(missing, durability="disk")
    with pytest.raises(ValueError, match="exactly one"):
        _service(None)
    closed = _service(postgres_server.url())
    closed.close()
    with pytest.raises(SessionStoreError, match="closed"):
        await closed.list_sessions(app_name=APP, user_id=None)


async def test_a_newer_schema_is_refused(postgres_url: str) -> None:  # noqa: F811
    import psycopg

    with _service(postgres_url) as service:
        await service.list_sessions(app_name=APP, user_id=None)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE codeact_schema_version SET version = 99")
    with pytest.raises(SessionStoreError, match="schema version 99"):
        await _service(postgres_url).list_sessions(app_name=APP, user_id=None)


@pytest.mark.parametrize("autocommit", [False, True])
async def test_a_host_pool_is_used_and_left_open(postgres_url: str, autocommit: bool) -> None:  # noqa: F811
    from psycopg_pool import ConnectionPool

    from codeact.sessions import JournalRecord

    with ConnectionPool(postgres_url, min_size=1, max_size=2, kwargs={"autocommit": autocommit}) as pool:
        with _service(None, pool=pool, durability="power") as service:
            session = await service.create_session(app_name=APP, user_id=USER, session_id=SID)
            v = await service.save_turn(
                app_name=APP, user_id=USER, session_id=SID, data={"format": 3}, snapshot=None, expected_version=0
            )
            await service.append_journal(session, "t", [JournalRecord("intent", 0, "[]")], expected_version=v)
            assert await service.list_turns(app_name=APP) == [(USER, SID)]
            got = await service.get_session(app_name=APP, user_id=USER, session_id=SID)
            assert got is not None and got.id == SID
        with pool.connection() as conn:  # still open, and nothing left in a transaction
            assert conn.execute("SELECT count(*) FROM codeact_journal").fetchone() == (1,)
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)


# ------------------------------------------------------------------ the CLI


def test_cli_sessions_commands_take_a_postgres_url(postgres_url: str, tmp_path: Path) -> None:  # noqa: F811
    from typer.testing import CliRunner

    import cli_fixtures
    from codeact.cli import app

    async def suspend() -> None:
        with _service(postgres_url) as service:
            runner = Runner(
                app_name="codeact", agent=cli_fixtures.GATED_AGENT, session_service=service, auto_create_session=True
            )
            async for _ in runner.run_async(user_id="cli", session_id="g1", new_message="send 5"):
                pass

    import anyio

    anyio.run(suspend)
    cli = CliRunner()
    listed = cli.invoke(app, ["sessions", "list", "--db", postgres_url])
    assert listed.exit_code == 0, listed.output
    assert "g1" in listed.stdout
    pending = cli.invoke(app, ["sessions", "pending", "g1", "--db", postgres_url, "--json"])
    assert pending.exit_code == 0, pending.output
    [item] = json.loads(pending.stdout)
    assert (item["tool"], item["args"]) == ("send", {"amount": 5})
    cli_fixtures.SENT.clear()
    done = cli.invoke(app, ["sessions", "approve", "g1", "--db", postgres_url, "--agent", "cli_fixtures:GATED_AGENT"])
    assert done.exit_code == 0, done.output
    assert cli_fixtures.SENT == [5]
    assert json.loads(cli.invoke(app, ["sessions", "pending", "g1", "--db", postgres_url, "--json"]).stdout) == []
    bad = cli.invoke(app, ["sessions", "list", "--db", str(tmp_path / "missing.db")])
    assert bad.exit_code == 2 and "neither an existing SQLite file nor a postgresql:// URL" in bad.output
    wrong = cli.invoke(app, ["sessions", "list", "--db", postgres_url.rsplit("/", 1)[0] + "/nope"])
    assert wrong.exit_code == 1 and "does not exist" in wrong.output


# ------------------------------------------------------------------ SIGKILL at the journal boundaries


@pytest.mark.parametrize("boundary", ["before_intent", "after_intent", "after_effect", "after_outcome"])
def test_kill_at_a_journal_boundary_then_recover(postgres_url: str, tmp_path: Path, boundary: str) -> None:  # noqa: F811
    """tests/test_crash_recovery.py's child on PostgreSQL, killed with SIGKILL at each journal
    boundary of the second call, restarted until it finishes: events stored before the kill
    stay, each side effect happens once (twice only in the at-least-once window)."""
    import signal

    import psycopg

    from test_crash_recovery import CALLS, CHILD

    child = CHILD.replace("SqliteSessionService", "PostgresSessionService")

    def run(kill: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", child, postgres_url, str(tmp_path / "ledger"), kill, "thread"],
            capture_output=True,
            text=True,
            timeout=120,
        )

    def events() -> list[str]:
        with psycopg.connect(postgres_url) as conn:
            return [r[0] for r in conn.execute("SELECT id FROM codeact_events ORDER BY seq")]

    first = run(f"{boundary}:b")
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    before = events()
    for _ in range(3):
        again = run("none:")
        assert again.returncode == 0, again.stderr[-3000:]
        state = json.loads(again.stdout.strip().splitlines()[-1])
        if not state["pending"]:
            break
    assert state == {"final": "done: charged c", "pending": False}
    assert events()[: len(before)] == before
    ledger = (tmp_path / "ledger").read_text().split()
    expected = {c: 1 for c in CALLS}
    if boundary == "after_effect":
        expected["b"] = 2
    assert {c: ledger.count(c) for c in CALLS} == expected, ledger


@pytest.mark.parametrize("kill", ["before:1", "after_effect:10", "before:3", "after:3", "before:4", "before:5"])
def test_kill_at_a_barrier_of_reads_and_writes_then_recover(postgres_url: str, tmp_path: Path, kill: str) -> None:  # noqa: F811
    """tests/test_crash_recovery.py's child of read-only and effectful calls interleaved (issue
    50) on PostgreSQL, killed with SIGKILL at its barriers: a read-only call runs again only when
    its outcome was not durable, a call with effects only in its at-least-once window."""
    from test_crash_recovery import RO_CHILD, check_ro_kill

    child = RO_CHILD.replace("SqliteSessionService", "PostgresSessionService")
    check_ro_kill(child, postgres_url, tmp_path / "ledger", kill)
