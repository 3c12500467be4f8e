"""What the pages and the JSON API show, as plain data: sessions with their status, a
session's timeline, the pending calls with the script around them. Every string that
leaves here has the runner's secrets redacted."""

from __future__ import annotations

import ast
import datetime as _dt
import hashlib
import json
import re
import time
from collections.abc import Callable
from typing import Any

from ..events import Event, PendingCallInfo
from ..exceptions import CodeActError, SessionNotFoundError
from ..runner import Runner
from ..sessions import Session
from ..sessions._live import LiveRow
from ..turns._record import claim_abandoned, record_problem
from ..turns._verify import open_journal

Redact = Callable[[str], str]

STATUSES = ("running", "paused", "interrupted", "stale", "finished", "failed", "new")
"""A session's status: its turn is being run, waits for a human, was interrupted (its runner
stopped: recover it), cannot be resumed by this agent (stale), or no turn is in flight and
the last run finished, failed (its last event carries an error) or never started."""

_TURN_STATUS = {"suspended": "paused", "running": "running", "interrupted": "interrupted", "stale": "stale"}
EXCERPT_CONTEXT = 3
"""Lines of script shown either side of a pending call in the inbox."""
MAX_CALL_CHARS = 2000
"""A call's text (``tool(k=v, ...)``) longer than this is cut on the page, with a "show all"."""
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
"""The Unicode bidirectional controls: shown escaped (``\\u202e``), so a script or an argument
cannot reorder what the reviewer reads (Trojan Source)."""
LINE_SEPARATORS = frozenset("\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
"""Characters ``str.splitlines`` breaks at but the interpreter does not (it counts lines at
``\\n``, ``\\r\\n`` and ``\\r`` only): shown escaped, so a line of the excerpt is a line of the script."""
_BIDI_TABLE = {ord(c): f"\\u{ord(c):04x}" for c in BIDI_CONTROLS | LINE_SEPARATORS}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_DYNAMIC = frozenset({"exec", "eval", "compile", "getattr", "globals", "locals", "vars", "__import__"})


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


def escape_bidi(text: str) -> str:
    """``text`` with each bidirectional control (``BIDI_CONTROLS``) and each line separator the
    interpreter does not break at (``LINE_SEPARATORS``) written as a visible ``\\uXXXX``."""
    return text.translate(_BIDI_TABLE)


def call_text(tool: str, args: Any) -> str:
    """A call as the pages show it: ``tool(k=<JSON>, ...)``, bidi controls escaped."""
    if isinstance(args, dict):
        inner = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=repr)}" for k, v in args.items())
    else:
        inner = json.dumps(args, ensure_ascii=False, default=repr)
    return escape_bidi(f"{tool}({inner})")


def script_lines(code: str) -> list[str]:
    """``code``'s lines as the interpreter and ``ast`` count them: broken at ``\\n``,
    ``\\r\\n`` and ``\\r`` only (not at the other separators ``str.splitlines`` knows); a final
    line break ends the last line (``[""]`` for empty code)."""
    lines = _LINE_BREAK.split(code)
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def _lines(code: str) -> list[dict[str, Any]]:
    return [
        {"n": i + 1, "text": escape_bidi(line), "call": "call_tool(" in line, "here": False}
        for i, line in enumerate(script_lines(code))
    ]


