"""``Run``: one run of a ``CodeActAgent``, the object the loop (``_agent``), the turn driver
(``_driver``) and recovery (``_recovery``) share.

It holds the run's mutable state, builds the events the run yields (``event``,
``error_event``, ``stale_event``, ``handoff_event``: building an event changes nothing else),
runs tool calls (``execute``), and reads the agent's settings through ``AgentSettings`` (the
options those pieces need), so none of them imports the agent class. How the run ended is set
by the code that ends it, with ``end``.
"""

from __future__ import annotations

import collections
import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..events import Content, Event, EventActions, UsageMetadata
from ..exceptions import UnknownToolError
from ..runtime import CodeRuntime
from ..tools import FunctionTool, Tool, ToolContext
from ..toolsets import tool_names
from ..turns._verify import LeaseKeeper
from ._checkpoint import PENDING_STATE_KEY, TURN_STATE_KEY
from ._context import CallbackContext, InvocationContext
from ._dispatch import CircuitBreaker, RetryBudget, ToolFailure, merge_actions, run_bare_tool, run_tool
from ._namespace import Namespace, Prepared
from ._slot_context import StoredContext

if TYPE_CHECKING:
    from ..telemetry import AgentRun

__all__ = (
    "SCRIPT_NAME",
    "AgentSettings",
    "Outcome",
    "Run",
    "as_callbacks",
    "authored_event",
    "gated_tools",
    "unknown_tool_error",
)

SCRIPT_NAME = "agent.py"
"""The file name scripts run under (it appears in their tracebacks)."""

Outcome = Literal["", "final", "suspended", "handed_off", "error"]
"""How a run ended: ``""`` while it runs; ``"final"`` (an answer), ``"suspended"`` (calls
announced, waiting for the caller), ``"handed_off"`` (a transfer, escalation or a tool that
ends the run) or ``"error"`` (a run-level error event, stale or divergent turns included)."""

Callback = Callable[..., Any]
Callbacks = Callback | Sequence[Callback] | None


def as_callbacks(cbs: Callbacks) -> list[Callback]:
    """One callback, a list of them or None, as a list."""
    if cbs is None:
        return []
    return list(cbs) if isinstance(cbs, (list, tuple)) else [cbs]  # type: ignore[list-item]


class AgentSettings(Protocol):
    """The agent options the run's pieces read (``CodeActAgent`` has them all: see its fields)."""

    name: str
    runtime: CodeRuntime
    max_tool_calls: int | None
    max_script_seconds: float | None
    checkpoint_every: int | None
    checkpoint_every_seconds: float | None
    tool_timeout: float | None
    tool_retry_budgets: dict[str, RetryBudget]
    default_retry_budget: RetryBudget | None
    require_tool_confirmation: list[str]
    require_tool_confirmation_for_all: bool
    before_tool: Any
    after_tool: Any
    after_tool_full: Any
    on_tool_error: Any


def authored_event(author: str, ctx: InvocationContext, pending: EventActions, **fields: Any) -> Event:
    """An event by ``author`` that carries (and flushes) the tools' pending state and artifact
    deltas and route; ``state_delta=`` adds to its state delta."""
    actions: EventActions = fields.pop("actions", None) or EventActions()
    delta = fields.pop("state_delta", None)
    if pending.state_delta or pending.artifact_delta:
        actions.state_delta = {**pending.state_delta, **actions.state_delta}
        actions.artifact_delta = {**pending.artifact_delta, **actions.artifact_delta}
        pending.state_delta.clear()
        pending.artifact_delta.clear()
    if delta:
        actions.state_delta.update(delta)
    if pending.route is not None:  # a tool's route rides on the next stored event
        actions.route, pending.route = pending.route, None
    return Event(invocation_id=ctx.invocation_id, author=author, actions=actions, **fields)


def gated_tools(names: Iterable[str], tools: Iterable[Tool]) -> tuple[frozenset[str], list[str]]:
    """Which of ``tools`` the tool names ``names`` gate (``require_tool_confirmation``): a name
    gates a tool when it is the tool's exposed name or its name before a toolset prefix
    (``tool_names``), so ``delete_record`` gates ``crm_delete_record`` and every other tool of
    that name under any prefix. Returns the exposed names of the gated tools and the names that
    match no tool (in order, once each)."""
    wanted = dict.fromkeys(names)
    gated: set[str] = set()
    used: set[str] = set()
    for tool in tools:
        hits = [n for n in tool_names(tool) if n in wanted]
        if hits:
            gated.add(tool.name)
            used.update(hits)
    return frozenset(gated), [n for n in wanted if n not in used]


