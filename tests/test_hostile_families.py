"""Hostile and broken scripts cannot stall, flood or misfire (issue 20).

Each script of a family runs in the agent beside a heartbeat coroutine, on asyncio and on
trio, in process (and, for the quick families, with ``isolation="process"``). Asserted by
counts, not times: the heartbeat ticked while the script ran (between the model reply that
started it and the model request that reports how it ended); the run ended with the message
naming the limit that stopped it; the stops served stay within the budgets; the output the
model sees stays within ``max_stdout`` plus the marker; the next script in the same run
works normally. ``benchmarks/hostile.py`` reports the times (worst gap, time to stop).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_helpers import fence, run
from codeact import CodeActAgent, MontyRuntime, Mount, PathAccess, ResourceLimits, ScriptedModel
from codeact.runtime import Call, Complete, Raised, ResumeValue

# Count budgets are the stoppers of the loop families; the time budgets stay far from them, so on
# a loaded machine (CI: 2,714 tool calls took a second) a count family still ends at its count.
MAX_TOOL_CALLS = 4000  # long enough that the heartbeat ticks several times on a fast machine
MAX_SCRIPT_SECONDS = 30.0
SECONDS_BUDGET = {"max_tool_calls": None, "max_script_seconds": 1.0}  # the "-seconds" families
MAX_STDOUT = 64 * 1024
MAX_OS_CALLS = 20_000
LIMITS = ResourceLimits(max_duration=0.3, max_memory=64 * 1024 * 1024, max_os_calls=MAX_OS_CALLS)
OS_LIMITS = LIMITS.model_copy(update={"max_duration": 30.0})  # the OS-call families end at max_os_calls
NEXT = '{"type": "final_result", "value": "next ok"}'


@dataclass(frozen=True)
class Family:
    """A hostile script, the text the model must be told (one of ``expect``), and whether it
    runs long enough (to a time or count budget) for the heartbeat to tick meanwhile."""

    name: str
    script: str
    expect: tuple[str, ...]
    long: bool = True
    process: bool = False  # also run with isolation="process"
    agent: dict[str, Any] | None = None
    limits: ResourceLimits = LIMITS


F = Family


def try_loop(statement: str, caught: str = "Exception") -> str:
    """``while True`` around ``statement`` in a ``try`` that swallows ``caught``."""
    return f"while True:\n    try:\n        {statement}\n    except {caught}:\n        pass"


TIME = ("TimeoutError", "time limit exceeded")
FAMILIES = [
    # -- loops of stops the host answers: tool calls, unknown names, refused arguments
    F("tool-loop", 'while True:\n    call_tool("tick")', ("max_tool_calls",), process=True),
    F(
        "tool-loop-try",
        try_loop('call_tool("tick")'),
        ("max_tool_calls",),
    ),
    F(
        "unknown-tool-try",
        'n = 0\nwhile True:\n    n += 1\n    try:\n        call_tool("no_such_tool", {"id": n})\n'
        "    except Exception:\n        pass",
        ("max_tool_calls",),
        process=True,
    ),
    F("unknown-tool-bare", 'call_tool("no_such_tool", {"id": 1})', ("is not available",), long=False),
    F(
        "bad-args-try",
        try_loop('call_tool("tick", {"bogus": 1})'),
        ("max_tool_calls",),
    ),
    F("failing-tool-try", try_loop('call_tool("boom")'), ("max_tool_calls", "max_script_seconds")),
    F(
        "unknown-tool-seconds",
        try_loop('call_tool("no_such_tool")'),
        ("max_script_seconds",),
        agent=SECONDS_BUDGET,
    ),
    F(
        "tool-loop-seconds",
        'while True:\n    call_tool("tick")',
        ("max_script_seconds",),
        agent=SECONDS_BUDGET,
    ),
    F(
        "gather-loop",
        "import asyncio\nasync def main():\n    while True:\n"
        "        await asyncio.gather(call_tool('tick'), call_tool('tick'))\nawait main()",
        ("max_tool_calls",),
    ),
    # -- OS calls answered in place: their own budget, never taken for tool calls
    F(
        "getenv-loop",
        "import os\nwhile True:\n    os.getenv('HOME')",
        ("max_os_calls",),
        process=True,
        limits=OS_LIMITS,
    ),
    F(
        "clock-loop",
        "from datetime import datetime\nwhile True:\n    datetime.now()",
        ("max_os_calls",),
        limits=OS_LIMITS,
    ),
    F(
        "file-read-loop",
        "from pathlib import Path\nwhile True:\n    Path('/data/f0.txt').read_text()",
        ("max_os_calls",),
        limits=OS_LIMITS,
    ),
    F(
        "exists-loop",
        "from pathlib import Path\nwhile True:\n    Path('/elsewhere/x').exists()",
        ("max_os_calls",),
        limits=OS_LIMITS,
    ),
    F(
        "os-error-try",
        "from pathlib import Path\n" + try_loop("Path('/data/missing').read_text()", "OSError"),
        ("max_os_calls",),
        limits=OS_LIMITS,
    ),
    F("sleep0-loop", "import time\nwhile True:\n    time.sleep(0)", ("max_os_calls", *TIME)),
    F("sleep-too-long", "import time\ntime.sleep(5)", TIME, long=False),
    # -- stops the interpreter answers itself: name lookups, refused call forms
    F("name-error-try", try_loop("undefined_name", "NameError"), TIME),
    F("bare-call-try", try_loop("fetch_cart()", "NameError"), TIME),
    F("call-tool-misuse-try", try_loop("call_tool(1)", "TypeError"), TIME),
    # -- CPU, memory, recursion
    F("busy-loop", "while True:\n    pass", TIME, process=True),
    F("busy-after-tool", 'call_tool("tick")\nwhile True:\n    pass', TIME, process=True),
    F("exception-loop", try_loop("1 / 0", "ZeroDivisionError"), TIME),
    # one big-integer multiplication is not interruptible (issue 20 item 3, open): a small
    # memory cap keeps the last one short here; benchmarks/hostile.py shows the overrun
    F(
        "bigint-growth",
        "x = 3\nwhile True:\n    x = x * x",
        ("MemoryError", *TIME),
        long=False,
        limits=LIMITS.model_copy(update={"max_memory": 4 * 1024 * 1024}),
    ),
    F("huge-repeat", "s = 'a' * (1 << 40)", ("MemoryError",), long=False, process=True),
    F("huge-join", "s = ''.join(['x' * 1000] * 10**8)", ("MemoryError", *TIME), long=False),
    F("list-growth", "l = []\nwhile True:\n    l.append('x' * 1000)", ("MemoryError", *TIME), long=False),
    F("costly-sort-key", "sorted(range(10**6), key=lambda v: sum(range(200)))", TIME),
    F("deep-recursion", "def f(n):\n    return f(n + 1)\nf(0)", ("RecursionError",), long=False, process=True),
    F(
        "recursion-try-loop",
        "def f(n):\n    return f(n + 1)\n" + try_loop("f(0)", "RecursionError"),
        TIME,
    ),
    # -- print floods: bounded per run, across tool calls, marked
    F("print-flood", "while True:\n    print('x' * 1000)", ("stdout truncated",), process=True),
    F(
        "print-across-tools",
        "for i in range(100):\n    print('y' * 100_000)\n    call_tool('tick')",
        ("stdout truncated",),
        long=False,
        process=True,
    ),
    F(
        "print-unknown-tool-loop",
        "while True:\n    print('z' * 10_000)\n    try:\n        call_tool('nope')\n"
        "    except Exception:\n        pass",
        ("stdout truncated",),
    ),
    F("one-huge-print", "print('w' * 10**7)", ("stdout truncated",), long=False),
]


def _tools(served: list[str]) -> list[Callable[..., Any]]:
    def tick() -> int:
        """Returns at once."""
        served.append("tick")
        return len(served)

    def boom() -> None:
        """Always fails."""
        served.append("boom")
        raise ValueError("boom")

    return [tick, boom]


async def _run_family(family: Family, isolation: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "f0.txt").write_text("hello")
    runtime = MontyRuntime(
        limits=family.limits,
        mounts=[Mount(virtual_path="/data", host_path=data, access=PathAccess.READ_ONLY)],
        max_stdout=MAX_STDOUT,
        isolation=isolation,  # type: ignore[arg-type]
    )
    served: list[str] = []
    beats = 0
    marks: list[int] = []  # heartbeat count at each model request
    replies = [fence(family.script), fence(NEXT)]

    def reply(request: Any) -> str:
        marks.append(beats)
        return replies[len(marks) - 1]

    options: dict[str, Any] = {"max_tool_calls": MAX_TOOL_CALLS, "max_script_seconds": MAX_SCRIPT_SECONDS}
    options.update(family.agent or {})
    model = ScriptedModel(reply)
    agent = CodeActAgent(name="coder", model=model, runtime=runtime, tools=_tools(served), **options)
    done = False

    async def heartbeat() -> None:
        nonlocal beats
        while not done:
            await anyio.sleep(0.001)
            beats += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        try:
            events, _, _ = await run(agent)
        finally:
            done = True

    assert events[-1].text == "next ok", "the next script in the same run works normally"
    assert len(marks) == 2
    feedback = model.requests[1].contents[-1].text
    assert any(e in feedback for e in family.expect), feedback[-600:]
    if family.long:
        assert marks[1] - marks[0] >= 3, f"the heartbeat ticked {marks[1] - marks[0]} times while the script ran"
    limit = options["max_tool_calls"]
    if limit is not None:
        assert len(served) <= limit
    assert len(feedback) <= MAX_STDOUT + 4096, "what the model sees stays within max_stdout plus a constant"


@pytest.mark.anyio
@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
async def test_hostile_family_in_process(family: Family, tmp_path: Path) -> None:
    await _run_family(family, "in_process", tmp_path)


@pytest.mark.anyio
@pytest.mark.parametrize("family", [f for f in FAMILIES if f.process], ids=lambda f: f.name)
async def test_hostile_family_in_a_worker_process(family: Family, tmp_path: Path) -> None:
    await _run_family(family, "process", tmp_path)


def test_there_are_enough_families() -> None:
    assert len(FAMILIES) >= 30


# ------------------------------------------------------------------ the runtime alone


def _drive(rt: MontyRuntime, script: str, *, via_bytes: bool = False) -> tuple[Complete | Raised, str, int]:
    """Runs ``script`` answering every tool call with None (in place, or through ``dump`` and
    ``MontyRuntime.resume`` as a process worker or a recovery does); returns the last step,
    all the output and the number of advances."""
    step = rt.start(script)
    out, advances = [step.stdout], 1
    while isinstance(step, Call):
        step = rt.resume(step.call.dump(), ResumeValue(None)) if via_bytes else step.call.resume(ResumeValue(None))
        out.append(step.stdout)
        advances += 1
    assert isinstance(step, (Complete, Raised))
    return step, "".join(out), advances


@pytest.mark.parametrize("via_bytes", [False, True], ids=["in-place", "dump-and-load"])
def test_max_stdout_bounds_a_whole_run_across_tool_calls(via_bytes: bool) -> None:
    rt = MontyRuntime(max_stdout=1000)
    step, out, advances = _drive(
        rt, "for i in range(20):\n    print('a' * 300)\n    call_tool('t')\n'end'", via_bytes=via_bytes
    )
    assert isinstance(step, Complete) and step.value == "end"
    assert advances == 21
    assert out.count("[stdout truncated") == 1
    assert out.count("a") <= 1000
    assert out.index("[stdout truncated") >= 999  # the cut falls at the cap, not at an advance's end


def test_os_calls_have_their_own_budget_and_many_reads_pass(tmp_path: Path) -> None:
    for i in range(50):
        (tmp_path / f"f{i}.txt").write_text(str(i))
    rt = MontyRuntime(limits=ResourceLimits(max_os_calls=60), mounts=[Mount(virtual_path="/d", host_path=tmp_path)])
    reads = "from pathlib import Path\nsum(int(Path(f'/d/f{i}.txt').read_text()) for i in range(50))"
    done = rt.start(reads)
    assert isinstance(done, Complete) and done.value == sum(range(50))
    over = rt.start(
        "from pathlib import Path\nfor i in range(100):\n    try:\n        Path('/d/f0.txt').read_text()\n"
        "    except Exception:\n        pass"
    )
    assert isinstance(over, Raised)
    assert "max_os_calls=60" in over.message
    unlimited = MontyRuntime(limits=ResourceLimits(max_os_calls=None)).start(
        "import os\nfor i in range(2000):\n    os.getenv('X')\n1"
    )
    assert isinstance(unlimited, Complete)


@pytest.mark.parametrize("via_bytes", [False, True], ids=["in-place", "dump-and-load"])
def test_os_calls_count_across_the_advances_of_a_run(via_bytes: bool) -> None:
    rt = MontyRuntime(limits=ResourceLimits(max_os_calls=30))
    script = "import os\nfor i in range(10):\n    for j in range(5):\n        os.getenv('X')\n    call_tool('t')\n'end'"
    step, _out, advances = _drive(rt, script, via_bytes=via_bytes)
    assert isinstance(step, Raised) and "max_os_calls=30" in step.message
    assert advances == 7  # calls 31..35 fall in the seventh advance
