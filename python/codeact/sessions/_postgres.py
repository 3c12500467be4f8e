"""``PostgresSessionService``: sessions in a PostgreSQL database (psycopg 3, sync driver and
``psycopg_pool.ConnectionPool``, driven from anyio worker threads, so asyncio and trio both
work). Install it with ``pip install 'codeact[postgres]'``.

Layout (schema version 2; every table is prefixed ``codeact_`` so the database can be
shared)::

    codeact_schema_version(id = 1, version)
    codeact_sessions(app_name, user_id, id, create_time, last_update_time)
    codeact_events(seq IDENTITY, app_name, user_id, session_id, id, timestamp, data)
    codeact_session_state / codeact_user_state / codeact_app_state(..., key, value)
    codeact_turns(app_name, user_id, session_id, version, data, snapshot)   -- the turn slot
    codeact_journal(app_name, user_id, session_id, turn, kind, seq, data)
    codeact_blobs(app_name, user_id, session_id, digest, data)
    codeact_live(app_name, user_id, session_id, version, updated_at, data)  -- the live row (issue 51)

JSON is kept in ``TEXT`` columns, never ``jsonb``: ``jsonb`` refuses the ``\\u0000`` escape,
and a script may print ``chr(0)``. Rows of a session reference ``codeact_sessions`` with
``ON DELETE CASCADE``, so deleting a session deletes its events, state, slot, journal and
blobs in one statement. The schema is created (and later migrated) under a session-level
advisory lock, so workers starting at once do not race.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
import psycopg
import psycopg.conninfo
import psycopg.errors
import psycopg.pq
import pydantic
from anyio.lowlevel import RunVar
from psycopg_pool import ConnectionPool, PoolTimeout

from ..exceptions import SessionStoreConnectionError
from . import _sql
from ._journal import JournalRecord, StoredDecision, TurnSlot
from ._live import LiveRow, live_from_json, live_to_json
from ._postgres_sql import (
    _APPEND_EVENT_SQL,
    _JOURNAL_ONE_SQL,
    _JOURNAL_SQL,
    _LIVE_SAVE_SQL,
    _MIGRATIONS,
    _PK,
    _SCHEMA,
)
from ._service import (
    BaseSessionService,
    Durability,
    SessionExistsError,
    SessionNotFoundError,
    SessionStoreError,
    apply_append,
    check_durability,
    json_roundtrip_state,
    parse_turn,
    prepare_append,
    resolve_session_id,
    split_state,
    to_json,
    turn_conflict,
)
from ._types import Event, Session

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ("SCHEMA_VERSION", "PostgresSessionService")

SCHEMA_VERSION = 2
"""The database layout this version of codeact writes. A database with a newer layout is
refused; older layouts are migrated in place under the advisory lock (1 -> 2: the
``codeact_live`` table)."""

_T = TypeVar("_T")

_INLINE_WAIT = 0.002
"""Seconds a caller blocks waiting for a small operation (a journal record, the turn slot)
before yielding to the event loop."""

_LOCK_ID = 0x636F_6465_6163_7401 & 0x7FFF_FFFF_FFFF_FFFF  # "codeact\x01": the set-up advisory lock
_ATTEMPTS = 4  # attempts of one operation: a dropped connection, a deadlock, a serialization failure
_RETRY_STATES = {"40001", "40P01"}  # serialization_failure, deadlock_detected


def _describe(conninfo: str) -> str:
    """``PostgreSQL database 'db' at host:port`` from a URL or DSN, without the password."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "PostgreSQL database (unparsable URL)"
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    return f"PostgreSQL database {params.get('dbname') or params.get('user') or '?'!r} at {host}:{port}"


def _merged_state(conn: Connection[Any], app_name: str, user_id: str, session_id: str) -> dict[str, Any]:
    return _sql.merged_state(conn, _sql.POSTGRES, app_name, user_id, session_id)


