"""Running one tool call: the robustness pipeline between the script and the tool.

Order (SPEC §4): circuit breaker; plugins' ``before_tool`` then before-tool callbacks (first
non-None result replaces the call); the tool with its timeout and retry budget (the breaker
records the outcome once per call); plugins' ``on_tool_error`` then on-tool-error fallbacks;
plugins' ``after_tool`` (a pipeline, on a value only); after-tool callbacks; after-tool-full
callbacks, which see the ``ToolOutcome`` (also as ``tool_context.tool_outcome``).
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

from .._values import problem, to_plain
from ..exceptions import ToolHostError
from ..logs import log_tool_exception
from ..runtime._failures import failure_message, script_exc_type

if TYPE_CHECKING:
    from ..tools import Tool, ToolContext

__all__ = ("RetryBudget", "ToolFailure", "ToolOutcome", "call_callback", "run_tool")


class RetryBudget(BaseModel):
    """Retries for a failing tool.

    Attributes:
        max_retries: attempts after the first (so ``max_retries + 1`` in all).
        delay: seconds slept before each retry.
        backoff: factor applied to the delay after each retry (1.0 = flat).
    """

    max_retries: int = Field(default=0, ge=0)
    delay: float = Field(default=0.0, ge=0)
    backoff: float = Field(default=1.0, ge=1.0)


@dataclass
class ToolOutcome:
    """What happened when a tool ran, for ``after_tool_full`` callbacks.

    Attributes:
        tool_name / args: the call.
        success: the tool (not a fallback) returned a value.
        duration: seconds from the first attempt to the last one's end.
        attempts: how many times the tool ran.
        timed_out: the last attempt hit ``tool_timeout``.
        error_message: the last failure's text (None on success).
        error_category: ``"timeout"``, ``"exception"``, ``"circuit_open"`` or None.
    """

    tool_name: str
    args: dict[str, Any]
    success: bool = False
    duration: float = 0.0
    attempts: int = 0
    timed_out: bool = False
    error_message: str | None = None
    error_category: str | None = None


@dataclass
class ToolFailure:
    """A failure raised into the script: ``exc_type(message)``."""

    message: str
    exc_type: str = "RuntimeError"


@dataclass
class CircuitBreaker:
    """Consecutive failures per tool for one invocation; at ``threshold`` the tool is off."""

    threshold: int | None
    failures: dict[str, int] = field(default_factory=dict)

    def is_open(self, name: str) -> bool:
        return self.threshold is not None and self.failures.get(name, 0) >= self.threshold

    def record(self, name: str, success: bool) -> None:
        if self.threshold is None:
            return
        self.failures[name] = 0 if success else self.failures.get(name, 0) + 1


async def call_callback(cb: Callable[..., Any], *args: Any) -> Any:
    """Calls a sync or async callback."""
    result = cb(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def plain(value: Any) -> Any:
    """Tool results as plain data the runtime accepts (``codeact._values.to_plain``:
    pydantic models, dataclasses, dates converted, bytes, tuples and sets kept); a value
    with no plain form becomes its JSON form, its repr where there is none."""
    value = to_plain(value)
    if problem(value, "", lone_surrogates=True) is None:
        return value
    return to_jsonable_python(value, bytes_mode="utf8", fallback=repr)


async def run_tool(
    tool: Tool,
    args: dict[str, Any],
    tool_context: ToolContext,
    *,
    timeout: float | None,
    retry: RetryBudget | None,
    breaker: CircuitBreaker,
    before: Sequence[Callable[..., Any]] = (),
    after: Sequence[Callable[..., Any]] = (),
    after_full: Sequence[Callable[..., Any]] = (),
    on_error: Sequence[Callable[..., Any]] = (),
    plugins: Sequence[Any] = (),
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> tuple[Any, ToolFailure | None, ToolOutcome]:
    """Runs ``tool`` through the pipeline.

    Returns:
        ``(value, None, outcome)`` on success (or a fallback value), else
        ``(None, failure, outcome)``; the failure is raised into the script.
    """
    outcome = ToolOutcome(tool_name=tool.name, args=args)
    if breaker.is_open(tool.name):
        msg = _disabled(tool, breaker)
        outcome.error_message, outcome.error_category = msg, "circuit_open"
        return None, ToolFailure(msg, "RuntimeError"), outcome

    for plugin in plugins:
        try:
            replaced = await call_callback(plugin.before_tool, tool, args, tool_context)
        except Exception as exc:
            return None, ToolFailure(f"plugin {plugin.name} before_tool failed: {exc}", "RuntimeError"), outcome
        if replaced is not None:
            outcome.success = True
            return plain(replaced), None, outcome
    for cb in before:
        try:
            replaced = await call_callback(cb, tool, args, tool_context)
        except Exception as exc:
            return None, ToolFailure(f"before_tool callback failed: {exc}", "RuntimeError"), outcome
        if replaced is not None:
            outcome.success = True
            return plain(replaced), None, outcome

    value, failure = await _attempts(tool, args, tool_context, outcome, timeout=timeout, retry=retry, sleep=sleep)
    breaker.record(tool.name, outcome.success)

    if failure is not None:
        for plugin in plugins:
            try:
                fallback = await call_callback(plugin.on_tool_error, tool, args, tool_context, failure.message)
            except Exception:
                break
            if fallback is not None:
                value, failure = fallback, None
                break
    if failure is not None:
        for cb in on_error:
            try:
                fallback = await call_callback(cb, tool, args, tool_context, failure.message)
            except Exception:
                break
            if fallback is not None:
                value, failure = fallback, None
                break

    tool_context.tool_outcome = outcome
    if failure is None:
        for plugin in plugins:
            try:
                replaced = await call_callback(plugin.after_tool, tool, args, tool_context, value)
            except Exception as exc:
                return None, ToolFailure(f"plugin {plugin.name} after_tool failed: {exc}", "RuntimeError"), outcome
            if replaced is not None:
                value = replaced
    for cb in after:
        try:
            replaced = await call_callback(cb, tool, args, tool_context, value if failure is None else None)
        except Exception as exc:
            return None, ToolFailure(f"after_tool callback failed: {exc}", "RuntimeError"), outcome
        if replaced is not None:
            value, failure = replaced, None
            break
    if after_full:
        seen = value if failure is None else {"error": failure.message}
        for cb in after_full:
            try:
                replaced = await call_callback(cb, tool, args, tool_context, seen, outcome)
            except Exception as exc:
                return None, ToolFailure(f"after_tool_full callback failed: {exc}", "RuntimeError"), outcome
            if replaced is not None:
                value, failure = replaced, None
                break
    if failure is not None:
        return None, failure, outcome
    return plain(value), None, outcome


async def _attempts(
    tool: Tool,
    args: dict[str, Any],
    tool_context: ToolContext | None,
    outcome: ToolOutcome,
    *,
    timeout: float | None,
    retry: RetryBudget | None,
    sleep: Callable[[float], Awaitable[None]],
    call_key: str | None = None,
    session: Any = None,
) -> tuple[Any, ToolFailure | None]:
    """Runs ``tool`` up to ``1 + retry.max_retries`` times until it returns, each attempt
    within ``timeout`` seconds (not enforced on a call that runs inline); fills ``outcome``.
    ``tool_context`` is None only for a ``FunctionTool`` without a context parameter (which
    never reads it); ``call_key`` / ``session`` then name the call in the failure log.
    Returns ``(value, None)`` or ``(None, failure)``; ``ToolHostError`` propagates."""
    attempts = 1 + (retry.max_retries if retry else 0)
    delay = retry.delay if retry else 0.0
    started = time.perf_counter()
    value: Any = None
    failure: ToolFailure | None = None
    for attempt in range(attempts):
        if attempt:
            if delay:
                await sleep(delay)
            delay *= retry.backoff if retry else 1.0
        outcome.attempts = attempt + 1
        scope: anyio.CancelScope | None = None
        try:
            if timeout is None or getattr(tool, "runs_inline", False):
                value = await tool.run(args, tool_context)  # type: ignore[arg-type]
            else:
                with anyio.fail_after(timeout) as scope:
                    value = await tool.run(args, tool_context)  # type: ignore[arg-type]
            failure = None
            outcome.timed_out = False
            break
        except ToolHostError:
            raise  # the host's failure, not the script's: it ends the run
        except (Exception, SystemExit) as exc:
            # SystemExit too: a tool calling sys.exit() must not end the host's run with the
            # turn left running (it would run again at every recovery). KeyboardInterrupt
            # and cancellation propagate.
            if isinstance(exc, TimeoutError) and scope is not None and scope.cancel_called:
                failure = ToolFailure(f"tool {tool.name!r} timed out after {timeout:g} s", "TimeoutError")
                outcome.timed_out, outcome.error_category = True, "timeout"
            else:  # the tool's own exception, a TimeoutError of its own included
                failure = failure_of(tool, tool_context, exc, call_key, session)
                outcome.timed_out, outcome.error_category = False, "exception"
    outcome.duration = time.perf_counter() - started
    outcome.success = failure is None
    if failure is not None:
        outcome.error_message = failure.message
    else:
        outcome.error_category = None

    return value, failure


async def run_bare_tool(
    tool: Tool,
    args: dict[str, Any],
    call_key: str,
    session: Any,
    *,
    timeout: float | None,
    retry: RetryBudget | None,
    breaker: CircuitBreaker,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> tuple[Any, ToolFailure | None]:
    """``run_tool`` for a call no callback, plugin or context parameter can see: a
    ``FunctionTool`` whose function takes no ``ToolContext``, on an agent with no tool
    callbacks and no plugins. The same timeout, retries and circuit breaker, without a
    ``ToolContext`` built per call; the value is already plain (``FunctionTool.run``
    converts and checks it). Returns ``(value, None)`` or ``(None, failure)``."""
    outcome = ToolOutcome(tool_name=tool.name, args=args)
    if breaker.is_open(tool.name):
        return None, ToolFailure(_disabled(tool, breaker), "RuntimeError")
    value, failure = await _attempts(
        tool, args, None, outcome, timeout=timeout, retry=retry, sleep=sleep, call_key=call_key, session=session
    )
    breaker.record(tool.name, outcome.success)
    return value, failure


def _disabled(tool: Tool, breaker: CircuitBreaker) -> str:
    """The script's message for a call refused by the open circuit breaker."""
    return f"tool {tool.name!r} is temporarily disabled after {breaker.threshold} consecutive failures"


