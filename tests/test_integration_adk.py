"""codeact[adk] (first part): ADK function tools in a CodeActAgent, checked against a real ADK
``LlmAgent`` running the same ``FunctionTool`` (offline: a model double subclassing ADK's BaseLlm)."""

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
from google.adk.tools import FunctionTool as AdkFunctionTool
from google.adk.tools import LongRunningFunctionTool as AdkLongRunningFunctionTool
from google.adk.tools import ToolContext
from google.genai import types

from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel
from codeact.integrations.adk import from_adk

pytestmark = pytest.mark.anyio
CALLED: list[tuple[str, int]] = []


def record(item: str, qty: int, tool_context: ToolContext) -> dict[str, Any]:
    """Records an order line.

    Args:
        item: what was ordered.
        qty: how many.
    """
    CALLED.append((item, qty))
    lines = list(tool_context.state.get("lines", []))
    tool_context.state["lines"] = [*lines, f"{qty} {item}"]
    tool_context.state["user:last_item"] = item
    return {"ok": True, "lines": len(lines) + 1}


class TwoTurnModel(AdkBaseLlm):
    """An ADK model double: calls ``record`` twice, then answers."""

    model: str = "two-turn"

    async def generate_content_async(
        self, llm_request: AdkLlmRequest, stream: bool = False
    ) -> AsyncGenerator[AdkLlmResponse, None]:
        responses = sum(1 for c in llm_request.contents for p in c.parts or [] if p.function_response)
        if responses < 2:
            args = {"item": ["tea", "cake"][responses], "qty": responses + 1}
            part = types.Part(function_call=types.FunctionCall(name="record", args=args))
        else:
            part = types.Part(text="done")
        yield AdkLlmResponse(content=types.Content(role="model", parts=[part]))


def merged_delta(events: list[Any]) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    for e in events:
        delta.update(e.actions.state_delta or {})
    return delta


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # ADK's runner is asyncio-only
async def test_same_function_tool_gives_the_same_state_delta_as_under_llm_agent(anyio_backend):
    CALLED.clear()
    adk_tool = AdkFunctionTool(record)
    adk_agent = LlmAgent(name="shop", model=TwoTurnModel(), tools=[adk_tool])
    adk_runner = InMemoryRunner(agent=adk_agent, app_name="a")
    await adk_runner.session_service.create_session(app_name="a", user_id="u", session_id="s")
    message = types.Content(role="user", parts=[types.Part(text="order")])
    adk_events = [e async for e in adk_runner.run_async(user_id="u", session_id="s", new_message=message)]
    adk_delta = merged_delta(adk_events)
    assert CALLED == [("tea", 1), ("cake", 2)]

    CALLED.clear()
    script = (
        '```python\ncall_tool("record", {"item": "tea", "qty": 1})\ncall_tool("record", {"item": "cake", "qty": 2})\n'
        '{"type": "final_result", "value": "done"}\n```'
    )
    agent = CodeActAgent(name="shop", model=ScriptedModel([script]), runtime=MontyRuntime(), tools=from_adk([adk_tool]))
    runner = Runner(app_name="a", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
    events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="order")]
    assert events[-1].text == "done"
    assert CALLED == [("tea", 1), ("cake", 2)]
    ours = {k: v for k, v in merged_delta(events).items() if not k.startswith("codeact")}
    assert ours == adk_delta == {"lines": ["1 tea", "2 cake"], "user:last_item": "cake"}


def test_name_description_and_schema_match_adk():
    adk_tool = AdkFunctionTool(record)
    [tool] = from_adk([adk_tool])
    declaration = adk_tool._get_declaration()
    assert tool.name == declaration.name == "record"
    assert tool.description.startswith("Records an order line.")
    assert set(tool.parameters["properties"]) == {"item", "qty"}  # tool_context is not a parameter
    assert sorted(tool.parameters["required"]) == ["item", "qty"]


async def test_require_confirmation_is_honoured(anyio_backend):
    CALLED.clear()
    gated, predicate, plain = from_adk(
        [
            AdkFunctionTool(record, require_confirmation=True),
            AdkFunctionTool(record, require_confirmation=lambda item, qty: qty > 5),
            AdkFunctionTool(record),
        ]
    )
    assert gated.requires_confirmation and predicate.requires_confirmation and not plain.requires_confirmation
    script = '```python\ncall_tool("record", {"item": "tea", "qty": 9})\n```'
    agent = CodeActAgent(name="shop", model=ScriptedModel([script]), runtime=MontyRuntime(), tools=[gated])
    runner = Runner(app_name="a", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
    events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="order")]
    [asked] = events[-1].actions.requested_tool_confirmations.values()
    assert (asked.tool_name, asked.args) == ("record", {"item": "tea", "qty": 9})
    assert CALLED == []


def test_long_running_tools_stay_long_running():
    def start_job(name: str) -> dict[str, str]:
        """Starts a job."""
        return {"status": "pending"}

    [tool] = from_adk([AdkLongRunningFunctionTool(start_job)])
    assert tool.is_long_running and tool.name == "start_job"


