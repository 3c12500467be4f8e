"""The turn driver's short path for the common inline call (``TurnDriver._fast_call``, issue
21) against its general path, on the real interpreter and the in-memory store: for each kind
of call the short path takes or declines, the journal writes (each write's records, in
order), the events and the script's result are the same as when every call goes the general
way, and the short path is really taken where it should be."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, RetryBudget, Runner, ScriptedModel
from codeact.agent import _agent as agent_module
from codeact.agent._driver import TurnDriver
from codeact.exceptions import ToolHostError
from codeact.telemetry import start_agent_run, tracing_available
from codeact.tools import FunctionTool

pytestmark = pytest.mark.anyio


class Recording(InMemorySessionService):
    """Keeps every ``append_journal`` call's records (the turn id left out: it names the
    invocation, which differs between two runs) and counts slot writes."""

    writes: list[list[tuple[str, int, Any]]]

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[list[tuple[str, int, Any]]] = []
        self.slot_writes = 0

    async def append_journal(self, session: Any, turn: str, records: Any, *, expected_version: Any = None) -> None:
        # An ``os`` record holds the run's random seed, which differs between two runs.
        self.writes.append([(r.kind, r.seq, "seed" if r.kind == "os" else json.loads(r.data)) for r in records])
        await super().append_journal(session, turn, records, expected_version=expected_version)

    async def save_turn(self, **kwargs: Any) -> int:
        self.slot_writes += 1
        return await super().save_turn(**kwargs)


class RecordingInPlace(InMemorySessionService):
    """Keeps the same record of writes as ``Recording`` without overriding ``append_journal``,
    so the store's synchronous ``journal_appender`` stays on (the driver's hot path writes
    through it) and ``in_place`` counts the writes made that way."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[list[tuple[str, int, Any]]] = []
        self.slot_writes = 0
        self.in_place = 0

    def journal_appender(self) -> Any:
        appender = super().journal_appender()
        assert appender is not None

        def counted(session: Any, turn: str, records: Any, expected_version: Any) -> bool:
            self.in_place += 1
            return appender(session, turn, records, expected_version)

        return counted

    def _append_journal_now(self, session: Any, turn: str, records: Any, expected_version: Any) -> bool:
        self.writes.append([(r.kind, r.seq, "seed" if r.kind == "os" else json.loads(r.data)) for r in records])
        return super()._append_journal_now(session, turn, records, expected_version)

    async def save_turn(self, **kwargs: Any) -> int:
        self.slot_writes += 1
        return await super().save_turn(**kwargs)


def inc(x: int) -> int:
    """Adds one.

    Args:
        x: a number.
    """
    return x + 1


def fails(x: int) -> int:
    """Always fails.

    Args:
        x: a number.
    """
    raise ValueError(f"no {x}")


def exits(x: int) -> int:
    """Calls sys.exit.

    Args:
        x: a number.
    """
    raise SystemExit(x)


def opaque(x: int) -> Any:
    """Returns something that is not plain data.

    Args:
        x: a number.
    """
    return object()


def big(n: int) -> str:
    """A long text (stored as a blob past the inline limit).

    Args:
        n: its length.
    """
    return "y" * n


def stops(x: int) -> int:
    """Raises StopIteration (a coroutine turns it into RuntimeError, PEP 479).

    Args:
        x: a number.
    """
    raise StopIteration(x)


def scale(x: float, by: float = 2.0) -> float:
    """Multiplies.

    Args:
        x: a number.
        by: the factor.
    """
    return x * by


def host_down(x: int) -> int:
    """Reports a host failure.

    Args:
        x: a number.
    """
    raise ToolHostError("the host is down")


# Run on the event loop from the first call (a sync tool in its worker thread, the default
# until it proved quick, has a timeout to enforce and so takes the general path).
TOOLS = [FunctionTool(f, run_in_thread=False) for f in (inc, fails, exits, opaque, big, host_down, stops, scale)]

