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
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import pydantic_core

from ..events import Content, Event, FunctionCall, FunctionResponse, Part
from ..exceptions import (
    AlreadyResumingError,
    ConfirmationHandlerError,
    ReplayDivergenceError,
    SnapshotError,
    ToolArgumentError,
    ToolHostError,
    TurnConflictError,
)
from ..runtime import Call, Complete, Raised, ResumeError, ResumeValue, bind_call_args
from ..runtime._stepper import INLINE_WAIT, await_ticket, run_step
from ..runtime.monty import FINAL_ANSWER, StepTicket, final_answer_step
from ..sessions._journal import JournalRecord
from ..tools import FunctionTool, Tool
from ..turns._codec import (
    INLINE_VALUE_LIMIT,
    MAX_VALUE_BYTES,
    CompletionError,
    PendingCallInfo,
    announcement_events,
    args_digest,
    decode_outcome,
    encode_outcome,
    plain_args_digest,
    value_problem,
)
from ..turns._record import TURN_FORMAT, CallPosition, PendingEntry, TurnRecord
from ..turns._verify import call_digest, journal_scope, record_data, seal_journal, seal_record, slot_data
from ._dispatch import failure_of, run_bare_tool, terminal_signal
from ._output import step_output
from ._pacing import StopPacer
from ._position import paused_position

if TYPE_CHECKING:
    from ._run import Run

__all__ = ("Journal", "TurnDriver", "TurnEnd", "TurnState")

log = logging.getLogger("codeact.durability")

Outcome = ResumeValue | ResumeError


@dataclass(slots=True)
class TurnEnd:
    """How a turn's drive ended.

    Attributes:
        how: ``"finished"`` (``step`` is the script's ``Complete`` / ``Raised``),
            ``"suspended"`` (the pending calls were announced), ``"stopped"`` (the run ended:
            an error event, a hand-off signalled by a tool) or ``"budget"`` (the script broke
            a per-script budget; ``message`` is fed back to the model).
    """

    how: Literal["finished", "suspended", "stopped", "budget"]
    step: Complete | Raised | None = None
    message: str = ""


@dataclass(slots=True)
class _Entry:
    """A journaled call: the intent, and the outcome once recorded."""

    tool: str
    digest: str
    outcome: Any = None  # parsed outcome record, or None


@dataclass
class Journal:
    """The journal of one turn as read back for replay: calls by position, OS answers by
    advance index."""

    calls: dict[int, _Entry] = field(default_factory=dict)
    os: dict[int, list[Any]] = field(default_factory=dict)

    @classmethod
    def from_records(cls, records: list[JournalRecord]) -> Journal:
        journal = cls()
        for r in records:
            data = pydantic_core.from_json(r.data)
            if r.kind == "os":
                journal.os[r.seq] = [(kind, value) for kind, value in data]  # JSON gave [kind, value] lists
            elif r.kind == "intent":
                journal.calls[r.seq] = _Entry(data[0], data[1])
            elif r.seq in journal.calls:
                journal.calls[r.seq].outcome = data
        return journal


