"""codeact[adk], human in the loop and events: a ``CodeActAdkAgent`` pauses on an ADK tool's
``require_confirmation`` through ADK's own ``adk_request_confirmation`` flow (checked against a
real ``LlmAgent`` with the same ``FunctionTool``), resumes on the app's function response, and
shows its run as ADK events. Real google-adk ``InMemoryRunner``, real Monty, scripted models."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="codeact[adk] is not installed")

from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm as AdkBaseLlm
from google.adk.models import LlmRequest as AdkLlmRequest
from google.adk.models import LlmResponse as AdkLlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.sessions import InMemorySessionService as AdkSessionService
from google.adk.tools import FunctionTool as AdkFunctionTool
from google.adk.tools import ToolContext
from google.genai import types

from codeact import (
    CodeActAgent,
    Content,
    LlmResponse,
    MontyRuntime,
    Part,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.integrations.adk import CodeActAdkAgent, from_adk
from codeact.models import Usage

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]  # ADK is asyncio-only

CALLED: list[tuple[str, int]] = []
CONFIRM = "adk_request_confirmation"


def record(item: str, qty: int, tool_context: ToolContext) -> dict[str, Any]:
    """Records an order line.

    Args:
        item: what was ordered.
        qty: how many.
    """
    CALLED.append((item, qty))
    lines = [*tool_context.state.get("lines", []), f"{qty} {item}"]
    tool_context.state["lines"] = lines
    return {"ok": True, "lines": len(lines)}


ORDER_SCRIPT = """```python
try:
    r = call_tool("record", {"item": "tea", "qty": 9})
    msg = f"recorded, {r['lines']} line(s)"
except PermissionError as e:
    msg = f"refused: {e}"
{"type": "final_result", "value": msg}
```"""


def shop(require_confirmation: Any, script: str = ORDER_SCRIPT, **kwargs: Any) -> CodeActAdkAgent:
    agent = CodeActAgent(
        name="shop",
        model=ScriptedModel(lambda request: script),
        runtime=MontyRuntime(),
        tools=from_adk([AdkFunctionTool(record, require_confirmation=require_confirmation)]),
    )
    return CodeActAdkAgent.wrap(agent, **kwargs)


async def start(root: Any, session_service: Any = None) -> InMemoryRunner:
    runner = InMemoryRunner(agent=root, app_name="a")
    if session_service is not None:
        runner.session_service = session_service
    if await runner.session_service.get_session(app_name="a", user_id="u", session_id="s") is None:
        await runner.session_service.create_session(app_name="a", user_id="u", session_id="s")
    return runner


async def send(runner: Any, *parts: types.Part) -> list[Any]:
    message = types.Content(role="user", parts=list(parts))
    return [e async for e in runner.run_async(user_id="u", session_id="s", new_message=message)]


def text(value: str) -> types.Part:
    return types.Part(text=value)


def answer(request_id: str, response: dict[str, Any]) -> types.Part:
    return types.Part(function_response=types.FunctionResponse(name=CONFIRM, id=request_id, response=response))


def requests_in(events: list[Any]) -> list[tuple[Any, Any]]:
    """(event, adk_request_confirmation call) pairs."""
    return [(e, fc) for e in events for fc in e.get_function_calls() if fc.name == CONFIRM]


def shown(events: list[Any]) -> list[Any]:
    """The events that are not codeact progress events (script results), without the model
    reply an event carries in front of its own parts (``codeact_carries``: its text and
    ``executable_code``, where an ``LlmAgent``'s event holds the model's text)."""
    out = []
    for e in events:
        meta = e.custom_metadata or {}
        if "codeact_kind" in meta:
            continue
        if "codeact_carries" in meta and e.content is not None:
            e = e.model_copy(deep=True)
            e.content.parts = [p for p in e.content.parts if p.text is None and p.executable_code is None]
        out.append(e)
    return out


async def test_approval_through_adk_confirmation_runs_the_tool_once(anyio_backend):
    CALLED.clear()
    runner = await start(shop(True))
    events = await send(runner, text("tea please"))
    [(event, request)] = requests_in(events)
    assert CALLED == []
    assert event.author == "shop" and event.long_running_tool_ids == {request.id}
    assert event.usage_metadata is None and event.custom_metadata == {"codeact_model_calls": 1}  # no tokens reported
    original = request.args["originalFunctionCall"]
    assert (original["name"], original["args"]) == ("record", {"item": "tea", "qty": 9})
    assert request.args["toolConfirmation"]["confirmed"] is False

    resumed = await send(runner, answer(request.id, {"confirmed": True}))
    assert CALLED == [("tea", 9)]
    final = resumed[-1]
    assert final.author == "shop" and final.content.parts[0].text == "recorded, 1 line(s)"
    assert final.is_final_response()
    session = await runner.session_service.get_session(app_name="a", user_id="u", session_id="s")
    assert session.state["lines"] == ["9 tea"]

    # The same answer again is stale: a clear error event, nothing runs, the runner survives.
    again = await send(runner, answer(request.id, {"confirmed": True}))
    assert [e.error_code for e in again] == ["codeact.no_pending_call"]
    assert "no pending call" in again[0].error_message and CALLED == [("tea", 9)]


async def test_denial_through_adk_confirmation_raises_in_the_script(anyio_backend):
    CALLED.clear()
    runner = await start(shop(True))
    [(_, request)] = requests_in(await send(runner, text("tea please")))
    resumed = await send(runner, answer(request.id, {"confirmed": False, "payload": {"reason": "over budget"}}))
    assert CALLED == []
    final = resumed[-1].content.parts[0].text
    assert final.startswith("refused:") and "denied by a human reviewer" in final and "over budget" in final


async def test_adk_client_wrapper_form_of_the_answer_is_read(anyio_backend):
    # adk web sends {"response": "<json>"}; ADK's ToolConfirmation.from_response_dict reads both.
    CALLED.clear()
    runner = await start(shop(True))
    [(_, request)] = requests_in(await send(runner, text("tea please")))
    resumed = await send(runner, answer(request.id, {"response": '{"confirmed": true}'}))
    assert CALLED == [("tea", 9)] and resumed[-1].content.parts[0].text == "recorded, 1 line(s)"


TWO_ORDERS = """```python
a = call_tool("record", {"item": "tea", "qty": 1})
b = call_tool("record", {"item": "cake", "qty": 9})
{"type": "final_result", "value": f"{a['lines']} then {b['lines']}"}
```"""


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_predicate_is_evaluated_per_call(anyio_backend, asynchronous):
    CALLED.clear()
    seen: list[dict[str, Any]] = []

    def big(item: str, qty: int) -> bool:
        seen.append({"item": item, "qty": qty})
        return qty > 5

    async def big_async(item: str, qty: int) -> bool:
        return big(item, qty)

    runner = await start(shop(big_async if asynchronous else big, TWO_ORDERS))
    events = await send(runner, text("tea and cake"))
    assert CALLED == [("tea", 1)]  # the predicate said no: it ran without asking
    [(_, request)] = requests_in(events)
    assert request.args["originalFunctionCall"]["args"] == {"item": "cake", "qty": 9}
    resumed = await send(runner, answer(request.id, {"confirmed": True}))
    assert CALLED == [("tea", 1), ("cake", 9)]
    assert resumed[-1].content.parts[0].text == "1 then 2"
    assert seen == [{"item": "tea", "qty": 1}, {"item": "cake", "qty": 9}]  # once per call, not on resume


async def test_failing_predicate_is_fed_to_the_script(anyio_backend):
    CALLED.clear()

    def broken(item: str, qty: int) -> bool:
        raise KeyError("policy table missing")

    script = ORDER_SCRIPT.replace("except PermissionError", "except RuntimeError")
    runner = await start(shop(broken, script))
    events = await send(runner, text("tea"))
    assert CALLED == [] and not requests_in(events)
    assert events[-1].content.parts[0].text.startswith("refused: the confirmation check of 'record' failed (KeyError)")


class CallsRecord(AdkBaseLlm):
    """An ADK model double: calls ``record(tea, 9)``, then says what the tool returned."""

    model: str = "calls-record"

    async def generate_content_async(
        self, llm_request: AdkLlmRequest, stream: bool = False
    ) -> AsyncGenerator[AdkLlmResponse, None]:
        responses = [p.function_response for c in llm_request.contents for p in c.parts or [] if p.function_response]
        if not responses:
            part = types.Part(function_call=types.FunctionCall(name="record", args={"item": "tea", "qty": 9}))
        else:
            part = types.Part(text=f"recorded, {responses[-1].response['lines']} line(s)")
        yield AdkLlmResponse(content=types.Content(role="model", parts=[part]))


def shape(events: list[Any]) -> list[tuple[Any, ...]]:
    """Each event as (author, role, [(part kind, name, args or response)], long-running
    count, skip_summarization, confirmation keys), ids replaced by their role in the flow."""
    ids: dict[str, str] = {}

    def alias(value: str | None) -> str | None:
        return None if value is None else ids.setdefault(value, f"id{len(ids)}")

    out = []
    for e in events:
        parts = []
        for p in e.content.parts if e.content else []:
            if p.function_call:
                args = dict(p.function_call.args or {})
                if "originalFunctionCall" in args:
                    args["originalFunctionCall"] = {**args["originalFunctionCall"]}
                    args["originalFunctionCall"]["id"] = alias(args["originalFunctionCall"]["id"])
                parts.append(("call", alias(p.function_call.id), p.function_call.name, args))
            elif p.function_response:
                parts.append(("response", alias(p.function_response.id), p.function_response.name))
            else:
                parts.append(("text", p.text))
        confirmations = {alias(k): v.model_dump() for k, v in e.actions.requested_tool_confirmations.items()}
        out.append(
            (
                e.author,
                e.content.role if e.content else None,
                parts,
                sorted(alias(i) for i in e.long_running_tool_ids or ()),
                bool(e.actions.skip_summarization),
                confirmations,
            )
        )
    return out


async def test_same_confirmation_flow_as_llm_agent(anyio_backend):
    CALLED.clear()
    tool = AdkFunctionTool(record, require_confirmation=True)
    llm_runner = await start(LlmAgent(name="shop", model=CallsRecord(), tools=[tool]))
    llm_paused = await send(llm_runner, text("tea please"))
    ours_runner = await start(shop(True))
    ours_paused = shown(await send(ours_runner, text("tea please")))
    assert CALLED == []
    assert shape(ours_paused) == shape(llm_paused)
    [(_, llm_request)] = requests_in(llm_paused)
    [(_, our_request)] = requests_in(ours_paused)
    assert our_request.args["toolConfirmation"] == llm_request.args["toolConfirmation"]
    assert {k: v for k, v in our_request.args["originalFunctionCall"].items() if k != "id"} == {
        k: v for k, v in llm_request.args["originalFunctionCall"].items() if k != "id"
    }

    # The app answers both the same way; each runs the tool once and ends with the same text.
    llm_done = await send(llm_runner, answer(llm_request.id, {"confirmed": True}))
    ours_done = await send(ours_runner, answer(our_request.id, {"confirmed": True}))
    assert CALLED == [("tea", 9), ("tea", 9)]
    assert llm_done[-1].content.parts[0].text == ours_done[-1].content.parts[0].text == "recorded, 1 line(s)"


async def test_unknown_and_malformed_answers_give_error_events(anyio_backend):
    CALLED.clear()
    runner = await start(shop(True))
    [(_, request)] = requests_in(await send(runner, text("tea please")))

    unknown = await send(runner, answer("adk-codeact-confirm-nope:1:0", {"confirmed": True}))
    assert [e.error_code for e in unknown] == ["codeact.no_pending_call"]
    assert "nope:1:0" in unknown[0].error_message and "record" in unknown[0].error_message  # names what is pending

    foreign = await send(runner, answer("adk-1234", {"confirmed": True}))  # not one of this agent's requests
    assert [e.error_code for e in foreign] == ["codeact.no_pending_call"]
    assert "answers no confirmation request of agent 'shop'" in foreign[0].error_message

    malformed = await send(runner, answer(request.id, {"confirmed": "perhaps", "colour": "red"}))
    assert [e.error_code for e in malformed] == ["codeact.bad_confirmation"]

    pending = await send(runner, text("something else"))  # a new message while the call waits
    assert [e.error_code for e in pending] == ["codeact.calls_pending"]

    assert CALLED == []  # nothing ran; the call still waits and can be approved
    done = await send(runner, answer(request.id, {"confirmed": True}))
    assert CALLED == [("tea", 9)] and done[-1].content.parts[0].text == "recorded, 1 line(s)"


async def test_approval_survives_a_new_adapter_and_store(anyio_backend, tmp_path):
    """The id of the request is derived from the codeact call key: a new adapter over the same
    codeact database (an app restart) maps the answer back with no table kept in memory."""
    CALLED.clear()
    adk_sessions = AdkSessionService()
    with SqliteSessionService(tmp_path / "codeact.db") as store:
        first = await start(shop(True, session_service=store), adk_sessions)
        [(_, request)] = requests_in(await send(first, text("tea please")))
    with SqliteSessionService(tmp_path / "codeact.db") as store:
        second = await start(shop(True, session_service=store), adk_sessions)
        done = await send(second, answer(request.id, {"confirmed": True}))
    assert CALLED == [("tea", 9)] and done[-1].content.parts[0].text == "recorded, 1 line(s)"


# ------------------------------------------------------------------ codeact events as ADK events


def add(a: int, b: int, tool_context: ToolContext) -> int:
    """Adds two numbers and remembers the sum."""
    tool_context.state["last_sum"] = a + b
    return a + b


STEP_ONE = """Let me add.
```python
print("hi")
{"type": "observation", "value": call_tool("add", {"a": 1, "b": 2})}
```"""
STEP_TWO = """```python
{"type": "final_result", "value": "three"}
```"""


async def test_a_two_turn_run_as_adk_events(anyio_backend):
    replies = iter([STEP_ONE, STEP_TWO])

    def model(request: Any) -> LlmResponse:
        reply = next(replies)
        return LlmResponse(
            content=Content(role="model", parts=[Part(text=reply)]),
            usage=Usage(prompt_tokens=10, completion_tokens=len(reply) // 10),
        )

    agent = CodeActAgent(
        name="coder", model=ScriptedModel(model), runtime=MontyRuntime(), tools=from_adk([AdkFunctionTool(add)])
    )
    runner = await start(CodeActAdkAgent.wrap(agent, run_config=RunConfig(emit_tool_events=True)))
    events = await send(runner, text("add 1 and 2"))

    kinds = [(e.custom_metadata or {}).get("codeact_kind") for e in events]
    # The tool's state change rides on the tool's function_response (ADK would count an event
    # with only a state delta as final).
    # Each complete model reply rides, stored, in front of the next event (the tool's
    # function_call, the script_result): no partial event without streaming (StreamingMode.NONE).
    assert kinds == [
        "tool_call",
        "tool_response",
        "script_result",
        "script_result",
        None,
    ]
    assert [(e.custom_metadata or {}).get("codeact_carries") for e in events] == [
        ["model_reply"],
        None,
        None,
        ["model_reply"],
        None,
    ]
    assert all(e.author == "coder" for e in events)
    # Under ADK's own rule only the answer is final.
    assert [e.is_final_response() for e in events] == [False] * 4 + [True]
    assert not any(e.partial for e in events)

    reply = events[0]
    assert reply.content.role == "model" and reply.content.parts[0].text == STEP_ONE
    code = reply.content.parts[1].executable_code
    assert code.language == types.Language.PYTHON and code.code.startswith('print("hi")')
    assert reply.usage_metadata.prompt_token_count == 10
    assert reply.usage_metadata.candidates_token_count == len(STEP_ONE) // 10
    assert reply.custom_metadata["codeact_model_calls"] == 1

    call, response = events[0].content.parts[2].function_call, events[1].content.parts[0].function_response
    assert events[0].content.role == "model" and events[1].content.role == "user"
    assert (call.name, call.args) == ("add", {"a": 1, "b": 2})
    assert (response.id, response.name, response.response) == (call.id, "add", {"result": 3})
    assert events[1].actions.state_delta == {"last_sum": 3}

    result = events[2].content
    assert result.role == "user"
    assert [p.text for p in result.parts[:-1]] == ["Observation:\n3", "Output (stdout):\nhi\n"]
    second = events[3].content
    assert second.parts[0].text == STEP_TWO and second.parts[1].executable_code is not None
    assert result.parts[-1].code_execution_result.outcome == types.Outcome.OUTCOME_OK
    assert result.parts[-1].code_execution_result.output == "hi\n"

    final = events[-1]
    assert final.content.parts[0].text == "three" and final.is_final_response()
    assert final.usage_metadata.prompt_token_count == 20
    assert final.custom_metadata == {"codeact_model_calls": 2}

    session = await runner.session_service.get_session(app_name="a", user_id="u", session_id="s")
    assert session.state["last_sum"] == 3 and not any(k.startswith("codeact") for k in session.state)
    stored = [e for e in session.events if e.author == "coder"]
    # ADK stores every event (none is partial), the model replies with them.
    assert [(e.custom_metadata or {}).get("codeact_kind") for e in stored] == kinds
    assert sum(1 for e in stored for p in e.content.parts if p.executable_code is not None) == 2


async def test_codeact_runner_predicate_without_adk_runner(anyio_backend):
    """The per-call predicate is codeact's, not the adapter's: a plain codeact Runner honours it."""
    CALLED.clear()
    [tool] = from_adk([AdkFunctionTool(record, require_confirmation=lambda item, qty: qty > 5)])
    agent = CodeActAgent(name="shop", model=ScriptedModel([TWO_ORDERS]), runtime=MontyRuntime(), tools=[tool])
    runner = Runner(app_name="a", agent=agent, auto_create_session=True)
    events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go")]
    [asked] = events[-1].actions.requested_tool_confirmations.values()
    assert asked.args == {"item": "cake", "qty": 9} and CALLED == [("tea", 1)]


class TransfersTo(AdkBaseLlm):
    """An ADK model double: hands the conversation to ``target`` (and says "back" if asked again)."""

    model: str = "transfers"
    target: str

    async def generate_content_async(
        self, llm_request: AdkLlmRequest, stream: bool = False
    ) -> AsyncGenerator[AdkLlmResponse, None]:
        call = types.FunctionCall(name="transfer_to_agent", args={"agent_name": self.target})
        yield AdkLlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


async def test_confirmation_of_a_sub_agent_returns_to_it(anyio_backend):
    """Under an LlmAgent root, ADK routes the answer to the agent that asked (the author of the
    ``adk_request_confirmation`` call): the paused CodeAct sub-agent, not the root."""
    CALLED.clear()
    root = LlmAgent(name="root", model=TransfersTo(target="shop"), sub_agents=[shop(True)])
    runner = await start(root)
    [(event, request)] = requests_in(await send(runner, text("tea please")))
    assert event.author == "shop" and CALLED == []
    resumed = await send(runner, answer(request.id, {"confirmed": True}))
    assert CALLED == [("tea", 9)]
    assert (resumed[-1].author, resumed[-1].content.parts[0].text) == ("shop", "recorded, 1 line(s)")


def start_refund(order: int) -> dict[str, Any]:
    """Opens a refund ticket; a person answers it later."""
    return {"ticket": f"T-{order}", "status": "pending"}


async def test_long_running_call_is_answered_with_its_function_response(anyio_backend):
    from google.adk.tools import LongRunningFunctionTool

    script = """```python
r = call_tool("start_refund", {"order": 7})
{"type": "final_result", "value": f"refund {r['status']}"}
```"""
    agent = CodeActAgent(
        name="desk",
        model=ScriptedModel(lambda request: script),
        runtime=MontyRuntime(),
        tools=from_adk([LongRunningFunctionTool(start_refund)]),
    )
    runner = await start(CodeActAdkAgent.wrap(agent))
    events = await send(runner, text("refund order 7"))
    [paused] = [e for e in events if e.long_running_tool_ids]
    [call] = paused.get_function_calls()
    assert (call.name, call.args, paused.long_running_tool_ids) == ("start_refund", {"order": 7}, {call.id})
    reply = types.FunctionResponse(name="start_refund", id=call.id, response={"status": "approved"})
    done = await send(runner, types.Part(function_response=reply))
    assert done[-1].content.parts[0].text == "refund approved"


async def test_long_running_call_answered_with_an_adk_error_response_raises_in_the_script(anyio_backend):
    """ADK's error shape ({"error": ...}) fails the call: the script catches RuntimeError (issue 22)."""
    from google.adk.tools import LongRunningFunctionTool

    script = """```python
try:
    r = call_tool("start_refund", {"order": 7})
    answer = f"refund {r}"
except RuntimeError as exc:
    answer = f"failed: {exc}"
{"type": "final_result", "value": answer}
```"""
    agent = CodeActAgent(
        name="desk",
        model=ScriptedModel(lambda request: script),
        runtime=MontyRuntime(),
        tools=from_adk([LongRunningFunctionTool(start_refund)]),
    )
    runner = await start(CodeActAdkAgent.wrap(agent))
    events = await send(runner, text("refund order 7"))
    [paused] = [e for e in events if e.long_running_tool_ids]
    [call] = paused.get_function_calls()
    reply = types.FunctionResponse(name="start_refund", id=call.id, response={"error": "payment provider down"})
    done = await send(runner, types.Part(function_response=reply))
    answer = done[-1].content.parts[0].text
    assert answer.startswith("failed: ") and "payment provider down" in answer and "start_refund" in answer


