"""``persist_namespace``: the source transform, codeact's namespace session and the bare ``MontyRepl``.

A session of N scripts (N = 20 and 200; ``--quick``: 5 and 20) where the first script builds a
few small values, a 10,000-element list and a dict of 1,000 entries, and every later one reads
and updates them and calls one tool. Measured side by side in one run:

* **transform** (the mechanism before ADR 0003, still used by runtimes without sessions:
  ``MontyRuntime(namespace_sessions=False)`` here), end to end as the agent uses it:
  ``CodeActAgent(persist_namespace=True)`` on a
  ``SqliteSessionService`` (time per turn, bytes the database grows per turn), beside the
  same agent running a script of the same shape that carries nothing (the difference is what
  carrying the namespace costs per script); and the parts, on ``MontyRuntime`` directly:
  ``prepare_script`` (prelude and epilogue), the prepared script's run (with the dump the
  agent takes at its tool call), reading the namespace back, its JSON size in the turn record;
* **codeact session** (``MontyRuntime.start_session``, ADR 0003): the same agent end to end on
  the default ``MontyRuntime``; and the parts on the ``NamespaceSession`` directly, with the
  same restarts as the bare column: the paused feed dumped at its call and resumed from those
  bytes (``resume_session``), the idle session dumped after every script and loaded back;
* **MontyRepl** (``codeact-bench repl``, the bare monty 1.4.0 crate, ``rust/bench/src/repl.rs``)
  with the durability contract's cost: the REPL dumped after every script (the per-turn save)
  and at every tool call (the checkpoint before a tool runs), each dump loaded back and the
  session continued from the loaded copy (a restart between scripts and mid-feed).

The bare REPL column has no Python binding in it: the lower bound for the codeact column.

Run: ``python benchmarks/namespace.py`` (``--quick`` for the CI smoke run, ``--json PATH``;
``--target-dir`` for the bench crate's cargo target, built when stale).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from codeact import (
    Call,
    CodeActAgent,
    MontyRuntime,
    ResourceLimits,
    ResumeValue,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.agent._namespace import Namespace, prepare_script, unwrap_result

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_TARGET_DIR = Path.home() / ".cache" / "codeact" / "target"

# The same text as rust/bench/src/repl.rs (SETUP, STEP, final_step()).
SETUP = (
    "count = 0\n"
    'label = "session"\n'
    "ratio = 0.5\n"
    "flags = [True, False]\n"
    "items = list(range(10000))\n"
    "table = {}\n"
    "for i in range(1000):\n"
    '    table["k" + str(i)] = i\n'
    'got = call_tool("inc", {"x": count})\n'
    '{"type": "observation", "value": {"count": count, "items": len(items), "table": len(table)}}\n'
)
STEP_BODY = (
    "count += 1\n"
    "ratio = ratio * 0.99\n"
    "flags.append(count % 2 == 0)\n"
    "items[count % 10000] = -count\n"
    'table["k" + str(count % 1000)] = count\n'
    'got = call_tool("inc", {"x": count})\n'
)
STEP = (
    STEP_BODY
    + '{"type": "observation", "value": {"count": count, "got": got, "items": len(items), "table": len(table)}}\n'
)
FINAL = STEP_BODY + '{"type": "final_result", "value": count}\n'
# The baseline turn: the same tool call and result shape, nothing carried.
PLAIN = 'got = call_tool("inc", {"x": 1})\n{"type": "observation", "value": {"got": got}}\n'
PLAIN_FINAL = 'got = call_tool("inc", {"x": 1})\n{"type": "final_result", "value": got}\n'


class BenchError(Exception):
    """A column could not be measured (build failure, crash, wrong result)."""


def inc(x: int) -> int:
    """Adds one.

    Args:
        x: a number.
    """
    return x + 1


def session_scripts(n: int) -> list[str]:
    return [SETUP, *[STEP] * (n - 2), FINAL]


def plain_scripts(n: int) -> list[str]:
    return [*[PLAIN] * (n - 1), PLAIN_FINAL]


# ---------------------------------------------------------------------------- today, end to end


async def agent_session(scripts: list[str], persist: bool, db: Path, sessions: bool = False) -> tuple[float, int, str]:
    """One run of ``len(scripts)`` turns on a fresh SQLite file: (seconds, file bytes after
    close, the final event's text)."""
    replies = [f"```python\n{s}```" for s in scripts]
    agent = CodeActAgent(
        name="ns",
        model=ScriptedModel(replies),
        runtime=MontyRuntime(ResourceLimits(max_duration=60.0), namespace_sessions=sessions),
        tools=[inc],
        persist_namespace=persist,
        max_iterations=len(scripts) + 1,
    )
    with SqliteSessionService(db) as service:
        runner = Runner(app_name="ns", agent=agent, session_service=service)
        await service.create_session(app_name="ns", user_id="u", session_id="s")
        t0 = time.perf_counter()
        events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go")]
        elapsed = time.perf_counter() - t0
    return elapsed, db.stat().st_size, events[-1].text or ""


async def today_end_to_end(n: int, folder: Path) -> dict[str, float]:
    empty = folder / f"empty-{n}.db"
    with SqliteSessionService(empty) as service:
        await service.create_session(app_name="ns", user_id="u", session_id="s")
    base_bytes = empty.stat().st_size
    s_ns, bytes_ns, last = await agent_session(session_scripts(n), True, folder / f"ns-{n}.db")
    if last != str(n - 1):
        raise BenchError(f"persist_namespace session of {n} ended with {last!r}, not {n - 1}")
    s_plain, bytes_plain, last = await agent_session(plain_scripts(n), False, folder / f"plain-{n}.db")
    if last != "2":
        raise BenchError(f"plain session of {n} ended with {last!r}")
    s_sess, bytes_sess, last = await agent_session(session_scripts(n), True, folder / f"sess-{n}.db", sessions=True)
    if last != str(n - 1):
        raise BenchError(f"namespace-session run of {n} ended with {last!r}, not {n - 1}")
    return {
        "session_turn_us": s_sess / n * 1e6,
        "session_carry_us": (s_sess - s_plain) / n * 1e6,
        "session_db_bytes_per_turn": (bytes_sess - base_bytes) / n,
        "turn_us": s_ns / n * 1e6,
        "plain_turn_us": s_plain / n * 1e6,
        "carry_us": (s_ns - s_plain) / n * 1e6,
        "db_bytes_per_turn": (bytes_ns - base_bytes) / n,
        "plain_db_bytes_per_turn": (bytes_plain - base_bytes) / n,
    }


# ---------------------------------------------------------------------------- today, the parts


def today_parts(n: int) -> dict[str, float]:
    """The namespace machinery on ``MontyRuntime`` directly, per script (medians over the
    scripts after the first)."""
    rt = MontyRuntime(ResourceLimits(max_duration=60.0), namespace_sessions=False)
    namespace = Namespace()
    prepare_us: list[float] = []
    run_us: list[float] = []
    unwrap_us: list[float] = []
    state_bytes: list[int] = []
    state_us: list[float] = []
    restore_us: list[float] = []
    snapshot_bytes: list[int] = []
    chars: list[int] = []
    for i, script in enumerate(session_scripts(n)):
        t0 = time.perf_counter()
        prepared = prepare_script(script, namespace)
        t1 = time.perf_counter()
        step = rt.start(prepared.script, "agent.py")
        while isinstance(step, Call):
            snapshot_bytes.append(len(step.call.dump()))
            step = step.call.resume(ResumeValue(step.call.keyword_args["x"] + 1))
        t2 = time.perf_counter()
        value = unwrap_result(getattr(step, "value", None), prepared, namespace)
        t3 = time.perf_counter()
        blob = json.dumps(namespace.to_state())
        t4 = time.perf_counter()
        Namespace.from_state(json.loads(blob))
        t5 = time.perf_counter()
        if not isinstance(value, dict) or (value.get("value") != i and value.get("value", {}).get("count") != i):
            raise BenchError(f"script {i} returned {value!r}")
        prepare_us.append((t1 - t0) * 1e6)
        run_us.append((t2 - t1) * 1e6)
        unwrap_us.append((t3 - t2) * 1e6)
        state_us.append((t4 - t3) * 1e6)
        restore_us.append((t5 - t4) * 1e6)
        state_bytes.append(len(blob))
        chars.append(len(prepared.script))
    later = statistics.median
    return {
        "prepare_us": later(prepare_us[1:]),
        "run_us": later(run_us[1:]),
        "unwrap_us": later(unwrap_us[1:]),
        "state_json_us": later(state_us[1:]),
        "state_restore_us": later(restore_us[1:]),
        "state_bytes_last": state_bytes[-1],
        "snapshot_bytes_last": snapshot_bytes[-1],
        "prepared_chars_last": chars[-1],
    }


def session_parts(n: int) -> dict[str, float]:
    """The same scripts on one ``NamespaceSession``, restarted twice per script: resumed from
    the bytes of its paused call, and loaded from its idle dump after the script (medians over
    the scripts after the first)."""
    rt = MontyRuntime(ResourceLimits(max_duration=60.0))
    session = rt.start_session()
    feed_us: list[float] = []
    dump_call_us: list[float] = []
    resume_bytes_us: list[float] = []
    idle_dump_us: list[float] = []
    idle_load_us: list[float] = []
    wall_us: list[float] = []
    idle_bytes: list[int] = []
    call_bytes: list[int] = []
    for i, script in enumerate(session_scripts(n)):
        t0 = time.perf_counter()
        step = session.feed(script, "agent.py")
        feed_us.append((time.perf_counter() - t0) * 1e6)
        while isinstance(step, Call):
            t1 = time.perf_counter()
            snapshot = step.call.dump()
            t2 = time.perf_counter()
            session, step = rt.resume_session(snapshot, ResumeValue(step.call.keyword_args["x"] + 1))
            t3 = time.perf_counter()
            dump_call_us.append((t2 - t1) * 1e6)
            resume_bytes_us.append((t3 - t2) * 1e6)
            call_bytes.append(len(snapshot))
        t4 = time.perf_counter()
        idle = session.dump()
        t5 = time.perf_counter()
        session = rt.load_session(idle)
        t6 = time.perf_counter()
        value = getattr(step, "value", None)
        if not isinstance(value, dict) or (value.get("value") != i and value.get("value", {}).get("count") != i):
            raise BenchError(f"session script {i} returned {value!r}")
        idle_dump_us.append((t5 - t4) * 1e6)
        idle_load_us.append((t6 - t5) * 1e6)
        wall_us.append((t6 - t0) * 1e6)
        idle_bytes.append(len(idle))
    later = statistics.median
    return {
        "feed_us": later(feed_us[1:]),
        "dump_call_us": later(dump_call_us[1:]),
        "resume_bytes_us": later(resume_bytes_us[1:]),
        "idle_dump_us": later(idle_dump_us[1:]),
        "idle_load_us": later(idle_load_us[1:]),
        "wall_per_script_us": later(wall_us[1:]),
        "idle_bytes_last": idle_bytes[-1],
        "call_bytes_last": call_bytes[-1],
    }


def bare_step_us(repeats: int) -> float:
    """The baseline script (one tool call, nothing carried) on ``MontyRuntime``, with the dump
    the agent takes at its call: what a script costs when nothing is carried."""
    rt = MontyRuntime(ResourceLimits(max_duration=60.0))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step = rt.start(PLAIN, "agent.py")
        while isinstance(step, Call):
            step.call.dump()
            step = step.call.resume(ResumeValue(2))
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


# ---------------------------------------------------------------------------- MontyRepl


def repl_sessions(sizes: list[int], target_dir: Path) -> dict[str, Any]:
    binary = target_dir / "release" / "codeact-bench"
    sources = [ROOT / "rust" / "bench" / "Cargo.toml", *(ROOT / "rust" / "bench" / "src").rglob("*.rs")]
    if not binary.exists() or max(p.stat().st_mtime for p in sources) > binary.stat().st_mtime:
        cargo = shutil.which("cargo")
        if cargo is None:
            raise BenchError(f"{binary} is missing or stale and cargo is not on PATH")
        print(f"building {binary} (cargo build --release -p codeact-bench) ...", file=sys.stderr, flush=True)
        env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir)}
        proc = subprocess.run([cargo, "build", "--release", "-p", "codeact-bench"], cwd=ROOT, env=env)
        if proc.returncode != 0 or not binary.exists():
            raise BenchError("cargo build --release -p codeact-bench failed")
    proc = subprocess.run([str(binary), "repl", *map(str, sizes)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"codeact-bench repl exited with {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


# ---------------------------------------------------------------------------- report


def report(
    sizes: list[int],
    today: dict[int, dict[str, float]],
    session: dict[int, dict[str, float]],
    repl: dict[str, Any],
    plain_us: float,
) -> str:
    rows: list[tuple[str, str, str, str]] = []

    def add(label: str, a: str, c: str, b: str) -> None:
        rows.append((label, a, c, b))

    for n in sizes:
        t = today[n]
        c = session[n]
        r = {k[len(f"n{n}_") :]: v for k, v in repl.items() if k.startswith(f"n{n}_")}
        add(f"**N = {n} scripts**", "", "", "")
        add(
            "agent turn, end to end (SQLite)",
            f"{t['turn_us']:,.0f} µs (carrying nothing: {t['plain_turn_us']:,.0f})",
            f"{t['session_turn_us']:,.0f} µs",
            "no agent",
        )
        add(
            "carrying cost per script",
            f"{t['carry_us']:,.0f} µs (turn − carrying-nothing turn)",
            f"{t['session_carry_us']:,.0f} µs",
            "see the rows below",
        )
        add(
            "whole session per script, two restarts per script",
            "–",
            f"{c['wall_per_script_us']:,.0f} µs",
            f"{r['wall_per_script_us']:,.0f} µs",
        )
        add(
            "the script's run (runtime only, dump at its call)",
            f"{t['run_us']:,.0f} µs (prelude + script + epilogue; bare script {plain_us:,.0f})",
            f"{c['feed_us'] + c['dump_call_us']:,.0f} µs (feed {c['feed_us']:,.0f} + dump at call "
            f"{c['dump_call_us']:,.0f})",
            f"{r['feed_us'] + r['suspended_dump_us']:,.0f} µs (feed {r['feed_us']:,.0f} + dump at call "
            f"{r['suspended_dump_us']:,.0f})",
        )
        add(
            "namespace bookkeeping per script",
            f"{t['prepare_us'] + t['unwrap_us'] + t['state_json_us']:,.0f} µs (prepare {t['prepare_us']:,.0f}, "
            f"read back {t['unwrap_us']:,.0f}, JSON {t['state_json_us']:,.0f})",
            f"{c['idle_dump_us']:,.0f} µs (idle dump)",
            f"{r['idle_dump_us']:,.0f} µs (dump of the idle REPL)",
        )
        add(
            "state saved per turn",
            f"{t['state_bytes_last']:,} B namespace JSON + {t['prepared_chars_last']:,} B prepared script "
            "(both in the turn record)",
            f"{c['idle_bytes_last']:,} B idle session (base64 in the turn record)",
            f"{r['idle_bytes_last']:,} B (idle REPL dump; {r['idle_bytes_first']:,} B after script 2)",
        )
        add(
            "checkpoint at a tool call",
            f"{t['snapshot_bytes_last']:,} B (continuation of the prepared script)",
            f"{c['call_bytes_last']:,} B (suspended feed + its starting session)",
            f"{r['suspended_bytes_last']:,} B (suspended feed)",
        )
        add(
            "SQLite growth per turn",
            f"{t['db_bytes_per_turn']:,.0f} B (carrying nothing: {t['plain_db_bytes_per_turn']:,.0f})",
            f"{t['session_db_bytes_per_turn']:,.0f} B",
            "–",
        )
        add(
            "restart: restore",
            f"{t['state_restore_us']:,.0f} µs (JSON) + the continuation load",
            f"{c['idle_load_us']:,.0f} µs idle; mid-feed load + resume {c['resume_bytes_us']:,.0f} µs",
            f"{r['idle_load_us']:,.0f} µs idle, {r['suspended_load_us']:,.0f} µs mid-feed",
        )
    head = ("", "transform (namespace_sessions=False)", "codeact session (default)", "MontyRepl (bare crate + dumps)")
    width = [max(len(row[i]) for row in rows) for i in range(4)]
    width = [max(w, len(h)) for w, h in zip(width, head, strict=True)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, width, strict=True)) + " |"  # noqa: E731
    out = [line(head), "|" + "|".join("-" * (w + 2) for w in width) + "|"]
    out += [line(row) for row in rows]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: sessions of 5 and 20 scripts")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--target-dir", type=Path, default=Path(os.environ.get("CARGO_TARGET_DIR", DEFAULT_TARGET_DIR)))
    args = parser.parse_args()
    sizes = [5, 20] if args.quick else [20, 200]
    today: dict[int, dict[str, float]] = {}
    session: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            today[n] = {**anyio.run(today_end_to_end, n, Path(tmp)), **today_parts(n)}
            session[n] = session_parts(n)
    plain_us = bare_step_us(50 if args.quick else 500)
    repl = repl_sessions(sizes, args.target_dir)
    print(
        f"persist_namespace: transform vs codeact session vs MontyRepl ({'quick' if args.quick else 'full'}; medians)"
    )
    print(report(sizes, today, session, repl, plain_us))
    if args.json:
        figures = {"today": today, "session": session, "repl": repl, "plain_script_us": plain_us}
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
