"""Shared helpers for the agent-loop tests (not a conftest: import explicitly)."""

from __future__ import annotations

import inspect
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from codeact import (
    BaseSessionService,
    CodeActAgent,
    Content,
    Event,
    InMemorySessionService,
    RunConfig,
    Runner,
    ScriptedModel,
    Session,
    Tool,
    ToolContext,
)
from codeact.agent import InvocationContext
from codeact.testing import PlannedCall, PlannedComplete, ScriptedRuntime

APP = "app"
USER = "u"
SESSION = "s"


def fence(code: str, lang: str = "python") -> str:
    """A model reply with some prose and one fenced block."""
    return f"Here is my script.\n```{lang}\n{code.strip()}\n```\nDone."


def final_reply(value: Any) -> str:
    """A fenced script ending with a final_result of ``value`` (a Python literal)."""
    return fence(f'{{"type": "final_result", "value": {value!r}}}')


def final(value: Any) -> PlannedComplete:
    """A ``ScriptedRuntime`` step: the script completes with a final_result of ``value``."""
    return PlannedComplete({"type": "final_result", "value": value})


def observation(value: Any, stdout: str = "") -> PlannedComplete:
    """A ``ScriptedRuntime`` step: the script completes with an observation of ``value``,
    having printed ``stdout``."""
    return PlannedComplete({"type": "observation", "value": value}, stdout)


def any_code_model() -> ScriptedModel:
    """A model that always replies with some code (for ScriptedRuntime runs, where the
    script text is ignored). ``len(model.requests)`` counts model calls."""
    return ScriptedModel(lambda request: fence("pass"))


def scripted_agent(
    programs: Sequence[Sequence[Any]],
    *,
    tools: Sequence[Any] = (),
    suspension: bool = True,
    model: ScriptedModel | None = None,
    name: str = "coder",
    **kwargs: Any,
) -> tuple[CodeActAgent, ScriptedRuntime, ScriptedModel]:
    runtime = ScriptedRuntime(programs, supports_suspension=suspension)
    model = model if model is not None else any_code_model()
    agent = CodeActAgent(name=name, model=model, runtime=runtime, tools=list(tools), **kwargs)
    return agent, runtime, model


async def run(
    agent: CodeActAgent,
    *,
    service: BaseSessionService | None = None,
    message: str | Content | None = "go",
    run_config: RunConfig | None = None,
    state: dict[str, Any] | None = None,
    session_id: str = SESSION,
    progress: bool = False,
) -> tuple[list[Event], Session, BaseSessionService]:
    """One invocation through a ``Runner``; creates the session (with ``state``) if needed.

    Returns the events (without the run's progress events, ``Event.kind`` set, unless
    ``progress``: tests/test_events.py covers those), the session as stored afterwards, and
    the service."""
    service = service if service is not None else InMemorySessionService()
    existing = await service.get_session(app_name=APP, user_id=USER, session_id=session_id)
    if existing is None:
        await service.create_session(app_name=APP, user_id=USER, session_id=session_id, state=state)
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    events = [
        e
        async for e in runner.run_async(user_id=USER, session_id=session_id, new_message=message, run_config=run_config)
        if progress or e.kind is None
    ]
    session = await service.get_session(app_name=APP, user_id=USER, session_id=session_id)
    assert session is not None
    return events, session, service


async def run_direct(
    agent: CodeActAgent,
    *,
    message: str | None = "go",
    run_config: RunConfig | None = None,
    state: dict[str, Any] | None = None,
    invocation_id: str = "inv",
    history: Sequence[Event] = (),
    progress: bool = False,
) -> list[Event]:
    """Runs ``agent.run_async`` on a hand-built context (no runner, nothing persisted), with
    a known invocation id (progress events left out unless ``progress``, as in ``run``)."""
    session = Session(id=SESSION, app_name=APP, user_id=USER, state=dict(state or {}), events=list(history))
    ctx = InvocationContext(
        invocation_id=invocation_id,
        agent=agent,
        session=session,
        session_service=None,
        user_content=Content.from_text(message) if message is not None else None,
        run_config=run_config or RunConfig(),
    )
    return [e async for e in agent.run_async(ctx) if progress or e.kind is None]


