"""codeact[pydantic-ai]: the ``run_code`` toolset inside a real pydantic-ai ``Agent`` and any
pydantic-ai model as a codeact model, driven by pydantic-ai's own offline models."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

pytest.importorskip("pydantic_ai", reason="codeact[pydantic-ai] is not installed")

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset

from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner
from codeact.integrations.pydantic_ai import CodeActToolset, PydanticAIModel, to_messages
from codeact.models import GenerateContentConfig, LlmRequest
from codeact.sessions import Content

pytestmark = pytest.mark.anyio
BOTH_LOOPS = pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])


@pytest.fixture
def anyio_backend() -> str:
    """pydantic-ai's ``Agent`` runs on asyncio only (it creates asyncio tasks); codeact's side
    of the adapter (``PydanticAIModel``) is tested on both loops below."""
    return "asyncio"


SCRIPT = """
rows = call_tool("lookup", {"city": "Paris"})
total = 0
for r in rows:
    total += call_tool("price", {"item": r})
print("items", len(rows))
total
"""


def make_toolset(calls: list[tuple[str, Any]]) -> FunctionToolset:
    inner = FunctionToolset()

    @inner.tool_plain
    def lookup(city: str) -> list[str]:
        """Items sold in a city."""
        calls.append(("lookup", city))
        return ["bread", "cheese", "wine"]

    @inner.tool_plain
    async def price(item: str) -> int:
        """The price of an item, in cents."""
        calls.append(("price", item))
        return {"bread": 150, "cheese": 900, "wine": 1200}[item]

    @inner.tool_plain(requires_approval=True)
    def pay(amount: int) -> str:
        """Pays an amount, in cents."""
        calls.append(("pay", amount))
        return f"paid {amount}"

    return inner


def scripted(*codes: str) -> FunctionModel:
    """A pydantic-ai model that sends each script through run_code, then answers with the
    last tool return it saw (or the retry prompt) as text."""

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent = sum(1 for m in messages if isinstance(m, ModelResponse))
        if sent < len(codes):
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": codes[sent]}, tool_call_id=f"c{sent}")])
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        part = last.parts[-1]
        assert isinstance(part, ToolReturnPart | RetryPromptPart)
        return ModelResponse(parts=[TextPart(f"done: {part.content}")])

    return FunctionModel(reply)


async def test_run_code_calls_inner_tools_in_process():
    calls: list[tuple[str, Any]] = []
    agent = Agent(scripted(SCRIPT), toolsets=[CodeActToolset(make_toolset(calls))])
    result = await agent.run("what does Paris cost?")
    assert result.output == "done: {'value': 2250, 'stdout': 'items 3\\n'}"
    assert calls == [("lookup", "Paris"), ("price", "bread"), ("price", "cheese"), ("price", "wine")]
    # one model round trip for four tool calls
    assert sum(1 for m in result.all_messages() if isinstance(m, ModelResponse)) == 2


async def test_the_model_sees_the_tools_and_the_sandbox_in_the_tool_description():
    seen: list[AgentInfo] = []

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        return ModelResponse(parts=[TextPart("ok")])

    await Agent(FunctionModel(reply), toolsets=[CodeActToolset(make_toolset([]))]).run("hi")
    [tool] = seen[0].function_tools
    assert tool.name == "run_code" and tool.parameters_json_schema["required"] == ["code"]
    assert 'call_tool("lookup", {"city": <str>})' in tool.description
    assert "Items sold in a city." in tool.description and "no network" in tool.description.lower()


async def test_script_errors_go_back_to_the_model_as_retries():
    bad = 'call_tool("price", {"item": "bread"})\nprint("got here")\n1 / 0'
    good = 'call_tool("price", {"item": "wine"})'
    agent = Agent(scripted(bad, good), toolsets=[CodeActToolset(make_toolset([]))])
    result = await agent.run("go")
    parts = [p for m in result.all_messages() for p in m.parts]
    retries = [p for p in parts if isinstance(p, ToolReturnPart) and p.outcome == "retried"]
    assert len(retries) == 1
    assert "ZeroDivisionError" in str(retries[0].content) and "got here" in str(retries[0].content)
    assert result.output == "done: {'value': 1200, 'stdout': ''}"


async def test_invalid_inner_arguments_raise_type_error_in_the_script():
    code = 'try:\n    call_tool("price", {"item": 3})\nexcept TypeError as e:\n    m = str(e)\nm'
    agent = Agent(scripted(code), toolsets=[CodeActToolset(make_toolset([]))])
    result = await agent.run("go")
    assert "tool 'price' got invalid arguments" in result.output


PAY = """
cost = call_tool("price", {"item": "cheese"})
print("paying", cost)
receipt = call_tool("pay", {"amount": cost})
[receipt, call_tool("price", {"item": "bread"})]
"""


@pytest.mark.parametrize("carry_metadata", [True, False])
async def test_approval_pauses_the_script_and_resumes_it_after_approval(carry_metadata):
    calls: list[tuple[str, Any]] = []
    toolset = CodeActToolset(make_toolset(calls), runtime=MontyRuntime(snapshot_key=b"s" * 32))
    agent = Agent(scripted(PAY), toolsets=[toolset], output_type=[str, DeferredToolRequests])
    first = await agent.run("buy cheese")
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    [call] = requests.approvals
    meta = requests.metadata[call.tool_call_id]
    assert (meta["tool"], meta["args"], meta["stdout"]) == ("pay", {"amount": 900}, "paying 900\n")
    assert calls == [("price", "cheese")]  # pay has not run

    results = DeferredToolResults(
        approvals={call.tool_call_id: True}, metadata=requests.metadata if carry_metadata else {}
    )
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert second.output == "done: {'value': ['paid 900', 150], 'stdout': 'paying 900\\n'}"
    # the script resumed after the pause: price(cheese) was not called again
    assert calls == [("price", "cheese"), ("pay", 900), ("price", "bread")]


async def test_denied_approval_is_reported_to_the_model_and_nothing_runs():
    calls: list[tuple[str, Any]] = []
    agent = Agent(
        scripted(PAY), toolsets=[CodeActToolset(make_toolset(calls))], output_type=[str, DeferredToolRequests]
    )
    first = await agent.run("buy cheese")
    [call] = first.output.approvals
    results = DeferredToolResults(approvals={call.tool_call_id: ToolDenied("not today")})
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert second.output == "done: not today"
    assert calls == [("price", "cheese")]


DENIED_PAY = """
cost = call_tool("price", {"item": "cheese"})
print("paying", cost)
try:
    receipt = call_tool("pay", {"amount": cost})
