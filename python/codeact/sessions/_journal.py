"""The durability store API (SPEC §5 v2): a per-turn journal, one continuation slot per
session, and a content-addressed blob store for large values.

Every ``BaseSessionService`` implements these five methods next to the event log. They are
small on purpose (a Postgres store implements the same):

``load_turn`` / ``save_turn``
    The *turn slot*: at most one per session, holding the in-flight turn (a JSON record:
    script, transcript, pending calls, claim) and, optionally, the interpreter continuation
    (snapshot bytes). ``save_turn`` is a compare-and-set on ``TurnSlot.version``: it writes
    only when the stored version is ``expected_version`` (0 = no slot), and *replaces* the
    previous slot, so storage does not grow with the interpreter's heap.
``append_journal`` / ``read_journal``
    The journal of one turn: small ``JournalRecord`` rows (an intent before a tool starts, its
    outcome before the script goes on, the OS answers of an advance). Each ``append_journal``
    call is durable when it returns (one transaction).
``put_blob`` / ``get_blob``
    Values above the inline limit, stored once under their SHA-256 and referenced from the
    journal.

Deleting a session deletes its slot, journal and blobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

__all__ = ("JournalKind", "JournalRecord", "StoredDecision", "TurnSlot")

JournalKind = Literal["intent", "outcome", "os", "decision"]


class JournalRecord(NamedTuple):
    """One journal row.

    Attributes:
        kind: ``"intent"`` (a call is about to run: ``data`` is ``[tool, argument digest]``),
            ``"outcome"`` (its value or error, ``data`` is the encoded outcome) or ``"os"`` (the
            OS answers an advance of the script received, ``data`` is a JSON list) or
            ``"decision"`` (who decided what on a call: a ``codeact.DecisionRecord`` as JSON,
            written with the intent or outcome the decision produces; SPEC §5 v4).
        seq: the call's position in the turn (intent, outcome), the advance's index (os), or
            the decision's index in the turn (decision: 0, 1, ... in the order they were used).
        data: JSON text.
    """

    kind: JournalKind
    seq: int
    data: str


class StoredDecision(NamedTuple):
    """A ``"decision"`` journal record as ``BaseSessionService.list_decisions`` returns it:
    where it is (the session and the turn) and the record as stored (sealed under a key;
    ``Runner.decisions`` checks the seal and reads it)."""

    user_id: str
    session_id: str
    turn: str
    record: JournalRecord


@dataclass(frozen=True, slots=True)
class TurnSlot:
    """A session's turn slot as stored.

    Attributes:
        version: increases by one with each ``save_turn``; the compare-and-set token.
        data: the turn record (JSON-compatible dict).
        snapshot: the interpreter continuation, or None (the turn then replays from its
            script's start).
    """

    version: int
    data: dict[str, Any]
    snapshot: bytes | None
