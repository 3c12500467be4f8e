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
    call is durable when it returns (one transaction). The outcomes of read-only calls held
    for one commit are written as one ``"batch"`` record (``batch_record``); ``read_journal``
    returns its records expanded (``expand_batches``), so a reader sees each of them.
``put_blob`` / ``get_blob``
    Values above the inline limit, stored once under their SHA-256 and referenced from the
    journal.

Deleting a session deletes its slot, journal and blobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import pydantic_core

__all__ = ("JournalKind", "JournalRecord", "StoredDecision", "TurnSlot", "batch_record", "expand_batches")

JournalKind = Literal["intent", "outcome", "os", "decision", "batch"]


class JournalRecord(NamedTuple):
    """One journal row.

    Attributes:
        kind: ``"intent"`` (a call is about to run: ``data`` is ``[tool, argument digest]``),
            ``"outcome"`` (its value or error, ``data`` is the encoded outcome) or ``"os"`` (the
            OS answers an advance of the script received, ``data`` is a JSON list) or
            ``"decision"`` (who decided what on a call: a ``codeact.DecisionRecord`` as JSON,
            written with the intent or outcome the decision produces; SPEC §5 v4) or
            ``"batch"`` (the records of one buffered commit in one row: the outcomes of
            read-only calls and the OS answers before them; ``batch_record``). A store keeps
            the first ``outcome`` and ``batch`` written at a seq; it replaces the others.
        seq: the call's position in the turn (intent, outcome), the advance's index (os), the
            decision's index in the turn (decision: 0, 1, ... in the order they were used), or
            the lowest call position among a batch's outcomes (batch).
        data: JSON text.
    """

    kind: JournalKind
    seq: int
    data: str


def batch_record(records: list[JournalRecord]) -> JournalRecord:
    """One ``"batch"`` record holding ``records`` (outcomes of read-only calls and OS answers,
    each sealed already when the journal is sealed: a batch is never sealed as a whole, so a
    record keeps the seal it has as a row). Its seq is the lowest position among its outcomes
    (unique in a turn: a position is held once), else the lowest seq.

    ``data`` is a JSON list of ``[kind, seq, data]`` triples, in the order given.
    """
    outcomes = [r.seq for r in records if r.kind == "outcome"]
    seq = min(outcomes) if outcomes else min(r.seq for r in records)
    return JournalRecord("batch", seq, pydantic_core.to_json([[r.kind, r.seq, r.data] for r in records]).decode())


def expand_batches(records: list[JournalRecord]) -> list[JournalRecord]:
    """``records`` with each ``"batch"`` record replaced by the records it holds (the others
    unchanged, in the order given; the expanded ones after them, batch by batch in seq order).
    A record the rows hold already at the same kind and seq is kept, not the batched one (and
    of two batches, the one of the lower seq's): a store writes a position once, this only
    makes the answer not depend on the order rows come back in. Idempotent.

    Raises:
        ValueError: a batch record is not a JSON list of ``[kind, seq, data]`` triples.
    """
    batches = [r for r in records if r.kind == "batch"]
    if not batches:
        return records
    out = [r for r in records if r.kind != "batch"]
    seen = {(r.kind, r.seq) for r in out}
    for batch in sorted(batches, key=lambda r: r.seq):
        items = pydantic_core.from_json(batch.data)
        if type(items) is not list:
            raise ValueError(f"journal batch record {batch.seq} is not a list")
        for item in items:
            if type(item) is not list or len(item) != 3:
                raise ValueError(f"journal batch record {batch.seq} holds a malformed record")
            kind, seq, data = item
            if kind not in ("os", "outcome", "intent", "decision") or type(seq) is not int or type(data) is not str:
                raise ValueError(f"journal batch record {batch.seq} holds a malformed record")
            if (kind, seq) not in seen:
                seen.add((kind, seq))
                out.append(JournalRecord(kind, seq, data))
    return out


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
