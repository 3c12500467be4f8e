"""Resilience: retry budgets (attempts, backoff), the circuit breaker, on_tool_error
fallbacks reaching the script, after_tool_full with structured metadata."""

from __future__ import annotations

import pytest

from codeact import CodeActAgent, MontyRuntime, RetryBudget, Runner, ScriptedModel
from parity_helpers import APP, ask, py

pytestmark = pytest.mark.anyio


CALLS: dict[str, int] = {}


def make_flaky(name: str, fail_times: int):
    def flaky() -> str:
        """Fails a few times, then works."""
        CALLS[name] = CALLS.get(name, 0) + 1
        if CALLS[name] <= fail_times:
            raise ConnectionError(f"{name} down")
        return f"{name} ok"

    flaky.__name__ = name
    return flaky


async def test_retry_budgets_default_and_per_tool(service) -> None:
    CALLS.clear()
    a, b = make_flaky("a", 2), make_flaky("b", 2)
    script = py(
        """
        out = []
        for name in ["a", "b"]:
            try:
                out.append(call_tool(name))
            except Exception as e:
                out.append("failed: " + str(e))
        {"type": "final_result", "value": out}
        """
    )
    seen = []
    agent = CodeActAgent(
        name="c",
        model=ScriptedModel([script]),
        runtime=MontyRuntime(),
        tools=[a, b],
        default_retry_budget=RetryBudget(max_retries=2, delay=0.001, backoff=2.0),
        tool_retry_budgets={"b": RetryBudget(max_retries=1)},
        after_tool_full=lambda tool, args, ctx, value, outcome: seen.append(ctx.tool_outcome),
    )
    events = await ask(Runner(app_name=APP, agent=agent, session_service=service))
    assert CALLS == {"a": 3, "b": 2}
    assert '"a ok"' in events[-1].text and "failed: ConnectionError: b down" in events[-1].text
    assert [(o.tool_name, o.attempts, o.success, o.error_category) for o in seen] == [
        ("a", 3, True, None),
        ("b", 2, False, "exception"),
    ]
    assert seen[0].duration >= 0.003  # 1 ms then 2 ms of backoff


async def test_circuit_breaker_opens_for_the_rest_of_the_invocation(service) -> None:
    CALLS.clear()
    broken = make_flaky("broken", 99)
    script = py(
        """
        errors = []
        for i in range(5):
            try:
                call_tool("broken")
            except Exception as e:
                errors.append(str(e))
        {"type": "final_result", "value": errors}
        """
    )
    agent = CodeActAgent(
        name="c",
        model=ScriptedModel([script, script]),
        runtime=MontyRuntime(),
        tools=[broken],
        circuit_breaker_threshold=2,
    )
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    events = await ask(runner)
    assert CALLS["broken"] == 2
    assert events[-1].text.count("temporarily disabled after 2 consecutive failures") == 3
    # a new invocation starts with a closed breaker
    await ask(runner)
    assert CALLS["broken"] == 4


async def test_on_tool_error_fallback_value_reaches_the_script(service) -> None:
    CALLS.clear()
    down = make_flaky("down", 99)
    seen = []

    def fallback(tool, args, ctx, message):
        seen.append(message)
        return {"cached": True, "tool": tool.name}

    model = ScriptedModel([py('{"type": "final_result", "value": call_tool("down")}')])
    agent = CodeActAgent(
        name="c",
        model=model,
        runtime=MontyRuntime(),
        tools=[down],
        on_tool_error=[lambda *a: None, fallback],
        after_tool_full=lambda tool, args, ctx, value, outcome: seen.append(
            (outcome.success, outcome.timed_out, outcome.error_category, value)
        ),
    )
    events = await ask(Runner(app_name=APP, agent=agent, session_service=service))
    assert '"cached": true' in events[-1].text
    assert seen == [
        "ConnectionError: down down",
        (False, False, "exception", {"cached": True, "tool": "down"}),
    ]


async def test_timeout_is_reported_in_the_outcome(service) -> None:
    import anyio

    async def slow() -> str:
        """Too slow."""
        await anyio.sleep(1)
        return "late"

    seen = []
    model = ScriptedModel(
        [
            py(
                """
                try:
                    r = call_tool("slow")
                except TimeoutError as e:
                    r = "timeout: " + str(e)
                {"type": "final_result", "value": r}
                """
            )
        ]
    )
    agent = CodeActAgent(
        name="c",
        model=model,
        runtime=MontyRuntime(),
        tools=[slow],
        tool_timeout=0.01,
        after_tool_full=lambda tool, args, ctx, value, outcome: seen.append(outcome),
    )
    events = await ask(Runner(app_name=APP, agent=agent, session_service=service))
    assert events[-1].text.startswith("timeout: tool 'slow' timed out")
    assert seen[0].timed_out and seen[0].error_category == "timeout" and seen[0].attempts == 1
