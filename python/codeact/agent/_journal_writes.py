"""The journal writes of the turn driver: intents, outcomes (inline or as a blob) and the
OS answers, fenced by the slot version the runner holds (SPEC §5).

Read-only calls (SPEC §5 v4, ``Tool.read_only``) write no intent: their outcome records are
*held* (``_held``), as the OS answers of the script's advances are (``_os_unwritten``), and
go with the turn's next durable write, in the same commit: the intent of the next call with
effects (so that call never starts before every outcome the script saw is durable), any other
journal write, a checkpoint or a suspension (written with the slot: ``commit_turn``), the end of
the script. A held outcome names its
call (``"c": [tool, argument digest]``), so replay checks it as it checks an intent. The held
outcomes of one commit (with the OS answers before them) are one ``batch`` journal record: one
row for the store to write, expanded when the journal is read."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pydantic_core

from ..events import Event
from ..exceptions import AlreadyResumingError, TurnConflictError
from ..runtime import ResumeError, ResumeValue
from ..sessions._journal import JournalRecord, batch_record
from ..sessions._service import SessionNotFoundError, StaleSessionError, apply_held
from ..sessions._types import Session
from ..turns._codec import INLINE_VALUE_LIMIT, MAX_VALUE_BYTES, decode_outcome, encode_outcome
from ..turns._verify import seal_journal
from ._call_results import _SHORT_INT, _SHORT_SCALARS, Outcome, _Invoke
from ._files import EMPTY, apply_layer, preimages, to_text
from ._slot_writes import _SlotWrites

if TYPE_CHECKING:
    from ..sessions._service import JournalAppender


class _JournalWrites(_SlotWrites):
    """The driver's journal writes (``TurnDriver`` inherits them)."""

    _os_unwritten: list[JournalRecord]
    _held: list[JournalRecord]
    _held_events: list[Event]
    _appender: JournalAppender | None
    _scope: str
    _emit: bool
    _events: list[Event]
    _mounts: dict[str, Path]

    # ------------------------------------------------------------------ journal

    async def _record(
        self,
        pos: int,
        tool: str,
        digest: str,
        outcome: Outcome,
        *,
        intent: bool = False,
        note: JournalRecord | None = None,
        read_only: bool = False,
        hold: bool = False,
    ) -> Outcome:
        """Writes ``outcome`` (and the intent when none is stored, and ``note``, the record of
        the decision that produced it) durably; returns it, or the
        error the script gets when the value is too large for the boundary. A value that
        cannot be encoded as it is (a str with lone surrogates) is recorded, and given to the
        script, escaped; one that cannot be encoded at all becomes the script's error.

        ``read_only``: a read-only call's outcome (no intent: the record names its call);
        ``hold``: it is held for the turn's next durable write instead of written now."""
        value: Any = outcome.value if type(outcome) is ResumeValue else outcome
        kind = type(value)
        if kind is int and -_SHORT_INT < value < _SHORT_INT:
            text = f'{{"v":{value}}}'  # as encode_outcome writes it
        elif kind in _SHORT_SCALARS:
            text = encode_outcome(outcome).decode()
        else:
            try:
                data = encode_outcome(outcome)
            except (ValueError, TypeError, pydantic_core.PydanticSerializationError):
                outcome = _escaped(outcome, tool)
                data = encode_outcome(outcome)
            if len(data) > MAX_VALUE_BYTES:
                outcome = ResumeError(f"the result of {tool!r} is larger than {MAX_VALUE_BYTES} bytes", "ValueError")
                data = encode_outcome(outcome)
            elif len(data) > INLINE_VALUE_LIMIT and self._service is not None:
                blob = hashlib.sha256(data).hexdigest()
                app, user, sid = self._key
                await self._service.put_blob(app_name=app, user_id=user, session_id=sid, digest=blob, data=data)
                data = _json({"r": blob, "n": len(data)}).encode()
            text = data.decode()
        if read_only:
            text = f'{text[:-1]},"c":{_json([tool, digest])}}}'
            if hold:
                if self._service is None:  # nothing is durable: nothing to hold
                    return outcome
                self._held.append(JournalRecord("outcome", pos, text))
                self.state.calls_since_checkpoint += 1
                if self._emit:  # its event is held with it
                    self._events.append(
                        self._hold_event(self._response_event(f"{self.state.turn}:{pos}", tool, outcome))
                    )
                return outcome
        records = [JournalRecord("outcome", pos, text)]
        if intent:
            records.insert(0, JournalRecord("intent", pos, _json([tool, digest])))
        if note is not None:
            records.insert(-1, note)  # the outcome stays last (a call counted since the checkpoint)
        if not self._write_now(records):
            await self._write_awaited(records)
        if self._emit:
            self._events.append(self._response_event(f"{self.state.turn}:{pos}", tool, outcome))
        return outcome

    async def _recorded(self, data: dict[str, Any]) -> Outcome:
        if "r" in data and self._service is not None:
            app, user, sid = self._key
            blob = await self._service.get_blob(app_name=app, user_id=user, session_id=sid, digest=data["r"])
            if blob is None or hashlib.sha256(blob).hexdigest() != data["r"]:
                return ResumeError("the journaled result is missing from the store (or altered)", "RuntimeError")
            data = pydantic_core.from_json(blob)
        return decode_outcome(data)

    def _write_now(self, records: list[JournalRecord]) -> bool:
        """``_write`` without awaiting, when the store has a ``journal_appender`` and the
        slot is written: True when the records (after any OS answers not yet written) are
        stored; False when nothing was written (the caller awaits ``_write``).

        Raises:
            AlreadyResumingError: another runner took the turn over; nothing was written.
        """
        st = self.state
        if self._appender is None or not st.written or self._held_events:
            return False
        full = [seal_journal(self._runtime, self._scope, r) for r in records] if self._sealed else records
        if self._os_unwritten or self._held:
            full = self._waiting() + full
        try:
            if not self._appender(self.run.ctx.session, st.turn, full, st.version):
                return False
        except TurnConflictError as exc:
            raise self._taken_over(exc) from exc
        if self._os_unwritten:
            self._os_unwritten = []
        if self._held:
            self._held = []
        if records and records[-1].kind == "outcome":
            st.calls_since_checkpoint += 1
        return True

    async def _flush(self) -> None:
        """Writes the held outcomes of read-only calls (with the OS answers not yet written)
        now, in one commit: before a call with effects that writes no intent of its own (one
        re-run in recovery), a checkpoint, a suspension, the end of the script. Nothing to
        write without a store, or when nothing is held."""
        if not self._held and not self._held_events:
            return
        if self._service is None:
            self._held = []
            self._held_events = []
            return
        if not self._write_now([]):
            await self._write_awaited([])

    async def _end_files(self, how: str) -> bool:
        """The script's end commit when it wrote through a read-write mount (SPEC §5 "Files"):
        the pre-images of the paths its layer touches go to the turn slot with the records
        held for the next durable write, in one commit; then the layer is applied to the
        host. A crash from here on replays the script against those pre-images (the same
        layer again) and applies it again: the host gets the writes once. ``how``: how the
        drive ended (``TurnEnd.how``); the layer of a script that did not end (a divergence,
        a suspension) is not applied. False when there was nothing to commit or apply."""
        st = self.state
        layer = st.files
        ended = how in ("finished", "budget") or self.run.outcome == "handed_off"
        if not self._mounts or not ended or layer is None or layer == EMPTY:
            return False
        pre = st.files_pre
        if pre is None:
            pre = await anyio.to_thread.run_sync(preimages, layer, self._mounts)
        if self._service is not None:
            await self._write_held_events()  # held events first, with the records held with them
            records = self._waiting()
            self._os_unwritten, self._held = [], []
            await self.save("running", journal=records, files={"pre": to_text(pre)})
        st.files_pre = pre
        await anyio.to_thread.run_sync(apply_layer, layer, self._mounts)
        return True

    def _waiting(self) -> list[JournalRecord]:
        """The records waiting for the next write (left waiting: the caller clears them once
        written), sealed: the OS answers not yet written, or, when read-only calls' outcomes
        are held, those answers and the outcomes as one ``batch`` record (one row, whatever
        the number of calls; the store's ``read_journal`` expands it)."""
        records = self._os_unwritten + self._held
        if self._sealed:
            records = [seal_journal(self._runtime, self._scope, r) for r in records]
        return [batch_record(records)] if self._held else records

    def _take_held(self) -> list[JournalRecord]:
        """The held records (``_waiting``) for a slot write that commits them
        (``save(journal=...)``); none are held after. Only the held outcomes make a slot
        write carry records: OS answers alone wait as before."""
        if not self._held or self._service is None or self._held_events:
            return []  # held events: ``save`` writes them first (``_write_held_events``)
        records = self._waiting()
        self._os_unwritten = []
        self._held = []
        return records

    def _taken_over(self, exc: TurnConflictError) -> AlreadyResumingError:
        return AlreadyResumingError(
            f"another runner took over turn {self.state.turn} of session {self._key[2]!r} ({exc}); this runner "
            "wrote nothing more and stops"
        )

    async def _write(self, records: list[JournalRecord]) -> None:
        """Appends journal records, fenced by the slot version this runner holds: through
        the store's ``journal_appender`` when it takes them (``_write_now``), else awaited.

        Raises:
            AlreadyResumingError: another runner took the turn over; nothing was written.
        """
        if not self._write_now(records):
            await self._write_awaited(records)

    async def _write_awaited(self, records: list[JournalRecord]) -> None:
        """``_write`` once ``_write_now`` declined: the turn's first write saves the slot
        first (then tries the appender again), any other awaits ``append_journal``."""
        if self._service is None:
            return
        if self._held_events:
            await self._write_events(records)
            return
        if not self.state.written:
            if not records and self._held:
                # only held outcomes (a script of read-only calls ends): the slot and them in
                # one commit
                await self.save("running", journal=self._take_held())
                return
            await self.save("running")
            if self._write_now(records):
                return
        last = records[-1].kind if records else ""
        if self._sealed:
            records = [seal_journal(self._runtime, self._scope, r) for r in records]
        if self._os_unwritten or self._held:
            # taken before the await: a sibling of a gather may hold more meanwhile
            records = self._waiting() + records
            self._os_unwritten = []
            self._held = []
        if not records:
            return
        try:
            await self._service.append_journal(
                self.run.ctx.session, self.state.turn, records, expected_version=self.state.version
            )
        except TurnConflictError as exc:
            raise self._taken_over(exc) from exc
        if last == "outcome":
            self.state.calls_since_checkpoint += 1

    def _hold_event(self, event: Event) -> Event:
        """Holds ``event`` (a read-only call's, or one after it) for the turn's next durable
        write: the runner applies it to the live session and yields it without storing it
        (``InvocationContext.held_events``); ``_write_events`` stores it."""
        self.run.ctx.held_events.add(event.id)
        self._held_events.append(event)
        return event

    def _hold_after(self, event: Event) -> None:
        """Holds ``event`` too when it comes after a held event (a live preview is never
        stored; an event held already stays as it is)."""
        if not event.partial and event.id not in self.run.ctx.held_events:
            self._hold_event(event)

    async def _write_held_events(self) -> None:
        if self._held_events:
            await self._write_events([])

    async def _write_events(self, records: list[JournalRecord]) -> None:
        """``_write_awaited`` while events are held: the held events (with their state
        deltas), the held outcomes and OS answers and ``records`` in one commit
        (``commit_events``), the slot saved first when the turn's first write.

        Raises:
            AlreadyResumingError: another runner took the turn over; nothing was written.
        """
        assert self._service is not None
        st = self.state
        if not st.written:
            await self.save("running")
        last = records[-1].kind if records else ""
        if self._sealed:
            records = [seal_journal(self._runtime, self._scope, r) for r in records]
        records = self._waiting() + records
        events = self._held_events
        self._os_unwritten, self._held, self._held_events = [], [], []
        session = self.run.ctx.session
        try:
            try:
                await self._service.commit_events(session, st.turn, records, events, expected_version=st.version)
            except StaleSessionError:
                # the runner this run took the turn from stored an event after this run loaded
                # the session (as ``Runner._append``): brought up to date, the held events
                # applied again, retried once (the fence still says whose turn it is)
                await self._refresh(session, events)
                await self._service.commit_events(session, st.turn, records, events, expected_version=st.version)
        except TurnConflictError as exc:
            raise self._taken_over(exc) from exc
        finally:
            self.run.ctx.held_events.difference_update(e.id for e in events)
        if last == "outcome":
            st.calls_since_checkpoint += 1

    async def _refresh(self, session: Session, held: list[Event]) -> None:
        """``session`` brought up to date in place from the store (its ``temp:`` state kept),
        then the ``held`` events applied to it again."""
        assert self._service is not None
        fresh = await self._service.get_session(
            app_name=session.app_name, user_id=session.user_id, session_id=session.id
        )
        if fresh is None:
            raise SessionNotFoundError(f"session {session.id!r} not found")
        temp = {k: v for k, v in session.state.items() if k.startswith("temp:")}
        session.state.clear()
        session.state.update(fresh.state)
        session.state.update(temp)
        session.events[:] = fresh.events
        session.last_update_time = fresh.last_update_time
        for event in held:
            apply_held(session, event, {})