# ------------------------------------------------------------------ a CodeActAgent inside ADK


def tally(item: str, tool_context: ToolContext) -> int:
    """Counts an item in session state; returns the new count."""
    count = int(tool_context.state.get(f"count:{item}", 0)) + 1
    tool_context.state[f"count:{item}"] = count
    return count


CODER_SCRIPT = (
    '```python\nn = call_tool("tally", {"item": "tea"})\nn = call_tool("tally", {"item": "tea"})\n'
    '{"type": "final_result", "value": f"tea counted {n} times"}\n```'
)


def coder():
    from codeact.integrations.adk import CodeActAdkAgent

    agent = CodeActAgent(
        name="coder",
        description="Counts things by writing Python.",
        model=ScriptedModel(lambda request: CODER_SCRIPT),
        runtime=MontyRuntime(),
        tools=from_adk([AdkFunctionTool(tally)]),
    )
    return CodeActAdkAgent.wrap(agent)


class CallsThen(AdkBaseLlm):
    """An ADK model double: one function call (``name``, ``args``), then echoes the last
    function response (or says ``"handed over"`` when there is none)."""

    model: str = "calls-then"
    call_name: str
    call_args: dict[str, Any]

    async def generate_content_async(
        self, llm_request: AdkLlmRequest, stream: bool = False
    ) -> AsyncGenerator[AdkLlmResponse, None]:
        responses = [p.function_response for c in llm_request.contents for p in c.parts or [] if p.function_response]
        if not responses:
            part = types.Part(function_call=types.FunctionCall(name=self.call_name, args=self.call_args))
        else:
            part = types.Part(text=f"root saw: {responses[-1].response}")
        yield AdkLlmResponse(content=types.Content(role="model", parts=[part]))


async def run_adk(root: Any, text: str) -> tuple[list[Any], Any]:
    runner = InMemoryRunner(agent=root, app_name="a")
    await runner.session_service.create_session(app_name="a", user_id="u", session_id="s")
    message = types.Content(role="user", parts=[types.Part(text=text)])
    events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message=message)]
    session = await runner.session_service.get_session(app_name="a", user_id="u", session_id="s")
    return events, session


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_codeact_agent_as_llm_agent_sub_agent(anyio_backend):
    sub = coder()
    root = LlmAgent(
        name="root",
        model=CallsThen(call_name="transfer_to_agent", call_args={"agent_name": "coder"}),
        sub_agents=[sub],
    )
    events, session = await run_adk(root, "count the tea")
    texts = [
        (e.author, e.content.parts[0].text) for e in events if e.content and e.content.parts and e.content.parts[0].text
    ]
    assert ("coder", "tea counted 2 times") in texts
    assert session.state["count:tea"] == 2  # the codeact tool's state delta reached the ADK session
    assert not any(k.startswith("codeact") for k in session.state)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_codeact_agent_through_agent_tool(anyio_backend):
    from google.adk.tools.agent_tool import AgentTool

    root = LlmAgent(
        name="root",
        model=CallsThen(call_name="coder", call_args={"request": "count the tea"}),
        tools=[AgentTool(agent=coder(), include_plugins=False)],
    )
    events, _session = await run_adk(root, "please count")
    final = events[-1]
    assert final.author == "root" and final.content.parts[0].text == "root saw: {'result': 'tea counted 2 times'}"


# ------------------------------------------------------------------ ADK's own idioms


TWO_TURNS = [
    'Let me count.\n```python\nprint("counting")\n'
    '{"type": "observation", "value": call_tool("tally", {"item": "tea"})}\n```',
    '```python\nn = call_tool("tally", {"item": "tea"})\n'
    '{"type": "final_result", "value": f"tea counted {n} times"}\n```',
]


def two_turn_coder(**kwargs: Any):
    from codeact.integrations.adk import CodeActAdkAgent

    replies = iter(TWO_TURNS)
    agent = CodeActAgent(
        name="coder",
        description="Counts things by writing Python.",
        model=ScriptedModel(lambda request: next(replies)),
        runtime=MontyRuntime(),
        tools=from_adk([AdkFunctionTool(tally)]),
    )
    return CodeActAdkAgent.wrap(agent, **kwargs)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("tool_events", [False, True])
