"""Agent-loop overhead: what a CodeAct turn and a tool call cost beyond the interpreter.

One run prints one table, all figures measured side by side in this process:

* per-turn overhead of ``CodeActAgent`` (ScriptedModel, in-memory session) for scripts
  with 0, 1 and 10 tool calls, beside the bare ``MontyRuntime`` cost of the same scripts;
* the added cost per tool call (both checkpoints included);
* the same with ``SqliteSessionService``, with the bytes the database grows per tool call;
* the worst delay of a 5 ms heartbeat task while a ~1 s CPU-bound script runs.

Targets (issue 3): <= 200 us per turn beyond the runtime, heartbeat worst delay <= 10 ms.

Durability (issue 9, SPEC §5 v2; the "before" column holds 0.1.0's figures from the issue):

* per inline tool call through the agent: <= 20 us (in-memory store), <= 150 us (SQLite);
  also shown with ``RunConfig(emit_tool_events=True)`` (issue 11: why those events are opt-in);
* SQLite storage per inline call: <= 300 B + the JSON size of arguments and result, the same
  with a 20,000-string heap as with an empty one;
* 10,000 calls take <= 11x the time of 1,000, and memory stays flat;
* recovery replaying 1,000 journaled calls: <= 50 ms.

Beside the peers (issues 21 and 54), one command and one run: each peer runs in its own venv,
created by this benchmark from PyPI on first use (``_peers.py``; ``--quick`` only uses venvs
that exist; ``--no-peers`` skips them), as a child process printing JSON: smolagents
``CodeAgent`` (per unrecorded tool call; goal: codeact's call, memory, below it) and
``ToolCallingAgent`` (marginal turn; goal: codeact's at most it) in ``_smolagents_bench.py``;
pydantic-ai ``Agent`` (marginal tool-calling turn), pydantic-ai-harness ``CodeMode`` (per tool
call from code) and google-adk ``LlmAgent`` (marginal tool-calling turn) in
``_agent_peers.py``. ``--busy 2`` measures the comparison again with two busy-loop processes.

Run: ``python benchmarks/agent.py`` (``--quick`` for the CI smoke run, ``--json PATH``;
``--before-tree PATH``: also measure another codeact tree, for example 0.1.0's ``python/``
folder with a built ``_monty``, in a child process of the same run, for a before column
measured on this machine beside the issue's figures).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _peers import DEFAULT_ROOT, peer_python

from codeact import (
    Call,
    CodeActAgent,
    Content,
    InMemorySessionService,
    MontyRuntime,
    Part,
    ResourceLimits,
    ResumeValue,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.models import BaseLlm, LlmResponse


def script_with_calls(n: int) -> str:
    body = "".join(f'v{i} = call_tool("inc", {{"x": {i}}})\n' for i in range(n))
    total = " + ".join(f"v{i}" for i in range(n)) or "0"
    return f'{body}{{"type": "final_result", "value": {total}}}'


def inc(x: int) -> int:
    """Adds one.

    Args:
        x: a number.
    """
    return x + 1


def bare_runtime_us(runtime: MontyRuntime, script: str, repeats: int) -> float:
    """Median microseconds to run ``script`` on the bare runtime, tools answered in place
    (with one dump per call, as the agent does)."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step = runtime.start(script, "agent.py")
        while isinstance(step, Call):
            step.call.dump()
            step = step.call.resume(ResumeValue(step.call.keyword_args["x"] + 1))
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


async def agent_turn_us(calls: int, repeats: int, service_factory: Any) -> float:
    """Median microseconds of one single-turn agent run (fresh session each time)."""
    reply = f"```python\n{script_with_calls(calls)}\n```"
    model = ScriptedModel(lambda request: reply)
    agent = CodeActAgent(name="bench", model=model, runtime=MontyRuntime(), tools=[inc])
    service, _ = service_factory()
    runner = Runner(app_name="bench", agent=agent, session_service=service)
    samples = []
    for i in range(repeats):
        await service.create_session(app_name="bench", user_id="u", session_id=f"s{i}")
        t0 = time.perf_counter()
        events = [e async for e in runner.run_async(user_id="u", session_id=f"s{i}", new_message="go")]
        samples.append(time.perf_counter() - t0)
        assert events[-1].text == str(sum(range(1, calls + 1))), events[-1]
    service.close()
    return statistics.median(samples) * 1e6


