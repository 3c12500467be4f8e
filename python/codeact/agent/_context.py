"""What a run carries: ``RunConfig``, ``InvocationContext``, ``CallbackContext``, and the
``BaseAgent`` interface every agent implements."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..events import Content, Event, EventActions
from ..services._access import ServiceAccess
from ..sessions._journal import TurnSlot
from ..sessions._types import Session
from ..tools._context import State
from ..turns._decision import DecisionRecord
from ..turns._record import DEFAULT_CLAIM_LEASE, Claim, Clock

if TYPE_CHECKING:
    from ..services import BaseArtifactService, BaseMemoryService, SecretsProvider
    from ..sessions import BaseSessionService

__all__ = (
    "BaseAgent",
    "CallbackContext",
    "InvocationContext",
    "ReadonlyContext",
    "RunConfig",
    "ConfirmationHandler",
    "InDoubtDecision",
    "ToolConfirmationDecision",
)

ToolConfirmationDecision = bool | Literal["approve", "deny"]
"""A human decision on a gated tool call: ``True`` / ``"approve"`` or ``False`` / ``"deny"``."""

ConfirmationHandler = Callable[[Any], "Awaitable[Any] | Any"]
"""``RunConfig.tool_confirmation_handler``: called with the pending call (a
``PendingCallInfo``, as ``Runner.pending`` shows it); returns ``"approve"`` / ``True``,
``"deny"`` / ``False``, ``("deny", reason)``, or ``"ask"`` / ``None`` (suspend for a human, as
without a handler). A coroutine function is awaited; a plain function runs in a worker thread."""


class InDoubtDecision(BaseModel):
    """What to do with a recovered call that may have run (SPEC §5 v3, ``on_in_doubt="ask"``).

    Attributes:
        action: ``"rerun"`` (run the tool again), ``"skip"`` (do not run it; the script gets
            ``value`` as its result) or ``"fail"`` (do not run it; the script gets a
            ``RuntimeError`` with ``reason``).
        value: the result for ``"skip"`` (plain data).
        reason: the message for ``"fail"``.
    """

    model_config = ConfigDict(extra="forbid")

    action: Literal["rerun", "skip", "fail"]
    value: Any = None
    reason: str = ""


class RunConfig(BaseModel):
    """Per-run options.

    Attributes:
        tool_confirmation_decisions: call key -> decision for calls awaiting confirmation
            (the key is ``Event.actions.requested_tool_confirmations``' key, also
            ``ToolConfirmation.function_call_id``).
        discard_pending_checkpoint: drop a pending checkpoint (for example a stale one)
            and start fresh from the new message.
        transfer_targets: agent names (parent, peers) this run may transfer to, set by the
            runner.
        parent_agent: which of ``transfer_targets`` is the parent.
        max_transfers: how many agent hand-offs one ``run_async`` follows.
        tool_denial_reasons: call key -> why it was denied (given to the script with the
            ``PermissionError``).
        on_pending_message: what a new user message does while calls are pending (SPEC §5):
            ``"reject"`` raises ``CallsPendingError`` and stores nothing; ``"deny"`` denies
            the pending calls (a long-running one gets an error result), resumes the script
            and then gives the message to the model; ``"discard"`` drops the paused script
            and runs the message fresh.
        max_model_calls: model calls this run may make; reaching it ends the run with a
            ``codeact.usage_limit`` error event.
        max_total_tokens: tokens (prompt + completion, as the model reports them) this run
            may use; reaching it ends the run with a ``codeact.usage_limit`` error event.
        emit_tool_events: also yield (and store) one ``tool_call`` event (a ``function_call``
            part) before each tool runs and one ``tool_response`` event (a
            ``function_response`` part) after its outcome is journaled (docs/events.md). Off by
            default: each is one more session append per call (see benchmarks/agent.py).
        tool_confirmation_handler: asked for a decision inside the run when a gated call has
            none (``ConfirmationHandler``; the original system's handler of the same name).
            Its decision is journaled like ``Runner.approve`` / ``deny``; ``"ask"`` suspends
            as without a handler; a handler that raises ends the run with
            ``ConfirmationHandlerError`` and the call left pending.
        claim_lease: seconds a runner's claim on a turn stays valid without renewal (the
            owner renews it every third of it while it works); an expired claim can be taken
            over (``Runner.recover``).
        decision_digests: call key -> the ``PendingCallInfo.digest`` the decision was made
            on; a decision for a call whose digest differs is refused (set by
            ``Runner.approve(digest=...)``).
        in_doubt_decisions: call key -> ``InDoubtDecision`` for calls paused in doubt (set by
            ``Runner.resolve_in_doubt``).
        decision_records: call key -> ``DecisionRecord``: who decided, when, why, and an
            approval's edited arguments and payload (set by ``Runner.decide``, which checks
            them first; the runner adds a record without an actor for a decision made
            otherwise). Journaled with the record the decision produces.
        streaming: also yield ``partial=True`` events, never stored and never final: the
            model's reply as it arrives (each holding the new text; the model streams when it
            has ``generate_content_stream``) and what the script prints while it runs (at most
            10 per second, the first at once). The stored events are unchanged (docs/events.md;
            ADK's ``StreamingMode.SSE`` maps to it).
        eager: start the script while the model is still writing it (eager start,
            docs/events.md): complete top-level statements of the reply's first fence run
            as they complete, and only calls to read-only tools that need no decision run
            before the reply is stored; the script then runs from its start, its early
            calls answered from what they returned. Works with or without ``streaming``.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    tool_confirmation_decisions: dict[str, ToolConfirmationDecision] = Field(
        default_factory=dict,
        description=(
            "Call key -> decision for calls awaiting confirmation (the key is "
            "`Event.actions.requested_tool_confirmations`' key, also `ToolConfirmation.function_call_id`)."
        ),
    )
    discard_pending_checkpoint: bool = Field(
        default=False,
        description="Drop a pending checkpoint (for example a stale one) and start fresh from the new message.",
    )
    transfer_targets: list[str] = Field(
        default_factory=list, description="Agent names (parent, peers) this run may transfer to, set by the runner."
    )
    parent_agent: str | None = Field(default=None, description="Which of `transfer_targets` is the parent.")
    max_transfers: int = Field(default=10, ge=0, description="How many agent hand-offs one `run_async` follows.")
    tool_denial_reasons: dict[str, str] = Field(
        default_factory=dict,
        description="Call key -> why it was denied (given to the script with the `PermissionError`).",
    )
    on_pending_message: Literal["reject", "deny", "discard"] = Field(
        default="reject",
        description=(
            'What a new user message does while calls are pending (SPEC §5): `"reject"` raises `CallsPendingError` '
            'and stores nothing; `"deny"` denies the pending calls (a long-running one gets an error result), '
            'resumes the script and then gives the message to the model; `"discard"` drops the paused script and '
            "runs the message fresh."
        ),
    )
    max_model_calls: int | None = Field(
        default=None,
        ge=0,
        description="Model calls this run may make; reaching it ends the run with a `codeact.usage_limit` error event.",
    )
    max_total_tokens: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Tokens (prompt + completion, as the model reports them) this run may use; reaching it ends the run with "
            "a `codeact.usage_limit` error event."
        ),
    )
    emit_tool_events: bool = Field(
        default=False,
        description=(
            "Also yield (and store) one `tool_call` event (a `function_call` part) before each tool runs and one "
            "`tool_response` event (a `function_response` part) after its outcome is journaled (docs/events.md). Off "
            "by default: each is one more session append per call (see benchmarks/agent.py)."
        ),
    )
    tool_confirmation_handler: ConfirmationHandler | None = Field(
        default=None,
        description=(
            "Asked for a decision inside the run when a gated call has none (`ConfirmationHandler`; the original "
            'system\'s handler of the same name). Its decision is journaled like `Runner.approve` / `deny`; `"ask"` '
            "suspends as without a handler; a handler that raises ends the run with `ConfirmationHandlerError` and "
            "the call left pending."
        ),
    )
    claim_lease: float = Field(
        default=DEFAULT_CLAIM_LEASE,
        gt=0,
        description=(
            "Seconds a runner's claim on a turn stays valid without renewal (the owner renews it every third of it "
            "while it works); an expired claim can be taken over (`Runner.recover`)."
        ),
    )
    decision_digests: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Call key -> the `PendingCallInfo.digest` the decision was made on; a decision for a call whose digest "
            "differs is refused (set by `Runner.approve(digest=...)`)."
        ),
    )
    in_doubt_decisions: dict[str, InDoubtDecision] = Field(
        default_factory=dict,
        description="Call key -> `InDoubtDecision` for calls paused in doubt (set by `Runner.resolve_in_doubt`).",
    )
    decision_records: dict[str, DecisionRecord] = Field(
        default_factory=dict,
        description=(
            "Call key -> `DecisionRecord`: who decided, when, why, and an approval's edited arguments and payload "
            "(set by `Runner.decide`, which checks them first). Journaled with the record the decision produces."
        ),
    )
    streaming: bool = Field(
        default=False,
        description=(
            "Also yield `partial=True` events, never stored and never final: the model's reply as it arrives (each "
            "holding the new text; the model streams when it has `generate_content_stream`) and what the script "
            "prints while it runs (at most 10 per second, the first at once). The stored events are unchanged "
            "(docs/events.md; ADK's `StreamingMode.SSE` maps to it)."
        ),
    )
    eager: bool = Field(
        default=False,
        description=(
            "Start the script while the model is still writing it (docs/events.md, 'Eager start'): only calls to "
            "read-only tools that need no decision run before the reply is stored; the script then runs from its "
            "start, its early calls answered from what they returned."
        ),
    )