async def test_adk_quickstart_loop_reads_the_codeact_answer(anyio_backend, tool_events):
    """ADK's documented loop, unchanged, over an LlmAgent that hands over to a codeact sub-agent."""
    from google.adk.runners import Runner as AdkRunner
    from google.adk.sessions import InMemorySessionService as AdkSessions

    from codeact import RunConfig

    root = LlmAgent(
        name="root",
        model=CallsThen(call_name="transfer_to_agent", call_args={"agent_name": "coder"}),
        sub_agents=[two_turn_coder(run_config=RunConfig(emit_tool_events=tool_events))],
    )
    sessions = AdkSessions()
    runner = AdkRunner(app_name="a", agent=root, session_service=sessions)
    await sessions.create_session(app_name="a", user_id="u", session_id="s")
    content = types.Content(role="user", parts=[types.Part(text="count the tea twice")])

    final_response_text = None
    async for event in runner.run_async(user_id="u", session_id="s", new_message=content):
        if event.is_final_response():
            final_response_text = event.content.parts[0].text
            break

    assert final_response_text == "tea counted 2 times"
    session = await sessions.get_session(app_name="a", user_id="u", session_id="s")
    assert session.state["count:tea"] == 2  # both tool calls ran and their state reached ADK
    # Every event the coder stored is non-final under ADK's rule, but the answer.
    coder_events = [e for e in session.events if e.author == "coder"]
    assert [e.is_final_response() for e in coder_events] == [False] * (len(coder_events) - 1) + [True]
    assert all(e.content is not None for e in coder_events)  # no bare state-delta event


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_adk_state_changes_reach_codeact_templates_on_every_invocation(anyio_backend):
    from google.adk.runners import Runner as AdkRunner
    from google.adk.sessions import InMemorySessionService as AdkSessions

    from codeact.integrations.adk import CodeActAdkAgent

    prompts: list[str] = []

    def model(request: Any) -> str:
        prompts.append(request.system_instruction or "")
        return '```python\n{"type": "final_result", "value": "ok"}\n```'

    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel(model),
        runtime=MontyRuntime(),
        instruction="mood={mood} tier={user:tier} motd={app:motd} scratch={temp:scratch?}",
    )
    sessions = AdkSessions()
    runner = AdkRunner(app_name="a", agent=CodeActAdkAgent.wrap(agent), session_service=sessions)
    await sessions.create_session(
        app_name="a", user_id="u", session_id="s", state={"mood": "calm", "user:tier": "free", "app:motd": "hi"}
    )

    async def ask(**kwargs: Any) -> None:
        content = types.Content(role="user", parts=[types.Part(text="go")])
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=content, **kwargs):
            pass

    await ask()
    await ask(state_delta={"mood": "grumpy", "user:tier": "gold", "app:motd": "bye", "temp:scratch": "t1"})
    await ask()
    assert "mood=calm tier=free motd=hi scratch=" in prompts[0]
    assert "mood=grumpy tier=gold motd=bye scratch=t1" in prompts[1]  # temp: lives for its invocation only
    assert "mood=grumpy tier=gold motd=bye scratch=" in prompts[2] and "t1" not in prompts[2]

    # The scoped keys landed in codeact's own scopes: another session of the same user sees them.
    store = runner.agent._store()
    other = await store.create_session(app_name="a", user_id="u", session_id="s2")
    assert other.state == {"user:tier": "gold", "app:motd": "bye"}


def test_an_adk_tool_given_directly_names_from_adk():
    with pytest.raises(
        TypeError, match=r"^FunctionTool is an ADK tool: wrap it with codeact.integrations.adk.from_adk"
    ):
        CodeActAgent(name="shop", model=ScriptedModel([]), runtime=MontyRuntime(), tools=[AdkFunctionTool(record)])


def triage(ticket: str, tool_context: ToolContext) -> str:
    """Triages a ticket and picks the workflow edge to follow."""
    tool_context.actions.route = ["urgent"] if "down" in ticket else "normal"
    return "triaged"


TRIAGE = (
    '```python\nr = call_tool("triage", {"ticket": "site down"})\nprint(r)\n'
    '{"type": "final_result", "value": "sent on"}\n```'
)


async def test_a_tools_route_rides_on_the_next_stored_event(anyio_backend):
    agent = CodeActAgent(
        name="desk", model=ScriptedModel([TRIAGE]), runtime=MontyRuntime(), tools=from_adk([AdkFunctionTool(triage)])
    )
    runner = Runner(app_name="a", agent=agent, auto_create_session=True)
    events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="triage")]
    routed = [(e.kind, e.actions.route) for e in events if e.actions.route is not None]
    assert routed == [("script_result", ["urgent"])]  # once, on the first event after the call
    session = await runner.session_service.get_session(app_name="a", user_id="u", session_id="s")
    assert [e.actions.route for e in session.events if e.actions.route is not None] == [["urgent"]]  # stored


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_tools_route_reaches_adk_event_actions(anyio_backend):
    from google.adk.events import EventActions as AdkEventActions

    from codeact.integrations.adk import CodeActAdkAgent

    assert "route" in AdkEventActions.model_fields  # ADK 2: workflow graph edges
    agent = CodeActAgent(
        name="desk", model=ScriptedModel([TRIAGE]), runtime=MontyRuntime(), tools=from_adk([AdkFunctionTool(triage)])
    )
    events, session = await run_adk(CodeActAdkAgent.wrap(agent), "triage")
    assert [e.actions.route for e in events if e.actions.route is not None] == [["urgent"]]
    assert [e.actions.route for e in session.events if e.actions.route is not None] == [["urgent"]]
    assert events[-1].content.parts[0].text == "sent on"
