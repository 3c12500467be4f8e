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

    async def append_journal(self, session, turn, records):  # type: ignore[no-untyped-def]
        await super().append_journal(session, turn, records)
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
        "import asyncio\nxs = await asyncio.gather(",
        "from asyncio import gather as g\nxs = await g(",
        "import asyncio\ngg = asyncio.gather\nxs = await gg(",
    ],
    ids=["asyncio.gather", "imported-as", "assigned"],
)
async def test_gather_is_refused_before_it_runs_while_variables_persist(gather_call: str) -> None:
    """A namespace session awaits one call at a time: a gather is refused before any tool
    runs, with what to write instead; awaiting the calls one by one works."""
    calls: list[int] = []

    def double(n: int) -> int:
        calls.append(n)
        return 2 * n

    gather = fence(
        gather_call + 'call_tool("double", {"n": 1}), call_tool("double", {"n": 2}))\n'
        '{"type": "observation", "value": xs}'
    )
    one_by_one = fence(
        'a = await call_tool("double", {"n": 1})\nb = await call_tool("double", {"n": 2})\n'
        '{"type": "final_result", "value": [a, b]}'
    )
    agent = CodeActAgent(
        name="a",
        model=ScriptedModel([gather, one_by_one]),
        runtime=session_runtime(),
        tools=[FunctionTool(double)],
        persist_namespace=True,
    )
    events = await run_agent(agent, InMemorySessionService(), "double 1 and 2")
    feedback = [e.text for e in events if e.text and "cannot run concurrently" in e.text]
    assert feedback, [e.text for e in events]
    assert events[-1].error_code is None, events[-1]
    assert json.loads(events[-1].text) == [2, 4]
    assert calls == [1, 2]
