"""``persist_namespace=True``: what one turn's script defines, the next turn's sees, within a
run, across a suspension stored in SQLite and across a crash. Two mechanisms: a namespace
session on ``MontyRuntime`` in process (ADR 0003: every value carries), and the source
transform (``agent/_namespace.py``: definitions and plain data carry) on runtimes without
sessions (``CPythonRuntime``, ``MontyRuntime(namespace_sessions=False)``, ``isolation="process"``)."""

from __future__ import annotations

import gc
import json
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest

from codeact import (
    CodeActAgent,
    CPythonRuntime,
    FunctionTool,
    InMemorySessionService,
    MontyRuntime,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)

pytestmark = pytest.mark.anyio


def session_runtime() -> MontyRuntime:
    rt = MontyRuntime()
    assert rt.capabilities().supports_namespace_session
    return rt


def transform_runtime() -> MontyRuntime:
    rt = MontyRuntime(namespace_sessions=False)
    assert not rt.capabilities().supports_namespace_session
    return rt


MECHANISMS = pytest.mark.parametrize(
    "runtime", [session_runtime, transform_runtime, CPythonRuntime], ids=["session", "transform", "cpython"]
)


def fence(code: str) -> str:
    return f"```python\n{code}\n```"


TURN_1 = fence(
    "import json\n"
    "def area(w, h):\n"
    "    return w * h\n"
    "rooms = [[3, 4], [2, 5]]\n"
    "seen = {1, 2}  # a set: not plain data, not carried\n"
    '{"type": "observation", "value": len(rooms)}'
)
TURN_2 = fence(
    'rooms.append([1, 1])\n{"type": "final_result", "value": {"total": sum(area(w, h) for w, h in rooms), '
    '"json": json.dumps(rooms)}}'
)


async def run_agent(agent: CodeActAgent, service: Any, message: str | None, config: RunConfig | None = None) -> list:
    runner = Runner(app_name="app", agent=agent, session_service=service, auto_create_session=True)
    return [e async for e in runner.run_async(user_id="u", session_id="s", new_message=message, run_config=config)]


@MECHANISMS
async def test_definitions_and_variables_reach_the_next_turn(runtime: Any) -> None:
    agent = CodeActAgent(name="a", model=ScriptedModel([TURN_1, TURN_2]), runtime=runtime(), persist_namespace=True)
    events = await run_agent(agent, InMemorySessionService(), "rooms?")
    final = events[-1]
    assert final.error_code is None, final
    assert '"total": 23' in final.text
    assert "[[3, 4], [2, 5], [1, 1]]" in final.text


async def test_without_the_flag_the_next_turn_starts_empty() -> None:
    model = ScriptedModel([TURN_1, TURN_2, fence('{"type": "final_result", "value": "gave up"}')])
    agent = CodeActAgent(name="a", model=model, runtime=MontyRuntime())
    events = await run_agent(agent, InMemorySessionService(), "rooms?")
    assert events[-1].text == "gave up"
    assert "NameError" in model.requests[2].contents[-1].text or any(
        "NameError" in c.text for c in model.requests[2].contents
    )


@pytest.mark.parametrize("runtime", [session_runtime, transform_runtime], ids=["session", "transform"])
async def test_a_failing_script_keeps_the_namespace_and_lines_stay_the_models(runtime: Any) -> None:
    failing = fence("x = 1\nboom = rooms[10]\n" + '{"type": "observation", "value": 0}')
    failing_last = fence('{"type": "observation", "value": rooms[10]}')
    model = ScriptedModel([TURN_1, failing, failing_last, TURN_2])
    agent = CodeActAgent(name="a", model=model, runtime=runtime(), persist_namespace=True)
    events = await run_agent(agent, InMemorySessionService(), "rooms?")
    assert '"total": 23' in events[-1].text
    feedback = "\n".join(c.text for c in model.requests[2].contents)
    assert "IndexError" in feedback
    assert 'File "agent.py", line 2, in <module>' in feedback  # the model's own line, not the prelude's


