"""Agent runs on DBOS workers beside in-process runs (issue 25), on one scripted workload.

Each run is one session: the scripted model writes two scripts (a tool call and an
observation, then a tool call and a final result), so a run is two model turns and two
journaled tool calls. Measured side by side in one run:

- per run, one after another: ``Runner`` in process on SQLite, ``Runner`` in process on
  PostgreSQL, and a DBOS worker (``codeact worker``, one process) with the run enqueued by
  ``CodeActClient`` and its result awaited; ratios to SQLite;
- throughput: M runs enqueued at once on 1, 2 and 4 worker processes (concurrency 4 each;
  workers are added between the figures).

PostgreSQL is a throwaway local server (tests/_postgres.py: ``initdb``/``pg_ctl``), or
``--postgres URL`` (an empty database). Needs ``codeact[dbos,postgres]``.

    python benchmarks/scale_out.py --quick   # 10 runs per store, 24 per throughput figure
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from codeact import CodeActAgent, FunctionTool, MontyRuntime, Runner, ScriptedModel, SqliteSessionService
from codeact.models import LlmRequest
from codeact.sessions import BaseSessionService

HERE = Path(__file__).resolve().parent
_WORKER = [sys.executable, "-m", "codeact.cli", "worker", "--app", "bench", "--agent", "scale_out:build_agent"]
_WORKER += ["--concurrency", "4"]
POLL = 0.02  # seconds: the workers' queue polling and the client's result polling (--poll)


def _reply(request: LlmRequest) -> str:
    turns = sum(1 for c in request.contents if c.role == "model")
    if turns == 0:
        return '```python\na = call_tool("lookup", {"key": "x"})\n{"type": "observation", "value": a}\n```'
    return '```python\nb = call_tool("lookup", {"key": "y"})\n{"type": "final_result", "value": b}\n```'


def build_agent() -> CodeActAgent:
    """The agent of every run (``codeact worker --agent scale_out:build_agent``)."""

    def lookup(key: str) -> str:
        """Looks a key up."""
        return f"value of {key}"

    return CodeActAgent(name="bench", model=ScriptedModel(_reply), runtime=MontyRuntime(), tools=[FunctionTool(lookup)])


def _in_process(make: Any, runs: int, tag: str) -> float:
    """Seconds per run, runs one after another on one Runner."""

    async def go() -> float:
        service: BaseSessionService = make()
        runner = Runner(app_name="bench", agent=build_agent(), session_service=service, auto_create_session=True)
        async for _ in runner.run_async(user_id="u", session_id=f"{tag}-warm", new_message="go", run_key="warm"):
            pass
        started = time.perf_counter()
        for i in range(runs):
            events = [
                e
                async for e in runner.run_async(
                    user_id="u", session_id=f"{tag}-{i}", new_message="go", run_key=f"{tag}-{i}"
                )
            ]
            assert events[-1].text == "value of y", events[-1]
        elapsed = time.perf_counter() - started
        close = getattr(service, "close", None)
        if close is not None:
            close()
        return elapsed / runs

    return anyio.run(go)


class _Workers:
    def __init__(self, url: str, folder: Path) -> None:
        self.url, self.folder = url, folder
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, n: int, backend: str = "asyncio") -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), *filter(None, [env.get("PYTHONPATH")])])
        outs = []
        for _ in range(n):
            out = self.folder / f"worker-{len(self.procs)}.out"
            with out.open("wb") as stdout:
                self.procs.append(
                    subprocess.Popen(
                        [*_WORKER, "--db", self.url, "--backend", backend, "--poll", str(POLL)],
                        stdout=stdout,
                        stderr=subprocess.DEVNULL,
                        env=env,
                        cwd=self.folder,
                    )
                )
            outs.append(out)
            deadline = time.monotonic() + 120
            while "ready" not in out.read_text():
                if self.procs[-1].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker did not start: {out.read_text()}")
                time.sleep(0.02)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            proc.wait(timeout=120)
        self.procs = []


def main(argv: list[str] | None = None) -> int:
    global POLL
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer runs (CI)")
    parser.add_argument("--postgres", help="a postgresql:// URL of an empty database (default: a throwaway server)")
    parser.add_argument("--poll", type=float, default=POLL, help="seconds between two looks at the queue")
    args = parser.parse_args(argv)
    runs, burst = (10, 24) if args.quick else (100, 200)
    POLL = args.poll

    from dbos import DBOSClient

    from codeact.integrations.dbos import CodeActClient
    from codeact.sessions import PostgresSessionService

    server = None
    if args.postgres:
        url = args.postgres
    else:
        sys.path.insert(0, str(HERE.parent / "tests"))
        from _postgres import PostgresServer, _bin_dir  # type: ignore[import-not-found]

        bin_dir = _bin_dir()
        if bin_dir is None:
            print("no PostgreSQL binaries (initdb): apt-get install postgresql, or pass --postgres URL")
            return 2
        server = PostgresServer(bin_dir)
        url = server.new_database()
    try:
        with tempfile.TemporaryDirectory() as folder:
            per_run: dict[str, float] = {}
            per_run["in-process SQLite"] = _in_process(
                lambda: SqliteSessionService(Path(folder) / "bench.db"), runs, "sqlite"
            )
            per_run["in-process PostgreSQL"] = _in_process(lambda: PostgresSessionService(url), runs, "pg")
            workers = _Workers(url, Path(folder))
            client = None
            try:
                workers.start(1)
                client = CodeActClient(
                    DBOSClient(system_database_url=url, application_name="codeact"), app_name="bench"
                )
                _dbos_sequential(client, 3, "warm")
                per_run["DBOS, 1 worker"] = _dbos_sequential(client, runs, "seq")
                throughput: dict[int, float] = {}
                for n in (1, 2, 4):
                    if len(workers.procs) < n:
                        workers.start(n - len(workers.procs))
                    throughput[n] = _dbos_burst(client, burst, f"burst{n}")
            finally:
                workers.stop()
                if client is not None:
                    client.client.destroy()
    finally:
        if server is not None:
            server.stop()

    base = per_run["in-process SQLite"]
    print(f"\nper run ({runs} runs one after another; 2 model turns, 2 journaled tool calls each)")
    print(f"{'':26} {'ms/run':>8} {'x SQLite':>9}")
    for name, seconds in per_run.items():
        print(f"{name:26} {seconds * 1000:8.1f} {seconds / base:8.2f}x")
    added = (per_run["DBOS, 1 worker"] - per_run["in-process PostgreSQL"]) * 1000
    print(f"DBOS adds {added:.0f} ms per run to in-process PostgreSQL (queue polling every {POLL * 1000:.0f} ms)")
    print(f"\nthroughput ({burst} runs enqueued at once, worker concurrency 4, {os.cpu_count()} cores)")
    print(f"{'workers':>8} {'runs/s':>8} {'x 1 worker':>11}")
    for n, rate in throughput.items():
        print(f"{n:8} {rate:8.1f} {rate / throughput[1]:10.2f}x")
    return 0


def _dbos_sequential(client: Any, runs: int, tag: str) -> float:
    started = time.perf_counter()
    for i in range(runs):
        result = client.run("u", f"{tag}-{i}", "go", run_key=f"{tag}-{i}").result(polling_interval=POLL)
        assert result.text == "value of y", result
    return (time.perf_counter() - started) / runs


def _dbos_burst(client: Any, runs: int, tag: str) -> float:
    started = time.perf_counter()
    handles = [client.run("u", f"{tag}-{i}", "go", run_key=f"{tag}-{i}") for i in range(runs)]
    for handle in handles:
        assert handle.result(polling_interval=POLL).text == "value of y"
    return runs / (time.perf_counter() - started)


if __name__ == "__main__":
    sys.exit(main())