def journal_of(service: BaseSessionService, session_id: str = SESSION) -> list[tuple[str, int, Any]]:
    """Every journal record of a session, over all turns in write order of turns:
    ``(kind, seq, data)`` with ``data`` parsed (intent: ``[tool, digest]``; outcome:
    ``{"v": value}`` / ``{"e": message, "t": type}``)."""
    import json
    import sqlite3

    from codeact import SqliteSessionService

    if isinstance(service, InMemorySessionService):
        stored = service._sessions[(APP, USER, session_id)]
        return [(kind, seq, json.loads(data)) for turn in stored.journal.values() for (kind, seq), data in turn.items()]
    assert isinstance(service, SqliteSessionService)
    con = sqlite3.connect(service.path)
    try:
        rows = con.execute(
            "SELECT kind, seq, data FROM journal WHERE session_id = ? ORDER BY turn, seq, kind", (session_id,)
        ).fetchall()
    finally:
        con.close()
    return [(k, q, json.loads(d)) for k, q, d in rows]


def outcomes_of(service: BaseSessionService, session_id: str = SESSION) -> list[Any]:
    """The recorded outcomes of a session's journal, in call order."""
    return [data for kind, _, data in journal_of(service, session_id) if kind == "outcome"]


def intents_of(service: BaseSessionService, session_id: str = SESSION) -> list[str]:
    """The tool names of a session's journaled intents, in call order."""
    return [data[0] for kind, _, data in journal_of(service, session_id) if kind == "intent"]


async def slot_of(service: BaseSessionService, session_id: str = SESSION) -> Any:
    """The session's turn slot (None when no turn is in flight)."""
    return await service.load_turn(app_name=APP, user_id=USER, session_id=session_id)


def final_event(events: Sequence[Event]) -> Event:
    last = events[-1]
    assert last.error_code is None, (last.error_code, last.error_message)
    return last


def scripted_snapshot(first: PlannedCall, *rest: Any) -> tuple[bytes, int]:
    """Snapshot bytes of a ScriptedRuntime program paused at ``first``, and its call id."""
    rt = ScriptedRuntime([[first, *rest]])
    step = rt.start("x")
    return step.call.dump(), step.call.call_id  # type: ignore[union-attr]


def texts(contents: Sequence[Content]) -> list[str]:
    return [c.text for c in contents]


class FakeTool(Tool):
    """A schema-less tool recording its calls. ``fn(args, tool_context)`` (sync or async)
    computes the result when given, else ``result`` is returned."""

    def __init__(
        self,
        name: str,
        result: Any = None,
        *,
        fn: Callable[..., Any] | None = None,
        is_long_running: bool = False,
        requires_confirmation: bool = False,
    ) -> None:
        super().__init__(
            name, f"the {name} tool", None, is_long_running=is_long_running, requires_confirmation=requires_confirmation
        )
        self.result = result
        self.fn = fn
        self.calls: list[dict[str, Any]] = []
        self.contexts: list[ToolContext] = []

    async def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        self.calls.append(dict(args))
        self.contexts.append(tool_context)
        if self.fn is not None:
            out = self.fn(args, tool_context)
            if inspect.isawaitable(out):
                out = await out
            return out
        return self.result


def sigkill_at_barrier(args: Sequence[str], barrier: Path, *, timeout: float = 120.0) -> None:
    """Starts ``args`` as a child process, waits until it creates the file ``barrier`` (polled
    every 10 ms, at most ``timeout`` seconds), then kills it with SIGKILL and reaps it.

    Raises:
        AssertionError: the child ended before its barrier (with the tail of its output), or
            never reached it.
    """
    barrier.unlink(missing_ok=True)
    proc = subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while not barrier.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the child ended before the barrier: {out[-2000:]!r} {err[-2000:]!r}")
        assert time.monotonic() < deadline, "the child never reached the barrier"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
