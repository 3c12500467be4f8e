"""The main paths of the turn loop again on real runtimes: ``MontyRuntime`` (final result,
inline tools with the journal, tool failures, unknown tools, timeouts, denied calls, script
errors) and ``CPythonRuntime`` (no suspension)."""

from __future__ import annotations

import anyio
import pytest

from agent_helpers import FakeTool, fence, final_reply, intents_of, outcomes_of, run, run_direct, texts
from codeact import CodeActAgent, CPythonRuntime, MontyRuntime, RunConfig, ScriptedModel

pytestmark = pytest.mark.anyio


def monty_agent(replies: list[str], tools: list, **kwargs) -> tuple[CodeActAgent, ScriptedModel]:
    model = ScriptedModel(replies)
    return CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=tools, **kwargs), model


async def test_monty_final_result() -> None:
    agent, _model = monty_agent([final_reply({"answer": 42})], [])
    events, _, _ = await run(agent)
    assert [e.text for e in events] == ['{\n  "answer": 42\n}']


async def test_monty_inline_tool_with_journal_and_observation() -> None:
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    agent, model = monty_agent(
        [
            fence('s = call_tool("add", {"a": 40, "b": 2})\nprint("sum", s)\n{"type": "observation", "value": s}'),
            fence('{"type": "final_result", "value": "42"}'),
        ],
        [add],
    )
    events, _, service = await run(agent)
    assert intents_of(service) == ["add"]
    assert outcomes_of(service) == [{"v": 42}]
    assert texts(model.requests[1].contents)[-2:] == ["Observation:\n42", "Output (stdout):\nsum 42\n"]
    assert events[-1].text == "42"


async def test_monty_tool_failure_keeps_its_type_and_is_catchable() -> None:
    def boom() -> None:
        raise ValueError("not_found")

    script = (
        'try:\n    call_tool("boom")\n    r = "no"\nexcept ValueError as e:\n    r = "caught " + str(e)\n'
        '{"type": "final_result", "value": r}'
    )
    agent, _ = monty_agent([fence(script)], [boom])
    events, _, _ = await run(agent)
    assert events[-1].text == "caught not_found"


async def test_monty_unknown_tool_raises_lookup_error() -> None:
    script = (
        'try:\n    call_tool("nope", {})\nexcept LookupError as e:\n    r = str(e)\n'
        '{"type": "final_result", "value": r}'
    )
    agent, _ = monty_agent([fence(script)], [FakeTool("echo")])
    events, _, _ = await run(agent)
    assert events[-1].text == "tool 'nope' is not available; available tools: echo"


async def test_monty_tool_timeout_raises_timeout_error() -> None:
    async def sleepy(args, ctx):
        await anyio.sleep(5)

    script = (
        'try:\n    call_tool("sleeper", {})\nexcept TimeoutError as e:\n    r = str(e)\n'
        '{"type": "final_result", "value": r}'
    )
    agent, _ = monty_agent([fence(script)], [FakeTool("sleeper", fn=sleepy)], tool_timeout=0.02)
    with anyio.fail_after(3):
        events, _, _ = await run(agent)
    assert events[-1].text == "tool 'sleeper' timed out after 0.02 s"


async def test_monty_denied_call_raises_permission_error() -> None:
    script = (
        'try:\n    call_tool("delete_file", {"path": "/x"})\nexcept PermissionError as e:\n    r = str(e)\n'
        '{"type": "final_result", "value": r}'
    )
    delete = FakeTool("delete_file")
    agent, _ = monty_agent([fence(script)], [delete], require_tool_confirmation=["delete_file"])
    events = await run_direct(
        agent, invocation_id="i", run_config=RunConfig(tool_confirmation_decisions={"i:1:0": "deny"})
    )
    assert events[-1].text == "call to 'delete_file' was denied by a human reviewer"
    assert delete.calls == []


async def test_monty_script_error_is_fed_back_with_a_traceback() -> None:
    agent, model = monty_agent([fence('print("before")\nd = {"items": []}\nd["itms"]'), final_reply("fixed")], [])
    events, _, _ = await run(agent)
    assert events[-1].text == "fixed"
    feedback = texts(model.requests[1].contents)
    assert feedback[-2].startswith("Error during execution:\nTraceback (most recent call last):\n")
    assert "line 3" in feedback[-2]
    assert "KeyError" in feedback[-2] and "itms" in feedback[-2]
    assert feedback[-1] == "Output (stdout):\nbefore\n"


async def test_monty_feedback_names_the_stream_of_each_line() -> None:
    script = (
        'import sys\nprint("rows", 3)\nprint("warning: 1 row skipped", file=sys.stderr)\n'
        'x = call_tool("add", {"a": 1, "b": 1})\nprint("x", x)\nprint("done?", file=sys.stderr, end="")\n'
        '{"type": "observation", "value": x}'
    )
    agent, model = monty_agent([fence(script), final_reply("ok")], [FakeTool("add", 2)])
    await run(agent)
    feedback = texts(model.requests[1].contents)
    assert feedback[-1] == (
        "Output (stdout; lines from stderr start with [stderr]):\nrows 3\n[stderr] warning: 1 row skipped\n"
        "x 2\n[stderr] done?"
    )


async def test_cpython_runtime_rejects_confirmation_and_runs_long_running_inline() -> None:
    script = (
        "out = {}\n"
        'out["handle"] = call_tool("slow", {})\n'
        "try:\n"
        '    call_tool("delete_file", {})\n'
        "except PermissionError as e:\n"
        '    out["denied"] = str(e)\n'
        '{"type": "final_result", "value": out}'
    )
    slow = FakeTool("slow", {"status": "pending", "task_id": "t1"}, is_long_running=True)
    delete = FakeTool("delete_file")
    model = ScriptedModel([fence(script)])
    agent = CodeActAgent(
        name="coder",
        model=model,
        runtime=CPythonRuntime(),
        tools=[slow, delete],
        require_tool_confirmation=["delete_file"],
    )
    events, _, _ = await run(agent)
    assert len(events) == 1
    import json

    value = json.loads(events[-1].text)
    assert value["handle"] == {"status": "pending", "task_id": "t1"}
    assert "'delete_file' requires confirmation" in value["denied"]
    assert "cannot pause" in value["denied"]
    assert delete.calls == []
    assert len(slow.calls) == 1


async def test_a_traceback_after_a_rewritten_generator_names_the_models_line() -> None:
    """The CPython-order rewrite hoists a loop before its statement; the traceback fed back
    names the model's line 4 and shows its text, not the rewritten script's (issue 48)."""
    script = 'orders = [1, 2]\nok = any(call_tool("check", {"id": o}) for o in orders)\nx = 1\ny = missing + x'
    check = FakeTool("check", result=False)
    agent, model = monty_agent([fence(script), final_reply("fixed")], [check])
    events, _, _ = await run(agent)
    assert events[-1].text == "fixed"
    feedback = texts(model.requests[1].contents)[-1]
    assert 'File "agent.py", line 4' in feedback and "y = missing + x" in feedback, feedback
