"""One call runs a script to completion: ``MontyRuntime.run`` and ``MontyRuntime.arun``.

The step-by-step seam (``start`` / ``Call`` / ``resume``) is what the agent loop uses; this
module wraps it for everyone else: give the code and a mapping of tool names to plain
callables, get the script's value and its printed output back, or a typed exception.
It is the ``run_python`` tool any agent framework can wrap.

Tool calls are served here, between interpreter steps (never from inside the
interpreter): a script's ``call_tool("name", {"a": 1})`` (``call_tool`` style) or
``name(1, b=2)`` (``functions`` style) calls ``tools["name"](**args)`` /
``tools["name"](1, b=2)`` on the host. An exception raised by a tool is logged on the
``codeact.tools`` logger with its traceback and raised into the script the way the agent
loop raises it (``runtime._failures``): as the nearest builtin type every runtime has
(``ConnectionError("refused")`` -> ``OSError("ConnectionError: refused")``; a type with no
such base -> ``RuntimeError``), so the script can catch it; only the message crosses.
Before anything runs, a script the agent loop would refuse up front (``await call_tool(...)``
on a runtime without ``supports_await``, importing a tool; ``runtime._precheck.script_hint``)
raises ``ScriptError`` with that advice, so no tool runs for it.

Tool calls the script awaits together (``await asyncio.gather(call_tool(...), ...)``, a
``Gather`` step) run concurrently: async tools as tasks of one task group, sync tools each on
a worker thread (also in ``run``); their results are resumed together. A tool raising
``SuspendScript`` inside a gather cannot pause the script: the script gets a ``RuntimeError``
for that call.

``arun_script`` / ``aresume_script`` take ``on_output``: an async callback given what the script
printed (stdout, stderr) at each step boundary, before the host serves the tool call there (and
once more at the end), so a host can show output while the script runs (the pydantic-ai
``CodeActToolset`` emits it as events). Output printed inside one interpreter advance that calls
no tool reaches it at the next boundary.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import inspect
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .._values import to_plain
from ..exceptions import (
    ScriptError,
    ScriptSuspended,
    SnapshotError,
    SuspendScript,
    ToolCallLimitError,
    ToolHostError,
)
from ..logs import log_tool_exception
from ._check import explain_failure
from ._failures import failure_message, script_exc_type
from ._precheck import script_hint
from ._seam import Call, Complete, Gather, Raised, ResumeError, ResumeValue, RunStep

if TYPE_CHECKING:
    from .monty import MontyRuntime

__all__ = (
    "RunResult",
    "ScriptError",
    "ScriptSuspended",
    "SuspendScript",
    "ToolCallLimitError",
    "aresume_script",
    "arun_script",
    "run_script",
)


INPUTS_TOOL = "__codeact_inputs__"
"""Reserved tool name the input prelude calls to fetch ``inputs``."""
_INPUTS_VAR = "__codeact_inputs"
_INLINE_WAIT = 0.002
"""Seconds an async run blocks its event loop waiting for a short advance before it
hands the wait to a worker thread."""

INLINE_STEP_SECONDS = 0.005
"""With ``inline_steps``, resumes run on the calling thread while each takes under this."""

DEFAULT_MAX_TOOL_CALLS = 10_000
"""Tool calls one ``run`` serves before it stops the script with ``ToolCallLimitError``."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a finished script gave back.

    Attributes:
        value: the value of the script's last expression (plain data: None, bool, int,
            float, str, bytes, list, tuple, dict, set, frozenset), or the argument of ``final_answer(x)``
            in the ``functions`` style.
        stdout: everything the script printed, in order.
        tool_calls: how many tool calls the host served.
        stderr: everything the script wrote to stderr (``print(..., file=sys.stderr)``), in
            order; ``max_stdout`` bounds both streams together.
    """

    value: Any
    stdout: str = ""
    tool_calls: int = 0
    stderr: str = ""


def _prelude(inputs: Mapping[str, Any]) -> str:
    """One line binding each input as a global, fetched through the reserved tool call."""
    for name in inputs:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("__codeact"):
            raise ValueError(f"input names must be Python identifiers, not {name!r}")
    binds = "; ".join(f"{n} = {_INPUTS_VAR}[{n!r}]" for n in inputs)
    return f'{_INPUTS_VAR} = call_tool("{INPUTS_TOOL}"); {binds}; {_INPUTS_VAR} = None\n'


def _shift_lines(message: str, script_name: str, offset: int) -> str:
    """Renumbers ``File "<script_name>", line N`` and subset-check ``- line N`` references
    after a prelude of ``offset`` lines."""
    if not offset:
        return message
    pattern = re.compile(r'(File "' + re.escape(script_name) + r'", line |^- line )(\d+)', re.MULTILINE)
    return pattern.sub(lambda m: f"{m.group(1)}{max(1, int(m.group(2)) - offset)}", message)


@dataclass(slots=True)
class _Drive:
    """State of one run: the script's tools, the output so far, the failing tool exception."""

    runtime: MontyRuntime
    tools: Mapping[str, Callable[..., Any]]
    inputs: Mapping[str, Any]
    script_name: str
    max_tool_calls: int | None
    offset: int = 0
    source: str = ""  # the script as given (without the prelude)
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    tool_calls: int = 0
    last_error: BaseException | None = None
    on_output: Callable[[str, str], Awaitable[None]] | None = None

    async def report(self, step: RunStep) -> None:
        """Hands what ``step`` printed to ``on_output`` (when there is one and it printed)."""
        if self.on_output is not None and (step.stdout or step.stderr):
            await self.on_output(step.stdout, step.stderr)

    def code(self, code: str) -> str:
        """``code`` with the inputs prelude; raises ``ScriptError`` before anything runs for
        the mistakes the agent loop refuses up front (``runtime._precheck.script_hint``: ``await
        call_tool(...)`` on a runtime without ``supports_await``, importing a tool)."""
        hint = script_hint(code, self.runtime, sorted(self.tools))
        if hint is not None:
            raise ScriptError(hint)
        self.source = code
        if not self.inputs:
            return code
        self.offset = 1
        return _prelude(self.inputs) + code

    def output(self, step: RunStep) -> None:
        """Keeps what ``step`` printed, on each stream."""
        self.stdout.append(step.stdout)
        self.stderr.append(step.stderr)

    def finish(self, step: Complete | Raised) -> RunResult:
        self.output(step)
        out, err_out = "".join(self.stdout), "".join(self.stderr)
        if isinstance(step, Complete):
            return RunResult(step.value, out, self.tool_calls, err_out)
        message = _shift_lines(step.message, self.script_name, self.offset)
        if self.runtime.check_scripts:  # what Monty refused itself before running: add the fix
            fix = explain_failure(self.source, step.message, functions_style=self.runtime.tool_style == "functions")
            message = f"{message}\n{fix}" if fix else message
        err = ScriptError(
            message,
            stdout=out,
            tool_calls=self.tool_calls,
            stderr=err_out,
        )
        raise err from self.last_error

    def lookup(self, step: Call) -> tuple[Callable[..., Any] | None, Any]:
        """The callable for ``step`` and, when the call is answered without one, its outcome
        (``ResumeValue``/``ResumeError``, or a ``RunResult`` for ``final_answer``)."""
        self.output(step)
        return self.lookup_call(step.call)

    def gather_jobs(self, step: Gather) -> tuple[list[tuple[Any, Callable[..., Any]]], dict[int, Any]]:
        """The calls of ``step`` to run (call, callable) and the outcomes known without
        running anything (call id -> outcome, or a ``RunResult`` for ``final_answer``)."""
        self.output(step)
        jobs: list[tuple[Any, Callable[..., Any]]] = []
        known: dict[int, Any] = {}
        for call in step.calls:
            fn, outcome = self.lookup_call(call)
            if fn is None:
                known[call.call_id] = outcome
            else:
                jobs.append((call, fn))
        return jobs, known

    def lookup_call(self, call: Any) -> tuple[Callable[..., Any] | None, Any]:
        name = call.name
        if name == INPUTS_TOOL and self.inputs:
            return None, ResumeValue({k: to_plain(v) for k, v in self.inputs.items()})
        self.tool_calls += 1
        self.last_error = None
        if self.max_tool_calls is not None and self.tool_calls > self.max_tool_calls:
            raise ToolCallLimitError(
                f"the script made more than {self.max_tool_calls} tool calls",
                stdout="".join(self.stdout),
                tool_calls=self.tool_calls - 1,
                stderr="".join(self.stderr),
            )
        fn = self.tools.get(name)
        if fn is None:
            if name == "final_answer" and self.runtime.tool_style == "functions":
                from .monty import final_answer_step

                answer = final_answer_step(call.positional_args, call.keyword_args)
                if isinstance(answer, Complete):
                    value = answer.value["value"]
                    return None, RunResult(value, "".join(self.stdout), self.tool_calls, "".join(self.stderr))
                return None, answer
            known = ", ".join(sorted(self.tools)) or "none"
            return None, ResumeError(f"unknown tool {name!r} (available: {known})", "NameError")
        return fn, None

    def suspended(self, call: Any, pause: SuspendScript) -> ScriptSuspended:
        return ScriptSuspended(
            snapshot=call.dump(),
            tool=call.name,
            tool_args=dict(call.keyword_args),
            positional=tuple(call.positional_args),
            payload=pause.payload,
            stdout="".join(self.stdout),
            tool_calls=self.tool_calls,
            stderr="".join(self.stderr),
        )

    def failed(self, name: str, exc: BaseException) -> ResumeError:
        log_tool_exception(name, exc, level=getattr(exc, "log_level", logging.WARNING))
        self.last_error = exc
        exc_type = script_exc_type(exc)
        return ResumeError(failure_message(exc, exc_type), exc_type)