def failure_of(
    tool: Tool, tool_context: ToolContext | None, exc: BaseException, call_key: str | None = None, session: Any = None
) -> ToolFailure:
    """The failure the script gets for a tool's exception; an exception whose text cannot be
    read (its ``__str__`` raises) or that is ``SystemExit`` still becomes a failure."""
    try:
        if tool_context is not None:
            session, call_key = getattr(tool_context, "session", None), getattr(tool_context, "function_call_id", None)
        log_tool_exception(
            tool.name,
            exc,
            call_key=call_key,
            session_id=getattr(session, "id", None),
            level=getattr(exc, "log_level", logging.WARNING),  # INFO: a failure the tool's framework reported
        )
    except Exception:
        pass
    if isinstance(exc, SystemExit):
        return ToolFailure(f"tool {tool.name!r} raised SystemExit({exc.code!r}); the host did not exit", "RuntimeError")
    try:
        exc_type = script_exc_type(exc)
        return ToolFailure(failure_message(exc, exc_type), exc_type)
    except Exception as inner:
        return ToolFailure(
            f"tool {tool.name!r} raised {type(exc).__name__}, whose message cannot be read "
            f"({type(inner).__name__} in its __str__)",
            "RuntimeError",
        )


def merge_actions(target: Any, source: Any) -> None:
    """Merges a tool's ``EventActions`` data deltas into the pending accumulator."""
    target.state_delta.update(source.state_delta)
    target.artifact_delta.update(source.artifact_delta)
    if source.route is not None:  # the last tool to set a route wins, as ADK's merge does
        target.route = source.route


def terminal_signal(actions: Any) -> bool:
    return bool(actions.escalate or actions.skip_summarization or actions.transfer_to_agent)
