"""Eager start (issue 52, SPEC §4 "Streaming and eager start", docs/events.md "Eager start"):
with ``RunConfig(eager=True)`` complete top-level statements of the streamed reply's first
fence run while the model is still writing, and only calls to read-only tools that need no
decision run before the reply is stored. The stored script then runs from its start, its
early calls answered from what they returned; when the stored reply differs from what
streamed, what ran early is thrown away and only read-only tools can have run (again).

Real parts: the Monty interpreter, the runner, SQLite stores; the models stream on a clock.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_helpers import APP, SESSION, USER
from codeact import (
    CodeActAgent,
    FunctionTool,
    InMemorySessionService,
    MontyRuntime,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.agent._eager import begins_with, complete_statements
from codeact.events import Content
from codeact.models import LlmRequest, LlmResponse, ModelError

pytestmark = pytest.mark.anyio


class Ledger:
    """What the tools did, with monotonic timestamps: ``(tool, arg, start)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float]] = []

    def names(self, tool: str) -> list[str]:
        return [arg for name, arg, _ in self.calls if name == tool]

    def tools(self) -> list[FunctionTool]:
        ledger = self

        async def lookup(key: str) -> str:
            """Looks ``key`` up (read-only, 50 ms)."""
            ledger.calls.append(("lookup", key, time.monotonic()))
            await anyio.sleep(0.05)
            return key.upper()

        async def write(value: str) -> str:
            """Writes ``value`` somewhere (an effect)."""
            ledger.calls.append(("write", value, time.monotonic()))
            return "written"

        def peek(key: str) -> str:
            """Reads ``key`` (read-only, but gated by the agent)."""
            ledger.calls.append(("peek", key, time.monotonic()))
            return key

        return [FunctionTool(lookup, read_only=True), FunctionTool(write), FunctionTool(peek, read_only=True)]


SCRIPT = (
    'a = call_tool("lookup", {"key": "a"})\n'
    'b = call_tool("lookup", {"key": "b"})\n'
    + "".join(f"pad_{i} = {i} * {i}\n" for i in range(12))
    + 'w = call_tool("write", {"value": a + b})\n'
    '{"type": "final_result", "value": a + b + ":" + w}\n'
)
REPLY = f"Looking both up, then writing.\n```python\n{SCRIPT}```\nThat is all."


class Timed(ScriptedModel):
    """A scripted streaming model that records when its stream ended."""

    ended: float | None = None

    async def generate_content_stream(self, request: LlmRequest) -> AsyncIterator[LlmResponse]:
        async for item in super().generate_content_stream(request):
            if not item.partial:
                self.ended = time.monotonic()
            yield item


class Revising(ScriptedModel):
    """Streams ``streamed`` and then gives ``stored`` as the complete reply (a provider whose
    final message differs from its deltas)."""

    def __init__(self, streamed: str, stored: str) -> None:
        super().__init__([stored], time_to_first_token=0.0, tokens_per_second=400, chars_per_token=4)
        self.streamed = streamed

    async def generate_content_stream(self, request: LlmRequest) -> AsyncIterator[LlmResponse]:
        await self._next_response(request)
        for i in range(0, len(self.streamed), 4):
            await anyio.sleep(1 / 400)
            yield LlmResponse(content=Content.from_text(self.streamed[i : i + 4], role="model"), partial=True)
        yield LlmResponse(content=Content.from_text(self._replies[0], role="model"))  # type: ignore[arg-type]


class CutOff(ScriptedModel):
    """Streams ``text`` slowly and breaks off with a model error before the reply ends."""

    def __init__(self, text: str) -> None:
        super().__init__(["unused"])
        self.text = text

    async def generate_content_stream(self, request: LlmRequest) -> AsyncIterator[LlmResponse]:
        for i in range(0, len(self.text), 4):
            await anyio.sleep(1 / 200)
            yield LlmResponse(content=Content.from_text(self.text[i : i + 4], role="model"), partial=True)
        await anyio.sleep(0.2)  # the early lookups end meanwhile
        raise ModelError("the model failed mid-reply", model="cut")


async def run_agent(model: Any, ledger: Ledger, *, service: Any = None, **options: Any) -> tuple[list[Any], Any]:
    agent = CodeActAgent(name="eager", model=model, runtime=MontyRuntime(), tools=ledger.tools(), **options)
    service = service or InMemorySessionService()
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    events = [
        e
        async for e in runner.run_async(
            user_id=USER, session_id=SESSION, new_message="go", run_config=RunConfig(eager=True)
        )
    ]
    return events, service


async def stored(service: Any) -> list[Any]:
    session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    return list(session.events)


def final_text(events: list[Any]) -> str:
    return [e for e in events if e.is_final_response()][-1].text


# ---------------------------------------------------------------------- statements of a stream


