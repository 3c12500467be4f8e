"""Hostile script families (issue 20): how free the event loop stays and how fast each stops.

For every family of ``tests/test_hostile_families.py`` (the same scripts and limits; the
gigabyte families in a child process under an address-space limit, as there), the
script runs in a ``CodeActAgent`` beside a 1 ms heartbeat task, in process and with
``isolation="process"``, and the table shows:

* the heartbeat's worst gap while the agent ran (goal: <= 20 ms);
* the time from the model reply to the model request that reports how the script ended
  (the time to stop), as a ratio of the limit that stopped it (goal: <= 2x; "-" for
  families that end on their own, such as a MemoryError before any limit is reached).

Run: ``python benchmarks/hostile.py`` (``--quick``: in process only, one backend;
``--backend trio``; ``--json PATH``). None fails on a missed goal (the table says MISS).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
_spec = importlib.util.spec_from_file_location("hostile_families", ROOT / "tests" / "test_hostile_families.py")
assert _spec is not None and _spec.loader is not None
fam = importlib.util.module_from_spec(_spec)
sys.modules["hostile_families"] = fam  # dataclasses look their module up
_spec.loader.exec_module(fam)

from agent_helpers import fence, run  # noqa: E402
from codeact import CodeActAgent, MontyRuntime, Mount, PathAccess, ScriptedModel  # noqa: E402

GAP_GOAL_MS = 20.0
STOP_GOAL = 2.0


def _limit_seconds(family: Any) -> float | None:
    """The time budget that stops the family, when a time budget does."""
    timed = ("TimeoutError", "time limit exceeded", fam.FORECAST)
    if any(e in timed for e in family.expect) and "max_os_calls" not in family.expect:
        return family.limits.max_duration
    if "max_script_seconds" in family.expect:
        return fam.MAX_SCRIPT_SECONDS
    return None


async def measure(family: Any, isolation: str, folder: Path) -> dict[str, float]:
    data = folder / f"{family.name}-{isolation}"
    data.mkdir()
    (data / "f0.txt").write_text("hello")
    runtime = MontyRuntime(
        limits=family.limits,
        mounts=[Mount(virtual_path="/data", host_path=data, access=PathAccess.READ_ONLY)],
        max_stdout=fam.MAX_STDOUT,
        isolation=isolation,  # type: ignore[arg-type]
    )
    served: list[str] = []
    stamps: list[float] = []
    replies = [fence(family.script), fence(fam.NEXT)]

    def reply(request: Any) -> str:
        stamps.append(time.perf_counter())
        return replies[len(stamps) - 1]

    options: dict[str, Any] = {"max_tool_calls": fam.MAX_TOOL_CALLS, "max_script_seconds": fam.MAX_SCRIPT_SECONDS}
    options.update(family.agent or {})
    agent = CodeActAgent(name="coder", model=ScriptedModel(reply), runtime=runtime, tools=fam._tools(served), **options)
    worst = 0.0
    done = False

    async def heartbeat() -> None:
        nonlocal worst
        while not done:
            before = time.perf_counter()
            await anyio.sleep(0.001)
            worst = max(worst, time.perf_counter() - before - 0.001)

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        await anyio.sleep(0.01)
        try:
            await run(agent)
        finally:
            done = True
    stop_s = stamps[1] - stamps[0] if len(stamps) >= 2 else float("nan")
    limit = _limit_seconds(family)
    return {"gap_ms": worst * 1000, "stop_s": stop_s, "stop_ratio": stop_s / limit if limit else float("nan")}


async def main_async(quick: bool) -> dict[str, dict[str, dict[str, float]]]:
    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for family in [*fam.FAMILIES, *fam.GIGABYTE_FAMILIES]:
            row: dict[str, dict[str, float]] = {}
            for isolation in ("in_process",) if quick else ("in_process", "process"):
                if family.address_space is None:
                    row[isolation] = await measure(family, isolation, Path(tmp))
                else:  # would allocate gigabytes if not refused: in a child under RLIMIT_AS
                    folder = Path(tempfile.mkdtemp(dir=tmp))
                    row[isolation] = fam.run_in_child(family, isolation, folder, job="measure")
            results[family.name] = row
    return results


def render(results: dict[str, dict[str, dict[str, float]]]) -> None:
    modes = list(next(iter(results.values())))
    head = "| family | " + " | ".join(f"{m}: worst gap ms | {m}: stop / limit" for m in modes) + " |"
    print(head)
    print("|" + " --- |" * (1 + 2 * len(modes)))
    for name, row in results.items():
        cells = []
        for m in modes:
            r = row[m]
            gap = f"{r['gap_ms']:.1f}" + ("" if r["gap_ms"] <= GAP_GOAL_MS else " MISS")
            ratio = r["stop_ratio"]
            if ratio != ratio:  # nan: no time limit stops this family
                stop = f"- ({r['stop_s'] * 1000:.0f} ms)"
            else:
                stop = f"{ratio:.2f}x" + ("" if ratio <= STOP_GOAL else " MISS")
            cells += [gap, stop]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = anyio.run(main_async, args.quick, backend=args.backend)
    render(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
