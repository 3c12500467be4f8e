"""Eager start (``RunConfig(eager=True)``, issue 52): the script starts while the model is
still writing it, and only read-only tools run before the reply is stored (SPEC §4, §5;
docs/events.md "Eager start").

The design is *speculate, then replay*. As the reply streams, ``complete_statements`` finds
the complete top-level statements of the first Python fence outside any ``<think>`` block (a
simple statement once its line has ended, a compound one once the next top-level statement
begins, every one once the fence closes). Each
time that prefix grows, ``EagerRun`` runs it as a speculative script on the agent's runtime,
after the same checks a script gets (the subset check and its CPython-order rewrite in
``script_hint`` / ``start``, the tool type check): each call of the prefix to a read-only tool
that needs no decision runs at once through ``Run.execute`` (the plugins, ``before_tool``,
the retries and ``after_tool`` like any call; a gated tool's per-call confirmation check
first) and its outcome is kept by position, tool name and argument digest; the next run of a
longer prefix is answered from those outcomes, so no call runs twice. The speculative run
stops for good at the first call it may not make early: a tool with effects, a call that
needs a decision (confirmation, a long-running tool), an unknown tool, a gather, or a call
past ``max_tool_calls``. Its printed output is never shown or stored.

When the reply is complete and stored, the script runs from its start on the driver as any
script does; the driver answers its read-only calls, in order, from the kept outcomes while
the position, tool and digest match (``serve``), and the outcome is then made durable exactly
as if the call had just run (held, committed with the next durable write: SPEC §5). Nothing
with effects can have run early, so the durability contract does not move. The kept outcomes
are thrown away (and those read-only calls run again) when the stored reply differs from the
streamed text (an ``after_model`` callback rewrote it) or its script does not begin with
exactly the statements that ran (a second fence, a ``<think>`` block, an edited line).

Eager start is off (the reply streams, the script runs after it) for a runtime with a
read-write mount (the speculative run has no file layer: its writes would reach the host) and with
``persist_namespace`` (the speculative script would not see the namespace).
"""

from __future__ import annotations

import ast
import asyncio
import contextvars
import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from ..events import Event
from ..logs import agent_logger
from ..runtime import Call, Complete, Raised, ResumeError, ResumeValue, bind_call_args
from ..runtime._precheck import script_hint
from ..runtime._stepper import run_step
from ..turns._codec import plain_args_digest, value_problem
from ._dispatch import ToolFailure, terminal_signal
from ._driver import _args_digest_or_error, escape_surrogates
from ._extract import _normalise, _split_thinking, extract_code
from ._files import layered_mounts, overlay_mounts
from ._model_call import stream_model
from ._run import NO_ACTIONS, SCRIPT_NAME
from ._toolcheck import tool_call_problem

if TYPE_CHECKING:
    from ..runtime import PendingCall
    from ._agent import CodeActAgent
    from ._run import Run

__all__ = ("EagerRun", "begins_with", "complete_statements", "stream_reply")

_OPEN = re.compile(r"(?m)^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[A-Za-z0-9_+#.-]*)[^\n`]*\n")
_PYTHON = {"python", "py", "python3", "py3", "ipython", "ipython3", ""}
# a top-level line that continues the statement before it, never starts one
_CONTINUES = re.compile(r"(?:else|elif|except|finally|case)\b|[)\]}]")
_FLAGS = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


_COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    getattr(ast, "TryStar", ast.Try),  # Python 3.11+
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Match,
)
"""Statements whose body (or an ``else``/``except`` clause) may go on below their last line."""


def _tree(source: str) -> ast.Module | None:
    try:
        tree: ast.Module = compile(source, "<eager>", "exec", _FLAGS)
    except (SyntaxError, ValueError):
        return None
    return tree


def _parses(source: str) -> bool:
    return _tree(source) is not None