def timeline(events: list[Event], redact: Redact) -> list[dict[str, Any]]:
    """One session's events as timeline items (``/api/sessions/{id}/events`` returns the
    events themselves). Each item: ``{"kind", "author", "time", ...}`` with ``kind`` one of
    ``user``, ``script``, ``reply`` (an answer), ``feedback`` (what was fed back to the model
    after a script: ``"error": True`` for an error), ``tool_call``, ``tool_result``,
    ``output``, ``waiting`` (a call awaiting approval), ``pause`` (the pause for a call in
    doubt, as its text), ``remark`` (an in-doubt or discarded-turn notice), ``error``,
    ``state``, ``decision`` (who decided what, on the first event of the run it resumed:
    ``decision_items``)."""
    items: list[dict[str, Any]] = []
    for event in events:
        base = {"author": event.author, "time": _iso(event.timestamp), "event_id": event.id}
        parts = event.content.parts if event.content is not None else []
        # A script's text duplicates its code; a pause's text is told by its "waiting" item.
        has_code = any(p.executable_code is not None for p in parts) or bool(event.actions.requested_tool_confirmations)
        # A script's result is what was fed back to the model: an observation, or an error.
        feedback = (event.custom_metadata or {}).get("codeact_kind") == "script_result"
        outcomes = [p.code_execution_result.outcome for p in parts if p.code_execution_result is not None]
        items += decision_items(event, base)
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
            elif part.text is not None and not part.thought and not has_code and feedback:
                error = not outcomes or outcomes[0] != "OUTCOME_OK" or part.text.startswith("Error during execution")
                items.append({**base, "kind": "feedback", "error": error, "text": part.text})
            elif part.text is not None and not part.thought and not has_code:
                if event.author == "user":
                    kind = "user"
                elif event.interrupted:
                    kind = "pause"  # a pause for a human with no confirmation request: a call in doubt
                elif event.kind in ("in_doubt", "turn_discarded"):
                    kind = "remark"
                else:
                    kind = "reply"
                items.append({**base, "kind": kind, "text": part.text})
        for key, conf in event.actions.requested_tool_confirmations.items():
            items.append({**base, "kind": "waiting", "tool": conf.tool_name, "args": conf.args, "call_key": key})
        if event.error_code or event.error_message:
            items.append({**base, "kind": "error", "code": event.error_code, "text": event.error_message or ""})
        delta = {k: v for k, v in event.actions.state_delta.items() if not k.startswith("temp:")}
        if delta:
            items.append({**base, "kind": "state", "delta": delta})
    return scrub(items, redact)


DECIDED = {
    "approve": "approved",
    "deny": "denied",
    "complete": "completed",
    "rerun": "rerun",
    "skip": "skipped",
    "fail": "failed",
}
"""How the timeline says each decision (``DecisionRecord.act``)."""


def decision_items(event: Event, base: dict[str, Any]) -> list[dict[str, Any]]:
    """The decisions a resumed run acted on, from its first event
    (``custom_metadata["codeact_decisions"]``), as timeline items of kind ``decision``:
    ``{"act", "actor", "reason", "tool", "call_key", "args" (edited, or None), "payload",
    "text"}`` where ``text`` reads ``"approved by alice: looks right"`` (``"by someone
    unnamed"`` when the decision named no actor)."""
    shown = (event.custom_metadata or {}).get("codeact_decisions")
    if not isinstance(shown, list):
        return []
    items: list[dict[str, Any]] = []
    for d in shown:
        if not isinstance(d, dict) or not isinstance(d.get("act"), str):
            continue
        actor, reason = d.get("actor"), d.get("reason")
        text = (
            f"{DECIDED.get(d['act'], d['act'])} by {actor if isinstance(actor, str) and actor else 'someone unnamed'}"
        )
        if isinstance(reason, str) and reason:
            text += f": {reason}"
        items.append(
            {
                **base,
                "kind": "decision",
                "act": d["act"],
                "actor": actor,
                "reason": reason,
                "tool": d.get("tool") or "",
                "call_key": d.get("call_key") or "",
                "args": d.get("args"),
                "payload": d.get("payload"),
                "at": _iso(d["at"]) if isinstance(d.get("at"), (int, float)) else "",
                "text": text,
            }
        )
    return items


def _script_of(events: list[Event], invocation_id: str) -> str | None:
    for event in reversed(events):
        if event.invocation_id != invocation_id or event.content is None:
            continue
        for part in event.content.parts:
            if part.executable_code is not None:
                return part.executable_code.code
    return None


