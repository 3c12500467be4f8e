"""What a runner call does with the session's stored turn before anything of it runs (SPEC
§5): whose turn it is (``agent_for``); the decisions and results that resume it, or a
re-announcement or a discard (``claim_for``); the claim and the deletion of the slot by
compare-and-set; for a keyed run delivered again, the decisions that still apply; and the
checks on what the call was given (its message, a completion's value, a decision's digest),
made before anything is claimed or stored. Split from ``Runner`` (``runner``), which calls
these."""

from __future__ import annotations

from typing import Any

from .agent._checkpoint import PENDING_STATE_KEY
from .agent._context import BaseAgent, RunConfig
from .events import Content, Event, FunctionResponse
from .exceptions import (
    AlreadyResumingError,
    CallsPendingError,
    DecisionMismatchError,
    DecisionRefusedError,
    NoPendingCallError,
    TurnConflictError,
    ValueConversionError,
    describe_pending,
)
from .sessions import BaseSessionService
from .sessions._journal import TurnSlot
from .sessions._types import Session
from .tools import Tool
from .turns._codec import CompletionError, PendingCallInfo, announced_keys, decision_value, plain_value_problem
from .turns._decision import DecisionRecord, check_answer, check_edit
from .turns._record import Claim, TurnRecord

__all__ = (
    "ANNOUNCE",
    "DISCARD",
    "agent_for",
    "check_completion",
    "check_answers",
    "check_digest",
    "claim_for",
    "claim_turn",
    "decision_records",
    "delete_slot",
    "paused_unannounced",
    "record_of",
    "redelivered",
    "still_pending",
    "text_problem",
)

ANNOUNCE = object()
"""``claim_for``: announce the pending calls again; nothing is stored."""
DISCARD = object()
"""``claim_for``: discard the stored turn (``on_pending_message="discard"``)."""


def agent_for(root: BaseAgent, session: Session, slot: TurnSlot | None = None) -> BaseAgent:
    """The agent owning the in-flight turn (or a 0.1.0 checkpoint), else ``root``
    (the runner's agent tree)."""
    for record in (slot.data if slot is not None else None, session.state.get(PENDING_STATE_KEY)):
        if isinstance(record, dict) and isinstance(record.get("agent_name"), str):
            owner = root.find_agent(record["agent_name"])
            if owner is not None:
                return owner
    return root