except PermissionError as e:
    receipt = f"refused: {e}"
receipt
"""


async def test_deny_resumes_the_script_with_permission_error():
    calls: list[tuple[str, Any]] = []
    agent = Agent(
        scripted(DENIED_PAY), toolsets=[CodeActToolset(make_toolset(calls))], output_type=[str, DeferredToolRequests]
    )
    first = await agent.run("buy cheese")
    [call] = first.output.approvals
    assert first.output.metadata[call.tool_call_id]["ran"] == ["price"]  # what already ran, for a plain ToolDenied
    results = DeferredToolResults(
        approvals={call.tool_call_id: CodeActToolset.deny("over budget")}, metadata=first.output.metadata
    )
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    # the model sees what the script made of the denial and what it printed; nothing ran twice
    assert second.output == (
        "done: {'value': \"refused: call to 'pay' was denied by a human reviewer: over budget\", "
        "'stdout': 'paying 900\\n'}"
    )
    assert calls == [("price", "cheese")]


async def test_uncaught_deny_goes_to_the_model_with_the_printed_text():
    calls: list[tuple[str, Any]] = []
    agent = Agent(
        scripted(PAY), toolsets=[CodeActToolset(make_toolset(calls))], output_type=[str, DeferredToolRequests]
    )
    first = await agent.run("buy cheese")
    [call] = first.output.approvals
    results = DeferredToolResults(approvals={call.tool_call_id: CodeActToolset.deny()}, metadata=first.output.metadata)
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    retry = [p for m in second.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)][-1]
    assert retry.outcome == "retried"
    assert "PermissionError" in str(retry.content) and "paying 900" in str(retry.content)
    assert calls == [("price", "cheese")]


class Opaque:
    """Not plain data, and nothing pydantic can serialize."""


async def test_a_tool_result_that_is_not_plain_data_is_a_retry_not_a_crash():
    inner = FunctionToolset()

    @inner.tool_plain
    def handle() -> Any:
        """Returns an object the script cannot hold."""
        return Opaque()

    caught = 'try:\n    call_tool("handle", {})\nexcept TypeError as e:\n    m = str(e)\nm'
    agent = Agent(scripted('print("before")\ncall_tool("handle", {})', caught), toolsets=[CodeActToolset(inner)])
    result = await agent.run("go")
    retry = next(p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart))
    assert retry.outcome == "retried"
    assert "the result of tool 'handle' is an Opaque, which cannot cross the boundary" in str(retry.content)
    assert "before" in str(retry.content)
    assert "the result of tool 'handle' is an Opaque" in result.output  # the script may catch it


async def test_a_large_value_reaches_the_model_capped_and_marked():
    from codeact.agent._output import TRUNCATION_MARKER

    big = "[i for i in range(300000)]"
    agent = Agent(scripted(big, 'print("x" * 50000)\n"s" * 50000'), toolsets=[CodeActToolset(make_toolset([]))])
    result = await agent.run("go")
    returns = [p.content for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    value = returns[0]["value"]
    assert isinstance(value, str) and len(value) <= 20_000 + len(TRUNCATION_MARKER) and TRUNCATION_MARKER in value
    assert value.startswith("[0, 1, 2") and value.endswith("299999]")
    assert TRUNCATION_MARKER in returns[1]["stdout"] and len(returns[1]["stdout"]) < 21_000
    assert TRUNCATION_MARKER in returns[1]["value"]
    small = CodeActToolset(make_toolset([]), max_result_chars=100)
    assert small._capped_value(list(range(10))) == list(range(10))  # under the cap: the value as is


async def test_pydantic_ai_test_model_drives_the_toolset():
    agent = Agent(TestModel(), toolsets=[CodeActToolset(make_toolset([]))])
    result = await agent.run("go")
    returns = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [(r.outcome, r.content) for r in returns] == [("success", {"value": "done", "stdout": "hello\n"})]


# ------------------------------------------------------------------ pydantic-ai model as a codeact model


def test_transcript_conversion():
    request = LlmRequest(
        system_instruction="be brief",
        contents=[
            Content.from_text("hi"),
            Content.from_text("```python\n1\n```", role="model"),
            Content.from_text("r"),
        ],
    )
    messages = to_messages(request)
    assert [type(m).__name__ for m in messages] == ["ModelRequest", "ModelResponse", "ModelRequest"]
    assert [type(p).__name__ for p in messages[0].parts] == ["SystemPromptPart", "UserPromptPart"]
    assert messages[1].parts[0].content == "```python\n1\n```"


@BOTH_LOOPS
async def test_pydantic_ai_model_drives_a_codeact_agent(anyio_backend):
    seen: list[list[ModelMessage]] = []
    settings_seen: list[Any] = []

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        settings_seen.append(info.model_settings)
        if len(seen) == 1:
            return ModelResponse(parts=[TextPart('```python\nx = call_tool("add", {"a": 40, "b": 2})\nx\n```')])
        return ModelResponse(parts=[TextPart('```python\n{"type": "final_result", "value": "forty-two"}\n```')])

    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    model = PydanticAIModel(FunctionModel(reply, model_name="fn"), settings={"temperature": 0.0})
    agent = CodeActAgent(name="calc", model=model, tools=[add], runtime=MontyRuntime())
    runner = Runner(app_name="a", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
    events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="40+2?")]
    assert events[-1].text and "forty-two" in events[-1].text
    # the second request carries the first script and its observation (42) back to the model
    assert len(seen) == 2
    second = seen[1]
    assert any(isinstance(p, UserPromptPart) and "42" in str(p.content) for m in second for p in m.parts)
    assert settings_seen[0]["temperature"] == 0.0
    assert model.name == "function:fn"


@BOTH_LOOPS
async def test_pydantic_ai_test_model_and_config_mapping(anyio_backend):
    model = PydanticAIModel(TestModel(custom_output_text="hello"))
    response = await model.generate_content(
        LlmRequest(contents=[Content.from_text("hi")], config=GenerateContentConfig(max_output_tokens=5, seed=1))
    )
    assert response.text == "hello"
    assert response.usage is not None and response.usage.prompt_tokens and response.usage.completion_tokens


# -- printed output while the script runs (issue 51): RunContext.emit ----------------------


async def _stream(agent: Agent[Any, Any], prompt: str) -> tuple[list[tuple[float, Any]], Any]:
    """Every event of the tool-calling steps of ``agent.iter(prompt)`` (``node.stream``) with
    the time it reached the caller, and the run's result."""
    seen: list[tuple[float, Any]] = []
    async with agent.iter(prompt) as run:
        async for node in run:
            if Agent.is_call_tools_node(node):
                async with node.stream(run.ctx) as events:
                    async for event in events:
                        seen.append((time.monotonic(), event))
    return seen, run.result


