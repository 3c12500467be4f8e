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

from ._seam import ThreadTicket

__all__ = ("INLINE_WAIT", "await_ticket", "run_step", "start_step", "usable_cores")

T = TypeVar("T")

INLINE_WAIT = 0.002
"""Seconds the caller blocks waiting for a step before yielding to the event loop."""


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one, else
    the machine's count), at least 1: what worker counts are bounded by (issue 54)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


_EXECUTOR = concurrent.futures.ThreadPoolExecutor(
    max_workers=max(4, min(64, usable_cores() * 4)), thread_name_prefix="codeact-step"
)


async def await_ticket(ticket: Any, *, waited: bool = False) -> Any:
    """The step of a native ``StepTicket`` (``start_async`` / ``resume_async``): waits up to
    ``INLINE_WAIT`` seconds in place (unless the caller did: ``waited``), then without
    blocking the event loop. Exceptions of the advance propagate."""
    if waited or not ticket.wait(INLINE_WAIT):
        await anyio.to_thread.run_sync(ticket.wait, None, abandon_on_cancel=True)
    return ticket.result()


async def run_step(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Runs ``fn(*args, **kwargs)`` off the event loop and returns its result.

    When ``fn`` is a method whose object also offers ``<name>_async`` (``MontyRuntime`` and
    its pending calls do), that native variant runs the advance on a worker thread that never
    takes the GIL and hands back a ticket; otherwise ``fn`` runs on a Python thread pool.
    Either way the calling event loop blocks at most ``INLINE_WAIT`` seconds; past that, the
    result is awaited without blocking. Exceptions raised by ``fn`` propagate. ``kwargs`` go
    to whichever runs (``on_output=`` for ``MontyRuntime.start``: ``start_async`` takes it too).
    """
    owner = getattr(fn, "__self__", None)
    native = getattr(owner, f"{getattr(fn, '__name__', '')}_async", None) if owner is not None else None
    if native is not None:
        result: T = await await_ticket(native(*args, **kwargs))
        return result
    future = _EXECUTOR.submit(fn, *args, **kwargs)
    try:
        return future.result(timeout=INLINE_WAIT)
    except concurrent.futures.TimeoutError:
        pass
    return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)


def start_step(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Starts ``fn(*args, **kwargs)`` off the event loop as ``run_step`` does and returns its
    ticket at once (``done``, ``wait(timeout)``, ``result()``): for a caller that has work to
    do while the step runs (the live output of ``RunConfig(streaming=True)``)."""
    owner = getattr(fn, "__self__", None)
    native = getattr(owner, f"{getattr(fn, '__name__', '')}_async", None) if owner is not None else None
    if native is not None:
        return native(*args, **kwargs)
    return ThreadTicket(_EXECUTOR.submit(fn, *args, **kwargs))