@dataclass
class InvocationContext:
    """One run of one agent on one session.

    Attributes:
        invocation_id: unique per ``run_async`` call.
        agent: the agent running.
        session: the live session; the session service updates its state as events land.
        session_service: where events are stored.
        user_content: the message that started the run (None when resuming without one).
        run_config: per-run options.
        artifact_service / memory_service / secrets: the runner's services, reachable
            from tools (``ToolContext``) and callbacks (``CallbackContext``) alike.
        turn_slot: the session's in-flight turn, claimed by the runner for this run (the
            agent resumes it), or None.
        turn_view: the runner's verified view of ``turn_slot`` (a ``codeact.turns.TurnView``,
            its continuation restored and not resumed), or None: the agent resumes from it
            instead of verifying and restoring the slot again.
        claim: this run's claim (owner, lease) on the session's turn; written with every
            turn record the run stores.
        clock: wall-clock seconds since the epoch (``time.time``; tests replace it).
        turn_responses: call key -> completion value of long-running calls this run
            completes (checked by the runner).
        run_key: the caller's idempotency key of this run, or None.
    """

    invocation_id: str
    agent: BaseAgent
    session: Session
    session_service: BaseSessionService | None
    user_content: Content | None
    run_config: RunConfig = field(default_factory=RunConfig)
    artifact_service: BaseArtifactService | None = None
    memory_service: BaseMemoryService | None = None
    secrets: SecretsProvider | None = None
    turn_slot: TurnSlot | None = None
    turn_view: Any = None
    claim: Claim | None = None
    clock: Clock = time.time
    turn_responses: dict[str, Any] = field(default_factory=dict)
    run_key: str | None = None

    @property
    def app_name(self) -> str:
        """The app of the session this invocation runs in."""
        return self.session.app_name

    @property
    def user_id(self) -> str:
        """The user of the session this invocation runs in."""
        return self.session.user_id