def complete_statements(text: str) -> tuple[str, bool] | None:
    """The complete top-level statements of the first Python fence of the reply ``text``
    streamed so far, outside any ``<think>`` block, and whether that fence has closed; None
    when there is no such fence yet (or a ``<think>`` block is still open, or the first fence
    is in another language).

    A simple statement (an assignment, a call, ...) is complete once its last line has ended
    and everything up to it parses: no line can continue it then. A compound one (``for``,
    ``if``, ``try``, ``def``, ...) is complete once the next top-level statement has begun (a
    line at column 0 that does not continue it: not ``else``, ``except``, a closing bracket,
    ...) and everything before that line parses. Everything is complete once the fence has
    closed. The text returned holds whole lines (each ending in a newline), "" when no
    statement is complete yet."""
    thinking = _split_thinking(_normalise(text))
    if thinking.unclosed:
        return None
    visible = thinking.outside
    opener = _OPEN.search(visible)
    if opener is None or opener.group("lang").lower() not in _PYTHON:
        return None
    body = visible[opener.end() :]
    closer = re.search(rf"(?m)^[ \t]*{re.escape(opener.group('fence'))}[ \t]*$", body)
    if closer is not None:
        code = body[: closer.start()]
        return (code, True) if _parses(code) else ("", True)
    cut = body.rfind("\n")
    whole = body[: cut + 1]
    lines = whole.splitlines(keepends=True)
    last = len(lines) - 1  # the last line a prefix may end before
    try:
        tree = compile(whole, "<eager>", "exec", _FLAGS)
        if tree.body and not isinstance(tree.body[-1], _COMPOUND):
            return whole, False  # its last statement is a simple one whose line has ended
    except SyntaxError as exc:
        # a bracket never closed or a string never ended on line n: every prefix holding line
        # n fails too (the text before it tokenizes alike), so none is compiled (a long string
        # at column 0, a SQL query, would make each chunk compile every line's prefix)
        if exc.lineno and ("never closed" in exc.msg or "unterminated triple-quoted" in exc.msg):
            last = min(last, exc.lineno - 1)
    except ValueError:
        pass
    for i in range(last, 0, -1):
        line = lines[i]
        if not line.strip() or line[0] in " \t#" or _CONTINUES.match(line):
            continue
        prefix = "".join(lines[:i])
        if prefix.strip() and _parses(prefix):
            return prefix, False
    return "", False


def _statement_ends(source: str) -> set[int]:
    """The line numbers (1-based) after which a top-level statement of ``source`` ends and
    no statement goes on (0 included); empty when ``source`` does not parse."""
    try:
        tree = compile(source, "<eager>", "exec", _FLAGS)
    except (SyntaxError, ValueError):
        return set()
    ends = {0}
    for node in tree.body:
        ends.add(node.end_lineno or node.lineno)
    return ends


def begins_with(script: str, prefix: str) -> bool:
    """Whether ``script`` begins with exactly the statements of ``prefix``: the same lines
    (trailing spaces aside), ending where a top-level statement of ``script`` ends."""
    want = [line.rstrip() for line in prefix.splitlines()]
    while want and not want[-1]:
        want.pop()
    if not want:
        return True
    have = [line.rstrip() for line in script.splitlines()]
    return have[: len(want)] == want and len(want) in _statement_ends(script)


@dataclass(slots=True)
class _Kept:
    """One early call's outcome, by its position in the script's calls."""

    tool: str
    digest: str
    value: Any
    failure: ToolFailure | None
    servable: bool  # False: it changed state or ended the run (its next run is the real one)