def run_script(
    runtime: MontyRuntime,
    code: str,
    *,
    tools: Mapping[str, Callable[..., Any]] | None = None,
    inputs: Mapping[str, Any] | None = None,
    script_name: str = "main.py",
    max_tool_calls: int | None = DEFAULT_MAX_TOOL_CALLS,
) -> RunResult:
    """Runs ``code`` on ``runtime`` to completion, serving its tool calls on this thread.

    See ``MontyRuntime.run``. When a tool is async (a coroutine function, or it returns an
    awaitable), the whole run goes through ``arun_script`` on a fresh event loop
    (``anyio.run``), so this cannot then be called from inside a running event loop.
    """
    tools = dict(tools or {})
    if any(_is_async(f) for f in tools.values()):
        if _in_event_loop():
            raise RuntimeError(
                "MontyRuntime.run() with an async tool cannot be called from inside a running event loop; "
                "use `await runtime.arun(...)` there"
            )
        return anyio.run(
            lambda: arun_script(
                runtime,
                code,
                tools=tools,
                inputs=inputs,
                script_name=script_name,
                max_tool_calls=max_tool_calls,
                sync_tools_in_thread=False,
            )
        )
    drive = _Drive(runtime, tools, dict(inputs or {}), script_name, max_tool_calls)
    step: RunStep = runtime.start(drive.code(code), script_name)
    while isinstance(step, (Call, Gather)):
        if isinstance(step, Gather):
            jobs, outcomes = drive.gather_jobs(step)
            final = _final(outcomes)
            if final is not None:
                return final
            if len(jobs) == 1:
                call, job = jobs[0]
                outcomes[call.call_id] = _call_sync(drive, job, call)
            elif jobs:
                with concurrent.futures.ThreadPoolExecutor(len(jobs), thread_name_prefix="codeact-tool") as pool:
                    running = {call.call_id: pool.submit(_call_sync, drive, fn, call) for call, fn in jobs}
                    outcomes.update((call_id, future.result()) for call_id, future in running.items())
            step = step.resume(dict(sorted(outcomes.items())))
            continue
        fn, outcome = drive.lookup(step)
        if isinstance(outcome, RunResult):
            return outcome
        if fn is not None:
            try:
                value = fn(*step.call.positional_args, **step.call.keyword_args)
                if inspect.isawaitable(value):
                    value = anyio.run(_awaited, value)
                outcome = ResumeValue(to_plain(value))
            except SuspendScript as pause:
                raise drive.suspended(step.call, pause) from None
            except Exception as exc:
                outcome = drive.failed(step.call.name, exc)
        step = step.call.resume(outcome)
    return drive.finish(step)