def claim_for(
    record: TurnRecord,
    pending: list[PendingCallInfo],
    in_flight: set[str],
    interrupted: bool,
    run_config: RunConfig,
    content: Content | None,
    responses: list[FunctionResponse],
    decided: bool,
) -> dict[str, Any] | object:
    """What this run does with the stored (verified) turn: the decisions and results to
    resume it with (kept in memory: they become durable only in the journal record of
    the resume that uses them), ``ANNOUNCE`` (re-announce, store nothing) or
    ``DISCARD``.

    Raises:
        NoPendingCallError: a decision names no pending call (SPEC §5).
        CallsPendingError: calls are pending and nothing decides them.
        AlreadyResumingError: another runner holds the claim.
        DecisionMismatchError: a decision's digest does not match.
    """
    by_key = {p.call_key: p for p in pending}
    decisions: dict[str, Any] = {}
    results: dict[str, Any] = {}
    for key, raw in run_config.tool_confirmation_decisions.items():
        info = by_key.get(key)
        if info is None:
            if key in in_flight:
                raise AlreadyResumingError(
                    f"call {key} was already decided and started; its runner stopped before recording its "
                    "outcome; recover the turn with Runner.recover(). Nothing ran here",
                    pending,
                )
            raise NoPendingCallError(
                f"the decision for call {key!r} matches no pending call ({describe_pending(pending)}); nothing ran",
                pending,
            )
        expected = run_config.decision_digests.get(key)
        if expected is not None and expected != info.digest:
            raise DecisionMismatchError(
                f"the decision for call {key} was made on another call (digest {expected}, the pending call "
                f"{info.tool!r} has {info.digest}); nothing was claimed and no tool ran",
                pending,
            )
        approve = decision_value(raw)
        verb = "approve" if approve else "deny"
        if verb not in info.accepts:
            raise DecisionRefusedError(
                f"cannot {verb} call {key} to {info.tool!r} (RunConfig.tool_confirmation_decisions): it "
                f"{info.awaits} and accepts only {', '.join(repr(a) for a in info.accepts)} "
                f"({describe_pending(pending)}); nothing was claimed or stored and no tool ran",
                pending,
                call_key=key,
                kind=info.kind,
                accepts=info.accepts,
            )
        decisions[key] = True if approve else run_config.tool_denial_reasons.get(key, "")
    for key, chosen in run_config.in_doubt_decisions.items():
        info = by_key.get(key)
        if info is None:
            raise NoPendingCallError(
                f"the in-doubt decision for call {key!r} matches no pending call ({describe_pending(pending)}); "
                "nothing ran",
                pending,
            )
        if chosen.action not in info.accepts:
            raise DecisionRefusedError(
                f"cannot {chosen.action} call {key} to {info.tool!r} (RunConfig.in_doubt_decisions): it "
                f"{info.awaits} and accepts only {', '.join(repr(a) for a in info.accepts)}; nothing was claimed "
                "or stored and no tool ran",
                pending,
                call_key=key,
                kind=info.kind,
                accepts=info.accepts,
            )
    completions = [p for p in pending if p.kind == "completion"]
    for response in responses:
        if response.id is None:
            if len(completions) != 1:
                raise NoPendingCallError(
                    "a function response without an id is accepted only when exactly one call awaits a "
                    f"result ({describe_pending(pending)})",
                    pending,
                )
            info = completions[0]
            if response.name != info.tool:
                raise NoPendingCallError(
                    f"the function response names tool {response.name!r}, but the call awaiting a result is "
                    f"{info.call_key} of {info.tool!r}; nothing ran",
                    pending,
                )
        else:
            found = by_key.get(response.id)
            if found is not None and found.kind != "completion":
                raise DecisionRefusedError(
                    f"cannot complete call {found.call_key} to {found.tool!r} with a function response: it "
                    f"{found.awaits} and accepts only {', '.join(repr(a) for a in found.accepts)}; nothing ran",
                    pending,
                    call_key=found.call_key,
                    kind=found.kind,
                    accepts=found.accepts,
                )
            if found is None or response.name not in (found.tool, ""):
                raise NoPendingCallError(
                    f"the function response for {response.id!r} matches no call awaiting a result "
                    f"({describe_pending(pending)}); nothing ran",
                    pending,
                )
            info = found
        if response.error is not None:
            # a failed long-running call: the script's call raises RuntimeError(error)
            results[info.call_key] = CompletionError(response.error)
            continue
        value = response.response if response.response is not None else {}
        check_completion(value, info.call_key)
        results[info.call_key] = value
    if not decided:
        if content is None or not content.text:
            if interrupted:
                return {"decisions": {}, "responses": {}}  # recovery of an interrupted turn
            return ANNOUNCE
        if not pending:
            return {"decisions": {}, "responses": {}}  # an interrupted turn: recovered, then the message
        policy = run_config.on_pending_message
        if policy == "reject":
            raise CallsPendingError(
                f"a new message arrived while calls are pending ({describe_pending(pending)}); approve, deny "
                "or complete them first, or pass RunConfig(on_pending_message='deny' or 'discard')",
                pending,
            )
        if policy == "discard":
            return DISCARD
        decisions = {p.call_key: "the user sent a new message instead" for p in pending if p.kind != "in_doubt"}
    return {"decisions": decisions, "responses": results}


