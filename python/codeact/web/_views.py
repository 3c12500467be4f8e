"""What the pages and the JSON API show, as plain data: sessions with their status, a
session's timeline, the pending calls with the script around them. Every string that
leaves here has the runner's secrets redacted."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Callable
from typing import Any

from ..agent._turn import open_journal
from ..events import Event, PendingCallInfo
from ..exceptions import CodeActError, SessionNotFoundError
from ..runner import Runner
from ..sessions import Session

Redact = Callable[[str], str]

STATUSES = ("running", "paused", "interrupted", "stale", "finished", "failed", "new")
"""A session's status: its turn is being run, waits for a human, was interrupted (its runner
stopped: recover it), cannot be resumed by this agent (stale), or no turn is in flight and
the last run finished, failed (its last event carries an error) or never started."""

_TURN_STATUS = {"suspended": "paused", "running": "running", "interrupted": "interrupted", "stale": "stale"}
EXCERPT_CONTEXT = 3
"""Lines of script shown either side of a pending call in the inbox."""


def redactor(runner: Runner) -> Redact:
    """The function removing the runner's known secret values from a text."""
    secrets = runner.secrets
    if secrets is None:
        return lambda text: text
    return secrets.redact


def scrub(value: Any, redact: Redact) -> Any:
    """``value`` (JSON-shaped data) with every string, keys included, redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {scrub(k, redact) if isinstance(k, str) else k: scrub(v, redact) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, redact) for v in value]
    return value


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, tz=_dt.timezone.utc).isoformat(timespec="seconds")


def pending_dict(user_id: str, session_id: str, p: PendingCallInfo) -> dict[str, Any]:
    """The JSON shape of one pending call (``/api/pending``)."""
    return {
        "call_key": p.call_key,
        "session_id": session_id,
        "user_id": user_id,
        "tool": p.tool,
        "args": p.args,
        "kind": p.kind,
        "hint": p.hint,
        "digest": p.digest,
        "invocation_id": p.invocation_id,
    }


async def session_status(runner: Runner, session: Session) -> tuple[str, Any]:
    """(status, TurnInfo or None) of a session loaded with its events."""
    info = await runner.turn_info(user_id=session.user_id, session_id=session.id)
    if info is not None:
        return _TURN_STATUS.get(info.status, info.status), info
    if not session.events:
        return "new", None
    last = session.events[-1]
    return ("failed" if last.error_code else "finished"), None


async def list_sessions(runner: Runner, user_id: str | None, redact: Redact) -> list[dict[str, Any]]:
    """The app's sessions (of one user when given), newest first (``/api/sessions``)."""
    service = runner.session_service
    out: list[dict[str, Any]] = []
    for listed in await service.list_sessions(app_name=runner.app_name, user_id=user_id):
        session = await service.get_session(app_name=runner.app_name, user_id=listed.user_id, session_id=listed.id)
        if session is None:
            continue  # deleted since it was listed
        try:
            status, info = await session_status(runner, session)
        except SessionNotFoundError:
            continue
        out.append(
            {
                "id": session.id,
                "app_name": session.app_name,
                "user_id": session.user_id,
                "status": status,
                "last_update_time": session.last_update_time,
                "updated": _iso(session.last_update_time),
                "events": len(session.events),
                "pending": len(info.pending) if info is not None else 0,
            }
        )
    out.sort(key=lambda s: s["last_update_time"], reverse=True)
    return scrub(out, redact)


async def find_session(runner: Runner, session_id: str, user_id: str | None) -> Session | None:
    """The session (with its events) by id; ``user_id=None`` looks it up among every user's
    sessions. None when there is none.

    Raises:
        ValueError: the id names sessions of several users and no user was given.
    """
    service = runner.session_service
    if user_id is not None:
        return await service.get_session(app_name=runner.app_name, user_id=user_id, session_id=session_id)
    users = [
        s.user_id for s in await service.list_sessions(app_name=runner.app_name, user_id=None) if s.id == session_id
    ]
    if not users:
        return None
    if len(users) > 1:
        raise ValueError(f"session {session_id!r} exists for users {sorted(users)}; name one with user=")
    return await service.get_session(app_name=runner.app_name, user_id=users[0], session_id=session_id)


def _lines(code: str) -> list[dict[str, Any]]:
    return [
        {"n": i + 1, "text": line, "call": "call_tool(" in line, "here": False}
        for i, line in enumerate(code.splitlines() or [""])
    ]


