"""The session service contract (``BaseSessionService``), its exceptions, and the helpers the
in-memory and SQLite services share.

The contract follows Google ADK's Python ``BaseSessionService``: async methods with keyword-only
arguments. State keys are scoped by prefix:

- ``app:``  stored once per app, visible in every session of the app;
- ``user:`` stored once per (app, user), visible in every session of that user;
- ``temp:`` applied to the live ``Session.state`` during ``append_event`` but never persisted;
- anything else belongs to the one session.

``get_session`` / ``list_sessions`` return the three persisted scopes merged into
``Session.state`` with their prefixes kept.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import pydantic_core

from ..exceptions import (
    SessionExistsError,
    SessionNotFoundError,
    SessionStoreError,
    StaleSessionError,
    StoreMethodMissingError,
    TurnConflictError,
)
from ._journal import JournalRecord, StoredDecision, TurnSlot, expand_batches
from ._live import LiveRow
from ._types import Event, Session, new_id

__all__ = (
    "APP_PREFIX",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "BaseSessionService",
    "Durability",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionStoreError",
    "StaleSessionError",
    "StoreMethodMissingError",
    "TurnConflictError",
)

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"

Durability = Literal["process", "power"]
"""What a write survives once a store method returns: ``"process"``, the crash of the
process (the store's default; the last writes before a power loss or an OS crash may be
lost), or ``"power"``, a power loss too (each commit flushed to disk). The in-memory store
survives neither and accepts both."""


JournalAppender = Callable[[Session, str, list[JournalRecord], "int | None"], bool]
"""``BaseSessionService.journal_appender``'s callable: ``(session, turn, records,
expected_version) -> written``."""


class BaseSessionService(ABC):
    """Stores sessions, their events and their scoped state.

    Every method is async and runs under asyncio and trio. Sessions are addressed by
    ``(app_name, user_id, session_id)``. Returned ``Session`` objects are copies: mutating
    them never changes the store (only ``append_event`` writes).

    A service is also a (sync or async) context manager whose exit calls ``close()``.
    """

    @abstractmethod
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create and store a new session.

        Args:
            app_name: the app.
            user_id: the user.
            state: initial state; ``app:`` / ``user:`` keys go to the app / user scope,
                ``temp:`` keys are dropped, the rest is session state.
            session_id: the id to use; a fresh UUID4 hex when ``None`` or blank.

        Returns:
            The new session (no events) with its state merged from the three scopes.

        Raises:
            SessionExistsError: ``session_id`` is taken for this app and user.
            SessionStoreError: the store failed or a state value is not JSON-serializable.
        """

    @abstractmethod
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        after_timestamp: float | None = None,
        num_recent_events: int | None = None,
    ) -> Session | None:
        """Load a session with its events (in append order) and merged state.

        Args:
            after_timestamp: keep only events with ``timestamp >= after_timestamp``
                (seconds since the epoch).
            num_recent_events: keep only the last N events (after the timestamp filter);
                ``None`` keeps all, ``0`` none.

        Returns:
            The session, or ``None`` when it does not exist.

        Raises:
            SessionStoreError: the store failed.
        """

    @abstractmethod
    async def list_sessions(self, *, app_name: str, user_id: str | None) -> list[Session]:
        """The sessions of one user (``user_id=None``: of every user of the app), in creation
        order, with merged state and *without* events (``events == []``).

        Raises:
            SessionStoreError: the store failed.
        """

    @abstractmethod
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete a session and its events (app and user state stay). Deleting a session that
        does not exist is a no-op.

        Raises:
            SessionStoreError: the store failed.
        """

    @abstractmethod
    async def append_event(self, session: Session, event: Event) -> Event:
        """Append ``event`` to ``session`` and apply ``event.actions.state_delta``, both in one
        transaction: either both land or neither does.

        On success ``session`` is updated in place: the stored event is appended to
        ``session.events``, the delta (``temp:`` keys included) is applied to
        ``session.state``, and ``session.last_update_time`` is set to the stored update time.
        Keep using the same ``Session`` object for successive appends; a copy loaded before
        another append is stale.

        Returns:
            The event as stored: a copy of ``event`` whose ``state_delta`` lacks ``temp:``
            keys (``event`` itself is not modified). It is the object appended to
            ``session.events``.

        Raises:
            SessionNotFoundError: the session does not exist (anymore).
            StaleSessionError: the stored session was updated after ``session`` was loaded.
            SessionStoreError: the store failed or a value is not JSON-serializable; nothing
                was written and ``session`` is unchanged.
        """

    # --- durability (SPEC §5 v2; see ``codeact.sessions._journal``) ---------------------

    async def load_turn(self, *, app_name: str, user_id: str, session_id: str) -> TurnSlot | None:
        """The session's turn slot, or None when no turn is in flight.

        Raises:
            SessionStoreError: the store failed.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement the durability store API")

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
        """Replaces the session's turn slot (``data=None`` deletes it) if its stored version
        is ``expected_version`` (0: there is no slot). Durable when it returns.

        Returns:
            The new version (0 after a delete).

        Raises:
            TurnConflictError: the stored version differs (another runner wrote it first).
            SessionNotFoundError: the session does not exist.
            SessionStoreError: the store failed or ``data`` is not JSON-serializable.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement the durability store API")

    async def append_journal(
        self, session: Session, turn: str, records: list[JournalRecord], *, expected_version: int | None = None
    ) -> None:
        """Appends ``records`` to the journal of ``turn`` in one transaction (durable when it
        returns).

        Fencing (SPEC §5 v3): with ``expected_version``, the records are written only if the
        session's turn slot is at that version, checked in the same transaction; a writer
        whose claim was taken over gets ``TurnConflictError`` and nothing is written.
        ``outcome`` and ``batch`` records are first-writer-wins: one already stored for a
        ``seq`` is kept and the new one dropped. ``intent``, ``os`` and ``decision`` records
        written again replace the stored ones. A ``batch`` record is stored as it is, one row
        (``read_journal`` expands it).

        Raises:
            TurnConflictError: the slot is not at ``expected_version``.
            SessionStoreError: the store failed.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement the durability store API")

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
        """The buffered commit (SPEC §5 v4): appends ``records`` to the journal of ``turn`` and
        replaces the session's turn slot with ``data`` and ``snapshot``, both only if the slot
        is at ``expected_version`` (0: no slot). The turn driver writes the records it held
        (read-only calls' outcomes, OS answers) with a checkpoint or a suspension this way.

        The base implementation calls ``append_journal`` then ``save_turn`` (two commits, the
        journal first: the slot never names a state whose journal is not durable); the stores
        here do both in one transaction. Outcomes are first-writer-wins as in
        ``append_journal``.

        Returns:
            The slot's new version.

        Raises:
            TurnConflictError: the slot is not at ``expected_version``; nothing was written.
            SessionNotFoundError: the session does not exist.
            SessionStoreError: the store failed or ``data`` is not JSON-serializable.
        """
        if records:
            await self.append_journal(session, turn, records, expected_version=expected_version)
        return await self.save_turn(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            data=data,
            snapshot=snapshot,
            expected_version=expected_version,
        )

    def journal_appender(self) -> JournalAppender | None:
        """An optional synchronous form of ``append_journal`` for the turn driver's hot path
        (issue 21: two awaited coroutines per record cost more than an in-memory append).

        Returns:
            None (the default: the store has none), or a callable
            ``(session, turn, records, expected_version) -> bool`` that either writes the
            records as ``append_journal`` would (the same fencing, first-writer-wins and
            errors, ``TurnConflictError`` and ``SessionStoreError``) and returns True, or
            writes nothing and returns False when it would have to wait (the caller then
            awaits ``append_journal``). The stores here return None when ``append_journal``
            is overridden or patched (on the class or the instance), so the override sees
            every write.
        """
        return None

    def _appender_while_own(self, own: Callable[..., Any], appender: JournalAppender) -> JournalAppender | None:
        """``appender`` while ``append_journal`` is ``own`` (the store's, not overridden nor
        patched on the class or the instance), else None: a store's ``journal_appender``."""
        return appender if getattr(self.append_journal, "__func__", None) is own else None

    async def renew_claim(
        self, *, app_name: str, user_id: str, session_id: str, version: int, renewed_at: float
    ) -> None:
        """Sets the stored turn record's ``claim.renewed_at`` to ``renewed_at`` (seconds since
        the epoch) if the slot is at ``version``, without changing the version: the owner of a
        claim keeps its lease alive while it works.

        Raises:
            TurnConflictError: the slot is not at ``version`` (the claim was taken over), or
                the record holds no claim.
            SessionStoreError: the store failed.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement the durability store API")

    async def read_journal(self, *, app_name: str, user_id: str, session_id: str, turn: str) -> list[JournalRecord]:
        """The journal of ``turn``: ``os`` records by seq, then per call its ``intent`` and
        (when recorded) its ``outcome``, by seq, then the ``decision`` records; ``batch``
        records expanded into the records they hold (``sort_journal`` does both).

        Raises:
            SessionStoreError: the store failed.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement the durability store API")

    async def list_turns(self, *, app_name: str, user_id: str | None = None) -> list[tuple[str, str]]:
        """``(user_id, session_id)`` of the sessions of ``app_name`` (of one user, when given)
        whose turn slot holds a turn, in the order ``list_sessions`` gives them: the
        candidates ``Runner.list_pending`` reads. The base implementation loads every
        session's slot; a store overrides it with one query.

        Raises:
            SessionStoreError: the store failed.
        """
        found: list[tuple[str, str]] = []
        for session in await self.list_sessions(app_name=app_name, user_id=user_id):
            slot = await self.load_turn(app_name=app_name, user_id=session.user_id, session_id=session.id)
            if slot is not None:
                found.append((session.user_id, session.id))
        return found

    async def list_decisions(
        self, *, app_name: str, user_id: str | None = None, session_id: str | None = None
    ) -> list[StoredDecision]:
        """The ``"decision"`` journal records of ``app_name`` (of one user, of one session of
        that user, when given), of every turn, finished or not: who decided what (SPEC §5
        v4), as ``StoredDecision`` rows in any order (``Runner.decisions`` sorts them). Part
        of the store contract since issue 49; the base class has none.

        Raises:
            StoreMethodMissingError: the store does not implement it (a store written against
                an older contract).
            SessionStoreError: the store failed.
        """
        raise StoreMethodMissingError(
            f"{type(self).__name__} does not implement list_decisions, a method of the session store contract "
            "(codeact.sessions.testing.StoreContract): add it to list who decided what",
            method="list_decisions",
        )

    async def put_blob(self, *, app_name: str, user_id: str, session_id: str, digest: str, data: bytes) -> None:
        """Stores ``data`` under ``digest`` (its SHA-256 hex) once; storing it again is a no-op.

        Raises:
            SessionStoreError: the store failed.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement the durability store API")

    async def get_blob(self, *, app_name: str, user_id: str, session_id: str, digest: str) -> bytes | None:
        """The bytes stored under ``digest``, or None.

        Raises:
            SessionStoreError: the store failed.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement the durability store API")

    # --- the live row (issue 51; see ``codeact.sessions._live``) -------------------------

    async def save_live(self, *, app_name: str, user_id: str, session_id: str, live: LiveRow | None) -> int:
        """Overwrites the session's live row with ``live`` (its text bounded to its last
        ``LIVE_MAX_CHARS`` characters each; its ``version`` and ``updated_at`` are ignored and
        set by the store), or deletes it (``live=None``). The live row is what a running turn
        streamed so far, for watchers in other processes; it is never part of the event log,
        and a write needs no durability (the stores here commit it without a flush).

        The base implementation does nothing (a store without a live channel: the runner then
        writes none, and readers see ``load_live`` give None).

        Returns:
            The row's new version (1 on the first write, then one more per write; 0 after a
            delete, and from the base implementation).

        Raises:
            SessionNotFoundError: the session does not exist (a delete of a missing row of a
                missing session is a no-op).
            SessionStoreError: the store failed.
        """
        return 0

    async def load_live(self, *, app_name: str, user_id: str, session_id: str) -> LiveRow | None:
        """The session's live row, or None (no turn is streaming, the session does not exist,
        or the store keeps none: the base implementation).

        Raises:
            SessionStoreError: the store failed.
        """
        return None

    @property
    def keeps_live(self) -> bool:
        """Whether this store keeps live rows (``save_live`` is overridden): the runner writes
        none to a store that does not."""
        return type(self).save_live is not BaseSessionService.save_live

    def close(self) -> None:  # noqa: B027 - optional hook, no-op by default
        """Release resources (idempotent). The base implementation does nothing."""

    def __enter__(self) -> BaseSessionService:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> BaseSessionService:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# --- helpers shared by the implementations -------------------------------------------------


