"""``InMemorySessionService``: sessions in process memory, for tests and demos."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from ._journal import JournalRecord, StoredDecision, TurnSlot
from ._live import LiveRow
from ._service import (
    BaseSessionService,
    Durability,
    JournalAppender,
    PreparedAppend,
    SessionExistsError,
    SessionNotFoundError,
    apply_append,
    check_durability,
    check_not_stale,
    filter_events,
    json_roundtrip_state,
    merge_state,
    next_update_time,
    parse_turn,
    prepare_append,
    resolve_session_id,
    sort_journal,
    split_state,
    state_from_json,
    state_to_json,
    to_json,
    turn_conflict,
)
from ._types import Event, Session


def deepcopy(value: Any) -> Any:
    """A deep copy of state (a dict of state values), holding exactly what a store that
    writes JSON gives back (``state_to_json``): made by a JSON round trip in pydantic-core,
    several times faster than ``copy.deepcopy``."""
    return {k: state_from_json(state_to_json(v, f"state key {k!r}")) for k, v in value.items()}


__all__ = ("InMemorySessionService",)

_Key = tuple[str, str, str]


@dataclass
class _StoredSession:
    state: dict[str, Any]
    last_update_time: float
    events: list[str] = field(default_factory=list)  # event JSON, append order
    turn: tuple[int, str, bytes | None] | None = None  # (version, record JSON, snapshot)
    version: int = 0  # the turn slot's version (kept after a delete: versions never repeat)
    journal: dict[str, dict[tuple[str, int], str]] = field(default_factory=dict)  # turn -> (kind, seq) -> data
    blobs: dict[str, bytes] = field(default_factory=dict)


class InMemorySessionService(BaseSessionService):
    """Sessions held in dicts, lost when the process ends.

    Values go in and come out as JSON round trips (what ``SqliteSessionService`` would
    store), so callers can never mutate stored data and both services behave alike. Each
    method is atomic with respect to other tasks (no await inside a mutation).

    Args:
        durability: accepted for the store contract (``"process"`` or ``"power"``) and
            ignored: nothing held in memory survives the process.
    """

    def __init__(self, *, durability: Durability = "process") -> None:
        check_durability(durability)
        self.durability: Durability = durability
        self._sessions: dict[_Key, _StoredSession] = {}
        self._app_state: dict[str, dict[str, Any]] = {}
        self._user_state: dict[tuple[str, str], dict[str, Any]] = {}
        self._live: dict[_Key, LiveRow] = {}  # the live rows (issue 51), beside the sessions

    def _merged(self, app_name: str, user_id: str, stored: _StoredSession) -> dict[str, Any]:
        merged: dict[str, Any] = deepcopy(
            merge_state(self._app_state.get(app_name, {}), self._user_state.get((app_name, user_id), {}), stored.state)
        )
        return merged

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """``BaseSessionService.create_session`` in this process's memory.

        Raises:
            SessionExistsError: ``session_id`` is taken for this app and user.
            SessionStoreError: a state value is not JSON-serializable.
        """
        await anyio.lowlevel.checkpoint()
        sid = resolve_session_id(session_id)
        key = (app_name, user_id, sid)
        if key in self._sessions:
            raise SessionExistsError(f"session {sid!r} already exists for app {app_name!r}, user {user_id!r}")
        scoped = split_state(json_roundtrip_state(state or {}, "initial state"))
        now = time.time()
        stored = _StoredSession(state=scoped.session, last_update_time=now)
        self._sessions[key] = stored
        self._app_state.setdefault(app_name, {}).update(scoped.app)
        self._user_state.setdefault((app_name, user_id), {}).update(scoped.user)
        return Session(
            id=sid,
            app_name=app_name,
            user_id=user_id,
            state=self._merged(app_name, user_id, stored),
            last_update_time=now,
        )

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        after_timestamp: float | None = None,
        num_recent_events: int | None = None,
    ) -> Session | None:
        """``BaseSessionService.get_session``: a fresh copy of the stored session, or ``None``."""
        await anyio.lowlevel.checkpoint()
        stored = self._sessions.get((app_name, user_id, session_id))
        if stored is None:
            return None
        events = [Event.model_validate_json(text) for text in stored.events]
        return Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=self._merged(app_name, user_id, stored),
            events=filter_events(events, after_timestamp, num_recent_events),
            last_update_time=stored.last_update_time,
        )

    async def list_sessions(self, *, app_name: str, user_id: str | None) -> list[Session]:
        """``BaseSessionService.list_sessions``: copies without events, in creation order."""
        await anyio.lowlevel.checkpoint()
        return [
            Session(
                id=sid,
                app_name=app,
                user_id=user,
                state=self._merged(app, user, stored),
                last_update_time=stored.last_update_time,
            )
            for (app, user, sid), stored in self._sessions.items()
            if app == app_name and (user_id is None or user == user_id)
        ]

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """``BaseSessionService.delete_session``: drops the session, its turn slot, journal and blobs."""
        await anyio.lowlevel.checkpoint()
        self._sessions.pop((app_name, user_id, session_id), None)
        self._live.pop((app_name, user_id, session_id), None)

    async def append_event(self, session: Session, event: Event) -> Event:
        """``BaseSessionService.append_event`` in memory (the same contract and errors).

        Raises:
            SessionNotFoundError: the session does not exist (anymore).
            StaleSessionError: the stored session was updated after ``session`` was loaded.
            SessionStoreError: the event or a state value is not JSON-serializable.

        A cancellation point that does not yield to the event loop when nothing is cancelled
        (``anyio.lowlevel.checkpoint_if_cancelled``): the agent stores two events a turn, and
        a round of the event loop for each cost more than the append itself (issue 21); the
        turn driver yields at least every ``PACE_SECONDS`` anyway.
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        prepared = prepare_append(event)
        stored = self._sessions.get((session.app_name, session.user_id, session.id))
        if stored is None:
            raise SessionNotFoundError(
                f"session {session.id!r} not found for app {session.app_name!r}, user {session.user_id!r}"
            )
        check_not_stale(session, stored.last_update_time)
        update_time = next_update_time(stored.last_update_time)
        self._commit(session, stored, prepared, update_time)
        apply_append(session, prepared, update_time)
        return prepared.stored

    def _commit(self, session: Session, stored: _StoredSession, prepared: PreparedAppend, update_time: float) -> None:
        # Serialization happened in prepare_append and the copies are made first; the
        # mutations below cannot fail, so the event and its delta land together or not at all.
        d = prepared.delta
        session_delta, user_delta, app_delta = (deepcopy(part) if part else {} for part in (d.session, d.user, d.app))
        user_state = self._user_state.setdefault((session.app_name, session.user_id), {})
        app_state = self._app_state.setdefault(session.app_name, {})
        stored.events.append(prepared.json)
        stored.state.update(session_delta)
        user_state.update(user_delta)
        app_state.update(app_delta)
        stored.last_update_time = update_time

    # --- durability --------------------------------------------------------------------

    def _stored(self, app_name: str, user_id: str, session_id: str) -> _StoredSession:
        stored = self._sessions.get((app_name, user_id, session_id))
        if stored is None:
            raise SessionNotFoundError(f"session {session_id!r} not found for app {app_name!r}, user {user_id!r}")
        return stored

    async def load_turn(self, *, app_name: str, user_id: str, session_id: str) -> TurnSlot | None:
        """``BaseSessionService.load_turn``: the turn slot, or ``None`` (no session or no turn)."""
        stored = self._sessions.get((app_name, user_id, session_id))
        if stored is None or stored.turn is None:
            return None
        version, text, snapshot = stored.turn
        return TurnSlot(version, parse_turn(text), snapshot)

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
        """``BaseSessionService.save_turn``: compare-and-set on the slot's version.

        Returns:
            The new version (0 after a delete).

        Raises:
            TurnConflictError: the stored version is not ``expected_version``.
            SessionNotFoundError: the session does not exist.
            SessionStoreError: ``data`` is not JSON-serializable.
        """
        stored = self._stored(app_name, user_id, session_id)
        current = stored.turn[0] if stored.turn is not None else 0
        if current != expected_version:
            raise turn_conflict(session_id, expected_version, current)
        if data is None:
            stored.turn = None
            return 0
        text = to_json(data, "the turn record")
        stored.version += 1
        stored.turn = (stored.version, text, bytes(snapshot) if snapshot is not None else None)
        return stored.version

    async def append_journal(
        self, session: Session, turn: str, records: list[JournalRecord], *, expected_version: int | None = None
    ) -> None:
        """``BaseSessionService.append_journal``: fenced by ``expected_version``, outcomes first-writer-wins.

        Raises:
            TurnConflictError: the slot is not at ``expected_version``.
            SessionNotFoundError: the session does not exist.
        """
        self._append_journal_now(session, turn, records, expected_version)

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
        """``BaseSessionService.commit_turn``: the journal records and the slot in one step.

        Raises:
            TurnConflictError: the slot is not at ``expected_version``; nothing was written.
            SessionNotFoundError: the session does not exist.
            SessionStoreError: ``data`` is not JSON-serializable.
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        text = to_json(data, "the turn record")
        stored = self._stored(session.app_name, session.user_id, session.id)
        current = stored.turn[0] if stored.turn is not None else 0
        if current != expected_version:
            raise turn_conflict(session.id, expected_version, current)
        self._append_journal_now(session, turn, records, expected_version)
        stored.version += 1
        stored.turn = (stored.version, text, bytes(snapshot) if snapshot is not None else None)
        return stored.version

    def journal_appender(self) -> JournalAppender | None:
        """``BaseSessionService.journal_appender``: an in-memory append never waits (None
        when ``append_journal`` is overridden, or patched on the class or the instance)."""
        return self._appender_while_own(_APPEND_JOURNAL, self._append_journal_now)

    def _append_journal_now(
        self, session: Session, turn: str, records: list[JournalRecord], expected_version: int | None
    ) -> bool:
        # No await: each call is atomic with respect to other tasks.
        stored = self._stored(session.app_name, session.user_id, session.id)
        if expected_version is not None:
            current = stored.turn[0] if stored.turn is not None else 0
            if current != expected_version:
                raise turn_conflict(session.id, expected_version, current)
        journal = stored.journal.get(turn)
        if journal is None:
            journal = stored.journal[turn] = {}
        for record in records:
            if record.kind == "outcome" or record.kind == "batch":
                journal.setdefault((record.kind, record.seq), record.data)
            else:
                journal[(record.kind, record.seq)] = record.data
        return True

    async def renew_claim(
        self, *, app_name: str, user_id: str, session_id: str, version: int, renewed_at: float
    ) -> None:
        """``BaseSessionService.renew_claim``: set ``claim.renewed_at`` (seconds since the epoch).

        Raises:
            TurnConflictError: the slot is not at ``version``, or its record holds no claim.
            SessionNotFoundError: the session does not exist.
        """
        stored = self._stored(app_name, user_id, session_id)
        current = stored.turn[0] if stored.turn is not None else 0
        if stored.turn is None or current != version:
            raise turn_conflict(session_id, version, current)
        _, text, snapshot = stored.turn
        data = parse_turn(text)
        if not isinstance(data.get("claim"), dict):
            raise turn_conflict(session_id, version, current)
        data["claim"]["renewed_at"] = renewed_at
        stored.turn = (version, to_json(data, "the turn record"), snapshot)

    async def read_journal(self, *, app_name: str, user_id: str, session_id: str, turn: str) -> list[JournalRecord]:
        """``BaseSessionService.read_journal``: the journal of ``turn`` in replay order (``[]`` when none)."""
        stored = self._sessions.get((app_name, user_id, session_id))
        if stored is None:
            return []
        rows = stored.journal.get(turn, {})
        return sort_journal([JournalRecord(kind, seq, data) for (kind, seq), data in rows.items()])  # type: ignore[arg-type]

    async def list_decisions(
        self, *, app_name: str, user_id: str | None = None, session_id: str | None = None
    ) -> list[StoredDecision]:
        """``BaseSessionService.list_decisions``: the decision records of every turn."""
        await anyio.lowlevel.checkpoint()
        return [
            StoredDecision(user, sid, turn, JournalRecord("decision", seq, data))
            for (app, user, sid), stored in list(self._sessions.items())
            if app == app_name and (user_id is None or user == user_id) and (session_id is None or sid == session_id)
            for turn, rows in list(stored.journal.items())
            for (kind, seq), data in list(rows.items())
            if kind == "decision"
        ]

    async def list_turns(self, *, app_name: str, user_id: str | None = None) -> list[tuple[str, str]]:
        """``BaseSessionService.list_turns``: ``(user_id, session_id)`` of the sessions holding a turn."""
        await anyio.lowlevel.checkpoint()
        return [
            (user, sid)
            for (app, user, sid), stored in self._sessions.items()
            if app == app_name and (user_id is None or user == user_id) and stored.turn is not None
        ]

    async def put_blob(self, *, app_name: str, user_id: str, session_id: str, digest: str, data: bytes) -> None:
        """``BaseSessionService.put_blob``: keep ``data`` under ``digest`` once (a copy of the bytes).

        Raises:
            SessionNotFoundError: the session does not exist.
        """
        self._stored(app_name, user_id, session_id).blobs.setdefault(digest, bytes(data))

    async def get_blob(self, *, app_name: str, user_id: str, session_id: str, digest: str) -> bytes | None:
        """``BaseSessionService.get_blob``: the bytes stored under ``digest``, or ``None``."""
        stored = self._sessions.get((app_name, user_id, session_id))
        return stored.blobs.get(digest) if stored is not None else None

    # --- the live row (issue 51) -------------------------------------------------------

    async def save_live(self, *, app_name: str, user_id: str, session_id: str, live: LiveRow | None) -> int:
        """``BaseSessionService.save_live``: overwrites (or, with None, drops) the session's live row.

        Raises:
            SessionNotFoundError: the session does not exist (writing a row).
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        key = (app_name, user_id, session_id)
        if live is None:
            self._live.pop(key, None)
            return 0
        self._stored(app_name, user_id, session_id)
        old = self._live.get(key)
        version = (old.version if old is not None else 0) + 1
        self._live[key] = replace(live.bounded(), version=version, updated_at=time.time())
        return version

    async def load_live(self, *, app_name: str, user_id: str, session_id: str) -> LiveRow | None:
        """``BaseSessionService.load_live``: the session's live row, or None."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        return self._live.get((app_name, user_id, session_id))


_APPEND_JOURNAL = InMemorySessionService.append_journal
"""The store's own ``append_journal``: ``journal_appender`` is on only while it is the one called."""