def call_sites(code: str, tool: str) -> list[int] | None:
    """The lines (1-based, sorted) of the call expressions of ``code`` that can call ``tool``:
    ``call_tool("tool", ...)``, ``tool(...)`` or ``x.tool(...)``. None when the script can
    reach the tool in a way no call expression names: it does not parse, calls
    ``call_tool`` with a computed name, passes ``call_tool`` or the tool around as a value,
    or uses ``exec``, ``eval``, ``getattr`` and the like.

    This reads the syntax, never the text: a ``print("tool")`` or a comment is no call."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    sites: set[int] = set()
    called: set[int] = set()  # id() of the nodes that are a call's function
    nodes = list(ast.walk(tree))
    for node in nodes:
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called.add(id(func))
        if isinstance(func, ast.Name) and func.id == "call_tool":
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                return None  # a computed name: any tool
            if first.value == tool:
                sites.add(node.lineno)
        elif (isinstance(func, ast.Name) and func.id == tool) or (
            isinstance(func, ast.Attribute) and func.attr == tool
        ):
            sites.add(node.lineno)
    for node in nodes:
        if isinstance(node, ast.Name) and (
            node.id in _DYNAMIC or (node.id in (tool, "call_tool") and id(node) not in called)
        ):
            return None
        if isinstance(node, ast.Attribute) and node.attr == tool and id(node) not in called:
            return None
    return sorted(sites)


def excerpt(
    code: str, tool: str, earlier: list[str] | None = None, position: list[int] | None = None
) -> dict[str, Any]:
    """Where the script paused at its call of ``tool``: ``{"lines": [...], "line": N or
    None, "note": str}``, the lines around the call with its line marked ``"here": True``.

    ``position``: where the interpreter reported the paused call, ``[line, column,
    end_line, end_column]`` in ``code`` (``PendingEntry.position``, stored when the turn
    paused); its line is marked. Without it (a record written before the field, a gather, a
    call in code an earlier script defined) the line is derived from the script's syntax
    (``call_sites``): it is marked only when exactly one call expression can call ``tool``,
    and the script reaches it no other way; else ``line`` is None, nothing is marked, and
    ``note`` says why. ``earlier``: the session's earlier scripts when the turn keeps a
    namespace (a function they defined may be what calls the tool); any call of ``tool``
    there makes the line unknown too."""
    lines = _lines(code)
    if position is not None and 1 <= position[0] <= len(lines):
        return _marked(lines, position[0] - 1)
    sites = call_sites(code, tool)
    if earlier and sites is not None and any(call_sites(e, tool) != [] for e in earlier):
        note = f"an earlier script of this session may call {tool} too (a function it defined)"
        sites = None
    elif sites is None:
        note = f"this script can reach {tool} in ways its text does not show (a computed name, or exec)"
    elif not sites:
        note = f"this script does not call {tool} by name"
    elif len(sites) > 1:
        note = f"this script calls {tool} on lines {', '.join(map(str, sites))}; which one paused is not known"
    else:
        return _marked(lines, sites[0] - 1)
    maybe = set(sites or ())
    shown = [{**line, "call": line["call"] or line["n"] in maybe} for line in lines]
    return {"lines": shown, "line": None, "note": f"The paused call's line is not marked: {note}."}


def _marked(lines: list[dict[str, Any]], at: int) -> dict[str, Any]:
    """The excerpt of ``lines`` around line index ``at``, that line marked."""
    start, stop = max(0, at - EXCERPT_CONTEXT), at + EXCERPT_CONTEXT + 1
    shown = [{**line, "here": i == at} for i, line in enumerate(lines[start:stop], start)]
    return {"lines": shown, "line": at + 1, "note": ""}


def _positions(data: dict[str, Any] | None) -> dict[str, list[int]]:
    """The paused calls' positions a stored turn record keeps, by call key (none for a
    record that does not validate or was written before positions were kept)."""
    record, _ = record_problem(data) if data is not None else (None, None)
    if record is None:
        return {}
    return {p.call_key: p.position for p in record.pending if p.position is not None}


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
            tool = tools.get(r.seq, "?")
            call = data.get("c") if isinstance(data, dict) else None
            if tool == "?" and isinstance(call, list) and call:  # a read-only call's outcome names it
                tool = str(call[0])
            ran.append({"pos": r.seq, "tool": tool, "value": value, "error": error})
    return {"ran": ran, "stdout": stdout}


def _earlier_scripts(events: list[Event], invocation_id: str) -> list[str]:
    """The session's scripts before the last one of ``invocation_id`` (the paused one):
    those of earlier runs and of the run's earlier steps."""
    scripts: list[tuple[str, str]] = []
    for event in events:
        for part in event.content.parts if event.content is not None else []:
            if part.executable_code is not None:
                scripts.append((event.invocation_id, part.executable_code.code))
    last = max((i for i, (inv, _) in enumerate(scripts) if inv == invocation_id), default=len(scripts))
    return [code for _, code in scripts[:last]]


