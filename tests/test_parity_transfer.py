"""Transfer across three agents: sub_agents, runner-supplied parent and peers, the
disallow flags, the prompt listing exactly the allowed names, an unknown name fed back, and
the runner handing the turn to a CodeActAgent or any other BaseAgent."""

from __future__ import annotations

import re

import pytest

from codeact import BaseAgent, CodeActAgent, Content, Event, MontyRuntime, Runner, ScriptedModel
from parity_helpers import APP, ask, final, py

pytestmark = pytest.mark.anyio


def offered(prompt: str) -> list[str]:
    m = re.search(r"Valid agents: (.*)\.", prompt)
    return m.group(1).split(", ") if m else []


def transfer(name: str) -> str:
    return py(f'{{"type": "transfer_to_agent", "agent_name": "{name}"}}')


class Echo(BaseAgent):
    """A non-CodeAct agent: answers with a fixed text."""

    async def run_async(self, ctx):
        yield Event(invocation_id=ctx.invocation_id, author=self.name, content=Content.from_text("echo here", "model"))


async def test_transfer_across_three_agents_with_disallow_flags(service) -> None:
    billing_model = ScriptedModel([transfer("root"), transfer("support"), final("billing done")])
    support_model = ScriptedModel([transfer("billing"), transfer("root"), final("support done")])
    billing = CodeActAgent(
        name="billing", model=billing_model, runtime=MontyRuntime(), disallow_transfer_to_parent=True
    )
    support = CodeActAgent(name="support", model=support_model, runtime=MontyRuntime(), disallow_transfer_to_peers=True)
    root_model = ScriptedModel([transfer("nobody"), transfer("billing"), final("root done")])
    root = CodeActAgent(name="root", model=root_model, runtime=MontyRuntime(), sub_agents=[billing, support])
    runner = Runner(app_name=APP, agent=root, session_service=service)

    events = await ask(runner, "help")
    assert offered(root_model.requests[0].system_instruction) == ["billing", "support"]
    # an unknown name is fed back as an error; the model gets another turn
    assert "cannot transfer to 'nobody'; valid agents: billing, support" in root_model.requests[1].contents[-1].text
    # billing: parent disallowed, peer allowed
    assert offered(billing_model.requests[0].system_instruction) == ["support"]
    assert "cannot transfer to 'root'" in billing_model.requests[1].contents[-1].text
    # support: peers disallowed, parent allowed
    assert offered(support_model.requests[0].system_instruction) == ["root"]
    assert "cannot transfer to 'billing'" in support_model.requests[1].contents[-1].text
    transfers = [(e.author, e.actions.transfer_to_agent) for e in events if e.actions.transfer_to_agent]
    assert transfers == [("root", "billing"), ("billing", "support"), ("support", "root")]
    # the turn came back to root (runner-supplied parent) and root answered
    assert (events[-1].author, events[-1].text) == ("root", "root done")


async def test_runner_hands_the_turn_to_any_base_agent(service) -> None:
    root = CodeActAgent(
        name="root", model=ScriptedModel([transfer("echo")]), runtime=MontyRuntime(), sub_agents=[Echo(name="echo")]
    )
    runner = Runner(app_name=APP, agent=root, session_service=service)
    events = await ask(runner, "hi")
    assert [e.author for e in events if e.kind is None] == ["root", "echo"]
    assert events[-1].text == "echo here"
