"""``CPythonRuntime``: trusted scripts on CPython itself (SPEC §3, last item).

No sandbox and no suspension (``supports_suspension=False``): a script runs on its own
thread and blocks at each tool call until the agent resumes it in place. The agent then
runs long-running tools inline and refuses confirmation pauses with a clear error.
"""

from __future__ import annotations

import ast
import builtins
import io
import queue
import sys
import threading
import traceback
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..exceptions import CodeRuntimeError, UnsupportedMountError
from ._options import Mount, PathAccess
from ._seam import (
    AdvanceTicket,
    Call,
    Complete,
    Raised,
    ResumeError,
    ResumeValue,
    RunStep,
    RuntimeCapabilities,
    ToolStyle,
    default_tool_catalog,
    resume_in_thread,
    step_within,
)

if TYPE_CHECKING:
    from ._render import Tool

__all__ = ("CPythonRuntime",)

_RESULT = "__codeact_result__"
_PROMPT = (
    "Scripts run on CPython with the full standard library. There is no top-level `return`: the script's "
    "result is the value of its LAST EXPRESSION. Tools are reached ONLY through "
    '`call_tool("tool_name", {"arg": value})` with one dict of arguments; a failed tool raises an exception '
    "you can catch."
)


class _Channel:
    """Hands control back and forth between the script thread and the host."""

    def __init__(self) -> None:
        self.to_host: queue.SimpleQueue[RunStep] = queue.SimpleQueue()
        self.to_script: queue.SimpleQueue[ResumeValue | ResumeError] = queue.SimpleQueue()
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.call_id = 0

    def take_output(self) -> tuple[str, str]:
        """(stdout, stderr) printed since the last take; both emptied."""
        texts = []
        for stream in (self.stdout, self.stderr):
            texts.append(stream.getvalue())
            stream.seek(0)
            stream.truncate()
        return texts[0], texts[1]


