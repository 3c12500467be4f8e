"""``DeadWorkerRecovery``: a worker that died mid-run has its workflows recovered by another.

DBOS recovers a crashed process's workflows when that same process (the same executor id)
starts again, or through its hosted Conductor. Workers started and stopped by a scheduler
come back under new ids, so the workers recover each other instead:

- each worker holds a PostgreSQL session-level advisory lock named after its executor id, on
  a connection of its own, from before it dequeues anything until it exits. A process that
  dies loses its connection, and the server releases the lock at once (same host, or any
  host whose kernel closes the socket); a machine that vanishes is noticed when TCP
  keepalives give up on the connection (about 25 s with the settings used here);
- each worker, every ``interval`` seconds, lists the executors registered in the
  ``codeact_dbos_executors`` table, tries each one's lock, and for a lock it gets (its
  holder is gone) hands that executor's PENDING workflows back to their queue, where
  exactly one live worker dequeues each. The executor's row is deleted once none of its
  workflows is left pending.

The one private DBOS call this needs, ``DBOS._recover_pending_workflows``, is made here and
nowhere else; ``tests/test_dbos.py`` runs it against the pinned DBOS major version.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ("DeadWorkerRecovery",)

_log = logging.getLogger("codeact.integrations.dbos")

_LOCK_SPACE = 0x636F6465  # "code": the first half of each advisory lock key

_DDL = """
CREATE TABLE IF NOT EXISTS codeact_dbos_executors (
    executor_id TEXT PRIMARY KEY,
    queue_name TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


class DeadWorkerRecovery:
    """Liveness of the workers of a queue, and recovery of a dead worker's workflows.

    Args:
        database_url: the PostgreSQL database holding DBOS's system tables
            (``postgresql://…``).
        queue_name: the queue the workers serve (recorded with each executor).
        interval: seconds between two sweeps of the background thread (``start``).
        on_lost: called (from the background thread, with the error) when this worker's
            own lock connection is lost: other workers may then recover its workflows, so
            the worker should stop at once (``codeact worker`` exits).

    Use ``hold(executor_id)`` before ``DBOS.launch()`` (so no workflow is dequeued under an
    id whose lock is not held), then ``start()`` once DBOS is launched; ``stop()`` at the end
    (it releases the lock: call it only once this worker runs nothing any more, or let the
    process exit). ``sweep()`` is one recovery pass, also callable directly.

    Raises (from ``hold`` and ``sweep``):
        psycopg.Error: the database cannot be reached.
    """

    def __init__(
        self,
        database_url: str,
        *,
        queue_name: str,
        interval: float = 1.0,
        on_lost: Callable[[BaseException], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive seconds, not {interval!r}")
        self.database_url = database_url
        self.queue_name = queue_name
        self.interval = interval
        self.on_lost = on_lost
        self.executor_id: str | None = None
        self._holder: Any = None
        self._prober: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _connect(self) -> Any:
        import psycopg

        # TCP keepalives: a connection to a vanished machine is given up after about 25 s
        return psycopg.connect(
            self.database_url,
            autocommit=True,
            keepalives=1,
            keepalives_idle=10,
            keepalives_interval=5,
            keepalives_count=3,
        )

    def hold(self, executor_id: str) -> None:
        """Registers ``executor_id`` for this queue and takes its lock (held until ``stop``
        or the process ends).

        Raises:
            RuntimeError: this object holds an executor already, or the lock of
                ``executor_id`` is held by another live process.
        """
        import os
        import socket

        if self._holder is not None:
            raise RuntimeError(f"already holding executor {self.executor_id!r}")
        conn = self._connect()
        try:
            conn.execute(_DDL)
            (got,) = conn.execute(
                "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (_LOCK_SPACE, executor_id)
            ).fetchone()
            if not got:
                raise RuntimeError(f"executor {executor_id!r} is held by another live process")
            conn.execute(
                "INSERT INTO codeact_dbos_executors (executor_id, queue_name, host, pid) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (executor_id) DO UPDATE SET host = excluded.host, pid = excluded.pid",
                (executor_id, self.queue_name, socket.gethostname(), os.getpid()),
            )
        except BaseException:
            conn.close()
            raise
        self._holder, self.executor_id = conn, executor_id

    def dead_executors(self) -> list[str]:
        """The registered executors of this queue whose lock nobody holds (their process is
        gone). Each lock is released again at once."""
        if self._prober is None or self._prober.closed:
            self._prober = self._connect()
            self._prober.execute(_DDL)
        conn = self._prober
        rows = conn.execute(
            "SELECT executor_id FROM codeact_dbos_executors WHERE queue_name = %s AND executor_id <> %s",
            (self.queue_name, self.executor_id or ""),
        ).fetchall()
        dead: list[str] = []
        for (executor,) in rows:
            (got,) = conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (_LOCK_SPACE, executor)).fetchone()
            if got:
                conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_LOCK_SPACE, executor))
                dead.append(executor)
        return dead

    def sweep(self) -> list[str]:
        """One pass: the PENDING workflows of every dead executor of this queue go back to
        their queue (each then runs again on one live worker, from the start: a codeact
        workflow is one ``Runner`` call, which resumes from codeact's journal). Returns the
        ids of the workflows handed back. Needs a launched DBOS in this process."""
        from dbos import DBOS

        recovered: list[str] = []
        for executor in self.dead_executors():
            # The one private DBOS call (see the module docs): re-enqueues the executor's
            # PENDING workflows of this application version; idempotent across workers.
            handles = DBOS._recover_pending_workflows([executor])
            recovered += [h.get_workflow_id() for h in handles]
            left = DBOS.list_workflows(status="PENDING", executor_id=executor, load_input=False, load_output=False)
            if not left:
                assert self._prober is not None
                self._prober.execute("DELETE FROM codeact_dbos_executors WHERE executor_id = %s", (executor,))
            if handles:
                _log.warning("recovered %d workflow(s) of dead worker %s", len(handles), executor)
        return recovered

    def _check_holder(self) -> None:
        self._holder.execute("SELECT 1")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._check_holder()
            except Exception as exc:
                _log.error("worker %s lost its liveness lock: %s", self.executor_id, exc)
                if self.on_lost is not None:
                    self.on_lost(exc)
                return
            try:
                self.sweep()
            except Exception as exc:  # a failed pass is retried on the next one
                _log.warning("recovery sweep failed: %s", exc)
                if self._prober is not None:
                    self._prober.close()
                    self._prober = None

    def start(self) -> None:
        """Starts the background thread: a sweep every ``interval`` seconds, and a check
        that this worker's own lock connection is alive."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="codeact-dbos-recovery", daemon=True)
            self._thread.start()

    def stop(self, *, unregister: bool = True) -> None:
        """Stops the thread and releases this executor's lock. ``unregister``: also delete
        its row (only when none of its workflows is left pending: with the row kept, the
        other workers recover them once the lock is gone)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        for conn in (self._prober, self._holder):
            if conn is not None and not conn.closed:
                if conn is self._holder and unregister and self.executor_id is not None:
                    try:
                        conn.execute("DELETE FROM codeact_dbos_executors WHERE executor_id = %s", (self.executor_id,))
                    except Exception:  # the lock goes with the connection anyway
                        pass
                conn.close()
        self._prober = self._holder = None
