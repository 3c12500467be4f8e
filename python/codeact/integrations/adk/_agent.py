"""``CodeActAdkAgent``: a codeact ``CodeActAgent`` as a Google ADK ``BaseAgent``, so it can be an
``LlmAgent`` sub-agent (reached by ``transfer_to_agent``) or wrapped in ``AgentTool``.

Each ADK invocation runs the codeact agent once on the invocation's user message, in a codeact
session with the same app, user and session ids (held by ``session_service``, in memory by
default, seeded with the ADK session's state on first use). codeact events come back as ADK
events authored by this agent: their text as a model ``Content`` and their ``state_delta``
(without codeact's own ``codeact*`` bookkeeping keys), so state written by codeact tools lands
in the ADK session.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import BaseAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event as AdkEvent
from google.adk.events import EventActions as AdkEventActions
from google.genai import types
from pydantic import ConfigDict, Field, PrivateAttr

from ...agent import CodeActAgent
from ...runner import Runner
from ...sessions import BaseSessionService, InMemorySessionService

__all__ = ("CodeActAdkAgent",)

_OWN_KEYS = "codeact"


def _user_text(ctx: InvocationContext) -> str:
    content = ctx.user_content
    if content is None or not content.parts:
        for event in reversed(ctx.session.events):
            if event.author == "user" and event.content and event.content.parts:
                content = event.content
                break
    if content is None:
        return ""
    return "".join(p.text or "" for p in content.parts or [])


class CodeActAdkAgent(BaseAgent):
    """Runs a ``CodeActAgent`` inside Google ADK.

    Args:
        name / description: as for every ADK agent (``CodeActAdkAgent.wrap(agent)`` copies the
            codeact agent's).
        agent: the codeact agent.
        session_service: codeact's store for the agent's own sessions (default: in memory).

    Not yet: a run that pauses for a human (confirmation, long-running tool) surfaces as an
    ADK event with the codeact pause text only; approving it goes through codeact's ``Runner``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agent: Any = Field(description="the codeact CodeActAgent")
    session_service: Any = None
    _service: BaseSessionService | None = PrivateAttr(default=None)

    @classmethod
    def wrap(cls, agent: CodeActAgent, **kwargs: Any) -> CodeActAdkAgent:
        """An ADK agent named and described like ``agent``."""
        return cls(name=agent.name, description=agent.description or "", agent=agent, **kwargs)

    def _store(self) -> BaseSessionService:
        if self._service is None:
            self._service = self.session_service if self.session_service is not None else InMemorySessionService()
        return self._service

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[AdkEvent, None]:
        session = ctx.session
        store = self._store()
        existing = await store.get_session(app_name=session.app_name, user_id=session.user_id, session_id=session.id)
        if existing is None:
            seed = {k: v for k, v in dict(session.state).items() if not k.startswith("temp:")}
            await store.create_session(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id, state=seed
            )
        runner = Runner(app_name=session.app_name, agent=self.agent, session_service=store)
        async for event in runner.run_async(
            user_id=session.user_id, session_id=session.id, new_message=_user_text(ctx)
        ):
            delta = {k: v for k, v in event.actions.state_delta.items() if not k.startswith(_OWN_KEYS)}
            text = event.text if event.kind is None else ""  # a run's progress events stay inside
            if not text and not delta:
                continue
            yield AdkEvent(
                invocation_id=ctx.invocation_id,
                author=self.name,
                branch=ctx.branch,
                content=types.Content(role="model", parts=[types.Part.from_text(text=text)]) if text else None,
                actions=AdkEventActions(state_delta=delta),
            )