@pytest.mark.parametrize("runtime", [session_runtime, transform_runtime], ids=["session", "transform"])
async def test_the_namespace_survives_a_suspension_in_sqlite(tmp_path: Path, runtime: Any) -> None:
    sent: list[dict[str, Any]] = []

    def send(to: str, body: str) -> str:
        """Sends a message.

        Args:
            to: recipient.
            body: text.
        """
        sent.append({"to": to, "body": body})
        return f"sent #{len(sent)}"

    turn_2 = fence(
        'receipt = call_tool("send", {"to": "ops", "body": json.dumps(rooms)})\n'
        '{"type": "observation", "value": receipt}'
    )
    turn_3 = fence(
        '{"type": "final_result", "value": {"receipt": receipt, "total": sum(area(w, h) for w, h in rooms)}}'
    )

    def build(replies: list[str]) -> CodeActAgent:
        return CodeActAgent(
            name="a",
            model=ScriptedModel(replies),
            runtime=runtime(),
            tools=[FunctionTool(send, requires_confirmation=True)],
            persist_namespace=True,
        )

    db = tmp_path / "sessions.db"
    with SqliteSessionService(db) as service:
        events = await run_agent(build([TURN_1, turn_2]), service, "send the rooms")
        (key,) = events[-1].actions.requested_tool_confirmations
    assert sent == []
    with SqliteSessionService(db) as service:  # a fresh store and a fresh agent: nothing in memory
        events = await run_agent(build([turn_3]), service, None, RunConfig(tool_confirmation_decisions={key: True}))
    assert sent == [{"to": "ops", "body": "[[3, 4], [2, 5]]"}]
    assert events[-1].error_code is None, events[-1]
    assert '"receipt": "sent #1"' in events[-1].text and '"total": 22' in events[-1].text


CLOSURE_TURN = fence(
    "def counter():\n"
    "    n = 0\n"
    "    def bump():\n"
    "        nonlocal n\n"
    "        n += 1\n"
    "        return n\n"
    "    return bump\n"
    "bump = counter()\n"
    "square = lambda x: x * x\n"
    "it = iter([10, 20, 30])\n"
    "first = next(it)\n"
    '{"type": "observation", "value": [bump(), first]}'
)


async def test_a_closure_lambda_and_iterator_from_turn_one_are_used_in_turn_two() -> None:
    turn_2 = fence('{"type": "final_result", "value": [bump(), square(4), next(it)]}')
    model = ScriptedModel([CLOSURE_TURN, turn_2])
    agent = CodeActAgent(name="a", model=model, runtime=session_runtime(), persist_namespace=True)
    events = await run_agent(agent, InMemorySessionService(), "count")
    assert events[-1].error_code is None, events[-1]
    assert json.loads(events[-1].text) == [2, 16, 20]
    assert "Observation:\n[1,10]" in "\n".join(c.text for c in model.requests[1].contents)


class Crash(BaseException):
    pass


class CrashAfterIntent(SqliteSessionService):
    armed = True

    async def append_journal(self, session, turn, records, **kwargs):  # type: ignore[no-untyped-def]
        await super().append_journal(session, turn, records, **kwargs)
        if self.armed and any(r.kind == "intent" for r in records):
            self.armed = False
            raise Crash


async def test_the_session_namespace_survives_a_crash_and_a_new_runner_over_the_sqlite_file(tmp_path: Path) -> None:
    sent: list[int] = []

    def send(n: int) -> str:
        """Sends a number.

        Args:
            n: the number.
        """
        sent.append(n)
        return f"sent {n}"

    turn_2 = fence('r = call_tool("send", {"n": bump() * 100})\n{"type": "observation", "value": r}')
    turn_3 = fence('{"type": "final_result", "value": [r, bump(), next(it)]}')

    def build(replies: list[str]) -> CodeActAgent:
        return CodeActAgent(
            name="a", model=ScriptedModel(replies), runtime=session_runtime(), tools=[send], persist_namespace=True
        )

    db = tmp_path / "sessions.db"
    with CrashAfterIntent(db) as service, warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        with pytest.raises(Crash):
            await run_agent(build([CLOSURE_TURN, turn_2]), service, "go")
        gc.collect()
    assert sent == []
    # a new process: a fresh store over the same file and a fresh agent; turn 2 is replayed from the
    # idle session it started from (stored in its turn record), so bump() gives 2 again, not 3
    with SqliteSessionService(db) as service:
        events = await run_agent(build([turn_3]), service, None)
    assert events[-1].error_code is None, events[-1]
    assert sent == [200]
    assert json.loads(events[-1].text) == ["sent 200", 3, 20]


