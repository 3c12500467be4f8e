"""The turn driver: one script's run from its first stop to its end or suspension (SPEC §5).

The same code runs a live turn, a turn resumed after a decision or a completion, and a turn
recovered after a crash. Every tool call goes through one state machine::

    replay?  -- the journal has this position: a different tool or argument digest is a
                divergence (the run ends, no tool runs); a recorded outcome is the answer
    awaiting -- a call the suspension is paused at: a decision / completion answers it, else
                the turn suspends again (nothing stored changes)
    intent   -- written durably before the tool starts (with the OS answers of the advance)
    running  -- the tool runs (confirmation first when required; a long-running tool starts
                and the turn suspends awaiting its completion)
    outcome  -- written durably before the script goes on

The interpreter continuation is written only at suspensions and, with ``checkpoint_every``
/ ``checkpoint_every_seconds``, at those intervals, always replacing the previous one in the
session's turn slot. Each advance of the driver yields events and finally one ``TurnEnd``;
nothing travels back through shared mutable fields.

The driver's parts live beside it: the turn's state (``_turn_state``), what becomes of one
call (``_call_results``), the events it builds (``_turn_events``), and its slot and journal
writes (``_slot_writes``, ``_journal_writes``), which ``TurnDriver`` inherits.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from types import CoroutineType
from typing import TYPE_CHECKING, Any

import anyio
import pydantic_core

from ..events import Event
from ..exceptions import (
    ConfirmationHandlerError,
    ReplayDivergenceError,
    SnapshotError,
    ToolArgumentError,
    ToolHostError,
)
from ..runtime import Call, Complete, Gather, PendingCall, Raised, ResumeError, ResumeValue, RunStep, bind_call_args
from ..runtime._stepper import INLINE_WAIT, await_ticket
from ..runtime.monty import FINAL_ANSWER, final_answer_step
from ..sessions._journal import JournalRecord
from ..tools import Tool, ToolConfirmationAnswer
from ..turns._codec import (
    CompletionError,
    PendingCallInfo,
    args_digest,
    plain_args_digest,
    value_problem,
)
from ..turns._decision import record_text
from ..turns._record import PendingEntry
from ..turns._verify import call_digest, journal_scope
from ._call_results import (
    _SHORT_INT,
    _SHORT_SCALARS,
    _TURN_ENDS,
    Outcome,
    _Budget,
    _Final,
    _HandlerFailed,
    _Invoke,
    _Notice,
    _Plan,
    _Resolved,
    _Settled,
    _Stop,
    _Suspend,
    handler_verdict,
)
from ._dispatch import ToolFailure, failure_of, run_bare_tool, terminal_signal
from ._files import FILES, layered_mounts, split_log
from ._journal_writes import _intents, _JournalWrites, _json, _new_record
from ._journal_writes import escape_surrogates as escape_surrogates  # re-exported: _model_call imports it here
from ._output import step_output
from ._overlay import end_overlay
from ._pacing import PACE_SECONDS, StopPacer
from ._position import paused_position
from ._run import NO_ACTIONS
from ._streaming import partial_event, wait_live
from ._turn_plan import _TurnPlan
from ._turn_state import Journal, TurnEnd, TurnState

if TYPE_CHECKING:
    from ._run import Run

__all__ = ("Journal", "TurnDriver", "TurnEnd", "TurnState")

log = logging.getLogger("codeact.durability")

_STEPS = frozenset({Call, Gather, Complete, Raised})
"""The step types ``resume_within`` answers with when the advance finished in time."""
_ENDS = frozenset({Complete, Raised})


class TurnDriver(_TurnPlan, _JournalWrites):
    """Drives one turn of ``run`` (see the module docstring); the agent's options are read
    from ``run.settings``."""

    def __init__(self, run: Run, state: TurnState) -> None:
        self.agent = agent = run.settings
        self.run = run
        self.state = state
        ctx = run.ctx
        self._key = (ctx.session.app_name, ctx.session.user_id, ctx.session.id)
        self._service = ctx.session_service
        self._os_unwritten: list[JournalRecord] = []
        self._held: list[JournalRecord] = []  # read-only calls' outcomes, for the next durable write
        self._held_events: list[Event] = []  # their events (and those after them), for the same write
        # Read-write mounts through the file layer (SPEC §5 "Files"): advances have no host effects
        writes = layered_mounts(agent.runtime) if getattr(agent.runtime, "mounts", None) else {}
        self._mounts = writes if state.files is not None else {}
        self._may_hold = not writes or state.files is not None
        self._emit = ctx.run_config.emit_tool_events
        self._events: list[Event] = []  # tool_response events to yield after the call's outcome is stored
        self._runtime = agent.runtime
        self._sealed = agent.runtime.seal(b"") is not None
        # what every journal seal of this turn binds: the session and the turn (issue 46)
        self._scope = journal_scope(self._key, state.turn) if self._sealed else ""
        self._pacer = StopPacer()  # yields to the event loop between stops (issue 20)
        self._plans: dict[str, _Plan] = {}  # per tool name, made at its first call of the turn (_plan)
        self._functions_style = agent.runtime.tool_style == "functions"
        self._otel = run.otel if run.otel is not None and run.otel.active else None  # spans recorded this run
        self._appender = self._service.journal_appender() if self._service is not None else None
        self._breaker_on = run.breaker.threshold is not None  # (the run's breaker: fixed for the run)

    # ------------------------------------------------------------------ the loop

    async def drive(self, step: RunStep) -> AsyncGenerator[Event | TurnEnd, None]:
        """Advances the script from ``step`` until it ends, suspends or the run stops;
        yields the events to store and, last, one ``TurnEnd``, once the outcomes of the
        read-only calls it held are durable (the end of the script is a durable write)."""
        async with aclosing(end_overlay(self, self._drive(step))) as driven:
            async for item in driven:
                if type(item) is TurnEnd and not await self._end_files(item.how) and (self._held or self._held_events):
                    await self._flush()
                elif self._held_events and isinstance(item, Event):
                    self._hold_after(item)  # stored after the held ones, in the same commit
                yield item

    async def _drive(self, step: RunStep) -> AsyncGenerator[Event | TurnEnd, None]:
        run, st, agent = self.run, self.state, self.agent
        pacer = self._pacer
        while True:
            printed = step.stdout if type(step) in _STEPS and not step.stderr else step_output(step)
            run.turn_stdout += printed
            live = run.live_output
            if live is not None:  # RunConfig(streaming=True): printed output as partial events
                if not run.live_native:  # else the runtime fed it while the script ran
                    live.feed(printed)
                shown = live.take()
                if shown and (event := partial_event(run, "script_output", shown)) is not None:
                    yield event
            os_log = step.os_log
            if os_log and st.files is not None:  # the session's file layer rides at its end
                os_log, layer = split_log(os_log)
                if layer is not None:
                    st.files = layer
            if os_log and st.advance not in st.journal.os:
                # kept until the next write (several advances of read-only calls may pass first)
                self._os_unwritten.append(JournalRecord("os", st.advance, _json(list(os_log))))
            kind = type(step)
            if kind in _STEPS:
                ends, gather = kind in _ENDS, kind is Gather
            else:
                ends, gather = isinstance(step, (Complete, Raised)), isinstance(step, Gather)
            if ends:
                yield TurnEnd("finished", step)  # type: ignore[arg-type]
                return
            calls: list[PendingCall] = list(step.calls) if gather else [step.call]  # type: ignore[union-attr]
            for call in calls:
                if call.call_id not in st.positions:
                    st.positions[call.call_id] = st.next_pos
                    st.next_pos += 1
            if (
                (agent.checkpoint_every is not None or agent.checkpoint_every_seconds is not None)
                and self._checkpoint_due()
                and self._service is not None
            ):
                await self._checkpoint(step, calls)  # type: ignore[arg-type]
            # Each call goes through the same policy (_resolve), in call order; the calls to run
            # now run together (the calls of a gather concurrently), after their intents are
            # written in one write; then each call's result is settled in call order. A step of
            # one call (the usual one) takes the same steps without the lists of a gather.
            arg: Outcome | dict[int, Outcome] | None = None
            settled: list[_Settled]
            handler_error: BaseException | None = None
            if not gather:
                call = calls[0]
                one: _Resolved
                quick = self._quick(call)  # the usual live call: no policy to walk
                if quick is not None:
                    one = quick
                else:
                    try:
                        one = await self._resolve(call, st.positions[call.call_id])
                    except _HandlerFailed as failed:
                        handler_error = failed.cause
                        one = failed.suspend
                if type(one) is _Notice:  # the in-doubt notice, stored before its call goes on
                    yield one.event
                    one = one.then
                if type(one) is _Invoke:
                    plan = self._plans[call.name]
                    holds = plan.holds and not one.decided  # a decision is durable with its intent
                    if self._emit and not (one.tool.is_long_running and run.supports_suspension):
                        yield self._call_event(one)  # a long-running call's announcement shows it
                    if holds:
                        pass  # read-only: no intent; its outcome is held below
                    elif one.journaled:  # re-run in recovery: what the script saw is durable first
                        if self._held or self._held_events:
                            await self._flush()
                    else:
                        intent = [
                            _new_record(("intent", one.pos, f'{plan.intent}"{one.digest}"]'))
                            if not one.decided
                            else JournalRecord("intent", one.pos, _json([one.tool.name, one.digest, one.decided]))
                        ]  # as _intent writes it
                        if one.note is not None:  # a decision, durable with the intent it produces
                            intent.append(one.note)
                        if not self._write_now(intent):
                            await self._write_awaited(intent)
                    started = self._in_place(one)
                    if started is None or (
                        started[1] is None and (started[0] is NotImplemented or type(started[0]) is CoroutineType)
                    ):
                        one = await self._invoke_from(one, started)
                    else:  # it ran in place: no coroutine for it
                        value, failure = started
                        kind = type(value)
                        if (
                            failure is None
                            and not plan.pauses
                            and (kind in _SHORT_SCALARS or (kind is int and -_SHORT_INT < value < _SHORT_INT))
                        ):
                            one.outcome = ResumeValue(value)  # as _ran makes it (plain by its type)
                        else:
                            one = self._ran(one, value, failure, NO_ACTIONS)
                    if type(one) is _Invoke:  # it ran: its outcome is recorded
                        stored = bool(run.pending.state_delta or run.pending.artifact_delta)
                        held = holds and self._may_hold and self._service is not None
                        if stored:
                            # The tool's state / artifact changes are stored before its outcome or
                            # with it (a read-only call's are held with it): they are never lost.
                            yield self._hold_event(run.event()) if held else run.event()
                        ran = one.outcome
                        value = ran.value if type(ran) is ResumeValue else None
                        if type(value) is int and -_SHORT_INT < value < _SHORT_INT and not self._emit:
                            # a short int's record, as _record writes it (no blob, no event)
                            if holds:
                                if held:
                                    self._held.append(
                                        JournalRecord(
                                            "outcome", one.pos, f'{{"v":{value},"c":[{plan.call},"{one.digest}"]}}'
                                        )
                                    )
                                    st.calls_since_checkpoint += 1
                                    one = ran  # type: ignore[assignment]
                                else:  # written now (no store, or a runtime that writes files)
                                    one = await self._record(one.pos, one.tool.name, one.digest, ran, read_only=True)  # type: ignore[arg-type]
                            else:
                                outcome = [_new_record(("outcome", one.pos, f'{{"v":{value}}}'))]
                                if not self._write_now(outcome):
                                    await self._write_awaited(outcome)
                                one = ran  # type: ignore[assignment]
                        else:
                            one = await self._record(
                                one.pos,
                                one.tool.name,
                                one.digest,
                                ran,  # type: ignore[arg-type]
                                read_only=holds,
                                hold=held,
                            )
                if type(one) is ResumeValue or type(one) is ResumeError:
                    if self._events:
                        for event in self._events:
                            yield event
                        self._events.clear()
                    arg = one
                else:
                    settled = [one]
            else:
                settled = []
                runs: list[int] = []  # indexes in ``settled`` of the calls to run now
                notices: list[Event] | None = None
                for call in calls:
                    result: _Resolved
                    try:
                        result = await self._resolve(call, st.positions[call.call_id])
                    except _HandlerFailed as failed:
                        handler_error = failed.cause
                        result = failed.suspend
                    if type(result) is _Notice:  # its call goes on as ``then`` (never one that ends the turn)
                        if notices is None:
                            notices = []
                        notices.append(result.event)
                        result = result.then
                    if type(result) is _Invoke:
                        runs.append(len(settled))
                    settled.append(result)
                    if type(result) in _TURN_ENDS:
                        break
                if notices is not None:  # the in-doubt notices, stored before their calls go on
                    for notice in notices:
                        yield notice
                if runs and handler_error is None and type(settled[-1]) not in _TURN_ENDS:
                    if self._emit:
                        for i in runs:
                            inv = settled[i]
                            assert type(inv) is _Invoke
                            if not (inv.tool.is_long_running and run.supports_suspension):
                                yield self._call_event(inv)  # a long-running call's announcement shows it
                    if len(runs) == 1:  # one tool to run now (the usual single call): no task group
                        inv = settled[runs[0]]
                        assert type(inv) is _Invoke
                        if self._holds(inv):
                            pass  # read-only: no intent
                        elif not inv.journaled:
                            intent = _intents(inv)
                            if not self._write_now(intent):
                                await self._write_awaited(intent)
                        elif self._held or self._held_events:
                            await self._flush()
                        settled[runs[0]] = await self._invoke(inv)
                    else:
                        await self._invoke_all(settled, runs)
            if arg is None:  # settle each call's result in call order
                outcomes: dict[int, Outcome] = {}
                suspended: list[_Suspend] | None = None
                for call, done in zip(calls, settled, strict=False):  # settled stops at a call that ends the turn
                    if type(done) is _Invoke:
                        if done.outcome is None:  # not run: a later call ends the turn, or the handler failed
                            continue
                        stored = bool(run.pending.state_delta or run.pending.artifact_delta)
                        holds = self._holds(done)
                        held = holds and self._may_hold and self._service is not None
                        if stored:
                            # The tool's state / artifact changes are stored before its outcome or
                            # with it (a read-only call's are held with it): they are never lost.
                            yield self._hold_event(run.event()) if held else run.event()
                        done = await self._record(
                            done.pos,
                            done.tool.name,
                            done.digest,
                            done.outcome,
                            read_only=holds,
                            hold=held,
                        )
                    elif type(done) is _Final:
                        yield TurnEnd("finished", done.step)
                        return
                    elif type(done) is _Stop:
                        yield done.event
                        yield TurnEnd("stopped")
                        return
                    elif type(done) is _Budget:
                        yield TurnEnd("budget", message=done.message)
                        return
                    if self._events:
                        for event in self._events:
                            yield event
                        self._events.clear()
                    if type(done) is _Suspend:
                        if suspended is None:
                            suspended = []
                        suspended.append(done)
                    else:
                        outcomes[call.call_id] = done
                if handler_error is not None:
                    # The handler failed: the call it was asked about stays pending, the run ends (the
                    # other calls of a gather that were to run now run when the script resumes).
                    suspended = suspended or []
                    async for event in self._suspend(step, calls, suspended):  # type: ignore[arg-type]
                        yield event
                    raise ConfirmationHandlerError(
                        f"the tool confirmation handler raised {type(handler_error).__name__}: {handler_error}; the "
                        "run ended and the call is left pending (approve or deny it, or run again)",
                        [s.info for s in suspended],
                    ) from handler_error
                if suspended:
                    async for event in self._suspend(step, calls, suspended):  # type: ignore[arg-type]
                        yield event
                    yield TurnEnd("suspended")
                    return
                arg = outcomes if gather else outcomes[calls[0].call_id]
            try:
                # the advance (``_begin_advance``, inline: one native call when it is quick)
                if time.monotonic() - pacer.last >= PACE_SECONDS:
                    await pacer.pace()
                st.advance += 1
                replay = st.journal.os.get(st.advance) if st.journal.os else None
                if st.files is not None:  # the session's file layer, as the last advance left it
                    replay = [(FILES, st.files), *(replay or ())]
                got: Any
                if gather:
                    got = step.resume_within(arg, INLINE_WAIT, replay)  # type: ignore[arg-type, union-attr]
                else:
                    got = step.call.resume_within(arg, INLINE_WAIT, replay)  # type: ignore[arg-type, union-attr]
                if type(got) not in _STEPS:
                    if run.live_native:
                        async for live_event in wait_live(run, got):
                            yield live_event
                        got = got.result()
                    else:
                        got = await await_ticket(got, waited=True)
                step = got
            except SnapshotError as exc:
                run.end("error", keep_slot=True)
                yield run.stale_event(str(exc))
                yield TurnEnd("stopped")
                return
            except ReplayDivergenceError as exc:
                run.end("error", keep_slot=True)
                yield self._os_divergence(exc)
                yield TurnEnd("stopped")
                return

    async def _advance(self, step: Call | Gather, arg: Outcome | dict[int, Outcome], gather: bool) -> RunStep:
        """Resumes the script with the outcomes of its pending calls, off the event loop.

        Every advance runs off the event loop (issue 20: one run inline could not be
        interrupted, so a script that looped after a tool call held the loop for its whole
        ``max_duration``). The seam's ``resume_within`` hands the advance to the runtime's
        worker (Monty's native one never takes the GIL) and waits at most ``INLINE_WAIT``
        seconds for it: the usual short advance comes back as its step, without an
        event-loop round trip; a longer one as its ticket, awaited without blocking.

        ``arg``: the outcome of the paused call, or of a gather its outcomes by call id.
        """
        got = await self._begin_advance(step, arg, gather)
        if type(got) in _STEPS:
            return got
        result: RunStep = await await_ticket(got, waited=True)
        return result

    async def _begin_advance(self, step: Call | Gather, arg: Outcome | dict[int, Outcome], gather: bool) -> Any:
        """Starts the advance (``_advance``): its step when it finished within ``INLINE_WAIT``
        seconds, else its ticket."""
        st = self.state
        if self._pacer.due():
            await self._pacer.pace()
        st.advance += 1
        replay = st.journal.os.get(st.advance)
        if st.files is not None:  # the session's file layer, as the last advance left it
            replay = [(FILES, st.files), *(replay or ())]
        if gather:
            return step.resume_within(arg, INLINE_WAIT, replay)  # type: ignore[arg-type, union-attr]
        return step.call.resume_within(arg, INLINE_WAIT, replay)  # type: ignore[arg-type, union-attr]

    # ------------------------------------------------------------------ one call

    def _pending_of(
        self, call: PendingCall, pos: int, tool: str, args: dict[str, Any], kind: str = "confirmation", hint: Any = None
    ) -> _Suspend:
        st = self.state
        call_key = f"{st.turn}:{pos}"
        try:
            digest = call_digest(call_key, tool, args_digest(args))
        except ValueError:
            digest = ""
        entry = PendingEntry(
            call_key=call_key,
            pos=pos,
            call_id=call.call_id,
            kind=kind,  # type: ignore[arg-type]
            hint=hint,
            position=paused_position(self._runtime, call, st.record),
        )
        info = PendingCallInfo(
            call_key=call_key,
            tool=tool,
            args=args,
            kind=kind,  # type: ignore[arg-type]
            invocation_id=st.record.invocation_id,
            hint=hint,
            digest=digest,
        )
        return _Suspend(entry, info)

    def _confirm(self, call_key: str, approval: dict[str, Any]) -> None:
        """Gives the approved call's tool the reviewer's answer (``ToolContext.tool_confirmation``)."""
        self.run.confirmations[call_key] = ToolConfirmationAnswer(
            True, approval.get("payload"), approval.get("actor"), approval.get("reason")
        )

    def _note(self, call_key: str, tool: Tool) -> JournalRecord | None:
        """The journal record of the decision on ``call_key`` this resume uses (who decided
        what: ``RunConfig.decision_records``), or None; written with the record the decision
        produces, sealed like it. Each decision of the turn takes the next index."""
        st = self.state
        record = st.records.pop(call_key, None)
        if record is None:
            return None
        seq = st.journal.next_decision
        st.journal.next_decision += 1
        return JournalRecord("decision", seq, record_text(record.model_copy(update={"tool": tool.name})))

    async def _resolve(self, call: PendingCall, pos: int) -> _Resolved:
        """What becomes of one call (the policy every call goes through): an outcome the
        script gets now, a tool to run (``_Invoke``), a pause, or the end of the turn."""
        agent, run, st = self.agent, self.run, self.state
        try:
            plan = self._plans[call.name]
        except KeyError:
            plan = self._plans[call.name] = self._plan(call.name)
        tool = plan.tool
        if tool is None and self._functions_style and call.name == FINAL_ANSWER:
            outcome = final_answer_step(call.positional_args, call.keyword_args)
            if isinstance(outcome, Complete):
                return _Final(outcome)
            return outcome
        live = pos not in st.journal.calls and pos not in st.pending
        if live and (agent.max_tool_calls is not None or agent.max_script_seconds is not None):
            # Every stop counts, an unknown tool or refused arguments too (issue 20): a loop of
            # them caught by try/except ends at the budget like a loop of real calls.
            budget = self._budget_breach(pos)
            if budget is not None:
                return _Budget(budget)
        if tool is None:
            available = ", ".join(run.roster) if run.roster else "(none)"
            return ResumeError(f"tool {call.name!r} is not available; available tools: {available}", "LookupError")
        try:
            args = bind_call_args(tool, call.positional_args, call.keyword_args)
        except TypeError as exc:
            return ResumeError(str(exc), "TypeError")
        digest = plain_args_digest(args)  # one native walk for the usual plain arguments
        if digest is None:
            checked = _args_digest_or_error(tool, args)
            if isinstance(checked, ResumeError):
                return checked
            digest = checked
        call_key = f"{st.turn}:{pos}"
        if live:
            if not plan.gated:
                return _Invoke(tool, args, pos, digest, call_key, False, call)
            return await self._gated(tool, args, pos, digest, call_key, call)
        entry = st.journal.calls.get(pos)
        if entry is not None:
            if entry.tool != tool.name or entry.digest != digest:
                run.end("error", keep_slot=True)
                return _Stop(self._divergence(pos, entry, tool.name, digest))
            if entry.outcome is not None:
                return await self._recorded(entry.outcome)
            waiting = st.pending.get(pos)
            if waiting is None or waiting.kind == "confirmation":
                # started (approved, or not gated) and never recorded: it may have run; an
                # edited approval's call is the edited one (never the script's original)
                approved = st.journal.approvals.get(pos)
                if approved is not None:  # a rerun reads the reviewer's answer as the first run did
                    self._confirm(call_key, approved)
                run_args = st.journal.edits.get(pos, args)
                if plan.holds:  # a read-only call runs again: on_in_doubt never applies to it
                    return _Invoke(tool, run_args, pos, digest, call_key, True, call)
                return await self._in_doubt(tool, run_args, pos, digest, call_key, call)
        waiting = st.pending[pos]  # not live, not answered by the journal: the call is pending
        decision = st.decisions.get(call_key)
        if decision is not None and decision is not True:
            reason = f": {decision}" if isinstance(decision, str) and decision else ""
            what = "call to" if waiting.kind == "confirmation" else "long-running call to"
            denied = ResumeError(f"{what} {tool.name!r} was denied by a human reviewer{reason}", "PermissionError")
            return await self._record(pos, tool.name, digest, denied, intent=True, note=self._note(call_key, tool))
        if waiting.kind == "completion":
            if call_key not in st.responses:
                return self._pending_of(call, pos, tool.name, args, "completion", waiting.hint)
            result = self._checked_result(tool, st.responses[call_key])
            return await self._record(pos, tool.name, digest, result, intent=True, note=self._note(call_key, tool))
        if waiting.kind == "in_doubt":
            edited = st.journal.edits.get(pos, args)
            return await self._in_doubt(tool, edited, pos, digest, call_key, call, waiting=True)
        if decision is None:
            return await self._ask(tool, args, pos, digest, call_key, call)
        chosen = st.records.get(call_key)
        edits = chosen.args if chosen is not None else None  # an edited approval: the edited call runs
        if chosen is not None:
            self._confirm(call_key, chosen.model_dump())
        note = self._note(call_key, tool)  # (the script's call is what its intent names)
        run_args = edits if edits is not None else args
        return _Invoke(tool, run_args, pos, digest, call_key, False, call, decided="approved", note=note)

    async def _gated(
        self, tool: Tool, args: dict[str, Any], pos: int, digest: str, call_key: str, call: PendingCall
    ) -> _Resolved:
        """A live call of a tool that needs a confirmation: its decision, the tool's per-call
        check, the run's handler or a pause."""
        run, st = self.run, self.state
        decision = st.decisions.get(call_key)
        if decision is None and not run.gates_all(tool):
            try:
                asks = await tool.confirmation_required(args)
            except Exception as exc:  # a per-call check of the host failed: the script hears of it
                log.warning("confirmation check of tool %r failed", tool.name, exc_info=True)
                return ResumeError(
                    f"the confirmation check of {tool.name!r} failed ({type(exc).__name__}); the tool did not run",
                    "RuntimeError",
                )
            if not asks:
                return _Invoke(tool, args, pos, digest, call_key, False, call)
        if decision is None:
            if not run.supports_suspension and run.ctx.run_config.tool_confirmation_handler is None:
                return ResumeError(
                    f"tool {tool.name!r} requires confirmation, but this runtime cannot pause for a human "
                    "decision; the call was refused",
                    "PermissionError",
                )
            check = getattr(tool, "check_args", None)  # a call that can never validate is not put to a human
            try:
                if check is not None:
                    check(args)
            except ToolArgumentError as exc:
                return ResumeError(f"{exc}; the tool did not run and no confirmation was requested", "TypeError")
            return await self._ask(tool, args, pos, digest, call_key, call)
        if decision is not True:
            reason = f": {decision}" if isinstance(decision, str) and decision else ""
            denied = ResumeError(f"call to {tool.name!r} was denied by a human reviewer{reason}", "PermissionError")
            return await self._record(pos, tool.name, digest, denied, intent=True)
        return _Invoke(tool, args, pos, digest, call_key, False, call, decided="approved")

    async def _ask(
        self, tool: Tool, args: dict[str, Any], pos: int, digest: str, call_key: str, call: PendingCall
    ) -> _Resolved:
        """A gated call with no decision: the run's confirmation handler decides, else the
        turn suspends for a human."""
        suspend = self._pending_of(call, pos, tool.name, args)
        handler = self.run.ctx.run_config.tool_confirmation_handler
        if handler is None:
            if not self.run.supports_suspension:
                return ResumeError(
                    f"tool {tool.name!r} requires confirmation, but this runtime cannot pause for a human "
                    "decision; the call was refused",
                    "PermissionError",
                )
            return suspend
        try:
            if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__):
                verdict = await handler(suspend.info)
            else:
                verdict = await anyio.to_thread.run_sync(handler, suspend.info)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            approve, reason = handler_verdict(verdict)
        except Exception as exc:
            raise _HandlerFailed(exc, suspend) from exc
        if approve is None:
            if not self.run.supports_suspension:
                return ResumeError(
                    f"tool {tool.name!r} requires confirmation; the confirmation handler asked for a human, but "
                    "this runtime cannot pause; the call was refused",
                    "PermissionError",
                )
            return suspend
        if approve:
            return _Invoke(tool, args, pos, digest, call_key, False, call, decided="handler")
        why = f": {reason}" if reason else ""
        denied = ResumeError(f"call to {tool.name!r} was denied by the confirmation handler{why}", "PermissionError")
        return await self._record(pos, tool.name, digest, denied, intent=True)

    async def _in_doubt(
        self,
        tool: Tool,
        args: dict[str, Any],
        pos: int,
        digest: str,
        call_key: str,
        call: PendingCall,
        *,
        waiting: bool = False,
    ) -> _Resolved:
        """A recovered call with an intent and no outcome: it may have run. Per the tool's
        ``on_in_doubt``: run it again, pause for a human, or fail it into the script; a
        notice event is always emitted."""
        st = self.state
        decision = st.in_doubt.get(call_key)
        policy = getattr(tool, "on_in_doubt", "rerun")
        if decision is not None:
            action = decision.action
        elif policy == "ask":
            action = "ask"
        else:
            action = policy
        notice = self._in_doubt_event(call_key, tool.name, args, action)
        note = self._note(call_key, tool) if decision is not None else None
        if action == "rerun":
            # a human's rerun is journaled with the intent written again (its decision with it)
            rerun = _Invoke(tool, args, pos, digest, call_key, note is None, call, decided="rerun", note=note)
            return _Notice(notice, rerun)
        if action == "skip":
            result = self._checked_result(tool, decision.value if decision is not None else None)
            return _Notice(notice, await self._record(pos, tool.name, digest, result, note=note))
        if action == "fail":
            reason = decision.reason if decision is not None and decision.reason else ""
            why = f": {reason}" if reason else ""
            failed = ResumeError(
                f"the call to {tool.name!r} may or may not have run (the runner stopped before its outcome was "
                f"recorded); it was not run again{why}",
                "RuntimeError",
            )
            return _Notice(notice, await self._record(pos, tool.name, digest, failed, note=note))
        del waiting
        return _Notice(notice, self._pending_of(call, pos, tool.name, args, "in_doubt"))

    async def _invoke_all(self, settled: list[_Settled], runs: list[int]) -> None:
        """Runs the tools of the ``_Invoke`` entries of ``settled`` at the indexes ``runs``,
        replacing each by its result: their intents first, in one write (a decision becomes
        durable here, with the resume that uses it), then the tools, concurrently (the calls
        of one gather; ``drive`` runs a single call itself, without a task group)."""
        invokes: list[_Invoke] = [settled[i] for i in runs]  # type: ignore[misc]
        effects = [inv for inv in invokes if not self._holds(inv)]
        intents = [r for inv in effects if not inv.journaled for r in _intents(inv)]
        if intents:
            if not self._write_now(intents):
                await self._write_awaited(intents)
        elif effects and (self._held or self._held_events):  # re-run in recovery: what the script saw first
            await self._flush()
        writing = anyio.Lock()

        async def one(i: int, inv: _Invoke) -> None:
            result = await self._invoke(inv)
            if type(result) is _Invoke and result.outcome is not None and not result.changes:
                # Stored as soon as this tool returns, not when its slowest sibling does: a
                # crash meanwhile never runs it again. A tool that changed state waits for the
                # gather's end, where its changes are stored (as an event) before its outcome.
                # A read-only one's outcome is held (no event is stored for it).
                holds = self._holds(result)
                async with writing:
                    settled[i] = await self._record(
                        result.pos,
                        result.tool.name,
                        result.digest,
                        result.outcome,
                        read_only=holds,
                        hold=holds and self._may_hold,
                    )
                return
            settled[i] = result

        try:
            async with anyio.create_task_group() as tg:
                for i, inv in zip(runs, invokes, strict=True):
                    tg.start_soon(one, i, inv)
        except BaseException as exc:
            # A store failure while recording (or a crash) raises as itself, not wrapped in the
            # task group's exception group, as it does outside a gather.
            inner = [e for e in getattr(exc, "exceptions", ()) if not isinstance(e, anyio.get_cancelled_exc_class())]
            if inner:
                raise inner[0] from None
            raise

    async def _invoke(self, inv: _Invoke) -> _Invoke | _Suspend | _Stop:
        """Runs the tool (its intent is written already): ``inv`` with its ``outcome`` and
        ``changes`` set, a pause for a long-running call, or the end of the run."""
        return await self._invoke_from(inv, self._in_place(inv))

    async def _invoke_from(
        self, inv: _Invoke, started: tuple[Any, ToolFailure | None] | None
    ) -> _Invoke | _Suspend | _Stop:
        """``_invoke`` once ``_in_place`` answered ``started`` for ``inv``."""
        run = self.run
        tool, args, call_key = inv.tool, inv.args, inv.call_key
        if started is not None:
            value, failure = started
            actions = NO_ACTIONS
            if failure is None and (value is NotImplemented or type(value) is CoroutineType):
                if value is not NotImplemented:  # the function returned an awaitable
                    try:
                        value = await value
                        run.breaker.record(tool.name, True)
                    except ToolHostError:
                        raise
                    except (Exception, SystemExit) as exc:
                        value, failure = None, failure_of(tool, None, exc, call_key, run.ctx.session)
                        run.breaker.record(tool.name, False)
                if value is NotImplemented:
                    value, failure = await run_bare_tool(
                        tool,
                        args,
                        call_key,
                        run.ctx.session,
                        timeout=self.agent.tool_timeout,
                        retry=None,
                        breaker=run.breaker,
                    )
        elif (otel := self._otel) is not None:
            with otel.tool(tool.name, call_key, args) as span:
                value, failure, actions = await run.execute(tool, args, call_key)
                if failure is not None:
                    span.fail(failure.exc_type, failure.message)
                else:
                    span.record_result(value)
        else:
            value, failure, actions = await run.execute(tool, args, call_key)
        return self._ran(inv, value, failure, actions)

    def _ran(self, inv: _Invoke, value: Any, failure: ToolFailure | None, actions: Any) -> _Invoke | _Suspend | _Stop:
        """``inv`` once its tool returned ``value`` or failed (``failure``) with the tool
        context's ``actions``: its ``outcome`` and ``changes`` set, a pause for a long-running
        call, or the end of the run."""
        run, tool = self.run, inv.tool
        changes = False
        if actions is not NO_ACTIONS:  # a call with a ToolContext: its actions may end the run or change state
            if terminal_signal(actions):
                run.end("handed_off")
                return _Stop(run.handoff_event(actions))
            changes = bool(actions.state_delta or actions.artifact_delta)
        inv.changes = changes
        if failure is not None:
            inv.outcome = ResumeError(failure.message, failure.exc_type)
            return inv
        if tool.is_long_running and run.supports_suspension:
            hint = value if isinstance(value, str) or value is None else _json(value)
            return self._pending_of(inv.call, inv.pos, tool.name, inv.args, "completion", hint)
        kind = type(value)
        if kind in _SHORT_SCALARS or (kind is int and -_SHORT_INT < value < _SHORT_INT):
            inv.outcome = ResumeValue(value)  # plain by its type: no walk
        else:
            inv.outcome = self._checked_result(tool, value)
        return inv

    def _checked_result(self, tool: Tool, value: Any) -> Outcome:
        """``value`` as the outcome the script gets: a result that cannot cross the boundary,
        or a completion's error, becomes the script's exception."""
        kind = type(value)
        if kind in _SHORT_SCALARS or (kind is int and -_SHORT_INT < value < _SHORT_INT):
            return ResumeValue(value)  # plain by its type: no walk
        if isinstance(value, CompletionError):  # the caller completed the call with an error
            return ResumeError(f"long-running call to {tool.name!r} failed: {value.message}", "RuntimeError")
        problem = value_problem(value, "")  # the label is spelled out only for a message
        if problem is not None:
            problem = value_problem(value, f"the result of {tool.name!r}")
        if problem is not None:
            return ResumeError(problem, "ValueError")
        return ResumeValue(value)

    def _budget_breach(self, pos: int) -> str | None:
        agent, st = self.agent, self.state
        if agent.max_tool_calls is not None and pos >= agent.max_tool_calls:
            return (
                f"the script made more than max_tool_calls={agent.max_tool_calls} tool calls and was stopped; "
                "do the work in fewer calls"
            )
        if agent.max_script_seconds is not None and time.monotonic() - st.started > agent.max_script_seconds:
            return (
                f"the script ran longer than max_script_seconds={agent.max_script_seconds:g} s and was stopped "
                f"after {pos} tool call(s)"
            )
        return None


def _args_digest_or_error(tool: Tool, args: dict[str, Any]) -> str | ResumeError:
    """The digest of arguments ``plain_args_digest`` declined, or the error the script gets
    when they cannot cross the boundary (the checks that name why)."""
    problem = value_problem(args, f"the arguments of {tool.name!r}")
    if problem is not None:
        return ResumeError(f"{problem}; the tool did not run", "ValueError")
    try:
        return args_digest(args)
    except (ValueError, TypeError, pydantic_core.PydanticSerializationError) as exc:
        return ResumeError(
            f"the arguments of {tool.name!r} cannot cross the boundary ({exc}); the tool did not run", "ValueError"
        )


def position_of(call_key: str) -> int:
    """The position part of a call key (``<turn>:<pos>``)."""
    return int(call_key.rsplit(":", 1)[1])


TurnDriverFactory = Callable[..., TurnDriver]
