"""``SqliteSessionService``: sessions in a SQLite database file (stdlib ``sqlite3``).

Layout (schema version 3; a version 1 or 2 file is upgraded in place)::

    schema_version(id = 1, version)
    sessions(app_name, user_id, id, create_time, last_update_time)   -- PK (app_name, user_id, id)
    events(seq AUTOINCREMENT, app_name, user_id, session_id, id, timestamp, data)  -- data: Event JSON
    session_state(app_name, user_id, session_id, key, value)          -- value: JSON
    user_state(app_name, user_id, key, value)
    app_state(app_name, key, value)
    turns(app_name, user_id, session_id, version, data, snapshot)      -- the turn slot (SPEC §5)
    journal(app_name, user_id, session_id, turn, kind, seq, data)      -- WITHOUT ROWID
    blobs(app_name, user_id, session_id, digest, data)                 -- values above the inline limit
    live(app_name, user_id, session_id, version, updated_at, data)     -- the live row (issue 51)

State keys are stored with their prefixes. The database runs in WAL mode with a 5 s busy
timeout (``synchronous=NORMAL`` unless FULL is asked for); writes use
``BEGIN IMMEDIATE`` and are retried when the database stays locked, so
several services and processes can share one file.
"""

from __future__ import annotations

import concurrent.futures
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import anyio
import anyio.to_thread
import pydantic
from anyio.lowlevel import RunVar

from . import _sql
from ._journal import JournalRecord, StoredDecision, TurnSlot
from ._live import LiveRow, live_from_json, live_to_json
from ._service import (
    BaseSessionService,
    Durability,
    JournalAppender,
    SessionExistsError,
    SessionNotFoundError,
    SessionStoreError,
    apply_append,
    check_durability,
    json_roundtrip_state,
    prepare_append,
    resolve_session_id,
    split_state,
    to_json,
    turn_conflict,
)
from ._types import Event, Session

__all__ = ("SCHEMA_VERSION", "SqliteSessionService")

SCHEMA_VERSION = 3
"""The database layout this version of codeact writes. A newer file is refused; a version 1
file (codeact 0.1.0) is upgraded in place (the durability tables are added), and a version 2
file too (the ``live`` table is added)."""

_INLINE_WAIT = 0.002
"""Seconds a caller blocks waiting for a journal write before yielding to the event loop."""

_T = TypeVar("_T")

_INLINE_SNAPSHOT = 64 * 1024
"""The largest continuation ``save_turn`` writes on the calling thread (bytes)."""

_FENCE = (
    "SELECT ?, ?, ?, ?, ?, ?, ? WHERE coalesce((SELECT CASE WHEN data IS NOT NULL THEN version ELSE 0 END "
    "FROM turns WHERE app_name = ? AND user_id = ? AND session_id = ?), 0) = ?"
)
_JOURNAL_COLUMNS = "journal (app_name, user_id, session_id, turn, kind, seq, data)"
_FENCED_RECORD = f"INSERT OR REPLACE INTO {_JOURNAL_COLUMNS} {_FENCE}"
"""One journal record, written only while the turn slot is at the given version (an
empty slot counts as version 0): the same fence ``append_journal``'s transaction checks."""
_FENCED_OUTCOME = f"INSERT OR IGNORE INTO {_JOURNAL_COLUMNS} {_FENCE}"
"""The same for an outcome or a batch, which never replaces one already stored (first writer wins)."""