INBOX_KINDS = ("confirmation", "completion", "in_doubt", "interrupted", "stale")
"""What the inbox can be filtered by (``?kind=``): a pending call's kind, or a turn's status."""


async def inbox(
    runner: Runner,
    user_id: str | None,
    redact: Redact,
    *,
    kind: str | None = None,
    tool: str | None = None,
) -> list[dict[str, Any]]:
    """What waits for a human in the app (of one user when given), newest session first:
    each pending call (``"card": "call"``) with the session's status, the script excerpt
    around the call, what already ran in its turn and the reviewer's ``context`` (see
    ``call_context``); each interrupted turn (``"card": "interrupted"``: recover it) and each
    turn that fails verification (``"card": "stale"``, with its ``reason``: nothing of it can
    be decided). Every card has a ``key`` naming what it decides: a card never changes what
    its key names. ``kind`` (one of ``INBOX_KINDS``) keeps the calls of that kind or the
    turns of that status; ``tool`` keeps the calls to that tool (and drops turn cards)."""
    out: list[dict[str, Any]] = []
    tools = _tools_by_name(runner)
    service = runner.session_service
    for user, sid in await service.list_turns(app_name=runner.app_name, user_id=user_id):
        session = await service.get_session(app_name=runner.app_name, user_id=user, session_id=sid)
        if session is None:
            continue
        try:
            status, info = await session_status(runner, session)
        except SessionNotFoundError:
            continue
        if info is None:
            continue
        base = {
            "session_id": sid,
            "user_id": user,
            "status": status,
            "last_update_time": session.last_update_time,
            "updated": _iso(session.last_update_time),
        }
        turn_cards = tool is None and kind in (None, status)
        if status == "stale":
            if turn_cards:
                out.append({**base, "card": "stale", "reason": info.reason, "key": f"stale {user} {sid}"})
            continue
        if status == "interrupted" and turn_cards:
            key = f"interrupted {user} {sid} {info.turn}"
            out.append({**base, "card": "interrupted", "in_flight": info.in_flight, "key": key})
        calls = [p for p in info.pending if kind in (None, p.kind) and tool in (None, p.tool)]
        if not calls:
            continue
        detail = await turn_detail(runner, session, info)
        slot = await service.load_turn(app_name=runner.app_name, user_id=user, session_id=sid) if info.pending else None
        keeps_namespace = slot is not None and slot.data.get("namespace") is not None
        positions = _positions(slot.data if slot is not None else None)
        agent_name = slot.data.get("agent_name") if slot is not None else None
        for p in calls:
            code = _script_of(session.events, p.invocation_id)
            earlier = _earlier_scripts(session.events, p.invocation_id) if keeps_namespace else None
            out.append(
                {
                    **pending_dict(user, sid, p),
                    **base,
                    "card": "call",
                    "key": f"call {p.call_key} {p.digest}",
                    "excerpt": excerpt(code, p.tool, earlier, positions.get(p.call_key))
                    if code
                    else {"lines": [], "line": None, "note": ""},
                    "context": call_context(runner, session.events, p, agent_name, tools),
                    **detail,
                }
            )
    out.sort(key=lambda c: c["last_update_time"], reverse=True)  # stable: a session's calls keep their order
    return scrub(out, redact)


