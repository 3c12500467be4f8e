"""The typed turn record kept in a session's turn slot, and the claim that says who owns it
(SPEC §5 v3).

A store keeps the record as JSON text and knows nothing of its fields but ``TurnSlot.version``
(the compare-and-set token). Everything the agent and the runner read back goes through one
``TurnRecord.model_validate``; a record that does not validate is a stale checkpoint naming the
field.

What the record does **not** decide: the call a suspended turn waits on (tool name and
arguments) is read from the verified continuation (the snapshot bytes), never from the record;
decisions are not stored in the record at all: an approval becomes durable only in the journal
record written just before the approved tool starts (``JournalRecord`` of kind ``"intent"``).

Claims and leases
-----------------
Whoever drives a turn holds its *claim*: the owner (``host:pid:token``), when it was taken,
and a lease (seconds) that the owner renews while it works. A claim is *abandoned*, and may be
taken over, when its lease has run out, or at once when its owner is known to be gone: a
process on this host that no longer runs, or a run of this process that has ended.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = (
    "DEFAULT_CLAIM_LEASE",
    "SEAL_VERSION",
    "TURN_FORMAT",
    "CallPosition",
    "Claim",
    "Clock",
    "PendingEntry",
    "TurnRecord",
    "claim_abandoned",
    "new_claim",
    "record_problem",
    "release_owner",
)

TURN_FORMAT = 4
"""The turn record format this version writes: format 4 (issue 54) keeps the system prompt and
the transcript in the session's blobs, stored once per run and a turn's delta at each turn
(``system_prompt_ref``, ``transcript_refs``). Format 3 (0.2.0: everything inline) is read as
it is and written back as format 4 at the turn's next save. Format 2 (0.2.0 development
builds, whose records carried the pending call's arguments and the decisions) and format 1
(0.1.0 checkpoints in session state) are reported as stale; see docs/durability.md."""

READ_FORMATS = frozenset({3, TURN_FORMAT})
"""The turn record formats this version reads."""

SEAL_VERSION = 2
"""The seal scheme this version writes (``TurnRecord.seal``, and ``"s"`` in a sealed journal
record): the MAC binds the record to its session, ``(app_name, user_id, session_id)``, so a
sealed turn or journal record copied into another session fails its seal. Records sealed by
0.2.0 carry no scheme (their MAC binds no session) and are refused, naming the upgrade and
``codeact sessions discard``; see docs/durability.md."""

DEFAULT_CLAIM_LEASE = 30.0
"""Seconds a claim stays valid without renewal (``RunConfig.claim_lease``)."""

Clock = Callable[[], float]
"""A source of wall-clock time in seconds since the epoch (``time.time``); tests replace it."""

_HOST = socket.gethostname()
_LIVE: set[str] = set()  # owners of the runs of this process that are still going


class CallPosition(BaseModel):
    """Where one call of the continuation sits in the turn: the interpreter's ``call_id``
    and the turn's call position (``pos``; the call key is ``<turn>:<pos>``)."""

    model_config = ConfigDict(extra="ignore")

    call_id: int
    pos: int


class PendingEntry(BaseModel):
    """A call the suspended turn waits on, as the record keeps it: its key and position and
    what it waits for. The tool name and arguments are not here: they are read from the
    verified continuation (``Runner.pending``).

    Attributes:
        call_key: ``<turn>:<pos>``, unique within the session.
        pos / call_id: the call's position in the turn and the interpreter's id for it.
        kind: ``"confirmation"`` (approve / deny), ``"completion"`` (a long-running tool's
            result) or ``"in_doubt"`` (a recovered call that may have run; re-run, skip or
            fail, ``Runner.resolve_in_doubt``).
        hint: what a long-running tool returned when it started (text), or None.
        position: where the paused call expression is in the model's script, as the
            interpreter reported it: ``[line, column, end_line, end_column]`` (1-based lines
            and columns, in characters; ``end_column`` exclusive), or None when unknown (a
            gather, a call in code carried from an earlier script, a record written before
            the field: the inbox then reads the script's syntax). Display only.
    """

    model_config = ConfigDict(extra="ignore")

    call_key: str
    pos: int
    call_id: int
    kind: Literal["confirmation", "completion", "in_doubt"]
    hint: str | None = None
    position: list[int] | None = Field(default=None, min_length=4, max_length=4)