async def heartbeat_worst_ms(iterations: int) -> tuple[float, float]:
    """Worst extra delay of a 5 ms heartbeat while a CPU-bound script runs, and the
    script's wall time (s)."""
    script = f"t = 0\nfor i in range({iterations}):\n    t += i\n" + '{"type": "final_result", "value": t}'
    agent = CodeActAgent(
        name="cpu",
        model=ScriptedModel([f"```python\n{script}\n```"]),
        runtime=MontyRuntime(ResourceLimits(max_duration=60)),
    )
    runner = Runner(app_name="hb", agent=agent, auto_create_session=True)
    worst = 0.0
    done = False

    async def heartbeat() -> None:
        nonlocal worst
        while not done:
            t0 = time.perf_counter()
            await anyio.sleep(0.005)
            worst = max(worst, time.perf_counter() - t0 - 0.005)

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        async for _ in runner.run_async(user_id="u", session_id="s", new_message="go"):
            pass
        done = True
    return worst * 1e3, time.perf_counter() - t0


TYPICAL_SCRIPT = """from pathlib import Path
lines = Path("/data/iris.csv").read_text().strip().splitlines()
header = lines[0].split(",")
petal = {}
for line in lines[1:]:
    row = dict(zip(header, line.split(",")))
    petal.setdefault(row["species"], []).append(float(row["petal_length"]))
summary = {}
for species in sorted(petal):
    stats = call_tool("describe", {"values": petal[species]})
    summary[species] = stats
print(f"read {len(lines) - 1} rows")
{"type": "observation", "value": summary}"""


def subset_check_us(repeats: int) -> float:
    """Median microseconds of the static subset check of a fresh (uncached) 13-line script:
    the cost ``MontyRuntime.start`` adds to each new model-written script."""
    from codeact.runtime._check import check_script

    samples = []
    for i in range(repeats):
        script = TYPICAL_SCRIPT + f"\n# {i}"
        t0 = time.perf_counter()
        check_script(script)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


LOOP_SCRIPT = """{heap}
total = 0
for i in range({n}):
    total += call_tool("inc", {{"x": i}})
{{"type": "final_result", "value": total}}"""

HEAP = "heap = [str(i) for i in range(20000)]"


def loop_script(n: int, heap: bool = False) -> str:
    return LOOP_SCRIPT.format(n=n, heap=HEAP if heap else "")


async def loop_run_s(service: Any, n: int, sid: str, *, heap: bool = False, tool_events: bool = False) -> float:
    """Seconds of one agent run whose script makes ``n`` inline calls in a loop."""
    reply = f"```python\n{loop_script(n, heap)}\n```"
    agent = CodeActAgent(
        name="bench", model=ScriptedModel([reply]), runtime=MontyRuntime(), tools=[inc], max_tool_calls=None
    )
    runner = Runner(app_name="bench", agent=agent, session_service=service)
    await service.create_session(app_name="bench", user_id="u", session_id=sid)
    t0 = time.perf_counter()
    config = RunConfig(emit_tool_events=tool_events)
    events = [e async for e in runner.run_async(user_id="u", session_id=sid, new_message="go", run_config=config)]
    elapsed = time.perf_counter() - t0
    assert events[-1].text == str(sum(range(1, n + 1))), events[-1]
    return elapsed


def bare_loop_s(n: int) -> float:
    runtime = MontyRuntime()
    t0 = time.perf_counter()
    step = runtime.start(loop_script(n), "agent.py")
    while isinstance(step, Call):
        step = step.call.resume(ResumeValue(step.call.keyword_args["x"] + 1))
    return time.perf_counter() - t0


