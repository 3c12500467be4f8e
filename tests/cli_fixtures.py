"""Objects the CLI tests load with ``module:attr`` (tests/ is on sys.path under pytest)."""

from __future__ import annotations

from codeact import CodeActAgent, FunctionTool, LongRunningFunctionTool, MontyRuntime, ScriptedModel
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


def start_job(name: str) -> str:
    """Starts a long job; its result comes later."""
    return f"job {name} started"


def _gated_reply(request: LlmRequest) -> str:
    last = request.contents[-1].text
    if "job" in last and "Error" not in last:
        return '```python\nr = call_tool("start_job", {"name": "nightly"})\n{"type": "final_result", "value": r}\n```'
    return _reply(request)


GATED_MODEL = ScriptedModel(_gated_reply)
GATED_TOOLS = [add, FunctionTool(send, requires_confirmation=True), LongRunningFunctionTool(start_job)]

try:
    from langchain_core.tools import tool as _lc_tool

    @_lc_tool
    def lc_upper(text: str) -> str:
        """Upper-cases a text."""
        return text.upper()

    FOREIGN = lc_upper
except ImportError:  # pragma: no cover - the langchain extra is not installed
    FOREIGN = None
