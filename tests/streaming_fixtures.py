"""Objects the streaming CLI test loads with ``module:attr`` (issue 51)."""

from __future__ import annotations

from codeact import ScriptedModel
from codeact.models import LlmRequest

# streaming (issue 51): a reply that takes ~2 s to stream, and a script that prints around a 1 s tool
SLOW_REPLY = (
    "Counting slowly, one step at a time, so the reply streams for a while.\n"
    '```python\nprint("printed " + str(1))\ncall_tool("wait_a_second", {})\nprint("printed " + str(2))\n'
    '{"type": "final_result", "value": "counted"}\n```'
)


def _slow_reply(request: LlmRequest) -> str:
    if "Observation" in request.contents[-1].text or "Output" in request.contents[-1].text:
        return '```python\n{"type": "final_result", "value": "counted"}\n```'
    return SLOW_REPLY


SLOW_MODEL = ScriptedModel(_slow_reply, time_to_first_token=0.05, tokens_per_second=25)


def wait_a_second() -> str:
    """Waits one second."""
    import time

    time.sleep(1.0)
    return "waited"


SLOW_TOOLS = [wait_a_second]
