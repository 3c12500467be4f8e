"""Running interpreter steps without stalling the event loop.

A step (start, resume, dump) runs on a worker thread; the native core releases the GIL
while it interprets. The caller first waits a short, bounded time (``INLINE_WAIT``)
for the step, so short steps come back without an event-loop round trip; a longer step
is then awaited without blocking, so other tasks (heartbeats, other sessions) keep going.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread

__all__ = ("INLINE_WAIT", "run_step")

T = TypeVar("T")

INLINE_WAIT = 0.002
"""Seconds the caller blocks waiting for a step before yielding to the event loop."""

_EXECUTOR = concurrent.futures.ThreadPoolExecutor(
    max_workers=max(4, min(64, (os.cpu_count() or 2) * 4)), thread_name_prefix="codeact-step"
)


async def run_step(fn: Callable[..., T], *args: Any) -> T:
    """Runs ``fn(*args)`` on the step pool and returns its result.

    Blocks the calling event loop at most ``INLINE_WAIT`` seconds; past that, awaits the
    result without blocking. Exceptions raised by ``fn`` propagate.
    """
    future = _EXECUTOR.submit(fn, *args)
    try:
        return future.result(timeout=INLINE_WAIT)
    except concurrent.futures.TimeoutError:
        pass
    return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
