"""Agent runs on DBOS workers (issue 25): a queue partitioned by session, approvals and
completions from another process, dead workers' runs recovered on another worker.

The scenario runs real processes on a real PostgreSQL server: workers started with
``codeact worker`` (one asyncio, one trio), the test process as the producer, an approver in
a third process, and two workers killed with SIGKILL at barriers (a tool records its side
effect and a barrier row, then blocks; the test waits for the row, then kills). The tools
count their side effects in a ``ledger`` table (``dbos_agent``).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from _postgres import postgres_server, postgres_url  # noqa: F401
from dbos_agent import LEDGER_DDL, expected, kind_of

if os.environ.get("CODEACT_REQUIRE_POSTGRES") == "1":
    import dbos  # noqa: F401  (CI: a missing extra fails instead of skipping)
else:
    pytest.importorskip("dbos")

from codeact.integrations.dbos import (
    CodeActClient,
    RunResult,
    partition_key,
    workflow_id,
)

TESTS = Path(__file__).resolve().parent
APP, USER = "codeact", "u"
SESSIONS = 24
DEADLINE = 240.0  # seconds: a failure guard only; nothing waits for time to pass
BLOCK = "s0:note,s1:pay"  # s0: inside a tool of the first turn; s1: inside the approved payment
WORKER = [sys.executable, "-m", "codeact.cli", "worker", "--agent", "dbos_agent:build"]


def _env(url: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), *filter(None, [env.get("PYTHONPATH")])])
    env["CODEACT_DBOS_LEDGER"] = url
    env["CODEACT_DBOS_BLOCK"] = BLOCK
    env.setdefault("PYTHONFAULTHANDLER", "1")
    return env


def _until(what: str, check: Any, deadline: float) -> Any:
    """Waits for ``check()`` to return something truthy (a condition, polled), failing at
    the deadline."""
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Fleet:
    """The worker processes of the test."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.tmp = url, tmp
        self.procs: dict[int, tuple[subprocess.Popen[bytes], str, Path]] = {}
        self.killed: set[int] = set()

    def start(self, backend: str, *extra: str) -> int:
        out = self.tmp / f"worker-{len(self.procs)}.out"
        err = out.with_suffix(".err")
        with out.open("wb") as stdout, err.open("wb") as stderr:
            proc = subprocess.Popen(
                [*WORKER, "--db", self.url, "--concurrency", "4", "--backend", backend, *extra],
                stdout=stdout,
                stderr=stderr,
                env=_env(self.url),
                cwd=self.tmp,
            )
        self.procs[proc.pid] = (proc, backend, out)

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"worker exited ({proc.returncode}): {err.read_text()[-3000:]}")
            return "ready" in out.read_text()

        _until(f"{backend} worker {proc.pid} to be ready", ready, time.monotonic() + DEADLINE)
        return proc.pid

    def kill(self, pid: int) -> str:
        proc, backend, _ = self.procs[pid]
        os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=60)
        self.killed.add(pid)
        return backend

    def backend(self, pid: int) -> str:
        return self.procs[pid][1]

    def stop_all(self) -> dict[int, tuple[int, str]]:
        """SIGTERM to every live worker; their exit codes and output."""
        live = {pid: entry for pid, entry in self.procs.items() if pid not in self.killed}
        for proc, _, _ in live.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        done = {}
        for pid, (proc, _, out) in live.items():
            done[pid] = (proc.wait(timeout=120), out.read_text())
        return done

    def logs(self) -> str:
        """Every worker's stderr (for a failure)."""
        parts = []
        for pid, (_, backend, out) in self.procs.items():
            parts.append(f"--- worker {pid} ({backend}{', killed' if pid in self.killed else ''})")
            parts.append(out.with_suffix(".err").read_text()[-4000:])
        return "\n".join(parts)

    def kill_all(self) -> None:
        for proc, _, _ in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=60)


