"""Reading a stored turn back safely (SPEC §5 v3: what is approved is what runs).

One place checks a stored turn before anything is shown or run: its record validates as a
``TurnRecord``; it belongs to this agent and its tool roster; its continuation matches the
record's SHA-256 and, under ``snapshot_key``, the record's MAC; and the calls the record
names are the calls the continuation waits on. The tool name and arguments of a pending
call are always taken from the continuation, never from the record, so what
``Runner.pending`` lists and what runs after an approval come from the same verified bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import shlex
import threading
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import pydantic_core
from pydantic import BaseModel

from ..exceptions import SessionStoreError, SnapshotError
from ..runtime import Call, CodeRuntime, Gather, SessionRestoringRuntime, SuspendingRuntime, bind_call_args
from ..runtime._stepper import run_step
from ..sessions._journal import JournalRecord, TurnSlot
from ..sessions._service import sort_journal
from ..tools import Tool
from ._codec import PendingCallInfo, args_digest
from ._record import SEAL_VERSION, TurnRecord, record_problem

log = logging.getLogger("codeact.durability")

__all__ = (
    "CallView",
    "answer_shapes",
    "LeaseKeeper",
    "SessionKey",
    "TurnView",
    "call_digest",
    "journal_scope",
    "open_journal",
    "record_data",
    "record_seal_problem",
    "seal_journal",
    "seal_record",
    "upgrade_reason",
    "verify_turn",
)


@dataclass(frozen=True, slots=True)
class CallView:
    """One call of a continuation as the interpreter holds it."""

    name: str
    positional_args: tuple[Any, ...]
    keyword_args: dict[str, Any]
    call_id: int


@dataclass
class TurnView:
    """A stored turn after ``verify_turn``: either ``stale`` (why it cannot be resumed) or
    the record, the continuation's calls by ``call_id`` and the pending calls as shown."""

    stale: str | None = None
    record: TurnRecord | None = None
    calls: dict[int, CallView] = field(default_factory=dict)
    pending: list[PendingCallInfo] = field(default_factory=list)
    in_session: bool = False
    step: Call | Gather | None = None
    """The continuation restored from the stored bytes (``SuspendingRuntime.restore``), live
    and not resumed: what a resumed turn drives."""
    session: Any = None
    """For a turn paused in a namespace session, the session restored with ``step``."""
    seal_failed: bool = False
    """``stale`` because a seal does not hold in this session (edited, copied from another
    session, or sealed by 0.2.0): decisions on it are refused (``StaleCheckpointError``)."""
    tools: dict[str, Tool] = field(default_factory=dict)
    """The agent's tools by name, as checked (what an edited approval or a typed answer is
    validated against)."""


def answer_shapes(tool: Tool | None, kind: str) -> dict[str, Any]:
    """What a pending call of ``tool`` (of ``kind``) shows of the answers it takes: whether
    an approval may edit its arguments, their JSON schema, and the JSON schema of a
    completion's value (``result_type``) or a confirmation's payload (``payload_type``)."""
    if tool is None:
        return {}
    shapes: dict[str, Any] = {"editable": bool(getattr(tool, "editable", True)), "args_schema": tool.parameters}
    if kind == "completion":
        shapes["result_schema"] = getattr(tool, "result_schema", None)
    elif kind == "confirmation":
        shapes["payload_schema"] = getattr(tool, "payload_schema", None)
    return shapes


def call_digest(call_key: str, tool: str, digest: str) -> str:
    """The digest of one pending call (``PendingCallInfo.digest``): 16 hex digits of BLAKE2b
    over its key, tool name and argument digest. A decision naming it approves exactly that
    call."""
    return hashlib.blake2b(f"{call_key}\0{tool}\0{digest}".encode(), digest_size=8).hexdigest()


def _seal(runtime: CodeRuntime | None, data: bytes) -> str | None:
    return runtime.seal(data) if runtime is not None else None


SessionKey = tuple[str, str, str]
"""``(app_name, user_id, session_id)``: the session a seal binds a record to."""


