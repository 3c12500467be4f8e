"""Keeping the event loop free while a script makes stops the host answers (issue 20).

A script can stop at the host thousands of times a second (a loop of tool calls, of unknown
tool names caught by ``try/except``): each stop is answered in microseconds, so a driver
that awaits nothing slow would hold the event loop for the whole loop, and every other
session in the process would stall. ``StopPacer.pace`` is called once per stop: it yields to
the event loop (``anyio.sleep(0)``) whenever ``PACE_SECONDS`` have passed since it last did,
whatever the script does; the budgets that end such a loop (``max_tool_calls``,
``max_script_seconds``) are checked by the driver at every stop, known tool or not.
"""

from __future__ import annotations

import time

import anyio

__all__ = ("PACE_SECONDS", "StopPacer")

PACE_SECONDS = 0.002
"""Longest stretch, in seconds, the driver runs stops without yielding to the event loop."""


class StopPacer:
    """Yields to the event loop between stops at least every ``PACE_SECONDS``.

    One per turn drive; ``pace`` costs a clock read when no yield is due.
    """

    __slots__ = ("last", "yields")

    def __init__(self) -> None:
        self.last = time.monotonic()  # when it last yielded (the driver reads it to skip ``due``)
        self.yields = 0  # how often it yielded (for tests and benchmarks)

    def due(self) -> bool:
        """Whether ``PACE_SECONDS`` passed since the last yield (a clock read): the caller
        awaits ``pace`` only then, and so skips creating a coroutine per stop."""
        return time.monotonic() - self.last >= PACE_SECONDS

    async def pace(self) -> None:
        """Yields to the event loop when ``PACE_SECONDS`` passed since the last yield."""
        now = time.monotonic()
        if now - self.last >= PACE_SECONDS:
            await anyio.sleep(0)
            self.yields += 1
            self.last = time.monotonic()
