"""Tool dispatch in the turn loop: unknown tools, failures and timeouts raised into the
script, call ids and keys, retry budgets, ``on_tool_error``, the circuit breaker, the
before/after tool callbacks, tool state deltas, and the terminal signals a tool can send
(escalate, skip_summarization, transfer_to_agent); on ``ScriptedRuntime``."""

from __future__ import annotations

import anyio
import pytest

from agent_helpers import (
    FakeTool,
    final,
    intents_of,
    journal_of,
    observation,
    outcomes_of,
    run,
    run_direct,
    scripted_agent,
    slot_of,
)
from codeact import ResumeError, ResumeValue, RetryBudget
from codeact.testing import PlannedCall

pytestmark = pytest.mark.anyio


async def test_unknown_tool_raises_lookup_error_into_the_script() -> None:
    echo = FakeTool("echo")
    agent, rt, _ = scripted_agent([[PlannedCall("nope", {}), final("handled")]], tools=[echo])
    events, _, service = await run(agent)
    assert events[-1].text == "handled"
    assert journal_of(service) == []  # nothing ran: nothing to journal
    assert rt.outcomes == [ResumeError("tool 'nope' is not available; available tools: echo", "LookupError")]


@pytest.mark.parametrize(
    ("exc", "type_name"),
    [
        (ValueError("not_found: resource missing"), "ValueError"),
        (KeyError("not_found"), "KeyError"),
        (PermissionError("not_found"), "PermissionError"),
        (type("CustomError", (Exception,), {})("not_found"), "RuntimeError"),
        (type("MyLookup", (LookupError,), {})("not_found"), "LookupError"),
    ],
)
async def test_tool_failure_raises_into_script(exc: Exception, type_name: str) -> None:
    def boom(args, ctx):
        raise exc

    tool = FakeTool("boom", fn=boom)
    agent, rt, _ = scripted_agent([[PlannedCall("boom", {}), final("caught")]], tools=[tool])
    events, _, service = await run(agent)
    assert events[-1].text == "caught"
    (outcome,) = rt.outcomes
    assert isinstance(outcome, ResumeError)
    assert outcome.exc_type == type_name
    assert "not_found" in outcome.message
    # the class name leads the text only when the script sees another type (never "ValueError: ValueError:")
    renamed = type(exc).__name__ != type_name
    assert outcome.message.startswith(type(exc).__name__ + ": ") is renamed
    # a KeyError passes its key's text (not its repr), so the script's str(e) is CPython's 'not_found'
    if type_name == "KeyError":
        assert outcome.message == "not_found"
    # the failure is the journaled outcome too
    assert outcomes_of(service) == [{"e": outcome.message, "t": type_name}]


async def test_uncaught_tool_failure_becomes_a_script_error() -> None:
    tool = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(ValueError("bad input")))
    agent, _, model = scripted_agent([[PlannedCall("boom", {})], [final("ok")]], tools=[tool])
    await run(agent)
    assert model.requests[1].contents[-1].text == "Error during execution:\nValueError: bad input"


async def test_tool_timeout_raises_into_the_script() -> None:
    async def sleepy(args, ctx):
        await anyio.sleep(5)

    sleeper = FakeTool("sleeper", fn=sleepy)
    agent, rt, _ = scripted_agent(
        [[PlannedCall("sleeper", {}), final("recovered")]], tools=[sleeper], tool_timeout=0.02
    )
    with anyio.fail_after(3):
        events, _, _ = await run(agent)
    assert events[-1].text == "recovered"
    assert rt.outcomes == [ResumeError("tool 'sleeper' timed out after 0.02 s", "TimeoutError")]


async def test_tool_call_id_is_visible_to_the_tool() -> None:
    echo = FakeTool("echo")
    agent, _, _ = scripted_agent([[PlannedCall("echo", {}, call_id=42), final("ok")]], tools=[echo])
    await run_direct(agent, invocation_id="inv-7")
    # the key counts calls within the turn, not the interpreter's call ids (SPEC §5)
    assert echo.contexts[0].function_call_id == "inv-7:1:0"
    assert echo.contexts[0].invocation_id == "inv-7"
    assert echo.contexts[0].agent_name == "coder"


async def test_call_keys_differ_across_iterations_with_the_same_call_id() -> None:
    echo = FakeTool("echo")
    agent, _, _ = scripted_agent(
        [[PlannedCall("echo", {}), observation(1)], [PlannedCall("echo", {}), final("ok")]], tools=[echo]
    )
    await run_direct(agent, invocation_id="inv")
    assert [c.function_call_id for c in echo.contexts] == ["inv:1:0", "inv:2:0"]


