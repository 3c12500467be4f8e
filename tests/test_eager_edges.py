"""Eager start at its edges (issue 52): what a read-only tool's early run leaves behind, tools
that fail or are slow when the stream ends, outcomes that would differ on a second run, limits
and options that switch parts of it off. Every test holds the invariant: nothing with effects
runs before the reply is stored, nothing runs twice except read-only tools, and what the
early run printed never appears.

Real parts: the Monty interpreter, the runner, in-memory and SQLite stores; the models stream
on a clock.
"""

from __future__ import annotations

import gc
import json
import time
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
    ToolContext,
)
from codeact.events import Content
from codeact.models import LlmResponse, ModelError

pytestmark = pytest.mark.anyio

PAD = "".join(f"pad_{i} = {i} * {i}\n" for i in range(12))


def fenced(script: str, after: str = "That is all.") -> str:
    return f"Looking it up.\n```python\n{script}```\n{after}"


def model_for(reply: str) -> ScriptedModel:
    return ScriptedModel([reply], time_to_first_token=0.0, tokens_per_second=100, chars_per_token=4)


async def run_eager(model: Any, tools: list[Any], *, service: Any = None, **options: Any) -> tuple[list[Any], Any]:
    agent = CodeActAgent(name="eager", model=model, runtime=MontyRuntime(), tools=tools, **options)
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


async def session_of(service: Any) -> Any:
    return await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)


def final_text(events: list[Any]) -> str:
    return [e for e in events if e.is_final_response()][-1].text


async def test_a_discarded_early_call_leaves_no_state_delta_behind() -> None:
    """A read-only tool that sets session state through its context ran early; the stored
    reply (rewritten by ``after_model``) no longer calls it: its state change must not be
    stored, neither on the model's reply event nor later."""
    calls: list[str] = []

    def note(key: str, tool_context: ToolContext) -> str:
        """Reads ``key`` and remembers it in the session state."""
        calls.append(key)
        tool_context.state["noted"] = key
        return key.upper()

    script = 'a = call_tool("note", {"key": "early"})\n' + PAD + '{"type": "final_result", "value": a}\n'
    plain = '```python\n{"type": "final_result", "value": "plain"}\n```'

    def rewrite(ctx: Any, response: LlmResponse) -> LlmResponse:
        return LlmResponse(content=Content.from_text(plain, role="model"))

    events, service = await run_eager(
        model_for(fenced(script)), [FunctionTool(note, read_only=True)], after_model=rewrite
    )
    assert final_text(events) == "plain"
    assert calls == ["early"]  # it did run early (read-only: allowed)
    session = await session_of(service)
    assert "noted" not in session.state
    assert all("noted" not in e.actions.state_delta for e in session.events)


async def test_a_kept_state_change_is_stored_once_after_the_reply() -> None:
    """The same tool kept (the reply unchanged): the change is stored, never on the model's
    reply event (that event is the reply, written before the script's outcomes)."""
    calls: list[str] = []

    def note(key: str, tool_context: ToolContext) -> str:
        """Reads ``key`` and remembers it in the session state."""
        calls.append(key)
        tool_context.state["noted"] = key
        return key.upper()

    script = 'a = call_tool("note", {"key": "k"})\n' + PAD + '{"type": "final_result", "value": a}\n'
    events, service = await run_eager(model_for(fenced(script)), [FunctionTool(note, read_only=True)])
    assert final_text(events) == "K"
    session = await session_of(service)
    assert session.state.get("noted") == "k"
    replies = [e for e in session.events if e.kind == "model_reply"]
    assert replies and all("noted" not in e.actions.state_delta for e in replies)


async def test_a_discarded_early_escalation_does_not_end_the_run() -> None:
    """A read-only tool that escalates ran early in a script the stored reply no longer has."""

    def stop(tool_context: ToolContext) -> str:
        """Asks to stop."""
        tool_context.actions.escalate = True
        return "stopped"

    script = 'a = call_tool("stop", {})\n' + PAD + '{"type": "final_result", "value": a}\n'
    plain = '```python\n{"type": "final_result", "value": "plain"}\n```'

    def rewrite(ctx: Any, response: LlmResponse) -> LlmResponse:
        return LlmResponse(content=Content.from_text(plain, role="model"))

    events, service = await run_eager(
        model_for(fenced(script)), [FunctionTool(stop, read_only=True)], after_model=rewrite
    )
    assert final_text(events) == "plain"
    session = await session_of(service)
    assert not any(e.actions.escalate for e in session.events)


async def test_an_early_failure_is_served_once_and_not_run_again() -> None:
    calls: list[str] = []

    def flaky(key: str) -> str:
        """Fails the first time."""
        calls.append(key)
        if len(calls) == 1:
            raise LookupError(f"no {key}")
        return key

    script = (
        "try:\n"
        '    a = call_tool("flaky", {"key": "x"})\n'
        "except Exception as e:\n"
        '    a = "failed: " + str(e)\n' + PAD + '{"type": "final_result", "value": a}\n'
    )
    events, _ = await run_eager(model_for(fenced(script)), [FunctionTool(flaky, read_only=True)])
    assert calls == ["x"]
    assert final_text(events).startswith("failed:") and "no x" in final_text(events)


