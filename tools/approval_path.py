"""Which codeact files an approval enters before the approved tool runs, and how many times the
paused continuation is restored (issue 47's measure of the durable turn's one home).

Run: ``python tools/approval_path.py`` (prints the files in the order first entered and the
restore count); ``tests/test_approval_path.py`` asserts the limits.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import codeact
from codeact import CodeActAgent, FunctionTool, MontyRuntime, Runner, ScriptedModel, SqliteSessionService

PACKAGE = Path(codeact.__file__).resolve().parent
SCRIPT = '```python\nw = call_tool("wire", {"amount": 9})\n{"type": "final_result", "value": w}\n```'


class PathTrace:
    """Records the codeact source files whose Python functions are entered, in every thread,
    from ``start()`` until the tool is reached (``stop()``); files are relative to the package."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self._on = False

    def _profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        if not self._on or event != "call":
            return
        name = frame.f_code.co_filename
        if name.startswith(str(PACKAGE)):
            rel = str(Path(name).relative_to(PACKAGE))
            if rel not in self.files:
                self.files.append(rel)

    def start(self) -> None:
        self._on = True
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)

    def stop(self) -> None:
        self._on = False
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def count_restores(runtime: Any) -> list[int]:
    """Wraps ``runtime.restore`` and ``runtime.restore_session``; returns the list each call appends to."""
    counted: list[int] = []
    for name in ("restore", "restore_session"):
        real: Callable[..., Any] = getattr(runtime, name)

        def counting(*args: Any, _real: Callable[..., Any] = real, **kwargs: Any) -> Any:
            counted.append(1)
            return _real(*args, **kwargs)

        setattr(runtime, name, counting)
    return counted


async def measure_approval(db: Path) -> tuple[list[str], int, list[str]]:
    """Pauses a script at a confirmation-gated ``wire`` call on a SQLite store, then approves it
    with ``Runner.approve``. Returns (files entered before the tool, restores, what ran)."""
    trace = PathTrace()
    ran: list[str] = []

    def wire(amount: int) -> str:
        """Wires money."""
        trace.stop()
        ran.append(f"wire {amount}")
        return f"wired {amount}"

    runtime = MontyRuntime()
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([SCRIPT]),
        runtime=runtime,
        tools=[FunctionTool(wire, requires_confirmation=True)],
    )
    with SqliteSessionService(db) as service:
        runner = Runner(app_name="app", agent=agent, session_service=service, auto_create_session=True)
        async for _ in runner.run_async(user_id="u", session_id="s", new_message="go"):
            pass
        restores = count_restores(runtime)
        trace.start()
        try:
            async for _ in runner.approve(user_id="u", session_id="s"):
                pass
        finally:
            trace.stop()
    return trace.files, len(restores), ran


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        files, restores, ran = asyncio.run(measure_approval(Path(folder) / "s.db"))
    print(f"{len(files)} codeact files entered from Runner.approve before the tool; {restores} restore(s)")
    for name in files:
        print(f"  {name}")
    print(f"ran: {ran}")


if __name__ == "__main__":
    main()
