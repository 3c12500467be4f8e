"""The turn driver's plan (issue 54): what it reads once per turn and tool, not per call,
and the usual call's short path through it: ``_quick`` (a live call that needs no policy)
and ``_in_place`` (a quick tool run without a coroutine). ``TurnDriver`` inherits it."""

from __future__ import annotations

import time
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from .._values import plain_json_digest
from ..exceptions import ToolHostError
from ..runtime import PendingCall
from ..tools import FunctionTool
from ..turns._codec import MAX_INT_DIGITS, MAX_VALUE_BYTES
from ._call_results import _Invoke, _Plan
from ._dispatch import ToolFailure, failure_of
from ._journal_writes import _json

if TYPE_CHECKING:
    from ._run import Run
    from ._turn_state import TurnState


class _TurnPlan:
    """The driver's per-turn plan (``TurnDriver`` inherits it; its ``__init__`` sets the
    fields read here)."""

    run: Run
    agent: Any
    state: TurnState
    _plans: dict[str, _Plan]
    _otel: Any
    _breaker_on: bool

    def _holds(self, inv: _Invoke) -> bool:
        """Whether ``inv`` is a read-only call (no intent, its outcome held): its tool's plan
        holds, and no decision allowed it (a decision is durable with its intent)."""
        return self._plans[inv.call.name].holds and not inv.decided

    def _plan(self, name: str) -> _Plan:
        """The plan of the tool the script calls ``name``, made at its first call of the turn."""
        run, agent = self.run, self.agent
        tool = run.tools.get(name)
        if tool is None:
            return _Plan(None, False)
        retry = agent.tool_retry_budgets.get(tool.name, agent.default_retry_budget)
        in_place = (
            tool
            if isinstance(tool, FunctionTool)
            and type(tool).run is FunctionTool.run  # a subclass's own run may read its context
            and tool.context_parameter is None
            and not (retry is not None and retry.max_retries)
            and not (run.plugins or agent.before_tool or agent.after_tool or agent.after_tool_full)
            and not agent.on_tool_error
            and self._otel is None
            else None
        )
        pauses = bool(tool.is_long_running and run.supports_suspension)
        holds = bool(getattr(tool, "read_only", False)) and not pauses
        gated = run.needs_confirmation(tool)
        schema = tool.parameters
        names = None  # the parameter names of a closed schema (bind_call_args refuses others)
        if schema and schema.get("additionalProperties") is False:
            names = frozenset(schema.get("properties", {}) or {})
        return _Plan(
            tool,
            gated,
            in_place,
            holds,
            _json(tool.name) if holds else "",
            quick=not gated,
            pauses=pauses,
            names=names,
            intent=f"[{_json(tool.name)},",
        )

    def _quick(self, call: PendingCall) -> _Invoke | None:
        """``_resolve`` for the usual call, without its walk: a live call (not in the journal,
        not pending) of a known tool with no gate, keyword arguments only (of its parameters),
        within the budgets, whose arguments are plain JSON (one native walk for their digest):
        the tool to run (``_Invoke``). None: ``_resolve`` decides (it gives the same answer for
        such a call, and every other answer)."""
        st, agent = self.state, self.agent
        try:
            plan = self._plans[call.name]
        except KeyError:
            return None
        pos = st.positions[call.call_id]
        if (
            not plan.quick
            or call.positional_args
            or pos in st.journal.calls
            or pos in st.pending
            or (agent.max_tool_calls is not None and pos >= agent.max_tool_calls)
            or (agent.max_script_seconds is not None and time.monotonic() - st.started > agent.max_script_seconds)
        ):
            return None
        args = dict(call.keyword_args)
        if plan.names is not None and not args.keys() <= plan.names:
            return None  # an unknown name: bind_call_args names it
        digest = plain_json_digest(args, MAX_INT_DIGITS, MAX_VALUE_BYTES)
        if not digest:
            return None
        return _Invoke(plan.tool, args, pos, digest, f"{st.turn}:{pos}", False, call)  # type: ignore[arg-type]

    def _in_place(self, inv: _Invoke) -> tuple[Any, ToolFailure | None] | None:
        """Starts the usual quick call in place, as ``Run.execute`` would run it (no context,
        no callbacks, no retries, no timeout to enforce) but without a coroutine per layer
        (issue 21): ``(value, failure)``, where a value that is an awaitable the function
        returned, or ``NotImplemented`` (the tool went back to its worker thread), is still to
        be awaited (``_invoke_from``); None when the call is not one to run in place (nothing
        ran). The plan (``_plan``) read the run's tracing, plugins and tool callbacks at the
        tool's first call of the turn, as the short path before it did."""
        run = self.run
        if run.eager is not None and not inv.journaled and self._holds(inv):  # eager start (_eager)
            if (served := run.eager.serve(self.state.turn, inv)) is not None:
                return served
        bare = self._plans[inv.call.name].in_place
        if (
            bare is None
            or (self.agent.tool_timeout is not None and not bare.runs_inline)
            or (self._breaker_on and run.breaker.is_open(bare.name))
        ):
            return None
        run.tools_ran.append(bare.name)
        try:
            # run_inline reads the tool's mode once and declines (NotImplemented) when it
            # went back to its worker thread, where the agent's timeout applies.
            value = bare.run_inline(inv.args)
        except ToolHostError:
            raise  # the host's failure, not the script's: it ends the run
        except (Exception, SystemExit) as exc:  # as _attempts: SystemExit never ends the host's run
            failure = failure_of(bare, None, exc, inv.call_key, run.ctx.session)
            run.breaker.record(bare.name, False)
            return None, failure
        if self._breaker_on and value is not NotImplemented and type(value) is not CoroutineType:
            run.breaker.record(bare.name, True)
        return value, None
