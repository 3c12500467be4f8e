"""The events the turn driver builds: a tool call and its response, an in-doubt notice,
and the replay-divergence errors (SPEC §5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pydantic_core

from ..events import Content, Event, FunctionCall, FunctionResponse, Part
from ..runtime import ResumeValue
from ._call_results import Outcome, _Invoke
from ._turn_state import TurnState, _Entry

if TYPE_CHECKING:
    from ._run import AgentSettings, Run


class _TurnEvents:
    """The driver's event builders (``TurnDriver`` inherits them)."""

    agent: AgentSettings
    run: Run
    state: TurnState

    def _in_doubt_event(self, call_key: str, tool: str, args: dict[str, Any], action: str) -> Event:
        text = {
            "rerun": "it runs again (on_in_doubt='rerun')",
            "skip": "a human chose to skip it with a given result",
            "fail": "it is failed into the script, not run again",
            "ask": "it waits for a human decision (Runner.resolve_in_doubt)",
        }[action]
        return Event(
            invocation_id=self.run.ctx.invocation_id,
            author=self.agent.name,
            content=Content.from_text(
                f"Call {call_key} to {tool!r} was in doubt: it started before the runner stopped and its outcome "
                f"was never recorded, so it may have run; {text}.",
                role="model",
            ),
            custom_metadata={"codeact_kind": "in_doubt", "call_key": call_key, "tool": tool, "action": action},
        )

    def _os_divergence(self, exc: Exception) -> Event:
        """The runtime's ``ReplayDivergenceError``: the script asked the OS for another kind
        of answer than the journaled one (the caller ends the run, keeping the slot)."""
        return self.run.error_event(
            "codeact.nondeterministic_replay",
            f"replaying turn {self.state.turn} diverged: {exc}. No tool ran. Run again with "
            "RunConfig(discard_pending_checkpoint=True), or call Runner.discard_pending_checkpoint(), to drop "
            "the turn.",
        )

    def _divergence(self, pos: int, entry: _Entry, tool: str, digest: str) -> Event:
        what = (
            f"the journal has a call to {entry.tool!r} at position {pos}, the script now calls {tool!r}"
            if entry.tool != tool
            else f"the call to {tool!r} at position {pos} has other arguments than the journaled one"
        )
        return self.run.error_event(
            "codeact.nondeterministic_replay",
            f"replaying turn {self.state.turn} diverged: {what}. No tool ran. Run again with "
            "RunConfig(discard_pending_checkpoint=True), or call Runner.discard_pending_checkpoint(), to drop "
            "the turn.",
        )

    # ------------------------------------------------------------------ tool events

    def _call_event(self, inv: _Invoke) -> Event:
        """The ``tool_call`` event (``RunConfig.emit_tool_events``): a ``function_call``
        part whose id is the call key, yielded (and so stored) before the tool runs."""
        return Event(
            invocation_id=self.run.ctx.invocation_id,
            author=self.agent.name,
            content=Content(
                role="model",
                parts=[Part(function_call=FunctionCall(name=inv.tool.name, args=inv.args, id=inv.call_key))],
            ),
            custom_metadata={"codeact_kind": "tool_call"},
        )

    def _response_event(self, call_key: str, tool: str, outcome: Outcome) -> Event:
        """The ``tool_response`` event: a ``function_response`` part with the call key as id;
        ``response`` is the result (a non-dict value as ``{"result": value}``, as Google ADK
        does) or ``{"error": "<ExceptionType>: <message>"}`` (what the script got)."""
        if isinstance(outcome, ResumeValue):
            # plain JSON for the session store (bytes as base64, as pydantic does)
            value = pydantic_core.to_jsonable_python(outcome.value, bytes_mode="base64", inf_nan_mode="constants")
            response = value if isinstance(value, dict) else {"result": value}
        else:
            response = {"error": f"{outcome.exc_type}: {outcome.message}"}
        return Event(
            invocation_id=self.run.ctx.invocation_id,
            author=self.agent.name,
            content=Content(
                role="user", parts=[Part(function_response=FunctionResponse(name=tool, response=response, id=call_key))]
            ),
            custom_metadata={"codeact_kind": "tool_response"},
        )


def _fields(event: Event) -> dict[str, Any]:
    """An event's fields for ``CodeActAgent._event`` (which adds pending tool deltas)."""
    return {
        "content": event.content,
        "actions": event.actions,
        "long_running_tool_ids": event.long_running_tool_ids,
        "interrupted": event.interrupted,
        "turn_complete": event.turn_complete,
        "custom_metadata": event.custom_metadata,  # the in-doubt announcement's kind and call keys
    }
