"""``Runner``: runs an agent on a session, persisting every event before the run moves on."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing

import anyio

from .agent._checkpoint import PENDING_STATE_KEY
from .agent._context import BaseAgent, InvocationContext, RunConfig
from .services import BaseArtifactService, BaseMemoryService, SecretsProvider
from .sessions import BaseSessionService, InMemorySessionService, SessionNotFoundError
from .sessions._types import Content, Event, EventActions, Session, new_id

__all__ = ("Runner",)


class Runner:
    """Runs ``agent`` (and agents it transfers to) against sessions of ``app_name``.

    Every event an agent yields is appended to the session service (state delta and event
    in one transaction) before the agent continues, so a checkpoint is durable before the
    tool it brackets runs.

    Args:
        app_name: the application; scopes ``app:`` state.
        agent: the root agent.
        session_service: where sessions live (default: a new ``InMemorySessionService``).
        artifact_service: where artifacts live (``save_artifact`` / ``load_artifact`` from
            tools and callbacks, ``{artifact.name}`` in instructions).
        memory_service: what ``search_memory`` searches.
        secrets: a ``SecretsProvider`` or a plain name -> value mapping, read by tools with
            ``get_secret``; never logged, never in a prompt, redacted from model-facing text.
        auto_create_session: create a missing session instead of raising.

    Before the user's message is stored, the agent to run gets it through
    ``BaseAgent.on_user_message`` (``CodeActAgent``: plugins, then input guardrails), which
    may rewrite it or end the run. An event carrying ``transfer_to_agent`` hands the turn to
    that agent (found anywhere in the tree under ``agent``; any ``BaseAgent``); its
    ``RunConfig.transfer_targets`` then lists its parent and peers.
    """

    def __init__(
        self,
        *,
        app_name: str,
        agent: BaseAgent,
        session_service: BaseSessionService | None = None,
        artifact_service: BaseArtifactService | None = None,
        memory_service: BaseMemoryService | None = None,
        secrets: SecretsProvider | Mapping[str, str] | None = None,
        auto_create_session: bool = False,
    ) -> None:
        self.app_name = app_name
        self.agent = agent
        self.session_service = session_service if session_service is not None else InMemorySessionService()
        self.artifact_service = artifact_service
        self.memory_service = memory_service
        self.secrets = secrets if secrets is None or isinstance(secrets, SecretsProvider) else SecretsProvider(secrets)
        self.auto_create_session = auto_create_session

    async def _session(self, user_id: str, session_id: str) -> Session:
        session = await self.session_service.get_session(app_name=self.app_name, user_id=user_id, session_id=session_id)
        if session is None:
            if not self.auto_create_session:
                raise SessionNotFoundError(
                    f"session {session_id!r} of user {user_id!r} not found in app {self.app_name!r}; "
                    "create it with session_service.create_session(...) or pass auto_create_session=True"
                )
            session = await self.session_service.create_session(
                app_name=self.app_name, user_id=user_id, session_id=session_id
            )
        return session

    def _agent_for(self, session: Session) -> BaseAgent:
        """The agent owning a pending checkpoint, else the root agent."""
        pending = session.state.get(PENDING_STATE_KEY)
        if isinstance(pending, dict) and isinstance(pending.get("agent_name"), str):
            owner = self.agent.find_agent(pending["agent_name"])
            if owner is not None:
                return owner
        return self.agent

    def _transfer_config(self, agent: BaseAgent, base: RunConfig) -> RunConfig:
        parent = self.agent.find_parent(agent.name)
        if parent is None:
            return base
        targets = [parent.name] + [a.name for a in parent.sub_agents if a.name != agent.name]
        return base.model_copy(update={"transfer_targets": targets, "parent_agent": parent.name})

    async def run_async(
        self,
        *,
        user_id: str,
        session_id: str,
        new_message: Content | str | None = None,
        run_config: RunConfig | None = None,
    ) -> AsyncIterator[Event]:
        """Runs one invocation; yields each event after it is stored.

        Args:
            user_id / session_id: the session (see ``auto_create_session``).
            new_message: the user's message (text or ``Content``); it may carry function
                responses completing a long-running call. None resumes without one. The same
                message sent again after a run that stored nothing after it (a ``ModelError``
                on the first model call) retries that invocation: it is not stored twice.
            run_config: per-run options (confirmation decisions, discarding a checkpoint).

        Raises:
            SessionNotFoundError: no such session.
            SessionStoreError: the store failed.
            CodeRuntimeError: a host failure of the interpreter.
            ModelError: the model request failed.
        """
        run_config = run_config or RunConfig()
        session = await self._session(user_id, session_id)
        invocation_id = new_id()
        content = Content.from_text(new_message) if isinstance(new_message, str) else new_message
        agent = self._agent_for(session)
        if content is not None:
            checked = await agent.on_user_message(
                self._context(invocation_id, agent, session, content, run_config), content
            )
            if isinstance(checked, Event):
                await self.session_service.append_event(session, checked)
                yield checked
                return
            content = checked
            last = session.events[-1] if session.events else None
            if last is not None and last.author == "user" and last.content == content:
                # A retry of an invocation that stored nothing after its message (the model
                # failed at once): the message is stored once, and the retry continues it.
                invocation_id = last.invocation_id
            else:
                user_event = Event(invocation_id=invocation_id, author="user", content=content)
                await self.session_service.append_event(session, user_event)
        transfers = 0
        while True:
            ctx = self._context(invocation_id, agent, session, content, run_config)
            transfer_to: str | None = None
            async with aclosing(agent.run_async(ctx)) as events:
                async for event in events:
                    await self.session_service.append_event(session, event)
                    yield event
                    if event.actions.transfer_to_agent:
                        transfer_to = event.actions.transfer_to_agent
            if transfer_to is None:
                return
            target = self.agent.find_agent(transfer_to)
            transfers += 1
            if target is None or transfers > run_config.max_transfers:
                reason = (
                    f"agent {transfer_to!r} is not in the agent tree"
                    if target is None
                    else f"more than {run_config.max_transfers} transfers in one run"
                )
                error = Event(
                    invocation_id=invocation_id,
                    author=agent.name,
                    error_code="codeact.transfer",
                    error_message=f"cannot transfer: {reason}",
                )
                await self.session_service.append_event(session, error)
                yield error
                return
            agent = target

    def _context(
        self, invocation_id: str, agent: BaseAgent, session: Session, content: Content | None, run_config: RunConfig
    ) -> InvocationContext:
        return InvocationContext(
            invocation_id=invocation_id,
            agent=agent,
            session=session,
            session_service=self.session_service,
            user_content=content,
            run_config=self._transfer_config(agent, run_config),
            artifact_service=self.artifact_service,
            memory_service=self.memory_service,
            secrets=self.secrets,
        )

    def run(
        self,
        *,
        user_id: str,
        session_id: str,
        new_message: Content | str | None = None,
        run_config: RunConfig | None = None,
        backend: str = "asyncio",
    ) -> list[Event]:
        """Blocking form of ``run_async``: runs the invocation on a fresh event loop
        (``backend`` ``"asyncio"`` or ``"trio"``) and returns its events."""

        async def collect() -> list[Event]:
            return [
                e
                async for e in self.run_async(
                    user_id=user_id, session_id=session_id, new_message=new_message, run_config=run_config
                )
            ]

        return anyio.run(collect, backend=backend)

    async def discard_pending_checkpoint(self, *, user_id: str, session_id: str) -> bool:
        """Drops a pending checkpoint (for example a stale one) so the next run starts
        fresh. Returns whether there was one."""
        session = await self._session(user_id, session_id)
        if session.state.get(PENDING_STATE_KEY) is None:
            return False
        owner = self._agent_for(session)
        event = Event(
            invocation_id=new_id(), author=owner.name, actions=EventActions(state_delta={PENDING_STATE_KEY: None})
        )
        await self.session_service.append_event(session, event)
        return True