async def test_retry_budget_recovers_a_flaky_tool() -> None:
    state = {"n": 0}

    def flaky(args, ctx):
        state["n"] += 1
        if state["n"] == 1:
            raise ConnectionError("blip")
        return {"ok": True}

    tool = FakeTool("flaky", fn=flaky)
    agent, rt, _ = scripted_agent(
        [[PlannedCall("flaky", {}), final("ok")]], tools=[tool], default_retry_budget=RetryBudget(max_retries=1)
    )
    await run(agent)
    assert rt.outcomes == [ResumeValue({"ok": True})]
    assert len(tool.calls) == 2


async def test_per_tool_retry_budget_overrides_the_default() -> None:
    tool = FakeTool("flaky", fn=lambda a, c: (_ for _ in ()).throw(ConnectionError("down")))
    agent, rt, _ = scripted_agent(
        [[PlannedCall("flaky", {}), final("ok")]],
        tools=[tool],
        default_retry_budget=RetryBudget(max_retries=5),
        tool_retry_budgets={"flaky": RetryBudget(max_retries=2)},
    )
    await run(agent)
    assert len(tool.calls) == 3
    assert isinstance(rt.outcomes[0], ResumeError)
    # Monty has no ConnectionError: the nearest type every runtime has, the real name in the text
    assert rt.outcomes[0] == ResumeError("ConnectionError: down", "OSError")


async def test_on_tool_error_supplies_a_fallback_value() -> None:
    seen: list[str] = []

    def first(tool, args, ctx, message):
        seen.append(message)
        return None

    def second(tool, args, ctx, message):
        return {"fallback": "used"}

    tool = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(ValueError("not_found")))
    agent, rt, _ = scripted_agent([[PlannedCall("boom", {}), final("ok")]], tools=[tool], on_tool_error=[first, second])
    await run(agent)
    assert rt.outcomes == [ResumeValue({"fallback": "used"})]
    assert seen == ["not_found"]


async def test_on_tool_error_chain_stops_on_a_callback_error() -> None:
    called: list[str] = []

    def broken(tool, args, ctx, message):
        called.append("broken")
        raise RuntimeError("callback bug")

    def never(tool, args, ctx, message):
        called.append("never")
        return "unused"

    tool = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(ValueError("not_found")))
    agent, rt, _ = scripted_agent([[PlannedCall("boom", {}), final("ok")]], tools=[tool], on_tool_error=[broken, never])
    await run(agent)
    assert called == ["broken"]
    assert rt.outcomes == [ResumeError("not_found", "ValueError")]


async def test_circuit_breaker_opens_after_threshold_failures() -> None:
    tool = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(ValueError("x")))
    agent, rt, _ = scripted_agent(
        [[PlannedCall("boom", {}), PlannedCall("boom", {}), final("done")]], tools=[tool], circuit_breaker_threshold=1
    )
    events, _, _ = await run(agent)
    assert events[-1].text == "done"
    assert len(tool.calls) == 1
    assert rt.outcomes[-1] == ResumeError("tool 'boom' is temporarily disabled after 1 consecutive failures")


async def test_before_tool_callback_short_circuits_the_tool() -> None:
    tool = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(ValueError("x")))
    agent, rt, _ = scripted_agent(
        [[PlannedCall("boom", {"a": 1}), final("ok")]], tools=[tool], before_tool=lambda t, args, ctx: "intercepted"
    )
    await run(agent)
    assert tool.calls == []
    assert rt.outcomes == [ResumeValue("intercepted")]


async def test_before_tool_callbacks_first_non_none_wins() -> None:
    order: list[str] = []

    def a(t, args, ctx):
        order.append("a")

    async def b(t, args, ctx):
        order.append("b")
        return {"from": "b", "args": args}

    def c(t, args, ctx):
        order.append("c")
        return "c"

    echo = FakeTool("echo", "real")
    agent, rt, _ = scripted_agent([[PlannedCall("echo", {"x": 1}), final("ok")]], tools=[echo], before_tool=[a, b, c])
    await run(agent)
    assert order == ["a", "b"]
    assert rt.outcomes == [ResumeValue({"from": "b", "args": {"x": 1}})]
    assert echo.calls == []


async def test_after_tool_callback_full_rewrites_the_result() -> None:
    echo = FakeTool("echo", {"original": True})
    agent, rt, _ = scripted_agent(
        [[PlannedCall("echo", {}), final("ok")]],
        tools=[echo],
        after_tool_full=lambda t, args, ctx, value, outcome: {"rewritten": True},
    )
    await run(agent)
    assert rt.outcomes == [ResumeValue({"rewritten": True})]


async def test_after_tool_callback_sees_the_tool_outcome() -> None:
    seen = []
    echo = FakeTool("echo", {"v": 1})
    agent, rt, _ = scripted_agent(
        [[PlannedCall("echo", {"a": 1}), final("ok")]],
        tools=[echo],
        after_tool_full=lambda t, args, ctx, value, outcome: seen.append((value, outcome)),
    )
    await run(agent)
    ((value, outcome),) = seen
    assert value == {"v": 1}
    assert outcome.tool_name == "echo"
    assert outcome.args == {"a": 1}
    assert outcome.success is True
    assert outcome.attempts == 1
    assert outcome.error_message is None
    assert rt.outcomes == [ResumeValue({"v": 1})]


