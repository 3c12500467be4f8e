"""What the turn driver knows about the turn it runs: its state, the journal read back
for replay, and how a drive ended (SPEC §5)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic_core

from ..runtime import Complete, Raised
from ..sessions._journal import JournalRecord
from ..turns._record import PendingEntry, TurnRecord


@dataclass(slots=True)
class TurnEnd:
    """How a turn's drive ended.

    Attributes:
        how: ``"finished"`` (``step`` is the script's ``Complete`` / ``Raised``),
            ``"suspended"`` (the pending calls were announced), ``"stopped"`` (the run ended:
            an error event, a hand-off signalled by a tool) or ``"budget"`` (the script broke
            a per-script budget; ``message`` is fed back to the model).
    """

    how: Literal["finished", "suspended", "stopped", "budget"]
    step: Complete | Raised | None = None
    message: str = ""


@dataclass(slots=True)
class _Entry:
    """A journaled call: the intent (or, for a read-only call, the call its outcome names),
    and the outcome once recorded."""

    tool: str
    digest: str
    outcome: Any = None  # parsed outcome record, or None


@dataclass
class Journal:
    """The journal of one turn as read back for replay: calls by position, OS answers by
    advance index, the arguments an edited approval ran a call with (``edits``, by
    position) and the index the next decision record takes (``next_decision``)."""

    calls: dict[int, _Entry] = field(default_factory=dict)
    os: dict[int, list[Any]] = field(default_factory=dict)
    edits: dict[int, dict[str, Any]] = field(default_factory=dict)
    approvals: dict[int, dict[str, Any]] = field(default_factory=dict)  # position -> its approval record
    next_decision: int = 0

    @classmethod
    def from_records(cls, records: list[JournalRecord]) -> Journal:
        journal = cls()
        for r in records:
            data = pydantic_core.from_json(r.data)
            if r.kind == "os":
                journal.os[r.seq] = [(kind, value) for kind, value in data]  # JSON gave [kind, value] lists
            elif r.kind == "intent":
                journal.calls[r.seq] = _Entry(data[0], data[1])
            elif r.kind == "decision":
                journal.next_decision = max(journal.next_decision, r.seq + 1)
                if isinstance(data, dict) and data.get("act") == "approve":
                    pos = int(str(data["call_key"]).rsplit(":", 1)[1])
                    journal.approvals[pos] = data
                    if isinstance(data.get("args"), dict):
                        journal.edits[pos] = data["args"]
            elif r.seq in journal.calls:
                journal.calls[r.seq].outcome = data
            elif type(data) is dict and "c" in data:  # a read-only call's outcome names its call
                tool, digest = data["c"]
                journal.calls[r.seq] = _Entry(tool, digest, data)
        return journal


@dataclass
class TurnState:
    """What the driver knows about the turn it runs.

    Attributes:
        turn: the turn id (``<invocation id>:<iteration>``); call keys are ``<turn>:<pos>``.
        record: the turn record's fixed part (script, transcript, ...), stored in the slot.
        version: the slot version this runner last wrote or claimed (0: none yet).
        written: whether this turn's record is in the slot.
        journal: the journal read back (empty for a live turn).
        pending: positions of calls the suspension is paused at -> their entry.
        decisions: call key -> True (approve) / reason text (deny), held in memory: a
            decision becomes durable only with the journal record of the resume that uses it.
        responses: call key -> completion value.
        in_doubt: call key -> the human's decision on a call in doubt.
        records: call key -> who decided what (``codeact.DecisionRecord``), journaled with
            the record the decision produces (``TurnDriver._note``).
        next_pos / advance: the next call position and advance index.
        positions: the interpreter's call id -> position, for the calls of this turn.
        record_data: ``record``'s JSON form (``record_data``), made at the first save of a
            turn without a snapshot key and reused by each later save (``slot_data``).
        files: the session's file layer as the last advance left it (``_files``), or None
            when the runtime has no read-write mount (no layer).
        files_pre: the pre-images stored by the script's end commit (a recovered turn whose
            script had ended): the base its replay reads, kept for its end commit again.
        context: the record fields that stand for its system prompt and transcript
            (``_slot_context.shared_context``, made at the turn's first save), or None
            (not made yet, or kept inline: ``{}``).
    """

    turn: str
    record: TurnRecord
    version: int = 0
    written: bool = False
    journal: Journal = field(default_factory=Journal)
    pending: dict[int, PendingEntry] = field(default_factory=dict)
    decisions: dict[str, Any] = field(default_factory=dict)
    responses: dict[str, Any] = field(default_factory=dict)
    in_doubt: dict[str, Any] = field(default_factory=dict)
    records: dict[str, Any] = field(default_factory=dict)
    next_pos: int = 0
    advance: int = 0
    positions: dict[int, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    record_data: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    last_checkpoint: float = field(default_factory=time.monotonic)
    calls_since_checkpoint: int = 0
    files: bytes | None = None
    files_pre: bytes | None = None
    overlay_start: str | None = None  # the session overlay's blob the script started from (_overlay)