class CPythonPendingCall:
    """A CPython script blocked at a tool call; resume it once, in place."""

    def __init__(self, channel: _Channel, name: str, keyword_args: dict[str, Any], call_id: int) -> None:
        self._channel = channel
        self._used = False
        self.name = name
        self.positional_args: tuple[Any, ...] = ()
        self.keyword_args = keyword_args
        self.call_id = call_id

    def dump(self) -> bytes:
        """Always refused: a CPython script paused in its thread cannot be serialized.

        Raises:
            CodeRuntimeError: always (``capabilities().supports_suspension`` is ``False``).
        """
        raise CodeRuntimeError("CPythonRuntime cannot suspend: a paused CPython script cannot be dumped")

    def resume(self, outcome: ResumeValue | ResumeError, *, os_replay: Sequence[tuple[str, Any]] = ()) -> RunStep:
        """Answer the call with ``outcome`` and block until the script's thread reaches its next step.

        ``os_replay`` is accepted for the seam's signature and unused (this runtime has no OS
        journal).

        Returns:
            The next ``RunStep`` (another ``PendingCall``, ``Complete`` or ``Raised``).

        Raises:
            CodeRuntimeError: the call was already resumed (a ``PendingCall`` is single use).
            TypeError: ``outcome`` is neither ``ResumeValue`` nor ``ResumeError``.
        """
        if self._used:
            raise CodeRuntimeError("this PendingCall was already resumed; a PendingCall is single use")
        if not isinstance(outcome, (ResumeValue, ResumeError)):
            raise TypeError(f"resume() takes ResumeValue(value) or ResumeError(message), got {type(outcome).__name__}")
        self._used = True
        self._channel.to_script.put(outcome)
        return self._channel.to_host.get()

    def resume_async(
        self, outcome: ResumeValue | ResumeError, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> AdvanceTicket:
        """``resume`` on a worker thread (this runtime has no native worker): its ticket."""
        return resume_in_thread(self.resume, outcome, os_replay)

    def resume_within(
        self, outcome: ResumeValue | ResumeError, timeout: float, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> RunStep | AdvanceTicket:
        """``resume_async``, then the step when it finished within ``timeout`` seconds, else the ticket."""
        return step_within(self.resume_async(outcome, os_replay), timeout)


class CPythonRuntime:
    """Runs trusted scripts on CPython: full language, no sandbox, no suspension.

    Args:
        prompt_extra: text appended to the capabilities prompt.
        mounts: must be empty: a script on CPython sees the whole host, so there is nothing to
            mount, and an overlay's writes could not be kept off the host.

    Raises:
        UnsupportedMountError: ``mounts`` holds a mount (an overlay mount or any other).
    """

    def __init__(self, prompt_extra: str = "", *, mounts: Iterable[Mount] = ()) -> None:
        for mount in mounts:
            if mount.access is PathAccess.OVERLAY:
                raise UnsupportedMountError(
                    f"CPythonRuntime cannot serve the overlay mount {mount.virtual_path}: a script on CPython "
                    "writes the host directly, so the overlay could not keep its writes off it; use MontyRuntime"
                )
            raise UnsupportedMountError(
                f"CPythonRuntime takes no mounts ({mount.virtual_path}): a script on CPython already sees the "
                "whole host; use MontyRuntime for sandboxed folders"
            )
        prompt = _PROMPT + ("\n\n" + prompt_extra if prompt_extra else "")
        self._capabilities = RuntimeCapabilities(supports_suspension=False, prompt=prompt)

    def capabilities(self) -> RuntimeCapabilities:
        """What this runtime supports: no suspension; the prompt is the built-in one plus ``prompt_extra``."""
        return self._capabilities

    def render_tools(self, tools: Sequence[Tool]) -> str:
        """The tool catalog of ``default_tool_catalog(tools)`` (the seam's default rendering)."""
        return default_tool_catalog(tools)

    @property
    def tool_style(self) -> ToolStyle:
        """``"call_tool"``: scripts reach tools only through ``call_tool``."""
        return "call_tool"

    def seal(self, data: bytes) -> str | None:
        """None: this runtime has no snapshot key (it never stores a turn)."""
        return None

    def resume(
        self, snapshot: bytes, outcome: ResumeValue | ResumeError, *, os_replay: Sequence[tuple[str, Any]] = ()
    ) -> RunStep:
        """Always refused: this runtime never produces snapshot bytes.

        Raises:
            CodeRuntimeError: always.
        """
        raise CodeRuntimeError("CPythonRuntime cannot suspend, so it cannot resume from snapshot bytes")

    def start(self, script: str, script_name: str = "main.py", *, os_replay: Sequence[tuple[str, Any]] = ()) -> RunStep:
        """Run ``script`` on real CPython in a daemon thread until its first tool call or its end.

        The value of a final expression statement is the result. Not a sandbox: the script has
        the host's full power. ``os_replay`` is accepted for the seam's signature and unused.

        Returns:
            ``Raised`` for a syntax error (with the formatted message), else the first ``RunStep``.
        """
        try:
            tree = ast.parse(script, filename=script_name)
        except SyntaxError as exc:
            return Raised("".join(traceback.format_exception_only(type(exc), exc)).rstrip())
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body[-1]
            tree.body[-1] = ast.copy_location(
                ast.Assign(targets=[ast.Name(_RESULT, ast.Store())], value=last.value), last
            )
            ast.fix_missing_locations(tree)
        code = compile(tree, script_name, "exec")
        channel = _Channel()
        thread = threading.Thread(
            target=self._run, args=(code, channel, script_name), daemon=True, name="codeact-cpython-script"
        )
        thread.start()
        return channel.to_host.get()

    @staticmethod
    def _run(code: Any, channel: _Channel, script_name: str) -> None:
        def call_tool(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                raise TypeError("call_tool takes the tool's arguments in one dict, not as keyword arguments")
            if not args or not isinstance(args[0], str):
                raise TypeError("call_tool needs the tool name as its first argument, a string")
            if len(args) > 2:
                raise TypeError("call_tool takes exactly two arguments, the tool name and one dict")
            arguments = args[1] if len(args) == 2 else {}
            if not isinstance(arguments, dict):
                raise TypeError("call_tool's second argument must be a dict of the tool's arguments")
            if any(not isinstance(k, str) for k in arguments):
                raise TypeError("call_tool argument names must be strings")
            channel.call_id += 1
            pending = CPythonPendingCall(channel, args[0], dict(arguments), channel.call_id)
            out, err = channel.take_output()
            channel.to_host.put(Call(pending, out, stderr=err))
            outcome = channel.to_script.get()
            if isinstance(outcome, ResumeError):
                exc_type = getattr(builtins, outcome.exc_type, RuntimeError)
                if not (isinstance(exc_type, type) and issubclass(exc_type, Exception)):
                    exc_type = RuntimeError
                raise exc_type(outcome.message)
            return outcome.value

        def script_print(*args: Any, **kwargs: Any) -> None:
            target = kwargs.get("file")
            if target is None:
                kwargs["file"] = channel.stdout
            elif target is sys.stderr:
                kwargs["file"] = channel.stderr
            builtins.print(*args, **kwargs)

        script_builtins = dict(vars(builtins))
        script_builtins["print"] = script_print
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": script_builtins, "call_tool": call_tool}
        try:
            exec(code, namespace)
        except BaseException as exc:
            tb = traceback.TracebackException.from_exception(exc)
            # Drop the runtime's own frames; keep the script's.
            tb.stack = traceback.StackSummary.from_list([f for f in tb.stack if f.filename == script_name])
            out, err = channel.take_output()
            channel.to_host.put(Raised("".join(tb.format()).rstrip(), out, stderr=err))
            return
        out, err = channel.take_output()
        channel.to_host.put(Complete(namespace.get(_RESULT), out, stderr=err))