async def test_printed_output_reaches_the_event_stream_while_the_script_runs():
    from pydantic_ai.messages import FunctionToolResultEvent

    from codeact.integrations.pydantic_ai import ScriptOutputEvent

    inner = FunctionToolset()
    finished: list[float] = []

    @inner.tool_plain
    async def fetch(seconds: float) -> str:
        """Takes a while."""
        await anyio.sleep(seconds)
        finished.append(time.monotonic())
        return "page"

    code = 'print("fetching")\npage = call_tool("fetch", {"seconds": 0.6})\nprint("fetched", page)\npage'
    agent = Agent(scripted(code), toolsets=[CodeActToolset(inner)])
    seen, result = await _stream(agent, "fetch it")
    outputs = [(t, e) for t, e in seen if isinstance(e, ScriptOutputEvent)]
    assert [e.stdout for _, e in outputs] == ["fetching\n", "fetched page\n"]
    assert all(e.tool_call_id == "c0" and e.tool_name == "run_code" for _, e in outputs)
    assert outputs[0][0] < finished[0] - 0.3  # shown while the tool the script waits on still runs
    returned = next(t for t, e in seen if isinstance(e, FunctionToolResultEvent))
    assert outputs[-1][0] <= returned
    assert result.output == "done: {'value': 'page', 'stdout': 'fetching\\nfetched page\\n'}"


