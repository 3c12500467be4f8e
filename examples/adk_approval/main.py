"""A CodeAct agent under Google ADK's runner, with a tool that needs a human's approval
(codeact[adk]).

The ADK ``FunctionTool`` asks for confirmation when a refund is above 100 (a
``require_confirmation`` predicate, asked per call). The script pauses there, and the ADK app
sees what it would see from an ``LlmAgent``: an ``adk_request_confirmation`` function call.
The app answers with a ``FunctionResponse`` (``{"confirmed": true}``), and the script resumes
where it paused. Along the way every step of the run shows as an ADK event: the model's reply
with its ``executable_code``, each tool's ``function_call`` / ``function_response``, the
script's ``code_execution_result``, the answer.

Run: ``pip install 'codeact[adk]' && python examples/adk_approval/main.py`` (offline: a
scripted model writes the script).
"""

from __future__ import annotations

import asyncio
from typing import Any

from google.adk.runners import InMemoryRunner
from google.adk.tools import FunctionTool, ToolContext
from google.genai import types

from codeact import CodeActAgent, MontyRuntime, RunConfig, ScriptedModel
from codeact.integrations.adk import REQUEST_CONFIRMATION, CodeActAdkAgent, from_adk


def refund(order: int, amount: int, tool_context: ToolContext) -> dict[str, Any]:
    """Refunds an order.

    Args:
        order: the order number.
        amount: how much, in euros.
    """
    done = [*tool_context.state.get("refunds", []), order]
    tool_context.state["refunds"] = done
    return {"order": order, "refunded": amount}


SCRIPT = """Two refunds; the large one needs a person's approval.
```python
small = call_tool("refund", {"order": 7, "amount": 20})
large = call_tool("refund", {"order": 8, "amount": 450})
{"type": "final_result", "value": f"refunded {small['refunded'] + large['refunded']} euros"}
```"""


def show(event: Any) -> None:
    kind = (event.custom_metadata or {}).get("codeact_kind", "")
    for part in event.content.parts if event.content else []:
        if part.executable_code:
            print(f"  [{kind}] script: {part.executable_code.code.splitlines()[0]} ...")
        elif part.function_call:
            print(f"  [{kind or 'call'}] {part.function_call.name}({part.function_call.args})")
        elif part.function_response:
            print(f"  [{kind or 'response'}] {part.function_response.name} -> {part.function_response.response}")
        elif part.code_execution_result:
            print(f"  [{kind}] outcome {part.code_execution_result.outcome.value}")
        elif part.text and kind != "model_reply":
            print(f"  [{kind or 'answer'}] {part.text}")
    if event.actions.state_delta:
        print(f"  state delta: {event.actions.state_delta}")
    if event.error_code:
        print(f"  error {event.error_code}: {event.error_message}")


async def main() -> None:
    agent = CodeActAgent(
        name="desk",
        model=ScriptedModel(lambda request: SCRIPT),
        runtime=MontyRuntime(),
        tools=from_adk([FunctionTool(refund, require_confirmation=lambda order, amount: amount > 100)]),
    )
    runner = InMemoryRunner(
        agent=CodeActAdkAgent.wrap(agent, run_config=RunConfig(emit_tool_events=True)), app_name="desk"
    )
    await runner.session_service.create_session(app_name="desk", user_id="me", session_id="s1")

    print("user: refund orders 7 and 8")
    message = types.Content(role="user", parts=[types.Part(text="Refund orders 7 and 8.")])
    request = None
    async for event in runner.run_async(user_id="me", session_id="s1", new_message=message):
        show(event)
        for call in event.get_function_calls():
            if call.name == REQUEST_CONFIRMATION:
                request = call
    assert request is not None, "the large refund should wait for approval"

    print("user: approves", request.args["originalFunctionCall"]["args"])
    answer = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    name=REQUEST_CONFIRMATION, id=request.id, response={"confirmed": True}
                )
            )
        ],
    )
    async for event in runner.run_async(user_id="me", session_id="s1", new_message=answer):
        show(event)


if __name__ == "__main__":
    asyncio.run(main())