SCRIPTS = {
    "plain calls, keyword and positional": (
        'a = call_tool("inc", {"x": 1})\nb = call_tool("inc", {"x": a})\n{"type": "final_result", "value": [a, b]}'
    ),
    "a tool error caught by the script": (
        'try:\n    call_tool("fails", {"x": 3})\nexcept ValueError as e:\n    m = str(e)\n'
        '{"type": "final_result", "value": m}'
    ),
    "arguments the tool refuses": (
        'try:\n    call_tool("inc", {"x": "not a number"})\nexcept Exception as e:\n    m = type(e).__name__\n'
        '{"type": "final_result", "value": m}'
    ),
    "an unknown argument name": (
        'try:\n    call_tool("inc", {"y": 1})\nexcept Exception as e:\n    m = str(e)\n'
        '{"type": "final_result", "value": m}'
    ),
    "SystemExit in the tool": (
        'try:\n    call_tool("exits", {"x": 2})\nexcept Exception as e:\n    m = str(e)\n'
        '{"type": "final_result", "value": m}'
    ),
    "StopIteration in the tool": (
        'try:\n    call_tool("stops", {"x": 2})\nexcept Exception as e:\n    m = type(e).__name__ + ": " + str(e)\n'
        '{"type": "final_result", "value": m}'
    ),
    "float arguments and result": (
        'a = call_tool("scale", {"x": 1.5})\nb = call_tool("scale", {"x": a, "by": 0.1})\n'
        '{"type": "final_result", "value": [a, b]}'
    ),
    "a result that is not plain data": (
        'try:\n    call_tool("opaque", {"x": 1})\nexcept Exception as e:\n    m = str(e)\n'
        '{"type": "final_result", "value": m}'
    ),
    "a result past the inline limit (a blob)": (
        'v = call_tool("big", {"n": 70000})\n{"type": "final_result", "value": len(v)}'
    ),
    "an unknown tool": (
        'try:\n    call_tool("nope", {"x": 1})\nexcept Exception as e:\n    m = str(e)\n'
        '{"type": "final_result", "value": m}'
    ),
    "an int argument too long to journal": (
        'try:\n    call_tool("inc", {"x": 10 ** 5000})\nexcept Exception as e:\n    m = str(e)\n'
        '{"type": "final_result", "value": m}'
    ),
    "the tool-call budget": (
        'out = []\nfor i in range(5):\n    out.append(call_tool("inc", {"x": i}))\n'
        '{"type": "final_result", "value": out}'
    ),
    "the circuit breaker opens": (
        'out = []\nfor i in range(4):\n    try:\n        call_tool("fails", {"x": i})\n'
        '    except Exception as e:\n        out.append(str(e))\n{"type": "final_result", "value": out}'
    ),
}

OPTIONS: dict[str, dict[str, Any]] = {
    "the tool-call budget": {"max_tool_calls": 3},
    "the circuit breaker opens": {"circuit_breaker_threshold": 2},
}