class PostgresSessionService(BaseSessionService):
    """Sessions, events, scoped state and the durability store in a PostgreSQL database.

    Several services, processes and machines may share one database: claims are
    compare-and-set on the slot version, journal writes are fenced by it (row locks in one
    statement), appends lock the session row.

    Args:
        conninfo: a ``postgresql://user:password@host:port/dbname`` URL or a libpq
            ``key=value`` string. Required unless ``pool`` is given.
        pool: a ``psycopg_pool.ConnectionPool`` the host already has (opened by the host,
            never closed by this service). Its connections may be in autocommit mode or
            not; each operation runs in its own transaction. With a host pool each write
            also sets ``synchronous_commit`` for its transaction (one more round trip).
        durability: ``"process"`` (default): a write returns once the server has it
            (``synchronous_commit = off``): it survives the crash of any client or of the
            server process, and the last writes (up to three times the server's
            ``wal_writer_delay``, 200 ms by default) may be lost if the server's machine
            loses power. ``"power"``: every commit is flushed to disk first
            (``synchronous_commit = on``).
        min_size / max_size: connections the service's own pool keeps open / may open.
            The small operations (journal records, the turn slot) run on up to
            ``max_size`` worker threads of the service, each holding its own connection
            (opened on first use, prepared statements kept): up to ``2 * max_size``
            connections in all. With a host pool they check out from it instead.
        connect_timeout: seconds to wait for the server when connecting.
        timeout: seconds an operation waits for a free pool connection.

    The database is reached on the first call, in a worker thread: the connection is
    checked, then the tables are created (or migrated) under an advisory lock. Each call
    runs in a worker thread (``anyio.to_thread.run_sync``); a connection that dropped (a
    restarted server, ``pg_terminate_backend``), a deadlock or a serialization failure is
    retried up to 4 times in all: every operation is one transaction, so a failed attempt
    wrote nothing, and a write whose commit was lost in transit is recognized on the retry.

    Use it as a (sync or async) context manager, or call ``close()``.

    Raises (from every method):
        SessionStoreConnectionError: the server cannot be reached (wrong host or port, the
            server is down, authentication failed, the database does not exist), or the
            connection kept dropping through the retries. ``psycopg``'s error is chained.
        SessionStoreError: the URL is invalid, the database has a newer schema version,
            another database error, or the service is closed.
    """

    def __init__(
        self,
        conninfo: str | None = None,
        *,
        pool: ConnectionPool[Any] | None = None,
        durability: Durability = "process",
        min_size: int = 1,
        max_size: int = 4,
        connect_timeout: float = 10.0,
        timeout: float = 30.0,
    ) -> None:
        check_durability(durability)
        if (conninfo is None) == (pool is None):
            raise ValueError("pass exactly one of conninfo (a postgresql:// URL) and pool")
        self._durability: Durability = durability
        host_conninfo = getattr(pool, "conninfo", "")  # a str, or a callable in newer psycopg-pool
        self._conninfo: str = (
            conninfo if conninfo is not None else (host_conninfo if isinstance(host_conninfo, str) else "")
        )
        self._describe = _describe(self._conninfo)
        self._host_pool = pool
        self._pool: ConnectionPool[Any] | None = pool
        self._ready = False
        self._closed = False
        self._min_size, self._max_size = min_size, max_size
        self._connect_timeout, self._timeout = connect_timeout, timeout
        self._open_lock = threading.Lock()
        self._workers: concurrent.futures.ThreadPoolExecutor | None = None
        self._local = threading.local()  # a worker thread's own connection (quick operations)
        self._worker_conns: list[Connection[Any]] = []
        self._sync_commit = "on" if durability == "power" else "off"
        self._append_lock: RunVar[anyio.Lock] = RunVar(f"codeact.PostgresSessionService[{id(self):x}].append")

    @property
    def durability(self) -> Durability:
        """``"process"`` or ``"power"`` (see the class docs)."""
        return self._durability

    def __repr__(self) -> str:
        return f"PostgresSessionService({self._describe})"

    # --- connection ------------------------------------------------------------------

    def _connection_error(self, e: BaseException, doing: str) -> SessionStoreError:
        text = str(e).strip() or type(e).__name__
        if isinstance(e, psycopg.ProgrammingError) and not isinstance(e, psycopg.errors.UndefinedTable):
            return SessionStoreError(f"invalid PostgreSQL connection string for {self._describe}: {text}")
        return SessionStoreConnectionError(f"{self._describe}: {doing}: {text}")

    def _open(self) -> ConnectionPool[Any]:
        with self._open_lock:
            if self._closed:
                raise SessionStoreError(f"{self!r} is closed")
            if self._pool is not None and self._ready:
                return self._pool
            if self._host_pool is None:
                # One direct connection first: its error names the cause (refused, no such
                # database, authentication), where a pool would only time out.
                try:
                    conn = psycopg.connect(
                        self._conninfo, autocommit=True, connect_timeout=max(1, round(self._connect_timeout))
                    )
                except psycopg.Error as e:
                    raise self._connection_error(e, "cannot connect") from e
                try:
                    self._set_up(conn)
                finally:
                    conn.close()
                self._pool = ConnectionPool(
                    self._conninfo,
                    min_size=self._min_size,
                    max_size=self._max_size,
                    timeout=self._timeout,
                    kwargs=self._connect_kwargs(),
                    name=f"codeact-{id(self):x}",
                    open=True,
                )
            else:
                try:
                    with self._host_pool.connection(timeout=self._timeout) as conn:
                        self._set_up(conn)
                except PoolTimeout as e:
                    raise self._connection_error(e, "no connection from the pool") from e
                except psycopg.OperationalError as e:
                    raise self._connection_error(e, "setting up the schema") from e
            self._ready = True
            assert self._pool is not None
            return self._pool

    def _connect_kwargs(self) -> dict[str, Any]:
        return {
            "autocommit": True,
            "options": f"-c synchronous_commit={self._sync_commit}",
            "connect_timeout": max(1, round(self._connect_timeout)),
            "application_name": "codeact",
        }

    def _worker_connection(self) -> Connection[Any]:
        """The calling worker thread's own connection (autocommit, opened on first use):
        the quick operations skip the pool's checkout and keep their prepared statements."""
        conn: Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        conn = psycopg.connect(self._conninfo, **self._connect_kwargs())
        with self._open_lock:
            if self._closed:
                conn.close()
                raise SessionStoreError(f"{self!r} is closed")
            self._worker_conns.append(conn)
        self._local.conn = conn
        return conn

    def _drop_worker_connection(self) -> None:
        conn: Connection[Any] | None = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with self._open_lock:
                if conn in self._worker_conns:
                    self._worker_conns.remove(conn)
            conn.close()

    def _set_up(self, conn: Connection[Any]) -> None:
        """Creates or migrates the tables, under an advisory lock held around the transaction
        (several workers starting at once: one creates, the others wait and find them)."""
        autocommit = conn.autocommit
        try:
            with conn.transaction():
                if self._current_version(conn) == SCHEMA_VERSION:
                    return
            # A session-level lock taken before the transaction starts: a transaction begun
            # after another worker's set-up committed sees its tables (one that began before
            # would hold stale catalog cache entries: "relation does not exist" after the wait).
            conn.autocommit = True
            conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_ID,))
            try:
                self._create_or_migrate(conn)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_ID,))
        except psycopg.OperationalError as e:
            raise self._connection_error(e, "setting up the schema") from e
        except psycopg.Error as e:
            raise SessionStoreError(f"{self._describe}: setting up the schema: {e}") from e
        finally:
            if not conn.closed and not conn.broken:
                conn.autocommit = autocommit

    def _create_or_migrate(self, conn: Connection[Any]) -> None:
        """Creates the tables or migrates them, in one transaction (the set-up lock held)."""
        with conn.transaction():
            version = self._current_version(conn)
            if version is None:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS codeact_schema_version "
                    "(id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
                )
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO codeact_schema_version (id, version) VALUES (1, %s)", (SCHEMA_VERSION,))
            elif version > SCHEMA_VERSION:
                raise SessionStoreError(
                    f"{self._describe} has codeact schema version {version}; this codeact supports "
                    f"version {SCHEMA_VERSION} and older"
                )
            elif version < SCHEMA_VERSION:
                for migration in _MIGRATIONS[version - 1 :]:
                    for statement in migration.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                conn.execute("UPDATE codeact_schema_version SET version = %s WHERE id = 1", (SCHEMA_VERSION,))

    @staticmethod
    def _current_version(conn: Connection[Any]) -> int | None:
        if conn.execute("SELECT to_regclass('codeact_schema_version')").fetchone() == (None,):
            return None
        row = conn.execute("SELECT version FROM codeact_schema_version WHERE id = 1").fetchone()
        return int(row[0]) if row is not None else None

    def _run(
        self,
        fn: Callable[[Connection[Any], bool], _T],
        *,
        write: bool,
        single: bool = False,
        own: bool = False,
    ) -> _T:
        """``fn(conn, retrying)`` in one transaction on a pooled connection, in the calling
        (worker) thread; ``single``: ``fn`` runs one statement, which needs no explicit
        transaction on an autocommit connection of the service's own pool. Retries a dropped
        connection, a deadlock or a serialization failure (``retrying`` is then True, so a
        write can recognize its own earlier commit). Maps ``psycopg`` errors to
        ``SessionStoreError``."""
        pool = self._open()
        last: BaseException | None = None
        for attempt in range(_ATTEMPTS):
            if self._closed:
                raise SessionStoreError(f"{self!r} is closed")
            try:
                if own and self._host_pool is None:
                    conn = self._worker_connection()
                    try:
                        return fn(conn, attempt > 0)
                    finally:
                        if conn.broken or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                            self._drop_worker_connection()
                with pool.connection(timeout=self._timeout) as conn:
                    if single and conn.autocommit and self._host_pool is None:
                        return fn(conn, attempt > 0)
                    with conn.transaction():
                        if write and self._host_pool is not None:
                            conn.execute(f"SET LOCAL synchronous_commit = {self._sync_commit}")
                        return fn(conn, attempt > 0)
            except PoolTimeout as e:
                raise self._connection_error(e, f"no free connection after {self._timeout:g} s") from e
            except psycopg.OperationalError as e:
                if e.sqlstate in _RETRY_STATES or e.sqlstate is None or e.sqlstate.startswith(("08", "57P")):
                    # a deadlock, a serialization failure, a connection failure (class 08),
                    # a shutdown or a termination (57P0x): the transaction did not commit
                    # (or its commit is recognized on the retry)
                    if e.sqlstate not in _RETRY_STATES:
                        pool.check()  # drop the other dead connections too (a restarted server)
                    last = e
                    time.sleep(0.01 * 2**attempt)
                    continue
                raise SessionStoreError(f"{self._describe}: {e}") from e
            except psycopg.Error as e:
                raise SessionStoreError(f"{self._describe}: {e}") from e
            except pydantic.ValidationError as e:
                raise SessionStoreError(f"{self._describe}: unreadable stored event: {e}") from e
        assert last is not None
        raise self._connection_error(last, f"the operation failed {_ATTEMPTS} times (nothing was written)") from last

    async def _call(self, fn: Callable[[Connection[Any], bool], _T], *, write: bool, single: bool = False) -> _T:
        def run() -> _T:
            return self._run(fn, write=write, single=single)

        return await anyio.to_thread.run_sync(run)

    async def _call_quick(self, fn: Callable[[Connection[Any], bool], _T], *, write: bool) -> _T:
        """Like ``_call`` for one-statement operations (journal records, the turn slot): the
        call runs on this service's own worker threads and the caller blocks up to
        ``_INLINE_WAIT`` seconds for it (no event-loop round trip for a quick answer), then
        awaits it without blocking."""
        with self._open_lock:
            if self._closed:
                raise SessionStoreError(f"{self!r} is closed")
            if self._workers is None:
                self._workers = concurrent.futures.ThreadPoolExecutor(
                    self._max_size, thread_name_prefix="codeact-postgres"
                )
            future = self._workers.submit(self._run, fn, write=write, single=True, own=True)
        try:
            return future.result(timeout=_INLINE_WAIT)
        except concurrent.futures.TimeoutError:
            pass
        return await anyio.to_thread.run_sync(future.result)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        """Closes the service's own pool (idempotent; a host's pool is left open). Later
        calls raise ``SessionStoreError``."""
        with self._open_lock:
            self._closed = True
            pool, self._pool = self._pool, None
            workers, self._workers = self._workers, None
        if workers is not None:
            workers.shutdown(wait=True)
        with self._open_lock:
            conns, self._worker_conns = self._worker_conns, []
        for conn in conns:
            conn.close()
        if pool is not None and self._host_pool is None:
            pool.close()

    # --- the service -----------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        sid = resolve_session_id(session_id)
        scoped = split_state(json_roundtrip_state(state or {}, "initial state"))
        key = (app_name, user_id, sid)
        now = time.time()

        def txn(conn: Connection[Any], retrying: bool) -> Session:
            row = conn.execute(
                "INSERT INTO codeact_sessions (app_name, user_id, id, create_time, last_update_time) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                (*key, now, now),
            ).fetchone()
            if row is None:
                mine = retrying and conn.execute(
                    "SELECT create_time = %s FROM codeact_sessions WHERE app_name = %s AND user_id = %s AND id = %s",
                    (now, *key),
                ).fetchone() == (True,)
                if not mine:
                    raise SessionExistsError(f"session {sid!r} already exists for app {app_name!r}, user {user_id!r}")
            else:
                _sql.write_state(conn, _sql.POSTGRES, key, scoped, "initial state")
            return Session(
                id=sid,
                app_name=app_name,
                user_id=user_id,
                state=_merged_state(conn, *key),
                last_update_time=now,
            )

        return await self._call(txn, write=True)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        after_timestamp: float | None = None,
        num_recent_events: int | None = None,
    ) -> Session | None:
        key = (app_name, user_id, session_id)

        def txn(conn: Connection[Any], retrying: bool) -> Session | None:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = conn.execute(
                "SELECT last_update_time FROM codeact_sessions WHERE app_name = %s AND user_id = %s AND id = %s", key
            ).fetchone()
            if row is None:
                return None
            sql, params = _sql.events_query(_sql.POSTGRES, key, after_timestamp, num_recent_events)
            events = [Event.model_validate_json(data) for (data,) in conn.execute(sql, params)]
            return Session(
                id=session_id,
                app_name=app_name,
                user_id=user_id,
                state=_merged_state(conn, *key),
                events=events,
                last_update_time=row[0],
            )

        return await self._call(txn, write=False)

    async def list_sessions(self, *, app_name: str, user_id: str | None) -> list[Session]:
        def txn(conn: Connection[Any], retrying: bool) -> list[Session]:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            sql = "SELECT user_id, id, last_update_time FROM codeact_sessions WHERE app_name = %s"
            params: list[Any] = [app_name]
            if user_id is not None:
                sql += " AND user_id = %s"
                params.append(user_id)
            rows = conn.execute(sql + " ORDER BY ord", params).fetchall()
            return [
                Session(
                    id=sid,
                    app_name=app_name,
                    user_id=user,
                    state=_merged_state(conn, app_name, user, sid),
                    last_update_time=last,
                )
                for user, sid, last in rows
            ]

        return await self._call(txn, write=False)

    async def list_turns(self, *, app_name: str, user_id: str | None = None) -> list[tuple[str, str]]:
        def txn(conn: Connection[Any], retrying: bool) -> list[tuple[str, str]]:
            sql, params = _sql.turns_query(_sql.POSTGRES, app_name, user_id)
            return [(u, s) for u, s in conn.execute(sql, params)]

        return await self._call(txn, write=False, single=True)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        def txn(conn: Connection[Any], retrying: bool) -> None:
            conn.execute(
                "DELETE FROM codeact_sessions WHERE app_name = %s AND user_id = %s AND id = %s",
                (app_name, user_id, session_id),
            )

        await self._call(txn, write=True, single=True)

    async def append_event(self, session: Session, event: Event) -> Event:
        prepared = prepare_append(event)
        lock = self._append_lock.get(None)
        if lock is None:
            lock = anyio.Lock()
            self._append_lock.set(lock)
        delta = prepared.delta
        if delta.app or delta.user or delta.session or self._host_pool is not None:
            fast: dict[str, Any] | None = None
        else:
            fast = {
                "a": session.app_name,
                "u": session.user_id,
                "s": session.id,
                "id": prepared.stored.id,
                "ts": prepared.stored.timestamp,
                "data": prepared.json,
            }

        def txn(conn: Connection[Any], retrying: bool) -> float:
            if fast is not None:  # one statement on the worker's autocommit connection
                row = conn.execute(
                    _APPEND_EVENT_SQL, {**fast, "seen": session.last_update_time, "now": time.time()}, prepare=True
                ).fetchone()
                if row is not None:
                    return float(row[0])
                with conn.transaction():  # nothing written: the transaction says why (or writes)
                    return _sql.append_event(conn, _sql.POSTGRES, session, prepared, retrying=retrying)
            return _sql.append_event(conn, _sql.POSTGRES, session, prepared, retrying=retrying)

        async with lock:
            if fast is not None:
                update_time = await self._call_quick(txn, write=True)
            else:
                update_time = await self._call(txn, write=True)
            # no checkpoint between the commit and here: the live session reflects the store
            apply_append(session, prepared, update_time)
        return prepared.stored

    # --- durability --------------------------------------------------------------------

    async def load_turn(self, *, app_name: str, user_id: str, session_id: str) -> TurnSlot | None:
        def txn(conn: Connection[Any], retrying: bool) -> TurnSlot | None:
            return _sql.slot_of(
                conn.execute(
                    f"SELECT version, data, snapshot FROM codeact_turns WHERE {_PK}", (app_name, user_id, session_id)
                ).fetchone()
            )

        return await self._call_quick(txn, write=False)

    async def save_turn(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        data: dict[str, Any] | None,
        snapshot: bytes | None,
        expected_version: int,
    ) -> int:
        text = to_json(data, "the turn record") if data is not None else None
        key = (app_name, user_id, session_id)
        blob = bytes(snapshot) if snapshot is not None and text is not None else None

        def txn(conn: Connection[Any], retrying: bool) -> int:
            if text is None:
                if expected_version == 0:
                    row = None
                else:
                    row = conn.execute(
                        f"UPDATE codeact_turns SET data = NULL, snapshot = NULL WHERE {_PK} AND version = %s "
                        "AND data IS NOT NULL RETURNING 0",
                        (*key, expected_version),
                    ).fetchone()
            elif expected_version == 0:
                try:
                    row = conn.execute(
                        "INSERT INTO codeact_turns AS t (app_name, user_id, session_id, version, data, snapshot) "
                        "VALUES (%s, %s, %s, 1, %s, %s) ON CONFLICT (app_name, user_id, session_id) DO UPDATE "
                        "SET version = t.version + 1, data = EXCLUDED.data, snapshot = EXCLUDED.snapshot "
                        "WHERE t.data IS NULL RETURNING version",
                        (*key, text, blob),
                    ).fetchone()
                except psycopg.errors.ForeignKeyViolation as e:
                    raise SessionNotFoundError(
                        f"session {session_id!r} not found for app {app_name!r}, user {user_id!r}"
                    ) from e
            else:
                row = conn.execute(
                    f"UPDATE codeact_turns SET version = version + 1, data = %s, snapshot = %s WHERE {_PK} "
                    "AND version = %s AND data IS NOT NULL RETURNING version",
                    (text, blob, *key, expected_version),
                ).fetchone()
            if row is not None:
                return int(row[0])
            # Nothing written: find out why (one more query, off the fast path).
            if (
                conn.execute(
                    "SELECT 1 FROM codeact_sessions WHERE app_name = %s AND user_id = %s AND id = %s", key
                ).fetchone()
                is None
            ):
                raise SessionNotFoundError(f"session {session_id!r} not found for app {app_name!r}, user {user_id!r}")
            stored = conn.execute(f"SELECT version, data FROM codeact_turns WHERE {_PK}", key).fetchone()
            current = int(stored[0]) if stored is not None and stored[1] is not None else 0
            if text is None and current == 0:
                if expected_version == 0 or retrying:
                    return 0  # nothing to delete, or the first attempt deleted it
            elif retrying and stored is not None and stored[1] == text and current == expected_version + 1:
                return current  # the first attempt's commit landed before its connection dropped
            raise turn_conflict(session_id, expected_version, current)

        return await self._call_quick(txn, write=True)

    async def append_journal(
        self, session: Session, turn: str, records: list[JournalRecord], *, expected_version: int | None = None
    ) -> None:
        params: dict[str, Any] = {
            "a": session.app_name,
            "u": session.user_id,
            "s": session.id,
            "t": turn,
            "ev": expected_version,
        }
        if len(records) == 1:
            sql = _JOURNAL_ONE_SQL
            params.update(kind=records[0].kind, seq=records[0].seq, data=records[0].data)
        else:
            sql = _JOURNAL_SQL
            params.update(
                kinds=[r.kind for r in records], seqs=[r.seq for r in records], datas=[r.data for r in records]
            )

        def txn(conn: Connection[Any], retrying: bool) -> None:
            try:
                row = conn.execute(sql, params, prepare=True).fetchone()
            except psycopg.errors.ForeignKeyViolation as e:
                raise SessionNotFoundError(
                    f"session {session.id!r} not found for app {session.app_name!r}, user {session.user_id!r}"
                ) from e
            assert row is not None
            if expected_version is not None and int(row[0]) != expected_version:
                raise turn_conflict(session.id, expected_version, int(row[0]))

        await self._call_quick(txn, write=True)

    async def commit_turn(
        self,
        session: Session,
        turn: str,
        records: list[JournalRecord],
        *,
        data: dict[str, Any],
        snapshot: bytes | None,
        expected_version: int,
    ) -> int:
        """``BaseSessionService.commit_turn`` in one transaction (the slot's row locked; the
        flow shared with SQLite: ``codeact.sessions._sql``)."""
        text = to_json(data, "the turn record")
        key = (session.app_name, session.user_id, session.id)
        blob = bytes(snapshot) if snapshot is not None else None

        def txn(conn: Connection[Any], retrying: bool) -> int:
            # one statement (the dialect's ``commit``): atomic on a worker's own autocommit
            # connection; the rare conflict's explanation reads the rows after it
            return _sql.commit_turn(
                conn, _sql.POSTGRES, key, turn, records, text, blob, expected_version, retrying=retrying
            )

        return await self._call_quick(txn, write=True)

    async def renew_claim(
        self, *, app_name: str, user_id: str, session_id: str, version: int, renewed_at: float
    ) -> None:
        key = (app_name, user_id, session_id)

        def txn(conn: Connection[Any], retrying: bool) -> None:
            row = conn.execute(f"SELECT version, data FROM codeact_turns WHERE {_PK} FOR UPDATE", key).fetchone()
            current = int(row[0]) if row is not None and row[1] is not None else 0
            data = parse_turn(row[1]) if row is not None and row[1] is not None else {}
            if current != version or not isinstance(data.get("claim"), dict):
                raise turn_conflict(session_id, version, current)
            data["claim"]["renewed_at"] = renewed_at
            conn.execute(f"UPDATE codeact_turns SET data = %s WHERE {_PK}", (to_json(data, "the turn record"), *key))

        await self._call(txn, write=True)

    async def read_journal(self, *, app_name: str, user_id: str, session_id: str, turn: str) -> list[JournalRecord]:
        def txn(conn: Connection[Any], retrying: bool) -> list[JournalRecord]:
            return _sql.journal_of(
                conn.execute(
                    f"SELECT kind, seq, data FROM codeact_journal WHERE {_PK} AND turn = %s",
                    (app_name, user_id, session_id, turn),
                ).fetchall()
            )

        return await self._call_quick(txn, write=False)

    async def list_decisions(
        self, *, app_name: str, user_id: str | None = None, session_id: str | None = None
    ) -> list[StoredDecision]:
        """``BaseSessionService.list_decisions`` in one query.

        Raises:
            SessionStoreError: the store failed.
        """

        def txn(conn: Connection[Any], retrying: bool) -> list[StoredDecision]:
            sql = (
                "SELECT user_id, session_id, turn, seq, data FROM codeact_journal "
                "WHERE app_name = %s AND kind = 'decision'"
            )
            params: list[Any] = [app_name]
            if user_id is not None:
                sql += " AND user_id = %s"
                params.append(user_id)
            if session_id is not None:
                sql += " AND session_id = %s"
                params.append(session_id)
            return [
                StoredDecision(u, sid, t, JournalRecord("decision", int(q), d))
                for u, sid, t, q, d in conn.execute(sql, params).fetchall()
            ]

        return await self._call(txn, write=False)

    async def put_blob(self, *, app_name: str, user_id: str, session_id: str, digest: str, data: bytes) -> None:
        def txn(conn: Connection[Any], retrying: bool) -> None:
            try:
                conn.execute(
                    "INSERT INTO codeact_blobs (app_name, user_id, session_id, digest, data) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (app_name, user_id, session_id, digest, bytes(data)),
                )
            except psycopg.errors.ForeignKeyViolation as e:
                raise SessionNotFoundError(
                    f"session {session_id!r} not found for app {app_name!r}, user {user_id!r}"
                ) from e

        await self._call(txn, write=True, single=True)

    async def get_blob(self, *, app_name: str, user_id: str, session_id: str, digest: str) -> bytes | None:
        def txn(conn: Connection[Any], retrying: bool) -> bytes | None:
            row = conn.execute(
                f"SELECT data FROM codeact_blobs WHERE {_PK} AND digest = %s", (app_name, user_id, session_id, digest)
            ).fetchone()
            return bytes(row[0]) if row is not None else None

        return await self._call(txn, write=False, single=True)

    # --- the live row (issue 51) -------------------------------------------------------

    async def save_live(self, *, app_name: str, user_id: str, session_id: str, live: LiveRow | None) -> int:
        """``BaseSessionService.save_live``: one upsert (or delete) of the ``codeact_live`` row,
        committed with ``synchronous_commit`` as the service's durability says.

        Raises:
            SessionNotFoundError: the session does not exist (writing a row).
            SessionStoreError: PostgreSQL failed.
        """
        key = (app_name, user_id, session_id)
        text = live_to_json(live) if live is not None else None

        def txn(conn: Connection[Any], retrying: bool) -> int:
            if text is None:
                conn.execute(f"DELETE FROM codeact_live WHERE {_PK}", key)
                return 0
            try:
                row = conn.execute(_LIVE_SAVE_SQL, (*key, time.time(), text)).fetchone()
            except psycopg.errors.ForeignKeyViolation as e:
                raise SessionNotFoundError(
                    f"session {session_id!r} not found for app {app_name!r}, user {user_id!r}"
                ) from e
            assert row is not None
            return int(row[0])

        return await self._call_quick(txn, write=True)

    async def load_live(self, *, app_name: str, user_id: str, session_id: str) -> LiveRow | None:
        """``BaseSessionService.load_live``: the session's live row, or None.

        Raises:
            SessionStoreError: PostgreSQL failed.
        """

        def txn(conn: Connection[Any], retrying: bool) -> LiveRow | None:
            row = conn.execute(
                f"SELECT version, updated_at, data FROM codeact_live WHERE {_PK}", (app_name, user_id, session_id)
            ).fetchone()
            return live_from_json(row[2], int(row[0]), float(row[1])) if row is not None else None

        return await self._call(txn, write=False, single=True)