class EagerRun:
    """One model call's eager start (see the module docstring): ``feed`` it the streamed
    text, run ``work`` beside the stream, ``finish`` it with the stored reply; the driver then
    asks ``serve`` for each read-only call of the turn.

    Args:
        agent: the agent (its runtime and options).
        run: the run (its tools, plugins, callbacks; ``execute`` runs the early calls).
    """

    def __init__(self, agent: CodeActAgent, run: Run) -> None:
        self.agent = agent
        self.run = run
        self.turn = run.turn_id
        self.text = ""  # the streamed reply so far
        self.kept: list[_Kept] = []
        self.ran = ""  # the longest prefix that ran to its end or to a call it may not make
        self._prefix = ""
        self._wake = anyio.Event()
        self._closed = False
        self._stopped = False  # a call it may not make, or a failed check: no more speculation
        self._served = 0

    # ------------------------------------------------------------------ the stream side

    def feed(self, text: str) -> None:
        """Takes a piece of the streamed reply; wakes ``work`` when more statements are complete."""
        self.text += text
        if self._stopped or "\n" not in text:
            return
        found = complete_statements(self.text)
        if found is not None and len(found[0]) > len(self._prefix):
            self._prefix = found[0]
            self._wake.set()

    def close(self) -> None:
        """The stream ended: ``work`` ends after the call it is making (no new call starts)."""
        self._closed = True
        self._wake.set()

    def finish(self, reply: str) -> bool:
        """Whether the kept outcomes may answer the script of the stored ``reply``: the
        reply is the streamed text unchanged and its script begins with the statements that
        ran. Otherwise they are thrown away (those calls run again). The speculative run's
        printed output is never kept."""
        script = extract_code(reply)
        streamed = self.text if self.text.isascii() else escape_surrogates(self.text)
        keep = bool(self.kept) and reply == streamed and script is not None and begins_with(script, self.ran)
        if not keep:
            self.kept.clear()
        return keep

    # ------------------------------------------------------------------ the speculative run

    async def work(self) -> None:
        """Runs each new complete prefix until the stream ends or a call stops it. Never
        raises (a failure is logged and ends the speculation)."""
        try:
            while not self._closed and not self._stopped:
                await self._wake.wait()
                self._wake = anyio.Event()
                prefix = self._prefix
                if self._closed or not prefix or prefix == self.ran:
                    continue
                if not await self._speculate(prefix):
                    self._stopped = True
        except Exception:
            self._stopped = True
            _log.warning("eager start stopped (the script runs after the reply)", exc_info=True)

    async def _speculate(self, prefix: str) -> bool:
        """Runs ``prefix`` from its start: True when it ran to its end, False when it stopped
        at a call it may not make early or failed a check."""
        agent, run = self.agent, self.run
        runtime = agent.runtime
        if script_hint(prefix, runtime, run.roster) is not None:
            return False
        if await tool_call_problem(run, runtime, prefix, persist_namespace=False, uses_session=False) is not None:
            return False
        step: Any = await run_step(runtime.start, prefix, SCRIPT_NAME)
        pos = 0
        while True:
            if isinstance(step, (Complete, Raised)):
                self.ran = prefix
                return True
            if type(step) is not Call:  # a gather: the driver runs it
                self.ran = prefix
                return False
            outcome = await self._call(step.call, pos)
            if outcome is None:
                self.ran = prefix
                return False
            pos += 1
            step = await run_step(step.call.resume, outcome)

    async def _call(self, call: PendingCall, pos: int) -> ResumeValue | ResumeError | None:
        """The outcome of the prefix's call at ``pos`` (kept, or run now), or None when it may
        not run before the reply is stored."""
        agent, run = self.agent, self.run
        tool = run.tools.get(call.name)
        if tool is None or not getattr(tool, "read_only", False) or tool.is_long_running:
            return None
        if agent.max_tool_calls is not None and pos >= agent.max_tool_calls:
            return None
        try:
            args = bind_call_args(tool, call.positional_args, call.keyword_args)
        except TypeError:
            return None
        digest = plain_args_digest(args)
        if digest is None:
            checked = _args_digest_or_error(tool, args)
            if isinstance(checked, ResumeError):
                return None
            digest = checked
        if pos < len(self.kept):
            kept = self.kept[pos]
            if kept.tool != tool.name or kept.digest != digest or not kept.servable:
                return None  # the longer prefix calls differently (a clock or random value)
            return _outcome(kept.value, kept.failure)
        if self._closed:
            return None
        if run.needs_confirmation(tool):  # the confirmation check, as the driver's _gated
            if run.gates_all(tool):
                return None
            try:
                if await tool.confirmation_required(args):
                    return None
            except Exception:
                return None
        # not merged into the run's pending actions: a call whose actions change anything
        # is not served, and the stored script's run makes it again (the reply first)
        value, failure, actions = await run.execute(tool, args, f"{self.turn}:{pos}", merge=False)
        servable = actions is NO_ACTIONS or not (
            terminal_signal(actions) or actions.state_delta or actions.artifact_delta or actions.route is not None
        )
        self.kept.append(_Kept(tool.name, digest, value, failure, servable))
        return _outcome(value, failure) if servable else None

    # ------------------------------------------------------------------ the driver side

    def serve(self, turn: str, inv: Any) -> tuple[Any, ToolFailure | None] | None:
        """The kept ``(value, failure)`` of the turn's read-only call ``inv`` (the driver's
        ``_Invoke``) when it is the next kept one and names the same tool and argument
        digest, else None (and, on a mismatch, nothing more is served)."""
        pos = inv.pos
        if turn != self.turn or pos != self._served or pos >= len(self.kept):
            return None
        kept = self.kept[pos]
        if kept.tool != inv.tool.name or kept.digest != inv.digest or not kept.servable:
            self.kept.clear()
            return None
        self._served += 1
        self.run.tools_ran.append(kept.tool)
        return kept.value, kept.failure