async def test_a_confirmation_paused_turn_resumes_after_restart_with_the_whole_namespace(tmp_path: Path) -> None:
    sent: list[int] = []

    def send(n: int) -> str:
        """Sends a number.

        Args:
            n: the number.
        """
        sent.append(n)
        return f"sent {n}"

    turn_2 = fence(
        'r = call_tool("send", {"n": bump()})\nlate = square(r == "sent 2" and 5)\n{"type": "observation", "value": r}'
    )
    turn_3 = fence('{"type": "final_result", "value": [r, late, bump(), next(it)]}')

    def build(replies: list[str]) -> CodeActAgent:
        return CodeActAgent(
            name="a",
            model=ScriptedModel(replies),
            runtime=session_runtime(),
            tools=[FunctionTool(send, requires_confirmation=True)],
            persist_namespace=True,
        )

    db = tmp_path / "sessions.db"
    with SqliteSessionService(db) as service:
        events = await run_agent(build([CLOSURE_TURN, turn_2]), service, "go")
        (key,) = events[-1].actions.requested_tool_confirmations
    assert sent == []
    with SqliteSessionService(db) as service:
        events = await run_agent(build([turn_3]), service, None, RunConfig(tool_confirmation_decisions={key: True}))
    assert events[-1].error_code is None, events[-1]
    assert sent == [2]
    assert json.loads(events[-1].text) == ["sent 2", 25, 3, 20]


@pytest.mark.parametrize(
    "gather_call",
    [
        "xs = await asyncio.gather(",
        "from asyncio import gather as g\nxs = await g(",
        "gg = asyncio.gather\nxs = await gg(",
    ],
    ids=["asyncio.gather", "imported-as", "assigned"],
)
async def test_a_gather_runs_in_the_session_and_its_results_carry_to_the_next_turn(gather_call: str) -> None:
    """While variables persist, ``asyncio.gather`` over tool calls runs them concurrently
    (both tools wait on each other), with what earlier turns defined (a coroutine, a value),
    and what the gathering turn assigns reaches the next turn."""
    started = {1: anyio.Event(), 20: anyio.Event()}
    calls: list[int] = []

    async def double(n: int) -> int:
        """Doubles a number once the other call has started too."""
        calls.append(n)
        started[n].set()
        await started[20 if n == 1 else 1].wait()
        return 2 * n

    turn_1 = fence(
        "import asyncio\n"
        "base = 10\n"
        "async def twice(n):\n"
        '    return await call_tool("double", {"n": n})\n'
        '{"type": "observation", "value": base}'
    )
    turn_2 = fence(
        gather_call + 'call_tool("double", {"n": 1}), twice(base * 2))\ntotal = sum(xs)\n'
        '{"type": "observation", "value": xs}'
    )
    turn_3 = fence('{"type": "final_result", "value": [xs, total, base]}')
    model = ScriptedModel([turn_1, turn_2, turn_3])
    agent = CodeActAgent(
        name="a", model=model, runtime=session_runtime(), tools=[FunctionTool(double)], persist_namespace=True
    )
    with anyio.fail_after(20):  # one call after the other would wait forever
        events = await run_agent(agent, InMemorySessionService(), "double 1 and 20")
    assert events[-1].error_code is None, events[-1]
    assert json.loads(events[-1].text) == [[2, 40], 42, 10]
    assert sorted(calls) == [1, 20]
    assert "Observation:\n[2,40]" in "\n".join(c.text for c in model.requests[2].contents)