async def test_a_dict_with_more_than_an_error_key_is_a_result(anyio_backend):
    """Only ADK's exact error shape fails the call; a result that has an "error" field among
    others is the tool's value."""
    from google.adk.tools import LongRunningFunctionTool

    script = """```python
r = call_tool("start_refund", {"order": 7})
{"type": "final_result", "value": f"{r['status']}/{r['error']}"}
```"""
    agent = CodeActAgent(
        name="desk",
        model=ScriptedModel(lambda request: script),
        runtime=MontyRuntime(),
        tools=from_adk([LongRunningFunctionTool(start_refund)]),
    )
    runner = await start(CodeActAdkAgent.wrap(agent))
    events = await send(runner, text("refund order 7"))
    [paused] = [e for e in events if e.long_running_tool_ids]
    [call] = paused.get_function_calls()
    reply = types.FunctionResponse(name="start_refund", id=call.id, response={"status": "partial", "error": "none"})
    done = await send(runner, types.Part(function_response=reply))
    assert done[-1].content.parts[0].text == "partial/none"


async def test_predicate_survives_a_prefixed_toolset(anyio_backend):
    from codeact import FunctionToolset

    CALLED.clear()
    [tool] = from_adk([AdkFunctionTool(record, require_confirmation=lambda item, qty: qty > 5)])
    toolset = FunctionToolset([tool], prefix="shop")
    script = TWO_ORDERS.replace('"record"', '"shop_record"')
    agent = CodeActAgent(name="shop", model=ScriptedModel([script]), runtime=MontyRuntime(), toolsets=[toolset])
    runner = Runner(app_name="a", agent=agent, auto_create_session=True)
    events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go")]
    [asked] = events[-1].actions.requested_tool_confirmations.values()
    assert (asked.tool_name, asked.args) == ("shop_record", {"item": "cake", "qty": 9}) and CALLED == [("tea", 1)]