class Claim(BaseModel):
    """Who drives the turn now.

    Attributes:
        owner: ``host:pid:token`` of the run holding it.
        host / pid: where that run lives (for the liveness check on this host).
        taken_at / renewed_at: seconds since the epoch (``Clock``).
        lease: seconds after ``renewed_at`` the claim stays valid without renewal.
        run_key: the caller's run key of the run holding it (``Runner.run_async(run_key=)``).
    """

    model_config = ConfigDict(extra="ignore")

    owner: str
    host: str
    pid: int
    taken_at: float
    renewed_at: float
    lease: float = Field(default=DEFAULT_CLAIM_LEASE, gt=0)
    run_key: str | None = None

    @property
    def expires_at(self) -> float:
        """When the lease runs out (seconds since the epoch) unless renewed."""
        return self.renewed_at + self.lease

    def describe(self) -> str:
        """``runner <owner> (claimed at <UTC time>, lease until <UTC time>)``."""
        return f"runner {self.owner} (claimed at {_utc(self.taken_at)}, lease until {_utc(self.expires_at)})"


class TurnRecord(BaseModel):
    """The in-flight turn of a session (one per session), as stored in its turn slot.

    Attributes:
        format: ``TURN_FORMAT``.
        status: ``"running"`` (being driven, or interrupted: see ``claim``) or
            ``"suspended"`` (paused at ``pending``).
        agent_name / turn / invocation_id / iteration: whose turn it is (``turn`` is
            ``<invocation id>:<iteration>``).
        script: the turn's script (recovery without a continuation runs it again).
        system_prompt / transcript: the model conversation up to the turn (``Content``
            dicts), inline (format 3, or a store without blobs); in format 4 the prompt is
            empty and the transcript holds the messages after the chunks of
            ``transcript_refs`` (none).
        system_prompt_ref: SHA-256 (hex) of the blob holding the system prompt (UTF-8), or
            None (inline).
        transcript_refs: SHA-256 (hex) of the blobs holding the transcript's messages before
            ``transcript``, in order: each a JSON list of ``Content`` dicts
            (``codeact.agent._slot_context``).
        roster: the tool names the script was written against.
        namespace: the persisted namespace (``persist_namespace``) or None.
        schema_retries: output-schema retries used so far.
        created_at: seconds since the epoch.
        turn_stdout: what the script printed up to the continuation.
        next_pos / advance: the next call position and advance index at the continuation.
        at: the calls the continuation is paused at.
        gather: the continuation is paused at a gather.
        pending: the calls awaiting the caller (status ``"suspended"``).
        snapshot_sha256: SHA-256 (hex) of the continuation bytes, or None.
        claim: who drives the turn (None: nobody; a suspended turn at rest).
        run_key: the run key of the run that wrote the turn, if it had one.
        files: the session's file layer at the continuation (``{"base": <base64>}``: what the
            script's read-write mounts held then), or, once the script has ended, the host's
            contents before the apply of its writes (``{"pre": <base64>}``); with overlay mounts
            also ``"start"``: the SHA-256 of the session overlay's blob the script started from
            (``codeact.agent._overlay``); None without a read-write or overlay mount (SPEC §5
            "Files", ``codeact.agent._files``).
        mac: HMAC-SHA256 (hex) of the fields that decide what runs and of the session the
            record is stored in, under the runtime's ``snapshot_key`` (None without a key).
        seal: the scheme of ``mac``: ``SEAL_VERSION`` (binds the session), or None (no key, or
            a record sealed by 0.2.0, whose MAC binds no session).
    """

    model_config = ConfigDict(extra="ignore")

    format: int
    status: Literal["running", "suspended"]
    agent_name: str
    turn: str
    invocation_id: str
    iteration: int
    script: str
    system_prompt: str = ""
    transcript: list[dict[str, Any]] = Field(default_factory=list)
    system_prompt_ref: str | None = None
    transcript_refs: list[str] = []  # a plain default: model_construct copies it cheaply (a factory is inspected)
    roster: list[str] = Field(default_factory=list)
    namespace: dict[str, Any] | None = None
    schema_retries: int = 0
    created_at: float = 0.0
    turn_stdout: str = ""
    next_pos: int = 0
    advance: int = 0
    at: list[CallPosition] = Field(default_factory=list)
    gather: bool = False
    pending: list[PendingEntry] = Field(default_factory=list)
    snapshot_sha256: str | None = None
    claim: Claim | None = None
    run_key: str | None = None
    files: dict[str, str] | None = None
    mac: str | None = None
    seal: int | None = None

    def signed_part(self, session_key: tuple[str, str, str] | None = None) -> dict[str, Any]:
        """The data covered by ``mac``: every field that decides what the turn runs and, with
        ``session_key`` (``(app_name, user_id, session_id)``, seal ``SEAL_VERSION``), the seal
        scheme and the session, so the record verifies only in the session it was sealed
        for. Without ``session_key``: the part 0.2.0 sealed (no session)."""
        part = self.model_dump(mode="json", include=_SIGNED)
        if part.get("files") is None:  # as records written before the field were sealed
            part.pop("files", None)
        for entry in part["pending"]:
            if entry.get("position") is None:  # as records written before the field were sealed
                entry.pop("position", None)
        if session_key is not None:
            part["seal"] = self.seal
            part["session"] = list(session_key)
        return part