class ReadonlyContext:
    """What instruction providers and guardrails see: the run's identity, the user's
    message and session state, read only."""

    def __init__(self, ctx: InvocationContext, pending: EventActions | None = None) -> None:
        self._ctx = ctx
        delta = pending.state_delta if pending is not None else {}
        self._state_view = State(ctx.session.state, delta)

    @property
    def state(self) -> Mapping[str, Any]:
        """Session state (with this run's pending changes), read only."""
        return MappingProxyType(self._state_view.to_dict())

    @property
    def agent_name(self) -> str:
        """The name of the agent being run."""
        return self._ctx.agent.name

    @property
    def invocation_id(self) -> str:
        """The id of the current invocation (shared by all its events)."""
        return self._ctx.invocation_id

    @property
    def app_name(self) -> str:
        """The app of the session."""
        return self._ctx.session.app_name

    @property
    def user_id(self) -> str:
        """The user of the session."""
        return self._ctx.session.user_id

    @property
    def session(self) -> Session:
        """The session being run (the live object: treat it as read-only)."""
        return self._ctx.session

    @property
    def user_content(self) -> Content | None:
        """The user message that started this invocation, or ``None``."""
        return self._ctx.user_content

    @property
    def run_config(self) -> RunConfig:
        """The ``RunConfig`` of this invocation."""
        return self._ctx.run_config


class CallbackContext(ReadonlyContext, ServiceAccess):
    """What agent- and model-level callbacks and plugins see: the run's identity and
    session state. State writes are tracked and ride on the next event; services are
    reached with the same accessors as ``ToolContext`` (``save_artifact``,
    ``load_artifact``, ``list_artifacts``, ``search_memory``, ``get_secret``)."""

    def __init__(self, ctx: InvocationContext, pending: EventActions) -> None:
        super().__init__(ctx, pending)
        self.actions = pending
        self._state = State(ctx.session.state, pending.state_delta)
        self.artifact_service = ctx.artifact_service
        self.memory_service = ctx.memory_service
        self.secrets = ctx.secrets

    @property
    def state(self) -> State:
        """Session state; writes are recorded in ``actions.state_delta``."""
        return self._state


class BaseAgent(BaseModel):
    """The interface every agent implements so the runner can run it and transfer to it.

    Attributes:
        name: unique within the agent tree; the author of its events.
        description: what it does (shown to agents that may transfer to it).
        sub_agents: agents it may hand the conversation to.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    name: str = Field(
        description="Unique name in the agent tree; the author of the agent's events and its transfer name."
    )
    description: str = Field(
        default="", description="What the agent does; shown to agents that call it as an `AgentTool`."
    )
    sub_agents: list[BaseAgent] = Field(
        default_factory=list,
        description="Agents this agent may transfer to (always offered, whatever the disallow flags).",
    )

    def run_async(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        """Runs the agent; yields events, each persisted by the runner before the next
        step (so a yielded checkpoint is durable before the tool it brackets runs)."""
        raise NotImplementedError

    async def on_user_message(self, ctx: InvocationContext, content: Content) -> Content | Event:
        """Called by the runner before the user's message is stored: returns the message to
        store and run with (possibly rewritten), or an event ending the run (the message is
        then not stored). The default keeps it as it is."""
        return content

    def find_agent(self, name: str) -> BaseAgent | None:
        """This agent or a descendant named ``name``."""
        if self.name == name:
            return self
        for sub in self.sub_agents:
            found = sub.find_agent(name)
            if found is not None:
                return found
        return None

    def find_parent(self, name: str) -> BaseAgent | None:
        """The agent whose sub-agent is named ``name``."""
        for sub in self.sub_agents:
            if sub.name == name:
                return self
            found = sub.find_parent(name)
            if found is not None:
                return found
        return None
