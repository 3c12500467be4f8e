"""Recovery: a stored turn restored into a run (``restore``: checked with ``verify_turn``
first, then the continuation or a replay of the script from its journal), and the turn slot
dropped (``drop_slot``) or its claim released (``release_claim``) when the run ends."""

from __future__ import annotations

import base64
import binascii
import functools
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any, cast

import anyio
from pydantic import ValidationError

from ..events import Content, Event
from ..exceptions import ReplayDivergenceError, SnapshotError, TurnConflictError
from ..runtime import SessionRestoringRuntime
from ..runtime._stepper import run_step
from ..sessions._journal import TurnSlot
from ..turns._codec import claim_decisions
from ..turns._verify import open_journal, verify_turn
from ._driver import Journal, TurnState
from ._files import EMPTY, from_text, overlay_mounts, overlay_part, replay_with, start_layer
from ._namespace import Namespace, Prepared
from ._overlay import load_overlay
from ._run import SCRIPT_NAME, Run
from ._slot_context import load_context

__all__ = ("drop_slot", "first_line", "release_claim", "restore")

log = logging.getLogger("codeact.durability")


def first_line(exc: Exception) -> str:
    """The first line of the exception's message, or its class name when it has none."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


async def restore(
    run: Run, slot: TurnSlot, *, persist_namespace: bool, uses_session: bool
) -> AsyncGenerator[Event | tuple[TurnState, Any], None]:
    """Checks a stored turn (``verify_turn``: format, owner, roster, continuation integrity
    and seal) before anything runs, then restores the run from it; yields a
    stale-checkpoint event, or the ``TurnState`` and first step to drive. The calls the
    continuation waits on come from the verified continuation, never from the record."""
    runtime = run.settings.runtime
    s = run.ctx.session
    given = run.ctx.turn_view
    # The runner verified this slot and restored its continuation for this run (issue 47: once
    # per call); it is used once, by the run that resumes the turn.
    run.ctx.turn_view = None
    view = (
        given
        if given is not None and given.stale is None
        else await verify_turn(
            runtime,
            slot,
            session_key=(s.app_name, s.user_id, s.id),
            agent_name=run.settings.name,
            tools=run.tools,
            roster=run.roster,
            persist_namespace=persist_namespace,
            uses_session=uses_session,
        )
    )
    if view.stale is not None:
        run.end("error", keep_slot=True)
        yield run.stale_event(view.stale)
        return
    record = view.record
    assert record is not None
    snapshot = slot.snapshot
    in_session = view.in_session
    try:
        run.system_prompt, messages = await load_context(run.ctx.session_service, (s.app_name, s.user_id, s.id), record)
        run.transcript = [Content.model_validate(c) for c in messages]
        run.iteration = record.iteration
        run.turn_invocation = record.invocation_id
        run.turn_stdout = record.turn_stdout if snapshot is not None else ""
        run.schema_retries = record.schema_retries
        namespace = record.namespace
        if in_session:
            assert isinstance(namespace, dict)
            run.session_start = base64.b64decode(namespace["session"], validate=True)
        elif persist_namespace and namespace is not None:
            run.namespace = Namespace.from_state(namespace)
            run.prepared = Prepared.from_state(namespace.get("script"))
    except (KeyError, TypeError, ValueError, ValidationError, binascii.Error) as exc:
        run.end("error", keep_slot=True)
        yield run.stale_event(f"the stored turn is malformed ({first_line(exc)})")
        return
    try:
        records = open_journal(
            runtime,
            (s.app_name, s.user_id, s.id),
            record.turn,
            await run.ctx.session_service.read_journal(  # type: ignore[union-attr]
                app_name=s.app_name, user_id=s.user_id, session_id=s.id, turn=record.turn
            ),
        )
    except SnapshotError as exc:
        run.end("error", keep_slot=True)
        yield run.stale_event(str(exc))
        return
    journal = Journal.from_records(records)
    rc = run.ctx.run_config
    state = TurnState(
        turn=record.turn,
        record=record,
        version=slot.version,
        written=True,
        journal=journal,
        pending={p.pos: p for p in record.pending},
        decisions=claim_decisions(rc.tool_confirmation_decisions, rc.tool_denial_reasons),
        responses=dict(run.ctx.turn_responses),
        in_doubt=dict(rc.in_doubt_decisions),
        records=dict(rc.decision_records),
    )
    if getattr(runtime, "mounts", None) and start_layer(runtime) is not None:  # the file layer where it resumes
        try:
            stored = record.files or {}
            if snapshot is not None:
                state.files = from_text(stored["base"]) if "base" in stored else EMPTY
            else:  # from the script's start: the host as it was, where the script's end applied
                state.files_pre = from_text(stored["pre"]) if "pre" in stored else None
                state.files = state.files_pre if state.files_pre is not None else EMPTY
                if isinstance(stored.get("start"), str):  # the session overlay it started from
                    key = (run.ctx.session.app_name, run.ctx.session.user_id, run.ctx.session.id)
                    inherited = await load_overlay(run.ctx.session_service, key, stored["start"])
                    state.files = overlay_part(inherited, overlay_mounts(runtime), base=state.files)
            state.overlay_start = stored.get("start") if isinstance(stored.get("start"), str) else None
        except (TypeError, ValueError, binascii.Error) as exc:
            run.end("error", keep_slot=True)
            yield run.stale_event(f"the stored turn's file layer is malformed ({first_line(exc)})")
            return
    if snapshot is not None:
        state.next_pos = record.next_pos
        state.advance = record.advance
        state.positions = {a.call_id: a.pos for a in record.at}
        # the continuation verify_turn restored, live: a resumed turn drives it like a live one
        if in_session:
            run.session = view.session
        yield state, view.step
        return
    start: Callable[..., Any] = runtime.start
    if in_session:
        # no continuation: the script runs again from the idle session it started from
        try:
            # in_session: the agent checked the runtime has namespace sessions (_uses_session)
            run.session = await run_step(cast(SessionRestoringRuntime, runtime).load_session, run.session_start)
        except SnapshotError as exc:
            run.end("error", keep_slot=True)
            yield run.stale_event(str(exc))
            return
        start = run.session.feed
    replay = journal.os.get(0)
    if replay or state.files is not None:
        try:
            step = await run_step(
                functools.partial(start, record.script, SCRIPT_NAME, **replay_with(state.files, replay))
            )
        except ReplayDivergenceError as exc:
            run.end("error", keep_slot=True)
            yield run.error_event(
                "codeact.nondeterministic_replay",
                f"replaying turn {state.turn} diverged: {exc}. No tool ran. Run again with "
                "RunConfig(discard_pending_checkpoint=True), or call Runner.discard_pending_checkpoint(), to "
                "drop the turn.",
            )
            return
    else:
        step = await run_step(start, record.script, SCRIPT_NAME)
    yield state, step


async def drop_slot(run: Run) -> None:
    """Deletes this run's turn slot once the run has ended (its last event is stored)."""
    service = run.ctx.session_service
    if not run.slot_version or service is None:
        return
    s = run.ctx.session
    try:
        await service.save_turn(
            app_name=s.app_name,
            user_id=s.user_id,
            session_id=s.id,
            data=None,
            snapshot=None,
            expected_version=run.slot_version,
        )
    except TurnConflictError:
        pass  # another runner owns the slot now; it is theirs to finish
    run.slot_version = 0


async def release_claim(run: Run) -> None:
    """Clears this run's claim from the stored turn when the run ends without finishing it
    (an exception, a stale or divergent turn): the turn is left exactly as it was, and
    any runner may resume or recover it at once. Best effort: a failure here leaves the
    claim to expire with its lease."""
    service, claim = run.ctx.session_service, run.ctx.claim
    if service is None or claim is None or not run.slot_version:
        return
    s = run.ctx.session
    with anyio.CancelScope(shield=True):
        try:
            slot = await service.load_turn(app_name=s.app_name, user_id=s.user_id, session_id=s.id)
            if slot is None or slot.version != run.slot_version:
                return
            stored = slot.data.get("claim")
            if not isinstance(stored, dict) or stored.get("owner") != claim.owner:
                return
            run.slot_version = await service.save_turn(
                app_name=s.app_name,
                user_id=s.user_id,
                session_id=s.id,
                data={**slot.data, "claim": None},
                snapshot=slot.snapshot,
                expected_version=slot.version,
            )
        except Exception:
            log.debug("could not release the claim on session %r", s.id, exc_info=True)
