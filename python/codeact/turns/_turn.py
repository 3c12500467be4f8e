"""A session's in-flight turn, loaded and verified once per runner call (SPEC §5).

``Turn`` is what the runner reads before it decides anything: the stored slot, its verified
view (``verify_turn``: the record, the continuation restored, the pending calls read from
it) and the journal of the turn with its seals checked. Everything a decision is checked
against comes from here: the pending calls (one kind vocabulary, ``PendingCallInfo.kind``,
and the decisions each accepts, ``PendingCallInfo.accepts``), the calls already started, the
turn's status. The view's continuation is restored once and handed to the run that resumes
the turn, which does not restore it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic_core

from ..events import Content, Event, PendingCallInfo
from ..exceptions import AlreadyResumingError, NoPendingCallError, StaleCheckpointError, describe_pending
from ..sessions._journal import JournalRecord, TurnSlot
from ._codec import args_digest
from ._decision import Decision, DecisionRecord, check_accepted
from ._record import Claim, Clock, TurnRecord, claim_abandoned
from ._verify import TurnView, call_digest

__all__ = (
    "Turn",
    "TurnInfo",
    "TurnStatus",
    "discard_notice",
    "in_flight_calls",
    "journal_calls",
    "journal_decisions",
    "open_decisions",
    "pick_call",
)

TurnStatus = Literal["suspended", "running", "interrupted", "stale"]
"""``"suspended"`` (paused, at rest), ``"running"`` (a live runner holds its claim),
``"interrupted"`` (its runner stopped) or ``"stale"`` (it cannot be resumed here)."""


@dataclass
class TurnInfo:
    """The state of a session's in-flight turn (``Runner.turn_info``).

    Attributes:
        status: ``"suspended"`` (paused at ``pending``, nobody driving it), ``"running"`` (a
            live runner drives it: ``claim``), ``"interrupted"`` (its runner stopped:
            recover it with ``Runner.recover`` or ``codeact sessions recover``; ``in_flight``
            lists the calls that had started) or ``"stale"`` (this agent cannot resume it:
            ``reason``).
        turn: the turn id, or "".
        claim: who holds (or held) the turn, or None.
        pending: the calls awaiting a decision or a result, from the verified continuation.
        in_flight: call keys that started and have no recorded outcome (in doubt).
        reason: why the turn is stale.
        seal_failed: the turn is stale because a seal does not hold in this session (an
            edited record, one copied from another session, or one sealed by 0.2.0):
            decisions on it raise ``StaleCheckpointError``.
    """

    status: Literal["suspended", "running", "interrupted", "stale"]
    turn: str = ""
    claim: Claim | None = None
    pending: list[PendingCallInfo] = field(default_factory=list)
    in_flight: list[str] = field(default_factory=list)
    reason: str = ""
    seal_failed: bool = False


@dataclass
class Turn:
    """A stored turn as one runner call read it: verified once.

    Attributes:
        slot: the stored turn slot (record, continuation, version).
        view: the verified view (``verify_turn``); ``view.stale`` says why the turn cannot be
            resumed here.
        journal: the turn's journal records, seals checked and removed (empty for a stale
            turn).
        in_flight: keys of pending calls the journal shows as decided already: a
            confirmation whose intent is written (it started), or any call with an outcome.
        strict: verified for resuming (this agent, its tool roster), not only for listing.
    """

    slot: TurnSlot
    view: TurnView
    journal: list[JournalRecord] = field(default_factory=list)
    in_flight: set[str] = field(default_factory=set)
    strict: bool = True

    @property
    def record(self) -> TurnRecord | None:
        """The verified record, or None for a stale turn."""
        return self.view.record if self.view.stale is None else None

    @property
    def stale(self) -> str | None:
        """Why the turn cannot be resumed here, or None."""
        return self.view.stale

    @property
    def pending(self) -> list[PendingCallInfo]:
        """The calls awaiting the caller (approve / deny, a result, or an in-doubt
        resolution), read from the verified continuation; calls already started are left
        out (they are in flight: recover the turn). A call in doubt that ran with edited
        arguments shows them (what a rerun runs), from the sealed journal, and the
        script's own as ``script_args``."""
        shown = [p for p in self.view.pending if p.call_key not in self.in_flight]
        edits = {r.call_key: r for r in journal_decisions(self.journal) if r.args is not None}
        if not edits:
            return shown
        return [_edited(p, edits[p.call_key]) if p.kind == "in_doubt" and p.call_key in edits else p for p in shown]

    def call(self, call_key: str) -> PendingCallInfo | None:
        """The pending call under ``call_key``, or None."""
        return next((p for p in self.pending if p.call_key == call_key), None)

    def status(self, clock: Clock) -> TurnStatus:
        """The turn's status now (``clock``: wall-clock seconds, for the claim's lease)."""
        record = self.record
        if record is None:
            return "stale"
        if record.claim is not None and not claim_abandoned(record.claim, clock):
            return "running"
        if record.status == "running" or record.claim is not None or self.in_flight:
            return "interrupted"
        return "suspended"

    @property
    def interrupted(self) -> bool:
        """Its runner stopped (or a live one holds it): a run without a decision recovers it."""
        record = self.record
        return record is not None and (record.status == "running" or record.claim is not None or bool(self.in_flight))