def unknown_tool_error(
    setting: str, agent_name: str, unknown: Sequence[str], tools: Iterable[Tool]
) -> UnknownToolError:
    """The ``UnknownToolError`` for names of ``setting`` that match none of ``tools``, with the
    closest names each tool answers to (``difflib.get_close_matches``) as suggestions."""
    known = list(dict.fromkeys(n for t in tools for n in tool_names(t)))
    suggestions = {n: difflib.get_close_matches(n, known, n=3, cutoff=0.6) for n in unknown}
    return UnknownToolError(setting, agent_name, list(unknown), suggestions, sorted(known))


NO_ACTIONS = EventActions()
"""The actions of a tool call that had no ``ToolContext`` (``Run.execute``): empty, shared,
never changed."""


@dataclass
class Run:
    """The state of one run of the loop, the event factory, and the tool calls of its scripts."""

    settings: AgentSettings
    ctx: InvocationContext
    pending: EventActions
    tools: dict[str, Tool]
    roster: list[str]
    supports_suspension: bool
    breaker: CircuitBreaker
    cb_ctx: CallbackContext
    plugins: list[Any] = field(default_factory=list)
    system_prompt: str = ""
    transcript: list[Content] = field(default_factory=list)
    iteration: int = 0
    turn_stdout: str = ""
    # the JSON form of transcript[:len(transcript_json[1])], and the transcript list it was made from
    transcript_json: tuple[list[Content], list[dict[str, Any]]] | None = None
    stored_context: StoredContext = field(default_factory=StoredContext)  # the slot's shared part (format 4)
    turn_invocation: str = ""  # set while a resumed turn runs: the invocation that started it
    schema_retries: int = 0
    namespace: Namespace = field(default_factory=Namespace)
    prepared: Prepared | None = None
    session: Any = None  # the live NamespaceSession (persist_namespace on a runtime with sessions)
    session_start: bytes | None = None  # the idle session's bytes when the current script started
    stopped: bool = False
    confirmations: dict[str, Any] = field(default_factory=dict)  # call key -> ToolConfirmationAnswer
    outcome: Outcome = ""
    tools_ran: list[str] = field(default_factory=list)  # tools the current script called, in order
    slot_version: int = 0  # the turn slot version this run holds (0: none)
    keep_slot: bool = False  # the run ended on a stale or divergent turn: the caller decides
    message_seen: bool = False
    model_calls: int = 0
    total_tokens: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    last_usage: UsageMetadata | None = None  # of the latest model call
    live_output: Any = None  # the printed-output channel under RunConfig(streaming=True) (_streaming.LiveOutput)
    live_redaction: dict[str, Any] = field(default_factory=dict)  # kind -> _streaming.RedactedStream
    live_native: bool = False  # the running script's continuation feeds live_output itself (on_output)
    eager: Any = None  # RunConfig(eager=True): the model call's _eager.EagerRun whose outcomes the driver serves
    outbox: list[Event] = field(default_factory=list)  # progress events to yield at the next step
    otel: AgentRun | None = None
    lease: LeaseKeeper = field(default_factory=lambda: LeaseKeeper(None, ("", "", ""), None, None, lambda: 0))
    # exposed names of the tools require_tool_confirmation gates (set with the tools, gated_tools)
    gated: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ state

    def end(self, outcome: Outcome, *, keep_slot: bool = False) -> None:
        """Records that the run ends now, and how; ``keep_slot`` leaves the stored turn for the
        caller to decide on (a stale or divergent turn)."""
        self.outcome, self.stopped = outcome, True
        if keep_slot:
            self.keep_slot = True

    def usage_totals(self) -> UsageMetadata:
        """The run's model usage so far."""
        reported = self.prompt_tokens is not None or self.completion_tokens is not None
        return UsageMetadata(
            prompt_token_count=self.prompt_tokens,
            candidates_token_count=self.completion_tokens,
            total_token_count=self.total_tokens if reported else None,
            model_calls=self.model_calls,
        )

    @property
    def turn_id(self) -> str:
        """Identifies the current turn within the session (invocation and iteration)."""
        return f"{self.turn_invocation or self.ctx.invocation_id}:{self.iteration}"

    # ------------------------------------------------------------------ events

    def event(self, **fields: Any) -> Event:
        """An event authored by the agent, carrying (and flushing) pending tool deltas."""
        return authored_event(self.settings.name, self.ctx, self.pending, **fields)

    def clear_delta(self) -> dict[str, Any] | None:
        """The state delta that clears a pending checkpoint, or None when there is none."""
        if self.ctx.session.state.get(PENDING_STATE_KEY) is None:
            return None
        return {PENDING_STATE_KEY: None, TURN_STATE_KEY: None}

    def error_event(self, code: str, message: str, *, clear: bool = False) -> Event:
        """A run-level error event (``clear``: it also clears the pending checkpoint)."""
        delta = {PENDING_STATE_KEY: None, TURN_STATE_KEY: None} if clear else None
        return self.event(error_code=code, error_message=message, state_delta=delta)

    def stale_event(self, reason: str) -> Event:
        """The error event of a stored turn this agent cannot resume."""
        return self.error_event(
            "codeact.stale_checkpoint",
            f"{reason}. Run again with RunConfig(discard_pending_checkpoint=True), or call "
            "Runner.discard_pending_checkpoint(), to drop it and start fresh.",
        )

    def handoff_event(self, actions: EventActions) -> Event:
        """The event that ends the run on a tool's transfer, escalation or skip_summarization."""
        return self.event(
            actions=EventActions(
                escalate=actions.escalate,
                skip_summarization=actions.skip_summarization,
                transfer_to_agent=actions.transfer_to_agent,
            ),
            state_delta=self.clear_delta(),
        )

    # ------------------------------------------------------------------ tool calls

    def needs_confirmation(self, tool: Tool) -> bool:
        """The call needs a confirmation (the agent's options, by the tool's exposed or
        unprefixed name, or the tool's flag)."""
        return (
            self.settings.require_tool_confirmation_for_all
            or bool(getattr(tool, "requires_confirmation", False))
            or tool.name in self.gated
        )

    def gates_all(self, tool: Tool) -> bool:
        """The agent gates every call of ``tool`` (no per-call check of the tool applies)."""
        return (
            self.settings.require_tool_confirmation_for_all
            or tool.name in self.gated
            or not hasattr(tool, "confirmation_required")
        )

    def tool_context(self, call_key: str) -> ToolContext:
        """The ``ToolContext`` of one call: the session's state under the pending deltas."""
        committed = collections.ChainMap(self.pending.state_delta, self.ctx.session.state)
        tc = ToolContext(
            function_call_id=call_key,
            agent_name=self.settings.name,
            invocation_id=self.ctx.invocation_id,
            session=self.ctx.session,
            user_content=self.ctx.user_content,
            committed_state=committed,
            artifact_service=self.ctx.artifact_service,
            memory_service=self.ctx.memory_service,
            secrets=self.ctx.secrets,
        )
        if self.confirmations:
            tc.tool_confirmation = self.confirmations.get(call_key)  # a reviewer's approval and payload
        return tc

    async def execute(
        self, tool: Tool, args: dict[str, Any], call_key: str, *, merge: bool = True
    ) -> tuple[Any, ToolFailure | None, EventActions]:
        """Runs one tool call with the agent's timeout, retries, circuit breaker, callbacks and
        plugins; merges its actions into the pending ones. Returns ``(value, failure,
        actions)``.

        A ``FunctionTool`` (not a subclass with a ``run`` of its own) whose function takes no
        ``ToolContext``, while the agent has no tool callbacks and the run no plugins, runs
        without one (nothing could read it or set actions on it): its actions are
        ``NO_ACTIONS``, shared and never to be changed. The callbacks are read at every
        call, so one set during the run applies from the next call on. ``merge=False`` (an
        eager start's early call, whose outcome may be thrown away) leaves the pending actions
        as they were."""
        s = self.settings
        self.tools_ran.append(tool.name)
        retry = s.tool_retry_budgets.get(tool.name, s.default_retry_budget)
        if (
            not (self.plugins or s.before_tool or s.after_tool or s.after_tool_full or s.on_tool_error)
            and isinstance(tool, FunctionTool)
            and type(tool).run is FunctionTool.run  # a subclass's own run may read its context
            and tool.context_parameter is None
        ):
            value, failure = await run_bare_tool(
                tool, args, call_key, self.ctx.session, timeout=s.tool_timeout, retry=retry, breaker=self.breaker
            )
            return value, failure, NO_ACTIONS
        tc = self.tool_context(call_key)
        value, failure, _outcome = await run_tool(
            tool,
            args,
            tc,
            timeout=s.tool_timeout,
            retry=retry,
            breaker=self.breaker,
            before=as_callbacks(s.before_tool),
            after=as_callbacks(s.after_tool),
            after_full=as_callbacks(s.after_tool_full),
            on_error=as_callbacks(s.on_tool_error),
            plugins=self.plugins,
        )
        if merge:
            merge_actions(self.pending, tc.actions)
        return value, failure, tc.actions