async def test_after_tool_callback_sees_failed_tool_outcome() -> None:
    seen = []
    boom = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(LookupError("not_found: gone")))
    agent, rt, _ = scripted_agent(
        [[PlannedCall("boom", {}), final("ok")]],
        tools=[boom],
        after_tool_full=lambda t, args, ctx, value, outcome: seen.append((value, outcome)),
    )
    await run(agent)
    ((value, outcome),) = seen
    assert outcome.success is False
    assert outcome.attempts == 1
    assert "not_found" in outcome.error_message
    assert value == {"error": outcome.error_message}
    assert isinstance(rt.outcomes[0], ResumeError) and "not_found" in rt.outcomes[0].message


# --------------------------------------------------------------------- tool side effects and terminal signals


async def test_inline_tool_state_delta_is_persisted_on_a_checkpoint() -> None:
    def remember(args, ctx):
        ctx.state["note"] = "kept"
        ctx.actions.artifact_delta["report.txt"] = 1
        return "ok"

    agent, _, _ = scripted_agent(
        [[PlannedCall("remember", {}), final("done")]], tools=[FakeTool("remember", fn=remember)]
    )
    events, session, service = await run(agent)
    # stored on its own event before the outcome is recorded (a recorded call never re-runs)
    after = events[0]
    assert after.actions.state_delta["note"] == "kept"
    assert after.actions.artifact_delta == {"report.txt": 1}
    assert after.content is None
    assert outcomes_of(service) == [{"v": "ok"}]
    assert "note" not in events[1].actions.state_delta  # flushed once
    assert session.state["note"] == "kept"


async def test_non_suspending_tool_state_delta_persists_on_final() -> None:
    def remember(args, ctx):
        ctx.state["note"] = "kept"

    agent, _, _ = scripted_agent(
        [[PlannedCall("remember", {}), final("done")]], tools=[FakeTool("remember", fn=remember)], suspension=False
    )
    events, session, _ = await run(agent)
    assert [e.text for e in events] == ["", "done"]
    assert events[0].actions.state_delta["note"] == "kept"
    assert session.state["note"] == "kept"


async def test_tool_sees_state_written_by_an_earlier_tool_in_the_same_run() -> None:
    def write(args, ctx):
        ctx.state["k"] = "v1"

    def read(args, ctx):
        return ctx.state.get("k")

    agent, rt, _ = scripted_agent(
        [[PlannedCall("write", {}), PlannedCall("read", {}), final("ok")]],
        tools=[FakeTool("write", fn=write), FakeTool("read", fn=read)],
        suspension=False,
    )
    await run(agent)
    assert rt.outcomes[1] == ResumeValue("v1")


@pytest.mark.parametrize("signal", ["escalate", "skip_summarization", "transfer_to_agent"])
async def test_terminal_tool_signal_ends_the_run(signal: str) -> None:
    def press(args, ctx):
        setattr(ctx.actions, signal, "elsewhere" if signal == "transfer_to_agent" else True)
        ctx.state["pressed"] = True

    after_agent_calls: list[int] = []
    agent, rt, _ = scripted_agent(
        [[PlannedCall("panic_button", {}), final("unreached")]],
        tools=[FakeTool("panic_button", fn=press)],
        after_agent=lambda ctx: after_agent_calls.append(1),
    )
    events = await run_direct(agent, state={})
    last = events[-1]
    assert getattr(last.actions, signal) == ("elsewhere" if signal == "transfer_to_agent" else True)
    assert last.content is None
    assert last.actions.state_delta["pressed"] is True
    assert all(e.text != "unreached" for e in events)
    assert rt.outcomes == []  # the script was never resumed
    assert after_agent_calls == []


async def test_escalation_clears_the_turn_slot_in_the_session() -> None:
    tool = FakeTool("panic_button", fn=lambda a, c: setattr(c.actions, "escalate", True))
    agent, _, _ = scripted_agent([[PlannedCall("panic_button", {}), final("unreached")]], tools=[tool])
    events, _session, service = await run(agent)
    assert events[-1].actions.escalate is True
    assert intents_of(service) == ["panic_button"]
    assert await slot_of(service) is None


async def test_escalation_on_long_running_ends_the_run_before_suspending() -> None:
    tool = FakeTool("panic_lr", fn=lambda a, c: setattr(c.actions, "escalate", True), is_long_running=True)
    agent, rt, _ = scripted_agent([[PlannedCall("panic_lr", {}), final("unreached")]], tools=[tool])
    events, _session, service = await run(agent)
    assert events[-1].actions.escalate is True
    assert all(e.long_running_tool_ids == [] for e in events)
    assert await slot_of(service) is None
    assert rt.outcomes == []