def upgrade_reason(what: str, session_key: SessionKey) -> str:
    """The reason given for a turn or journal record sealed by 0.2.0 (whose seals bind no
    session): it names the upgrade and the command that discards the turn."""
    app, user, sid = (shlex.quote(v) for v in session_key)
    return (
        f"the stored {what} was sealed by codeact 0.2.0, whose seal does not bind the session it belongs to; "
        "this version does not resume it and nothing ran. Discard it with "
        f"`codeact sessions discard {sid} --db ... --app {app} --user {user}` (or Runner.discard_pending_checkpoint) "
        "and run again"
    )


def seal_record(runtime: CodeRuntime, record: TurnRecord, session_key: SessionKey) -> None:
    """Sets ``record.mac`` and ``record.seal`` under the runtime's key, bound to the session
    ``session_key`` (both None without a key)."""
    record.mac = None
    record.seal = SEAL_VERSION if _seal(runtime, b"") is not None else None
    record.mac = _seal(runtime, pydantic_core.to_json(record.signed_part(session_key)))


def record_seal_problem(runtime: CodeRuntime, record: TurnRecord, session_key: SessionKey) -> str | None:
    """Why ``record``'s seal does not hold in the session ``session_key`` under the runtime's
    key (None: it holds, or there is no key): edited, written without the key, sealed for
    another session, or sealed by 0.2.0 (the reason names the upgrade and the discard
    command). ``record`` is not changed."""
    if _seal(runtime, b"") is None:
        return None
    mac = record.mac
    if mac is None:
        return "the stored turn record fails its seal (it was written without the key)"
    if record.seal is None:
        legacy = _seal(runtime, pydantic_core.to_json(record.signed_part()))
        if _equal(mac, legacy or ""):
            return upgrade_reason("turn", session_key)
        return "the stored turn record fails its seal (it was edited, or written without the key)"
    expected = _seal(runtime, pydantic_core.to_json(record.signed_part(session_key)))
    if record.seal != SEAL_VERSION or not _equal(mac, expected or ""):
        return (
            "the stored turn record fails its seal for this session (it was edited, written without the key, or "
            "copied from another session)"
        )
    return None


_RECORD_FIELDS = tuple(TurnRecord.model_fields)


def record_data(record: TurnRecord) -> dict[str, Any]:
    """``record.model_dump(mode="json")`` (the same keys, in the same order) without walking
    the transcript again: its messages are JSON data already (``CodeActAgent._turn_record``
    dumps each once), so the list holds the same message dicts, never changed after."""
    data = record.model_dump(mode="json", exclude={"transcript"})
    transcript = list(record.transcript)
    return {name: transcript if name == "transcript" else data[name] for name in _RECORD_FIELDS}