def test_a_statement_is_complete_once_no_line_can_continue_it() -> None:
    head = "Prose first.\n```python\n"
    assert complete_statements("Prose, no fence yet") is None
    assert complete_statements(head + "a = f(1)") == ("", False)  # its line has not ended
    assert complete_statements(head + "a = f(1)\n") == ("a = f(1)\n", False)  # a simple statement
    assert complete_statements(head + "a = f(1)\nb = g(") == ("a = f(1)\n", False)
    assert complete_statements(head + "x = (1,\n2)\ny = 3\n") == ("x = (1,\n2)\ny = 3\n", False)
    assert complete_statements(head + "x = (1,\n") == ("", False)
    assert complete_statements(head + 's = """\nz = 1\n') == ("", False)  # inside a string
    assert complete_statements(head + "@dec\n") == ("", False)
    # a compound statement is complete once the next top-level statement begins
    assert complete_statements(head + "for x in y:\n    f(x)\n") == ("", False)  # the loop may go on
    assert complete_statements(head + "a = 1\nfor x in y:\n    f(x)\n") == ("a = 1\n", False)
    assert complete_statements(head + "for x in y:\n    f(x)\nz = 1\n") == ("for x in y:\n    f(x)\nz = 1\n", False)
    assert complete_statements(head + "if a:\n    f()\nelse:\n    g()\n") == ("", False)  # else continues
    loop = "for x in y:\n    f(x)\n"
    assert complete_statements(head + loop + "while t:\n    g()\n") == (loop, False)
    assert complete_statements(head + "a = f(1)\n{'type': 'final_result', 'value': a}\n```") == (
        "a = f(1)\n{'type': 'final_result', 'value': a}\n",
        True,
    )


def test_thinking_and_other_languages_never_run() -> None:
    assert complete_statements("<think>```python\na = f(1)\nb = 2\n") is None  # an open think block
    assert complete_statements("<think>hm</think>\n```python\na = f(1)\nb = 2") == ("a = f(1)\n", False)
    assert complete_statements("```bash\nls\nrm -rf x\n") is None


def test_begins_with_needs_the_same_statements_at_a_statement_end() -> None:
    assert begins_with("a = f(1)\nb = 2\n", "a = f(1)\n")
    assert not begins_with("a = f(2)\nb = 2\n", "a = f(1)\n")  # an edited line
    assert not begins_with("a = f(1) + \\\n  3\n", "a = f(1) + \\\n")  # no statement ends there
    assert begins_with("anything", "")


# ---------------------------------------------------------------------- the durability rule


async def test_read_only_calls_start_before_the_stream_ends_and_effects_after_the_reply_is_stored() -> None:
    ledger = Ledger()
    model = Timed([REPLY], time_to_first_token=0.1, tokens_per_second=60, chars_per_token=4)
    events, service = await run_agent(model, ledger)
    assert final_text(events) == "AB:written"
    assert model.ended is not None
    starts = {(name, arg): at for name, arg, at in ledger.calls}
    assert ledger.names("lookup") == ["a", "b"]  # each ran once: the script's run was answered
    assert starts["lookup", "a"] < model.ended - 0.2 and starts["lookup", "b"] < model.ended - 0.2
    assert ledger.names("write") == ["AB"] and starts["write", "AB"] > model.ended
    kinds = [e.kind for e in await stored(service)]
    assert kinds.index("model_reply") < kinds.index("script_result")


async def test_eager_without_streaming_yields_no_partial_event_and_streaming_with_it_does() -> None:
    ledger = Ledger()
    model = ScriptedModel([REPLY], time_to_first_token=0.0, tokens_per_second=400, chars_per_token=4)
    events, _ = await run_agent(model, ledger)
    assert not any(e.partial for e in events)
    assert final_text(events) == "AB:written" and ledger.names("lookup") == ["a", "b"]


async def test_a_stream_cut_off_mid_reply_leaves_nothing_with_effects_run(tmp_path: Path) -> None:
    ledger = Ledger()
    cut = REPLY[: REPLY.index("w = call_tool")] + 'w = call_tool("write", {"value": a + b})\n{"ty'
    service = SqliteSessionService(str(tmp_path / "s.db"))
    with pytest.raises(ModelError, match="mid-reply"):
        await run_agent(CutOff(cut), ledger, service=service)
    assert ledger.names("write") == []
    assert ledger.names("lookup") == ["a", "b"]  # read-only calls may have run early
    assert [e.author for e in await stored(service)] == ["user"]