async def test_printed_output_events_are_rate_limited_and_add_up_to_what_was_printed():
    from codeact.integrations.pydantic_ai import ScriptOutputEvent

    inner = FunctionToolset()

    @inner.tool_plain
    def tick(i: int) -> int:
        """Returns its argument."""
        return i

    code = (
        'import sys\nfor i in range(40):\n    print("line", call_tool("tick", {"i": i}))\n'
        'print("warn", file=sys.stderr)\n"ok"'
    )
    printed = "".join(f"line {i}\n" for i in range(40))

    every = Agent(scripted(code), toolsets=[CodeActToolset(inner, output_interval=0.0)])
    seen, _ = await _stream(every, "go")
    outputs = [e for _, e in seen if isinstance(e, ScriptOutputEvent)]
    assert "".join(e.stdout for e in outputs) == printed  # one event per step boundary that printed
    assert "".join(e.stderr for e in outputs) == "warn\n"

    started = time.monotonic()
    limited = Agent(scripted(code), toolsets=[CodeActToolset(inner)])  # at most 10 per second
    seen, result = await _stream(limited, "go")
    elapsed = time.monotonic() - started
    outputs = [e for _, e in seen if isinstance(e, ScriptOutputEvent)]
    assert 1 <= len(outputs) <= 2 + elapsed / 0.1
    assert outputs[0].stdout == "line 0\n"  # the first is not held back
    assert printed.startswith("".join(e.stdout for e in outputs))
    assert "line 39" in str(result.output)  # the tool's result holds all of it

    quiet = Agent(scripted(code), toolsets=[CodeActToolset(inner, report_output=False)])
    seen, _ = await _stream(quiet, "go")
    assert not any(isinstance(e, ScriptOutputEvent) for _, e in seen)