def journal_decisions(journal: list[JournalRecord]) -> list[DecisionRecord]:
    """The decision records of a turn's journal (seals checked and removed), in the order
    they were used; records that do not validate are left out."""
    found: list[DecisionRecord] = []
    for r in journal:
        if r.kind != "decision":
            continue
        try:
            found.append(DecisionRecord.model_validate_json(r.data))
        except ValueError:
            continue
    return found


def open_decisions(journal: list[JournalRecord]) -> list[DecisionRecord]:
    """The decisions of a turn's journal on calls with no recorded outcome: those a
    recovery of the turn still acts on (an approved call that started, maybe edited)."""
    done = {r.seq for r in journal if r.kind == "outcome"}
    return [d for d in journal_decisions(journal) if _position(d.call_key) not in done]


def _position(call_key: str) -> int:
    try:
        return int(call_key.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return -1


def _edited(call: PendingCallInfo, decision: DecisionRecord) -> PendingCallInfo:
    """``call`` (in doubt) as it ran: with the edited arguments of its approval."""
    args = decision.args or {}
    try:
        digest = call_digest(call.call_key, call.tool, args_digest(args))
    except ValueError:
        digest = ""
    return call.model_copy(update={"args": args, "script_args": call.args, "digest": digest})


def in_flight_calls(record: TurnRecord, journal: list[JournalRecord]) -> set[str]:
    """Keys of ``record``'s pending calls the journal shows as decided already: a
    confirmation whose intent is written (it started), or any call with an outcome."""
    intents = {r.seq for r in journal if r.kind == "intent"}
    outcomes = {r.seq for r in journal if r.kind == "outcome"}
    return {p.call_key for p in record.pending if p.pos in outcomes or (p.kind == "confirmation" and p.pos in intents)}


def journal_calls(turn: str, journal: list[JournalRecord]) -> tuple[list[str], list[str]]:
    """The calls of ``turn`` the journal shows ``(ran, started)``: ``ran`` those with a
    recorded outcome, ``started`` those with an intent and no outcome (they may have run),
    each as ``"call <key> to '<tool>'"`` (``"call <key>"`` when no intent names the tool: a
    read-only call), in position order."""
    tools: dict[int, str] = {}
    for r in journal:
        if r.kind == "intent":
            try:
                data = pydantic_core.from_json(r.data)
            except ValueError:
                continue
            if isinstance(data, list) and data and isinstance(data[0], str):
                tools[r.seq] = data[0]
    outcomes = sorted({r.seq for r in journal if r.kind == "outcome"})

    def name(pos: int) -> str:
        return f"call {turn}:{pos} to {tools[pos]!r}" if pos in tools else f"call {turn}:{pos}"

    ran = [name(pos) for pos in outcomes]
    started = [name(pos) for pos in sorted(set(tools) - set(outcomes))]
    return ran, started


def discard_notice(author: str, invocation_id: str, turn: Turn, pending: list[PendingCallInfo], reason: str) -> Event:
    """The event stored when a paused turn is discarded (``on_pending_message="discard"``):
    it names each discarded call and what it awaited, and the calls of that turn that had
    already run (or started), so the model, which sees it in its history as a note before
    the new message, does not assume they did not happen (``custom_metadata``
    ``{"codeact_kind": "turn_discarded", "call_keys": [...], "ran": [...], "started": [...]}``;
    a progress event, not ``is_final_response()``)."""
    record = turn.record
    ran, started = journal_calls(record.turn, turn.journal) if record is not None else ([], [])
    dropped = "; ".join(f"call {p.call_key} to {p.tool!r}, which {p.awaits}" for p in pending)
    lines = [f"The paused turn was discarded ({reason}); its pending calls did not run: {dropped or 'none'}."]
    lines.append(
        "Calls of that turn that had already run: " + ("; ".join(ran) if ran else "none") + "."
        if ran or not started
        else "No call of that turn had finished."
    )
    if started:
        lines.append("Calls that had started and may have run: " + "; ".join(started) + ".")
    meta: dict[str, Any] = {
        "codeact_kind": "turn_discarded",
        "call_keys": [p.call_key for p in pending],
        "ran": ran,
        "started": started,
    }
    return Event(
        invocation_id=invocation_id,
        author=author,
        content=Content.from_text(" ".join(lines), role="model"),
        custom_metadata=meta,
    )


def pick_call(turn: Turn | None, decision: Decision, session_id: str, clock: Clock) -> PendingCallInfo:
    """The pending call of ``turn`` (None: the session has no turn in flight) that
    ``decision`` decides, after checking that its kind accepts it (SPEC §5 v4). For a stale
    turn that this runner cannot resume (not a failed seal), the call is the one the stored
    record names (``tool`` ``""``): the run that follows reports the stale turn and claims
    nothing, the call stays as it was.

    Raises:
        StaleCheckpointError: the stored turn's seal does not hold in this session.
        AlreadyResumingError: another runner drives the turn, or the call already started
            under a runner that stopped (recover the turn).
        NoPendingCallError: the key matches no pending call, or none is given and not exactly
            one call accepts the decision.
        DecisionRefusedError: the call's kind does not accept the decision.
    """
    verb, call_key = decision.act, decision.call_key
    if turn is not None and turn.record is None:
        if turn.view.seal_failed:
            # Not this session's turn as sealed (edited, copied from another session, or
            # sealed by 0.2.0): nothing it names is decided and nothing is stored.
            raise StaleCheckpointError(f"cannot {verb} in session {session_id!r}: {turn.stale}")
        raw = turn.slot.data.get("pending")
        entries = [p for p in raw if isinstance(p, dict)] if isinstance(raw, list) else []
        keys = [p.get("call_key") for p in entries]
        if (call_key is None and len(keys) != 1) or (call_key is not None and call_key not in keys):
            raise NoPendingCallError(
                f"cannot {verb} in session {session_id!r}: the stored turn cannot be resumed here ({turn.stale}) "
                "and names no such call; nothing ran"
            )
        key = call_key or str(keys[0])
        kind = next((p.get("kind") for p in entries if p.get("call_key") == key), None)
        stale = PendingCallInfo(
            call_key=key, tool="", kind=kind if kind in ("completion", "in_doubt") else "confirmation", invocation_id=""
        )
        check_accepted(decision, stale, [stale])
        return stale
    pending = turn.pending if turn is not None else []
    record = turn.record if turn is not None else None
    claim = record.claim if record is not None else None
    if turn is not None and turn.status(clock) == "running":
        assert claim is not None
        raise AlreadyResumingError(
            f"cannot {verb} in session {session_id!r}: another runner, {claim.describe()}, is resuming it; "
            "nothing ran here",
            pending,
        )
    in_flight = sorted(turn.in_flight) if turn is not None else []
    if in_flight and (call_key is None or call_key in in_flight):
        raise AlreadyResumingError(
            f"cannot {verb} in session {session_id!r}: call {call_key or in_flight[0]} was already decided "
            f"and started, and its runner ({claim.describe() if claim else 'unknown'}) stopped before "
            "its outcome was recorded; recover the turn with Runner.recover() or `codeact sessions recover`",
            pending,
        )
    if call_key is None:
        matching = [p for p in pending if verb in p.accepts]
        if len(matching) == 1:
            return matching[0]
        reason = f"no call accepts {verb!r}" if not matching else f"{len(matching)} calls accept {verb!r}; name one"
        raise NoPendingCallError(
            f"cannot {verb} without a call key in session {session_id!r}: {reason} ({describe_pending(pending)})",
            pending,
        )
    found = next((p for p in pending if p.call_key == call_key), None)
    if found is None:
        raise NoPendingCallError(
            f"cannot {verb} call {call_key!r} in session {session_id!r}: it matches no pending call "
            f"({describe_pending(pending)}); nothing ran",
            pending,
        )
    check_accepted(decision, found, pending)
    return found
