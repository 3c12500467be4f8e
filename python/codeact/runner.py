"""``Runner``: runs an agent on a session, persisting every event before the run moves on, and
the suspension protocol of SPEC §5 (pending calls, approve / deny / complete, claims)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any

import anyio

from .agent._checkpoint import PENDING_STATE_KEY, TURN_STATE_KEY
from .agent._context import BaseAgent, InvocationContext, RunConfig
from .agent._protocol import (
    PendingCallInfo,
    announcement_events,
    decision_value,
    pending_infos,
    plain_value_problem,
)
from .exceptions import (
    AlreadyResumingError,
    CallsPendingError,
    NoPendingCallError,
    StaleSessionError,
    TurnConflictError,
    ValueConversionError,
    describe_pending,
)
from .services import BaseArtifactService, BaseMemoryService, SecretsProvider
from .sessions import BaseSessionService, InMemorySessionService, SessionNotFoundError
from .sessions._journal import TurnSlot
from .sessions._types import Content, Event, EventActions, FunctionResponse, Part, Session, new_id

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

    async def _session(self, user_id: str, session_id: str, *, create: bool = True) -> Session:
        session = await self.session_service.get_session(app_name=self.app_name, user_id=user_id, session_id=session_id)
        if session is None:
            if not self.auto_create_session or not create:
                hint = (
                    "create it with session_service.create_session(...) or pass auto_create_session=True"
                    if create
                    else "this call never creates a session (there is nothing to resume in a new one); create it "
                    "with session_service.create_session(...) and start a run first"
                )
                raise SessionNotFoundError(
                    f"session {session_id!r} of user {user_id!r} not found in app {self.app_name!r}; {hint}"
                )
            session = await self.session_service.create_session(
                app_name=self.app_name, user_id=user_id, session_id=session_id
            )
        return session

    def _agent_for(self, session: Session, slot: TurnSlot | None = None) -> BaseAgent:
        """The agent owning the in-flight turn (or a 0.1.0 checkpoint), else the root agent."""
        for record in (slot.data if slot is not None else None, session.state.get(PENDING_STATE_KEY)):
            if isinstance(record, dict) and isinstance(record.get("agent_name"), str):
                owner = self.agent.find_agent(record["agent_name"])
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
        content = Content.from_text(new_message) if isinstance(new_message, str) else new_message
        responses = [p.function_response for p in content.parts if p.function_response] if content else []
        decided = bool(run_config.tool_confirmation_decisions) or bool(responses)
        session = await self._session(user_id, session_id, create=not decided)
        invocation_id = new_id()
        slot = await self.session_service.load_turn(app_name=self.app_name, user_id=user_id, session_id=session_id)
        claimed = False
        if slot is not None and run_config.discard_pending_checkpoint:
            await self._delete_slot(session, slot)
            slot = None
        if slot is not None:
            claim = self._claim_for(slot, run_config, content, responses, decided)
            if claim is _ANNOUNCE:
                owner = self._agent_for(session, slot)
                for event in announcement_events(owner.name, invocation_id, pending_infos(slot.data)):
                    yield event  # a re-announcement: nothing is stored
                return
            if claim is _DISCARD:
                await self._delete_slot(session, slot)
                slot = None
            else:
                assert isinstance(claim, dict)
                slot = await self._claim(session, slot, claim)
                claimed = True
        elif decided:
            raise NoPendingCallError(
                f"session {session_id!r} has no pending call (its run finished or never paused); the decision or "
                "function response matches nothing and nothing ran"
            )
        agent = self._agent_for(session, slot)
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
                await self._append(session, user_event, claimed)
        transfers = 0
        while True:
            ctx = self._context(invocation_id, agent, session, content, run_config)
            ctx.turn_slot, slot = slot, None  # only the first agent resumes the claimed turn
            transfer_to: str | None = None
            async with aclosing(agent.run_async(ctx)) as events:
                async for event in events:
                    await self._append(session, event, claimed)
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
        """Drops the session's in-flight turn (a paused script, a crashed turn, or a stale
        0.1.0 checkpoint) so the next run starts fresh. Returns whether there was one.

        Raises:
            SessionNotFoundError: no such session.
            AlreadyResumingError: another runner wrote the turn at the same moment.
        """
        session = await self._session(user_id, session_id, create=False)
        slot = await self.session_service.load_turn(app_name=self.app_name, user_id=user_id, session_id=session_id)
        found = False
        if slot is not None:
            await self._delete_slot(session, slot)
            found = True
        if session.state.get(PENDING_STATE_KEY) is not None:
            owner = self._agent_for(session)
            event = Event(
                invocation_id=new_id(),
                author=owner.name,
                actions=EventActions(state_delta={PENDING_STATE_KEY: None, TURN_STATE_KEY: None}),
            )
            await self.session_service.append_event(session, event)
            found = True
        return found

    # ------------------------------------------------------------------ the suspension protocol

    async def pending(self, *, user_id: str, session_id: str) -> list[PendingCallInfo]:
        """The calls of the session's paused script that wait for a decision or a result
        (``[]`` when nothing is pending).

        Raises:
            SessionNotFoundError: no such session (even with ``auto_create_session``).
        """
        await self._session(user_id, session_id, create=False)
        slot = await self.session_service.load_turn(app_name=self.app_name, user_id=user_id, session_id=session_id)
        return pending_infos(slot.data if slot is not None else None)

    async def _pick(
        self,
        user_id: str,
        session_id: str,
        call_key: str | None,
        kind: str,
        verb: str,
        run_config: RunConfig | None,
    ) -> PendingCallInfo:
        if run_config is not None and run_config.discard_pending_checkpoint:
            raise ValueError(
                f"cannot {verb} with RunConfig(discard_pending_checkpoint=True): discarding drops the paused script "
                f"the {verb} resumes; call Runner.discard_pending_checkpoint() instead. Nothing ran"
            )
        await self._session(user_id, session_id, create=False)
        slot = await self.session_service.load_turn(app_name=self.app_name, user_id=user_id, session_id=session_id)
        pending = pending_infos(slot.data if slot is not None else None)
        if slot is not None and slot.data.get("status") == "running" and slot.data.get("claim") is not None:
            claim = slot.data["claim"]
            claimed = set(claim.get("decisions") or {}) | set(claim.get("responses") or {})
            if call_key is None or call_key in claimed:
                raise AlreadyResumingError(
                    f"cannot {verb} in session {session_id!r}: another runner claimed the paused script and is "
                    "resuming it; nothing ran here"
                )
        matching = [p for p in pending if p.kind == kind or kind == "any"]
        if call_key is None:
            if len(matching) == 1:
                return matching[0]
            reason = "nothing is pending" if not matching else f"{len(matching)} calls are pending; name one"
            raise NoPendingCallError(
                f"cannot {verb} without a call key in session {session_id!r}: {reason} ({describe_pending(pending)})",
                pending,
            )
        for p in matching:
            if p.call_key == call_key:
                return p
        raise NoPendingCallError(
            f"cannot {verb} call {call_key!r} in session {session_id!r}: it matches no call awaiting "
            f"{'a decision' if kind == 'confirmation' else 'a result'} ({describe_pending(pending)}); nothing ran",
            pending,
        )

    async def approve(
        self,
        *,
        user_id: str,
        session_id: str,
        call_key: str | None = None,
        run_config: RunConfig | None = None,
    ) -> AsyncIterator[Event]:
        """Approves a call awaiting confirmation and resumes the paused script; yields the
        run's events (as ``run_async``). ``call_key=None`` is accepted only when exactly one
        call awaits confirmation.

        Raises:
            SessionNotFoundError: no such session.
            NoPendingCallError: the key matches no call awaiting confirmation, or nothing is
                pending (nothing ran).
            AlreadyResumingError: another runner claimed the suspension first (the tool runs
                there, once).
            ValueError: ``run_config`` asks to discard the pending checkpoint (nothing ran).
        """
        info = await self._pick(user_id, session_id, call_key, "confirmation", "approve", run_config)
        rc = (run_config or RunConfig()).model_copy(update={"tool_confirmation_decisions": {info.call_key: True}})
        async with aclosing(self.run_async(user_id=user_id, session_id=session_id, run_config=rc)) as events:
            async for event in events:
                yield event

    async def deny(
        self,
        *,
        user_id: str,
        session_id: str,
        call_key: str | None = None,
        reason: str | None = None,
        run_config: RunConfig | None = None,
    ) -> AsyncIterator[Event]:
        """Denies a pending call (the script gets ``PermissionError``, with ``reason``) and
        resumes it; yields the run's events. A long-running call awaiting its result may be
        denied too. ``call_key=None`` is accepted only when exactly one call is pending.

        Raises:
            SessionNotFoundError / NoPendingCallError / AlreadyResumingError: as ``approve``.
        """
        info = await self._pick(user_id, session_id, call_key, "any", "deny", run_config)
        rc = (run_config or RunConfig()).model_copy(
            update={
                "tool_confirmation_decisions": {info.call_key: False},
                "tool_denial_reasons": {info.call_key: reason} if reason else {},
            }
        )
        async with aclosing(self.run_async(user_id=user_id, session_id=session_id, run_config=rc)) as events:
            async for event in events:
                yield event

    async def complete(
        self,
        *,
        user_id: str,
        session_id: str,
        call_key: str,
        value: Any,
        run_config: RunConfig | None = None,
    ) -> AsyncIterator[Event]:
        """Completes a long-running call with ``value`` (plain data) and resumes the paused
        script; yields the run's events. The response is stored as a user event carrying a
        function response.

        Raises:
            ValueConversionError: ``value`` is not plain data (SPEC §3), is nested more than
                ``MAX_VALUE_DEPTH`` levels or encodes to more than ``MAX_VALUE_BYTES``; checked
                before anything is claimed or stored (nothing changed).
            SessionNotFoundError / NoPendingCallError / AlreadyResumingError / ValueError: as
                ``approve``.
        """
        _check_completion(value, call_key)
        info = await self._pick(user_id, session_id, call_key, "completion", "complete", run_config)
        message = Content(
            role="user", parts=[Part(function_response=FunctionResponse(name=info.tool, response=value, id=call_key))]
        )
        async with aclosing(
            self.run_async(user_id=user_id, session_id=session_id, new_message=message, run_config=run_config)
        ) as events:
            async for event in events:
                yield event

    def _claim_for(
        self,
        slot: TurnSlot,
        run_config: RunConfig,
        content: Content | None,
        responses: list[FunctionResponse],
        decided: bool,
    ) -> dict[str, Any] | object:
        """What this run does with the stored turn: the claim to write (decisions and
        results keyed by call), ``_ANNOUNCE`` (re-announce, store nothing) or ``_DISCARD``.

        Raises:
            NoPendingCallError / CallsPendingError / AlreadyResumingError (SPEC §5).
        """
        data = slot.data
        pending = pending_infos(data)
        session_id = "?"
        if data.get("status") != "suspended":
            if decided:
                previous = (data.get("claim") or {}).get("decisions", {}) | (data.get("claim") or {}).get(
                    "responses", {}
                )
                keys = set(run_config.tool_confirmation_decisions) | {r.id for r in responses if r.id}
                if keys & set(previous):
                    raise AlreadyResumingError(
                        f"call {sorted(keys & set(previous))[0]} was already decided and is being resumed by "
                        "another runner; nothing ran here"
                    )
                raise NoPendingCallError("no call is pending: the paused script is running (or was interrupted)")
            return {}  # recovery of an interrupted turn
        by_key = {p.call_key: p for p in pending}
        decisions: dict[str, Any] = {}
        results: dict[str, Any] = {}
        for key, raw in run_config.tool_confirmation_decisions.items():
            info = by_key.get(key)
            if info is None:
                raise NoPendingCallError(
                    f"the decision for call {key!r} matches no pending call ({describe_pending(pending)}); nothing ran",
                    pending,
                )
            approve = decision_value(raw)
            if approve and info.kind != "confirmation":
                raise NoPendingCallError(
                    f"call {key!r} awaits a result, not a decision; complete it with Runner.complete", pending
                )
            decisions[key] = True if approve else run_config.tool_denial_reasons.get(key, "")
        completions = [p for p in pending if p.kind == "completion"]
        for response in responses:
            if response.id is None:
                if len(completions) != 1:
                    raise NoPendingCallError(
                        "a function response without an id is accepted only when exactly one call awaits a "
                        f"result ({describe_pending(pending)})",
                        pending,
                    )
                info = completions[0]
                if response.name != info.tool:
                    raise NoPendingCallError(
                        f"the function response names tool {response.name!r}, but the call awaiting a result is "
                        f"{info.call_key} of {info.tool!r}; nothing ran",
                        pending,
                    )
            else:
                found = by_key.get(response.id)
                if found is None or found.kind != "completion" or response.name not in (found.tool, ""):
                    raise NoPendingCallError(
                        f"the function response for {response.id!r} matches no call awaiting a result "
                        f"({describe_pending(pending)}); nothing ran",
                        pending,
                    )
                info = found
            value = response.response if response.response is not None else {}
            _check_completion(value, info.call_key)
            results[info.call_key] = value
        if not decided:
            if content is None or not content.text:
                return _ANNOUNCE
            policy = run_config.on_pending_message
            if policy == "reject":
                raise CallsPendingError(
                    f"a new message arrived while calls are pending ({describe_pending(pending)}); approve, deny "
                    "or complete them first, or pass RunConfig(on_pending_message='deny' or 'discard')",
                    pending,
                )
            if policy == "discard":
                return _DISCARD
            decisions = {p.call_key: "the user sent a new message instead" for p in pending}
        del session_id
        return {"decisions": decisions, "responses": results}

    async def _claim(self, session: Session, slot: TurnSlot, claim: dict[str, Any]) -> TurnSlot:
        """Claims the stored turn for this run by compare-and-set: marks it running with the
        decisions and results, before any tool runs.

        Raises:
            AlreadyResumingError: another runner claimed it first.
        """
        previous = slot.data.get("claim") or {}
        merged = {
            "decisions": {**previous.get("decisions", {}), **claim.get("decisions", {})},
            "responses": {**previous.get("responses", {}), **claim.get("responses", {})},
        }
        data = {**slot.data, "status": "running", "claim": merged}
        try:
            version = await self.session_service.save_turn(
                app_name=session.app_name,
                user_id=session.user_id,
                session_id=session.id,
                data=data,
                snapshot=slot.snapshot,
                expected_version=slot.version,
            )
        except TurnConflictError as exc:
            raise AlreadyResumingError(
                f"another runner is resuming session {session.id!r} (it claimed the paused script first); "
                "nothing ran here",
                pending_infos(slot.data),
            ) from exc
        return TurnSlot(version, data, slot.snapshot)

    async def _append(self, session: Session, event: Event, claimed: bool) -> None:
        """Stores ``event``. A run that claimed the session's turn owns it: when the runner it
        took the turn from stored its last event after this run loaded the session, the
        session is brought up to date in place and the append retried once."""
        try:
            await self.session_service.append_event(session, event)
        except StaleSessionError:
            if not claimed:
                raise
            fresh = await self._session(session.user_id, session.id, create=False)
            temp = {k: v for k, v in session.state.items() if k.startswith("temp:")}
            session.state.clear()
            session.state.update(fresh.state)
            session.state.update(temp)
            session.events[:] = fresh.events
            session.last_update_time = fresh.last_update_time
            await self.session_service.append_event(session, event)

    async def _delete_slot(self, session: Session, slot: TurnSlot) -> None:
        try:
            await self.session_service.save_turn(
                app_name=session.app_name,
                user_id=session.user_id,
                session_id=session.id,
                data=None,
                snapshot=None,
                expected_version=slot.version,
            )
        except TurnConflictError as exc:
            raise AlreadyResumingError(
                f"another runner is resuming session {session.id!r}; its turn was not discarded"
            ) from exc


def _check_completion(value: Any, call_key: str) -> None:
    """Refuses a completion value that cannot cross into the script, before anything is
    claimed or stored.

    Raises:
        ValueConversionError: not plain data, too deep or too large.
    """
    problem = plain_value_problem(value, f"the value completing call {call_key!r}")
    if problem is not None:
        raise ValueConversionError(f"{problem}; nothing was claimed or stored")


_ANNOUNCE = object()
_DISCARD = object()