def decision_records(action: dict[str, Any], run_config: RunConfig, now: float) -> dict[str, DecisionRecord]:
    """Who decided what, for each call this resume decides (``action``: what ``claim_for``
    made of the run's decisions and results): the records ``Runner.decide`` gave
    (``RunConfig.decision_records``), and for a decision given otherwise (``RunConfig``
    decisions, a function response, ``on_pending_message="deny"``) a record without an
    actor, made ``now``. Records of calls this resume does not decide are dropped."""
    given = run_config.decision_records
    records: dict[str, DecisionRecord] = {}
    for key, value in action["decisions"].items():
        reason = value if isinstance(value, str) and value else None
        records[key] = given.get(key) or DecisionRecord(
            act="approve" if value is True else "deny", call_key=key, reason=reason, at=now
        )
    for key in action["responses"]:
        records[key] = given.get(key) or DecisionRecord(act="complete", call_key=key, at=now)
    for key, chosen in run_config.in_doubt_decisions.items():
        records[key] = given.get(key) or DecisionRecord(
            act=chosen.action, call_key=key, reason=chosen.reason or None, at=now
        )
    return records


def check_answers(
    records: dict[str, DecisionRecord],
    results: dict[str, Any],
    pending: list[PendingCallInfo],
    tools: dict[str, Tool],
) -> dict[str, DecisionRecord]:
    """Checks what the decisions of this resume give their calls against the tools, before
    anything is claimed: each edited approval's arguments (``check_edit``; their digest is
    set on the record returned: what runs), each approval's payload against the tool's
    ``payload_type`` and each completion value (``results``) against its ``result_type``
    (``check_answer``).

    Raises:
        EditNotSupportedError: the tool forbids edits.
        DecisionValueError: edited arguments, a payload or a completion value of the wrong
            shape (naming each field).
    """
    by_key = {p.call_key: p for p in pending}
    checked = dict(records)
    for key, record in records.items():
        info = by_key.get(key)
        tool = tools.get(info.tool) if info is not None else None
        if record.act != "approve" or info is None or tool is None:
            continue  # a tool that is not this agent's: the stale turn is reported, nothing runs
        if record.payload is not None:
            check_answer("payload", record.payload, info, tool)
        if record.args is not None:
            checked[key] = record.model_copy(update={"args_digest": check_edit(record.args, info, tool)})
    for key, value in results.items():
        info = by_key.get(key)
        tool = tools.get(info.tool) if info is not None else None
        if info is not None and tool is not None and not isinstance(value, CompletionError):
            check_answer("result", value, info, tool)
    return checked


async def claim_turn(service: BaseSessionService, session: Session, slot: TurnSlot, claim: Claim) -> TurnSlot:
    """Claims the stored turn for this run by compare-and-set: records this run as its
    owner (with a lease) before any tool runs. Nothing else of the record changes: the
    decisions stay in memory until the journal record of the resume that uses them.

    Raises:
        AlreadyResumingError: another runner claimed it first.
    """
    data = {**slot.data, "claim": claim.model_dump(mode="json")}
    try:
        version = await service.save_turn(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            data=data,
            snapshot=slot.snapshot,
            expected_version=slot.version,
        )
    except TurnConflictError as exc:
        raise AlreadyResumingError(
            f"another runner is resuming session {session.id!r} (it claimed the paused script first); nothing ran here",
        ) from exc
    return TurnSlot(version, data, slot.snapshot)


async def delete_slot(service: BaseSessionService, session: Session, slot: TurnSlot) -> None:
    """Deletes the stored turn ``slot`` by compare-and-set.

    Raises:
        AlreadyResumingError: another runner wrote the turn since it was read.
    """
    try:
        await service.save_turn(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            data=None,
            snapshot=None,
            expected_version=slot.version,
        )
    except TurnConflictError as exc:
        raise AlreadyResumingError(
            f"another runner is resuming session {session.id!r}; its turn was not discarded"
        ) from exc


def redelivered(
    run_config: RunConfig | None,
    call_key: str | None,
    approve: bool,
    *,
    digest: str | None,
    reason: str | None = None,
) -> RunConfig:
    """The decision of an approval or denial sent again under a run key already seen; a
    decision without a call key cannot be matched again and is left out."""
    rc = run_config or RunConfig()
    if call_key is None:
        return rc
    update: dict[str, Any] = {"tool_confirmation_decisions": {call_key: approve}}
    if digest is not None:
        update["decision_digests"] = {call_key: digest}
    if reason:
        update["tool_denial_reasons"] = {call_key: reason}
    return rc.model_copy(update=update)