async def per_call_us(service_factory: Any, repeats: int, *, tool_events: bool = False) -> float:
    """Median microseconds per inline call through the agent: (run of 1,000 calls - run of
    100 calls) / 900, so the turn's fixed cost cancels out. ``tool_events``: with
    ``RunConfig(emit_tool_events=True)`` (two more events stored per call)."""
    samples = []
    for i in range(repeats):
        service, _ = service_factory()
        with service:
            big = await loop_run_s(service, 1000, f"a{i}", tool_events=tool_events)
            small = await loop_run_s(service, 100, f"b{i}", tool_events=tool_events)
        samples.append((big - small) / 900)
    return statistics.median(samples) * 1e6


async def storage_per_call(folder: Path, heap: bool) -> tuple[float, float]:
    """Bytes the SQLite file grows per inline call (runs of 1,000 and 100 calls on fresh
    files, measured after close), and the JSON size of one call's arguments and result."""
    sizes = {}
    for n in (100, 1000):
        path = folder / f"grow-{heap}-{n}.db"
        with SqliteSessionService(path) as service:
            await loop_run_s(service, n, "s", heap=heap)
        sizes[n] = path.stat().st_size
    payload = len(json.dumps({"x": 500})) + len(json.dumps(501))
    return (sizes[1000] - sizes[100]) / 900, payload


async def scaling(folder: Path, quick: bool) -> dict[str, float]:
    """Time of 10,000 calls over time of 1,000 (SQLite), and the RSS growth (bytes) of a
    second 10,000-call run over the first (flat memory: no growth per call)."""
    import resource

    with SqliteSessionService(folder / "scale.db") as service:
        small = await loop_run_s(service, 1000, "one")
        big_n = 10_000
        big = await loop_run_s(service, big_n, "ten")
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        await loop_run_s(service, big_n if not quick else 5_000, "again")
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"ratio_10k_1k": big / small, "rss_growth_kib": float(rss1 - rss0)}


class _Crash(BaseException):
    pass


async def recovery_ms(folder: Path, calls: int = 1000) -> float:
    """Milliseconds of a recovery run that replays ``calls`` journaled calls (the turn
    crashed after its last outcome was stored) and finishes the script."""

    class CrashAtEnd(SqliteSessionService):
        outcomes = 0

        async def append_journal(self, session: Any, turn: str, records: Any, **kwargs: Any) -> None:
            await super().append_journal(session, turn, records, **kwargs)
            self.outcomes += sum(1 for r in records if r.kind == "outcome")
            if self.outcomes == calls:
                raise _Crash

    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "recovery.db"
    with CrashAtEnd(db) as service:
        try:
            await loop_run_s(service, calls, "s")
        except _Crash:
            pass
    with SqliteSessionService(db) as service:
        agent = CodeActAgent(
            name="bench", model=ScriptedModel([]), runtime=MontyRuntime(), tools=[inc], max_tool_calls=None
        )
        runner = Runner(app_name="bench", agent=agent, session_service=service)
        t0 = time.perf_counter()
        events = [e async for e in runner.run_async(user_id="u", session_id="s")]
        elapsed = time.perf_counter() - t0
    assert events[-1].text == str(sum(range(1, calls + 1))), events[-1]
    return elapsed * 1e3


OBSERVE_SCRIPT = 'v = call_tool("inc", {"x": 1})\n{"type": "observation", "value": v}'
FINAL_SCRIPT = 'v = call_tool("inc", {"x": 1})\n{"type": "final_result", "value": v}'


async def _run_once(runner: Any, service: Any, sid: str) -> float:
    await service.create_session(app_name="bench", user_id="u", session_id=sid)
    t0 = time.perf_counter()
    async for _ in runner.run_async(user_id="u", session_id=sid, new_message="go"):
        pass
    return time.perf_counter() - t0


