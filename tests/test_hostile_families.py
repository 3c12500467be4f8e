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

import json
import os
import subprocess
import sys
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
    address_space: int | None = None  # run in a child process under this RLIMIT_AS (bytes)


F = Family


def try_loop(statement: str, caught: str = "Exception") -> str:
    """``while True`` around ``statement`` in a ``try`` that swallows ``caught``."""
    return f"while True:\n    try:\n        {statement}\n    except {caught}:\n        pass"


TIME = ("TimeoutError", "time limit exceeded")
FORECAST = "so it was not started"  # an operation refused up front, before the limit
UNCAPPED = LIMITS.model_copy(update={"max_memory": None})
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
    # one big-integer operation is not interruptible: Monty forecasts its time before it
    # starts (the monty patch, ADR 0003) and refuses one that cannot end within the time left
    F("bigint-growth", "x = 3\nwhile True:\n    x = x * x", ("MemoryError", *TIME), long=False),
    F("bigint-square-at-once", "x = 1 << (1 << 27)\ny = x * x", (FORECAST,), long=False),
    F("bigint-pow", "x = 7 ** (1 << 25)", (FORECAST,), long=False),
    F("big-factorial", "import math\nx = math.factorial(10**7)", (FORECAST,), long=False),
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

# Without max_memory the budget is the machine's memory, so these would allocate gigabytes if
# the forecast did not refuse them: each runs in a child process under an address-space limit
# (an allocation the forecast let through fails there, and the child aborts).
GIB = 1 << 30
GIGABYTE_FAMILIES = [
    F("huge-repeat-uncapped", "s = 'a' * (1 << 33)", (FORECAST,), long=False, limits=UNCAPPED, address_space=4 * GIB),
    F("list-repeat-uncapped", "l = [0] * (1 << 30)", (FORECAST,), long=False, limits=UNCAPPED, address_space=4 * GIB),
    F(
        "bytes-repeat-uncapped",
        "b = b'ab' * (1 << 32)",
        (FORECAST,),
        long=False,
        limits=UNCAPPED,
        address_space=4 * GIB,
        process=True,
    ),
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


def run_in_child(family: Family, isolation: str, tmp_path: Path, job: str = "test") -> dict[str, Any]:
    """Runs ``family`` in a child Python under ``RLIMIT_AS = family.address_space`` (``job``
    "test": ``_run_family``, raising on a failed check; "measure": the benchmark's timing)
    and returns what the child printed (JSON), failing with its output when it did not end well."""
    code = (
        "import json, resource, sys, anyio\n"
        "from pathlib import Path\n"
        f"sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[1] / 'benchmarks')!r}]\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({family.address_space}, {family.address_space}))\n"
        "import test_hostile_families as fam\n"
        f"family = next(f for f in fam.GIGABYTE_FAMILIES if f.name == {family.name!r})\n"
        f"tmp = Path({str(tmp_path)!r})\n"
        f"if {job!r} == 'test':\n"
        f"    anyio.run(fam._run_family, family, {isolation!r}, tmp)\n"
        "    print(json.dumps({'ok': True}))\n"
        "else:\n"
        "    import hostile\n"
        f"    print(json.dumps(anyio.run(hostile.measure, family, {isolation!r}, tmp)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stdout[-2000:]}{done.stderr[-4000:]}"
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("family", GIGABYTE_FAMILIES, ids=lambda f: f.name)
def test_gigabyte_family_in_a_child_under_an_address_space_limit(family: Family, tmp_path: Path) -> None:
    assert run_in_child(family, "in_process", tmp_path) == {"ok": True}
    if family.process:
        (tmp_path / "data").rename(tmp_path / "data-in-process")
        assert run_in_child(family, "process", tmp_path) == {"ok": True}


@pytest.mark.skipif(
    os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") < 9 * GIB,
    reason="with under 9 GiB of memory Monty refuses the allocation itself (MemoryError)",
)
def test_the_address_space_limit_makes_an_unrefused_allocation_fail() -> None:
    """The child harness can fail: an allocation the forecast does not refuse (no time limit)
    exceeds the address-space limit, and the child does not end well."""
    code = (
        "import resource\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({4 * GIB}, {4 * GIB}))\n"
        "from codeact import MontyRuntime, ResourceLimits\n"
        "rt = MontyRuntime(limits=ResourceLimits(max_duration=None, max_memory=None))\n"
        "step = rt.start(\"s = 'a' * (1 << 33)\")\n"
        "print(type(step).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0, done.stdout  # the 8 GiB allocation failed: the process aborted


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
