"""The turn driver's one call path (issue 47; the short path of issue 21 merged into it), on
the real interpreter and the in-memory store: for each kind of call, the journal writes
(each write's records, in order: the intent before the tool runs, its outcome after), the
slot writes and the script's answer; a store's synchronous ``journal_appender`` writes the
same records as its awaited ``append_journal``; options that change how a tool runs
(callbacks, timeouts, retries, tracing, the tool's thread) change nothing journaled."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, RetryBudget, Runner, ScriptedModel
from codeact.agent import _agent as agent_module
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


class Prefix(str):
    """Equal to any text that starts with it (a message whose tail is pydantic's wording)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other.startswith(str(self))

    __hash__ = str.__hash__


Write = list[tuple[str, int, Any]]


def journaled(*calls: tuple[str, Any]) -> list[Write]:
    """The journal writes of a script's calls, in order (``(tool, outcome record)`` each): the
    turn's OS answers go with the first intent; each intent is written before its tool runs,
    each outcome after."""
    writes: list[Write] = []
    for pos, (tool, outcome) in enumerate(calls):
        writes.append(([("os", 0, "seed")] if pos == 0 else []) + [("intent", pos, tool)])
        writes.append([("outcome", pos, outcome)])
    return writes


DISABLED = {"e": "tool 'fails' is temporarily disabled after 2 consecutive failures", "t": "RuntimeError"}
OPAQUE = (
    "tool 'opaque' returned a value that is not plain data: the result of 'opaque' is an object, which cannot "
    "cross the boundary (allowed: None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset)"
)

# case -> (options, journal writes, the answer's text); a call refused before it runs (no such
# tool, arguments that do not bind or cannot cross) is not journaled, and no slot is written.
EXPECTED: dict[str, tuple[dict[str, Any], list[Write], Any]] = {
    "plain calls, keyword and positional": ({}, journaled(("inc", {"v": 2}), ("inc", {"v": 3})), "[\n  2,\n  3\n]"),
    "a tool error caught by the script": ({}, journaled(("fails", {"e": "no 3", "t": "ValueError"})), "no 3"),
    "arguments the tool refuses": (
        {},
        journaled(("inc", {"e": Prefix("tool 'inc' got invalid arguments: x: "), "t": "TypeError"})),
        "TypeError",
    ),
    "an unknown argument name": ({}, [], "tool 'inc' got an unexpected argument 'y'; its parameters are: x"),
    "SystemExit in the tool": (
        {},
        journaled(("exits", {"e": "tool 'exits' raised SystemExit(2); the host did not exit", "t": "RuntimeError"})),
        "tool 'exits' raised SystemExit(2); the host did not exit",
    ),
    "StopIteration in the tool": (
        {},
        journaled(("stops", {"e": "coroutine raised StopIteration", "t": "RuntimeError"})),
        "RuntimeError: coroutine raised StopIteration",
    ),
    "float arguments and result": (
        {},
        journaled(("scale", {"v": 3.0}), ("scale", {"v": 0.30000000000000004})),
        "[\n  3.0,\n  0.30000000000000004\n]",
    ),
    "a result that is not plain data": ({}, journaled(("opaque", {"e": OPAQUE, "t": "TypeError"})), OPAQUE),
    "a result past the inline limit (a blob)": (
        {},
        journaled(("big", {"n": 70008, "r": "4d11a883bea479a60331e3e3b19808cf04f7b4fca6542277a4597571e03cc6f1"})),
        "70000",
    ),
    "an unknown tool": (
        {},
        [],
        "tool 'nope' is not available; available tools: big, exits, fails, host_down, inc, opaque, scale, stops",
    ),
    "an int argument too long to journal": (
        {},
        [],
        "the arguments of 'inc'['x'] is an int of more than 4300 digits, which cannot be stored (at most 4300 "
        "digits); the tool did not run",
    ),
    "the tool-call budget": (  # the fourth call ends the script; the next turn answers
        {"max_tool_calls": 3},
        journaled(("inc", {"v": 1}), ("inc", {"v": 2}), ("inc", {"v": 3})),
        "again",
    ),
    "the circuit breaker opens": (
        {"circuit_breaker_threshold": 2},
        journaled(
            ("fails", {"e": "no 0", "t": "ValueError"}),
            ("fails", {"e": "no 1", "t": "ValueError"}),
            ("fails", DISABLED),
            ("fails", DISABLED),
        ),
        '[\n  "no 0",\n  "no 1",\n  "tool \'fails\' is temporarily disabled after 2 consecutive failures",\n  '
        "\"tool 'fails' is temporarily disabled after 2 consecutive failures\"\n]",
    ),
}


def _summary(writes: list[Write]) -> list[Write]:
    """The writes with each intent reduced to its tool name (its digest is the arguments')."""
    return [[(kind, seq, data[0] if kind == "intent" else data) for kind, seq, data in w] for w in writes]


async def _run(
    script: str,
    monkeypatch: pytest.MonkeyPatch,
    tools: Any = TOOLS,
    service: Recording | RecordingInPlace | None = None,
    traced: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """Runs ``script`` as the first turn's reply. The run is traced by a recording SDK
    provider when ``traced``, and untraced otherwise, whatever global provider an earlier
    test of the suite set (OpenTelemetry allows one per process)."""
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
    except Exception as exc:  # a host failure ends the run
        error = f"{type(exc).__name__}: {exc}"
    monkeypatch.undo()
    return {
        "writes": service.writes,
        "slot_writes": service.slot_writes,
        "texts": [(e.author, e.kind, e.text) for e in events],
        "error": error,
    }


@pytest.mark.parametrize("case", sorted(SCRIPTS))
async def test_each_kind_of_call_writes_its_records_and_answers(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    options, writes, answer = EXPECTED[case]
    result = await _run(SCRIPTS[case], monkeypatch, **options)
    assert result["error"] is None
    assert _summary(result["writes"]) == writes
    assert result["slot_writes"] == (2 if writes else 0)  # written at the first intent, cleared at the end
    assert result["texts"][-1] == ("a", None, answer)


@pytest.mark.parametrize("case", sorted(SCRIPTS))
async def test_the_stores_synchronous_appender_writes_as_append_journal(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver writes through the store's ``journal_appender`` when it has one: the same
    records in the same writes as the awaited ``append_journal``."""
    options = EXPECTED[case][0]
    in_place = RecordingInPlace()
    synchronous = await _run(SCRIPTS[case], monkeypatch, service=in_place, **options)
    awaited = await _run(SCRIPTS[case], monkeypatch, **options)
    for key in ("writes", "slot_writes", "texts", "error"):
        assert synchronous[key] == awaited[key], key
    if synchronous["writes"] and "blob" not in case:
        # The appender was really used (a turn's first intent goes with the slot's first
        # write, and a blob's outcome with its blob, both awaited).
        assert in_place.in_place > 0


async def test_a_host_failure_ends_the_run_after_the_intent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``ToolHostError`` ends the run: the intent is stored, no outcome (a recovery finds
    the call in doubt)."""
    script = 'call_tool("host_down", {"x": 1})\n{"type": "final_result", "value": 1}'
    result = await _run(script, monkeypatch)
    assert result["error"] == "ToolHostError: the host is down"
    assert _summary(result["writes"]) == [[("os", 0, "seed"), ("intent", 0, "host_down")]]
    assert [kind for _, kind, _ in result["texts"]] == ["model_reply"]


INC_ONCE = 'v = call_tool("inc", {"x": 1})\n{"type": "final_result", "value": v}'


@pytest.mark.parametrize(
    "options",
    [
        {"before_tool": lambda tool, args, ctx: None},
        {"tool_timeout": 5.0, "tools": [inc]},
        {"default_retry_budget": RetryBudget(max_retries=1)},
    ],
    ids=["a before_tool callback", "a timeout on a tool run in a thread", "retries"],
)
async def test_how_a_tool_runs_changes_nothing_journaled(
    options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = await _run(INC_ONCE, monkeypatch, **options)
    assert _summary(result["writes"]) == journaled(("inc", {"v": 2}))
    assert result["texts"][-1] == ("a", None, "2")


async def test_a_traced_run_writes_what_an_untraced_one_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra (opentelemetry-sdk) is not installed")
    traced = await _run(INC_ONCE, monkeypatch, traced=True)
    untraced = await _run(INC_ONCE, monkeypatch)
    assert _summary(untraced["writes"]) == journaled(("inc", {"v": 2}))
    for key in ("writes", "slot_writes", "texts", "error"):
        assert traced[key] == untraced[key], key


async def test_a_sync_tool_in_its_thread_journals_each_call_as_on_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default: a sync tool runs in a worker thread (where the agent's ``tool_timeout``
    applies) until three quick calls in a row, then on the event loop (in place, through
    ``run_inline``); either way each call's intent and outcome are written alike."""
    script = 'out = [call_tool("inc", {"x": i}) for i in range(5)]\n{"type": "final_result", "value": out}'
    threaded = await _run(script, monkeypatch, tools=[inc])
    assert _summary(threaded["writes"]) == journaled(*[("inc", {"v": i + 1}) for i in range(5)])
    on_loop = await _run(script, monkeypatch)
    for key in ("writes", "slot_writes", "texts", "error"):
        assert threaded[key] == on_loop[key], key


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
    thread, where the agent's ``tool_timeout`` applies. The mode is read when the tool runs,
    after the intent's write."""

    class Overrun(Recording):
        def __init__(self, tool: FunctionTool) -> None:
            super().__init__()
            self.tool = tool

        async def append_journal(self, session: Any, turn: str, records: Any, **kw: Any) -> None:
            if any(r.kind == "intent" for r in records):
                self.tool._quick_calls = 0  # another session's call of it overran meanwhile
            await super().append_journal(session, turn, records, **kw)

    tool = FunctionTool(nap)
    tool._quick_calls = 3  # proved quick: it runs on the event loop now
    result = await _run(
        'try:\n    v = call_tool("nap", {"x": 1})\nexcept Exception as e:\n    v = type(e).__name__\n'
        '{"type": "final_result", "value": v}',
        monkeypatch,
        tools=[tool],
        service=Overrun(tool),
        tool_timeout=0.2,
    )
    assert result["texts"][-1][2] == "TimeoutError"
    assert _summary(result["writes"]) == journaled(
        ("nap", {"e": "tool 'nap' timed out after 0.2 s", "t": "TimeoutError"})
    )


async def test_a_patched_append_journal_sees_every_write(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """``journal_appender`` is off whenever the store's ``append_journal`` is not its own: a
    subclass's, a function patched on the instance or a mock patched on the class. The
    patch then sees every journal write of the call path, and a failure it injects ends the
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