def _query(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()  # type: ignore[arg-type]


def _barrier(url: str, name: str, deadline: float) -> int:
    def pid() -> int | None:
        rows = _query(url, "SELECT pid FROM barriers WHERE name = %s", name)
        return rows[0][0] if rows else None

    return int(_until(f"barrier {name}", pid, deadline))


def _result(handle: Any, deadline: float) -> RunResult:
    _until(f"workflow {handle.workflow_id}", lambda: handle.status() in ("SUCCESS", "ERROR"), deadline)
    return handle.result()


APPROVER = textwrap.dedent(
    """
    import json, sys, time
    from dbos import DBOSClient
    from codeact.integrations.dbos import CodeActClient

    url, n, deadline = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
    dbos_client = DBOSClient(system_database_url=url, application_name="codeact")
    client = CodeActClient(dbos_client, app_name="codeact")

    def wait(handle):
        while handle.status() not in ("SUCCESS", "ERROR"):
            assert time.monotonic() < deadline, f"timed out on {handle.workflow_id}"
            time.sleep(0.02)
        return handle.result()

    results = {f"s{i}": wait(client.handle("u", f"s{i}", f"msg-{i}")) for i in range(n)}
    keys, decided = {}, set()
    while True:
        handles = {}
        for sid, result in results.items():
            for call in result.paused:
                # a call decided once pauses its run again: the decision was lost (each
                # enqueue under the same key returns the same stored result: stop here)
                assert call.call_key not in decided, f"{sid}: {call.call_key} paused again after its decision"
                decided.add(call.call_key)
                keys.setdefault(sid, []).append([call.kind, call.call_key])
                if call.kind == "confirmation":
                    handles[sid] = client.approve("u", sid, call.call_key)
                else:
                    handles[sid] = client.complete("u", sid, call.call_key, "frame-" + sid[1:])
        if not handles:
            break
        results.update({sid: wait(h) for sid, h in handles.items()})
    print(json.dumps({"results": {k: v.model_dump() for k, v in results.items()}, "keys": keys}))
    dbos_client.destroy()
    """
)


def test_worker_refuses_a_store_that_is_not_postgres(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from codeact.cli import app

    result = CliRunner().invoke(app, ["worker", "--db", str(tmp_path / "s.db"), "--agent", "dbos_agent:build"])
    assert result.exit_code == 2
    assert "postgresql://" in result.output and "--db" in result.output


def test_worker_on_an_unreachable_database_ends_with_one_error_line() -> None:
    import socket

    from typer.testing import CliRunner

    from codeact.cli import app

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://nobody@127.0.0.1:{port}/nothing?connect_timeout=5"
    result = CliRunner().invoke(app, ["worker", "--db", url, "--agent", "dbos_agent:build"])
    assert result.exit_code == 1, result.output
    assert "the worker could not start" in result.output and "Traceback" not in result.output


def test_names_are_derived_from_the_run_key() -> None:
    assert workflow_id("a/b", "u", "s 1", "m:1") == "codeact/a%2Fb/u/s%201/m%3A1"
    assert partition_key("a", "u", "s") == "a/u/s"
    assert workflow_id("a", "u/v", "s", "k") != workflow_id("a", "u", "v/s", "k")


@pytest.mark.slow
def test_scenario_on_two_workers_with_kills_approvals_and_completions(tmp_path: Path, postgres_url: str) -> None:  # noqa: F811
    from dbos import DBOSClient

    url = postgres_url
    _query(url, "SELECT 1")
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(LEDGER_DDL)
    fleet = Fleet(url, tmp_path)
    dbos_client = None
    started = time.monotonic()
    try:
        first = fleet.start("asyncio")
        second = fleet.start("trio")
        dbos_client = DBOSClient(system_database_url=url, application_name="codeact")
        client = CodeActClient(dbos_client, app_name=APP)
        deadline = time.monotonic() + DEADLINE
        runs = [client.run(USER, f"s{i}", f"task {i}", run_key=f"msg-{i}") for i in range(SESSIONS)]

        # 1. a worker dies inside a tool (s0's first note: its side effect is in the ledger)
        victim = _barrier(url, "s0:note", deadline)
        assert victim in (first, second)
        fleet.start(fleet.kill(victim))  # a replacement; the survivor or it recovers the runs
        results = [_result(h, deadline) for h in runs]
        for i, r in enumerate(results):
            kind = kind_of(i)
            if kind == "plain":
                assert (r.status, r.text) == ("done", expected(i)), (i, r)
            else:
                assert r.status == "paused", (i, r)
                assert r.paused[0].kind == ("completion" if kind == "long" else "confirmation"), (i, r)

        # 2. an approver in another process approves and completes; a worker dies inside an
        #    approved tool (s1's payment)
        approver = subprocess.Popen(
            [sys.executable, "-c", APPROVER, url, str(SESSIONS), str(DEADLINE)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(url),
            cwd=tmp_path,
        )
        victim2 = _barrier(url, "s1:pay", time.monotonic() + DEADLINE)
        assert victim2 not in fleet.killed
        fleet.start(fleet.kill(victim2))
        try:
            out, err = approver.communicate(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            approver.kill()
            out, err = approver.communicate()
            raise AssertionError(f"the approver timed out: {err.decode()[-2000:]}\n{_diagnose(url)}") from None
        assert approver.returncode == 0, err.decode()[-3000:]
        report = json.loads(out.decode().strip().splitlines()[-1])
        finals = {sid: RunResult.model_validate(r) for sid, r in report["results"].items()}
        elapsed = time.monotonic() - started

        # every session reached the result of an uninterrupted run
        for i in range(SESSIONS):
            if (finals[f"s{i}"].status, finals[f"s{i}"].text) != ("done", expected(i)):
                raise AssertionError(f"s{i}: {finals[f's{i}']!r}\n{_diagnose_session(url, f's{i}')}\n{fleet.logs()}")

        # the ledger: each call ran once, but for the calls in flight on a killed worker
        rows = _query(url, "SELECT call_key, pid, session, tool FROM ledger ORDER BY id")
        by_call: dict[str, list[int]] = {}
        for call_key, pid, _, _ in rows:
            by_call.setdefault(call_key, []).append(pid)
        for call_key, pids in by_call.items():
            assert all(p in fleet.killed for p in pids[:-1]), (call_key, pids)  # only a killed run ran again
        ran_twice = {k for k, pids in by_call.items() if len(pids) > 1}
        blocked = {k for k, _, s, t in rows if (s, t) in (("s0", "note"), ("s1", "pay"))}
        s0_note_a = next(k for k, _, s, t in rows if (s, t) == ("s0", "note"))
        s1_pay = next(k for k, _, s, t in rows if (s, t) == ("s1", "pay"))
        assert {s0_note_a, s1_pay} <= ran_twice  # in doubt: the default "rerun"
        assert blocked
        expected_calls = sum(2 if kind_of(i) != "both" else 3 for i in range(SESSIONS))
        assert len(by_call) == expected_calls
        backends = {fleet.backend(pid) for pids in by_call.values() for pid in pids}
        assert backends == {"asyncio", "trio"}

        # no message stored twice
        stored = _session_events(url)
        for i in range(SESSIONS):
            events = stored[f"s{i}"]
            assert len({e.id for e in events}) == len(events)
            users = [e for e in events if e.author == "user"]
            texts = Counter(e.text for e in users if e.text)
            assert texts == Counter({f"task {i}": 1}), (i, texts)
            responses = Counter(
                p.function_response.id for e in users for p in e.content.parts if p.function_response is not None
            )
            assert all(n == 1 for n in responses.values()), (i, responses)
            assert events[-1].text == expected(i)

        # re-enqueuing every run key changes nothing
        ledger_before, events_before = len(rows), {k: len(v) for k, v in stored.items()}
        again = [_result(client.run(USER, f"s{i}", f"task {i}", run_key=f"msg-{i}"), deadline) for i in range(SESSIONS)]
        assert [r.model_dump() for r in again] == [r.model_dump() for r in results]
        for sid, keys in report["keys"].items():
            for kind, key in keys:
                if kind == "confirmation":
                    handle = client.approve(USER, sid, key)
                else:
                    handle = client.complete(USER, sid, key, "frame-" + sid[1:])
                assert _result(handle, deadline).status != "failed"
        assert len(_query(url, "SELECT 1 FROM ledger")) == ledger_before
        assert {k: len(v) for k, v in _session_events(url).items()} == events_before
        assert _pending_workflows(url) == 0

        # one workflow per session at a time: each started after the one before it ended
        flows = dbos_client.list_workflows(queue_name="codeact-codeact", load_input=False, load_output=False)
        by_session: dict[str, list[Any]] = {}
        for flow in flows:
            by_session.setdefault(flow.queue_partition_key, []).append(flow)
        assert len(by_session) == SESSIONS
        for key, session_flows in by_session.items():
            session_flows.sort(key=lambda f: f.dequeued_at)
            for before, after in itertools.pairwise(session_flows):
                assert after.dequeued_at >= before.completed_at, (key, before.workflow_id, after.workflow_id)
        print(
            f"\nDBOS scenario: {SESSIONS} sessions, {len(by_call)} tool calls, {len(ran_twice)} ran twice "
            f"(in flight on the 2 killed workers), {len(fleet.procs)} workers started, {elapsed:.1f} s"
        )

        # clean shutdown on SIGTERM
        for pid, (code, text) in fleet.stop_all().items():
            assert code == 0 and "stopped" in text, (pid, code, text)
    finally:
        fleet.kill_all()
        if dbos_client is not None:
            dbos_client.destroy()


def _session_events(url: str) -> dict[str, list[Any]]:
    from codeact.sessions import PostgresSessionService

    async def read() -> dict[str, list[Any]]:
        with PostgresSessionService(url) as service:
            out = {}
            for i in range(SESSIONS):
                session = await service.get_session(app_name=APP, user_id=USER, session_id=f"s{i}")
                assert session is not None
                out[f"s{i}"] = session.events
            return out

    return anyio.run(read)


def _diagnose(url: str) -> str:
    """The unfinished workflows, the registered executors and the turn slots (for a failure)."""
    flows = _query(
        url,
        "SELECT workflow_uuid, name, status, executor_id, recovery_attempts FROM dbos.workflow_status "
        "WHERE status <> 'SUCCESS' ORDER BY created_at",
    )
    executors = _query(url, "SELECT executor_id, pid FROM codeact_dbos_executors")
    turns = _query(url, "SELECT session_id, data FROM codeact_turns WHERE data <> ''")
    for sid, _ in turns:
        flows += _query(
            url,
            "SELECT workflow_uuid, status, executor_id, recovery_attempts, output FROM dbos.workflow_status "
            "WHERE workflow_uuid LIKE %s ORDER BY created_at",
            f"codeact/codeact/u/{sid}/%",
        )
    return f"workflows: {flows}\nexecutors: {executors}\nturns: {[(s, (d or '')[:300]) for s, d in turns]}"


def _diagnose_session(url: str, session: str) -> str:
    """One session's workflows, ledger rows, stored events and turn record, then ``_diagnose``."""
    flows = _query(
        url,
        "SELECT workflow_uuid, status, executor_id, recovery_attempts, created_at, updated_at "
        "FROM dbos.workflow_status WHERE workflow_uuid LIKE %s ORDER BY created_at",
        f"codeact/codeact/u/{session}/%",
    )
    ledger = _query(url, "SELECT call_key, tool, pid, at FROM ledger WHERE session = %s ORDER BY id", session)
    events = [
        (e.author, (e.custom_metadata or {}).get("codeact_run_key"), e.text[:60], bool(e.long_running_tool_ids))
        for e in _session_events(url).get(session, [])
    ]
    rows = _query(url, "SELECT data FROM codeact_turns WHERE session_id = %s AND data <> ''", session)
    fields = ("status", "turn", "run_key", "claim", "pending", "next_pos")
    turn = {k: json.loads(rows[0][0]).get(k) for k in fields} if rows else None
    return f"{session} workflows: {flows}\nledger: {ledger}\nevents: {events}\nturn: {turn}\n{_diagnose(url)}"


def _pending_workflows(url: str) -> int:
    (row,) = _query(url, "SELECT count(*) FROM dbos.workflow_status WHERE status NOT IN ('SUCCESS')")
    return int(row[0])


@pytest.mark.slow
def test_sigterm_leaves_a_run_in_flight_to_another_worker(tmp_path: Path, postgres_url: str) -> None:  # noqa: F811
    import psycopg
    from dbos import DBOSClient

    url = postgres_url
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(LEDGER_DDL)
    fleet = Fleet(url, tmp_path)
    dbos_client = None
    try:
        first = fleet.start("trio", "--grace", "1")
        dbos_client = DBOSClient(system_database_url=url, application_name="codeact")
        client = CodeActClient(dbos_client, app_name=APP)
        handle = client.run(USER, "s0", "task 0", run_key="msg-0")
        deadline = time.monotonic() + DEADLINE
        assert _barrier(url, "s0:note", deadline) == first  # blocked inside the tool
        proc, _, out = fleet.procs[first]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=DEADLINE) == 0
        assert "1 run(s) left for recovery" in out.read_text()
        fleet.killed.add(first)  # gone: not stopped again below
        fleet.start("asyncio")
        result = _result(handle, deadline)
        assert (result.status, result.text) == ("done", expected(0))
        rows = _query(url, "SELECT arg, pid FROM ledger ORDER BY id")
        assert [arg for arg, _ in rows] == ["s0-a", "s0-a", "s0-b"]  # the call in flight ran again (rerun)
        assert rows[0][1] == first and rows[1][1] != first
        for pid, (code, text) in fleet.stop_all().items():
            assert code == 0 and "stopped" in text, (pid, code, text)
    finally:
        fleet.kill_all()
        if dbos_client is not None:
            dbos_client.destroy()