class _Beside:
    """``fn()`` run as a task beside the caller, outside the caller's cancel scopes (an
    asyncio task, or a trio system task with the caller's context variables): ``cancel``
    stops it, ``done`` is set once it has ended. ``fn`` must not raise (``EagerRun.work``)."""

    def __init__(self, fn: Callable[[], Awaitable[None]]) -> None:
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no asyncio loop: anyio's other backend, trio
            import trio

            trio.lowlevel.spawn_system_task(self._main, fn, context=contextvars.copy_context())
        else:
            self._task = loop.create_task(self._main(fn))  # a reference kept

    async def _main(self, fn: Callable[[], Awaitable[None]]) -> None:
        try:
            with self.scope:
                await fn()
        finally:
            self.done.set()

    def cancel(self) -> None:
        self.scope.cancel()


def _outcome(value: Any, failure: ToolFailure | None) -> ResumeValue | ResumeError:
    if failure is not None:
        return ResumeError(failure.message, failure.exc_type)
    problem = value_problem(value, "the result")
    return ResumeError(problem, "ValueError") if problem is not None else ResumeValue(value)


def eager_possible(agent: CodeActAgent) -> bool:
    """Whether eager start can run for ``agent`` (see the module docstring)."""
    return not agent.persist_namespace and not layered_mounts(agent.runtime) and not overlay_mounts(agent.runtime)


async def stream_reply(agent: CodeActAgent, run: Run) -> AsyncGenerator[Event | str, None]:
    """The model call of ``RunConfig(streaming=True)`` and/or ``eager=True``: as
    ``stream_model`` (partial events only under ``streaming``, then the reply's text), and
    under ``eager`` the speculative run beside the stream (``run.eager`` is then the
    ``EagerRun`` whose kept outcomes the driver may serve, or None)."""
    rc = run.ctx.run_config
    run.eager = None
    if not rc.eager or not eager_possible(agent):
        async with aclosing(stream_model(agent, run, show=rc.streaming)) as streamed:
            async for piece in streamed:
                yield piece
        return
    eager = EagerRun(agent, run)
    reply: str | None = None
    # The speculative run is a task of its own, not a task group's: a task group would span
    # the yields below, and a caller that stops reading (``break``) leaves this generator to
    # be closed in another task, where leaving the group's cancel scope fails (asyncio
    # cancelled the caller's task; trio stopped with TrioInternalError).
    beside = _Beside(eager.work)
    try:
        async with aclosing(stream_model(agent, run, show=rc.streaming, on_text=eager.feed)) as streamed:
            async for piece in streamed:
                if isinstance(piece, str):
                    reply = piece
                else:
                    yield piece
        eager.close()  # the call under way ends, no new one starts
        await beside.done.wait()
    except BaseException:  # the stream broke off (or the caller left): the early calls stop
        beside.cancel()
        with anyio.CancelScope(shield=True):
            await beside.done.wait()
        raise
    assert reply is not None
    if eager.finish(reply):
        run.eager = eager
    yield reply


_log = agent_logger