async def test_a_gather_of_gated_calls_in_a_session_is_approved_call_by_call_after_restarts(tmp_path: Path) -> None:
    """Two confirmation-gated calls of one gather inside a session: each is approved on its
    own by a fresh runner over the SQLite file, each tool runs once, and the namespace from
    before the gather (and what the gathering script assigned) reaches the next turn."""
    sent: list[int] = []

    def send(n: int) -> str:
        """Sends a number.

        Args:
            n: the number.
        """
        sent.append(n)
        return f"sent {n}"

    turn_2 = fence(
        "import asyncio\n"
        'rs = await asyncio.gather(call_tool("send", {"n": bump()}), call_tool("send", {"n": square(3)}))\n'
        '{"type": "observation", "value": rs}'
    )
    turn_3 = fence('{"type": "final_result", "value": [rs, bump(), next(it)]}')

    def build(replies: list[str]) -> CodeActAgent:
        return CodeActAgent(
            name="a",
            model=ScriptedModel(replies),
            runtime=session_runtime(),
            tools=[FunctionTool(send, requires_confirmation=True)],
            persist_namespace=True,
        )

    db = tmp_path / "sessions.db"
    with SqliteSessionService(db) as service:
        events = await run_agent(build([CLOSURE_TURN, turn_2]), service, "go")
        first, second = sorted(events[-1].actions.requested_tool_confirmations)
        slot = await service.load_turn(app_name="app", user_id="u", session_id="s")
        assert slot.data["gather"] is True and "session" in slot.data["namespace"]
    assert sent == []
    runner_of = lambda service, replies: Runner(  # noqa: E731
        app_name="app", agent=build(replies), session_service=service
    )
    with SqliteSessionService(db) as service:
        runner = runner_of(service, [])
        pending = await runner.pending(user_id="u", session_id="s")
        assert [(p.call_key, p.args) for p in pending] == [(first, {"n": 2}), (second, {"n": 9})]
        [e async for e in runner.approve(user_id="u", session_id="s", call_key=second)]
        assert sent == [9]
        assert [p.call_key for p in await runner.pending(user_id="u", session_id="s")] == [first]
    with SqliteSessionService(db) as service:
        runner = runner_of(service, [turn_3])
        events = [e async for e in runner.approve(user_id="u", session_id="s", call_key=first)]
        assert await runner.pending(user_id="u", session_id="s") == []
    assert sent == [9, 2]  # each ran once
    assert events[-1].error_code is None, events[-1]
    assert json.loads(events[-1].text) == [["sent 2", "sent 9"], 3, 20]


class CrashAfterFirstOutcome(SqliteSessionService):
    outcomes = 0

    async def append_journal(self, session, turn, records, **kwargs):  # type: ignore[no-untyped-def]
        await super().append_journal(session, turn, records, **kwargs)
        self.outcomes += sum(r.kind == "outcome" for r in records)
        if self.outcomes == 1:
            raise Crash


async def test_a_crash_inside_a_session_gather_reruns_only_the_call_without_a_stored_outcome(tmp_path: Path) -> None:
    """The process dies just after the first outcome of a gather inside a session is stored:
    the recovery feeds the script again to the idle session the turn started from, answers
    the stored call from the journal and runs only the other one again."""
    ran: list[str] = []
    done = anyio.Event()

    async def fast(text: str) -> str:
        """Returns at once."""
        ran.append(f"fast {text}")
        return f"fast {text}"

    async def slow(text: str) -> str:
        """Returns once the fast call has returned."""
        ran.append(f"slow {text}")
        with anyio.fail_after(10):
            await done.wait()
        return f"slow {text}"

    turn_2 = fence(
        "import asyncio\n"
        'rs = await asyncio.gather(call_tool("fast", {"text": str(bump())}), call_tool("slow", {"text": "b"}))\n'
        '{"type": "final_result", "value": [rs, bump(), next(it)]}'
    )

    def build(replies: list[str]) -> CodeActAgent:
        return CodeActAgent(
            name="a",
            model=ScriptedModel(replies),
            runtime=session_runtime(),
            tools=[fast, slow],
            persist_namespace=True,
        )

    db = tmp_path / "sessions.db"
    with CrashAfterFirstOutcome(db) as service, warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        with pytest.raises(BaseException) as raised:
            await run_agent(build([CLOSURE_TURN, turn_2]), service, "go")
        assert _contains(raised.value, Crash), raised.value
        gc.collect()
    assert sorted(ran) == ["fast 2", "slow b"]
    done.set()
    with SqliteSessionService(db) as service:
        slot = await service.load_turn(app_name="app", user_id="u", session_id="s")
        assert slot is not None and "session" in slot.data["namespace"]
        events = await run_agent(build([]), service, None)
    assert events[-1].error_code is None, events[-1]
    assert sorted(ran) == ["fast 2", "slow b", "slow b"]  # the stored outcome never runs again
    # the replay started from the turn's starting session: bump() gives 2 again, then 3
    assert json.loads(events[-1].text) == [["fast 2", "slow b"], 3, 20]


def _contains(exc: BaseException, kind: type[BaseException]) -> bool:
    """``exc`` is ``kind`` or an exception group holding one (task groups wrap what they raise)."""
    if isinstance(exc, kind):
        return True
    return any(_contains(e, kind) for e in getattr(exc, "exceptions", ()))
