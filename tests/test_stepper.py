"""``run_step`` (``codeact.runtime._stepper``): a step handed to a worker comes back with its
result or its exception, on the real interpreter's native workers and on the thread pool;
and the agent stores a model reply before it starts the script (nothing of the script runs
while its reply is not stored), so a start that fails ends the run after the reply."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from codeact import CodeActAgent, Complete, InMemorySessionService, MontyRuntime, Runner, ScriptedModel
from codeact.runtime._stepper import run_step

pytestmark = pytest.mark.anyio


async def test_a_native_step_runs_on_a_worker_and_returns_its_result() -> None:
    runtime = MontyRuntime()
    step = await run_step(runtime.start, "1 + 1", "main.py")
    assert isinstance(step, Complete) and step.value == 2


async def test_a_plain_callable_runs_on_the_pool_off_the_calling_thread() -> None:
    caller = threading.get_ident()
    seen: list[int] = []

    def work(x: int) -> int:
        seen.append(threading.get_ident())
        return x * 2

    assert await run_step(work, 21) == 42
    assert seen and seen[0] != caller


async def test_the_step_raises_through_result() -> None:
    def boom() -> None:
        raise ValueError("inside the step")

    with pytest.raises(ValueError, match="inside the step"):
        await run_step(boom)


class FailingStart(MontyRuntime):
    """A runtime whose start cannot be handed over (a host failure)."""

    def start_async(self, script: str, script_name: str = "main.py", **kwargs: Any) -> Any:
        raise OSError("no worker")


async def test_the_model_reply_is_stored_before_a_start_error_ends_the_run() -> None:
    agent = CodeActAgent(
        name="a",
        model=ScriptedModel(['```python\n{"type": "final_result", "value": 1}\n```']),
        runtime=FailingStart(),
    )
    service = InMemorySessionService()
    runner = Runner(app_name="app", agent=agent, session_service=service)
    await service.create_session(app_name="app", user_id="u", session_id="s")
    seen = []
    with pytest.raises(OSError, match="no worker"):
        async for event in runner.run_async(user_id="u", session_id="s", new_message="go"):
            seen.append(event)
    stored = await service.get_session(app_name="app", user_id="u", session_id="s")
    assert stored is not None
    kinds = [(e.custom_metadata or {}).get("codeact_kind") for e in stored.events]
    assert kinds[-1] == "model_reply"  # the reply was stored, then the start's error ended the run
    assert [e.id for e in seen] == [e.id for e in stored.events[1:]]
