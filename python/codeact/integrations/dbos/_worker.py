"""``Worker``: a process that runs a codeact ``Runner``'s calls as DBOS workflows.

Each workflow is one ``Runner`` call (``run_async``, or ``decide`` with the ``Decision`` an
approve, deny, complete or resolve request names) with the caller's run key, and nothing else:
no DBOS steps. What ran is recorded in codeact's journal (the session store), which is what
makes a workflow that DBOS starts again after a crash safe: the ``Runner`` call with the same run key recovers
the interrupted run (a tool whose outcome is recorded never runs again) or replays a
finished one.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import AsyncGenerator
from contextlib import ExitStack, aclosing
from typing import Any, Literal

import anyio
import anyio.from_thread
import pydantic

from ...agent._context import RunConfig
from ...events import Content, Event
from ...exceptions import AlreadyResumingError, CodeActError, SessionNotFoundError, SessionStoreConnectionError
from ...runner import Runner
from ...turns import Decision
from ._protocol import (
    DBOS_APP_NAME,
    RUN_KINDS,
    TAGGED,
    RunKind,
    RunRequest,
    RunResult,
    application_version,
    default_queue,
    workflow_name,
)
from ._recovery import DeadWorkerRecovery

__all__ = ("Worker",)

_log = logging.getLogger("codeact.integrations.dbos")

_current: Worker | None = None
_current_lock = threading.Lock()


def _workflow(kind: RunKind) -> Any:
    from dbos import DBOS

    def workflow(request: dict[str, Any]) -> dict[str, Any]:
        worker = _current
        if worker is None:
            raise RuntimeError("a codeact workflow ran in a process without a started codeact Worker")
        return worker._execute(kind, request)

    workflow.__name__ = workflow.__qualname__ = f"codeact_{kind}"
    return DBOS.workflow(name=workflow_name(kind))(workflow)


_WORKFLOWS: dict[str, Any] = {}


def _register_workflows() -> None:
    """Registers the workflows with DBOS once per process (before ``DBOS.launch``)."""
    if not _WORKFLOWS:
        for kind in RUN_KINDS:
            _WORKFLOWS[kind] = _workflow(kind)


class Worker:
    """Runs ``runner``'s calls as DBOS workflows from the queue of its app.

    The queue is partitioned by session with a partition concurrency of 1: at most one
    workflow of a session runs at a time across all workers, in the order they were
    enqueued. One worker per process (DBOS is a process-wide singleton).

    Args:
        runner: the ``Runner`` every workflow calls; its ``session_service`` must be shared
            by all workers (a ``PostgresSessionService`` on the same database).
        database_url: the PostgreSQL database for DBOS's system tables (``postgresql://…``;
            it may be the session store's database: DBOS uses its own ``dbos`` schema).
        queue_name: the queue (default ``codeact-<app_name>``, as the client helpers use).
        concurrency: workflows one worker runs at once (DBOS keeps the queue's
            ``worker_concurrency`` with the queue: the worker started last sets it for all).
        backend: the event loop the ``Runner`` calls run on, in a thread of their own:
            ``"asyncio"`` or ``"trio"``.
        polling_interval: seconds between two looks of a worker at the queue (the delay
            before a newly enqueued workflow starts, at most).
        recovery_interval: seconds between two recovery sweeps (``DeadWorkerRecovery``).
        claim_retries: how often a call that finds its session's turn held (the claim of a
            runner on another host that stopped, whose lease has not run out yet) waits
            for the lease and tries again before it fails.
        dbos_config: more ``DBOSConfig`` entries (e.g. ``{"log_level": "INFO"}``).
        streaming: run each call with ``RunConfig(streaming=True)``, so the session's live row
            shows the reply and the output as they come to a watcher (the web timeline of
            ``codeact serve`` on the same store; docs/events.md "The live row"). The partial
            events themselves are dropped: a workflow's result holds the stored events only.

    ``start()`` / ``stop()``, or use it as a context manager (stop waits up to 30 s).
    """

    def __init__(
        self,
        runner: Runner,
        *,
        database_url: str,
        queue_name: str | None = None,
        concurrency: int = 8,
        backend: Literal["asyncio", "trio"] = "asyncio",
        polling_interval: float = 0.1,
        recovery_interval: float = 1.0,
        claim_retries: int = 5,
        dbos_config: dict[str, Any] | None = None,
        streaming: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency!r}")
        if backend not in ("asyncio", "trio"):
            raise ValueError(f"backend must be 'asyncio' or 'trio', not {backend!r}")
        self.runner = runner
        self.database_url = database_url
        self.queue_name = queue_name or default_queue(runner.app_name)
        self.concurrency = concurrency
        self.backend = backend
        self.polling_interval = polling_interval
        self.claim_retries = claim_retries
        self.executor_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.recovery = DeadWorkerRecovery(
            database_url, queue_name=self.queue_name, interval=recovery_interval, on_lost=self._lost
        )
        self._dbos_config = dict(dbos_config or {})
        self.streaming = streaming
        self._stack = ExitStack()
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._active = 0
        self._active_lock = threading.Lock()
        self.lost = threading.Event()
        """Set when this worker lost its liveness lock (see ``DeadWorkerRecovery.on_lost``)."""

    @property
    def active(self) -> int:
        """Workflows running on this worker now."""
        return self._active

    def _lost(self, exc: BaseException) -> None:
        self.lost.set()

    def start(self) -> None:
        """Takes this worker's liveness lock, starts the event loop thread, launches DBOS
        and starts dequeuing and recovering; returns once DBOS polls the queue.

        Raises:
            RuntimeError: another ``Worker`` runs in this process.
            psycopg.Error: the database cannot be reached.
        """
        global _current
        from dbos import DBOS

        with _current_lock:
            if _current is not None:
                raise RuntimeError("a codeact Worker runs in this process already (DBOS is one per process)")
            _current = self
        try:
            _register_workflows()
            self.recovery.hold(self.executor_id)
            self._stack.callback(self.recovery.stop, unregister=False)
            self._portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal(self.backend))
            config: Any = {  # a DBOSConfig (a TypedDict), with the caller's entries
                "name": DBOS_APP_NAME,
                "system_database_url": self.database_url,
                "executor_id": self.executor_id,
                "application_version": application_version(),
                "log_level": "WARNING",
                **self._dbos_config,
            }
            DBOS(config=config)
            DBOS.launch()
            DBOS.register_queue(
                self.queue_name,
                partition_concurrency=1,
                worker_concurrency=self.concurrency,
                polling_interval_sec=self.polling_interval,
                on_conflict="always_update",
            )
            _wait_listening(self.queue_name)
            self.recovery.start()
        except BaseException:
            self._close(0)
            raise

    def stop(self, grace: float = 30.0) -> bool:
        """Stops dequeuing, waits up to ``grace`` seconds for the running workflows, and
        shuts DBOS down. Returns whether every workflow finished. When some did not, they
        stay PENDING under this worker's id and are recovered by another worker once this
        process ends: end it then (``os._exit``) rather than going on running them."""
        return self._close(grace)

    def _close(self, grace: float) -> bool:
        global _current
        from dbos import DBOS

        try:
            DBOS.destroy(workflow_completion_timeout_sec=max(0, int(grace + 0.999)))
        except Exception as exc:  # pragma: no cover - shutdown is best effort
            _log.warning("DBOS shutdown failed: %s", exc)
        drained = self._active == 0
        if drained:
            self.recovery.stop(unregister=True)
            self._stack.close()
        else:
            _log.warning("%d run(s) still in flight on %s: left for recovery", self._active, self.executor_id)
        with _current_lock:
            if _current is self:
                _current = None
        return drained

    def __enter__(self) -> Worker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ one workflow

    def _execute(self, kind: RunKind, raw: dict[str, Any]) -> dict[str, Any]:
        from dbos import DBOS

        request = RunRequest.model_validate(raw, context=TAGGED)
        portal = self._portal
        if portal is None:
            raise RuntimeError("the codeact Worker is not started")
        with self._active_lock:
            self._active += 1
        try:
            result = portal.call(self._call, kind, request, DBOS.workflow_id or "")
        finally:
            with self._active_lock:
                self._active -= 1
        return result.model_dump(mode="json")

    def _events(self, kind: RunKind, r: RunRequest) -> AsyncGenerator[Event, None]:
        runner, user, sid, key = self.runner, r.user_id, r.session_id, r.run_key
        config = RunConfig(streaming=True) if self.streaming else None
        if kind == "run":
            message = Content.model_validate(r.message) if isinstance(r.message, dict) else r.message
            return runner.run_async(user_id=user, session_id=sid, new_message=message, run_key=key, run_config=config)
        return runner.decide(_decision(kind, r), user_id=user, session_id=sid, run_config=config)

    async def _call(self, kind: RunKind, r: RunRequest, workflow: str) -> RunResult:
        if r.app_name != self.runner.app_name:
            return RunResult(
                workflow_id=workflow,
                status="failed",
                error_type="ValueError",
                error=f"this worker serves app {self.runner.app_name!r}, not {r.app_name!r}",
            )
        attempt = 0
        while True:
            events: list[Event] = []
            try:
                async with aclosing(self._events(kind, r)) as stream:
                    async for event in stream:
                        if not event.partial:  # a live preview (streaming): the live row shows it
                            events.append(event)
                paused = bool(events) and bool(events[-1].interrupted or events[-1].long_running_tool_ids)
                return RunResult.from_events(events, workflow, await self._pending(r) if paused else None)
            except (AlreadyResumingError, SessionStoreConnectionError) as exc:
                attempt += 1
                if events or attempt > self.claim_retries:
                    _log.warning("workflow %s failed: %s: %s", workflow, type(exc).__name__, exc)
                    return _failed(exc, workflow, events)
                delay = await self._wait_for(exc, r)
                _log.warning("workflow %s: %s; trying again in %.1f s", workflow, exc, delay)
                await anyio.sleep(delay)
            except (CodeActError, pydantic.ValidationError) as exc:
                _log.warning("workflow %s failed: %s: %s", workflow, type(exc).__name__, exc)
                return _failed(exc, workflow, events)

    async def _pending(self, r: RunRequest) -> list[Any]:
        """The session's pending calls as the verified turn lists them ([] for no session)."""
        try:
            return await self.runner.pending(user_id=r.user_id, session_id=r.session_id)
        except SessionNotFoundError:
            return []

    async def _wait_for(self, exc: Exception, r: RunRequest) -> float:
        """Seconds to wait before trying again: until the held claim's lease runs out (a
        runner on another host that stopped), or one second (the store was unreachable)."""
        if isinstance(exc, AlreadyResumingError):
            try:
                info = await self.runner.turn_info(user_id=r.user_id, session_id=r.session_id)
            except CodeActError:
                info = None
            if info is not None and info.claim is not None:
                return min(max(info.claim.expires_at - self.runner.clock(), 0.0), info.claim.lease) + 0.1
        return 1.0