def still_pending(
    run_config: RunConfig, responses: list[FunctionResponse], pending: list[PendingCallInfo], used: set[str]
) -> tuple[RunConfig, list[FunctionResponse]]:
    """The decisions and function responses of a redelivered keyed run (the same request
    again, after its runner stopped) that still apply: those naming a call that is still
    pending, of the kind it awaits, and not ``used`` (calls whose in-doubt decision the run
    announced before it stopped: a "rerun" may have run the tool again, so the call is in
    doubt again and is asked about, not rerun once more). The others were used by the run
    before it stopped (the journal has them) and are dropped, not refused."""
    kinds = {p.call_key: p.kind for p in pending}
    completions = [p for p in pending if p.kind == "completion"]
    decisions = {
        k: v
        for k, v in run_config.tool_confirmation_decisions.items()
        if k in kinds and (kinds[k] == "confirmation" or (kinds[k] == "completion" and not decision_value(v)))
    }
    kept = [
        r
        for r in responses
        if (r.id is None and len(completions) == 1) or (r.id is not None and kinds.get(r.id) == "completion")
    ]
    update = {
        "tool_confirmation_decisions": decisions,
        "tool_denial_reasons": {k: v for k, v in run_config.tool_denial_reasons.items() if k in decisions},
        "decision_digests": {k: v for k, v in run_config.decision_digests.items() if k in decisions},
        "in_doubt_decisions": {
            k: v for k, v in run_config.in_doubt_decisions.items() if kinds.get(k) == "in_doubt" and k not in used
        },
    }
    kept_keys = set(decisions) | {r.id for r in kept if r.id is not None}
    kept_keys |= {k for k in run_config.in_doubt_decisions if kinds.get(k) == "in_doubt" and k not in used}
    update["decision_records"] = {k: v for k, v in run_config.decision_records.items() if k in kept_keys}
    return run_config.model_copy(update=update), kept


def paused_unannounced(record: TurnRecord | None, run_key: str, mine: list[Event]) -> bool:
    """Whether the run with ``run_key`` suspended its turn (the stored turn is its own, at
    rest) and the announcement events at the end of what it stored (``mine``; maybe
    nothing) do not name every pending call: it stopped before storing them all."""
    if record is None or record.status != "suspended" or record.claim is not None or record.run_key != run_key:
        return False
    return not {p.call_key for p in record.pending} <= announced_keys(mine)


def record_of(slot: TurnSlot | None) -> TurnRecord | None:
    """The record ``slot`` holds, or None (no slot, or a record that does not validate)."""
    if slot is None:
        return None
    try:
        return TurnRecord.model_validate(slot.data)
    except Exception:
        return None


def check_digest(info: PendingCallInfo, digest: str | None) -> None:
    """Refuses a decision made on another call than the one pending under its key.

    Raises:
        DecisionMismatchError: ``digest`` is given and is not the pending call's.
    """
    if digest is not None and digest != info.digest:
        raise DecisionMismatchError(
            f"call {info.call_key} is a call to {info.tool!r} with digest {info.digest}, not {digest}: the decision "
            "was made on a stale view; nothing was claimed and no tool ran",
            [info],
        )


def check_completion(value: Any, call_key: str) -> None:
    """Refuses a completion value that cannot cross into the script, before anything is
    claimed or stored.

    Raises:
        ValueConversionError: not plain data, too deep or too large.
    """
    problem = plain_value_problem(value, f"the value completing call {call_key!r}")
    if problem is not None:
        raise ValueConversionError(f"{problem}; nothing was claimed or stored")


def text_problem(content: Content) -> str | None:
    """Why a user message cannot be stored (a text part with lone surrogates), or None."""
    for i, part in enumerate(content.parts):
        text = part.text
        if text is not None and not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"the message's part {i} text has a lone surrogate at position {exc.start}"
    return None
