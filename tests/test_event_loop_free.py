"""The event loop stays free while a script computes: the interpreter runs on a worker
thread with the GIL released, so other tasks keep their timing."""

from __future__ import annotations

import time

import anyio
import pytest

from agent_helpers import fence, run
from codeact import CodeActAgent, MontyRuntime, ResourceLimits, ScriptedModel

pytestmark = pytest.mark.anyio

LOOP = 15_000_000  # about a second of interpreter time

SCRIPT = f"""
total = 0
for i in range({LOOP}):
    total += i
{{"type": "final_result", "value": total}}
"""


async def test_event_loop_stays_free_during_a_long_script() -> None:
    model = ScriptedModel([fence(SCRIPT)])
    runtime = MontyRuntime(limits=ResourceLimits(max_duration=60))
    agent = CodeActAgent(name="coder", model=model, runtime=runtime)
    worst = 0.0
    beats = 0
    done = False

    async def heartbeat() -> None:
        nonlocal worst, beats
        while not done:
            start = time.perf_counter()
            await anyio.sleep(0.005)
            worst = max(worst, time.perf_counter() - start - 0.005)
            beats += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        await anyio.sleep(0.02)
        started = time.perf_counter()
        events, _, _ = await run(agent)
        elapsed = time.perf_counter() - started
        done = True

    assert events[-1].text == str(sum(range(LOOP)))
    assert elapsed > 0.3, "the script should take a while for this test to mean anything"
    assert beats >= elapsed / 0.05
    assert worst < 0.1, f"worst heartbeat delay {worst * 1000:.1f} ms"