class ReplayModel(BaseLlm):
    """The peer column's kind of fake model: the reply for the turn the request is at, nothing
    recorded (``ScriptedModel`` deep-copies every request for the tests to read, which the
    smolagents side's ``Scripted`` model does not do either). Each reply's text is new, as a
    model's is: a comment line with a serial number follows the reply's first line (the
    fence's opening line in every reply here: the comment is the script's first line), so no
    cache keyed by script text (codeact's parse cache, before issue 21's native parse, served
    the replayed script of every run after the first) hides a cost smolagents pays each time."""

    name = "replay"

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.served = 0

    async def generate_content(self, request: Any) -> LlmResponse:
        """The reply for the request's turn (the number of model messages so far)."""
        self.served += 1
        text = self.replies[sum(1 for c in request.contents if c.role == "model")]
        text = text.replace("\n", f"\n# reply {self.served}\n", 1)
        return LlmResponse(content=Content(role="model", parts=[Part(text=text)]), finish_reason="stop")


async def slope_us(small: list[str], big: list[str], steps: int, repeats: int, service_factory: Any) -> float:
    """Median over ``repeats`` alternating pairs of (a run whose model replies ``big`` - a run
    whose model replies ``small``) / ``steps``, in microseconds (fresh session per run, one
    warm-up pair)."""
    service, _ = service_factory()
    runners = []
    for replies in (small, big):
        agent = CodeActAgent(
            name="bench", model=ReplayModel(replies), runtime=MontyRuntime(), tools=[inc], max_tool_calls=None
        )
        runners.append(Runner(app_name="bench", agent=agent, session_service=service))
    samples = []
    with service:
        for i in range(repeats + 1):
            a = await _run_once(runners[0], service, f"small{i}")
            b = await _run_once(runners[1], service, f"big{i}")
            if i:
                samples.append((b - a) / steps)
    return statistics.median(samples) * 1e6


def unrolled(n: int) -> str:
    """``n`` tool calls, one a line, then the first result as the final result (the shape of
    ``_smolagents_bench.code_reply``)."""
    body = "".join(f'v{i} = call_tool("inc", {{"x": {i}}})\n' for i in range(n))
    return body + '{"type": "final_result", "value": v0}'


def fence(script: str) -> str:
    return f"```python\n{script}\n```"