def check_durability(durability: str) -> None:
    """Checks a store's ``durability`` argument.

    Raises:
        ValueError: ``durability`` is not ``"process"`` or ``"power"``.
    """
    if durability not in ("process", "power"):
        raise ValueError(f"durability must be 'process' or 'power', not {durability!r}")


@dataclass
class ScopedState:
    """State split by scope; every dict keeps the full (prefixed) keys."""

    app: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)
    temp: dict[str, Any] = field(default_factory=dict)


def split_state(state: dict[str, Any]) -> ScopedState:
    """Split a state dict or delta by key prefix."""
    out = ScopedState()
    for key, value in state.items():
        if key.startswith(APP_PREFIX):
            out.app[key] = value
        elif key.startswith(USER_PREFIX):
            out.user[key] = value
        elif key.startswith(TEMP_PREFIX):
            out.temp[key] = value
        else:
            out.session[key] = value
    return out


def merge_state(app: dict[str, Any], user: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    """The state a caller sees: session keys, then user and app keys (prefixes kept)."""
    return {**session, **user, **app}


def to_json(value: Any, what: str) -> str:
    """Serialize a state value or event to JSON text.

    Raises:
        SessionStoreError: the value is not JSON-serializable.
    """
    try:
        # NaN and the infinities as JSON5's constants (the parser reads them back), never null
        return pydantic_core.to_json(value, inf_nan_mode="constants").decode()
    except (pydantic_core.PydanticSerializationError, TypeError, ValueError) as e:
        raise SessionStoreError(f"cannot store {what}: not JSON-serializable ({e})") from e


def parse_turn(text: str | bytes) -> dict[str, Any]:
    """A stored turn record. One that cannot be parsed (corrupt, or nested deeper than the
    JSON parser allows) comes back as an unreadable record of no known format, so the
    agent reports it as a stale checkpoint and it can be discarded, instead of every call
    on the session failing."""
    try:
        data = pydantic_core.from_json(text)
    except ValueError as exc:
        return {"format": None, "status": "unreadable", "unreadable": f"the stored turn record cannot be read ({exc})"}
    if not isinstance(data, dict):
        return {"format": None, "status": "unreadable", "unreadable": "the stored turn record is not a JSON object"}
    return data


def state_to_json(value: Any, what: str) -> str:
    """A state value's stored JSON text: its tagged form (``encode_value``: plain JSON as it
    is; a tuple, a set, bytes, a dict with non-str keys as a one-key ``{"$t": ...}``-style
    dict), so it reads back exactly (``state_from_json``). A value that is not plain data
    is first converted by ``to_plain`` (a datetime to its ISO text, a model to its dict).

    Raises:
        SessionStoreError: the value is not plain data, or its form nests too deep.
    """
    from .._values import encode_value, to_plain

    try:
        encoded = encode_value(to_plain(value))  # datetimes, models, ...: their JSON form, as before
    except ValueError as e:
        raise SessionStoreError(f"cannot store {what}: not JSON-serializable ({e})") from e
    return to_json(encoded, what)


def state_from_json(text: str | bytes) -> Any:
    """A state value from its stored JSON text (``state_to_json``'s inverse; text stored by
    earlier builds, plain JSON, reads as it was written)."""
    from .._values import decode_value

    return decode_value(pydantic_core.from_json(text))


def json_roundtrip_state(state: dict[str, Any], what: str = "state") -> dict[str, Any]:
    """A deep copy of ``state`` holding exactly what the store would give back.

    Raises:
        SessionStoreError: a value cannot be stored.
    """
    return {k: state_from_json(state_to_json(v, f"{what} key {k!r}")) for k, v in state.items()}


def resolve_session_id(session_id: str | None) -> str:
    """The given id stripped, or a fresh one when ``None`` or blank."""
    if session_id is not None and session_id.strip():
        return session_id.strip()
    return new_id()


@dataclass
class PreparedAppend:
    """An event ready to store: ``stored`` (the copy without ``temp:`` keys), its JSON text,
    the persisted delta split by scope, and the ``temp:`` part of the delta."""

    stored: Event
    json: str
    delta: ScopedState


def prepare_append(event: Event) -> PreparedAppend:
    """Strip ``temp:`` keys from a copy of ``event`` and serialize it.

    Raises:
        SessionStoreError: the event (or a state value in it) is not JSON-serializable.
    """
    delta = event.actions.state_delta
    kept = {k: v for k, v in delta.items() if not k.startswith(TEMP_PREFIX)}
    stripped = event
    if len(kept) != len(delta):  # only a delta with temp: keys needs the stripped copy
        stripped = event.model_copy(update={"actions": event.actions.model_copy(update={"state_delta": kept})})
    try:
        text = stripped.model_dump_json()
    except (pydantic_core.PydanticSerializationError, TypeError, ValueError) as e:
        raise SessionStoreError(f"cannot store event {event.id}: not JSON-serializable ({e})") from e
    stored = Event.model_validate_json(text)
    scoped = split_state(stored.actions.state_delta)
    scoped.temp = {k: v for k, v in delta.items() if k.startswith(TEMP_PREFIX)}
    return PreparedAppend(stored=stored, json=text, delta=scoped)


def next_update_time(stored_last_update_time: float) -> float:
    """The new update time of a session: now, but strictly after the stored one, so a
    ``Session`` copy loaded before an append is always detected as stale."""
    return max(time.time(), math.nextafter(stored_last_update_time, math.inf))


def turn_conflict(session_id: str, expected: int, stored: int) -> TurnConflictError:
    """The ``TurnConflictError`` a store raises when the turn slot of ``session_id`` is at
    version ``stored`` instead of ``expected`` (returned, not raised).
    """
    return TurnConflictError(
        f"the turn slot of session {session_id!r} is at version {stored}, not {expected}: another runner "
        "wrote or claimed it first"
    )


def sort_journal(records: list[JournalRecord]) -> list[JournalRecord]:
    """``records`` with their batches expanded (``expand_batches``), in replay order: ``os``
    records by seq, then each call's intent and outcome by seq, then the decision records by
    seq.

    Raises:
        SessionStoreError: a batch record is malformed.
    """
    try:
        records = expand_batches(records)
    except ValueError as exc:
        raise SessionStoreError(f"unreadable journal: {exc}") from exc
    order = {"os": 0, "intent": 1, "outcome": 2, "decision": 3}
    return sorted(records, key=lambda r: (order[r.kind] // 3 + (r.kind != "os"), r.seq, order[r.kind]))


def check_not_stale(session: Session, stored_last_update_time: float) -> None:
    """Compare the stored update time (seconds since the epoch) with the live object's.

    Raises:
        StaleSessionError: the stored session is newer than ``session``.
    """
    if stored_last_update_time > session.last_update_time:
        raise StaleSessionError(
            f"session {session.id!r} (app {session.app_name!r}, user {session.user_id!r}) is stale: "
            f"it was updated in the store at {stored_last_update_time:.6f}, after this Session object "
            f"was loaded or last appended to ({session.last_update_time:.6f}). Another Session object "
            "or process appended to it; reload it with get_session() and retry."
        )


def apply_append(session: Session, prepared: PreparedAppend, update_time: float) -> None:
    """Update the live ``session`` after a successful append."""
    d = prepared.delta
    session.state.update(d.session)
    session.state.update(d.user)
    session.state.update(d.app)
    session.state.update(d.temp)
    session.events.append(prepared.stored)
    session.last_update_time = update_time


def filter_events(events: list[Event], after_timestamp: float | None, num_recent_events: int | None) -> list[Event]:
    """Apply ``get_session``'s event filters to events in append order."""
    if after_timestamp is not None:
        events = [e for e in events if e.timestamp >= after_timestamp]
    if num_recent_events is not None:
        events = events[-num_recent_events:] if num_recent_events > 0 else []
    return events
