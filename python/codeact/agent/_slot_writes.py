"""The turn slot writes of the turn driver: saves, checkpoints and the suspension with its
announcement events (SPEC §5)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Literal

from ..events import Event
from ..exceptions import AlreadyResumingError, TurnConflictError
from ..runtime import Call, Gather, PendingCall
from ..sessions._journal import JournalRecord
from ..turns._codec import announcement_events
from ..turns._record import TURN_FORMAT, CallPosition, PendingEntry
from ..turns._verify import record_data, seal_record, slot_data
from ._call_results import _Suspend
from ._files import to_text
from ._overlay import with_start
from ._slot_context import shared_context
from ._turn_events import _fields, _TurnEvents

if TYPE_CHECKING:
    from ..runtime import CodeRuntime
    from ..sessions import BaseSessionService


class _SlotWrites(_TurnEvents):
    """The driver's slot writes (``TurnDriver`` inherits them)."""

    _key: tuple[str, str, str]
    _service: BaseSessionService | None
    _runtime: CodeRuntime
    _sealed: bool

    # ------------------------------------------------------------------ the slot

    async def save(
        self,
        status: Literal["running", "suspended"],
        *,
        snapshot: bytes | None = None,
        at: list[CallPosition] | None = None,
        pending: list[PendingEntry] | None = None,
        gather: bool = False,
        journal: list[JournalRecord] | None = None,
        files: dict[str, str] | None = None,
    ) -> None:
        """Writes the turn slot (compare-and-set on the version this runner holds); with
        ``journal``, the journal records held for the turn's next durable write too, in the
        same commit (``commit_turn``). The session's file layer goes with a continuation
        (``{"base": ...}``); ``files`` replaces it (the end commit's pre-images).

        Raises:
            AlreadyResumingError: another runner wrote the slot since (it owns the turn now).
        """
        st, run = self.state, self.run
        app, user, sid = self._key
        if self._service is None:  # a run without a store (direct agent runs): nothing is durable
            st.written = True
            return
        update = {
            "format": TURN_FORMAT,
            "status": status,
            "turn_stdout": run.turn_stdout,
            "next_pos": st.next_pos,
            "advance": st.advance,
            "at": at or [],
            "gather": gather,
            "pending": pending or [],
            "snapshot_sha256": hashlib.sha256(snapshot).hexdigest() if snapshot is not None else None,
            # A suspended turn at rest has no owner; a running one is this run's.
            "claim": run.ctx.claim if status == "running" else None,
            "run_key": run.ctx.run_key,
            "files": with_start(
                files
                if files is not None
                else {"base": to_text(st.files)}
                if st.files is not None and snapshot is not None
                else None,
                st.overlay_start,
            ),
        }
        if st.context is None:  # the run's shared context (format 4), stored at the turn's first save
            fixed = st.record
            if fixed.system_prompt_ref is not None or fixed.transcript_refs:
                st.context = {}  # a resumed turn's record (format 4): its blobs are stored
            else:
                shared = await shared_context(
                    self._service, self._key, run.stored_context, fixed.system_prompt, fixed.transcript
                )
                st.context = shared or {}
        if self._sealed:
            record = st.record.model_copy(update=update)
            seal_record(self._runtime, record, self._key)
            data = record_data(record)
            if st.context:
                data.update(st.context)
        else:
            if st.record_data is None:  # the fixed part's JSON form, made once a turn
                st.record_data = record_data(st.record)
                if st.context:
                    st.record_data.update(st.context)
            data = slot_data(st.record_data, update)
        if st.written or status == "suspended":  # held events: stored first, with the held outcomes
            await self._write_held_events()
        try:
            if journal:
                st.version = await self._service.commit_turn(
                    run.ctx.session, st.turn, journal, data=data, snapshot=snapshot, expected_version=st.version
                )
            else:
                st.version = await self._service.save_turn(
                    app_name=app,
                    user_id=user,
                    session_id=sid,
                    data=data,
                    snapshot=snapshot,
                    expected_version=st.version,
                )
        except TurnConflictError as exc:
            raise AlreadyResumingError(
                f"another runner took over turn {st.turn} of session {sid!r} ({exc}); this runner stops"
            ) from exc
        run.slot_version = st.version
        st.written = True

    async def _write_held_events(self) -> None:
        """Stores the events held for the turn's next durable write, if any
        (``_JournalWrites`` holds them)."""

    def _take_held(self) -> list[JournalRecord]:
        """The journal records held for the turn's next durable write (read-only calls'
        outcomes, OS answers), sealed, now taken to be written with the slot;
        ``_JournalWrites`` holds them."""
        return []

    def _checkpoint_due(self) -> bool:
        agent, st = self.agent, self.state
        if not self.run.supports_suspension or not st.written:
            return False
        if agent.checkpoint_every is not None and st.calls_since_checkpoint >= agent.checkpoint_every:
            return True
        return (
            agent.checkpoint_every_seconds is not None
            and time.monotonic() - st.last_checkpoint >= agent.checkpoint_every_seconds
        )

    async def _checkpoint(self, step: Call | Gather, calls: list[PendingCall]) -> None:
        st = self.state
        snapshot = step.call.dump() if isinstance(step, Call) else step.dump()
        await self.save(
            "running",
            snapshot=snapshot,
            at=[self._at(c) for c in calls],
            gather=not isinstance(step, Call),
            journal=self._take_held(),  # the read-only calls before the checkpoint: in its commit
        )
        st.calls_since_checkpoint = 0
        st.last_checkpoint = time.monotonic()

    def _at(self, call: PendingCall) -> CallPosition:
        return CallPosition(call_id=call.call_id, pos=self.state.positions[call.call_id])

    async def _suspend(
        self, step: Call | Gather, calls: list[PendingCall], suspended: list[_Suspend]
    ) -> AsyncGenerator[Event, None]:
        agent, run = self.agent, self.run
        snapshot = step.call.dump() if isinstance(step, Call) else step.dump()
        await self.save(
            "suspended",
            snapshot=snapshot,
            at=[self._at(c) for c in calls],
            pending=[s.entry for s in suspended],
            gather=not isinstance(step, Call),
            journal=self._take_held(),  # the read-only calls before the pause: in its commit
        )
        run.end("suspended")
        events = announcement_events(agent.name, run.ctx.invocation_id, [s.info for s in suspended])
        for i, event in enumerate(events):
            if i == 0:
                event = run.event(**_fields(event))
            yield event