_BUSY_TIMEOUT_MS = 5000
_MAX_ATTEMPTS = 8  # attempts of one operation while the database stays locked

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    id TEXT NOT NULL,
    create_time REAL NOT NULL,
    last_update_time REAL NOT NULL,
    PRIMARY KEY (app_name, user_id, id)
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    timestamp REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_session ON events (app_name, user_id, session_id, seq);
CREATE TABLE IF NOT EXISTS session_state (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, key)
);
CREATE TABLE IF NOT EXISTS user_state (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, key)
);
CREATE TABLE IF NOT EXISTS app_state (
    app_name TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (app_name, key)
);
CREATE TABLE IF NOT EXISTS turns (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    data TEXT,
    snapshot BLOB,
    PRIMARY KEY (app_name, user_id, session_id)
);
CREATE TABLE IF NOT EXISTS journal (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn TEXT NOT NULL,
    kind TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, turn, kind, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blobs (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, digest)
);
CREATE TABLE IF NOT EXISTS live (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id)
) WITHOUT ROWID;
"""


def _is_locked(e: sqlite3.OperationalError) -> bool:
    msg = str(e).lower()
    return "locked" in msg or "busy" in msg


def _run_in_transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], _T], *, write: bool) -> _T:
    """``fn(conn)`` inside ``BEGIN IMMEDIATE`` (write) or ``BEGIN`` (read) ... ``COMMIT``;
    rolled back when anything raises."""
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the transaction may already be gone (e.g. SQLITE_FULL rolls back itself)
        raise
    return result


class SqliteSessionService(BaseSessionService):
    """Sessions, events and scoped state in a SQLite database file.

    Args:
        path: the database file; created (with its tables) on first use. ``":memory:"``
            gives a private in-memory database.
        durability: ``"process"`` (default; SQLite's ``synchronous = NORMAL`` in WAL mode):
            a commit survives a crash of the process, and the last commits before a power
            loss or OS crash may be lost. ``"power"`` (``synchronous = FULL``): each commit
            is fsynced (slower per journal record) and survives a power loss.
        synchronous: the same choice by SQLite's name (``"NORMAL"`` / ``"FULL"``); give one
            of the two.

    The connection is opened lazily on the first call, in a worker thread; every call runs
    in a worker thread (``anyio.to_thread.run_sync``) on the one connection, serialized by
    a lock. ``append_event`` writes the event and its state delta in one ``BEGIN
    IMMEDIATE`` transaction. Several instances and processes may use the same file.

    Use it as a (sync or async) context manager, or call ``close()``.

    Raises (from every method):
        SessionStoreError: the file cannot be opened, is not a database, has a newer schema
            version, stays locked past the retries, or the service is closed. The
            ``sqlite3.Error`` is chained as ``__cause__``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability | None = None,
        synchronous: Literal["NORMAL", "FULL"] | None = None,
    ) -> None:
        if synchronous is not None and synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}")
        if durability is not None:
            check_durability(durability)
            implied: Literal["NORMAL", "FULL"] = "FULL" if durability == "power" else "NORMAL"
            if synchronous is not None and synchronous != implied:
                raise ValueError(f"durability={durability!r} means synchronous={implied!r}, not {synchronous!r}")
            synchronous = implied
        self._synchronous: Literal["NORMAL", "FULL"] = synchronous or "NORMAL"
        self.durability: Durability = "power" if self._synchronous == "FULL" else "process"
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._inline_conn: sqlite3.Connection | None = None
        self._inline_lock = threading.Lock()
        self._path = os.fspath(path)
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._lock = threading.Lock()  # guards the connection, taken in worker threads
        # serializes append_event within one event loop, so the stale check, the write and
        # the update of the live Session happen as one step for tasks sharing a Session
        self._append_lock: RunVar[anyio.Lock] = RunVar(f"codeact.SqliteSessionService[{id(self):x}].append")

    @property
    def path(self) -> str:
        """The database file path."""
        return self._path

    def __repr__(self) -> str:
        return f"SqliteSessionService({self._path!r})"

    # --- connection ------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            _run_in_transaction(conn, self._init_schema, write=True)
        except BaseException:
            conn.close()
            raise
        return conn

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version "
            "(id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
        )
        row = conn.execute("SELECT version FROM schema_version WHERE id = 1").fetchone()
        if row is None:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO schema_version (id, version) VALUES (1, ?)", (SCHEMA_VERSION,))
        elif row[0] in (1, 2):  # every table of _SCHEMA is created IF NOT EXISTS: the missing ones are added
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("UPDATE schema_version SET version = ? WHERE id = 1", (SCHEMA_VERSION,))
        elif row[0] != SCHEMA_VERSION:
            raise SessionStoreError(
                f"session database {self._path!r} has schema version {row[0]}; this codeact supports "
                f"version {SCHEMA_VERSION} only"
            )

    def _run(self, fn: Callable[[sqlite3.Connection], _T], *, write: bool) -> _T:
        """Run ``fn`` in a transaction, in the calling (worker) thread, retrying while the
        database is locked. Maps ``sqlite3.Error`` to ``SessionStoreError``."""
        with self._lock:
            for attempt in range(1, _MAX_ATTEMPTS + 1):
                if self._closed:
                    raise SessionStoreError(f"{self!r} is closed")
                try:
                    if self._conn is None:
                        self._conn = self._connect()
                    return _run_in_transaction(self._conn, fn, write=write)
                except sqlite3.OperationalError as e:
                    if _is_locked(e) and attempt < _MAX_ATTEMPTS:
                        time.sleep(min(0.5, 0.01 * 2**attempt) * (0.5 + random.random()))
                        continue
                    raise SessionStoreError(f"session database {self._path!r}: {e}") from e
                except sqlite3.Error as e:
                    raise SessionStoreError(f"session database {self._path!r}: {e}") from e
                except pydantic.ValidationError as e:
                    raise SessionStoreError(f"session database {self._path!r}: unreadable stored event: {e}") from e
            raise AssertionError("unreachable")  # pragma: no cover

    async def _call(self, fn: Callable[[sqlite3.Connection], _T], *, write: bool) -> _T:
        def run() -> _T:
            return self._run(fn, write=write)

        return await anyio.to_thread.run_sync(run)

    async def _call_quick(self, fn: Callable[[sqlite3.Connection], _T], *, write: bool) -> _T:
        """Like ``_call`` for small transactions (journal records): the call runs on this
        service's writer thread and the caller blocks up to ``_INLINE_WAIT`` seconds for it
        (no event-loop round trip for a quick commit), then awaits it without blocking."""
        if self._writer is None:
            self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="codeact-sqlite")
        future = self._writer.submit(self._run, fn, write=write)
        try:
            return future.result(timeout=_INLINE_WAIT)
        except concurrent.futures.TimeoutError:
            pass
        return await anyio.to_thread.run_sync(future.result)

    def __del__(self) -> None:
        # A service dropped without close() (a CLI command, a script) closes its connections
        # instead of leaving them to the garbage collector (a ResourceWarning on 3.13).
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        """Close the connection (idempotent; waits for a call in progress). Later calls
        raise ``SessionStoreError``."""
        if self._writer is not None:
            self._writer.shutdown(wait=True)
        with self._inline_lock:
            if self._inline_conn is not None:
                self._inline_conn.close()
                self._inline_conn = None
        with self._lock:
            self._closed = True
            if self._conn is not None:
                conn, self._conn = self._conn, None
                conn.close()

    # --- reads -----------------------------------------------------------------------

    @staticmethod
    def _merged_state(conn: sqlite3.Connection, app_name: str, user_id: str, session_id: str) -> dict[str, Any]:
        return _sql.merged_state(conn, _sql.SQLITE, app_name, user_id, session_id)

    # --- the service -----------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """``BaseSessionService.create_session`` in one SQLite transaction (run in a worker thread).

        Raises:
            SessionExistsError: ``session_id`` is taken for this app and user.
            SessionStoreError: SQLite failed or a state value is not JSON-serializable.
        """
        sid = resolve_session_id(session_id)
        scoped = split_state(json_roundtrip_state(state or {}, "initial state"))

        def txn(conn: sqlite3.Connection) -> Session:
            now = time.time()
            try:
                conn.execute(
                    "INSERT INTO sessions (app_name, user_id, id, create_time, last_update_time) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (app_name, user_id, sid, now, now),
                )
            except sqlite3.IntegrityError as e:
                raise SessionExistsError(
                    f"session {sid!r} already exists for app {app_name!r}, user {user_id!r}"
                ) from e
            _sql.write_state(conn, _sql.SQLITE, (app_name, user_id, sid), scoped, "initial state")
            return Session(
                id=sid,
                app_name=app_name,
                user_id=user_id,
                state=self._merged_state(conn, app_name, user_id, sid),
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
        """``BaseSessionService.get_session``: the session with its filtered events, or ``None``.

        Raises:
            SessionStoreError: SQLite failed.
        """

        def txn(conn: sqlite3.Connection) -> Session | None:
            row = conn.execute(
                "SELECT last_update_time FROM sessions WHERE app_name = ? AND user_id = ? AND id = ?",
                (app_name, user_id, session_id),
            ).fetchone()
            if row is None:
                return None
            sql, params = _sql.events_query(
                _sql.SQLITE, (app_name, user_id, session_id), after_timestamp, num_recent_events
            )
            events = [Event.model_validate_json(data) for (data,) in conn.execute(sql, params)]
            return Session(
                id=session_id,
                app_name=app_name,
                user_id=user_id,
                state=self._merged_state(conn, app_name, user_id, session_id),
                events=events,
                last_update_time=row[0],
            )

        return await self._call(txn, write=False)

    async def list_sessions(self, *, app_name: str, user_id: str | None) -> list[Session]:
        """``BaseSessionService.list_sessions``: sessions without events, in creation (row) order.

        Raises:
            SessionStoreError: SQLite failed.
        """

        def txn(conn: sqlite3.Connection) -> list[Session]:
            sql = "SELECT user_id, id, last_update_time FROM sessions WHERE app_name = ?"
            params: list[Any] = [app_name]
            if user_id is not None:
                sql += " AND user_id = ?"
                params.append(user_id)
            rows = conn.execute(sql + " ORDER BY rowid", params).fetchall()
            return [
                Session(
                    id=sid,
                    app_name=app_name,
                    user_id=user,
                    state=self._merged_state(conn, app_name, user, sid),
                    last_update_time=last,
                )
                for user, sid, last in rows
            ]

        return await self._call(txn, write=False)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """``BaseSessionService.delete_session``: deletes the session's events, state, turn slot,
        journal and blobs in one transaction.

        Raises:
            SessionStoreError: SQLite failed.
        """

        def txn(conn: sqlite3.Connection) -> None:
            key = (app_name, user_id, session_id)
            conn.execute("DELETE FROM events WHERE app_name = ? AND user_id = ? AND session_id = ?", key)
            conn.execute("DELETE FROM session_state WHERE app_name = ? AND user_id = ? AND session_id = ?", key)
            for table in ("turns", "journal", "blobs", "live"):
                conn.execute(f"DELETE FROM {table} WHERE app_name = ? AND user_id = ? AND session_id = ?", key)
            conn.execute("DELETE FROM sessions WHERE app_name = ? AND user_id = ? AND id = ?", key)

        await self._call(txn, write=True)

    async def append_event(self, session: Session, event: Event) -> Event:
        """``BaseSessionService.append_event`` in one SQLite transaction (the same contract).

        Raises:
            SessionNotFoundError: the session does not exist (anymore).
            StaleSessionError: the stored session was updated after ``session`` was loaded.
            SessionStoreError: SQLite failed or a value is not JSON-serializable; nothing was written.
        """
        prepared = prepare_append(event)
        lock = self._append_lock.get(None)
        if lock is None:
            lock = anyio.Lock()
            self._append_lock.set(lock)
        async with lock:
            update_time = await self._call(
                lambda conn: _sql.append_event(conn, _sql.SQLITE, session, prepared), write=True
            )
            # no checkpoint between the commit and here: the live session reflects the store
            apply_append(session, prepared, update_time)
        return prepared.stored

    # --- durability --------------------------------------------------------------------

    async def load_turn(self, *, app_name: str, user_id: str, session_id: str) -> TurnSlot | None:
        """``BaseSessionService.load_turn``: the turn slot, or ``None``.

        Raises:
            SessionStoreError: SQLite failed.
        """

        def txn(conn: sqlite3.Connection) -> TurnSlot | None:
            return _sql.slot_of(
                conn.execute(
                    "SELECT version, data, snapshot FROM turns WHERE app_name = ? AND user_id = ? AND session_id = ?",
                    (app_name, user_id, session_id),
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
        """``BaseSessionService.save_turn``: compare-and-set on the slot's version, durable on return.

        Returns:
            The new version (0 after a delete).

        Raises:
            TurnConflictError: the stored version is not ``expected_version``.
            SessionNotFoundError: the session does not exist.
            SessionStoreError: SQLite failed or ``data`` is not JSON-serializable.
        """
        text = to_json(data, "the turn record") if data is not None else None
        key = (app_name, user_id, session_id)
        done: list[int] = []

        def txn(conn: sqlite3.Connection) -> int:
            if (
                conn.execute("SELECT 1 FROM sessions WHERE app_name = ? AND user_id = ? AND id = ?", key).fetchone()
                is None
            ):
                raise SessionNotFoundError(f"session {session_id!r} not found for app {app_name!r}, user {user_id!r}")
            current, stored = _sql.slot_version(conn, _sql.SQLITE, key)
            if current != expected_version:
                raise turn_conflict(session_id, expected_version, current)
            if text is None:
                conn.execute(
                    "UPDATE turns SET data = NULL, snapshot = NULL WHERE app_name = ? AND user_id = ? "
                    "AND session_id = ?",
                    key,
                )
                done[:] = [0]
                return 0
            conn.execute(_sql.SQLITE.put_slot, (*key, stored + 1, text, snapshot))
            done[:] = [stored + 1]
            return stored + 1

        # a small slot (no continuation, or a small one) on the calling thread when the database
        # is free, as a journal write; a large continuation on the writer thread
        if (snapshot is None or len(snapshot) <= _INLINE_SNAPSHOT) and self._try_inline(txn):
            return done[0]
        return await self._call_quick(txn, write=True)

    async def append_journal(
        self, session: Session, turn: str, records: list[JournalRecord], *, expected_version: int | None = None
    ) -> None:
        """``BaseSessionService.append_journal`` in one transaction, fenced by ``expected_version``.

        Raises:
            TurnConflictError: the slot is not at ``expected_version``.
            SessionStoreError: SQLite failed.
        """
        if self._append_journal_now(session, turn, records, expected_version):
            return
        key = (session.app_name, session.user_id, session.id)

        def txn(conn: sqlite3.Connection) -> None:
            if expected_version is not None:
                current, _ = _sql.slot_version(conn, _sql.SQLITE, key)
                if current != expected_version:
                    raise turn_conflict(session.id, expected_version, current)
            _sql.write_journal(conn, _sql.SQLITE, key, turn, records)

        if not self._try_inline(txn):
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
        """``BaseSessionService.commit_turn`` in one ``BEGIN IMMEDIATE`` transaction (the flow
        shared with PostgreSQL: ``codeact.sessions._sql``).

        Raises:
            TurnConflictError: the slot is not at ``expected_version``; nothing was written.
            SessionNotFoundError: the session does not exist.
            SessionStoreError: SQLite failed or ``data`` is not JSON-serializable.
        """
        text = to_json(data, "the turn record")
        key = (session.app_name, session.user_id, session.id)

        done: list[int] = []

        def txn(conn: sqlite3.Connection) -> int:
            done[:] = [_sql.commit_turn(conn, _sql.SQLITE, key, turn, records, text, snapshot, expected_version)]
            return done[0]

        if self._try_inline(txn):  # on the calling thread when the database is free, as a journal write
            return done[0]
        return await self._call_quick(txn, write=True)

    def journal_appender(self) -> JournalAppender | None:
        """``BaseSessionService.journal_appender``: one record (an intent, an outcome) as one
        fenced statement on the calling thread when the database is free (None when
        ``append_journal`` is overridden, or patched on the class or the instance)."""
        return self._appender_while_own(_APPEND_JOURNAL, self._append_journal_now)

    def _append_journal_now(
        self, session: Session, turn: str, records: list[JournalRecord], expected_version: int | None
    ) -> bool:
        """The usual record (one intent, one outcome, fenced): one statement, committed on its
        own on the calling thread, instead of BEGIN, a fence SELECT, the INSERT and COMMIT.
        False when it wrote nothing: another shape of write, the database is busy, the fence
        failed or an outcome was already stored (``append_journal``'s transaction then tells
        those apart)."""
        if len(records) != 1 or expected_version is None:
            return False
        (record,) = records
        sql = _FENCED_OUTCOME if record.kind == "outcome" or record.kind == "batch" else _FENCED_RECORD
        key = (session.app_name, session.user_id, session.id)
        params = (*key, turn, record.kind, record.seq, record.data, *key, expected_version)

        def fused(conn: sqlite3.Connection) -> bool:
            return conn.execute(sql, params).rowcount == 1

        return self._try_inline(fused, fused=True)

    async def renew_claim(
        self, *, app_name: str, user_id: str, session_id: str, version: int, renewed_at: float
    ) -> None:
        """``BaseSessionService.renew_claim``: one ``UPDATE`` of ``claim.renewed_at`` (seconds since the epoch).

        Raises:
            TurnConflictError: the slot is not at ``version``, or its record holds no claim.
            SessionStoreError: SQLite failed.
        """
        key = (app_name, user_id, session_id)

        def txn(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "UPDATE turns SET data = json_set(data, '$.claim.renewed_at', ?) WHERE app_name = ? AND user_id = ? "
                "AND session_id = ? AND version = ? AND data IS NOT NULL AND json_type(data, '$.claim') = 'object'",
                (renewed_at, *key, version),
            )
            if cur.rowcount == 0:
                row = conn.execute(
                    "SELECT version, data IS NOT NULL FROM turns WHERE app_name = ? AND user_id = ? AND session_id = ?",
                    key,
                ).fetchone()
                current = row[0] if row is not None and row[1] else 0
                raise turn_conflict(session_id, version, current)

        await self._call_quick(txn, write=True)

    def _try_inline(self, fn: Callable[[sqlite3.Connection], object], *, fused: bool = False) -> bool:
        """Runs a small write transaction on the calling thread when that cannot wait: on a
        second connection whose busy timeout is 0, only when nobody in this service holds
        it and no other writer holds the database. Returns False (nothing written) when it
        would have to wait; the caller then uses a worker thread. A journal record commits
        in tens of microseconds, far less than a thread round trip.

        ``fused``: ``fn`` is one write statement that commits on its own (SQLite's autocommit
        takes the write lock when the statement starts, as ``BEGIN IMMEDIATE`` does) and
        returns whether it did its write; False from it is returned as is."""
        if self._closed or self._conn is None or not self._inline_lock.acquire(blocking=False):
            return False
        try:
            if self._inline_conn is None:
                conn = sqlite3.connect(self._path, timeout=0, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA busy_timeout = 0")
                conn.execute(f"PRAGMA synchronous = {self._synchronous}")
                self._inline_conn = conn
            try:
                if fused:
                    return bool(fn(self._inline_conn))
                _run_in_transaction(self._inline_conn, fn, write=True)
            except sqlite3.OperationalError as e:
                if _is_locked(e):
                    return False
                raise SessionStoreError(f"session database {self._path!r}: {e}") from e
            except sqlite3.Error as e:
                raise SessionStoreError(f"session database {self._path!r}: {e}") from e
            return True
        finally:
            self._inline_lock.release()

    async def read_journal(self, *, app_name: str, user_id: str, session_id: str, turn: str) -> list[JournalRecord]:
        """``BaseSessionService.read_journal``: the journal of ``turn`` in replay order.

        Raises:
            SessionStoreError: SQLite failed.
        """

        def txn(conn: sqlite3.Connection) -> list[JournalRecord]:
            return _sql.journal_of(
                conn.execute(
                    "SELECT kind, seq, data FROM journal WHERE app_name = ? AND user_id = ? AND session_id = ? "
                    "AND turn = ?",
                    (app_name, user_id, session_id, turn),
                ).fetchall()
            )

        return await self._call_quick(txn, write=False)

    async def list_decisions(
        self, *, app_name: str, user_id: str | None = None, session_id: str | None = None
    ) -> list[StoredDecision]:
        """``BaseSessionService.list_decisions`` in one query.

        Raises:
            SessionStoreError: SQLite failed.
        """

        def txn(conn: sqlite3.Connection) -> list[StoredDecision]:
            sql = "SELECT user_id, session_id, turn, seq, data FROM journal WHERE app_name = ? AND kind = 'decision'"
            params: list[Any] = [app_name]
            if user_id is not None:
                sql += " AND user_id = ?"
                params.append(user_id)
            if session_id is not None:
                sql += " AND session_id = ?"
                params.append(session_id)
            return [
                StoredDecision(u, sid, t, JournalRecord("decision", q, d))
                for u, sid, t, q, d in conn.execute(sql, params)
            ]

        return await self._call(txn, write=False)

    async def list_turns(self, *, app_name: str, user_id: str | None = None) -> list[tuple[str, str]]:
        """``BaseSessionService.list_turns`` in one query, in the sessions' creation order.

        Raises:
            SessionStoreError: SQLite failed.
        """

        def txn(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            sql, params = _sql.turns_query(_sql.SQLITE, app_name, user_id)
            return [(u, sid) for u, sid in conn.execute(sql, params)]

        return await self._call(txn, write=False)

    async def put_blob(self, *, app_name: str, user_id: str, session_id: str, digest: str, data: bytes) -> None:
        """``BaseSessionService.put_blob``: ``INSERT OR IGNORE``, so storing a digest again is a no-op.

        Raises:
            SessionStoreError: SQLite failed.
        """

        def txn(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR IGNORE INTO blobs (app_name, user_id, session_id, digest, data) VALUES (?, ?, ?, ?, ?)",
                (app_name, user_id, session_id, digest, data),
            )

        await self._call(txn, write=True)

    async def get_blob(self, *, app_name: str, user_id: str, session_id: str, digest: str) -> bytes | None:
        """``BaseSessionService.get_blob``: the bytes stored under ``digest``, or ``None``.

        Raises:
            SessionStoreError: SQLite failed.
        """

        def txn(conn: sqlite3.Connection) -> bytes | None:
            row = conn.execute(
                "SELECT data FROM blobs WHERE app_name = ? AND user_id = ? AND session_id = ? AND digest = ?",
                (app_name, user_id, session_id, digest),
            ).fetchone()
            return bytes(row[0]) if row is not None else None

        return await self._call(txn, write=False)

    # --- the live row (issue 51) -------------------------------------------------------

    async def save_live(self, *, app_name: str, user_id: str, session_id: str, live: LiveRow | None) -> int:
        """``BaseSessionService.save_live``: one small transaction on the ``live`` table (the
        row replaced, or deleted with ``live=None``).

        Raises:
            SessionNotFoundError: the session does not exist (writing a row).
            SessionStoreError: SQLite failed.
        """
        key = (app_name, user_id, session_id)
        text = live_to_json(live) if live is not None else None

        def txn(conn: sqlite3.Connection) -> int:
            if text is None:
                conn.execute("DELETE FROM live WHERE app_name = ? AND user_id = ? AND session_id = ?", key)
                return 0
            if (
                conn.execute("SELECT 1 FROM sessions WHERE app_name = ? AND user_id = ? AND id = ?", key).fetchone()
                is None
            ):
                raise SessionNotFoundError(f"session {session_id!r} not found for app {app_name!r}, user {user_id!r}")
            row = conn.execute(
                "SELECT version FROM live WHERE app_name = ? AND user_id = ? AND session_id = ?", key
            ).fetchone()
            version = (row[0] if row is not None else 0) + 1
            conn.execute(
                "INSERT OR REPLACE INTO live (app_name, user_id, session_id, version, updated_at, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (*key, version, time.time(), text),
            )
            return version

        return await self._call_quick(txn, write=True)

    async def load_live(self, *, app_name: str, user_id: str, session_id: str) -> LiveRow | None:
        """``BaseSessionService.load_live``: the session's live row, or None.

        Raises:
            SessionStoreError: SQLite failed.
        """

        def txn(conn: sqlite3.Connection) -> LiveRow | None:
            row = conn.execute(
                "SELECT version, updated_at, data FROM live WHERE app_name = ? AND user_id = ? AND session_id = ?",
                (app_name, user_id, session_id),
            ).fetchone()
            return live_from_json(row[2], row[0], row[1]) if row is not None else None

        return await self._call(txn, write=False)


_APPEND_JOURNAL = SqliteSessionService.append_journal
"""The store's own ``append_journal``: ``journal_appender`` is on only while it is the one called."""