def _intents(inv: _Invoke) -> list[JournalRecord]:
    """``_intent`` of ``inv``, with the record of the decision that lets it run, if any."""
    return [_intent(inv)] if inv.note is None else [_intent(inv), inv.note]


def _intent(inv: _Invoke) -> JournalRecord:
    """The intent record of a call about to run: its tool, argument digest and how it was
    allowed to run, when it needed allowing."""
    return JournalRecord(
        "intent",
        inv.pos,
        _json([inv.tool.name, inv.digest, inv.decided] if inv.decided else [inv.tool.name, inv.digest]),
    )


def _escaped(outcome: Outcome, tool: str) -> Outcome:
    """An outcome that failed to encode, with its text escaped (or, failing that, an error
    naming why)."""
    try:
        if isinstance(outcome, ResumeError):
            escaped: Outcome = ResumeError(escape_surrogates(outcome.message), escape_surrogates(outcome.exc_type))
        else:
            escaped = ResumeValue(escape_surrogates(outcome.value))
        encode_outcome(escaped)
        return escaped
    except (ValueError, TypeError, pydantic_core.PydanticSerializationError) as exc:
        return ResumeError(f"the result of {tool!r} cannot be recorded ({type(exc).__name__})", "ValueError")


def escape_surrogates(value: Any) -> Any:
    """``value`` with every str holding lone surrogates (what ``os.fsdecode`` gives for a
    file name that is not UTF-8) escaped as ``\\udcxx`` text, so it can be journaled and
    enter the script; other values unchanged. Only called on values ``value_problem``
    accepted (bounded depth)."""
    kind = type(value)
    if kind is str:
        if value.isascii():
            return value
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if kind is list:
        return [escape_surrogates(v) for v in value]
    if kind is tuple:
        return tuple(escape_surrogates(v) for v in value)
    if kind is dict:
        return {escape_surrogates(k): escape_surrogates(v) for k, v in value.items()}
    return value


_new_record: Any = functools.partial(tuple.__new__, JournalRecord)
"""``_new_record((kind, seq, data))`` is ``JournalRecord(kind, seq, data)`` without the named
tuple's Python-level ``__new__`` (the driver makes two records per call)."""


def _json(value: Any) -> str:
    return pydantic_core.to_json(value, inf_nan_mode="constants").decode()