async def test_a_confirmation_gated_call_in_the_prefix_pauses_only_after_the_reply_is_stored(
    tmp_path: Path,
) -> None:
    ledger = Ledger()
    script = 'p = call_tool("peek", {"key": "k"})\nq = call_tool("lookup", {"key": "q"})\n' + "x = 1\n" * 10
    reply = f"```python\n{script}" + '{"type": "final_result", "value": p + q}\n```'
    model = Timed([reply], time_to_first_token=0.0, tokens_per_second=200, chars_per_token=4)
    service = SqliteSessionService(str(tmp_path / "s.db"))
    events, _ = await run_agent(model, ledger, service=service, require_tool_confirmation=["peek"])
    assert ledger.calls == []  # nothing ran: the gated call comes first, and nothing after it ran early
    last = events[-1]
    assert [c.tool_name for c in last.actions.requested_tool_confirmations.values()] == ["peek"]
    kinds = [e.kind for e in await stored(service)]
    assert kinds.index("model_reply") < len(kinds) - 1  # the reply is stored before the pause


async def test_a_call_with_effects_in_the_prefix_stops_the_early_run_there() -> None:
    ledger = Ledger()
    script = (
        'w = call_tool("write", {"value": "first"})\n'
        'a = call_tool("lookup", {"key": "a"})\n' + "x = 1\n" * 10 + '{"type": "final_result", "value": a + w}\n'
    )
    model = Timed([f"```python\n{script}```"], time_to_first_token=0.0, tokens_per_second=100, chars_per_token=4)
    events, _ = await run_agent(model, ledger)
    assert final_text(events) == "Awritten"
    assert model.ended is not None
    assert [(name, arg) for name, arg, _ in ledger.calls] == [("write", "first"), ("lookup", "a")]
    assert all(at > model.ended for _, _, at in ledger.calls)  # the lookup after the write waited too


# ---------------------------------------------------------------------- discard, never double


async def test_a_second_fence_runs_after_the_first_and_nothing_runs_twice() -> None:
    ledger = Ledger()
    second = '```python\nc = call_tool("lookup", {"key": "c"})\nw2 = call_tool("write", {"value": c})\n```'
    first = REPLY.replace('{"type": "final_result", "value": a + b + ":" + w}\n', "")
    reply = first + "\nAnd more:\n" + second + '\n```python\n{"type": "final_result", "value": a + b + c}\n```'
    model = ScriptedModel([reply], time_to_first_token=0.0, tokens_per_second=200, chars_per_token=4)
    events, _ = await run_agent(model, ledger)
    assert final_text(events) == "ABC"
    assert ledger.names("write") == ["AB", "C"]  # each effect once
    assert ledger.names("lookup") == ["a", "b", "c"]  # the early ones answered the script's run


async def test_a_think_block_closing_after_the_fence_discards_the_early_run() -> None:
    ledger = Ledger()
    thought = '```python\na = call_tool("lookup", {"key": "thought"})\nx = 1\n```\nNo, better:\n</think>\n'
    reply = thought + REPLY  # a stray close tag: everything before it was thinking
    model = ScriptedModel([reply], time_to_first_token=0.0, tokens_per_second=200, chars_per_token=4)
    events, _ = await run_agent(model, ledger)
    assert final_text(events) == "AB:written"
    assert ledger.names("lookup") == ["thought", "a", "b"]  # only a read-only call ran early, and it was dropped
    assert ledger.names("write") == ["AB"]


async def test_an_edited_statement_in_the_stored_reply_runs_the_script_from_its_start() -> None:
    ledger = Ledger()
    edited = REPLY.replace('{"key": "b"}', '{"key": "B2"}')
    events, _ = await run_agent(Revising(REPLY, edited), ledger)
    assert final_text(events) == "AB2:written"
    # the early lookups were thrown away: the stored script ran them again, its own way
    assert ledger.names("lookup") == ["a", "b", "a", "B2"]
    assert ledger.names("write") == ["AB2"]


async def test_an_after_model_callback_that_rewrites_the_reply_discards_the_early_run() -> None:
    ledger = Ledger()

    def rewrite(ctx: Any, response: LlmResponse) -> LlmResponse:
        return LlmResponse(content=Content.from_text(response.text.replace("That is all.", "Done."), role="model"))

    model = ScriptedModel([REPLY], time_to_first_token=0.0, tokens_per_second=200, chars_per_token=4)
    events, _ = await run_agent(model, ledger, after_model=rewrite)
    assert final_text(events) == "AB:written"
    assert ledger.names("lookup") == ["a", "b", "a", "b"]  # what ran early is never reused
    assert ledger.names("write") == ["AB"]


async def test_early_calls_pass_before_tool_like_any_call() -> None:
    ledger = Ledger()
    seen: list[tuple[str, float]] = []

    def before(tool: Any, args: dict[str, Any], ctx: Any) -> None:
        seen.append((tool.name, time.monotonic()))

    model = Timed([REPLY], time_to_first_token=0.0, tokens_per_second=100, chars_per_token=4)
    events, _ = await run_agent(model, ledger, before_tool=before)
    assert final_text(events) == "AB:written"
    assert [name for name, _ in seen] == ["lookup", "lookup", "write"]  # once per call
    assert model.ended is not None and seen[0][1] < model.ended


