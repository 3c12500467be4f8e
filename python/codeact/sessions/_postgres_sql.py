"""The SQL text of ``PostgresSessionService``: the schema, its migrations and the journal's
write statements (``_postgres``)."""

from __future__ import annotations

_LIVE_TABLE = """
CREATE TABLE IF NOT EXISTS codeact_live (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id),
    FOREIGN KEY (app_name, user_id, session_id) REFERENCES codeact_sessions ON DELETE CASCADE
);
"""
"""The live row of a running turn (issue 51; schema version 2): bounded, overwritten, never
part of the event log."""

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS codeact_sessions (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    id TEXT NOT NULL,
    create_time DOUBLE PRECISION NOT NULL,
    last_update_time DOUBLE PRECISION NOT NULL,
    ord BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (app_name, user_id, id)
);
CREATE TABLE IF NOT EXISTS codeact_events (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    timestamp DOUBLE PRECISION NOT NULL,
    data TEXT NOT NULL,
    FOREIGN KEY (app_name, user_id, session_id) REFERENCES codeact_sessions ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS codeact_events_by_session ON codeact_events (app_name, user_id, session_id, seq);
CREATE TABLE IF NOT EXISTS codeact_session_state (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, key),
    FOREIGN KEY (app_name, user_id, session_id) REFERENCES codeact_sessions ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS codeact_user_state (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, key)
);
CREATE TABLE IF NOT EXISTS codeact_app_state (
    app_name TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (app_name, key)
);
CREATE TABLE IF NOT EXISTS codeact_turns (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    data TEXT,
    snapshot BYTEA,
    PRIMARY KEY (app_name, user_id, session_id),
    FOREIGN KEY (app_name, user_id, session_id) REFERENCES codeact_sessions ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS codeact_turns_live ON codeact_turns (app_name, user_id) WHERE data IS NOT NULL;
CREATE TABLE IF NOT EXISTS codeact_journal (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn TEXT NOT NULL,
    kind TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, turn, kind, seq),
    FOREIGN KEY (app_name, user_id, session_id) REFERENCES codeact_sessions ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS codeact_blobs (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, digest),
    FOREIGN KEY (app_name, user_id, session_id) REFERENCES codeact_sessions ON DELETE CASCADE
);
"""
    + _LIVE_TABLE
)

# Each migration takes the layout from version N to N + 1 (index N - 1); a later format
# appends its statements here.
_MIGRATIONS: list[str] = [
    _LIVE_TABLE,  # 1 -> 2: the live rows (issue 51)
]

_LIVE_SAVE_SQL = (
    "INSERT INTO codeact_live (app_name, user_id, session_id, version, updated_at, data) "
    "VALUES (%s, %s, %s, 1, %s, %s) ON CONFLICT (app_name, user_id, session_id) "
    "DO UPDATE SET version = codeact_live.version + 1, updated_at = EXCLUDED.updated_at, data = EXCLUDED.data "
    "RETURNING version"
)
"""Overwrites a session's live row in one statement (its version one more) and returns the
new version."""

_PK = "app_name = %s AND user_id = %s AND session_id = %s"

_JOURNAL_SQL = """
WITH fence AS (
    SELECT CASE WHEN data IS NULL THEN 0 ELSE version END AS v
    FROM codeact_turns WHERE app_name = %(a)s AND user_id = %(u)s AND session_id = %(s)s FOR SHARE
), ins AS (
    INSERT INTO codeact_journal (app_name, user_id, session_id, turn, kind, seq, data)
    SELECT %(a)s, %(u)s, %(s)s, %(t)s, r.kind, r.seq, r.data
    FROM unnest(%(kinds)s::text[], %(seqs)s::bigint[], %(datas)b::text[]) AS r(kind, seq, data)
    WHERE %(ev)s::bigint IS NULL OR COALESCE((SELECT v FROM fence), 0) = %(ev)s::bigint
    ON CONFLICT (app_name, user_id, session_id, turn, kind, seq)
    DO UPDATE SET data = EXCLUDED.data WHERE codeact_journal.kind NOT IN ('outcome', 'batch')
    RETURNING 1
)
SELECT COALESCE((SELECT v FROM fence), 0), (SELECT count(*) FROM ins)
"""

_JOURNAL_ONE_SQL = _JOURNAL_SQL.replace(
    "SELECT %(a)s, %(u)s, %(s)s, %(t)s, r.kind, r.seq, r.data\n"
    "    FROM unnest(%(kinds)s::text[], %(seqs)s::bigint[], %(datas)b::text[]) AS r(kind, seq, data)\n",
    "SELECT %(a)s, %(u)s, %(s)s, %(t)s, %(kind)s::text, %(seq)s::bigint, %(data)s::text\n",
)
"""``_JOURNAL_SQL`` for one record (the usual write: an intent or an outcome), with scalar
parameters: no arrays to build and unpack."""
assert _JOURNAL_ONE_SQL != _JOURNAL_SQL

_APPEND_EVENT_SQL = """
WITH s AS (
    SELECT last_update_time AS t FROM codeact_sessions
    WHERE app_name = %(a)s AND user_id = %(u)s AND id = %(s)s FOR UPDATE
), ok AS (
    SELECT 1 FROM s WHERE s.t <= %(seen)s::float8 AND s.t < %(now)s::float8
), ins AS (
    INSERT INTO codeact_events (app_name, user_id, session_id, id, timestamp, data)
    SELECT %(a)s, %(u)s, %(s)s, %(id)s, %(ts)s, %(data)s FROM ok
    RETURNING 1
)
UPDATE codeact_sessions SET last_update_time = %(now)s::float8
WHERE app_name = %(a)s AND user_id = %(u)s AND id = %(s)s AND EXISTS (SELECT 1 FROM ins)
RETURNING last_update_time
"""
"""``append_event`` of an event without a persisted state delta, in one statement (one round
trip where the transaction takes five): the session row locked, the stale check (the stored
update time not after the one the caller loaded), the event, and the new update time ``now``
(strictly after the stored one, as ``next_update_time`` makes it). No row back: nothing was
written (no session, a stale one, a clock not past the stored time); the transaction then
tells them apart."""