_SIGNED: set[str] = {
    "format",
    "agent_name",
    "turn",
    "invocation_id",
    "script",
    "roster",
    "namespace",
    "at",
    "gather",
    "pending",
    "snapshot_sha256",
    "next_pos",
    "advance",
    "files",
}


def record_problem(data: dict[str, Any]) -> tuple[TurnRecord | None, str | None]:
    """``(record, None)`` for stored data that validates as a current ``TurnRecord``, else
    ``(None, why)`` naming the format or the first field that fails."""
    if isinstance(data.get("unreadable"), str):
        return None, data["unreadable"]
    fmt = data.get("format")
    if type(fmt) is not int or fmt not in READ_FORMATS:
        return None, f"the stored turn has format {data.get('format')!r}, not {TURN_FORMAT} (or 3, which is read)"
    try:
        return TurnRecord.model_validate(data), None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(record)"
        return None, f"the stored turn is malformed (field {where}: {err['msg']})"


def new_claim(clock: Clock, lease: float, run_key: str | None = None) -> Claim:
    """A fresh claim for a run of this process; its owner counts as live until
    ``release_owner`` is called for it."""
    now = clock()
    owner = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    _LIVE.add(owner)
    return Claim(owner=owner, host=_HOST, pid=os.getpid(), taken_at=now, renewed_at=now, lease=lease, run_key=run_key)


def release_owner(owner: str) -> None:
    """Marks a run of this process as ended (its claims, if still stored, are abandoned)."""
    _LIVE.discard(owner)


def claim_abandoned(claim: Claim | None, clock: Clock) -> bool:
    """Whether ``claim`` may be taken over: none, its lease ran out, or its owner is gone (a
    run of this process that ended, or a process of this host that is not running)."""
    if claim is None:
        return True
    if clock() > claim.expires_at:
        return True
    if claim.host != _HOST:
        return False
    if claim.pid == os.getpid():
        return claim.owner not in _LIVE
    return not _process_alive(claim.pid)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:  # a killed child not reaped yet is a zombie: gone for our purpose
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[-1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