def _json_item(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def slot_data(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``record_data(record.model_copy(update=update))`` for the record whose ``record_data``
    is ``base``, without copying and dumping the record again (the driver saves the slot at
    least once a turn; issue 21): ``base``'s keys in their order, those of ``update`` given
    their JSON form (models, and models in lists, dumped as ``model_dump(mode="json")``
    does). ``base`` is not changed."""
    data = dict(base)
    for name, value in update.items():
        data[name] = [_json_item(v) for v in value] if isinstance(value, list) else _json_item(value)
    return data


def journal_scope(session_key: SessionKey, turn: str) -> str:
    """What a journal record's seal binds besides the record itself: the seal scheme, the
    session and the turn, as JSON (``seal_journal``; one per turn)."""
    return pydantic_core.to_json([SEAL_VERSION, *session_key, turn]).decode()


def seal_journal(runtime: CodeRuntime, scope: str, record: JournalRecord) -> JournalRecord:
    """``record`` with its data wrapped as ``{"p": data, "m": mac, "s": SEAL_VERSION}`` under a
    key, the MAC covering ``scope`` (``journal_scope``: the session and turn) and the record;
    unchanged without a key."""
    mac = _seal(runtime, f"{scope}\0{record.kind}\0{record.seq}\0{record.data}".encode())
    if mac is None:
        return record
    return JournalRecord(
        record.kind, record.seq, pydantic_core.to_json({"p": record.data, "m": mac, "s": SEAL_VERSION}).decode()
    )


def open_journal(
    runtime: CodeRuntime | None, session_key: SessionKey, turn: str, records: list[JournalRecord]
) -> list[JournalRecord]:
    """The journal records of ``turn`` in the session ``session_key``, with their seals checked
    and removed (under a key).

    Raises:
        SnapshotError: a record is unsealed, its seal does not match (edited in the store, or
            copied from another session or turn), or it was sealed by 0.2.0 (the message names
            the upgrade and the discard command), or a batch record is malformed. Callers
            treat the turn as stale: nothing runs.
    """
    if any(r.kind == "batch" for r in records):  # the stores' read_journal expands them; another's may not
        try:
            records = sort_journal(records)
        except SessionStoreError as exc:
            raise SnapshotError(f"the journal of turn {turn} is unreadable: {exc}") from exc
    if _seal(runtime, b"") is None:
        return records
    scope = journal_scope(session_key, turn)
    out = []
    for r in records:
        try:
            wrapped = pydantic_core.from_json(r.data)
            data, mac = wrapped["p"], wrapped["m"]
            scheme = wrapped.get("s")
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SnapshotError(f"journal record {r.kind} {r.seq} of turn {turn} is not sealed") from exc
        if not isinstance(data, str) or not isinstance(mac, str):
            raise SnapshotError(f"journal record {r.kind} {r.seq} of turn {turn} is not sealed")
        if scheme is None:
            legacy = _seal(runtime, f"{turn}\0{r.kind}\0{r.seq}\0{data}".encode())
            if _equal(mac, legacy or ""):
                raise SnapshotError(upgrade_reason(f"journal of turn {turn}", session_key))
        expected = _seal(runtime, f"{scope}\0{r.kind}\0{r.seq}\0{data}".encode())
        if scheme != SEAL_VERSION or not _equal(mac, expected or ""):
            raise SnapshotError(
                f"journal record {r.kind} {r.seq} of turn {turn} fails its seal for this session (it was edited, or "
                "copied from another session)"
            )
        out.append(JournalRecord(r.kind, r.seq, data))
    return out


def _equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


async def verify_turn(
    runtime: Any,
    slot: TurnSlot,
    *,
    session_key: SessionKey,
    agent_name: str,
    tools: dict[str, Tool] | None,
    roster: list[str] | None,
    persist_namespace: bool,
    uses_session: bool,
) -> TurnView:
    """Checks a stored turn (see the module docstring) and builds the view of its pending
    calls. Never raises for a bad turn: the reason comes back as ``TurnView.stale``.

    Args:
        session_key: ``(app_name, user_id, session_id)`` of the session the slot was read
            from: under a key the record's seal must bind it.
        tools / roster: the agent's tools for this run (None: not checked; the pending calls
            then show the continuation's raw arguments).
    """
    record, problem = record_problem(slot.data)
    if record is None:
        return TurnView(stale=problem)
    if record.agent_name != agent_name:
        return TurnView(stale=f"the stored turn belongs to agent {record.agent_name!r}, not {agent_name!r}")
    if roster is not None and record.roster != roster:
        return TurnView(
            stale=f"the tool roster changed since the run paused (was {record.roster}, now {roster}); the paused "
            "script cannot resume"
        )
    problem = record_seal_problem(runtime, record, session_key)
    if problem is not None:
        return TurnView(stale=problem, seal_failed=True)
    in_session = persist_namespace and isinstance(record.namespace, dict) and "session" in record.namespace
    if in_session and not uses_session:
        return TurnView(stale="the stored turn's namespace is an interpreter session; this runtime cannot load it")
    view = TurnView(record=record, in_session=in_session, tools=dict(tools or {}))
    snapshot = slot.snapshot
    if snapshot is None:
        if record.status == "suspended":
            return TurnView(stale="the stored turn is suspended but holds no continuation")
        return view
    if hashlib.sha256(snapshot).hexdigest() != record.snapshot_sha256:
        return TurnView(stale="the stored continuation fails its integrity check (its SHA-256 differs)")
    if not runtime.capabilities().supports_suspension:
        return TurnView(stale="this runtime cannot read the calls of a stored continuation")
    try:
        if in_session:
            session, step = await run_step(cast(SessionRestoringRuntime, runtime).restore_session, snapshot)
        else:
            session, step = None, await run_step(cast(SuspendingRuntime, runtime).restore, snapshot)
    except SnapshotError as exc:
        return TurnView(stale=str(exc))
    if not isinstance(step, Call | Gather):
        return TurnView(stale="the stored continuation is not paused at a tool call")
    paused = step.calls if isinstance(step, Gather) else (step.call,)
    calls = {
        int(c.call_id): CallView(str(c.name), tuple(c.positional_args), dict(c.keyword_args), int(c.call_id))
        for c in paused
    }
    if sorted(calls) != sorted(a.call_id for a in record.at) or not calls:
        return TurnView(stale="the stored turn record does not match its continuation (other calls)")
    if len(calls) > 1 and not record.gather:
        return TurnView(stale="the stored turn record does not match its continuation (a gather)")
    view.calls = calls
    view.step, view.session = step, session
    positions = {a.call_id: a.pos for a in record.at}
    for p in record.pending:
        call = calls.get(p.call_id)
        if call is None or positions.get(p.call_id) != p.pos or p.call_key != f"{record.turn}:{p.pos}":
            return TurnView(stale=f"the stored pending call {p.call_key} does not match the continuation")
        tool = tools.get(call.name) if tools is not None else None
        try:
            args = bind_call_args(tool, call.positional_args, call.keyword_args) if tool is not None else None
        except TypeError:
            args = None
        if args is None:
            args = dict(call.keyword_args)
            if call.positional_args:
                args["*args"] = list(call.positional_args)
        try:
            digest = call_digest(p.call_key, call.name, args_digest(args))
        except ValueError:
            digest = ""
        view.pending.append(
            PendingCallInfo(
                call_key=p.call_key,
                tool=call.name,
                args=args,
                kind=p.kind,
                invocation_id=record.invocation_id,
                hint=p.hint,
                digest=digest,
                **answer_shapes(tool, p.kind),
            )
        )
    return view


class LeaseKeeper:
    """Keeps a run's claim on its session's turn alive while the run works: a daemon thread
    wakes every third of the lease and, on the run's event loop, stamps ``claim.renewed_at``
    in the store (``renew_claim``, fenced by the slot version the run holds). One thread per
    run, none per tool call: the hot path pays nothing for the lease. The renewal runs on the
    event loop, so a loop blocked by a sync tool renews late, never concurrently."""

    def __init__(self, service: Any, key: tuple[str, str, str], claim: Any, clock: Any, version: Any) -> None:
        self._service = service
        self._key = key
        self._claim = claim
        self._clock = clock
        self._version = version  # () -> the slot version the run holds (0: no slot yet)
        self._stop: threading.Event | None = None

    def start(self) -> None:
        """Starts renewing (no-op without a store or a claim). Call from the run's task."""
        if self._service is None or self._claim is None or self._stop is not None:
            return
        self._stop = threading.Event()
        token = anyio.lowlevel.current_token()
        threading.Thread(target=self._loop, args=(token, self._stop), daemon=True, name="codeact-lease").start()

    def stop(self) -> None:
        """Stops renewing (idempotent)."""
        if self._stop is not None:
            self._stop.set()

    def _loop(self, token: Any, stop: threading.Event) -> None:
        while not stop.wait(self._claim.lease / 3):
            try:
                anyio.from_thread.run(self._renew, stop, token=token)
            except Exception as exc:  # the loop is gone, or the run ended meanwhile
                log.debug("claim renewal stopped: %s", exc)
                return

    async def _renew(self, stop: threading.Event) -> None:
        from ..exceptions import SessionStoreError

        version = self._version()
        if stop.is_set() or not version:
            return
        app, user, sid = self._key
        now = self._clock()
        try:
            await self._service.renew_claim(app_name=app, user_id=user, session_id=sid, version=version, renewed_at=now)
        except (SessionStoreError, NotImplementedError) as exc:
            log.warning("could not renew the claim on session %r: %s", sid, exc)
            stop.set()
            return
        self._claim.renewed_at = now