_GATHER_SUSPEND = (
    "this tool asked to pause the script (SuspendScript), which a call awaited in asyncio.gather cannot do; "
    "call it on its own, without gather"
)


def _final(outcomes: dict[int, Any]) -> RunResult | None:
    """The ``final_answer`` result among a gather's known outcomes, if any."""
    return next((o for o in outcomes.values() if isinstance(o, RunResult)), None)


def _call_sync(drive: _Drive, fn: Callable[..., Any], call: Any) -> ResumeValue | ResumeError:
    """One call of a gather in ``run``: on the caller's thread or a pool thread."""
    try:
        value = fn(*call.positional_args, **call.keyword_args)
        if inspect.isawaitable(value):
            value = anyio.run(_awaited, value)
        return ResumeValue(to_plain(value))
    except SuspendScript:
        return ResumeError(_GATHER_SUSPEND, "RuntimeError")
    except Exception as exc:
        return drive.failed(call.name, exc)


async def _serve_into(
    outcomes: dict[int, Any], drive: _Drive, fn: Callable[..., Any], call: Any, sync_in_thread: bool
) -> None:
    try:
        outcome = await _serve(drive, fn, call.name, call.positional_args, call.keyword_args, sync_in_thread)
    except SuspendScript:
        outcome = ResumeError(_GATHER_SUSPEND, "RuntimeError")
    outcomes[call.call_id] = outcome