async def _run(
    script: str,
    short: bool,
    monkeypatch: pytest.MonkeyPatch,
    tools: Any = TOOLS,
    service: Recording | RecordingInPlace | None = None,
    traced: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """Runs ``script`` as the first turn's reply. The run is traced by a recording SDK
    provider when ``traced``, and untraced otherwise, whatever global provider an earlier
    test of the suite set (OpenTelemetry allows one per process; tracing declines the short
    path)."""
    taken: list[bool] = []
    real = TurnDriver._fast_call

    async def counted(self: TurnDriver, call: Any, pos: int) -> Any:
        if not short:
            taken.append(False)
            return None
        try:
            outcome = await real(self, call, pos)
        except BaseException:
            taken.append(True)  # it took the call and the call ended the run
            raise
        taken.append(outcome is not None)
        return outcome

    monkeypatch.setattr(TurnDriver, "_fast_call", counted)
    if tracing_available():
        from opentelemetry import trace

        provider: Any = trace.NoOpTracerProvider()
        if traced:
            from opentelemetry.sdk import trace as otel_sdk

            provider = otel_sdk.TracerProvider()
        monkeypatch.setattr(
            agent_module, "start_agent_run", functools.partial(start_agent_run, tracer_provider=provider)
        )
    service = service if service is not None else Recording()
    agent = CodeActAgent(
        name="a",
        model=ScriptedModel(
            [f"```python\n{script}\n```", '```python\n{"type": "final_result", "value": "again"}\n```']
        ),
        runtime=MontyRuntime(),
        tools=tools,
        **options,
    )
    runner = Runner(app_name="app", agent=agent, session_service=service)
    await service.create_session(app_name="app", user_id="u", session_id="s")
    error = None
    events: list[Any] = []
    try:
        async for event in runner.run_async(user_id="u", session_id="s", new_message="go"):
            events.append(event)
    except Exception as exc:  # a host failure ends the run, the same way on both paths
        error = f"{type(exc).__name__}: {exc}"
    monkeypatch.undo()
    return {
        "writes": service.writes,
        "slot_writes": service.slot_writes,
        "texts": [(e.author, e.kind, e.text) for e in events],
        "error": error,
        "taken": taken,
    }


@pytest.mark.parametrize("case", sorted(SCRIPTS))
async def test_the_short_path_writes_and_answers_as_the_general_path(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = OPTIONS.get(case, {})
    short = await _run(SCRIPTS[case], True, monkeypatch, **options)
    general = await _run(SCRIPTS[case], False, monkeypatch, **options)
    assert general["taken"] and not any(general["taken"])  # the general run never took it
    for key in ("writes", "slot_writes", "texts", "error"):
        assert short[key] == general[key], key
    # A call refused before it runs (no such tool, arguments that cannot cross) is not journaled.
    assert bool(short["writes"]) == (
        case not in ("an unknown tool", "an int argument too long to journal", "an unknown argument name")
    )


@pytest.mark.parametrize("case", sorted(SCRIPTS))
async def test_the_stores_synchronous_appender_writes_as_append_journal(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The short path writes through the store's ``journal_appender`` when it has one: the
    same records in the same order as the general path's awaited ``append_journal``."""
    options = OPTIONS.get(case, {})
    in_place = RecordingInPlace()
    short = await _run(SCRIPTS[case], True, monkeypatch, service=in_place, **options)
    general = await _run(SCRIPTS[case], False, monkeypatch, **options)
    for key in ("writes", "slot_writes", "texts", "error"):
        assert short[key] == general[key], key
    if any(short["taken"]) and "blob" not in case:
        # The appender was really used (a turn's first intent goes with the slot's first
        # write, and a blob's outcome with its blob, both awaited).
        assert in_place.in_place > 0


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("plain calls, keyword and positional", [True, True]),
        ("a tool error caught by the script", [True]),
        ("SystemExit in the tool", [True]),
        ("an int argument too long to journal", [False]),
        ("an unknown argument name", [False]),
        ("an unknown tool", [False]),
        ("the tool-call budget", [True, True, True, False]),
        ("the circuit breaker opens", [True, True, False, False]),
    ],
)
async def test_the_short_path_is_taken_only_where_it_applies(
    case: str, expected: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = await _run(SCRIPTS[case], True, monkeypatch, **OPTIONS.get(case, {}))
    assert result["taken"] == expected


async def test_a_host_failure_ends_the_run_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    script = 'call_tool("host_down", {"x": 1})\n{"type": "final_result", "value": 1}'
    short = await _run(script, True, monkeypatch)
    general = await _run(script, False, monkeypatch)
    assert short["error"] is not None and "the host is down" in short["error"]
    assert short["taken"] == [True]
    for key in ("writes", "texts", "error"):
        assert short[key] == general[key], key


@pytest.mark.parametrize(
    "options",
    [
        {"before_tool": lambda tool, args, ctx: None},
        {"tool_timeout": 5.0, "tools": [inc]},
        {"default_retry_budget": RetryBudget(max_retries=1)},
        {"require_tool_confirmation": ["inc"]},
    ],
    ids=["a before_tool callback", "a timeout on a tool run in a thread", "retries", "a confirmation gate"],
)
async def test_the_short_path_declines_what_only_the_general_path_does(
    options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = 'v = call_tool("inc", {"x": 1})\n{"type": "final_result", "value": v}'
    result = await _run(script, True, monkeypatch, **options)
    assert result["taken"] == [False]


async def test_a_traced_run_takes_the_general_path_and_writes_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra (opentelemetry-sdk) is not installed")
    script = 'v = call_tool("inc", {"x": 1})\n{"type": "final_result", "value": v}'
    traced = await _run(script, True, monkeypatch, traced=True)
    untraced = await _run(script, True, monkeypatch)
    assert traced["taken"] == [False] and untraced["taken"] == [True]
    for key in ("writes", "slot_writes", "texts", "error"):
        assert traced[key] == untraced[key], key


async def test_a_sync_tool_in_its_thread_takes_the_short_path_once_it_proved_quick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default: a sync tool runs in a worker thread (where the agent's ``tool_timeout``
    applies) until three quick calls in a row, then on the event loop, where the short path
    takes it."""
    script = 'out = [call_tool("inc", {"x": i}) for i in range(5)]\n{"type": "final_result", "value": out}'
    short = await _run(script, True, monkeypatch, tools=[inc])
    assert short["taken"] == [False, False, False, True, True]
    general = await _run(script, False, monkeypatch, tools=[inc])
    for key in ("writes", "slot_writes", "texts", "error"):
        assert short[key] == general[key], key


def nap(x: int) -> int:
    """Sleeps 0.6 s.

    Args:
        x: returned.
    """
    import time

    time.sleep(0.6)
    return x


async def test_a_tool_sent_back_to_its_thread_during_the_intent_write_keeps_its_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tool's thread mode is shared by every session of the agent: a slow call of the same
    tool elsewhere, while this call's intent is being written, sends it back to its worker
    thread, where the agent's ``tool_timeout`` applies. The short path reads the mode again
    after the write, as the general path does (it reads it only then)."""

    class Overrun(Recording):
        def __init__(self, tool: FunctionTool) -> None:
            super().__init__()
            self.tool = tool

        async def append_journal(self, session: Any, turn: str, records: Any, **kw: Any) -> None:
            if any(r.kind == "intent" for r in records):
                self.tool._quick_calls = 0  # another session's call of it overran meanwhile
            await super().append_journal(session, turn, records, **kw)

    results = []
    for short in (True, False):
        tool = FunctionTool(nap)
        tool._quick_calls = 3  # proved quick: it runs on the event loop now
        results.append(
            await _run(
                'try:\n    v = call_tool("nap", {"x": 1})\nexcept Exception as e:\n    v = type(e).__name__\n'
                '{"type": "final_result", "value": v}',
                short,
                monkeypatch,
                tools=[tool],
                service=Overrun(tool),
                tool_timeout=0.2,
            )
        )
    short_run, general_run = results
    assert short_run["texts"][-1][2] == "TimeoutError"
    assert short_run["taken"] == [True]
    for key in ("writes", "texts", "error"):
        assert short_run[key] == general_run[key], key


async def test_a_patched_append_journal_sees_every_write(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """``journal_appender`` is off whenever the store's ``append_journal`` is not its own: a
    subclass's, a function patched on the instance or a mock patched on the class. The
    patch then sees every journal write of the short path, and a failure it injects ends the
    run as before."""
    from unittest import mock

    from codeact import SqliteSessionService
    from codeact.exceptions import SessionStoreError

    for make in (InMemorySessionService, lambda: SqliteSessionService(tmp_path / f"s{id(object())}.db")):
        store = make()
        assert store.journal_appender() is not None  # its own append_journal: on
        seen: list[str] = []
        real = store.append_journal

        async def wrapped(
            session: Any, turn: str, records: Any, *, seen: list[str] = seen, real: Any = real, **kwargs: Any
        ) -> None:
            seen.extend(r.kind for r in records)
            if any(r.kind == "outcome" for r in records):
                raise SessionStoreError("injected")
            await real(session, turn, records, **kwargs)

        store.append_journal = wrapped  # type: ignore[method-assign]
        assert store.journal_appender() is None
        script = 'a = call_tool("inc", {"x": 1})\nb = call_tool("inc", {"x": a})\n{"type": "final_result", "value": b}'
        agent = CodeActAgent(
            name="a", model=ScriptedModel([f"```python\n{script}\n```"]), runtime=MontyRuntime(), tools=TOOLS
        )
        runner = Runner(app_name="app", agent=agent, session_service=store)
        await store.create_session(app_name="app", user_id="u", session_id="s")
        with pytest.raises(SessionStoreError, match="injected"):
            async for _ in runner.run_async(user_id="u", session_id="s", new_message="go"):
                pass
        assert seen == ["os", "intent", "outcome"]  # the outcome's write went through the patch
        with mock.patch.object(type(store), "append_journal", mock.AsyncMock()):
            assert store.journal_appender() is None
        store.close()
