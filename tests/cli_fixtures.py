"""Objects the CLI tests load with ``module:attr`` (tests/ is on sys.path under pytest)."""

from __future__ import annotations

from codeact import CodeActAgent, FunctionTool, MontyRuntime, ScriptedModel
from codeact.models import LlmRequest

TOOLS = {"double": lambda x: 2 * x, "greet": lambda name: f"hello {name}"}


def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


SENT: list[int] = []


def send(amount: int) -> str:
    """Sends money (needs a human's approval)."""
    SENT.append(amount)
    return f"sent {amount}"


def _reply(request: LlmRequest) -> str:
    """Answers the last user message: "add" composes a tool call, "send" a gated one; a denial
    (fed back as an error naming the call) ends the run."""
    last = request.contents[-1].text
    if "denied" in last:
        return '```python\n{"type": "final_result", "value": "not sent"}\n```'
    if "send" in last:
        return '```python\nr = call_tool("send", {"amount": 5})\n{"type": "final_result", "value": r}\n```'
    if "observation" in last.lower() or "result" in last.lower():
        return '```python\n{"type": "final_result", "value": "done"}\n```'
    return '```python\n{"type": "final_result", "value": call_tool("add", {"a": 40, "b": 2})}\n```'


MODEL = ScriptedModel(_reply)
TOOL_LIST = [add]
GATED_AGENT = CodeActAgent(
    name="assistant",
    model=ScriptedModel(_reply),
    runtime=MontyRuntime(),
    tools=[add, FunctionTool(send, requires_confirmation=True)],
)
