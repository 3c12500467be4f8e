"""Helper of ``agent.py``: per inline call cost and bytes per call of another codeact tree
(``--before-tree PATH``: a ``python/`` folder with a built ``_monty``), run in a child
process so both versions are measured on the same machine in the same run.

Prints one JSON line: ``{"per_call_memory_us", "per_call_sqlite_us", "bytes_empty",
"bytes_heap"}``.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, sys.argv[1])

import anyio

from codeact import (
    CodeActAgent,
    InMemorySessionService,
    MontyRuntime,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)

LOOP = """{heap}
total = 0
for i in range({n}):
    total += call_tool("inc", {{"x": i}})
{{"type": "final_result", "value": total}}"""


def inc(x: int) -> int:
    """Adds one.

    Args:
        x: a number.
    """
    return x + 1


async def run_s(service, n: int, sid: str, heap: bool = False) -> float:
    script = LOOP.format(n=n, heap="heap = [str(i) for i in range(20000)]" if heap else "")
    agent = CodeActAgent(
        name="bench", model=ScriptedModel([f"```python\n{script}\n```"]), runtime=MontyRuntime(), tools=[inc]
    )
    runner = Runner(app_name="bench", agent=agent, session_service=service)
    await service.create_session(app_name="bench", user_id="u", session_id=sid)
    t0 = time.perf_counter()
    async for _ in runner.run_async(user_id="u", session_id=sid, new_message="go"):
        pass
    return time.perf_counter() - t0


async def main() -> None:
    quick = "--quick" in sys.argv
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        samples = []
        for i in range(2 if quick else 3):
            service = InMemorySessionService()
            samples.append((await run_s(service, 300, f"a{i}") - await run_s(service, 30, f"b{i}")) / 270)
        out["per_call_memory_us"] = statistics.median(samples) * 1e6
        samples = []
        for i in range(2 if quick else 3):
            with SqliteSessionService(folder / f"t{i}.db") as service:
                samples.append((await run_s(service, 100, "a") - await run_s(service, 10, "b")) / 90)
        out["per_call_sqlite_us"] = statistics.median(samples) * 1e6
        for heap in (False, True):
            sizes = {}
            for n in (10, 40):
                path = folder / f"g{heap}{n}.db"
                with SqliteSessionService(path) as service:
                    await run_s(service, n, "s", heap=heap)
                sizes[n] = path.stat().st_size
            out["bytes_heap" if heap else "bytes_empty"] = (sizes[40] - sizes[10]) / 30
    print(json.dumps(out))


anyio.run(main)
