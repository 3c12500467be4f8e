"""How ``Runner.decide`` turns a decision into a resume (split from ``runner``): the pending
call it decides, read from the verified turn (``pick``), the run options and message that
carry it (``resolve_decision``; a batch: ``resolve_batch``), who decided what
(``decision_record``), and the checks of a recovery (``check_recoverable``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._runner_claims import (
    check_digest,
    record_of,
    redelivered,
)
from .agent._context import InDoubtDecision, RunConfig
from .events import Content, FunctionResponse, Part
from .exceptions import (
    AlreadyResumingError,
    NoPendingCallError,
    StaleCheckpointError,
)
from .turns._codec import PendingCallInfo
from .turns._decision import Decision, DecisionRecord
from .turns._turn import Turn, pick_call

if TYPE_CHECKING:
    from .runner import Runner

__all__ = (
    "check_recoverable",
    "decision_record",
    "finished",
    "only_pending",
    "pick",
    "resolve_batch",
    "resolve_decision",
)


async def pick(
    runner: Runner, user_id: str, session_id: str, decision: Decision, run_config: RunConfig | None
) -> tuple[PendingCallInfo, Turn | None]:
    """The pending call ``decision`` decides, read from the verified turn, after checking
    that its kind accepts the decision (SPEC §5 v4), and the ``Turn`` it was read from
    (the run that resumes it reuses it: the turn is verified once).

    Raises:
        ValueError: ``run_config`` asks to discard the paused script the decision resumes.
        StaleCheckpointError: the stored turn's seal does not hold in this session.
        AlreadyResumingError: another runner drives the turn, or the call already started.
        NoPendingCallError: the key matches no pending call, or none is given and not
            exactly one call accepts the decision.
        DecisionRefusedError: the call's kind does not accept the decision.
    """
    verb = decision.act
    if run_config is not None and run_config.discard_pending_checkpoint:
        raise ValueError(
            f"cannot {verb} with RunConfig(discard_pending_checkpoint=True): discarding drops the paused script "
            f"the {verb} resumes; call Runner.discard_pending_checkpoint() instead. Nothing ran"
        )
    _, turn = await runner._turn_state(user_id, session_id)
    call = pick_call(turn, decision, session_id, runner.clock)
    return call, (turn if call.tool else None)


async def resolve_batch(
    runner: Runner, decisions: list[Decision], user_id: str, session_id: str, run_config: RunConfig | None
) -> tuple[RunConfig, Content | None, Turn | None, str | None]:
    """The run options, message, verified turn and run key that carry a batch of
    decisions into one ``run_async``: each member resolved as ``_resolve_decision`` does,
    against the turn loaded once, and their decisions, records and completions merged.

    Raises:
        ValueError: a malformed batch (see ``decide``).
        Otherwise as ``decide``, for the first member refused (nothing claimed).
    """
    if not decisions:
        raise ValueError("an empty batch of decisions decides nothing; nothing ran")
    keys: list[str] = []
    for d in decisions:
        if not isinstance(d, Decision):
            raise ValueError(f"a batch holds Decision objects, not {type(d).__name__}; nothing ran")
        if d.verb == "recover" or d.call_key is None:
            what = "a 'recover'" if d.verb == "recover" else f"a {d.verb!r} without a call_key"
            raise ValueError(f"every member of a batch names the call it decides; {what} does not; nothing ran")
        keys.append(d.call_key)
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError(f"a batch decides each call once; {', '.join(twice)} appear twice; nothing ran")
    run_keys = {d.run_key for d in decisions if d.run_key is not None}
    if len(run_keys) > 1:
        raise ValueError(f"the members of a batch share one run_key, not {sorted(run_keys)}; nothing ran")
    run_key = next(iter(run_keys), None)
    if run_config is not None and run_config.discard_pending_checkpoint:
        raise ValueError(
            "cannot decide with RunConfig(discard_pending_checkpoint=True): discarding drops the paused script the "
            "decisions resume; call Runner.discard_pending_checkpoint() instead. Nothing ran"
        )
    redelivery = run_key is not None and await finished(runner, user_id, session_id, run_key)
    loaded = None if redelivery else (await runner._turn_state(user_id, session_id))[1]
    fields = (
        "tool_confirmation_decisions",
        "tool_denial_reasons",
        "decision_digests",
        "decision_records",
        "in_doubt_decisions",
    )
    merged: dict[str, dict[str, Any]] = {f: {} for f in fields}
    parts: list[Part] = []
    turn: Turn | None = None
    for d in decisions:
        rc_d, message, turn_d = await resolve_decision(
            runner,
            d.model_copy(update={"run_key": run_key}),
            user_id,
            session_id,
            run_config,
            batch=(redelivery, loaded),
        )
        for f in fields:
            merged[f].update(getattr(rc_d, f))
        if message is not None:
            parts.extend(message.parts)
        turn = turn or turn_d
    rc = (run_config or RunConfig()).model_copy(update=merged)
    return rc, (Content(role="user", parts=parts) if parts else None), turn, run_key


async def resolve_decision(
    runner: Runner,
    decision: Decision,
    user_id: str,
    session_id: str,
    run_config: RunConfig | None,
    batch: tuple[bool, Turn | None] | None = None,
) -> tuple[RunConfig, Content | None, Turn | None]:
    """The run options (and, for a completion, the message) that carry ``decision`` into
    ``run_async``, and the verified turn it was checked against (None for a redelivery).
    A decision sent again under a run key already seen is matched again only against
    what is still pending (``run_async``), never refused for a call it already decided.
    ``batch``: ``(redelivery, turn)`` read once for a batch this decision is part of."""
    rc = run_config or RunConfig()
    verb, call_key, digest = decision.verb, decision.call_key, decision.digest
    if batch is None:
        redelivery = decision.run_key is not None and await finished(runner, user_id, session_id, decision.run_key)
        info, turn = (None, None) if redelivery else await pick(runner, user_id, session_id, decision, run_config)
    elif batch[0]:  # a redelivered batch: matched again against what is still pending
        info, turn = None, None
    else:
        picked = pick_call(batch[1], decision, session_id, runner.clock)
        info, turn = picked, (batch[1] if picked.tool else None)
    record = decision_record(runner, decision, info)
    if info is not None and info.tool:
        check_digest(info, digest)  # edited args are checked with the claim (check_edits)
    if verb in ("approve", "deny"):
        approve = verb == "approve"
        if info is None:
            kinds = ("confirmation",) if approve else ("confirmation", "completion")
            key = call_key or await only_pending(runner, user_id, session_id, kinds)
            again = redelivered(run_config, key, approve, digest=digest, reason=decision.reason)
            if key is not None:
                record.call_key = key
                again = again.model_copy(update={"decision_records": {key: record}})
            return again, None, None
        update: dict[str, Any] = {
            "tool_confirmation_decisions": {info.call_key: approve} if info.call_key else {},
            "decision_digests": {info.call_key: info.digest if digest is None else digest},
            "decision_records": {info.call_key: record},
        }
        if not approve:
            update["tool_denial_reasons"] = {info.call_key: decision.reason} if decision.reason else {}
        return rc.model_copy(update=update), None, turn
    if verb == "complete":
        assert call_key is not None
        if info is None:
            shown = await runner.turn_info(user_id=user_id, session_id=session_id)
            tool = next((p.tool for p in shown.pending if p.call_key == call_key), "") if shown is not None else ""
        else:
            tool = info.tool
        response = FunctionResponse(name=tool, response=decision.payload, id=call_key, error=decision.error)
        rc = rc.model_copy(update={"decision_records": {call_key: record}})
        return rc, Content(role="user", parts=[Part(function_response=response)]), turn
    assert verb == "resolve" and call_key is not None and decision.action is not None
    chosen = InDoubtDecision(action=decision.action, value=decision.payload, reason=decision.reason or "")
    update = {"in_doubt_decisions": {call_key: chosen}, "decision_records": {call_key: record}}
    return rc.model_copy(update=update), None, turn


def decision_record(runner: Runner, decision: Decision, info: PendingCallInfo | None) -> DecisionRecord:
    """Who decided what (``DecisionRecord``), now, on the call ``info`` (None: a
    redelivery, the call named by the decision)."""
    return DecisionRecord(
        act=decision.act,  # type: ignore[arg-type]
        call_key=info.call_key if info is not None else decision.call_key or "",
        tool=info.tool if info is not None else "",
        actor=decision.actor,
        reason=decision.reason,
        at=runner.clock(),
        args=decision.args,
        payload=decision.payload if decision.verb == "approve" else None,
    )


async def check_recoverable(runner: Runner, user_id: str, session_id: str, run_key: str | None) -> Turn | None:
    """Refuses a recovery with nothing to recover (a recovery sent again under a run key
    already seen goes ahead: ``run_async`` replays or resumes the run with that key);
    returns the verified turn to recover."""
    if run_key is not None and await finished(runner, user_id, session_id, run_key):
        return None
    info, turn = await runner._turn_state(user_id, session_id)
    if info is not None and info.status == "stale":
        raise StaleCheckpointError(f"cannot recover session {session_id!r}: {info.reason}; nothing ran")
    if info is None or info.status not in ("interrupted", "running"):
        what = "no turn in flight" if info is None else f"its turn is {info.status}"
        raise NoPendingCallError(f"nothing to recover in session {session_id!r}: {what}; nothing ran")
    if info.status == "running":
        assert info.claim is not None
        raise AlreadyResumingError(
            f"cannot recover session {session_id!r}: it is being run by {info.claim.describe()}; nothing ran",
            info.pending,
        )
    return turn


async def only_pending(runner: Runner, user_id: str, session_id: str, kinds: tuple[str, ...]) -> str | None:
    """The key of the one call of ``kinds`` pending and not started, or None (none, or
    several): what a redelivered decision without a call key named the first time
    (it was accepted only when exactly one such call was pending)."""
    info = await runner.turn_info(user_id=user_id, session_id=session_id)
    if info is None:
        return None
    keys = [p.call_key for p in info.pending if p.kind in kinds and p.call_key not in info.in_flight]
    return keys[0] if len(keys) == 1 else None


async def finished(runner: Runner, user_id: str, session_id: str, run_key: str) -> bool:
    """Whether a run with ``run_key`` happened already: it stored events, it holds (or
    held, and was interrupted) the session's turn, or it wrote the stored turn (it paused,
    maybe before storing any event). ``run_async`` then replays, recovers or announces it
    again instead of deciding again."""
    from .runner import RUN_KEY  # runner imports this module

    session = await runner._session(user_id, session_id, create=False)
    if any((e.custom_metadata or {}).get(RUN_KEY) == run_key for e in session.events):
        return True
    record = record_of(
        await runner.session_service.load_turn(app_name=runner.app_name, user_id=user_id, session_id=session_id)
    )
    if record is None:
        return False
    return record.run_key == run_key or (record.claim is not None and record.claim.run_key == run_key)