def _boxed(fn: Callable[..., Any], positional: tuple[Any, ...], keywords: dict[str, Any]) -> tuple[Any]:
    return (fn(*positional, **keywords),)


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _in_event_loop() -> bool:
    """Whether this thread is running an asyncio or trio event loop."""
    try:
        anyio.get_current_task()
    except RuntimeError:
        return False
    return True


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


async def _advance(ticket: Any) -> RunStep:
    if not ticket.wait(_INLINE_WAIT):
        await anyio.to_thread.run_sync(ticket.wait, None, abandon_on_cancel=True)
    step: RunStep = ticket.result()
    return step


async def _serve(
    drive: _Drive,
    fn: Callable[..., Any],
    name: str,
    positional: tuple[Any, ...],
    keywords: dict[str, Any],
    sync_in_thread: bool,
) -> ResumeValue | ResumeError:
    """Calls one tool and turns its result or exception into the outcome the script gets."""
    try:
        if _is_async(fn) or not sync_in_thread:
            value = fn(*positional, **keywords)
        else:
            # boxed: a sync callable may return an awaitable, which trio refuses from a thread
            (value,) = await anyio.to_thread.run_sync(functools.partial(_boxed, fn, positional, keywords))
        if inspect.isawaitable(value):
            value = await value
        return ResumeValue(to_plain(value))
    except (SuspendScript, ToolHostError):
        raise
    except Exception as exc:
        return drive.failed(name, exc)


async def _drive_async(drive: _Drive, step: RunStep, sync_in_thread: bool, inline_steps: bool = False) -> RunResult:
    inline = inline_steps
    while isinstance(step, (Call, Gather)):
        await drive.report(step)
        if isinstance(step, Gather):
            jobs, outcomes = drive.gather_jobs(step)
            final = _final(outcomes)
            if final is not None:
                return final
            async with anyio.create_task_group() as tg:
                for gathered, job in jobs:
                    # sync tools on worker threads, so the calls of a gather overlap
                    tg.start_soon(_serve_into, outcomes, drive, job, gathered, True)
            outcomes = dict(sorted(outcomes.items()))  # settled in call order, whichever finished first
            step = await _advance(step.resume_async(outcomes))
            continue
        fn, outcome = drive.lookup(step)
        if isinstance(outcome, RunResult):
            return outcome
        call = step.call
        if fn is not None:
            try:
                outcome = await _serve(drive, fn, call.name, call.positional_args, call.keyword_args, sync_in_thread)
            except SuspendScript as pause:
                raise drive.suspended(call, pause) from None
        if inline:
            started = time.perf_counter()
            step = call.resume(outcome)
            # one slow advance and the rest of the run goes back to the worker threads
            inline = time.perf_counter() - started < INLINE_STEP_SECONDS
        else:
            step = await _advance(call.resume_async(outcome))
    await drive.report(step)
    return drive.finish(step)


