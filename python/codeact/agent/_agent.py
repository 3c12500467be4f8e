"""``CodeActAgent``: the loop that turns model replies into scripts, tool calls,
checkpoints and events (SPEC §4–5)."""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Any, Literal

from pydantic import Field, PrivateAttr, SkipValidation, TypeAdapter, model_validator

from ..events import CodeExecutionResult, Content, Event, EventActions, ExecutableCode, Part
from ..guardrails import run_guardrails
from ..models import GenerateContentConfig, Llm
from ..plugins import Plugin
from ..runtime import CodeRuntime, Raised, SessionRestoringRuntime
from ..runtime._stepper import run_step, start_step
from ..sessions._journal import TurnSlot
from ..skills import DEFAULT_SKILL_BUDGET, SkillIndex, SkillPolicy
from ..telemetry import start_agent_run
from ..tools import Tool
from ..turns._codec import TURN_FORMAT, claim_decisions
from ..turns._record import TurnRecord, new_claim
from ..turns._verify import LeaseKeeper, verify_turn
from ._checkpoint import PENDING_STATE_KEY, TURN_STATE_KEY
from ._context import BaseAgent, CallbackContext, InvocationContext, ReadonlyContext
from ._dispatch import CircuitBreaker, RetryBudget, call_callback
from ._driver import TurnDriver, TurnEnd, TurnState
from ._eager import stream_reply
from ._extract import explain_no_code, extract_code
from ._files import replay_with
from ._final import as_content as _as_content
from ._final import check_input, final_result
from ._final import otel_usage as _otel_usage
from ._hints import explain_raised, script_hint
from ._instructions import seed_transcript, system_prompt
from ._model_call import call_model, usage_breach
from ._namespace import prepare_script, shift_traceback, unwrap_result
from ._options import (
    DEFAULT_MAX_ERROR_CHARS,
    DEFAULT_MAX_ITERATIONS,
    AfterAgentCallback,
    AfterModelCallback,
    AfterToolCallback,
    AfterToolFullCallback,
    BeforeAgentCallback,
    BeforeModelCallback,
    BeforeToolCallback,
    OnToolErrorCallback,
    check_options,
)
from ._output import (
    Error,
    FinalResult,
    Observation,
    TransferToAgent,
    decode_script_output,
    output_header,
    render_observation,
    truncate_middle,
)
from ._overlay import start_files
from ._position import map_raised_lines
from ._recovery import drop_slot, release_claim, restore
from ._run import SCRIPT_NAME, Run, as_callbacks, authored_event, gated_tools, unknown_tool_error
from ._streaming import LiveOutput, wait_live
from ._toolcheck import tool_call_problem

__all__ = (
    "DEFAULT_MAX_ERROR_CHARS",
    "DEFAULT_MAX_ITERATIONS",
    "AfterAgentCallback",
    "AfterModelCallback",
    "AfterToolCallback",
    "AfterToolFullCallback",
    "BeforeAgentCallback",
    "BeforeModelCallback",
    "BeforeToolCallback",
    "CodeActAgent",
    "OnToolErrorCallback",
)

log = logging.getLogger("codeact.durability")