def timeline(events: list[Event], redact: Redact) -> list[dict[str, Any]]:
    """One session's events as timeline items (``/api/sessions/{id}/events`` returns the
    events themselves). Each item: ``{"kind", "author", "time", ...}`` with ``kind`` one of
    ``user``, ``script``, ``reply``, ``tool_call``, ``tool_result``, ``output``, ``waiting``,
    ``error``, ``state``."""
    items: list[dict[str, Any]] = []
    for event in events:
        base = {"author": event.author, "time": _iso(event.timestamp), "event_id": event.id}
        parts = event.content.parts if event.content is not None else []
        # A script's text duplicates its code; a pause's text is told by its "waiting" item.
        has_code = any(p.executable_code is not None for p in parts) or bool(event.actions.requested_tool_confirmations)
        for part in parts:
            if part.executable_code is not None:
                items.append({**base, "kind": "script", "lines": _lines(part.executable_code.code)})
            elif part.code_execution_result is not None:
                result = part.code_execution_result
                items.append({**base, "kind": "output", "outcome": result.outcome, "text": result.output})
            elif part.function_call is not None:
                call = part.function_call
                items.append({**base, "kind": "tool_call", "tool": call.name, "args": call.args, "call_id": call.id})
            elif part.function_response is not None:
                resp = part.function_response
                items.append(
                    {
                        **base,
                        "kind": "tool_result",
                        "tool": resp.name,
                        "value": resp.response,
                        "error": resp.error,
                        "call_id": resp.id,
                    }
                )
            elif part.text is not None and not part.thought and not has_code:
                kind = "user" if event.author == "user" else "reply"
                items.append({**base, "kind": kind, "text": part.text})
        for key, conf in event.actions.requested_tool_confirmations.items():
            items.append({**base, "kind": "waiting", "tool": conf.tool_name, "args": conf.args, "call_key": key})
        if event.error_code or event.error_message:
            items.append({**base, "kind": "error", "code": event.error_code, "text": event.error_message or ""})
        delta = {k: v for k, v in event.actions.state_delta.items() if not k.startswith("temp:")}
        if delta:
            items.append({**base, "kind": "state", "delta": delta})
    return scrub(items, redact)


def _script_of(events: list[Event], invocation_id: str) -> str | None:
    for event in reversed(events):
        if event.invocation_id != invocation_id or event.content is None:
            continue
        for part in event.content.parts:
            if part.executable_code is not None:
                return part.executable_code.code
    return None


def excerpt(code: str, tool: str, occurrence: int = 0) -> list[dict[str, Any]]:
    """The lines of ``code`` around the line calling ``tool`` (its ``occurrence``-th call line,
    else the first), that line marked ``"here": True``."""
    lines = _lines(code)
    hits = [
        i
        for i, line in enumerate(lines)
        if f'"{tool}"' in line["text"] or f"'{tool}'" in line["text"] or f"{tool}(" in line["text"]
    ]
    if not hits:
        return lines[: 2 * EXCERPT_CONTEXT + 1]
    at = hits[min(occurrence, len(hits) - 1)]
    start, stop = max(0, at - EXCERPT_CONTEXT), at + EXCERPT_CONTEXT + 1
    return [{**line, "here": i == at} for i, line in enumerate(lines[start:stop], start)]


def _decode(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data


async def turn_detail(runner: Runner, session: Session, info: Any) -> dict[str, Any]:
    """What already ran in the session's in-flight turn: ``{"ran": [{"tool", "value",
    "error"}], "stdout": str}`` (from the turn's journal and record)."""
    ran: list[dict[str, Any]] = []
    stdout = ""
    if info is None or not info.turn:
        return {"ran": ran, "stdout": stdout}
    service = runner.session_service
    slot = await service.load_turn(app_name=runner.app_name, user_id=session.user_id, session_id=session.id)
    if slot is not None and isinstance(slot.data.get("turn_stdout"), str):
        stdout = slot.data["turn_stdout"]
    records = await service.read_journal(
        app_name=runner.app_name, user_id=session.user_id, session_id=session.id, turn=info.turn
    )
    try:
        records = open_journal(
            getattr(runner.agent, "runtime", None), (runner.app_name, session.user_id, session.id), info.turn, records
        )
    except CodeActError:
        return {"ran": ran, "stdout": stdout}
    tools: dict[int, str] = {}
    for r in records:
        if r.kind == "intent":
            data = _decode(r.data)
            tools[r.seq] = str(data[0]) if isinstance(data, list) and data else "?"
        elif r.kind == "outcome":
            data = _decode(r.data)
            value, error = (data.get("v"), data.get("e")) if isinstance(data, dict) else (data, None)
            ran.append({"pos": r.seq, "tool": tools.get(r.seq, "?"), "value": value, "error": error})
    return {"ran": ran, "stdout": stdout}


async def inbox(runner: Runner, user_id: str | None, redact: Redact) -> list[dict[str, Any]]:
    """Every pending call of the app (of one user when given), newest session first, each
    with the session's status, the script excerpt around the call and what already ran in its turn."""
    out: list[dict[str, Any]] = []
    for (user, sid), calls in (await runner.list_pending(user_id=user_id)).items():
        session = await runner.session_service.get_session(app_name=runner.app_name, user_id=user, session_id=sid)
        if session is None:
            continue
        try:
            status, info = await session_status(runner, session)
        except SessionNotFoundError:
            continue
        detail = await turn_detail(runner, session, info)
        for p in calls:
            code = _script_of(session.events, p.invocation_id)
            out.append(
                {
                    **pending_dict(user, sid, p),
                    "status": status,
                    "excerpt": excerpt(code, p.tool) if code else [],
                    **detail,
                    "last_update_time": session.last_update_time,
                    "updated": _iso(session.last_update_time),
                }
            )
    out.sort(key=lambda c: c["last_update_time"], reverse=True)  # stable: a session's calls keep their order
    return scrub(out, redact)


def fingerprint(data: Any) -> str:
    """A short digest of what a page shows (its live version): server-sent events announce
    a new one when it changes."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