def _decision(kind: RunKind, r: RunRequest) -> Decision:
    """The ``Decision`` a decision workflow sends through ``Runner.decide``.

    Raises:
        pydantic.ValidationError: a request whose fields the verb does not take.
    """
    common: dict[str, Any] = {"call_key": r.call_key, "actor": r.actor, "run_key": r.run_key}
    if kind == "approve":
        return Decision(verb="approve", digest=r.digest, **common)
    if kind == "deny":
        return Decision(verb="deny", digest=r.digest, reason=r.reason or None, **common)
    if kind == "complete":
        return Decision(verb="complete", payload=r.value if r.error is None else None, error=r.error, **common)
    return Decision(
        verb="resolve",
        action=r.action,
        payload=r.value if r.action == "skip" else None,
        reason=r.reason or None,
        digest=r.digest,
        **common,
    )


def _wait_listening(queue_name: str, timeout: float = 5.0) -> None:
    """Waits (at most ``timeout`` seconds) until DBOS's thread polling ``queue_name`` runs:
    DBOS starts it up to a second after the queue is registered. Best effort: it looks for
    the thread by the name DBOS 3 gives it, and returns at the timeout otherwise."""
    import time

    deadline = time.monotonic() + timeout
    name = f"queue-worker-{queue_name}"
    while time.monotonic() < deadline:
        if any(t.name == name for t in threading.enumerate()):
            return
        time.sleep(0.02)


def _failed(exc: BaseException, workflow: str, events: list[Event]) -> RunResult:
    return RunResult(
        workflow_id=workflow,
        status="failed",
        text=events[-1].text if events else "",
        events=len(events),
        error_type=type(exc).__name__,
        error=str(exc),
    )
