"""Transfer to another agent: valid and unknown targets, after-agent callbacks skipped,
sub-agents and runner-supplied targets, and the disallow flags."""

from __future__ import annotations

import pytest

from agent_helpers import final, run, run_direct, scripted_agent
from codeact import BaseAgent, Content, Event, RunConfig
from codeact.testing import PlannedComplete

pytestmark = pytest.mark.anyio


class TextAgent(BaseAgent):
    """A sub-agent that answers with a fixed text."""

    reply: str = "sub-agent reply"

    async def run_async(self, ctx):  # type: ignore[override]
        yield Event(invocation_id=ctx.invocation_id, author=self.name, content=Content.from_text(self.reply, "model"))


async def test_transfer_to_valid_target_ends_loop_with_transfer_event() -> None:
    billing, support = TextAgent(name="billing", reply="billing here"), TextAgent(name="support")
    agent, _, _ = scripted_agent(
        [[PlannedComplete({"type": "transfer_to_agent", "agent_name": "billing"})]], sub_agents=[billing, support]
    )
    events, _, _ = await run(agent)
    transfer = events[0]
    assert transfer.author == "coder"
    assert transfer.actions.transfer_to_agent == "billing"
    assert transfer.content is None
    # the runner hands over to the sub-agent
    assert (events[-1].author, events[-1].text) == ("billing", "billing here")


async def test_unknown_transfer_target_feeds_error_then_model_retries() -> None:
    agent, _, model = scripted_agent(
        [[PlannedComplete({"type": "transfer_to_agent", "agent_name": "ghost"})], [final("done")]],
        sub_agents=[TextAgent(name="billing"), TextAgent(name="support")],
    )
    events, _, _ = await run(agent)
    assert all(e.actions.transfer_to_agent is None for e in events)
    assert len(model.requests) == 2
    assert (
        model.requests[1].contents[-1].text
        == "Error during execution:\ncannot transfer to 'ghost'; valid agents: billing, support"
    )
    assert events[-1].text == "done"


async def test_transfer_skips_after_agent_callbacks() -> None:
    agent, _, _ = scripted_agent(
        [[PlannedComplete({"type": "transfer_to_agent", "agent_name": "child"})]],
        sub_agents=[TextAgent(name="child")],
        after_agent=lambda ctx: "after-done",
    )
    events = await run_direct(agent)
    assert [e.actions.transfer_to_agent for e in events] == ["child"]


def transfer_program(*names: str) -> list[list[PlannedComplete]]:
    return [[PlannedComplete({"type": "transfer_to_agent", "agent_name": n})] for n in names]


async def test_run_merges_sub_agents_and_runner_targets() -> None:
    agent, _, model = scripted_agent(transfer_program("peer"), sub_agents=[TextAgent(name="child")])
    events = await run_direct(agent, run_config=RunConfig(transfer_targets=["boss", "peer"], parent_agent="boss"))
    assert events[-1].actions.transfer_to_agent == "peer"
    assert "child, boss, peer" in model.requests[0].system_instruction


async def test_disallow_transfer_to_parent_filters_only_the_parent() -> None:
    agent, _, model = scripted_agent(transfer_program("boss", "peer"), disallow_transfer_to_parent=True)
    events = await run_direct(agent, run_config=RunConfig(transfer_targets=["boss", "peer"], parent_agent="boss"))
    assert len(model.requests) == 2
    assert "cannot transfer to 'boss'; valid agents: peer" in model.requests[1].contents[-1].text
    assert events[-1].actions.transfer_to_agent == "peer"


async def test_disallow_transfer_to_peers_filters_peers_but_keeps_parent() -> None:
    agent, _, model = scripted_agent(transfer_program("peer", "boss"), disallow_transfer_to_peers=True)
    events = await run_direct(agent, run_config=RunConfig(transfer_targets=["boss", "peer"], parent_agent="boss"))
    assert "cannot transfer to 'peer'; valid agents: boss" in model.requests[1].contents[-1].text
    assert events[-1].actions.transfer_to_agent == "boss"


async def test_disallow_flags_do_not_filter_sub_agents() -> None:
    agent, _, model = scripted_agent(
        transfer_program("child"),
        sub_agents=[TextAgent(name="child")],
        disallow_transfer_to_peers=True,
        disallow_transfer_to_parent=True,
    )
    events = await run_direct(agent, run_config=RunConfig(transfer_targets=["boss", "peer"], parent_agent="boss"))
    assert events[-1].actions.transfer_to_agent == "child"
    assert len(model.requests) == 1