@dataclass
class TurnState:
    """What the driver knows about the turn it runs.

    Attributes:
        turn: the turn id (``<invocation id>:<iteration>``); call keys are ``<turn>:<pos>``.
        record: the turn record's fixed part (script, transcript, ...), stored in the slot.
        version: the slot version this runner last wrote or claimed (0: none yet).
        written: whether this turn's record is in the slot.
        journal: the journal read back (empty for a live turn).
        pending: positions of calls the suspension is paused at -> their entry.
        decisions: call key -> True (approve) / reason text (deny), held in memory: a
            decision becomes durable only with the journal record of the resume that uses it.
        responses: call key -> completion value.
        in_doubt: call key -> the human's decision on a call in doubt.
        next_pos / advance: the next call position and advance index.
        positions: the interpreter's call id -> position, for the calls of this turn.
        record_data: ``record``'s JSON form (``record_data``), made at the first save of a
            turn without a snapshot key and reused by each later save (``slot_data``).
    """

    turn: str
    record: TurnRecord
    version: int = 0
    written: bool = False
    journal: Journal = field(default_factory=Journal)
    pending: dict[int, PendingEntry] = field(default_factory=dict)
    decisions: dict[str, Any] = field(default_factory=dict)
    responses: dict[str, Any] = field(default_factory=dict)
    in_doubt: dict[str, Any] = field(default_factory=dict)
    next_pos: int = 0
    advance: int = 0
    positions: dict[int, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    record_data: dict[str, Any] | None = None
    last_checkpoint: float = field(default_factory=time.monotonic)
    calls_since_checkpoint: int = 0


@dataclass(slots=True)
class _Suspend:
    entry: PendingEntry
    info: PendingCallInfo


@dataclass(slots=True)
class _Stop:
    event: Event


@dataclass(slots=True)
class _Budget:
    message: str


@dataclass(slots=True)
class _Ran:
    """A tool ran: its outcome is to be recorded (after its state changes are stored)."""

    pos: int
    tool: str
    digest: str
    outcome: Outcome
    changes: bool = False  # the tool changed state or artifacts (stored as an event first)


@dataclass(slots=True)
class _Recorded:
    """A tool of a gather ran and its outcome is stored already (as soon as it returned)."""

    outcome: Outcome


@dataclass(slots=True)
class _Final:
    step: Complete


_SHORT_SCALARS = frozenset({float, bool, type(None)})
_SHORT_INT = 2**53
"""Ints inside this bound (magnitude) have far fewer digits than ``MAX_INT_DIGITS``."""


@dataclass(slots=True)
class _Invoke:
    """The tool is to run now (after its intent is written)."""

    tool: Tool
    args: dict[str, Any]
    pos: int
    digest: str
    call_key: str
    journaled: bool  # the journal holds its intent already (a recovery re-runs it)
    call: Any
    decided: str = ""  # how it was allowed to run ("approved", "handler", "rerun"), kept in its intent


class TurnDriver:
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
        self._emit = ctx.run_config.emit_tool_events
        self._events: list[Event] = []  # tool_response events to yield after the call's outcome is stored
        self._runtime = agent.runtime
        self._sealed = getattr(agent.runtime, "seal", None) is not None and agent.runtime.seal(b"") is not None
        # what every journal seal of this turn binds: the session and the turn (issue 46)
        self._scope = journal_scope(self._key, state.turn) if self._sealed else ""
        self._pacer = StopPacer()  # yields to the event loop between stops (issue 20)
        self._fast_tools: dict[str, FunctionTool | None] = {}  # _fast_tool's answers this turn
        self._appender = self._service.journal_appender() if self._service is not None else None

    # ------------------------------------------------------------------ the loop

    async def drive(self, step: Any) -> AsyncGenerator[Event | TurnEnd, None]:
        """Advances the script from ``step`` until it ends, suspends or the run stops;
        yields the events to store and, last, one ``TurnEnd``."""
        run, st = self.run, self.state
        while True:
            run.turn_stdout += step_output(step)
            os_log = getattr(step, "os_log", ())
            if os_log and st.advance not in st.journal.os:
                self._os_unwritten = [JournalRecord("os", st.advance, _json(list(os_log)))]
            if isinstance(step, (Complete, Raised)):
                yield TurnEnd("finished", step)
                return
            gather = not isinstance(step, Call)
            calls = list(step.calls) if gather else [step.call]
            for call in calls:
                if call.call_id not in st.positions:
                    st.positions[call.call_id] = st.next_pos
                    st.next_pos += 1
            if self._checkpoint_due() and self._service is not None:
                await self._checkpoint(step, calls)
            # The common inline call takes the short path (same records, same order); any
            # other call, and any call the short path declines, goes through the policy below.
            fast = None if gather else await self._fast_call(calls[0], st.positions[calls[0].call_id])
            outcomes: dict[int, Outcome] = {}
            if fast is None:
                suspended: list[_Suspend] = []
                # Each call goes through the same policy; the calls to run now run together
                # (the calls of a gather concurrently), after their intents are written.
                resolved: list[tuple[Any, Any]] = []
                notices: list[Event] = []
                handler_error: BaseException | None = None
                for call in calls:
                    try:
                        result = await self._resolve(call, st.positions[call.call_id])
                    except _HandlerFailed as failed:
                        handler_error = failed.cause
                        result = failed.suspend
                    if isinstance(result, _Notice):  # its call goes on as ``then`` (never one that ends the turn)
                        notices.append(result.event)
                        result = result.then
                    resolved.append((call, result))
                    if isinstance(result, (_Final, _Stop, _Budget)):
                        break
                for notice in notices:  # the in-doubt notices, stored before their calls go on
                    yield notice
                invokes = [r for _, r in resolved if isinstance(r, _Invoke)]
                if invokes and not isinstance(resolved[-1][1], (_Final, _Stop, _Budget)) and handler_error is None:
                    for inv in invokes:
                        if self._emit and not (inv.tool.is_long_running and run.supports_suspension):
                            yield self._call_event(inv)  # a long-running call's announcement shows it
                    ran = await self._invoke_all(invokes)
                    resolved = [(call, ran.get(id(r), r)) for call, r in resolved]
                for call, result in resolved:
                    if isinstance(result, _Invoke):  # not run: a later call ends the turn, or the handler failed
                        continue
                    if isinstance(result, _Final):
                        yield TurnEnd("finished", result.step)
                        return
                    if isinstance(result, _Stop):
                        yield result.event
                        yield TurnEnd("stopped")
                        return
                    if isinstance(result, _Budget):
                        yield TurnEnd("budget", message=result.message)
                        return
                    if isinstance(result, _Ran):
                        if run.pending.state_delta or run.pending.artifact_delta:
                            # The tool's state / artifact changes are stored before its outcome:
                            # a recorded outcome never runs again, so its changes must not be lost.
                            yield run.event()
                        result = await self._record(result.pos, result.tool, result.digest, result.outcome)
                    elif isinstance(result, _Recorded):
                        result = result.outcome
                    if self._events:
                        for event in self._events:
                            yield event
                        self._events.clear()
                    if isinstance(result, _Suspend):
                        suspended.append(result)
                    else:
                        outcomes[call.call_id] = result
                if handler_error is not None:
                    # The handler failed: the call it was asked about stays pending, the run ends (the
                    # other calls of a gather that were to run now run when the script resumes).
                    async for event in self._suspend(step, calls, suspended):
                        yield event
                    raise ConfirmationHandlerError(
                        f"the tool confirmation handler raised {type(handler_error).__name__}: {handler_error}; the "
                        "run ended and the call is left pending (approve or deny it, or run again)",
                        [s.info for s in suspended],
                    ) from handler_error
                if suspended:
                    async for event in self._suspend(step, calls, suspended):
                        yield event
                    yield TurnEnd("suspended")
                    return
            try:
                if fast is not None:
                    step = await self._advance(step, fast, False)
                else:
                    step = await self._advance(step, outcomes if gather else next(iter(outcomes.values())), gather)
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

    async def _advance(self, step: Any, arg: Outcome | dict[int, Outcome], gather: bool) -> Any:
        """Resumes the script with the outcomes of its pending calls, on a worker thread.

        Every advance runs off the event loop (issue 20: one run inline could not be
        interrupted, so a script that looped after a tool call held the loop for its whole
        ``max_duration``). The native ``resume_async`` of the runtime's continuations hands
        the advance to a native worker that never takes the GIL; the loop blocks at most
        ``INLINE_WAIT`` seconds for it (a short advance comes back without an event-loop
        round trip), then awaits it without blocking. A runtime without that variant goes
        through ``run_step``.

        ``arg``: the outcome of the paused call, or of a gather its outcomes by call id.
        """
        st = self.state
        if self._pacer.due():
            await self._pacer.pace()
        st.advance += 1
        replay = st.journal.os.get(st.advance)
        target = step if gather else step.call
        within = getattr(target, "resume_within", None)
        if within is not None:
            # One native call hands the advance over and waits for it: the usual short one
            # comes back as its step, a longer one as its ticket, awaited without blocking.
            got = within(arg, INLINE_WAIT, replay)
            if type(got) is StepTicket:
                return await await_ticket(got, waited=True)
            return got
        native = getattr(target, "resume_async", None)
        if native is None:
            fn = functools.partial(target.resume, os_replay=replay) if replay else target.resume
            return await run_step(fn, arg)
        ticket = native(arg, os_replay=replay) if replay else native(arg)
        if ticket.wait(INLINE_WAIT):  # the usual short advance: no coroutine for the wait
            return ticket.result()
        return await await_ticket(ticket, waited=True)

    # ------------------------------------------------------------------ one call

    def _pending_of(
        self, call: Any, pos: int, tool: str, args: dict[str, Any], kind: str = "confirmation", hint: Any = None
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

    async def _fast_call(self, call: Any, pos: int) -> Outcome | None:
        """The short path of the most common call (issue 21): a live call (not journaled, not
        pending) of a plain ``FunctionTool`` with no context parameter, no confirmation, no
        long-running result, no timeout to enforce and no retries, on an agent with no tool
        callbacks, plugins, tool events or tracing. It writes the same records in the same
        order as the policy of ``_resolve`` / ``_invoke_all`` / ``Run.execute`` would: the
        intent, then the tool runs, then its outcome.

        Returns:
            The recorded outcome the script resumes with, or None when the call is not of
            that kind or its arguments would be refused (a budget, an open circuit breaker,
            arguments that do not bind, are not plain or have no digest); nothing was done
            then, and the caller takes the general path, which gives the same answer it
            always did. The agent's callbacks and plugins are read before the intent's
            write (the general path reads them just after it); the tool's thread mode, which
            another session's call can change meanwhile, is read again after it.

        Raises:
            AlreadyResumingError: another runner took the turn over (from ``_write``).
            ToolHostError: the tool reported a host failure (the run ends).
        """
        run, st, agent = self.run, self.state, self.agent
        if pos in st.journal.calls or pos in st.pending:
            return None
        try:
            tool = self._fast_tools[call.name]
        except KeyError:
            tool = self._fast_tools[call.name] = self._fast_tool(call.name)
        if (
            tool is None
            or (agent.tool_timeout is not None and not tool.runs_inline)
            or run.pending.state_delta
            or run.pending.artifact_delta
            or run.breaker.is_open(tool.name)
            or ((agent.max_script_seconds is not None or agent.max_tool_calls is not None) and self._budget_breach(pos))
        ):
            return None
        try:
            args = bind_call_args(tool, call.positional_args, call.keyword_args)
        except TypeError:
            return None
        digest = plain_args_digest(args)
        if digest is None:
            return None
        # From here on, as the general path does for this call.
        intent = [JournalRecord("intent", pos, _json([tool.name, digest]))]
        if not self._write_now(intent):
            await self._write_awaited(intent)
        run.tools_ran.append(tool.name)
        failure = None
        if agent.tool_timeout is not None and not tool.runs_inline:
            # Back in its worker thread since the check above (a slow call of the same tool in
            # another session, during the intent's write): its timeout applies, as it would
            # on the general path, which reads this after the write.
            value, failure = await run_bare_tool(
                tool,
                args,
                f"{st.turn}:{pos}",
                run.ctx.session,
                timeout=agent.tool_timeout,
                retry=agent.tool_retry_budgets.get(tool.name, agent.default_retry_budget),
                breaker=run.breaker,
            )
        else:
            try:
                # The usual quick sync tool runs without a coroutine; run_inline reads the
                # tool's mode once and declines (NotImplemented) when the call is not inline.
                value = tool.run_inline(args)
                if value is NotImplemented:
                    value = await tool.run(args, None)  # type: ignore[arg-type]
                elif inspect.iscoroutine(value):  # the function returned an awaitable
                    value = await value
            except ToolHostError:
                raise  # the host's failure, not the script's: it ends the run
            except (Exception, SystemExit) as exc:  # as ``_attempts``: SystemExit never ends the host's run
                failure = failure_of(tool, None, exc, f"{st.turn}:{pos}", run.ctx.session)
            run.breaker.record(tool.name, failure is None)
        if failure is None and (
            type(value) in _SHORT_SCALARS or (type(value) is int and -_SHORT_INT < value < _SHORT_INT)
        ):
            # A scalar result (a short int, a float, a bool, None) is plain: no walk, no
            # length check (_checked_result's) and no blob; an int's record is written here,
            # as encode_outcome would write it.
            outcome: Outcome = ResumeValue(value)
            text = f'{{"v":{value}}}' if type(value) is int else encode_outcome(outcome).decode()
        else:
            if failure is not None:
                outcome = ResumeError(failure.message, failure.exc_type)
            else:
                outcome = self._checked_result(tool, value)
            try:
                data = encode_outcome(outcome)
            except (ValueError, TypeError, pydantic_core.PydanticSerializationError):
                data = b""
            if not data or len(data) > INLINE_VALUE_LIMIT:  # escaped, refused or kept as a blob: as _record does
                return await self._record(pos, tool.name, digest, outcome)
            text = data.decode()
        records = [JournalRecord("outcome", pos, text)]
        if not self._write_now(records):
            await self._write_awaited(records)
        return outcome

    def _fast_tool(self, name: str) -> FunctionTool | None:
        """The tool ``name`` when its calls may take the short path as far as nothing that
        changes within a turn forbids it (``_fast_call`` checks the rest per call): a plain
        ``FunctionTool`` with no context parameter, no confirmation, no long-running result
        and no retries, on an agent with no tool callbacks, plugins or tool events, in a run
        that is not traced; else None. Read once per tool and turn (``_fast_tools``)."""
        run, agent = self.run, self.agent
        tool = run.tools.get(name)
        if (
            type(tool) is not FunctionTool  # a subclass may have its own run or policy
            or tool.context_parameter is not None
            or tool.is_long_running
            or self._emit
            or run.plugins
            or agent.before_tool
            or agent.after_tool
            or agent.after_tool_full
            or agent.on_tool_error
            or (run.otel is not None and run.otel.active)
            or run.needs_confirmation(tool)
        ):
            return None
        retry = agent.tool_retry_budgets.get(tool.name, agent.default_retry_budget)
        if retry is not None and retry.max_retries:
            return None
        return tool

    async def _resolve(self, call: Any, pos: int) -> Any:
        agent, run, st = self.agent, self.run, self.state
        tool = run.tools.get(call.name)
        if tool is None and call.name == FINAL_ANSWER and getattr(agent.runtime, "tool_style", None) == "functions":
            outcome = final_answer_step(call.positional_args, call.keyword_args)
            if isinstance(outcome, Complete):
                return _Final(outcome)
            return outcome
        if pos not in st.journal.calls and pos not in st.pending:
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
        problem = value_problem(args, "")  # the label is spelled out only for a message
        if problem is not None:
            problem = value_problem(args, f"the arguments of {tool.name!r}")
        if problem is not None:
            return ResumeError(f"{problem}; the tool did not run", "ValueError")
        try:
            digest = args_digest(args)
        except (ValueError, TypeError, pydantic_core.PydanticSerializationError) as exc:
            return ResumeError(
                f"the arguments of {tool.name!r} cannot cross the boundary ({exc}); the tool did not run", "ValueError"
            )
        call_key = f"{st.turn}:{pos}"
        entry = st.journal.calls.get(pos)
        if entry is not None:
            if entry.tool != tool.name or entry.digest != digest:
                run.end("error", keep_slot=True)
                return _Stop(self._divergence(pos, entry, tool.name, digest))
            if entry.outcome is not None:
                return await self._recorded(entry.outcome)
            waiting = st.pending.get(pos)
            if waiting is None or waiting.kind == "confirmation":
                # started (approved, or not gated) and never recorded: it may have run
                return await self._in_doubt(tool, args, pos, digest, call_key, call)
        waiting = st.pending.get(pos)
        if waiting is not None:
            decision = st.decisions.get(call_key)
            if decision is not None and decision is not True:
                reason = f": {decision}" if isinstance(decision, str) and decision else ""
                what = "call to" if waiting.kind == "confirmation" else "long-running call to"
                denied = ResumeError(f"{what} {tool.name!r} was denied by a human reviewer{reason}", "PermissionError")
                return await self._record(pos, tool.name, digest, denied, intent=True)
            if waiting.kind == "completion":
                if call_key not in st.responses:
                    return self._pending_of(call, pos, tool.name, args, "completion", waiting.hint)
                result = self._checked_result(tool, st.responses[call_key])
                return await self._record(pos, tool.name, digest, result, intent=True)
            if waiting.kind == "in_doubt":
                return await self._in_doubt(tool, args, pos, digest, call_key, call, waiting=True)
            if decision is None:
                return await self._ask(tool, args, pos, digest, call_key, call)
            return _Invoke(tool, args, pos, digest, call_key, False, call, decided="approved")
        if run.needs_confirmation(tool):
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
        return _Invoke(tool, args, pos, digest, call_key, False, call)

    async def _ask(self, tool: Tool, args: dict[str, Any], pos: int, digest: str, call_key: str, call: Any) -> Any:
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
            approve, reason = _verdict(verdict)
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
        call: Any,
        *,
        waiting: bool = False,
    ) -> Any:
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
        if action == "rerun":
            return _Notice(notice, _Invoke(tool, args, pos, digest, call_key, True, call, decided="rerun"))
        if action == "skip":
            result = self._checked_result(tool, decision.value if decision is not None else None)
            return _Notice(notice, await self._record(pos, tool.name, digest, result))
        if action == "fail":
            reason = decision.reason if decision is not None and decision.reason else ""
            why = f": {reason}" if reason else ""
            failed = ResumeError(
                f"the call to {tool.name!r} may or may not have run (the runner stopped before its outcome was "
                f"recorded); it was not run again{why}",
                "RuntimeError",
            )
            return _Notice(notice, await self._record(pos, tool.name, digest, failed))
        del waiting
        return _Notice(notice, self._pending_of(call, pos, tool.name, args, "in_doubt"))

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

    async def _invoke_all(self, invokes: list[_Invoke]) -> dict[int, _Ran | _Recorded | _Suspend | _Stop]:
        """Runs the tools of ``invokes`` (keyed by ``id()`` of each): their intents first, in
        one write (a decision becomes durable here, with the resume that uses it), then the
        tools, concurrently when there are several (the calls of one gather)."""
        intents = [_intent(inv) for inv in invokes if not inv.journaled]
        if intents:
            await self._write(intents)
        if len(invokes) == 1:
            return {id(invokes[0]): await self._invoke(invokes[0])}
        results: dict[int, _Ran | _Recorded | _Suspend | _Stop] = {}
        writing = anyio.Lock()

        async def one(inv: _Invoke) -> None:
            result = await self._invoke(inv)
            if isinstance(result, _Ran) and not result.changes:
                # Stored as soon as this tool returns, not when its slowest sibling does: a
                # crash meanwhile never runs it again. A tool that changed state waits for the
                # gather's end, where its changes are stored (as an event) before its outcome.
                async with writing:
                    results[id(inv)] = _Recorded(
                        await self._record(result.pos, result.tool, result.digest, result.outcome)
                    )
                return
            results[id(inv)] = result

        try:
            async with anyio.create_task_group() as tg:
                for inv in invokes:
                    tg.start_soon(one, inv)
        except BaseException as exc:
            # A store failure while recording (or a crash) raises as itself, not wrapped in the
            # task group's exception group, as it does outside a gather.
            inner = [e for e in getattr(exc, "exceptions", ()) if not isinstance(e, anyio.get_cancelled_exc_class())]
            if inner:
                raise inner[0] from None
            raise
        return results

    async def _invoke(self, inv: _Invoke) -> _Ran | _Suspend | _Stop:
        """Runs the tool (its intent is written already)."""
        run = self.run
        tool, args, pos, digest, call_key = inv.tool, inv.args, inv.pos, inv.digest, inv.call_key
        otel = run.otel
        if otel is not None and otel.active:
            with otel.tool(tool.name, call_key, args) as span:
                value, failure, actions = await run.execute(tool, args, call_key)
                if failure is not None:
                    span.fail(failure.exc_type, failure.message)
                else:
                    span.record_result(value)
        else:
            value, failure, actions = await run.execute(tool, args, call_key)
        if terminal_signal(actions):
            run.end("handed_off")
            return _Stop(run.handoff_event(actions))
        changes = bool(actions.state_delta or actions.artifact_delta)
        if failure is not None:
            return _Ran(pos, tool.name, digest, ResumeError(failure.message, failure.exc_type), changes)
        if tool.is_long_running and run.supports_suspension:
            hint = value if isinstance(value, str) or value is None else _json(value)
            return self._pending_of(inv.call, pos, tool.name, args, "completion", hint)
        return _Ran(pos, tool.name, digest, self._checked_result(tool, value), changes)

    def _checked_result(self, tool: Tool, value: Any) -> Outcome:
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

    # ------------------------------------------------------------------ journal

    async def _record(self, pos: int, tool: str, digest: str, outcome: Outcome, *, intent: bool = False) -> Outcome:
        """Writes ``outcome`` (and the intent when none is stored) durably; returns it, or the
        error the script gets when the value is too large for the boundary. A value that
        cannot be encoded as it is (a str with lone surrogates) is recorded, and given to the
        script, escaped; one that cannot be encoded at all becomes the script's error."""
        try:
            data = encode_outcome(outcome)
        except (ValueError, TypeError, pydantic_core.PydanticSerializationError):
            outcome = _escaped(outcome, tool)
            data = encode_outcome(outcome)
        if len(data) > MAX_VALUE_BYTES:
            outcome = ResumeError(f"the result of {tool!r} is larger than {MAX_VALUE_BYTES} bytes", "ValueError")
            data = encode_outcome(outcome)
        elif len(data) > INLINE_VALUE_LIMIT and self._service is not None:
            blob = hashlib.sha256(data).hexdigest()
            app, user, sid = self._key
            await self._service.put_blob(app_name=app, user_id=user, session_id=sid, digest=blob, data=data)
            data = _json({"r": blob, "n": len(data)}).encode()
        records = [JournalRecord("intent", pos, _json([tool, digest]))] if intent else []
        records.append(JournalRecord("outcome", pos, data.decode()))
        await self._write(records)
        if self._emit:
            self._events.append(self._response_event(f"{self.state.turn}:{pos}", tool, outcome))
        return outcome

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

    async def _recorded(self, data: dict[str, Any]) -> Outcome:
        if "r" in data and self._service is not None:
            app, user, sid = self._key
            blob = await self._service.get_blob(app_name=app, user_id=user, session_id=sid, digest=data["r"])
            if blob is None or hashlib.sha256(blob).hexdigest() != data["r"]:
                return ResumeError("the journaled result is missing from the store (or altered)", "RuntimeError")
            data = pydantic_core.from_json(blob)
        return decode_outcome(data)

    def _write_now(self, records: list[JournalRecord]) -> bool:
        """``_write`` without awaiting, when the store has a ``journal_appender`` and the
        slot is written: True when the records (after any OS answers not yet written) are
        stored; False when nothing was written (the caller awaits ``_write``).

        Raises:
            AlreadyResumingError: another runner took the turn over; nothing was written.
        """
        st = self.state
        if self._appender is None or not st.written:
            return False
        full = self._os_unwritten + records if self._os_unwritten else records
        if self._sealed:
            full = [seal_journal(self._runtime, self._scope, r) for r in full]
        try:
            if not self._appender(self.run.ctx.session, st.turn, full, st.version):
                return False
        except TurnConflictError as exc:
            raise self._taken_over(exc) from exc
        self._os_unwritten = []
        if records[-1].kind == "outcome":
            st.calls_since_checkpoint += 1
        return True

    def _taken_over(self, exc: TurnConflictError) -> AlreadyResumingError:
        return AlreadyResumingError(
            f"another runner took over turn {self.state.turn} of session {self._key[2]!r} ({exc}); this runner "
            "wrote nothing more and stops"
        )

    async def _write(self, records: list[JournalRecord]) -> None:
        """Appends journal records, fenced by the slot version this runner holds: through
        the store's ``journal_appender`` when it takes them (``_write_now``), else awaited.

        Raises:
            AlreadyResumingError: another runner took the turn over; nothing was written.
        """
        if not self._write_now(records):
            await self._write_awaited(records)

    async def _write_awaited(self, records: list[JournalRecord]) -> None:
        """``_write`` once ``_write_now`` declined: the turn's first write saves the slot
        first (then tries the appender again), any other awaits ``append_journal``."""
        if self._service is None:
            return
        if not self.state.written:
            await self.save("running")
            if self._write_now(records):
                return
        if self._os_unwritten:
            records = self._os_unwritten + records
            self._os_unwritten = []
        if self._sealed:
            records = [seal_journal(self._runtime, self._scope, r) for r in records]
        try:
            await self._service.append_journal(
                self.run.ctx.session, self.state.turn, records, expected_version=self.state.version
            )
        except TurnConflictError as exc:
            raise self._taken_over(exc) from exc
        if records[-1].kind == "outcome":
            self.state.calls_since_checkpoint += 1

    # ------------------------------------------------------------------ the slot

    async def save(
        self,
        status: Literal["running", "suspended"],
        *,
        snapshot: bytes | None = None,
        at: list[CallPosition] | None = None,
        pending: list[PendingEntry] | None = None,
        gather: bool = False,
    ) -> None:
        """Writes the turn slot (compare-and-set on the version this runner holds).

        Raises:
            AlreadyResumingError: another runner wrote the slot since (it owns the turn now).
        """
        st, run = self.state, self.run
        app, user, sid = self._key
        if self._service is None:  # a run without a store (direct agent runs): nothing is durable
            st.written = True
            return
        update = {
            "format": TURN_FORMAT,
            "status": status,
            "turn_stdout": run.turn_stdout,
            "next_pos": st.next_pos,
            "advance": st.advance,
            "at": at or [],
            "gather": gather,
            "pending": pending or [],
            "snapshot_sha256": hashlib.sha256(snapshot).hexdigest() if snapshot is not None else None,
            # A suspended turn at rest has no owner; a running one is this run's.
            "claim": run.ctx.claim if status == "running" else None,
            "run_key": run.ctx.run_key,
        }
        if self._sealed:
            record = st.record.model_copy(update=update)
            seal_record(self._runtime, record, self._key)
            data = record_data(record)
        else:
            if st.record_data is None:  # the fixed part's JSON form, made once a turn
                st.record_data = record_data(st.record)
            data = slot_data(st.record_data, update)
        try:
            st.version = await self._service.save_turn(
                app_name=app,
                user_id=user,
                session_id=sid,
                data=data,
                snapshot=snapshot,
                expected_version=st.version,
            )
        except TurnConflictError as exc:
            raise AlreadyResumingError(
                f"another runner took over turn {st.turn} of session {sid!r} ({exc}); this runner stops"
            ) from exc
        run.slot_version = st.version
        st.written = True

    def _checkpoint_due(self) -> bool:
        agent, st = self.agent, self.state
        if not self.run.supports_suspension or not st.written:
            return False
        if agent.checkpoint_every is not None and st.calls_since_checkpoint >= agent.checkpoint_every:
            return True
        return (
            agent.checkpoint_every_seconds is not None
            and time.monotonic() - st.last_checkpoint >= agent.checkpoint_every_seconds
        )

    async def _checkpoint(self, step: Any, calls: list[Any]) -> None:
        st = self.state
        snapshot = step.call.dump() if isinstance(step, Call) else step.dump()
        await self.save(
            "running", snapshot=snapshot, at=[self._at(c) for c in calls], gather=not isinstance(step, Call)
        )
        st.calls_since_checkpoint = 0
        st.last_checkpoint = time.monotonic()

    def _at(self, call: Any) -> CallPosition:
        return CallPosition(call_id=call.call_id, pos=self.state.positions[call.call_id])

    async def _suspend(self, step: Any, calls: list[Any], suspended: list[_Suspend]) -> AsyncGenerator[Event, None]:
        agent, run = self.agent, self.run
        snapshot = step.call.dump() if isinstance(step, Call) else step.dump()
        await self.save(
            "suspended",
            snapshot=snapshot,
            at=[self._at(c) for c in calls],
            pending=[s.entry for s in suspended],
            gather=not isinstance(step, Call),
        )
        run.end("suspended")
        events = announcement_events(agent.name, run.ctx.invocation_id, [s.info for s in suspended])
        for i, event in enumerate(events):
            if i == 0:
                event = run.event(**_fields(event))
            yield event


@dataclass(slots=True)
class _Notice:
    """An event to emit before the call's result (an in-doubt notice), and the result."""

    event: Event
    then: Any


class _HandlerFailed(Exception):
    def __init__(self, cause: BaseException, suspend: _Suspend) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.suspend = suspend


def _intent(inv: _Invoke) -> JournalRecord:
    """The intent record of a call about to run: its tool, argument digest and how it was
    allowed to run, when it needed allowing."""
    return JournalRecord(
        "intent",
        inv.pos,
        _json([inv.tool.name, inv.digest, inv.decided] if inv.decided else [inv.tool.name, inv.digest]),
    )


def _verdict(verdict: Any) -> tuple[bool | None, str]:
    """A confirmation handler's answer as ``(approve or None for ask, reason)``.

    Raises:
        ValueError: an answer that is none of the documented forms.
    """
    if verdict is None or verdict == "ask":
        return None, ""
    if verdict is True or verdict in ("approve", "approved", "yes"):
        return True, ""
    if verdict is False or verdict in ("deny", "denied", "no"):
        return False, ""
    if isinstance(verdict, tuple) and len(verdict) == 2 and verdict[0] == "deny" and isinstance(verdict[1], str):
        return False, verdict[1]
    raise ValueError(
        f"a confirmation handler must return 'approve', 'deny', ('deny', reason), 'ask', True, False or None; got "
        f"{verdict!r}"
    )


def _escaped(outcome: Outcome, tool: str) -> Outcome:
    """An outcome that failed to encode, with its text escaped (or, failing that, an error
    naming why)."""
    try:
        if isinstance(outcome, ResumeError):
            escaped: Outcome = ResumeError(escape_surrogates(outcome.message), escape_surrogates(outcome.exc_type))
        else:
            escaped = ResumeValue(escape_surrogates(outcome.value))
        encode_outcome(escaped)
        return escaped
    except (ValueError, TypeError, pydantic_core.PydanticSerializationError) as exc:
        return ResumeError(f"the result of {tool!r} cannot be recorded ({type(exc).__name__})", "ValueError")


def escape_surrogates(value: Any) -> Any:
    """``value`` with every str holding lone surrogates (what ``os.fsdecode`` gives for a
    file name that is not UTF-8) escaped as ``\\udcxx`` text, so it can be journaled and
    enter the script; other values unchanged. Only called on values ``value_problem``
    accepted (bounded depth)."""
    kind = type(value)
    if kind is str:
        if value.isascii():
            return value
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if kind is list:
        return [escape_surrogates(v) for v in value]
    if kind is tuple:
        return tuple(escape_surrogates(v) for v in value)
    if kind is dict:
        return {escape_surrogates(k): escape_surrogates(v) for k, v in value.items()}
    return value


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


def _json(value: Any) -> str:
    return pydantic_core.to_json(value, inf_nan_mode="constants").decode()


def position_of(call_key: str) -> int:
    """The position part of a call key (``<turn>:<pos>``)."""
    return int(call_key.rsplit(":", 1)[1])


TurnDriverFactory = Callable[..., TurnDriver]
