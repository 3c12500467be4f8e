"""Plugins: hooks around the user message, run start/end, each event, model calls and
tool calls; observe, rewrite, short-circuit; before the agent's own callbacks; in order."""

from __future__ import annotations

import pytest

from codeact import CodeActAgent, Content, LlmResponse, MontyRuntime, Runner, ScriptedModel
from codeact.plugins import Plugin
from parity_helpers import APP, ask, py

pytestmark = pytest.mark.anyio


class Recorder(Plugin):
    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__(name)
        self.log = log

    def on_user_message(self, ctx, content):
        self.log.append(f"{self.name}.user")
        return Content.from_text(content.text + f" +{self.name}")

    async def before_run(self, ctx):
        self.log.append(f"{self.name}.before_run")

    def after_run(self, ctx):
        self.log.append(f"{self.name}.after_run")

    def on_event(self, ctx, event):
        self.log.append(f"{self.name}.event")

    def before_model(self, ctx, request):
        self.log.append(f"{self.name}.before_model")

    def after_model(self, ctx, response):
        self.log.append(f"{self.name}.after_model")

    def before_tool(self, tool, args, tool_context):
        self.log.append(f"{self.name}.before_tool")
        args["n"] = args["n"] * 10  # rewrite the arguments in place

    async def after_tool(self, tool, args, tool_context, result):
        self.log.append(f"{self.name}.after_tool")
        return result + 1


async def test_plugins_compose_in_order_before_the_agents_callbacks(service) -> None:
    log: list[str] = []

    def double(n: int) -> int:
        """Doubles."""
        log.append("tool")
        return n * 2

    model = ScriptedModel([py('{"type": "final_result", "value": call_tool("double", {"n": 1})}')])
    agent = CodeActAgent(
        name="c",
        model=model,
        runtime=MontyRuntime(),
        tools=[double],
        plugins=[Recorder("p1", log), Recorder("p2", log)],
        before_agent=lambda ctx: log.append("cb.before_agent"),
        after_agent=lambda ctx: log.append("cb.after_agent"),
        before_model=lambda ctx, req: log.append("cb.before_model"),
        after_model=lambda ctx, resp: log.append("cb.after_model"),
        before_tool=lambda tool, args, ctx: log.append("cb.before_tool"),
        after_tool=lambda tool, args, ctx, value: log.append(f"cb.after_tool={value}"),
    )
    events = await ask(Runner(app_name=APP, agent=agent, session_service=service), "hi")
    assert model.requests[0].contents[-1].text == "hi +p1 +p2"
    # n: 1 -> 10 -> 100; tool doubles to 200; after_tool plugins add 1 each
    assert events[-1].text == "202"
    events_logged = [x for x in log if x.endswith(".event")]
    assert len(events_logged) == 2 * len(events)
    assert [x for x in log if not x.endswith(".event")] == [
        "p1.user", "p2.user",
        "p1.before_run", "p2.before_run", "cb.before_agent",
        "p1.before_model", "p2.before_model", "cb.before_model",
        "p1.after_model", "p2.after_model", "cb.after_model",
        "p1.before_tool", "p2.before_tool", "cb.before_tool", "tool",
        "p1.after_tool", "p2.after_tool", "cb.after_tool=202",
        "cb.after_agent",
        "p1.after_run", "p2.after_run",
    ]  # fmt: skip


class Cache(Plugin):
    """Short-circuits the model and the tool."""

    def before_model(self, ctx, request):
        return LlmResponse(content=Content.from_text(py('{"type": "final_result", "value": call_tool("t")}'), "model"))

    def before_tool(self, tool, args, tool_context):
        return "from cache"

    def on_event(self, ctx, event):
        if event.content is not None:
            return event.model_copy(update={"content": Content.from_text(event.text + " [cached]", "model")})
        return None


async def test_plugins_short_circuit_model_and_tool_and_rewrite_events(service) -> None:
    calls = []

    def t() -> str:
        """Never runs."""
        calls.append(1)
        return "real"

    model = ScriptedModel([])
    agent = CodeActAgent(
        name="c",
        model=model,
        runtime=MontyRuntime(),
        tools=[t],
        plugins=[Cache()],
        before_model=lambda ctx, req: calls.append("cb"),
    )
    events = await ask(Runner(app_name=APP, agent=agent, session_service=service))
    assert events[-1].text == "from cache [cached]"
    assert model.requests == [] and calls == []


async def test_before_run_short_circuits_the_agent(service) -> None:
    class Closed(Plugin):
        def before_run(self, ctx):
            return "we are closed"

    model = ScriptedModel([])
    agent = CodeActAgent(name="c", model=model, runtime=MontyRuntime(), plugins=[Closed()])
    events = await ask(Runner(app_name=APP, agent=agent, session_service=service))
    assert [e.text for e in events] == ["we are closed"] and model.requests == []