async def test_the_final_run_uses_each_early_outcome_once_in_order() -> None:
    """A counter (read-only, but it answers differently each time): the same call twice gets
    the two early answers, in order, and the tool ran twice in all."""
    count = [0]

    def tick(name: str) -> int:
        """Counts."""
        count[0] += 1
        return count[0]

    script = (
        'a = call_tool("tick", {"name": "n"})\n'
        'b = call_tool("tick", {"name": "n"})\n' + PAD + '{"type": "final_result", "value": [a, b]}\n'
    )
    events, _ = await run_eager(model_for(fenced(script)), [FunctionTool(tick, read_only=True)])
    assert json.loads(final_text(events)) == [1, 2]
    assert count == [2]


async def test_a_slow_read_only_call_when_the_stream_ends_runs_once() -> None:
    calls: list[float] = []
    effects: list[float] = []

    async def slow(key: str) -> str:
        """Takes a while."""
        calls.append(time.monotonic())
        await anyio.sleep(0.4)
        return key

    def write(value: str) -> str:
        """An effect."""
        effects.append(time.monotonic())
        return "w"

    script = (
        'a = call_tool("slow", {"key": "s"})\n'
        'w = call_tool("write", {"value": a})\n{"type": "final_result", "value": a + w}\n'
    )
    model = ScriptedModel([fenced(script)], time_to_first_token=0.0, tokens_per_second=400, chars_per_token=4)
    events, _ = await run_eager(model, [FunctionTool(slow, read_only=True), FunctionTool(write)])
    assert final_text(events) == "sw"
    assert len(calls) == 1 and len(effects) == 1


async def test_max_tool_calls_counts_the_served_calls_as_any_call() -> None:
    seen: list[str] = []

    def look(key: str) -> str:
        """Looks up."""
        seen.append(key)
        return key

    script = "".join(f'v{i} = call_tool("look", {{"key": "{i}"}})\n' for i in range(3)) + PAD
    script += '{"type": "final_result", "value": v0 + v1 + v2}\n'
    follow = '```python\n{"type": "final_result", "value": "gave up"}\n```'
    model = ScriptedModel([fenced(script), follow], time_to_first_token=0.0, tokens_per_second=100, chars_per_token=4)
    events, _ = await run_eager(model, [FunctionTool(look, read_only=True)], max_tool_calls=2)
    assert seen == ["0", "1"]  # the third call is past the limit, early or not
    assert final_text(events) == "gave up"


async def test_persist_namespace_runs_after_the_reply_like_any_run() -> None:
    seen: list[str] = []

    def look(key: str) -> str:
        """Looks up."""
        seen.append(key)
        return key

    script = 'a = call_tool("look", {"key": "p"})\n' + PAD + '{"type": "final_result", "value": a}\n'
    events, _ = await run_eager(model_for(fenced(script)), [FunctionTool(look, read_only=True)], persist_namespace=True)
    assert final_text(events) == "p" and seen == ["p"]


async def test_what_ran_early_before_a_gather_is_served_and_the_gather_runs_once() -> None:
    seen: list[str] = []
    effects: list[int] = []

    async def read(k: int) -> int:
        """Reads."""
        seen.append(f"read {k}")
        return k * 10

    def write(k: int) -> int:
        """Writes."""
        effects.append(k)
        return k + 1

    script = (
        "import asyncio\n"
        'first = call_tool("read", {"k": 0})\n'
        "async def main():\n"
        '    return await asyncio.gather(call_tool("read", {"k": 1}), call_tool("write", {"k": 5}))\n'
        "r = await main()\n" + PAD + '{"type": "final_result", "value": [first] + list(r)}\n'
    )
    events, _ = await run_eager(model_for(fenced(script)), [FunctionTool(read, read_only=True), FunctionTool(write)])
    assert json.loads(final_text(events)) == [0, 10, 6]
    assert seen == ["read 0", "read 1"] and effects == [5]


async def test_a_non_python_first_fence_runs_nothing_early_and_the_python_one_runs_once(tmp_path: Path) -> None:
    seen: list[str] = []

    def look(key: str) -> str:
        """Looks up."""
        seen.append(key)
        return key

    reply = (
        "Shell first:\n```bash\nlook x\n```\nthen:\n```python\n"
        'a = call_tool("look", {"key": "p"})\n' + PAD + '{"type": "final_result", "value": a}\n```\n'
    )
    events, _ = await run_eager(
        model_for(reply), [FunctionTool(look, read_only=True)], service=SqliteSessionService(str(tmp_path / "s.db"))
    )
    assert final_text(events) == "p" and seen == ["p"]


