"""``AgentTool``: another agent, called from a script like any tool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import TypeAdapter

from .._values import decode_value
from ..sessions import InMemorySessionService
from ..tools import Tool, ToolContext
from ._checkpoint import PENDING_STATE_KEY
from ._context import BaseAgent

if TYPE_CHECKING:
    from ..events import Event
    from ..services import BaseArtifactService, BaseMemoryService, SecretsProvider
    from ..sessions import BaseSessionService

__all__ = ("AgentTool", "RunnerFactory", "set_default_runner_factory")


class _RunsAgent(Protocol):
    def run_async(self, *, user_id: str, session_id: str, new_message: str) -> AsyncIterator[Event]: ...


class RunnerFactory(Protocol):
    """Builds the runner an ``AgentTool`` call runs its agent with (``codeact.Runner`` has this
    signature): keyword arguments ``app_name``, ``agent``, ``session_service``,
    ``artifact_service``, ``memory_service``, ``secrets``; returns an object with
    ``run_async(user_id=..., session_id=..., new_message=...)``."""

    def __call__(
        self,
        *,
        app_name: str,
        agent: BaseAgent,
        session_service: BaseSessionService,
        artifact_service: BaseArtifactService | None,
        memory_service: BaseMemoryService | None,
        secrets: SecretsProvider | None,
    ) -> _RunsAgent: ...


_default_runner_factory: RunnerFactory | None = None


def set_default_runner_factory(factory: RunnerFactory) -> None:
    """Sets the runner factory of every ``AgentTool`` built without one. ``codeact.runner``
    registers ``Runner`` when it is imported (importing ``codeact`` imports it), so the agent
    package never imports the runner, which sits above it."""
    global _default_runner_factory
    _default_runner_factory = factory


_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"request": {"type": "string", "description": "what to ask the agent"}},
    "required": ["request"],
}


class AgentTool(Tool):
    """Wraps ``agent`` as a tool: a call runs the agent to completion on a private
    in-memory session seeded with a copy of the caller's state (``temp:`` keys and the
    caller's pending checkpoint excluded), with the caller's artifact, memory and secrets
    services. Every state change the agent makes is forwarded to the caller's state (it
    rides on the caller's next event). The result is the value the agent stored under its
    ``output_key`` if it has one, else its final answer's text (parsed as JSON when the
    agent has an ``output_schema``).

    The tool's parameters are the agent's ``input_schema`` when it has one (the arguments
    are sent as a JSON message), else a single ``request`` string.

    Args:
        agent: any ``BaseAgent``.
        skip_summarization: end the caller's run after this tool (its result is the answer).
        runner_factory: builds the runner for a call (``RunnerFactory``); None means the
            default, ``codeact.Runner``.

    Raises (into the script):
        RuntimeError: the agent ended with an error event, or paused (a wrapped agent must
            finish within the call: confirmations and long-running tools cannot pause it).
    """

    def __init__(
        self, agent: BaseAgent, *, skip_summarization: bool = False, runner_factory: RunnerFactory | None = None
    ) -> None:
        schema = getattr(agent, "input_schema", None)
        if isinstance(schema, dict):
            parameters = schema
        elif schema is not None:
            parameters = TypeAdapter(schema).json_schema()
        else:
            parameters = _REQUEST_SCHEMA
        super().__init__(agent.name, agent.description or f"the agent {agent.name}", parameters)
        self.agent = agent
        self.skip_summarization = skip_summarization
        self._structured = schema is not None
        self.runner_factory = runner_factory

    async def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Runs the agent on ``args`` (see the class docstring for what it returns and raises)."""
        factory = self.runner_factory or _default_runner_factory
        if factory is None:  # pragma: no cover - importing codeact registers codeact.Runner
            raise RuntimeError("AgentTool has no runner factory: import codeact.runner or pass runner_factory=")
        message = json.dumps(args) if self._structured else str(args.get("request", ""))
        state = {
            k: v
            for k, v in tool_context.state.to_dict().items()
            if k != PENDING_STATE_KEY and not k.startswith("temp:")
        }
        service = InMemorySessionService()
        session = await service.create_session(
            app_name=tool_context.app_name, user_id=tool_context.user_id, state=state
        )
        runner = factory(
            app_name=tool_context.app_name,
            agent=self.agent,
            session_service=service,
            artifact_service=tool_context.artifact_service,
            memory_service=tool_context.memory_service,
            secrets=tool_context.secrets,
        )
        last_text: str | None = None
        output: Any = None
        has_output = False
        output_key = getattr(self.agent, "output_key", None)
        events = runner.run_async(user_id=session.user_id, session_id=session.id, new_message=message)
        async with aclosing(events):  # type: ignore[type-var]  # an async generator, typed AsyncIterator
            async for event in events:
                if event.error_code:
                    raise RuntimeError(f"agent {self.agent.name!r} failed: {event.error_message}")
                for key, value in event.actions.state_delta.items():
                    if key != PENDING_STATE_KEY:
                        tool_context.state[key] = value
                if event.long_running_tool_ids or event.actions.requested_tool_confirmations:
                    raise RuntimeError(
                        f"agent {self.agent.name!r} paused (a confirmation or a long-running tool); "
                        "an agent called as a tool must finish within the call"
                    )
                if output_key and output_key in event.actions.state_delta:
                    output, has_output = event.actions.state_delta[output_key], True
                if event.content is not None and event.author != "user" and event.kind is None and event.content.text:
                    last_text = event.content.text
        if self.skip_summarization:
            tool_context.actions.skip_summarization = True
        if has_output:
            return output
        schema = getattr(self.agent, "output_schema", None)
        # A str answer's text is the answer itself (render_final writes it as it is): reading it
        # as JSON would turn "123" into 123 and '{"$t": [1]}' into a tuple.
        if last_text is not None and schema is not None and schema is not str:
            try:
                return decode_value(json.loads(last_text))  # the final answer's tagged form
            except ValueError:
                return last_text
        return last_text
