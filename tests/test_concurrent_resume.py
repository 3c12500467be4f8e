"""Two runners resuming the same paused session at once: the approved tool runs once.

The suspension is claimed by compare-and-set on the session's turn slot before any tool runs;
the runners that lose the race get ``AlreadyResumingError`` before any side effect (in this
process; tests/test_faults.py runs the two-process form).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from codeact import (
    CodeActAgent,
    FunctionTool,
    MontyRuntime,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.exceptions import AlreadyResumingError

pytestmark = pytest.mark.anyio


class LoadTogether(SqliteSessionService):
    """Holds every ``get_session`` until ``parties`` callers have loaded the session."""

    def __init__(self, path: Path, barrier: dict[str, Any]) -> None:
        super().__init__(path)
        self.barrier = barrier

    async def get_session(self, **kwargs: Any) -> Any:
        session = await super().get_session(**kwargs)
        self.barrier["loaded"] += 1
        if self.barrier["loaded"] >= self.barrier["parties"]:
            self.barrier["event"].set()
        await self.barrier["event"].wait()
        return session


async def test_concurrent_approvals_run_the_tool_once(tmp_path: Path) -> None:
    sent: list[str] = []

    def send(to: str) -> str:
        """Sends.

        Args:
            to: recipient.
        """
        sent.append(to)
        return "ok"

    script = '```python\nr = call_tool("send", {"to": "ops"})\n{"type": "final_result", "value": r}\n```'

    def agent() -> CodeActAgent:
        return CodeActAgent(
            name="a",
            model=ScriptedModel([script]),
            runtime=MontyRuntime(),
            tools=[FunctionTool(send, requires_confirmation=True)],
        )

    db = tmp_path / "s.db"
    with SqliteSessionService(db) as service:
        runner = Runner(app_name="app", agent=agent(), session_service=service, auto_create_session=True)
        events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go")]
    (key,) = events[-1].actions.requested_tool_confirmations

    barrier: dict[str, Any] = {"loaded": 0, "parties": 3, "event": anyio.Event()}
    outcomes: list[str] = []

    async def approve() -> None:
        with LoadTogether(db, barrier) as service:
            runner = Runner(app_name="app", agent=agent(), session_service=service)
            try:
                async for _ in runner.run_async(
                    user_id="u", session_id="s", run_config=RunConfig(tool_confirmation_decisions={key: True})
                ):
                    pass
                outcomes.append("done")
            except AlreadyResumingError:
                outcomes.append("lost")

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(approve)
    assert sent == ["ops"], sent
    assert sorted(outcomes) == ["done", "lost", "lost"]
