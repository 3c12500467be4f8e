"""The session's file layer (issue 53 item 1), one run: what a small write and read cost through a
read-write mount written directly (``MontyRuntime.start`` without a layer, as before) and through
the layer (the agent's way), and what the end of a script that changed files costs under the agent
(its end commit with the pre-images, then the host apply) on SQLite.

Usage: ``python benchmarks/files.py [--repeat 5] [--n 300] [--mb 1]``; prints a small table.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from codeact import CodeActAgent, MontyRuntime, Mount, PathAccess, Runner, ScriptedModel, SqliteSessionService
from codeact.agent._files import EMPTY

SMALL = 'from pathlib import Path\np = Path("/data/f.txt")\np.write_text("hello " * 20)\nlen(p.read_text())'


def per_script(runtime: MontyRuntime, layered: bool, n: int, repeat: int) -> float:
    """Median microseconds per start of ``SMALL`` (compile memoized, the run included)."""
    kwargs = {"os_replay": [("files", EMPTY)]} if layered else {}
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            runtime.start(SMALL, **kwargs)
        times.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(times)


async def agent_turns(folder: Path, db: Path, mb: int, repeat: int, write: bool) -> float:
    """Median milliseconds of one agent run whose script writes ``mb`` MiB to a read-write mount
    (``write``) or only returns (the same run without files), on SQLite."""
    body = f'from pathlib import Path\nPath("/data/big.bin").write_bytes(b"x" * {mb << 20})\n' if write else ""
    script = body + '{"type": "final_result", "value": 1}'
    runtime = MontyRuntime(mounts=[Mount(virtual_path="/data", host_path=folder, access=PathAccess.READ_WRITE)])
    agent = CodeActAgent(name="coder", model=ScriptedModel(lambda r: f"```python\n{script}\n```"), runtime=runtime)
    times = []
    with SqliteSessionService(db) as store:
        runner = Runner(app_name="app", agent=agent, session_service=store)
        for i in range(repeat + 1):
            sid = f"{write}-{i}"
            await store.create_session(app_name="app", user_id="u", session_id=sid)
            t0 = time.perf_counter()
            async for _ in runner.run_async(user_id="u", session_id=sid, new_message="go"):
                pass
            if i:  # the first run warms up
                times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--mb", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "data"
        folder.mkdir()
        runtime = MontyRuntime(mounts=[Mount(virtual_path="/data", host_path=folder, access=PathAccess.READ_WRITE)])
        direct = per_script(runtime, False, args.n, args.repeat)
        layered = per_script(runtime, True, args.n, args.repeat)
        plain = asyncio.run(agent_turns(folder, Path(tmp) / "a.db", args.mb, args.repeat, write=False))
        files = asyncio.run(agent_turns(folder, Path(tmp) / "b.db", args.mb, args.repeat, write=True))
    print("| measure | value | ratio |")
    print("| --- | --- | --- |")
    print(f"| small write + read, read-write mount written directly (us/script) | {direct:.1f} | 1.00 |")
    print(f"| the same through the file layer (us/script) | {layered:.1f} | {layered / direct:.2f} |")
    print(f"| agent run, script writes nothing, SQLite (ms) | {plain:.1f} | 1.00 |")
    print(
        f"| agent run, script writes {args.mb} MiB: layer, end commit, apply (ms) | {files:.1f} | {files / plain:.2f} |"
    )


if __name__ == "__main__":
    main()