class CodeActAgent(BaseAgent):
    """An agent that acts by writing one Python script per turn (the CodeAct pattern).

    Each turn: build the prompt, call ``model``, extract one script, run it on ``runtime``
    (tools are reached with ``call_tool("name", {...})``), and classify its tagged result:
    ``observation`` / ``error`` are fed back, ``final_result`` ends the run,
    ``transfer_to_agent`` hands control to another agent. Script mistakes are fed back;
    run-level outcomes end the run with an event carrying ``error_code``; host failures raise.

    The configuration mirrors an LLM agent's (Google ADK's ``LlmAgent``); see the README for
    each option. ``model`` and ``runtime`` are required.
    """

    # SkipValidation: any object is accepted as before (the Protocols are for type checkers).
    model: SkipValidation[Llm] = Field(description="The `Llm` to call (`ScriptedModel`, `OpenAIChatModel`, ...).")
    runtime: SkipValidation[CodeRuntime] = Field(
        description="The `CodeRuntime` that runs scripts (`MontyRuntime()`, `CPythonRuntime()`)."
    )
    instruction: str | Callable[..., Any] = Field(
        default="",
        description=(
            "Agent instruction: a string with `{key}`, `{key?}`, `{app:key}`, `{user:key}`, `{temp:key}`, "
            "`{artifact.name}` injection, or a provider `(ReadonlyContext) -> str` (not template-expanded). A "
            "missing required key raises `MissingStateError`."
        ),
    )
    global_instruction: str | Callable[..., Any] = Field(
        default="", description="Same forms as `instruction`; placed before it in the system prompt."
    )
    generate_content_config: GenerateContentConfig | None = Field(
        default=None, description="Sampling settings passed to the model."
    )
    temperature: float | None = Field(
        default=None, description="Sampling temperature; a shorthand merged into `generate_content_config`."
    )
    top_p: float | None = Field(
        default=None, description="Nucleus-sampling mass; a shorthand merged into `generate_content_config`."
    )
    top_k: int | None = Field(
        default=None, description="Top-k sampling; a shorthand merged into `generate_content_config`."
    )
    max_output_tokens: int | None = Field(
        default=None, description="Most tokens per reply; a shorthand merged into `generate_content_config`."
    )
    include_contents: Literal["default", "none"] = Field(
        default="default",
        description=(
            '`"default"` seeds the conversation with the session\'s history; `"none"` sends only the current message.'
        ),
    )
    tools: list[Any] = Field(
        default_factory=list, description="Static tools: `Tool` objects or plain functions (wrapped in `FunctionTool`)."
    )
    toolsets: list[Any] = Field(
        default_factory=list,
        description=(
            "`Toolset`s resolved at the start of every run (tools may depend on state); each with a `prefix` and a "
            "`tool_filter`. Name conflicts end the run (`codeact.toolset`)."
        ),
    )
    tool_timeout: float | None = Field(
        default=300.0, gt=0, description="Seconds per tool attempt; `None` for no limit."
    )
    default_retry_budget: RetryBudget | None = Field(
        default=None, description="`RetryBudget(max_retries, delay, backoff)` applied to every tool."
    )
    tool_retry_budgets: dict[str, RetryBudget] = Field(
        default_factory=dict, description="Per-tool `RetryBudget`, overriding the default."
    )
    circuit_breaker_threshold: int | None = Field(
        default=None,
        ge=0,
        description="Consecutive failures after which a tool is disabled for the rest of the invocation.",
    )
    on_tool_error: OnToolErrorCallback | Sequence[OnToolErrorCallback] | None = Field(
        default=None,
        description=(
            "Fallbacks `(tool, args, tool_context, error) -> value | None`; the first non-None value becomes the "
            "call's result."
        ),
    )
    require_tool_confirmation: list[str] = Field(
        default_factory=list,
        description=(
            "Tool names whose every call needs a human approve/deny decision. A name is a tool's exposed name "
            '(`"crm_delete_record"`) or its name before a toolset prefix (`"delete_record"`, which gates that tool '
            "under every prefix). A name that matches no tool raises `UnknownToolError` (with a did-you-mean) when "
            "the agent is built, or, for names only a run-time toolset (MCP, a custom `Toolset`) could match, from "
            "`run_async` at run start, before anything runs."
        ),
    )
    require_tool_confirmation_for_all: bool = Field(default=False, description="Every tool call needs a decision.")
    disallow_transfer_to_parent: bool = Field(
        default=False, description="Do not offer the runner-supplied parent as a transfer target."
    )
    disallow_transfer_to_peers: bool = Field(
        default=False,
        description="Do not offer runner-supplied peers (the parent's other sub-agents) as transfer targets.",
    )
    output_key: str | None = Field(
        default=None,
        description="State key that receives the final value (the guarded text when an output guardrail rewrote it).",
    )
    output_schema: Any = Field(
        default=None,
        description="JSON schema dict or pydantic type the final value must match; mismatches are fed back.",
    )
    output_max_retries: int = Field(
        default=3, ge=0, description="Schema corrections allowed before the run ends with `codeact.output_schema`."
    )
    input_schema: Any = Field(
        default=None,
        description=(
            "JSON schema dict or pydantic type the user message (JSON text) must match; otherwise the run ends with "
            "`codeact.input_schema`. Also the parameters of the agent as an `AgentTool`."
        ),
    )
    before_agent: BeforeAgentCallback | Sequence[BeforeAgentCallback] | None = Field(
        default=None, description="`(CallbackContext) -> content | None`; a value answers without calling the model."
    )
    after_agent: AfterAgentCallback | Sequence[AfterAgentCallback] | None = Field(
        default=None,
        description=(
            "`(CallbackContext) -> content | None`, run after a final result; a value is yielded as one more event."
        ),
    )
    before_model: BeforeModelCallback | Sequence[BeforeModelCallback] | None = Field(
        default=None, description="`(CallbackContext, LlmRequest) -> reply | None`; the first reply skips the model."
    )
    after_model: AfterModelCallback | Sequence[AfterModelCallback] | None = Field(
        default=None, description="`(CallbackContext, LlmResponse) -> reply | None`; a pipeline rewriting the reply."
    )
    before_tool: BeforeToolCallback | Sequence[BeforeToolCallback] | None = Field(
        default=None, description="`(tool, args, tool_context) -> value | None`; the first value replaces the call."
    )
    after_tool: AfterToolCallback | Sequence[AfterToolCallback] | None = Field(
        default=None,
        description="`(tool, args, tool_context, value) -> value | None`; the first value replaces the result.",
    )
    after_tool_full: AfterToolFullCallback | Sequence[AfterToolFullCallback] | None = Field(
        default=None,
        description=(
            "`(tool, args, tool_context, value, outcome) -> value | None`; sees the `ToolOutcome` (attempts, "
            "duration, timed out, error category), also as `tool_context.tool_outcome`."
        ),
    )
    input_guardrails: list[Any] = Field(
        default_factory=list,
        description=(
            "Guardrails `(content, ReadonlyContext) -> GuardrailResult | None` on the user message: pass, rewrite "
            "(the rewrite is stored), or block (the run ends with `codeact.input_guardrail`, the message is not "
            "stored)."
        ),
    )
    output_guardrails: list[Any] = Field(
        default_factory=list,
        description=(
            "Guardrails on the final answer: pass, rewrite, or block (the answer is never returned; the run ends "
            "with `codeact.output_guardrail`)."
        ),
    )
    plugins: list[SkipValidation[Plugin]] = Field(
        default_factory=list,
        description=(
            "`Plugin`s with hooks around the user message, run start/end, each event, model calls and tool calls; "
            "composed in order, before the agent's own callbacks."
        ),
    )
    skills: Any = Field(
        default=None,
        description=(
            "A `SkillIndex`, a list of `Skill`s, or a folder of `SKILL.md` files; the best match for the message is "
            "injected first in the system prompt."
        ),
    )
    skill_policy: SkillPolicy = Field(
        default_factory=SkillPolicy,
        description="How many skills, and the lowest score that counts (scoring in `codeact.skills`).",
    )
    skill_budget: int = Field(
        default=DEFAULT_SKILL_BUDGET,
        ge=0,
        description="Characters of each injected skill block (cut with `…[truncated]`).",
    )
    max_iterations: int = Field(
        default=DEFAULT_MAX_ITERATIONS,
        ge=1,
        description="Model turns per logical run before it ends with `codeact.max_iterations`.",
    )
    max_error_chars: int = Field(
        default=DEFAULT_MAX_ERROR_CHARS,
        ge=16,
        description="Cap for errors and printed output fed back to the model (cut in the middle).",
    )
    persist_namespace: bool = Field(
        default=False,
        description=(
            "Carry what one turn's script defines into the next turn's script, within a run and across "
            "suspend/resume and crash recovery; a failing script keeps the namespace it started with. On "
            "`MontyRuntime` in process (`capabilities().supports_namespace_session`) the scripts of a run are fed to "
            "one interpreter session (`MontyRuntime.start_session()`, [ADR "
            "0003](decisions/0003-monty-1.4.md#persist_namespace-and-montyrepl-issue-10-item-4)): every value "
            "carries (functions, closures with their state, lambdas, half-used iterators, sets, instances, imported "
            "modules, data), `max_memory` counts the carried namespace, tracebacks name the script `agent.py` "
            "(frames in functions an earlier script defined: `<script N>`), and each turn record stores the idle "
            "session's bytes (base64; about 100–170 KB for a 10,000-element list and a 1,000-entry dict) instead of "
            "the namespace JSON. In a session, `await asyncio.gather(call_tool(...), ...)` runs the calls "
            "concurrently as in a run (also through a coroutine an earlier turn defined), each journaled and "
            'approvable on its own. Other runtimes (`CPythonRuntime`, `isolation="process"`, custom ones) keep the '
            "source transform: functions, classes and imports as source, plain-data variables as values, other "
            "values dropped; its cost grows with the carried data (78–190 ms per turn for the data above)."
        ),
    )
    max_observation_chars: int | None = Field(
        default=20_000,
        ge=16,
        description="Cap for an observation's JSON fed back to the model (cut in the middle); `None` for no cap.",
    )
    max_tool_calls: int | None = Field(
        default=1000,
        ge=0,
        description=(
            "Tool calls one script may make; the next call stops the script (`OUTCOME_DEADLINE_EXCEEDED`, fed back "
            "to the model). `None` for no limit."
        ),
    )
    max_script_seconds: float | None = Field(
        default=300.0,
        gt=0,
        description=(
            "Seconds one script may run, checked at each tool call; beyond it the script is stopped "
            "(`OUTCOME_DEADLINE_EXCEEDED`, fed back to the model). `None` for no limit."
        ),
    )
    checkpoint_every: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Store the script's continuation every this many tool calls, so recovery replays at most that many "
            "journaled calls (docs/durability.md). `None`: only when the turn suspends."
        ),
    )
    checkpoint_every_seconds: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Store the script's continuation when this many seconds passed since the last one (checked at each tool "
            "call). `None`: no time-based checkpoints."
        ),
    )

    _tools: list[Tool] = PrivateAttr(default_factory=list)
    _schema: dict[str, Any] | None = PrivateAttr(default=None)
    _schema_adapter: TypeAdapter[Any] | None = PrivateAttr(default=None)
    _schema_validator: Any = PrivateAttr(default=None)
    _skill_index: SkillIndex | None = PrivateAttr(default=None)
    _input_adapter: TypeAdapter[Any] | None = PrivateAttr(default=None)
    _input_validator: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self) -> CodeActAgent:
        """The checks and compiled forms of the options (``_options.check_options``)."""
        return check_options(self)

    # ------------------------------------------------------------------ entry point

    async def run_async(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        """Runs the agent for one invocation (``Runner`` calls it): model turns, each script
        run and its tool calls, until a final result, a suspension, a transfer or a stop.
        Yields the events in order; the runner stores each before the next step, so a
        yielded checkpoint is durable before the tool it brackets runs. Host failures raise
        the typed errors of ``codeact.exceptions`` (``ModelError``, ``CodeRuntimeError``,
        ``SessionStoreError``); script mistakes become events fed back to the model."""
        pending = EventActions()
        cb_ctx = CallbackContext(ctx, pending)
        async with aclosing(self._run(ctx, pending, cb_ctx)) as events:
            async for event in events:
                for plugin in self.plugins:
                    rewritten = await call_callback(plugin.on_event, cb_ctx, event)
                    if rewritten is not None:
                        event = rewritten
                yield event
        for plugin in self.plugins:
            await call_callback(plugin.after_run, cb_ctx)

    async def _run(
        self, ctx: InvocationContext, pending: EventActions, cb_ctx: CallbackContext
    ) -> AsyncGenerator[Event, None]:
        for plugin in self.plugins:
            content = await call_callback(plugin.before_run, cb_ctx)
            if content is not None:
                yield self._event(ctx, pending, content=_as_content(content))
                return
        for cb in as_callbacks(self.before_agent):
            content = await call_callback(cb, cb_ctx)
            if content is not None:
                yield self._event(ctx, pending, content=_as_content(content))
                return
        run = Run(
            settings=self,
            ctx=ctx,
            pending=pending,
            tools={},
            roster=[],
            supports_suspension=bool(self.runtime.capabilities().supports_suspension),
            breaker=CircuitBreaker(self.circuit_breaker_threshold),
            cb_ctx=cb_ctx,
            plugins=list(self.plugins),
        )
        if ctx.claim is None:
            ctx.claim = new_claim(ctx.clock, ctx.run_config.claim_lease, ctx.run_key)
        run.lease = LeaseKeeper(
            ctx.session_service,
            (ctx.session.app_name, ctx.session.user_id, ctx.session.id),
            ctx.claim,
            ctx.clock,
            lambda: run.slot_version,
        )
        run.otel = start_agent_run(
            self.name,
            session_id=ctx.session.id,
            user_id=ctx.session.user_id,
            invocation_id=ctx.invocation_id,
            description=self.description or None,
        )
        ending: Event | None = None
        run.lease.start()
        try:
            async with aclosing(self._loop(run)) as _events:
                async for event in _events:
                    if run.stopped and ending is None and event.author == self.name:
                        # The event that ends the run carries the run's usage totals.
                        ending = event
                        event.usage_metadata = run.usage_totals()
                    yield event
        except GeneratorExit:
            run.lease.stop()
            run.otel.end(usage=_otel_usage(run))
            await release_claim(run)
            raise
        except BaseException as exc:
            run.lease.stop()
            run.otel.end(error_code=type(exc).__qualname__, error_message=str(exc), usage=_otel_usage(run))
            await release_claim(run)
            raise
        run.lease.stop()
        run.otel.end(
            error_code=ending.error_code if ending is not None else None,
            error_message=ending.error_message if ending is not None else None,
            usage=_otel_usage(run),
        )
        if run.outcome != "suspended" and not run.keep_slot:
            await drop_slot(run)
        elif run.keep_slot:
            await release_claim(run)
        if run.outcome == "final":
            for cb in as_callbacks(self.after_agent):
                content = await call_callback(cb, cb_ctx)
                if content is not None:
                    yield self._event(ctx, pending, content=_as_content(content))
                    return

    async def on_user_message(self, ctx: InvocationContext, content: Content) -> Content | Event:
        """Plugins' ``on_user_message`` hooks (in order, each may rewrite), then the input
        guardrails. A block returns the event ending the run (the message is not stored)."""
        ro = ReadonlyContext(ctx)
        for plugin in self.plugins:
            rewritten = await call_callback(plugin.on_user_message, ro, content)
            if rewritten is not None:
                content = _as_content(rewritten).model_copy(update={"role": content.role})
        if not self.input_guardrails:
            return content
        verdict = await run_guardrails(self.input_guardrails, content, ro)
        if verdict.blocked:
            return Event(
                invocation_id=ctx.invocation_id,
                author=self.name,
                error_code="codeact.input_guardrail",
                error_message=f"input guardrails blocked the message: {verdict.reason}",
            )
        return verdict.content

    # ------------------------------------------------------------------ events

    def _event(self, ctx: InvocationContext, pending: EventActions, **fields: Any) -> Event:
        """An event authored by this agent, carrying (and flushing) pending tool deltas."""
        return authored_event(self.name, ctx, pending, **fields)

    # ------------------------------------------------------------------ setup

    async def _resolve_tools(self, run: Run) -> list[Tool]:
        """Static tools, then each toolset's tools for this run.

        Raises:
            ValueError: two tools share a name (the message names both sources).
        """
        tools = list(self._tools)
        if not self.toolsets:
            return tools
        source = {t.name: "static tools" for t in tools}
        ro = ReadonlyContext(run.ctx, run.pending)
        for toolset in self.toolsets:
            for t in await toolset.resolve(ro):
                if t.name in source:
                    raise ValueError(
                        f"duplicate tool name {t.name!r}: conflict between {source[t.name]} "
                        f"and toolset {toolset.name!r}"
                    )
                source[t.name] = f"toolset {toolset.name!r}"
                tools.append(t)
        return tools

    def transfer_targets(self, ctx: InvocationContext) -> list[str]:
        """Agent names this run may transfer to: sub-agents, then the runner's targets
        (parent and peers) minus those the disallow flags exclude."""
        targets = [a.name for a in self.sub_agents]
        rc = ctx.run_config
        for name in rc.transfer_targets:
            if name in targets or name == self.name:
                continue
            is_parent = name == rc.parent_agent
            if (is_parent and self.disallow_transfer_to_parent) or (not is_parent and self.disallow_transfer_to_peers):
                continue
            targets.append(name)
        return targets

    # ------------------------------------------------------------------ the loop

    async def _loop(self, run: Run) -> AsyncGenerator[Event, None]:
        ctx = run.ctx
        try:
            tools = await self._resolve_tools(run)
        except ValueError as exc:
            run.end("error")
            yield run.error_event("codeact.toolset", str(exc))
            return
        run.tools = {t.name: t for t in tools}
        run.roster = sorted(run.tools)
        run.gated, unknown = gated_tools(self.require_tool_confirmation, tools)
        if unknown:
            # A host failure (the agent's configuration) before anything ran or was stored: fix, resend.
            raise unknown_tool_error("require_tool_confirmation", self.name, unknown, tools)

        legacy = ctx.session.state.get(PENDING_STATE_KEY)
        if legacy is not None:
            if ctx.run_config.discard_pending_checkpoint:
                yield run.event(state_delta={PENDING_STATE_KEY: None, TURN_STATE_KEY: None})
            else:
                run.end("error", keep_slot=True)
                yield run.stale_event(
                    "the session holds a paused script written by codeact 0.1.0 (checkpoint format 1), which "
                    "this version cannot resume",
                )
                return
        slot = ctx.turn_slot
        state: TurnState | None = None
        step: Any = None
        uses_session = self._uses_session()  # once per run: a protocol isinstance costs ~15 us
        if slot is not None:
            run.slot_version = slot.version
            async with aclosing(
                restore(run, slot, persist_namespace=self.persist_namespace, uses_session=uses_session)
            ) as restored:
                async for item in restored:
                    if isinstance(item, Event):
                        yield item
                        return
                    state, step = item
        else:
            problem = check_input(self, ctx.user_content)
            if problem is not None:
                run.end("error")
                yield run.error_event("codeact.input_schema", problem)
                return
            run.system_prompt = await system_prompt(self, run, tools)
            run.transcript = seed_transcript(self, ctx)

        rc = ctx.run_config
        if rc.streaming:
            run.live_output = LiveOutput()
        while True:
            if run.outbox:
                for event in run.outbox:
                    yield event
                run.outbox.clear()
            if state is None:
                run.iteration += 1
                run.turn_invocation = ""
                if run.iteration > self.max_iterations:
                    run.end("error")
                    yield run.error_event(
                        "codeact.max_iterations",
                        f"max iterations ({self.max_iterations}) exceeded without a final result. The transcript "
                        "is kept in the session: send another message (for example 'continue') to go on from "
                        "here, or raise CodeActAgent.max_iterations",
                    )
                    return
                limit = usage_breach(run)
                if limit is not None:
                    run.end("error")
                    yield run.error_event("codeact.usage_limit", limit)
                    return
                if rc.streaming or rc.eager:
                    reply = ""
                    async with aclosing(stream_reply(self, run)) as streamed:
                        async for piece in streamed:
                            if isinstance(piece, str):
                                reply = piece
                            else:
                                yield piece  # a partial event: never stored
                else:
                    reply = await call_model(self, run)
                wake = getattr(self.runtime, "wake_workers", None)
                if wake is not None:  # a step worker wakes while the reply is extracted and stored
                    wake()
                script = extract_code(reply)
                run.transcript.append(Content.from_text(reply, role="model"))
                model_event = self._model_event(run, reply, script)
                if script is None:
                    yield model_event
                    explained = explain_no_code(reply)
                    run.transcript.append(Content.from_text(explained, role="user"))
                    run.outbox.append(self._result_event(run, [explained], None))
                    continue
                run.turn_stdout = ""
                run.tools_ran = []
                hint = script_hint(script, self.runtime, run.roster)
                if hint is None:
                    hint = await tool_call_problem(
                        run, self.runtime, script, persist_namespace=self.persist_namespace, uses_session=uses_session
                    )
                if hint is not None:
                    yield model_event
                    self._feed_back(run, "Error during execution:\n" + hint, outcome=None)
                    continue
                start: Callable[..., Any] = self.runtime.start
                if uses_session:
                    if run.session is None:
                        # An optional method of the runtime (checked by _uses_session).
                        run.session = self.runtime.start_session()  # type: ignore[attr-defined]
                    run.session_start = await run_step(run.session.dump)
                    start = run.session.feed
                elif self.persist_namespace:
                    run.prepared = prepare_script(script, run.namespace)
                    script = run.prepared.script
                state = TurnState(
                    turn=run.turn_id,
                    record=self._turn_record(run, script),
                    version=run.slot_version,
                    decisions=claim_decisions(rc.tool_confirmation_decisions, rc.tool_denial_reasons),
                    **await start_files(self.runtime, run),
                )
                if ctx.run_key is not None and run.slot_version == 0:
                    # A keyed run with no turn slot claims one before its reply is stored: a crash
                    # from here on leaves it recoverable under its run key (Runner.run_async).
                    await TurnDriver(run, state).save("running")
                yield model_event
                live = getattr(self.runtime.capabilities(), "live_output", False)
                run.live_native = run.live_output is not None and bool(live)
                replay = replay_with(state.files)
                if run.live_native:  # what the script prints reaches the caller while it runs
                    ticket = start_step(start, script, SCRIPT_NAME, on_output=run.live_output.listen, **replay)
                    async for live_event in wait_live(run, ticket):
                        yield live_event
                    step = ticket.result()
                else:
                    step = await run_step(start, script, SCRIPT_NAME, **replay)

            # One turn: the driver advances the script until it ends, suspends or stops the run.
            end: TurnEnd | None = None
            driver = TurnDriver(run, state)
            otel = run.otel
            span = otel.begin_script(state.record.script, script_name=SCRIPT_NAME) if otel and otel.active else None
            try:
                async with aclosing(driver.drive(step)) as driven:
                    async for driven_item in driven:
                        if isinstance(driven_item, TurnEnd):
                            end = driven_item
                        else:
                            yield driven_item
            finally:
                if span is not None:
                    span.set("codeact.script.tool_calls", state.next_pos)
                    span.set("codeact.script.turn", state.turn)
                    if end is not None and end.step is not None:
                        span.record_step(end.step)
                    elif end is not None:
                        span.set("codeact.script.outcome", end.how)
                        if end.how == "budget":
                            span.fail("script_budget", end.message[:200])
                    span.end()
            run.slot_version = state.version
            given = state.record.script
            state = None
            if run.live_output is not None:
                run.live_output.clear()  # the turn's script_result holds what was not shown live
            assert end is not None
            if end.how in ("suspended", "stopped"):
                return
            if end.how == "budget":
                self._feed_back(run, "Error during execution:\n" + end.message, outcome="OUTCOME_DEADLINE_EXCEEDED")
                self._after_resumed_turn(run)
                continue
            assert end.step is not None
            final_step = end.step
            if isinstance(final_step, Raised):
                message = map_raised_lines(final_step.message, self.runtime, given, SCRIPT_NAME)
                if run.prepared is not None:
                    message = shift_traceback(message, run.prepared)
                message = explain_raised(
                    message, run.transcript, persist_namespace=self.persist_namespace, runtime=self.runtime
                )
                self._feed_back(
                    run,
                    "Error during execution:\n" + truncate_middle(message, self.max_error_chars),
                    outcome="OUTCOME_FAILED",
                )
                self._after_resumed_turn(run)
                continue
            value = final_step.value
            if run.prepared is not None:
                value = unwrap_result(value, run.prepared, run.namespace)
            output = decode_script_output(value, tools_ran=run.tools_ran)
            if isinstance(output, Observation):
                observation = render_observation(output.value)
                if self.max_observation_chars is not None:
                    observation = truncate_middle(observation, self.max_observation_chars)
                self._feed_back(run, "Observation:\n" + observation, outcome="OUTCOME_OK")
            elif isinstance(output, Error):
                self._feed_back(
                    run,
                    "Error during execution:\n" + truncate_middle(output.message, self.max_error_chars),
                    outcome="OUTCOME_FAILED",
                )
            elif isinstance(output, TransferToAgent):
                targets = self.transfer_targets(ctx)
                if output.agent_name in targets:
                    yield self._result_event(run, [], "OUTCOME_OK")
                    run.end("handed_off")
                    yield run.event(
                        actions=EventActions(transfer_to_agent=output.agent_name),
                        state_delta=run.clear_delta(),
                    )
                    return
                valid = ", ".join(targets) if targets else "(none)"
                self._feed_back(
                    run,
                    f"Error during execution:\ncannot transfer to {output.agent_name!r}; valid agents: {valid}",
                    outcome="OUTCOME_FAILED",
                )
            else:
                assert isinstance(output, FinalResult)
                async with aclosing(final_result(self, run, output.value)) as _events:
                    async for event in _events:
                        yield event
                if run.stopped:
                    return
            self._after_resumed_turn(run)

    def _after_resumed_turn(self, run: Run) -> None:
        """After a resumed turn, a message the user sent with the resumption (for example
        with ``on_pending_message="deny"``) joins the transcript once."""
        content = run.ctx.user_content
        if run.ctx.turn_slot is not None and not run.message_seen and content is not None and content.text:
            run.transcript.append(Content.from_text(content.text, role="user"))
        run.message_seen = True

    def _feed_back(self, run: Run, message: str, *, outcome: str | None) -> None:
        """Appends model-facing feedback (secret values redacted) to the transcript, and the
        ``script_result`` event showing it (yielded at the loop's next step)."""
        redact = run.ctx.secrets.redact if run.ctx.secrets is not None else (lambda text: text)
        texts = [redact(message)]
        if run.turn_stdout:
            output = truncate_middle(run.turn_stdout, self.max_error_chars)
            texts.append(redact(f"{output_header(run.turn_stdout)}\n{output}"))
        run.transcript.extend(Content.from_text(t, role="user") for t in texts)
        run.outbox.append(self._result_event(run, texts, outcome))
        run.turn_stdout = ""

    def _model_event(self, run: Run, reply: str, script: str | None) -> Event:
        """The ``model_reply`` event: the reply's text and the script extracted from it
        (an ``executable_code`` part), with this call's usage."""
        parts = [Part(text=reply)]
        if script is not None:
            parts.append(Part(executable_code=ExecutableCode(code=script)))
        return run.event(
            content=Content(role="model", parts=parts),
            usage_metadata=run.last_usage,
            custom_metadata={"codeact_kind": "model_reply"},
        )

    def _result_event(self, run: Run, texts: list[str], outcome: str | None) -> Event:
        """The ``script_result`` event: the feedback sent to the model (text parts, one per
        user message of the transcript) and, when a script ran, how it ended and its stdout
        (a trailing ``code_execution_result`` part)."""
        parts = [Part(text=t) for t in texts]
        if outcome is not None:
            redact = run.ctx.secrets.redact if run.ctx.secrets is not None else (lambda text: text)
            stdout = run.turn_stdout
            if self.max_observation_chars is not None:
                stdout = truncate_middle(stdout, self.max_observation_chars)
            parts.append(Part(code_execution_result=CodeExecutionResult(outcome=outcome, output=redact(stdout))))
        return run.event(
            content=Content(role="user", parts=parts),
            custom_metadata={"codeact_kind": "script_result"},
        )

    # ------------------------------------------------------------------ tool calls

    def _uses_session(self) -> bool:
        """Whether ``persist_namespace`` runs on the runtime's namespace sessions (ADR 0003)
        rather than on the source transform of ``_namespace``."""
        return (
            self.persist_namespace
            and self.runtime.capabilities().supports_namespace_session
            and isinstance(self.runtime, SessionRestoringRuntime)
        )

    def _namespace_state(self, run: Run) -> dict[str, Any] | None:
        if not self.persist_namespace:
            return None
        if run.session_start is not None:
            # the idle session the script started from: recovery feeds the script to it again
            return {"session": base64.b64encode(run.session_start).decode("ascii")}
        return {
            **run.namespace.to_state(),
            "script": run.prepared.to_state() if run.prepared is not None else None,
        }

    def _turn_record(self, run: Run, script: str) -> TurnRecord:
        """The fixed part of a turn's record in the slot: what recovery needs besides the
        journal and the continuation (the driver adds the rest when it saves)."""
        transcript = run.transcript
        cache = run.transcript_json
        if (
            cache is None
            or cache[0] is not transcript
            or len(cache[1]) > len(transcript)
            or run.plugins
            or self.before_model
        ):
            # A model hook sees (and may edit in place) the messages: with hooks, all are dumped each turn.
            cache = run.transcript_json = (transcript, [])
        # The transcript only grows: the messages dumped for an earlier turn are kept.
        dumped = cache[1]
        dumped.extend(c.model_dump(mode="json", exclude_none=True) for c in transcript[len(dumped) :])
        return TurnRecord.model_construct(
            format=TURN_FORMAT,
            status="running",
            agent_name=self.name,
            turn=run.turn_id,
            invocation_id=run.turn_invocation or run.ctx.invocation_id,
            iteration=run.iteration,
            script=script,
            system_prompt=run.system_prompt,
            transcript=list(dumped),
            roster=list(run.roster),
            namespace=self._namespace_state(run),
            schema_retries=run.schema_retries,
            created_at=time.time(),
            turn_stdout="",
            next_pos=0,
            advance=0,
            at=[],
            gather=False,
            pending=[],
            snapshot_sha256=None,
            claim=None,
            run_key=None,
            mac=None,
            seal=None,
        )

    async def verify_turn(self, ctx: InvocationContext, slot: TurnSlot, *, strict: bool = True) -> Any:
        """Checks the session's stored turn for this agent (format, owner, roster,
        continuation integrity and seal; SPEC §5 v3) and reads its pending calls from the
        verified continuation. Returns a ``TurnView`` (``stale`` says why it cannot resume).

        Args:
            strict: check that the turn is this agent's, with its tool roster (needed to
                resume it); ``False`` only reads the continuation's calls (for listing them
                from a tool that does not load the agent, such as ``codeact sessions pending``
                without ``--agent``).

        Raises:
            ValueError: the agent's toolsets give two tools one name.
        """
        run = Run(
            settings=self,
            ctx=ctx,
            pending=EventActions(),
            tools={},
            roster=[],
            supports_suspension=True,
            breaker=CircuitBreaker(None),
            cb_ctx=CallbackContext(ctx, EventActions()),
        )
        tools = await self._resolve_tools(run)
        by_name = {t.name: t for t in tools}
        agent_name = self.name if strict else str(slot.data.get("agent_name", self.name))
        s = ctx.session
        return await verify_turn(
            self.runtime,
            slot,
            session_key=(s.app_name, s.user_id, s.id),
            agent_name=agent_name,
            tools=by_name,
            roster=sorted(by_name) if strict else None,
            persist_namespace=self.persist_namespace or not strict,
            uses_session=self._uses_session() or not strict,
        )
