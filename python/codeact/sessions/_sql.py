"""The SQL flow the SQLite and PostgreSQL stores share (``_sqlite``, ``_postgres``): scoped
state (written and read merged), the event query and ``append_event``'s transaction, the turn
slot's version (the fence every journal write and slot write checks), the journal's rows
(outcomes first-writer-wins, intents and OS answers replaced), reading the slot and the
journal back, and the buffered commit of SPEC §5 v4 (``commit_turn``): the journal records a
turn held (read-only calls' outcomes, OS answers) and its slot, in one transaction.

Each function runs inside the transaction its store opened, on a DB-API connection (``sqlite3``
or ``psycopg``: both have ``execute(sql, params).fetchone()`` and cursors with
``executemany``); a ``SqlDialect`` holds what differs: the placeholder, the table names, the
upserts and the row lock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._journal import JournalRecord, TurnSlot
from ._service import (
    PreparedAppend,
    ScopedState,
    SessionNotFoundError,
    check_not_stale,
    merge_state,
    next_update_time,
    parse_turn,
    sort_journal,
    state_from_json,
    state_to_json,
    turn_conflict,
)
from ._types import Session

__all__ = (
    "POSTGRES",
    "SQLITE",
    "SqlDialect",
    "append_event",
    "commit_events",
    "commit_turn",
    "events_query",
    "journal_of",
    "merged_state",
    "slot_of",
    "slot_version",
    "turns_query",
    "write_journal",
    "write_state",
)

_COLUMNS = "(app_name, user_id, session_id, turn, kind, seq, data)"
_KEPT = ("outcome", "batch")
"""The journal kinds a store never replaces once stored (first writer wins)."""
_SLOT_COLUMNS = "(app_name, user_id, session_id, version, data, snapshot)"


@dataclass(frozen=True, slots=True)
class SqlDialect:
    """What differs between the two stores' SQL.

    Attributes:
        p: the parameter placeholder (``?`` or ``%s``).
        sessions / turns / journal: the table names.
        lock: appended to the slot's ``SELECT`` inside a write (``FOR UPDATE`` on PostgreSQL;
            SQLite's ``BEGIN IMMEDIATE`` already holds the database).
        replace_record / keep_record: the journal ``INSERT`` that replaces a stored row (an
            intent, OS answers) / keeps it (an outcome: first writer wins).
        put_slot: the slot's upsert (version, data, snapshot).
        upsert: a state row's upsert, with ``{table}``, ``{columns}``, ``{values}`` and
            ``{key}`` (the primary key's columns) to fill.
        order: the column giving sessions their creation order.
        bulk: one statement writing a whole batch of journal records (PostgreSQL: arrays
            unnested, one round trip; outcomes kept, others replaced), or "" (SQLite: an
            ``executemany`` in process costs nothing more). The records' data goes as a binary
            array (``%b``): as a text array literal every quote of the JSON is escaped, and a
            batch record of 100 outcomes cost about a millisecond more to send and parse.
        commit: ``commit_turn`` as one statement, or "" (the flow of statements below). On
            PostgreSQL one statement is one round trip on an autocommit connection where the
            flow is six; the slot is written only at the expected version and the journal
            records only with the slot, so the statement writes both or neither.
    """

    p: str
    prefix: str
    sessions: str
    turns: str
    journal: str
    lock: str
    replace_record: str
    keep_record: str
    put_slot: str
    upsert: str
    order: str
    bulk: str = ""
    commit: str = ""

    def where(self) -> str:
        """``app_name = ? AND user_id = ? AND session_id = ?`` with this dialect's placeholder."""
        p = self.p
        return f"app_name = {p} AND user_id = {p} AND session_id = {p}"


def _dialect(p: str, prefix: str, replace: str, keep: str, put_slot: str, upsert: str, order: str) -> SqlDialect:
    values = ", ".join([p] * 7)
    return SqlDialect(
        p=p,
        prefix=prefix,
        upsert=upsert,
        order=order,
        sessions=f"{prefix}sessions",
        turns=f"{prefix}turns",
        journal=f"{prefix}journal",
        lock=" FOR UPDATE" if p == "%s" else "",
        replace_record=replace.format(table=f"{prefix}journal {_COLUMNS}", values=values),
        keep_record=keep.format(table=f"{prefix}journal {_COLUMNS}", values=values),
        put_slot=put_slot.format(table=f"{prefix}turns {_SLOT_COLUMNS}", values=", ".join([p] * 6)),
    )


SQLITE = _dialect(
    "?",
    "",
    "INSERT OR REPLACE INTO {table} VALUES ({values})",
    "INSERT OR IGNORE INTO {table} VALUES ({values})",
    "INSERT OR REPLACE INTO {table} VALUES ({values})",
    "INSERT OR REPLACE INTO {table} {columns} VALUES ({values})",
    "s.rowid",
)
POSTGRES = _dialect(
    "%s",
    "codeact_",
    "INSERT INTO {table} VALUES ({values}) ON CONFLICT (app_name, user_id, session_id, turn, kind, seq) "
    "DO UPDATE SET data = EXCLUDED.data",
    "INSERT INTO {table} VALUES ({values}) ON CONFLICT DO NOTHING",
    "INSERT INTO {table} VALUES ({values}) ON CONFLICT (app_name, user_id, session_id) "
    "DO UPDATE SET version = EXCLUDED.version, data = EXCLUDED.data, snapshot = EXCLUDED.snapshot",
    "INSERT INTO {table} {columns} VALUES ({values}) ON CONFLICT ({key}) DO UPDATE SET value = EXCLUDED.value",
    "s.ord",
)
POSTGRES = dataclasses.replace(
    POSTGRES,
    bulk=(
        f"INSERT INTO codeact_journal {_COLUMNS} SELECT %s, %s, %s, %s, r.kind, r.seq, r.data "
        "FROM unnest(%s::text[], %s::bigint[], %b::text[]) AS r(kind, seq, data) "
        "ON CONFLICT (app_name, user_id, session_id, turn, kind, seq) DO UPDATE SET data = EXCLUDED.data "
        "WHERE codeact_journal.kind NOT IN ('outcome', 'batch')"
    ),
    commit="""
WITH fence AS (
    SELECT version, data IS NOT NULL AS live FROM codeact_turns
    WHERE app_name = %(a)s AND user_id = %(u)s AND session_id = %(s)s FOR UPDATE
), cur AS (
    SELECT COALESCE((SELECT CASE WHEN live THEN version ELSE 0 END FROM fence), 0) AS v,
           COALESCE((SELECT version FROM fence), 0) AS stored
), slot AS (
    INSERT INTO codeact_turns AS t (app_name, user_id, session_id, version, data, snapshot)
    SELECT %(a)s, %(u)s, %(s)s, cur.stored + 1, %(data)s, %(snap)s FROM cur WHERE cur.v = %(ev)s
    ON CONFLICT (app_name, user_id, session_id) DO UPDATE
    SET version = EXCLUDED.version, data = EXCLUDED.data, snapshot = EXCLUDED.snapshot
    WHERE t.version = EXCLUDED.version - 1
    RETURNING version
), ins AS (
    INSERT INTO codeact_journal (app_name, user_id, session_id, turn, kind, seq, data)
    SELECT %(a)s, %(u)s, %(s)s, %(t)s, r.kind, r.seq, r.data
    FROM unnest(%(kinds)s::text[], %(seqs)s::bigint[], %(datas)b::text[]) AS r(kind, seq, data)
    WHERE EXISTS (SELECT 1 FROM slot)
    ON CONFLICT (app_name, user_id, session_id, turn, kind, seq)
    DO UPDATE SET data = EXCLUDED.data WHERE codeact_journal.kind NOT IN ('outcome', 'batch')
    RETURNING 1
)
SELECT (SELECT version FROM slot), (SELECT v FROM cur), (SELECT count(*) FROM ins)
""",
)


def _upserts(d: SqlDialect) -> tuple[str, str, str]:
    """The session, user and app state upserts of ``d``."""
    out = []
    for table, key in (
        ("session_state", "app_name, user_id, session_id, key"),
        ("user_state", "app_name, user_id, key"),
        ("app_state", "app_name, key"),
    ):
        columns = f"({key}, value)"
        values = ", ".join([d.p] * (key.count(",") + 2))
        out.append(d.upsert.format(table=d.prefix + table, columns=columns, values=values, key=key))
    return out[0], out[1], out[2]


_UPSERTS = {id(SQLITE): _upserts(SQLITE), id(POSTGRES): _upserts(POSTGRES)}


def write_state(conn: Any, d: SqlDialect, key: tuple[str, str, str], scoped: ScopedState, what: str) -> None:
    """Upserts the persisted scopes of a state delta (``temp:`` is never written; keys sorted,
    so concurrent writers lock rows in one order).

    Raises:
        SessionStoreError: a value is not plain data.
    """
    app_name, user_id, _ = key
    session_sql, user_sql, app_sql = _UPSERTS[id(d)]
    rows = (
        (session_sql, [(*key, k, state_to_json(v, f"{what} key {k!r}")) for k, v in sorted(scoped.session.items())]),
        (
            user_sql,
            [(app_name, user_id, k, state_to_json(v, f"{what} key {k!r}")) for k, v in sorted(scoped.user.items())],
        ),
        (app_sql, [(app_name, k, state_to_json(v, f"{what} key {k!r}")) for k, v in sorted(scoped.app.items())]),
    )
    cur = conn.cursor()
    try:
        for sql, values in rows:
            if values:
                cur.executemany(sql, values)
    finally:
        cur.close()


def merged_state(conn: Any, d: SqlDialect, app_name: str, user_id: str, session_id: str) -> dict[str, Any]:
    """The state a session sees: its own keys, then its user's and its app's (one query)."""
    p, x = d.p, d.prefix
    rows = conn.execute(
        f"SELECT 0, key, value FROM {x}app_state WHERE app_name = {p} "
        f"UNION ALL SELECT 1, key, value FROM {x}user_state WHERE app_name = {p} AND user_id = {p} "
        f"UNION ALL SELECT 2, key, value FROM {x}session_state WHERE {d.where()}",
        (app_name, app_name, user_id, app_name, user_id, session_id),
    ).fetchall()
    scopes: list[dict[str, Any]] = [{}, {}, {}]
    for scope, k, value in rows:
        scopes[scope][k] = state_from_json(value)
    return merge_state(scopes[0], scopes[1], scopes[2])


def events_query(
    d: SqlDialect, key: tuple[str, str, str], after_timestamp: float | None, num_recent_events: int | None
) -> tuple[str, list[Any]]:
    """``get_session``'s event query and its parameters: the session's events (``data``) in
    append order, filtered by ``after_timestamp`` and then kept to the last
    ``num_recent_events``."""
    where = d.where()
    params: list[Any] = list(key)
    if after_timestamp is not None:
        where += f" AND timestamp >= {d.p}"
        params.append(after_timestamp)
    if num_recent_events is None:
        return f"SELECT data FROM {d.prefix}events WHERE {where} ORDER BY seq", params
    params.append(max(num_recent_events, 0))
    return (
        f"SELECT data FROM (SELECT seq, data FROM {d.prefix}events WHERE {where} ORDER BY seq DESC LIMIT {d.p}) "
        "AS recent ORDER BY seq",
        params,
    )


def turns_query(d: SqlDialect, app_name: str, user_id: str | None) -> tuple[str, list[Any]]:
    """``list_turns``' query: the sessions of an app (of one user) whose slot holds a turn, in
    creation order."""
    sql = (
        f"SELECT t.user_id, t.session_id FROM {d.turns} t JOIN {d.sessions} s ON s.app_name = t.app_name "
        f"AND s.user_id = t.user_id AND s.id = t.session_id WHERE t.app_name = {d.p} AND t.data IS NOT NULL"
    )
    params: list[Any] = [app_name]
    if user_id is not None:
        sql += f" AND t.user_id = {d.p}"
        params.append(user_id)
    return f"{sql} ORDER BY {d.order}", params


def _locked_session(conn: Any, d: SqlDialect, session: Session) -> tuple[tuple[str, str, str], tuple[Any, ...]]:
    """The session's key and its stored row (``last_update_time``), locked where the dialect
    locks rows; ``SessionNotFoundError`` when it does not exist (anymore)."""
    key = (session.app_name, session.user_id, session.id)
    p = d.p
    row = conn.execute(
        f"SELECT last_update_time FROM {d.sessions} WHERE app_name = {p} AND user_id = {p} AND id = {p}{d.lock}", key
    ).fetchone()
    if row is None:
        raise SessionNotFoundError(
            f"session {session.id!r} not found for app {session.app_name!r}, user {session.user_id!r}"
        )
    return key, tuple(row)


def append_event(
    conn: Any, d: SqlDialect, session: Session, prepared: PreparedAppend, *, retrying: bool = False
) -> float:
    """``append_event``'s transaction: the stale check, the event, its state delta and the
    session's new update time. ``retrying``: a first attempt's commit may have landed before
    its connection dropped (PostgreSQL); it is recognized by the event's id.

    Returns:
        The new update time.

    Raises:
        SessionNotFoundError: the session does not exist (anymore).
        StaleSessionError: the stored session was updated after ``session`` was loaded.
        SessionStoreError: a state value is not plain data.
    """
    key, row = _locked_session(conn, d, session)
    p = d.p
    if retrying and row[0] > session.last_update_time:
        mine = conn.execute(
            f"SELECT 1 FROM {d.prefix}events WHERE {d.where()} AND id = {p}", (*key, prepared.stored.id)
        )
        if mine.fetchone() is not None:
            return float(row[0])
    check_not_stale(session, row[0])
    update_time = next_update_time(row[0])
    conn.execute(
        f"INSERT INTO {d.prefix}events (app_name, user_id, session_id, id, timestamp, data) "
        f"VALUES ({p}, {p}, {p}, {p}, {p}, {p})",
        (*key, prepared.stored.id, prepared.stored.timestamp, prepared.json),
    )
    write_state(conn, d, key, prepared.delta, f"state delta of event {prepared.stored.id}")
    conn.execute(
        f"UPDATE {d.sessions} SET last_update_time = {p} WHERE app_name = {p} AND user_id = {p} AND id = {p}",
        (update_time, *key),
    )
    return update_time


def commit_events(
    conn: Any,
    d: SqlDialect,
    session: Session,
    prepared: Sequence[PreparedAppend],
    turn: str,
    records: Sequence[JournalRecord],
    expected_version: int,
    *,
    retrying: bool = False,
) -> float:
    """``BaseSessionService.commit_events`` inside the store's transaction: the stale check,
    the fence (the slot at ``expected_version``), the events with their state deltas, the
    session's new update time and the journal records. ``retrying``: a first attempt's commit
    may have landed before its connection dropped (PostgreSQL); it is recognized by the first
    event's id.

    Returns:
        The new update time.

    Raises:
        SessionNotFoundError: the session does not exist (anymore).
        StaleSessionError: the stored session was updated after ``session`` was loaded.
        TurnConflictError: the slot is not at ``expected_version``.
        SessionStoreError: a state value is not plain data.
    """
    key, row = _locked_session(conn, d, session)
    p = d.p
    if retrying and prepared and row[0] > session.last_update_time:
        mine = conn.execute(
            f"SELECT 1 FROM {d.prefix}events WHERE {d.where()} AND id = {p}", (*key, prepared[0].stored.id)
        )
        if mine.fetchone() is not None:
            return float(row[0])
    check_not_stale(session, row[0])
    current, _ = slot_version(conn, d, key, lock=True)
    if current != expected_version:
        raise turn_conflict(session.id, expected_version, current)
    update_time = next_update_time(row[0])
    for one in prepared:
        conn.execute(
            f"INSERT INTO {d.prefix}events (app_name, user_id, session_id, id, timestamp, data) "
            f"VALUES ({p}, {p}, {p}, {p}, {p}, {p})",
            (*key, one.stored.id, one.stored.timestamp, one.json),
        )
        write_state(conn, d, key, one.delta, f"state delta of event {one.stored.id}")
    conn.execute(
        f"UPDATE {d.sessions} SET last_update_time = {p} WHERE app_name = {p} AND user_id = {p} AND id = {p}",
        (update_time, *key),
    )
    write_journal(conn, d, key, turn, records)
    return update_time


def slot_version(conn: Any, d: SqlDialect, key: tuple[str, str, str], *, lock: bool = False) -> tuple[int, int]:
    """``(current, stored)``: the slot's version as the fence sees it (0 when there is no
    turn: no row, or a deleted slot) and the version its row holds (the next is one more)."""
    row = conn.execute(
        f"SELECT version, data IS NOT NULL FROM {d.turns} WHERE {d.where()}{d.lock if lock else ''}", key
    ).fetchone()
    if row is None:
        return 0, 0
    stored = int(row[0])
    return (stored if row[1] else 0), stored


def write_journal(
    conn: Any, d: SqlDialect, key: tuple[str, str, str], turn: str, records: Sequence[JournalRecord]
) -> None:
    """Writes ``records`` to the journal of ``turn``: an outcome or a batch already stored for
    its seq is kept (first writer wins), intents, OS answers and decisions replace the stored
    ones."""
    if d.bulk:
        if records:
            conn.execute(
                d.bulk, (*key, turn, [r.kind for r in records], [r.seq for r in records], [r.data for r in records])
            )
        return
    outcomes = [(*key, turn, r.kind, r.seq, r.data) for r in records if r.kind in _KEPT]
    others = [(*key, turn, r.kind, r.seq, r.data) for r in records if r.kind not in _KEPT]
    cur = conn.cursor()
    try:
        if others:
            cur.executemany(d.replace_record, others)
        if outcomes:
            cur.executemany(d.keep_record, outcomes)
    finally:
        cur.close()


def journal_of(rows: Sequence[tuple[str, Any, str]]) -> list[JournalRecord]:
    """The journal records of ``(kind, seq, data)`` rows, in replay order (a batch row that
    cannot be read as stored: ``sort_journal(..., strict=False)``)."""
    return sort_journal([JournalRecord(k, int(q), d) for k, q, d in rows], strict=False)  # type: ignore[arg-type]


def slot_of(row: tuple[Any, Any, Any] | None) -> TurnSlot | None:
    """The turn slot of a ``(version, data, snapshot)`` row (None: no row, or no turn)."""
    if row is None or row[1] is None:
        return None
    return TurnSlot(int(row[0]), parse_turn(row[1]), bytes(row[2]) if row[2] is not None else None)


def commit_turn(
    conn: Any,
    d: SqlDialect,
    key: tuple[str, str, str],
    turn: str,
    records: Sequence[JournalRecord],
    text: str,
    snapshot: bytes | None,
    expected_version: int,
    *,
    retrying: bool = False,
) -> int:
    """``BaseSessionService.commit_turn`` inside the store's transaction: the fence (the slot
    at ``expected_version``), the journal records, then the slot (``text``, ``snapshot``) at
    the next version. ``retrying``: a first attempt's commit may have landed before its
    connection dropped (PostgreSQL); it is recognized and its version returned.

    Returns:
        The slot's new version.

    Raises:
        SessionNotFoundError: the session does not exist.
        TurnConflictError: the slot is not at ``expected_version``.
    """
    app_name, user_id, session_id = key
    p = d.p
    if d.commit:  # one statement: the slot at the next version and the records, or neither
        params = {
            "a": app_name,
            "u": user_id,
            "s": session_id,
            "t": turn,
            "ev": expected_version,
            "data": text,
            "snap": snapshot,
            "kinds": [r.kind for r in records],
            "seqs": [r.seq for r in records],
            "datas": [r.data for r in records],
        }
        try:
            row = conn.execute(d.commit, params, prepare=True).fetchone()
        except Exception as exc:  # psycopg's ForeignKeyViolation: the session is gone
            if type(exc).__name__ == "ForeignKeyViolation":
                raise SessionNotFoundError(
                    f"session {session_id!r} not found for app {app_name!r}, user {user_id!r}"
                ) from exc
            raise
        if row[0] is not None:
            return int(row[0])
        # nothing written: say why (off the usual path)
    found = conn.execute(
        f"SELECT 1 FROM {d.sessions} WHERE app_name = {p} AND user_id = {p} AND id = {p}", key
    ).fetchone()
    if found is None:
        raise SessionNotFoundError(f"session {session_id!r} not found for app {app_name!r}, user {user_id!r}")
    current, stored = slot_version(conn, d, key, lock=True)
    if current != expected_version:
        if retrying and current == expected_version + 1:
            row = conn.execute(f"SELECT data FROM {d.turns} WHERE {d.where()}", key).fetchone()
            if row is not None and row[0] == text:
                return current  # the first attempt's commit landed
        raise turn_conflict(session_id, expected_version, current)
    if d.commit:  # the slot moved between the statement and here
        raise turn_conflict(session_id, expected_version, current)
    write_journal(conn, d, key, turn, records)
    version = stored + 1
    conn.execute(d.put_slot, (*key, version, text, snapshot))
    return version
