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

__all__ = ("INLINE_WAIT", "PendingStep", "await_ticket", "run_step", "submit_step")

T = TypeVar("T")

INLINE_WAIT = 0.002
"""Seconds the caller blocks waiting for a step before yielding to the event loop."""

_EXECUTOR = concurrent.futures.ThreadPoolExecutor(
    max_workers=max(4, min(64, (os.cpu_count() or 2) * 4)), thread_name_prefix="codeact-step"
)


async def await_ticket(ticket: Any, *, waited: bool = False) -> Any:
    """The step of a native ``StepTicket`` (``start_async`` / ``resume_async``): waits up to
    ``INLINE_WAIT`` seconds in place (unless the caller did: ``waited``), then without
    blocking the event loop. Exceptions of the advance propagate."""
    if waited or not ticket.wait(INLINE_WAIT):
        await anyio.to_thread.run_sync(ticket.wait, None, abandon_on_cancel=True)
    return ticket.result()


class PendingStep:
    """A step handed to a worker (``submit_step``); ``result`` awaits it."""

    __slots__ = ("_error", "_future", "_ticket")

    def __init__(self, ticket: Any = None, future: Any = None, error: BaseException | None = None) -> None:
        self._ticket = ticket
        self._future = future
        self._error = error

    async def result(self) -> Any:
        """The step's result: waits up to ``INLINE_WAIT`` seconds in place, then without
        blocking the event loop.

        Raises:
            Exception: what the step raised (also an exception raised while handing it over).
        """
        if self._error is not None:
            raise self._error
        if self._ticket is not None:
            return await await_ticket(self._ticket)
        try:
            return self._future.result(timeout=INLINE_WAIT)
        except concurrent.futures.TimeoutError:
            pass
        return await anyio.to_thread.run_sync(self._future.result, abandon_on_cancel=True)


def submit_step(fn: Callable[..., Any], *args: Any) -> PendingStep:
    """Hands ``fn(*args)`` to a worker and returns at once; ``await pending.result()`` gives
    its result (the caller may do other work meanwhile, such as storing an event).

    When ``fn`` is a method whose object also offers ``<name>_async`` (``MontyRuntime`` and
    its pending calls do), that native variant runs the advance on a worker thread that never
    takes the GIL and hands back a ticket; otherwise ``fn`` runs on a Python thread pool.
    An exception raised while handing the step over is raised by ``result``, as if the step
    had raised it. A step never awaited runs to its first stop and is dropped.
    """
    owner = getattr(fn, "__self__", None)
    native = getattr(owner, f"{getattr(fn, '__name__', '')}_async", None) if owner is not None else None
    try:
        if native is not None:
            return PendingStep(ticket=native(*args))
        return PendingStep(future=_EXECUTOR.submit(fn, *args))
    except Exception as exc:  # handed to the caller with the result
        return PendingStep(error=exc)


async def run_step(fn: Callable[..., T], *args: Any) -> T:
    """Runs ``fn(*args)`` off the event loop and returns its result (``submit_step``, then
    its ``result``): the calling event loop blocks at most ``INLINE_WAIT`` seconds; past
    that, the result is awaited without blocking. Exceptions raised by ``fn`` propagate.
    """
    result: T = await submit_step(fn, *args).result()
    return result