def batches(cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The inbox's cards with the pending calls of one turn (same session, same invocation:
    a gather, or a script paused at more than one call) grouped on one batch card, where the
    first of them was: ``{"card": "batch", "key", "calls": [call cards], "approvable": every
    call awaits confirmation, ...}`` with the session's fields, the first call's
    ``context``, ``excerpt``, ``ran`` and ``stdout``. The key names every call and its digest:
    a batch card never changes what it decides. A turn with one call keeps its call card."""
    turns: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for c in cards:
        if c.get("card") == "call":
            turns.setdefault((c["user_id"], c["session_id"], c["invocation_id"]), []).append(c)
    out: list[dict[str, Any]] = []
    for c in cards:
        group = turns.get((c["user_id"], c["session_id"], c["invocation_id"])) if c.get("card") == "call" else None
        if group is None or len(group) < 2:
            out.append(c)
        elif c is group[0]:
            first = group[0]
            out.append(
                {
                    **{k: first[k] for k in ("session_id", "user_id", "status", "last_update_time", "updated")},
                    **{k: first[k] for k in ("invocation_id", "context", "excerpt", "ran", "stdout")},
                    "card": "batch",
                    "key": "batch " + " ".join(f"{g['call_key']}:{g['digest']}" for g in group),
                    "calls": group,
                    "approvable": all(g["kind"] == "confirmation" for g in group),
                }
            )
    return out


def _tools_by_name(runner: Runner) -> dict[str, dict[str, Any]]:
    """``{agent name: {tool name: Tool}}`` of the runner's agent tree, as far as the tools are
    known without a run (static tools and toolsets that list theirs)."""
    from ..agent._agent import CodeActAgent
    from ..agent._options import known_tools

    out: dict[str, dict[str, Any]] = {}
    todo = [runner.agent]
    while todo:
        agent = todo.pop()
        if isinstance(agent, CodeActAgent):
            out[agent.name] = {t.name: t for t in known_tools(agent, partial=True) or []}
        todo.extend(agent.sub_agents)
    return out


def call_context(
    runner: Runner,
    events: list[Event],
    p: PendingCallInfo,
    agent_name: str | None,
    tools: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """What a reviewer needs beside the call: ``{"message": the user's text that started the
    turn or None, "agent": name, "agent_description": str, "tool_description": str,
    "args": {argument: its schema's description}}`` (empty strings where nothing is known)."""
    message = None
    for event in events:
        if event.invocation_id == p.invocation_id and event.author == "user" and event.content is not None:
            texts = [part.text for part in event.content.parts if part.text]
            if texts:
                message = "\n".join(texts)
                break
    name = agent_name or runner.agent.name
    agent = runner.agent.find_agent(name) or runner.agent
    tool = tools.get(agent.name, {}).get(p.tool)
    arg_docs: dict[str, str] = {}
    # The pending call carries its tool's schema and whether it may be edited (read with the
    # verified turn): the single source; the tool's own ``parameters`` only for an older call.
    schema = p.args_schema if p.args_schema is not None else getattr(tool, "parameters", None)
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        for arg, spec in schema["properties"].items():
            if isinstance(spec, dict) and isinstance(spec.get("description"), str):
                arg_docs[str(arg)] = spec["description"]
    editable = p.kind == "confirmation" and p.editable
    return {
        "message": message,
        "agent": agent.name,
        "agent_description": agent.description,
        "tool_description": (tool.description or "") if tool is not None else "",
        "args": arg_docs,
        "editable": editable,
        "edit": edit_fields(schema, p.args) if editable else [],
        "answer": answer_fields(p.result_schema) if p.kind == "completion" else [],
        "payload": answer_fields(p.payload_schema) if p.kind == "confirmation" else [],
    }


def answer_fields(schema: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The form of a typed answer (``PendingCallInfo.result_schema`` of a completion, or
    ``.payload_schema`` of a confirmation): ``edit_fields`` of the schema, each field showing
    its default when the schema gives one. ``[]`` when no type is declared, or when it is
    not an object with named properties (the card then takes the answer as JSON text)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict) or not schema["properties"]:
        return []
    defaults = {
        name: spec["default"]
        for name, spec in schema["properties"].items()
        if isinstance(spec, dict) and "default" in spec
    }
    return edit_fields(schema, defaults)


LIVE_STALE = 600.0
"""Seconds after which a live row nobody rewrote is taken as left by a run that stopped (a
crash) and no longer shown."""


def current_live(row: LiveRow | None, session: Session, now: float | None = None) -> LiveRow | None:
    """``row`` when it shows what the session's running turn streams now: it follows the
    session's last stored event (else that event holds its text, or a newer run writes
    another), and was written less than ``LIVE_STALE`` seconds ago. Else None."""
    if row is None or not (row.reply or row.output):
        return None
    last = session.events[-1].id if session.events else None
    if row.after != last or (now if now is not None else time.time()) - row.updated_at > LIVE_STALE:
        return None
    return row


async def live_item(runner: Runner, session: Session, redact: Redact) -> dict[str, Any] | None:
    """The session's live row as the timeline shows it (``/api/sessions/{id}/events``'s
    ``live``): ``{"author", "reply", "output", "truncated", "version", "updated"}``, secrets
    redacted; None when no turn of the session streams now (``current_live``). Never part of
    the events."""
    row = current_live(
        await runner.session_service.load_live(
            app_name=runner.app_name, user_id=session.user_id, session_id=session.id
        ),
        session,
    )
    if row is None:
        return None
    item = {
        "author": row.author,
        "reply": row.reply,
        "output": row.output,
        "truncated": row.truncated,
        "version": row.version,
        "updated": _iso(row.updated_at),
    }
    return scrub(item, redact)


async def live_version(runner: Runner, user_id: str | None, session_id: str | None = None) -> str:
    """The live version of the inbox (``session_id`` None) or of one session's page: a
    digest of what the store holds for it (each session's event count and update time, its
    turn slot's version, record and continuation bytes, its journal's length, whether its
    runner's lease ran out; for one session's page, its live row's version). It changes
    whenever what the page shows may have; it restores no continuation, so polling it is
    cheap."""
    service = runner.session_service
    if session_id is None:
        keys = await service.list_turns(app_name=runner.app_name, user_id=user_id)
    else:
        try:
            found = await find_session(runner, session_id, user_id)
        except ValueError:
            return "ambiguous"
        if found is None:
            return "missing"
        keys = [(found.user_id, found.id)]
    parts: list[Any] = []
    for user, sid in keys:
        session = await service.get_session(app_name=runner.app_name, user_id=user, session_id=sid)
        if session is None:
            parts.append([user, sid, None])
            continue
        if session_id is not None:  # the session page shows the live row (the inbox does not)
            live = current_live(
                await service.load_live(app_name=runner.app_name, user_id=user, session_id=sid), session
            )
            parts.append(["live", live.version, live.updated_at] if live is not None else ["live", None])
        slot = await service.load_turn(app_name=runner.app_name, user_id=user, session_id=sid)
        if slot is None:
            parts.append([user, sid, len(session.events), session.last_update_time, None])
            continue
        record, _ = record_problem(slot.data)
        turn = slot.data.get("turn")
        journal = (
            await service.read_journal(app_name=runner.app_name, user_id=user, session_id=sid, turn=turn)
            if isinstance(turn, str)
            else []
        )
        parts.append(
            [
                user,
                sid,
                len(session.events),
                session.last_update_time,
                slot.version,
                hashlib.sha256(json.dumps(slot.data, sort_keys=True, default=str).encode()).hexdigest(),
                hashlib.sha256(slot.snapshot).hexdigest() if slot.snapshot is not None else None,
                len(journal),
                record is not None and record.claim is not None and claim_abandoned(record.claim, runner.clock),
            ]
        )
    return fingerprint(parts)


def fingerprint(data: Any) -> str:
    """A short digest of what a page shows (its live version): server-sent events announce
    a new one when it changes."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


EDIT_KINDS = ("integer", "number", "boolean", "string", "enum", "json")
"""How the **Edit** form shows an argument: a number field, a checkbox, a text field, a choice
among the schema's ``enum``, or JSON text (nested values, unions, anything else)."""


def _edit_kind(spec: Any) -> str:
    if not isinstance(spec, dict):
        return "json"
    if isinstance(spec.get("enum"), list) and spec["enum"] and all(isinstance(v, str) for v in spec["enum"]):
        return "enum"
    kind = spec.get("type")
    return kind if kind in ("integer", "number", "boolean", "string") else "json"


def edit_fields(schema: Any, args: dict[str, Any]) -> list[dict[str, Any]]:
    """The **Edit** form of a call with ``args`` to a tool whose parameters are ``schema`` (a
    JSON schema, ``type: object``): one field per property (then any argument the schema does
    not name, as JSON), each ``{"name", "kind" (EDIT_KINDS), "value" (the text shown; for a
    boolean, ``true``/``false``), "required", "description", "options" (for an enum)}``."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    props = props if isinstance(props, dict) else {}
    required = set(schema.get("required") or []) if isinstance(schema, dict) else set()
    fields: list[dict[str, Any]] = []
    for name in [*props, *(a for a in args if a not in props)]:
        spec = props.get(name, {})
        kind = _edit_kind(spec) if name in props else "json"
        present = name in args
        value = args.get(name)
        if not present:
            shown = ""
        elif kind == "boolean":
            shown = "true" if value else "false"
        elif kind in ("string", "enum") and isinstance(value, str):
            shown = value
        elif kind in ("integer", "number") and isinstance(value, (int, float)) and not isinstance(value, bool):
            shown = json.dumps(value)
        else:
            kind = "json"
            shown = json.dumps(value, ensure_ascii=False, indent=1)
        fields.append(
            {
                "name": str(name),
                "kind": kind,
                "value": shown,
                "required": name in required,
                "description": spec.get("description", "") if isinstance(spec, dict) else "",
                "options": spec.get("enum", []) if kind == "enum" else [],
            }
        )
    return fields


def args_from_form(form: dict[str, str], prefix: str = "arg") -> dict[str, Any]:
    """The arguments an **Edit** form gives: each ``arg:NAME`` field with its ``kind:NAME``
    (``EDIT_KINDS``) read back into a value; an empty field of a kind other than ``string`` is
    left out (the tool's default applies, or its schema refuses the call). With another
    ``prefix`` (``"result"``, ``"payload"``: a typed answer's form), the fields are
    ``PREFIX:NAME`` with their kind in ``kind:PREFIX:NAME``.

    Raises:
        ValueError: a field's text is not a value of its kind (the message names the argument).
    """
    out: dict[str, Any] = {}
    what = "argument" if prefix == "arg" else "field"
    start = f"{prefix}:"
    for key, text in form.items():
        if not key.startswith(start):
            continue
        name = key[len(start) :]
        kind = form.get(f"kind:{name}" if prefix == "arg" else f"kind:{prefix}:{name}", "json")
        if kind == "boolean":
            out[name] = text in ("true", "on", "1")
            continue
        if kind in ("string", "enum"):
            out[name] = text
            continue
        if text.strip() == "":
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{what} {name!r} is not {'a number' if kind != 'json' else 'JSON'}: {exc}") from None
        if kind == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
            raise ValueError(f"{what} {name!r} must be a whole number, not {text!r}")
        if kind == "number" and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise ValueError(f"{what} {name!r} must be a number, not {text!r}")
        out[name] = value
    return out
