"""A pydantic-ai agent whose tools are reached through one ``run_code`` tool (codeact[pydantic-ai]).

The model (pydantic-ai's offline ``FunctionModel`` here; any pydantic-ai model in real use)
writes one script that calls three tools; ``pay`` needs approval, so the script pauses at it,
the run ends with ``DeferredToolRequests``, and the approved second run resumes the script
where it paused.

Run: ``pip install 'codeact[pydantic-ai]' && python examples/pydantic_ai_run_code/main.py``
"""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from codeact.integrations.pydantic_ai import CodeActToolset

shop = FunctionToolset()


@shop.tool_plain
def catalogue(city: str) -> list[str]:
    """Items sold in a city."""
    return ["bread", "cheese"]


@shop.tool_plain
def price(item: str) -> int:
    """The price of an item, in cents."""
    return {"bread": 150, "cheese": 900}[item]


@shop.tool_plain(requires_approval=True)
def pay(amount: int) -> str:
    """Pays an amount, in cents."""
    return f"paid {amount} cents"


SCRIPT = """
total = sum(call_tool("price", {"item": i}) for i in call_tool("catalogue", {"city": "Paris"}))
print("total", total)
call_tool("pay", {"amount": total})
"""


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if not any(isinstance(m, ModelResponse) for m in messages):
        return ModelResponse(parts=[ToolCallPart("run_code", {"code": SCRIPT})])
    return ModelResponse(parts=[TextPart(f"Done: {messages[-1].parts[-1].content}")])


async def main() -> None:
    agent = Agent(FunctionModel(model), toolsets=[CodeActToolset(shop)], output_type=[str, DeferredToolRequests])
    first = await agent.run("Buy everything in Paris.")
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    for call in requests.approvals:
        meta = requests.metadata[call.tool_call_id]
        print(f"approval needed: {meta['tool']}({meta['args']}); printed so far: {meta['stdout']!r}")
    results = DeferredToolResults(
        approvals={c.tool_call_id: True for c in requests.approvals}, metadata=requests.metadata
    )
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    print(second.output)


if __name__ == "__main__":
    asyncio.run(main())