async def arun_script(
    runtime: MontyRuntime,
    code: str,
    *,
    tools: Mapping[str, Callable[..., Any]] | None = None,
    inputs: Mapping[str, Any] | None = None,
    script_name: str = "main.py",
    max_tool_calls: int | None = DEFAULT_MAX_TOOL_CALLS,
    sync_tools_in_thread: bool = True,
    inline_steps: bool = False,
    on_output: Callable[[str, str], Awaitable[None]] | None = None,
) -> RunResult:
    """Async twin of ``run_script`` (asyncio or trio): interpreter advances run on native
    worker threads, so the event loop stays free. See ``MontyRuntime.arun``.

    ``inline_steps=True`` trades some of that for speed: after the first advance, each resume
    after a tool call runs on the calling thread (no thread hand-off, which costs tens to
    hundreds of microseconds on a busy machine) for as long as every such advance takes under
    ``INLINE_STEP_SECONDS``; the first slower one sends the rest of the run back to the worker
    threads. So the event loop is held at most for one advance longer than that bound (and at
    most ``max_duration`` seconds), right after a tool call.

    ``on_output(stdout, stderr)`` is awaited with what the script printed since the previous
    step boundary, at each boundary where it printed something: before the tool call there is
    served, and at the end (before the result is returned or ``ScriptError`` raised). The
    ``RunResult`` still holds all of it. An exception it raises ends the run (the script is
    dropped where it stands)."""
    drive = _Drive(runtime, dict(tools or {}), dict(inputs or {}), script_name, max_tool_calls, on_output=on_output)
    step = await _advance(runtime.start_async(drive.code(code), script_name))
    return await _drive_async(drive, step, sync_tools_in_thread, inline_steps)


async def aresume_script(
    runtime: MontyRuntime,
    suspended: ScriptSuspended,
    *,
    tools: Mapping[str, Callable[..., Any]] | None = None,
    outcome: ResumeValue | ResumeError | None = None,
    script_name: str = "main.py",
    max_tool_calls: int | None = DEFAULT_MAX_TOOL_CALLS,
    sync_tools_in_thread: bool = True,
    inline_steps: bool = False,
    on_output: Callable[[str, str], Awaitable[None]] | None = None,
) -> RunResult:
    """Continues a script that a tool paused (``ScriptSuspended``), possibly in another process.

    Args:
        runtime: a runtime configured like the one that paused it (same ``snapshot_key``).
        suspended: the exception ``arun`` raised, or one rebuilt with ``ScriptSuspended.from_dict``.
        tools: the tools; the paused call is made again with them (the tool now decides
            differently, e.g. because a human approved), unless ``outcome`` is given.
        outcome: answer the paused call with this instead of calling the tool.
        on_output: as in ``arun_script``, for what is printed after the pause.

    Returns / raises: as ``arun``; the returned ``stdout`` includes what was printed before
    the pause, and ``tool_calls`` counts the calls before it too.

    Raises:
        SnapshotError: the snapshot fails its integrity check or signature, or the call
            ``suspended`` names is not the one the snapshot waits on (edited metadata);
            nothing ran.
    """
    # What runs is what the verified continuation waits on (SPEC §5 v3): the call named in
    # ``suspended`` (which may have round-tripped through a UI or a store) must be that call.
    name, positional, keyword, _call_id = await anyio.to_thread.run_sync(runtime.inspect, suspended.snapshot)
    if (name, tuple(positional), dict(keyword)) != (suspended.tool, tuple(suspended.positional), suspended.tool_args):
        raise SnapshotError(
            f"the paused call given ({suspended.tool!r} with {suspended.tool_args!r}) is not the call the "
            f"continuation waits on ({name!r} with {dict(keyword)!r}); nothing ran"
        )
    drive = _Drive(runtime, dict(tools or {}), {}, script_name, max_tool_calls, on_output=on_output)
    drive.stdout.append(suspended.stdout)
    drive.stderr.append(suspended.stderr)
    drive.tool_calls = suspended.tool_calls
    if outcome is None:
        fn = drive.tools.get(suspended.tool)
        if fn is None:
            outcome = ResumeError(f"unknown tool {suspended.tool!r}", "NameError")
        else:
            try:
                outcome = await _serve(
                    drive,
                    fn,
                    suspended.tool,
                    tuple(suspended.positional),
                    dict(suspended.tool_args),
                    sync_tools_in_thread,
                )
            except SuspendScript as pause:
                raise dataclasses.replace(suspended, payload=pause.payload) from None
    step = await _advance(runtime.resume_async(suspended.snapshot, outcome))
    return await _drive_async(drive, step, sync_tools_in_thread, inline_steps)
