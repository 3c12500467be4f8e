"""``Runner``: runs an agent on a session, persisting every event before the run moves on, and
the suspension protocol of SPEC §5 (pending calls, approve / deny / complete, claims)."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Literal

import anyio

from . import _runner_decide as _decide
from ._runner_claims import (
    ANNOUNCE,
    DISCARD,
    agent_for,
    check_answers,
    claim_for,
    claim_turn,
    decision_records,
    delete_slot,
    paused_unannounced,
    record_of,
    still_pending,
    text_problem,
)
from .agent._agent_tool import set_default_runner_factory
from .agent._checkpoint import PENDING_STATE_KEY, TURN_STATE_KEY
from .agent._context import BaseAgent, InvocationContext, RunConfig
from .agent._overlay import SessionFile, session_files
from .agent._streaming import LiveRowWriter
from .events import Content, Event, EventActions, FunctionResponse, new_id
from .exceptions import (
    AlreadyResumingError,
    NoPendingCallError,
    SnapshotError,
    StaleSessionError,
    ValueConversionError,
)
from .services import BaseArtifactService, BaseMemoryService, SecretsProvider
from .sessions import BaseSessionService, InMemorySessionService, SessionNotFoundError
from .sessions._journal import TurnSlot
from .sessions._service import apply_held
from .sessions._types import Session
from .turns._codec import PendingCallInfo, announcement_events
from .turns._decision import Decision, DecisionRecord
from .turns._record import Claim, Clock, claim_abandoned, new_claim, release_owner
from .turns._turn import Turn, TurnInfo, discard_notice, in_flight_calls, open_decisions
from .turns._verify import TurnView, open_journal

__all__ = ("Runner", "TurnInfo")

RUN_KEY = "codeact_run_key"
"""``Event.custom_metadata`` key naming the run key of the run that stored the event."""
DECISIONS = "codeact_decisions"
"""``Event.custom_metadata`` key of the first event a resumed run stores: the decisions it acts
on (``DecisionRecord`` as JSON: act, call key, tool, actor, reason, at, edited args), those
given to it and, for a recovery, those journaled on the calls it finds in flight."""


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
        clock: wall-clock seconds since the epoch for claims and leases (``time.time``;
            tests replace it to expire a lease without waiting).

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
        clock: Clock = time.time,
    ) -> None:
        self.app_name = app_name
        self.clock = clock
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
        run_key: str | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Runs one invocation; yields each event after it is stored.

        Args:
            user_id / session_id: the session (see ``auto_create_session``).
            new_message: the user's message (text or ``Content``); it may carry function
                responses completing a long-running call. None resumes without one (it
                re-announces the pending calls, or recovers an interrupted turn); on a
                session with nothing in flight it returns at once: no model call, no event,
                nothing stored. The same message sent again after a run that
                stored nothing after it (a ``ModelError`` on the first model call) retries
                that invocation: it is not stored twice.
            run_config: per-run options (confirmation decisions, discarding a checkpoint).
            run_key: an idempotency key chosen by the caller (SPEC §5 v3): when a run with
                this key finished, its stored events are yielded again (marked
                ``custom_metadata["codeact_replayed"]``) and nothing runs; when it was
                interrupted, it is recovered and its message is not stored again; otherwise
                the run goes ahead and its events carry the key.

        Raises:
            SessionNotFoundError: no such session.
            SessionStoreError: the store failed.
            CodeRuntimeError: a host failure of the interpreter.
            ModelError: the model request failed.
            NoPendingCallError: a decision names no pending call (SPEC §5).
            CallsPendingError: calls are pending and the message does not decide them.
            AlreadyResumingError: another runner holds the turn's claim.
            DecisionMismatchError: a decision's digest is not the pending call's.
            StaleCheckpointError: the paused script cannot resume under this agent.
                In each of these cases nothing was claimed or stored and no tool ran.
        """
        async with aclosing(self._run(user_id, session_id, new_message, run_config, run_key, None)) as events:
            async for event in events:
                yield event

    async def _run(
        self,
        user_id: str,
        session_id: str,
        new_message: Content | str | None,
        run_config: RunConfig | None,
        run_key: str | None,
        turn: Turn | None,
    ) -> AsyncGenerator[Event, None]:
        """``run_async``, reusing ``turn`` (the stored turn a decision was checked against,
        verified once) when the slot is still the one it was read from."""
        run_config = run_config or RunConfig()
        content = Content.from_text(new_message) if isinstance(new_message, str) else new_message
        if content is not None:
            problem = text_problem(content)
            if problem is not None:
                raise ValueConversionError(f"{problem}; nothing was stored")
        responses = [p.function_response for p in content.parts if p.function_response] if content else []
        decided = bool(run_config.tool_confirmation_decisions) or bool(responses) or bool(run_config.in_doubt_decisions)
        session = await self._session(user_id, session_id, create=not decided)
        invocation_id = new_id()
        slot = await self.session_service.load_turn(app_name=self.app_name, user_id=user_id, session_id=session_id)
        stored_message = redelivered = False
        used: set[str] = set()
        if run_key is not None:
            mine = [e for e in session.events if (e.custom_metadata or {}).get(RUN_KEY) == run_key]
            record = record_of(slot)
            held = record is not None and record.claim is not None and record.claim.run_key == run_key
            if held:
                # Interrupted (or running elsewhere): recovered below. This redelivery's decisions
                # (in memory only when the run stopped) apply again to the calls still pending;
                # its message is stored here only if the run stopped before storing it. An
                # in-doubt "rerun" the run announced was used (the call may have run): not reapplied.
                stored_message, redelivered = True, True
                used = {
                    str((e.custom_metadata or {}).get("call_key"))
                    for e in mine
                    if (e.custom_metadata or {}).get("codeact_kind") == "in_doubt"
                }
                if any(e.author == "user" for e in mine):
                    content = None
                else:
                    stored_message = False
            elif paused_unannounced(record, run_key, mine):
                # The run paused (its turn stored, suspended) but stopped before its announcement
                # was stored: the redelivery announces the pending calls again (its decisions used).
                content, responses, decided = None, [], False
                run_config = run_config.model_copy(
                    update={"tool_confirmation_decisions": {}, "in_doubt_decisions": {}, "decision_digests": {}}
                )
                stored_message = True
                if mine:
                    invocation_id = mine[-1].invocation_id
            elif mine and not all(e.author == "user" for e in mine):
                for event in mine:
                    if event.author == "user":
                        continue  # the run's input, not one of the events it yielded
                    meta = {**(event.custom_metadata or {}), "codeact_replayed": True}
                    yield event.model_copy(update={"custom_metadata": meta})
                return
            elif mine:
                invocation_id, stored_message, redelivered = mine[-1].invocation_id, True, True
        claim = new_claim(self.clock, run_config.claim_lease, run_key)
        live: LiveRowWriter | None = None  # the session's live row, once the run streams (issue 51)
        try:
            async with aclosing(
                self._run_claimed(
                    session,
                    slot,
                    invocation_id,
                    content,
                    responses,
                    decided,
                    run_config,
                    claim,
                    stored_message,
                    redelivered,
                    used,
                    turn,
                )
            ) as events:
                async for event in events:
                    yield event  # first: a live row write never delays what the caller sees
                    if event.partial and live is None and self.session_service.keeps_live:
                        live = LiveRowWriter(self.session_service, session)
                    if live is not None:
                        await live.see(event)
        finally:
            if live is not None:
                await live.close()
            release_owner(claim.owner)

    async def _run_claimed(
        self,
        session: Session,
        slot: TurnSlot | None,
        invocation_id: str,
        content: Content | None,
        responses: list[FunctionResponse],
        decided: bool,
        run_config: RunConfig,
        claim: Claim,
        stored_message: bool,
        redelivered: bool = False,
        used: set[str] | None = None,
        turn: Turn | None = None,
    ) -> AsyncGenerator[Event, None]:
        claimed = False
        shown: list[dict[str, Any]] = []  # the decisions this run acts on, shown on its first event
        results: dict[str, Any] = {}
        view: TurnView | None = None
        discarded: Event | None = None
        if slot is not None and run_config.discard_pending_checkpoint:
            await delete_slot(self.session_service, session, slot)
            slot = None
        if slot is not None:
            owner = agent_for(self.agent, session, slot)
            if turn is None or turn.slot.version != slot.version or not turn.strict:
                turn = await self._load(owner, session, slot, run_config)
            if turn.stale is not None:
                # Not claimed: the agent reports the stale turn with an event and the slot is left
                # exactly as it was (the call stays pending for an agent that can resume it).
                if content is not None and content.text and run_config.on_pending_message == "discard":
                    await delete_slot(self.session_service, session, slot)
                    slot = None
                # else the agent reports the stale turn (the slot is left as it is)
            else:
                record = turn.record
                assert record is not None
                pending = turn.pending
                if redelivered:
                    run_config, responses = still_pending(run_config, responses, pending, used or set())
                    decided = bool(run_config.tool_confirmation_decisions or run_config.in_doubt_decisions or responses)
                if record.claim is not None and not claim_abandoned(record.claim, self.clock):
                    raise AlreadyResumingError(
                        f"session {session.id!r} is being resumed by another runner, {record.claim.describe()}; "
                        "nothing ran here. If that runner is gone, its turn can be recovered (Runner.recover) once its "
                        "lease expires",
                        pending,
                    )
                action = claim_for(
                    record, pending, turn.in_flight, turn.interrupted, run_config, content, responses, decided
                )
                if action is ANNOUNCE:
                    for event in announcement_events(owner.name, invocation_id, pending):
                        yield event  # a re-announcement: nothing is stored
                    return
                if action is DISCARD:
                    await delete_slot(self.session_service, session, slot)
                    slot = None
                    discarded = discard_notice(
                        owner.name, invocation_id, turn, pending, "a new message arrived while calls were pending"
                    )
                else:
                    assert isinstance(action, dict)
                    results = action["responses"]
                    records = check_answers(
                        decision_records(action, run_config, self.clock()), results, pending, turn.view.tools
                    )
                    run_config = run_config.model_copy(
                        update={
                            "tool_confirmation_decisions": {k: v is True for k, v in action["decisions"].items()},
                            "tool_denial_reasons": {
                                k: v for k, v in action["decisions"].items() if isinstance(v, str) and v
                            },
                            "decision_records": records,
                        }
                    )
                    shown = [r.model_dump(mode="json", exclude_none=True) for r in records.values()]
                    if turn.interrupted:  # a recovery: the decisions its calls in flight were started by
                        shown += [
                            r.model_dump(mode="json", exclude_none=True)
                            for r in open_decisions(turn.journal)
                            if r.call_key not in records
                        ]
                    slot = await claim_turn(self.session_service, session, slot, claim)
                    claimed = True
                    view = turn.view
        elif content is None and not decided and session.state.get(PENDING_STATE_KEY) is None:
            # Nothing pending or interrupted and nothing to say: no model is called, no event
            # is stored or yielded (a message-less run resumes; here there is nothing to resume).
            return
        elif decided and not redelivered:
            raise NoPendingCallError(
                f"session {session.id!r} has no pending call (its run finished or never paused); the decision or "
                "function response matches nothing and nothing ran"
            )
        agent = agent_for(self.agent, session, slot)
        if discarded is not None:
            await self._append(session, discarded, claimed, claim.run_key)
            yield discarded
        if content is not None and not stored_message:
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
                await self._append(session, user_event, claimed, claim.run_key)
        transfers = 0
        while True:
            ctx = self._context(invocation_id, agent, session, content, run_config)
            ctx.turn_slot, slot = slot, None  # only the first agent resumes the claimed turn
            ctx.turn_view, view = view, None  # restored once, here: the agent does not restore it again
            ctx.claim, ctx.clock, ctx.run_key = claim, self.clock, claim.run_key
            ctx.turn_responses, results = results, {}
            transfer_to: str | None = None
            async with aclosing(agent.run_async(ctx)) as events:
                async for event in events:
                    if event.partial:  # a live preview (RunConfig.streaming): never stored
                        yield event
                        continue
                    if shown:
                        event.custom_metadata = {**(event.custom_metadata or {}), DECISIONS: shown}
                        shown = []
                    if event.id in ctx.held_events:  # the turn driver stores it with its next durable write
                        apply_held(session, event, {RUN_KEY: claim.run_key} if claim.run_key is not None else {})
                    else:
                        await self._append(session, event, claimed, claim.run_key)
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
                await self._append(session, error, claimed, claim.run_key)
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

    async def files(self, *, user_id: str, session_id: str) -> list[SessionFile]:
        """The session's overlay files, in path order; ``SessionNotFoundError`` for no session."""
        return await session_files(self.session_service, self.app_name, user_id, session_id)

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
            await delete_slot(self.session_service, session, slot)
            found = True
        if session.state.get(PENDING_STATE_KEY) is not None:
            owner = agent_for(self.agent, session)
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
        (``[]`` when nothing is pending, or when this runner's agent cannot resume the
        paused script: see ``turn_info``). Tool names and arguments are read from the
        verified continuation, never from the stored record (SPEC §5 v3).

        Raises:
            SessionNotFoundError: no such session (even with ``auto_create_session``).
        """
        info = await self.turn_info(user_id=user_id, session_id=session_id)
        return info.pending if info is not None else []

    async def list_pending(
        self, app_name: str | None = None, user_id: str | None = None
    ) -> dict[tuple[str, str], list[PendingCallInfo]]:
        """The calls waiting for a decision or a result in every paused session of the app
        (of one user, when given): ``{(user_id, session_id): pending calls}``, in the order
        the store lists the sessions, each list as ``pending`` gives it. The store only finds
        the sessions with a turn in flight (``BaseSessionService.list_turns``); the calls are
        read from each verified continuation. Sessions with nothing pending, or a turn this
        runner's agent cannot read, are left out.

        Args:
            app_name: must be this runner's ``app_name`` (the default).
            user_id: only this user's sessions.

        Raises:
            ValueError: ``app_name`` is another app.
            SessionStoreError: the store failed.
        """
        if app_name is not None and app_name != self.app_name:
            raise ValueError(f"this runner serves app {self.app_name!r}, not {app_name!r}")
        found: dict[tuple[str, str], list[PendingCallInfo]] = {}
        for user, sid in await self.session_service.list_turns(app_name=self.app_name, user_id=user_id):
            try:
                calls = await self.pending(user_id=user, session_id=sid)
            except SessionNotFoundError:
                continue  # deleted since it was listed
            if calls:
                found[(user, sid)] = calls
        return found

    async def decisions(
        self, app_name: str | None = None, user_id: str | None = None, session_id: str | None = None
    ) -> list[DecisionRecord]:
        """Who decided what (SPEC §5 v4): every decision journaled in the app (of one user,
        of one session when given), of finished turns too, newest first. Each is a
        ``DecisionRecord`` (act, call key, tool, actor, reason, time, edited arguments) with
        where it was made (``app_name``, ``user_id``, ``session_id``, ``turn``). Under a
        ``snapshot_key``, a record whose seal does not hold in its session (edited in the
        store, copied from another session) is left out.

        Args:
            app_name: must be this runner's ``app_name`` (the default).
            user_id / session_id: only this user's (and this session's) decisions.

        Raises:
            ValueError: ``app_name`` is another app.
            StoreMethodMissingError: the store does not implement ``list_decisions``.
            SessionStoreError: the store failed.
        """
        if app_name is not None and app_name != self.app_name:
            raise ValueError(f"this runner serves app {self.app_name!r}, not {app_name!r}")
        rows = await self.session_service.list_decisions(app_name=self.app_name, user_id=user_id, session_id=session_id)
        runtime = getattr(self.agent, "runtime", None)
        found: list[DecisionRecord] = []
        for user, sid, turn, stored in rows:
            try:
                (opened,) = open_journal(runtime, (self.app_name, user, sid), turn, [stored])
                record = DecisionRecord.model_validate_json(opened.data)
            except (SnapshotError, ValueError):
                continue  # a record whose seal does not hold here, or that does not validate
            where = {"app_name": self.app_name, "user_id": user, "session_id": sid, "turn": turn}
            found.append(record.model_copy(update=where))
        found.sort(key=lambda r: r.at, reverse=True)
        return found

    async def turn_info(self, *, user_id: str, session_id: str) -> TurnInfo | None:
        """The session's in-flight turn: suspended, running (and who runs it), interrupted
        (its runner stopped: ``recover`` it) or stale; None when there is none.

        Raises:
            SessionNotFoundError: no such session.
        """
        info, _ = await self._turn_state(user_id, session_id)
        return info

    async def _turn_state(self, user_id: str, session_id: str) -> tuple[TurnInfo | None, Turn | None]:
        """``turn_info`` and the ``Turn`` it was read from (loaded and verified once)."""
        session = await self._session(user_id, session_id, create=False)
        slot = await self.session_service.load_turn(app_name=self.app_name, user_id=user_id, session_id=session_id)
        if slot is None:
            return None, None
        owner = agent_for(self.agent, session, slot)
        # A runner whose tree does not hold the turn's agent (a read-only tool) still lists
        # the calls, read from the continuation; resuming needs the agent (strict check).
        strict = owner.name == slot.data.get("agent_name")
        turn = await self._load(owner, session, slot, RunConfig(), strict=strict)
        record = turn.record
        if record is None:
            where = turn.view.record.turn if turn.view.record is not None and turn.view.seal_failed else ""
            return TurnInfo(
                status="stale", turn=where, reason=turn.stale or "", seal_failed=turn.view.seal_failed
            ), turn
        info = TurnInfo(
            status=turn.status(self.clock),
            turn=record.turn,
            claim=record.claim,
            pending=turn.pending,
            in_flight=sorted(turn.in_flight),
        )
        return info, turn

    async def _load(
        self, agent: BaseAgent, session: Session, slot: TurnSlot, run_config: RunConfig, *, strict: bool = True
    ) -> Turn:
        """The stored turn, verified (``verify_turn``, through the agent) and its journal
        opened (seals checked): a ``Turn`` whose ``stale`` says why it cannot resume here."""
        view = await self._view(agent, session, slot, run_config, strict=strict)
        if view.stale is not None or view.record is None:
            return Turn(slot, view, strict=strict)
        record = view.record
        runtime = getattr(agent, "runtime", None)
        seal = getattr(runtime, "seal", None)
        if not record.pending and (seal is None or seal(b"") is None):
            return Turn(slot, view, strict=strict)  # nothing to decide, and no seal to check
        records = await self.session_service.read_journal(
            app_name=session.app_name, user_id=session.user_id, session_id=session.id, turn=record.turn
        )
        try:
            journal = open_journal(runtime, (session.app_name, session.user_id, session.id), record.turn, records)
        except SnapshotError as exc:  # a journal record fails its seal: stale, nothing of the turn runs
            stale = TurnView(stale=str(exc), record=record, seal_failed=True)
            return Turn(slot, stale, strict=strict)
        return Turn(slot, view, journal, in_flight_calls(record, journal), strict=strict)

    async def _view(
        self, agent: BaseAgent, session: Session, slot: TurnSlot, run_config: RunConfig, *, strict: bool = True
    ) -> TurnView:
        verify = getattr(agent, "verify_turn", None)
        if verify is None:
            return TurnView(stale=f"agent {agent.name!r} cannot resume a stored turn")
        ctx = self._context(new_id(), agent, session, None, run_config)
        try:
            view: TurnView = await verify(ctx, slot, strict=strict)
        except ValueError as exc:
            return TurnView(stale=str(exc))
        return view

    async def decide(
        self,
        decision: Decision | Sequence[Decision],
        *,
        user_id: str,
        session_id: str,
        run_config: RunConfig | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Applies one ``Decision`` to the session's paused (or interrupted) turn and resumes
        it; yields the run's events (as ``run_async``). The one path every decision takes:
        ``approve``, ``deny``, ``complete``, ``resolve_in_doubt`` and ``recover`` are this
        method with the decision built for you.

        The decision is checked before anything is claimed or stored: the call it names
        (read from the verified continuation), whether that call's kind accepts it
        (confirmation: approve / deny; completion: complete / deny; in doubt: resolve with
        rerun / skip / fail), its ``digest``, and an approval's edited ``args`` against the
        tool's schema. Who decided what (``DecisionRecord``: the act, ``actor``, ``reason``,
        the time, edited arguments) is journaled, sealed, with the record the decision
        produces (the resumed call's intent for approve, complete and rerun; its outcome for
        deny, skip and fail), shown on the first event of the resumed run
        (``custom_metadata["codeact_decisions"]``) and listed by ``decisions``.
        ``decision.run_key`` is the run's idempotency key (``run_async``).

        Several calls of one turn (a gather, or a script paused at more than one call) may be
        decided in one durable step: ``decide([Decision, ...])`` applies all of them or none.
        Every member is checked first (its call, kind, digest, edited arguments, payload or
        value), then the turn is claimed once and resumed once; one refused member refuses
        the batch with its error and nothing is claimed, stored or run. Each member names its
        ``call_key``; ``recover`` is not a member; members share one ``run_key`` (or none).

        Args:
            decision: what to do (``Decision``), or a batch of them (a sequence).
            user_id / session_id: the session (never created here).
            run_config: per-run options; not ``discard_pending_checkpoint``.

        Raises:
            EditNotSupportedError: ``decision.args`` is set and the tool has ``editable=False``.
            DecisionValueError: ``decision.args`` fail the tool's schema (naming each field).
            SessionNotFoundError: no such session (even with ``auto_create_session``).
            NoPendingCallError: the key matches no pending call, or nothing is pending; for
                ``recover``, there is no interrupted turn.
            DecisionRefusedError: the call's kind does not accept the decision (it names what
                the call awaits and accepts).
            AlreadyResumingError: another runner claimed the suspension first (the tool runs
                there, once), or the call already started under a runner that stopped
                (``recover`` the turn).
            DecisionMismatchError: ``decision.digest`` is not the pending call's.
            StaleCheckpointError: the stored turn's seal does not hold in this session (an
                edited record, one copied from another session, or one sealed by 0.2.0:
                discard it); for ``recover``, any stale turn. Other stale turns (a changed
                roster) are reported by the run's stale-checkpoint event, the call left pending.
            ValueError: ``run_config`` asks to discard the pending checkpoint; a batch that is
                empty, names a call twice, has a member without ``call_key`` or a ``recover``,
                or members with different run keys.

        In each case nothing was claimed or stored and no tool ran.
        """
        rc: RunConfig | None
        message: Content | None = None
        if not isinstance(decision, Decision):
            rc, message, turn, run_key = await _decide.resolve_batch(
                self, list(decision), user_id, session_id, run_config
            )
        elif decision.verb == "recover":
            rc, run_key = run_config, decision.run_key
            turn = await _decide.check_recoverable(self, user_id, session_id, run_key)
        else:
            run_key = decision.run_key
            rc, message, turn = await _decide.resolve_decision(self, decision, user_id, session_id, run_config)
        async with aclosing(self._run(user_id, session_id, message, rc, run_key, turn)) as events:
            async for event in events:
                yield event

    def recover(
        self, *, user_id: str, session_id: str, run_config: RunConfig | None = None, run_key: str | None = None
    ) -> AsyncGenerator[Event, None]:
        """Resumes the session's interrupted turn (its runner stopped: the process died, or
        its lease expired) from its continuation and journal; yields the run's events. Calls
        whose outcome is recorded never run again; a call that started and has no outcome is
        in doubt and follows its tool's ``on_in_doubt``. ``decide(Decision(verb="recover"))``.

        Raises:
            SessionNotFoundError: no such session.
            NoPendingCallError: there is no interrupted turn (nothing ran).
            AlreadyResumingError: a live runner holds the turn (its lease has not expired).
            StaleCheckpointError: the stored turn cannot be resumed here (a changed roster,
                another format, or a seal that does not hold in this session: edited,
                copied from another session, or sealed by 0.2.0); nothing ran.
        """
        decision = Decision(verb="recover", run_key=run_key)
        return self.decide(decision, user_id=user_id, session_id=session_id, run_config=run_config)

    def approve(
        self,
        *,
        user_id: str,
        session_id: str,
        call_key: str | None = None,
        digest: str | None = None,
        run_config: RunConfig | None = None,
        run_key: str | None = None,
        args: dict[str, Any] | None = None,
        actor: str | None = None,
        reason: str | None = None,
        payload: Any = None,
    ) -> AsyncGenerator[Event, None]:
        """Approves a call awaiting confirmation and resumes the paused script; yields the
        run's events (as ``run_async``). ``call_key=None`` is accepted only when exactly one
        call awaits confirmation. The call that runs is the one ``pending()`` lists under
        that key, read from the verified continuation, or that call with ``args``.
        ``decide(Decision(verb="approve"))``.

        Args:
            digest: the ``PendingCallInfo.digest`` the decision was made on: when given, a
                call under that key with another digest is refused (a stale view).
            run_key: an idempotency key (``run_async``).
            args: edited arguments (by name): the tool runs with these instead of the
                script's; validated against the tool's schema first; needs ``digest``.
            actor / reason: who approves and why (journaled with the call's intent).
            payload: what the approved tool reads as ``ToolContext.tool_confirmation.payload``
                (plain data), validated against the tool's ``payload_type`` first.

        Raises:
            DecisionRefusedError: the call awaits its result or is in doubt (it accepts no
                approval). Otherwise as ``decide``.
        """
        decision = Decision(
            verb="approve",
            call_key=call_key,
            digest=digest,
            run_key=run_key,
            args=args,
            actor=actor,
            reason=reason,
            payload=payload,
        )
        return self.decide(decision, user_id=user_id, session_id=session_id, run_config=run_config)

    def deny(
        self,
        *,
        user_id: str,
        session_id: str,
        call_key: str | None = None,
        reason: str | None = None,
        digest: str | None = None,
        run_config: RunConfig | None = None,
        run_key: str | None = None,
        actor: str | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Denies a call awaiting confirmation, or a long-running call awaiting its result
        (the script gets ``PermissionError``, with ``reason``), and resumes it; yields the
        run's events. A call in doubt cannot be denied (it may have run: resolve it).
        ``call_key=None`` is accepted only when exactly one call accepts a denial.
        ``decide(Decision(verb="deny"))``.

        Raises:
            DecisionRefusedError: the call is in doubt. Otherwise as ``decide``.
        """
        decision = Decision(verb="deny", call_key=call_key, reason=reason, digest=digest, run_key=run_key, actor=actor)
        return self.decide(decision, user_id=user_id, session_id=session_id, run_config=run_config)

    def complete(
        self,
        *,
        user_id: str,
        session_id: str,
        call_key: str,
        value: Any = None,
        error: str | None = None,
        run_config: RunConfig | None = None,
        run_key: str | None = None,
        actor: str | None = None,
        reason: str | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Completes a long-running call with ``value`` (plain data) and resumes the paused
        script; yields the run's events. The response is stored as a user event carrying a
        function response. ``error`` (text, with ``value`` left ``None``) completes it as
        failed instead: the script's call raises ``RuntimeError`` naming the tool and the text,
        which the script may catch; the failure is journaled like any outcome.
        ``decide(Decision(verb="complete", payload=value))``.

        Raises:
            ValueConversionError: ``value`` is not plain data (SPEC §3), is nested more than
                ``MAX_VALUE_DEPTH`` levels or encodes to more than ``MAX_VALUE_BYTES``; checked
                before anything is claimed or stored (nothing changed).
            ValueError: ``error`` given together with a ``value``, or not a str (a
                ``pydantic.ValidationError``). Otherwise as ``decide``.
        """
        decision = Decision(
            verb="complete", call_key=call_key, payload=value, error=error, run_key=run_key, actor=actor, reason=reason
        )
        return self.decide(decision, user_id=user_id, session_id=session_id, run_config=run_config)

    def resolve_in_doubt(
        self,
        *,
        user_id: str,
        session_id: str,
        call_key: str,
        action: Literal["rerun", "skip", "fail"],
        value: Any = None,
        reason: str = "",
        run_config: RunConfig | None = None,
        run_key: str | None = None,
        actor: str | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Decides a call paused in doubt (a tool with ``on_in_doubt="ask"`` that started
        before its runner stopped and has no recorded outcome) and resumes the script:
        ``"rerun"`` runs the tool again, ``"skip"`` gives the script ``value`` as its result
        without running it, ``"fail"`` gives the script a ``RuntimeError`` (with ``reason``).
        ``decide(Decision(verb="resolve", action=action))``.

        Raises:
            ValueConversionError: ``value`` is not plain data (``"skip"``). Otherwise as
                ``decide``.
        """
        decision = Decision(
            verb="resolve",
            call_key=call_key,
            action=action,
            payload=value if action == "skip" else None,
            reason=reason or None,
            run_key=run_key,
            actor=actor,
        )
        return self.decide(decision, user_id=user_id, session_id=session_id, run_config=run_config)

    async def _append(self, session: Session, event: Event, claimed: bool, run_key: str | None = None) -> None:
        """Stores ``event`` (marked with the run key, if any). A run that claimed the
        session's turn owns it: when the runner it took the turn from stored its last event
        after this run loaded the session, the session is brought up to date in place and
        the append retried once."""
        if run_key is not None:
            event.custom_metadata = {**(event.custom_metadata or {}), RUN_KEY: run_key}
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


set_default_runner_factory(Runner)  # AgentTool runs its agent with this runner unless given another