class BreaksOff(ScriptedModel):
    """Streams ``text`` and raises a model error while an early call is still running."""

    def __init__(self, text: str) -> None:
        super().__init__(["unused"])
        self.text = text

    async def generate_content_stream(self, request: Any) -> Any:
        for i in range(0, len(self.text), 8):
            await anyio.sleep(0.002)
            yield LlmResponse(content=Content.from_text(self.text[i : i + 8], role="model"), partial=True)
        await anyio.sleep(0.1)
        raise ModelError("the model failed mid-reply", model="cut")


async def test_a_stream_that_breaks_off_cancels_the_early_call_under_way() -> None:
    started: list[float] = []
    finished: list[float] = []
    effects: list[str] = []

    async def slow(key: str) -> str:
        """Takes long."""
        started.append(time.monotonic())
        await anyio.sleep(3)
        finished.append(time.monotonic())
        return key

    def write(value: str) -> str:
        """An effect."""
        effects.append(value)
        return "w"

    text = fenced('a = call_tool("slow", {"key": "s"})\nw = call_tool("write", {"value": a})\n' + PAD)[:-20]
    begun = time.monotonic()
    with pytest.raises(ModelError, match="mid-reply"):
        await run_eager(BreaksOff(text), [FunctionTool(slow, read_only=True), FunctionTool(write)])
    assert time.monotonic() - begun < 1.5  # the early call did not hold the error back
    assert len(started) == 1 and finished == [] and effects == []


# trio warns of an async generator collected before its end (the caller's pattern, not ours)
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_caller_that_stops_reading_mid_stream_leaves_no_task_behind() -> None:
    """``async for ... break`` on ``run_async`` with streaming and eager start: the generator
    is finalized later, in another task (the event loop's async-generator hook); the early call
    under way is cancelled, nothing with effects ran, and the caller's task goes on unharmed
    (it was cancelled under asyncio, and trio stopped with TrioInternalError)."""
    seen: list[str] = []

    async def slow(key: str) -> str:
        """Takes a while."""
        seen.append("start")
        await anyio.sleep(0.5)
        seen.append("end")
        return key

    def write(value: str) -> str:
        """An effect."""
        seen.append("write")
        return "w"

    script = 'a = call_tool("slow", {"key": "s"})\n' + PAD * 3
    script += 'w = call_tool("write", {"value": a})\n{"type": "final_result", "value": a}\n'
    model = ScriptedModel([fenced(script)], time_to_first_token=0.0, tokens_per_second=100, chars_per_token=4)
    agent = CodeActAgent(
        name="eager",
        model=model,
        runtime=MontyRuntime(),
        tools=[FunctionTool(slow, read_only=True), FunctionTool(write)],
    )
    service = InMemorySessionService()
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    events = runner.run_async(
        user_id=USER, session_id=SESSION, new_message="go", run_config=RunConfig(eager=True, streaming=True)
    )
    n = 0
    async for _ in events:
        n += 1
        if "start" in seen and n > 5:
            break
    del events
    gc.collect()
    await anyio.sleep(1.0)  # the caller goes on: no cancellation reaches it
    assert seen == ["start"]  # the early call was cancelled with the stream; the write never ran


async def test_non_ascii_text_and_a_per_call_confirmation_check_keep_the_early_outcomes() -> None:
    """Non-ASCII keys and prose (escaped alike in the stored reply) and a tool gated per call
    whose check lets this call through: the early outcome answers the stored script's call."""
    seen: list[str] = []

    def look(key: str) -> str:
        """Looks up."""
        seen.append(key)
        return key * 2

    class Gated(FunctionTool):
        async def confirmation_required(self, args: dict[str, Any]) -> bool:
            return args.get("key") == "never"

    script = 'a = call_tool("look", {"key": "é😀"})\n' + PAD + '{"type": "final_result", "value": a}\n'
    tool = Gated(look, read_only=True, requires_confirmation=True)
    events, _ = await run_eager(model_for(fenced(script, after="Voilà — fini.")), [tool])
    assert final_text(events) == "é😀é😀"
    assert seen == ["é😀"]


def test_a_long_string_at_column_0_is_not_reparsed_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 200-line SQL string streamed line by line: each line compiles a bounded number of
    prefixes (it compiled every earlier line's prefix: 2.3 s of event-loop time at 400 lines)."""
    from codeact.agent import _eager

    compiled = [0]
    real = _eager._tree

    def counting(source: str) -> Any:
        compiled[0] += 1
        return real(source)

    monkeypatch.setattr(_eager, "_tree", counting)
    lines = ["x = 1\n", 'q = """\n'] + [f"SELECT col_{i} FROM t WHERE a = {i}\n" for i in range(200)] + ['"""\n']
    text = "Here:\n```python\n"
    for line in lines:
        text += line
        assert _eager.complete_statements(text) == ("x = 1\n" if line != lines[-1] else "".join(lines), False)
    assert compiled[0] <= 3 * len(lines)
