"""The SQL flow the SQLite and PostgreSQL stores share (``_sqlite``, ``_postgres``): the turn
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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._journal import JournalRecord, TurnSlot
from ._service import SessionNotFoundError, parse_turn, sort_journal, turn_conflict

__all__ = ("POSTGRES", "SQLITE", "SqlDialect", "commit_turn", "journal_of", "slot_of", "slot_version", "write_journal")

_COLUMNS = "(app_name, user_id, session_id, turn, kind, seq, data)"
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
    """

    p: str
    sessions: str
    turns: str
    journal: str
    lock: str
    replace_record: str
    keep_record: str
    put_slot: str

    def where(self) -> str:
        """``app_name = ? AND user_id = ? AND session_id = ?`` with this dialect's placeholder."""
        p = self.p
        return f"app_name = {p} AND user_id = {p} AND session_id = {p}"


def _dialect(p: str, prefix: str, replace: str, keep: str, put_slot: str) -> SqlDialect:
    values = ", ".join([p] * 7)
    return SqlDialect(
        p=p,
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
)
POSTGRES = _dialect(
    "%s",
    "codeact_",
    "INSERT INTO {table} VALUES ({values}) ON CONFLICT (app_name, user_id, session_id, turn, kind, seq) "
    "DO UPDATE SET data = EXCLUDED.data",
    "INSERT INTO {table} VALUES ({values}) ON CONFLICT DO NOTHING",
    "INSERT INTO {table} VALUES ({values}) ON CONFLICT (app_name, user_id, session_id) "
    "DO UPDATE SET version = EXCLUDED.version, data = EXCLUDED.data, snapshot = EXCLUDED.snapshot",
)


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
    """Writes ``records`` to the journal of ``turn``: an outcome already stored for its seq is
    kept (first writer wins), intents and OS answers replace the stored ones."""
    outcomes = [(*key, turn, r.kind, r.seq, r.data) for r in records if r.kind == "outcome"]
    others = [(*key, turn, r.kind, r.seq, r.data) for r in records if r.kind != "outcome"]
    cur = conn.cursor()
    try:
        if others:
            cur.executemany(d.replace_record, others)
        if outcomes:
            cur.executemany(d.keep_record, outcomes)
    finally:
        cur.close()


def journal_of(rows: Sequence[tuple[str, Any, str]]) -> list[JournalRecord]:
    """The journal records of ``(kind, seq, data)`` rows, in replay order."""
    return sort_journal([JournalRecord(k, int(q), d) for k, q, d in rows])  # type: ignore[arg-type]


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
    write_journal(conn, d, key, turn, records)
    version = stored + 1
    conn.execute(d.put_slot, (*key, version, text, snapshot))
    return version