async def peer_rows(repeats: int, folder: Path) -> dict[str, float]:
    """The workloads of the smolagents column (``_smolagents_bench.py``), on codeact: the cost
    per inline tool call (a 1-call and a 501-call unrolled script, journal on) in memory and on
    SQLite (``synchronous=NORMAL``), and the marginal turn (a 2-turn and a 12-turn run, each
    turn one script with one call)."""
    many, turns = 501, 12
    one, big = [fence(unrolled(1))], [fence(unrolled(many))]
    steps = [fence(OBSERVE_SCRIPT)] * (turns - 1) + [fence(FINAL_SCRIPT)]
    return {
        "per_call_memory_us": await slope_us(one, big, many - 1, repeats, memory_store),
        "per_call_sqlite_us": await slope_us(one, big, many - 1, max(3, repeats // 2), sqlite_store_factory(folder)),
        "marginal_turn_ms": await slope_us(steps[-2:], steps, turns - 2, repeats, memory_store) / 1e3,
    }


def smolagents_column(quick: bool, python: Path | None, site: Path | None) -> dict[str, Any] | str:
    """The smolagents figures from ``_smolagents_bench.py`` in a child process (``python``,
    with ``site`` first on its path when given), or why the column is skipped."""
    import subprocess

    exe = str(python or sys.executable)
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    try:
        probe = subprocess.run([exe, "-c", "import smolagents"], env=env, capture_output=True, text=True)
    except OSError as exc:  # no such interpreter
        return f"smolagents column skipped: cannot run {exe} ({exc.strerror})"
    if probe.returncode != 0:
        return f"smolagents column skipped: smolagents not importable by {exe}" + (f" with {site}" if site else "")
    helper = Path(__file__).with_name("_smolagents_bench.py")
    proc = subprocess.run(
        [exe, str(helper), *(["--quick"] if quick else [])], env=env, capture_output=True, text=True, timeout=1800
    )
    if proc.returncode != 0:
        return f"smolagents column failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}"
    figures: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures


def other_peer_column(key: str, quick: bool, python: Path) -> dict[str, Any] | str:
    """One of the other peers' figures (``_agent_peers.py key`` run by its venv's ``python``),
    or why it failed."""
    import subprocess

    helper = Path(__file__).with_name("_agent_peers.py")
    args = [str(python), str(helper), key, *(["--quick"] if quick else [])]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return f"{key} column failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}"
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


def peer_columns(args: argparse.Namespace) -> dict[str, dict[str, Any] | str]:
    """Every peer's column, each in its own venv (``_peers.py``: created from PyPI on first
    use, or only used when it exists with ``--quick``); smolagents through
    ``--smolagents-python`` / ``--smolagents-site`` when given."""
    if args.no_peers:
        return {}
    create = not args.quick
    columns: dict[str, dict[str, Any] | str] = {}
    smol: Path | str | None = args.smolagents_python
    if smol is None and args.smolagents_site is None:
        smol = peer_python("smolagents", args.venvs, create=create)
    columns["smolagents"] = smol if isinstance(smol, str) else smolagents_column(args.quick, smol, args.smolagents_site)
    for key in ("pydantic_ai", "adk"):
        python = peer_python(key, args.venvs, create=create)
        columns[key] = python if isinstance(python, str) else other_peer_column(key, args.quick, python)
    return columns


def render_peers(ours: dict[str, float], peers: dict[str, dict[str, Any] | str]) -> None:
    """The side-by-side table: codeact's rows beside each peer present, with the goals of issue
    54 (a tool call below ``CodeAgent``'s unrecorded one; a marginal turn at most
    ``ToolCallingAgent``'s)."""
    print()
    print("beside the peers (same run, each peer in its own venv; the peers record nothing per call):")
    for key, column in peers.items():
        if isinstance(column, str):
            print(f"  {key}: {column}")
    smol = peers.get("smolagents")
    smol = smol if isinstance(smol, dict) else {}
    pyd = peers.get("pydantic_ai")
    pyd = pyd if isinstance(pyd, dict) else {}
    adk = peers.get("adk")
    adk = adk if isinstance(adk, dict) else {}
    sv, pv, av = smol.get("version", "-"), pyd.get("version", "-"), adk.get("version", "-")
    hv = pyd.get("harness_version", "-")
    print(f"{'':<72}{'codeact':>12}{'peer':>12}{'ratio':>9}  goal")
    turn = ours["marginal_turn_ms"]
    rows = [
        (
            "per tool call, memory, journal on",
            ours["per_call_memory_us"],
            "us",
            f"smolagents {sv} CodeAgent",
            smol.get("code_per_call_us"),
            1.0,
            "<",
        ),
        (
            "per tool call, sqlite NORMAL",
            ours["per_call_sqlite_us"],
            "us",
            f"smolagents {sv} CodeAgent",
            smol.get("code_per_call_us"),
            None,
            "",
        ),
        (
            "per tool call, memory",
            ours["per_call_memory_us"],
            "us",
            f"pydantic-ai-harness {hv} CodeMode",
            pyd.get("code_mode_per_call_us"),
            None,
            "",
        ),
        (
            "marginal turn, memory",
            turn,
            "ms",
            f"smolagents {sv} CodeAgent",
            smol.get("code_marginal_turn_ms"),
            None,
            "",
        ),
        (
            "marginal turn, memory",
            turn,
            "ms",
            f"smolagents {sv} ToolCallingAgent",
            smol.get("tool_calling_marginal_turn_ms"),
            1.0,
            "<=",
        ),
        (
            "marginal turn, memory",
            turn,
            "ms",
            f"pydantic-ai {pv} Agent, tool calls",
            pyd.get("tool_calling_marginal_turn_ms"),
            None,
            "",
        ),
        (
            "marginal turn, memory",
            turn,
            "ms",
            f"google-adk {av} LlmAgent, tool calls",
            adk.get("tool_calling_marginal_turn_ms"),
            None,
            "",
        ),
    ]
    for label, value, unit, peer, theirs, goal, op in rows:
        label = f"{label} vs {peer}"
        if not isinstance(theirs, (int, float)):
            print(f"{label:<72}{value:>9.2f} {unit}{'-':>12}")
            continue
        ratio = value / theirs if theirs > 0 else float("inf")
        verdict = ""
        if goal is not None:
            ok = ratio < goal if op == "<" else ratio <= goal
            verdict = f"{'PASS' if ok else 'MISS'} ({op} {goal:g}x)"
        print(f"{label:<72}{value:>9.2f} {unit}{theirs:>9.2f} {unit}{ratio:>8.2f}x  {verdict}")
    print(f"{'codeact sqlite / memory, per call':<72}{ours['per_call_sqlite_us'] / ours['per_call_memory_us']:>9.2f} x")


class BusyLoops:
    """``n`` processes spinning on a CPU each while in the ``with`` block (the issue's loaded
    machine: two busy-loop processes on 2 cores)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[Any] = []

    def __enter__(self) -> BusyLoops:
        import subprocess

        spin = "while True: pass"
        self.procs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def memory_store() -> tuple[Any, Any]:
    return InMemorySessionService(), lambda: 0


def sqlite_store_factory(folder: Path) -> Any:
    counter = iter(range(10**6))

    def make() -> tuple[Any, Any]:
        path = folder / f"bench{next(counter)}.db"
        return SqliteSessionService(path), lambda: 0

    return make


async def sqlite_bytes_per_call(folder: Path) -> float:
    """Bytes the database file grows per tool call: two runs (1 and 10 calls) on fresh
    databases, measured after closing (the WAL is checkpointed into the file)."""
    sizes = {}
    for calls in (1, 10):
        path = folder / f"size{calls}.db"
        model = ScriptedModel(lambda request, n=calls: f"```python\n{script_with_calls(n)}\n```")
        agent = CodeActAgent(name="bench", model=model, runtime=MontyRuntime(), tools=[inc])
        with SqliteSessionService(path) as service:
            runner = Runner(app_name="bench", agent=agent, session_service=service)
            for i in range(20):
                await service.create_session(app_name="bench", user_id="u", session_id=f"s{i}")
                async for _ in runner.run_async(user_id="u", session_id=f"s{i}", new_message="go"):
                    pass
        sizes[calls] = path.stat().st_size / 20
    return (sizes[10] - sizes[1]) / 9


async def main_async(quick: bool) -> dict[str, Any]:
    repeats = 15 if quick else 101
    runtime = MontyRuntime()
    bare = {n: bare_runtime_us(runtime, script_with_calls(n), repeats * 3) for n in (0, 1, 10)}
    mem = {n: await agent_turn_us(n, repeats, memory_store) for n in (0, 1, 10)}
    with tempfile.TemporaryDirectory() as tmp:
        factory = sqlite_store_factory(Path(tmp))
        sql = {n: await agent_turn_us(n, max(5, repeats // 3), factory) for n in (0, 1, 10)}
        bytes_per_call = await sqlite_bytes_per_call(Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        durable = {
            "per_call_memory_us": await per_call_us(memory_store, 3 if quick else 9),
            "per_call_memory_tool_events_us": await per_call_us(memory_store, 3 if quick else 9, tool_events=True),
            "per_call_sqlite_us": await per_call_us(sqlite_store_factory(folder), 3 if quick else 7),
            "bare_per_call_us": statistics.median((bare_loop_s(1000) - bare_loop_s(100)) / 900 for _ in range(5)) * 1e6,
            "storage_empty_heap": await storage_per_call(folder, heap=False),
            "storage_20k_heap": await storage_per_call(folder, heap=True),
            **await scaling(folder, quick),
            "recovery_1000_ms": statistics.median([await recovery_ms(folder / str(i)) for i in range(3)])
            if not quick
            else await recovery_ms(folder / "q"),
        }
    with tempfile.TemporaryDirectory() as tmp:
        peers = await peer_rows(5 if quick else 15, Path(tmp))
    hb_ms, hb_wall = await heartbeat_worst_ms(3_000_000 if quick else 30_000_000)
    check_us = subset_check_us(repeats)
    per_call_mem = ((mem[10] - bare[10]) - (mem[1] - bare[1])) / 9
    per_call_sql = ((sql[10] - bare[10]) - (sql[1] - bare[1])) / 9
    return {
        "bare_us": bare,
        "agent_memory_us": mem,
        "agent_sqlite_us": sql,
        "turn_overhead_memory_us": mem[0] - bare[0],
        "turn_overhead_sqlite_us": sql[0] - bare[0],
        "added_per_call_memory_us": per_call_mem,
        "added_per_call_sqlite_us": per_call_sql,
        "durable": durable,
        "peers": peers,
        "sqlite_bytes_per_call": bytes_per_call,
        "subset_check_us": check_us,
        "heartbeat_worst_ms": hb_ms,
        "heartbeat_script_s": hb_wall,
    }


def render(r: dict[str, Any]) -> None:
    print(f"{'tool calls per script':<28}{'bare runtime':>14}{'agent, memory':>16}{'agent, sqlite':>16}")
    for n in (0, 1, 10):
        row = (r["bare_us"][n], r["agent_memory_us"][n], r["agent_sqlite_us"][n])
        print(f"{n:<28}{row[0]:>11.1f} us{row[1]:>13.1f} us{row[2]:>13.1f} us")
    print()

    def line(label: str, value: float, unit: str, goal: float | None) -> None:
        verdict = "" if goal is None else ("  PASS" if value <= goal else "  MISS") + f" (goal <= {goal:g} {unit})"
        print(f"{label:<44}{value:>10.1f} {unit}{verdict}")

    line("per-turn overhead beyond the runtime (memory)", r["turn_overhead_memory_us"], "us", 200)
    line("per-turn overhead beyond the runtime (sqlite)", r["turn_overhead_sqlite_us"], "us", None)
    line("sqlite bytes grown per tool call (10-call script)", r["sqlite_bytes_per_call"], "B", None)
    line("static subset check of a fresh 13-line script", r["subset_check_us"], "us", None)
    line(f"heartbeat worst delay ({r['heartbeat_script_s']:.2f} s script)", r["heartbeat_worst_ms"], "ms", 10)
    d = r["durable"]
    print()
    print("durability (issue 9): before = codeact 0.1.0 as reported in the issue; after = measured now")
    print(f"{'':<52}{'before':>14}{'after':>14}  goal")
    empty, payload = d["storage_empty_heap"]
    heap, _ = d["storage_20k_heap"]
    rows = [
        ("per inline call through the agent, memory", "174 us", d["per_call_memory_us"], "us", 20),
        ("  the same with RunConfig(emit_tool_events=True)", "-", d["per_call_memory_tool_events_us"], "us", None),
        ("per inline call through the agent, sqlite", "1300 us", d["per_call_sqlite_us"], "us", 150),
        ("  (bare runtime round trip per call)", "1.8 us", d["bare_per_call_us"], "us", None),
        ("sqlite bytes per inline call, empty heap", "8000 B", empty, "B", 300 + payload),
        ("sqlite bytes per inline call, 20,000-string heap", "1150000 B", heap, "B", 300 + payload),
        ("10,000 calls / 1,000 calls (time)", "4.7x/3k", d["ratio_10k_1k"], "x", 11),
        ("RSS growth of a further 10,000-call run", "3.2 GB/200k", d["rss_growth_kib"], "KiB", None),
        ("recovery replaying 1,000 journaled calls", "-", d["recovery_1000_ms"], "ms", 50),
    ]
    for label, before, after, unit, goal in rows:
        verdict = "" if goal is None else ("PASS" if after <= goal else "MISS") + f" (<= {goal:g} {unit})"
        print(f"{label:<52}{before:>14}{after:>11.1f} {unit:<3} {verdict}")


def measure_before(tree: Path, quick: bool) -> dict[str, float]:
    import subprocess

    helper = Path(__file__).with_name("_v1_per_call.py")
    args = [sys.executable, str(helper), str(tree)] + (["--quick"] if quick else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=1800, check=True)
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def render_before(before: dict[str, float], r: dict[str, Any]) -> None:
    d = r["durable"]
    print()
    print("the before tree measured in this run (same machine, same load):")
    rows = [
        ("per inline call, memory", before["per_call_memory_us"], d["per_call_memory_us"], "us", 174.0, 20.0),
        ("per inline call, sqlite", before["per_call_sqlite_us"], d["per_call_sqlite_us"], "us", 1300.0, 150.0),
        ("sqlite bytes per call, empty heap", before["bytes_empty"], d["storage_empty_heap"][0], "B", None, None),
        ("sqlite bytes per call, 20,000-string heap", before["bytes_heap"], d["storage_20k_heap"][0], "B", None, None),
    ]
    print(f"{'':<44}{'before':>12}{'after':>12}{'speedup':>10}   after at the issue's machine speed")
    for label, b, a, unit, issue_before, goal in rows:
        ratio = b / a if a else float("inf")
        scaled = ""
        if issue_before is not None and goal is not None:
            at_issue = issue_before / ratio
            scaled = f"{at_issue:.1f} {unit} " + ("PASS" if at_issue <= goal else "MISS") + f" (<= {goal:g} {unit})"
        print(f"{label:<44}{b:>9.1f} {unit:<2}{a:>9.1f} {unit:<2}{ratio:>9.1f}x   {scaled}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run (CI)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--before-tree", type=Path, help="another codeact python/ tree to measure beside this one")
    parser.add_argument(
        "--smolagents-python",
        type=Path,
        default=os.environ.get("CODEACT_BENCH_SMOLAGENTS_PYTHON") or None,
        help="interpreter that runs the smolagents column (default: $CODEACT_BENCH_SMOLAGENTS_PYTHON, else its venv)",
    )
    parser.add_argument(
        "--smolagents-site",
        type=Path,
        default=os.environ.get("CODEACT_BENCH_SMOLAGENTS_SITE") or None,
        help="folder put first on that interpreter's path, e.g. one made with `pip install --target DIR smolagents` "
        "(default: $CODEACT_BENCH_SMOLAGENTS_SITE)",
    )
    parser.add_argument("--peers-only", action="store_true", help="only the rows of the peer comparison")
    parser.add_argument("--no-peers", action="store_true", help="codeact only (no peer venvs)")
    parser.add_argument("--venvs", type=Path, default=DEFAULT_ROOT, help="where the peer venvs live (_peers.py)")
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="also measure the peer comparison again with N busy-loop processes running (the issue's loaded run: 2)",
    )
    args = parser.parse_args(argv)
    if args.peers_only and args.before_tree:
        parser.error("--before-tree compares the full run's rows; run it without --peers-only")
    print(
        f"codeact agent benchmark ({'quick' if args.quick else 'full'}), python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}"
    )
    if args.peers_only:
        with tempfile.TemporaryDirectory() as tmp:
            result: dict[str, Any] = {"peers": anyio.run(peer_rows, 5 if args.quick else 15, Path(tmp))}
    else:
        result = anyio.run(main_async, args.quick)
        render(result)
    result["peer_columns"] = peer_columns(args)
    render_peers(result["peers"], result["peer_columns"])
    if args.busy:
        print(f"\nagain with {args.busy} busy-loop processes running:")
        with BusyLoops(args.busy), tempfile.TemporaryDirectory() as tmp:
            result["peers_busy"] = anyio.run(peer_rows, 5 if args.quick else 15, Path(tmp))
            result["peer_columns_busy"] = peer_columns(args)
        render_peers(result["peers_busy"], result["peer_columns_busy"])
    if args.before_tree:
        result["before_tree"] = measure_before(args.before_tree, args.quick)
        render_before(result["before_tree"], result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