# ---------------------------------------------------------------------- kill -9 during an eager run

KILL_CHILD = textwrap.dedent(
    '''
    import json, os, signal, sys
    from pathlib import Path
    from codeact import CodeActAgent, FunctionTool, MontyRuntime, RunConfig, Runner, ScriptedModel
    from codeact import SqliteSessionService

    db, ledger, kill = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

    def note(line):
        with ledger.open("a") as f:
            f.write(line + "\\n")
            f.flush()
            os.fsync(f.fileno())
        if line == kill:
            os.kill(os.getpid(), signal.SIGKILL)

    def lookup(key: str) -> str:
        """Looks key up."""
        note("lookup:" + key)
        return key.upper()

    def charge(item: str) -> str:
        """Charges item (an effect)."""
        note("charge:" + item)
        return "charged " + item

    SCRIPT = ('a = call_tool("lookup", {"key": "a"})\\nb = call_tool("lookup", {"key": "b"})\\n'
              + "pad = 1\\n" * 12 + 'c = call_tool("charge", {"item": a + b})\\n'
              '{"type": "final_result", "value": c}\\n')
    REPLY = "Two lookups, then a charge.\\n```python\\n" + SCRIPT + "```\\nDone."

    with SqliteSessionService(db) as service:
        import asyncio
        async def main():
            s = await service.get_session(app_name="app", user_id="u", session_id="s")
            message = "go"
            if s is None:
                await service.create_session(app_name="app", user_id="u", session_id="s")
            elif await service.load_turn(app_name="app", user_id="u", session_id="s") is not None:
                message = None  # recover the turn in flight
            model = ScriptedModel([REPLY] * 3, time_to_first_token=0.0, tokens_per_second=150, chars_per_token=4)
            tools = [FunctionTool(lookup, read_only=True), FunctionTool(charge)]
            agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=tools)
            runner = Runner(app_name="app", agent=agent, session_service=service)
            config = RunConfig(eager=True)
            async for e in runner.run_async(user_id="u", session_id="s", new_message=message, run_config=config):
                pass
            s = await service.get_session(app_name="app", user_id="u", session_id="s")
            slot = await service.load_turn(app_name="app", user_id="u", session_id="s")
            print(json.dumps({"final": s.events[-1].text, "pending": slot is not None}))
        asyncio.run(main())
    '''
)


def kill_child(tmp: Path, kill: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", KILL_CHILD, str(tmp / "s.db"), str(tmp / "ledger"), kill],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("kill", "expected"),
    [
        # killed in an early lookup, while the reply streams: nothing stored but the message;
        # the restart runs the message again, and the charge runs once
        ("lookup:b", ["lookup:a", "lookup:b", "lookup:a", "lookup:b", "charge:AB"]),
        # killed after the charge's effect, before its outcome: the turn is recovered like any
        # run (the charge is in its at-least-once window); the early lookups' outcomes were
        # made durable with the charge's intent, so they do not run again
        ("charge:AB", ["lookup:a", "lookup:b", "charge:AB", "charge:AB"]),
    ],
)
def test_kill_9_during_an_eager_run_recovers_like_any_run(tmp_path: Path, kill: str, expected: list[str]) -> None:
    first = kill_child(tmp_path, kill)
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    again = kill_child(tmp_path, "none")
    assert again.returncode == 0, again.stderr[-3000:]
    state = json.loads(again.stdout.strip().splitlines()[-1])
    assert state == {"final": "charged AB", "pending": False}
    assert (tmp_path / "ledger").read_text().split() == expected


async def test_what_the_early_run_prints_is_never_shown_or_stored() -> None:
    ledger = Ledger()
    script = 'print("hello")\na = call_tool("lookup", {"key": "a"})\n' + "x = 1\n" * 8
    reply = f"```python\n{script}" + '{"type": "final_result", "value": a}\n```'
    model = ScriptedModel([reply], time_to_first_token=0.0, tokens_per_second=100, chars_per_token=4)
    agent = CodeActAgent(name="eager", model=model, runtime=MontyRuntime(), tools=ledger.tools())
    service = InMemorySessionService()
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    config = RunConfig(eager=True, streaming=True)
    events = [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message="go", run_config=config)]
    shown = "".join(e.text for e in events if e.partial and e.kind == "script_output")
    assert shown.count("hello") <= 1  # the stored script's print only (it may be in script_result alone)
    assert any(e.partial and e.kind == "model_reply" for e in events)
    results = [e for e in await stored(service) if e.kind == "script_result"]
    assert sum(e.text.count("hello") for e in results) <= 1
    assert final_text(events) == "A" and ledger.names("lookup") == ["a"]
