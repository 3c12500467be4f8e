"""``CodeActToolset``: a pydantic-ai toolset whose one tool, ``run_code``, runs a Python script
on Monty that calls the wrapped toolset's tools in process.

The model writes one script instead of one tool call per round trip; each ``call_tool`` in
the script is validated with the inner tool's own argument validator and run by the inner
toolset, between interpreter steps. Human-in-the-loop approval follows pydantic-ai's deferred
tools (docs: "Deferred tools / Human-in-the-loop tool approval"): when the script reaches an
inner tool that needs approval (``requires_approval=True``, or it raises ``ApprovalRequired``),
the script pauses (a codeact suspension: Monty snapshot bytes), and ``run_code`` raises
``ApprovalRequired`` with the inner call, its ``digest`` and (without a store) the paused
script in its metadata. The agent run ends with ``DeferredToolRequests``; pass
``DeferredToolResults(approvals={id: True}, metadata=requests.metadata)`` to the next run and
the script resumes where it paused. ``CodeActToolset.deny("reason")`` in place of ``True``
resumes it with ``PermissionError`` at the paused call, as the codeact agent does (a plain
``ToolDenied`` is reported by pydantic-ai itself; the script does not resume).

Each pause is settled once. An approval whose pause cannot be found (no metadata and no pause
held here, or a pause already settled) raises ``NoPendingCallError`` and runs nothing: never
the script again from its top. With ``session_service`` (a codeact store) the pause is kept
in the store, found by the tool call id alone (``approvals={id: True}`` with no metadata
works in any process), claimed by compare-and-set and marked settled there, so the same
approval sent twice, to one process or two, resumes the script once. Without a store the
pause travels in the metadata and is held in this toolset's memory; then the same approval is
applied once per process (another process given the same metadata would resume it again).

What a script prints reaches the caller while it runs, through pydantic-ai's API for a tool to
emit events into the run's event stream: ``RunContext.emit`` (pydantic-ai >= 2.60; "custom
events") with a ``ScriptOutputEvent``, a ``CustomEvent`` subclass. ``Agent.run_stream_events``,
``Agent.iter``'s node streams, an ``event_stream_handler`` and the UI adapters get it before
``run_code`` returns (docs/integrations.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
from pydantic import TypeAdapter, ValidationError
from pydantic_ai import ApprovalRequired, CallDeferred, CustomEvent, ModelRetry, RunContext, ToolApproved
from pydantic_ai.exceptions import UserError
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

from ..._values import json_native, readable, to_plain
from ...agent._output import truncate_middle
from ...agent._protocol import plain_value_problem
from ...agent._streaming import OUTPUT_INTERVAL
from ...exceptions import DecisionMismatchError, DecisionValueError, SnapshotError, ValueConversionError
from ...runtime import MontyRuntime, ResumeError, ScriptError, ScriptSuspended, SuspendScript
from ...runtime._oneshot import aresume_script, arun_script
from ...sessions import BaseSessionService
from ...tools import Tool
from ._pauses import Claimed, MemoryPauses, Pauses, StorePauses, pause_digest

__all__ = ("CodeActToolset", "DENIAL_ARG", "EDIT_ARG", "PAUSE_METADATA_KEY", "ScriptOutputEvent", "pause_digest")

PAUSE_METADATA_KEY = "codeact_pause"
"""Key of the paused script (``ScriptSuspended.to_dict()``) in the ``ApprovalRequired`` metadata
(absent when the toolset has a ``session_service``: the store holds the pause)."""

DENIAL_ARG = "codeact_denied"
"""The ``run_code`` argument that ``CodeActToolset.deny`` sets: the reason of the denial."""

EDIT_ARG = "codeact_edited_args"
"""The ``run_code`` argument that ``CodeActToolset.approve(args=...)`` sets: the arguments the
paused call runs with instead of the script's, as JSON text."""

_CODE_SCHEMA = {
    "type": "object",
    # ``examples``: also what pydantic-ai's ``TestModel`` sends, so it can drive the toolset.
    "properties": {
        "code": {"type": "string", "description": "The Python script to run.", "examples": ['print("hello")\n"done"']}
    },
    "required": ["code"],
    "additionalProperties": False,
}
_CODE_VALIDATOR: Any = TypeAdapter(dict[str, str]).validator


@dataclasses.dataclass(kw_only=True)
class ScriptOutputEvent(CustomEvent, name="codeact_script_output"):
    """What a ``run_code`` script printed while it runs: pydantic-ai's custom event (its name
    ``"codeact_script_output"``), emitted with ``RunContext.emit`` from the tool call, so
    ``tool_call_id`` and ``tool_name`` name that ``run_code`` call.

    Attributes:
        stdout: the text printed since the previous event of this script (not the whole).
        stderr: the same for ``print(..., file=sys.stderr)``.

    The first comes as soon as the script has printed something and reaches a step boundary
    (a tool call, its end), then at most one per ``CodeActToolset.output_interval`` seconds;
    what is printed after the last one is only in the tool's result (``stdout``), which
    always holds all of it.
    """

    stdout: str = ""
    stderr: str = ""


class _OutputReporter:
    """``on_output`` of one script run: emits ``ScriptOutputEvent``s through ``ctx.emit``,
    rate-limited; silent when ``ctx`` has no event stream (not inside an agent run)."""

    def __init__(self, ctx: RunContext[Any], interval: float) -> None:
        self.ctx, self.interval = ctx, interval
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.last = -math.inf
        self.live = True

    async def __call__(self, stdout: str, stderr: str) -> None:
        if not self.live:
            return
        self.stdout.append(stdout)
        self.stderr.append(stderr)
        now = time.monotonic()
        if now < self.last + self.interval:
            return  # kept for the next boundary
        event = ScriptOutputEvent(stdout="".join(self.stdout), stderr="".join(self.stderr))
        self.stdout.clear()
        self.stderr.clear()
        self.last = now
        try:
            await self.ctx.emit(event)
        except UserError:  # no run's event stream behind ctx (the toolset called directly)
            self.live = False


@dataclasses.dataclass
class CodeActToolset(WrapperToolset[Any]):
    """Wraps a pydantic-ai toolset (``FunctionToolset``, ``MCPServer``, ...) behind one tool that
    runs a script calling its tools.

    Args:
        wrapped: the toolset whose tools scripts call with ``call_tool("name", {...})``.
        runtime: the Monty runtime (default: ``MontyRuntime()``; 5 s and 256 MiB per advance).
        tool_name: the name the model sees (default ``"run_code"``).
        max_retries: how often the model may send a failing script again (each failure is
            fed back with its traceback through ``ModelRetry``).
        max_tool_calls: tool calls one script may make.
        inline_steps: resume the script on the event loop's thread after each tool call while
            those advances stay under 5 ms (see ``arun_script``): no thread hand-off per call;
            the loop is held for at most one longer advance. False keeps every advance on the
            native worker threads.
        max_result_chars: the most characters (code points) of the value's JSON text and of
            the printed text the model gets back; longer ones keep their start and end around
            the ``[... truncated ...]`` marker (the value is then that text, a string).
        max_error_chars: the same bound for the error text of a failing script.
        session_service: a codeact session store to keep paused scripts in (one session per
            ``run_code`` tool call id under ``pause_app_name``): an approval then finds its
            pause by the tool call id in any process sharing the store, and a pause is
            settled once across all of them. Default None: pauses travel in the metadata and
            are settled once per process.
        pause_app_name: the app name of those sessions (default ``"codeact-pydantic-ai"``).
        report_output: emit what the script prints while it runs as ``ScriptOutputEvent``s
            (``RunContext.emit``); False emits nothing.
        output_interval: seconds between two such events of one script (at most 10 per
            second by default); the first is not held back.

    ``ApprovalRequired`` metadata (what ``DeferredToolRequests.metadata[id]`` shows a UI):
    ``tool`` and ``args`` (the paused inner call), ``stdout`` (printed before the pause),
    ``ran`` (the inner tools that ran), ``digest`` (``pause_digest``: 16 hex digits binding
    the call and the continuation) and, without a store, ``codeact_pause``
    (``PAUSE_METADATA_KEY``). A decision whose metadata carries a ``digest``, ``tool`` or
    ``args`` other than the paused call's is refused (``DecisionMismatchError``) before
    anything runs, so what a UI showed is what runs.

    The tool returns ``{"value": <last expression>, "stdout": <printed text>}``; a value
    JSON cannot hold (a tuple, a set, bytes, a dict with non-str keys) comes as its Python
    text (``"{(1, 2): 3}"``). A failing
    script, an inner tool returning something that is not plain data (the script gets a
    ``TypeError`` at that call), and a script the runtime cannot finish go back to the model
    as ``ModelRetry``.
    """

    wrapped: AbstractToolset[Any]
    runtime: MontyRuntime = dataclasses.field(default_factory=MontyRuntime)
    tool_name: str = "run_code"
    max_retries: int = 3
    max_tool_calls: int | None = 1000
    inline_steps: bool = True
    max_result_chars: int = 20_000
    max_error_chars: int = 4_000
    session_service: BaseSessionService | None = None
    pause_app_name: str = "codeact-pydantic-ai"
    report_output: bool = True
    output_interval: float = OUTPUT_INTERVAL
    _pauses: Pauses | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        # a field, not made per use: copies of the toolset (dataclasses.replace) share it
        if self._pauses is None:
            if self.session_service is not None:
                self._pauses = StorePauses(self.session_service, self.pause_app_name, self.tool_name)
            else:
                self._pauses = MemoryPauses()

    @property
    def pauses(self) -> Pauses:
        """Where this toolset keeps its paused scripts (memory, or ``session_service``)."""
        assert self._pauses is not None
        return self._pauses

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """pydantic-ai's ``AbstractToolset.get_tools``: the single code tool (``tool_name``), whose
        description carries the runtime's prompt and the wrapped toolset's tools as a catalog.
        """
        inner = await self.wrapped.get_tools(ctx)
        listing = self.runtime.render_tools(
            [
                Tool(
                    name,
                    t.tool_def.description or "",
                    t.tool_def.parameters_json_schema,
                    read_only=read_only_tool(t.tool_def),
                )
                for name, t in inner.items()
            ]
        )
        description = (
            "Run a Python script. Write the whole task as one script: call the tools below from it, combine their "
            "results with ordinary Python, print what you want to see, and end with the value to return.\n\n"
            f"{self.runtime.capabilities().prompt}\n\nTools callable from the script:\n\n{listing}"
        )
        tool_def = ToolDefinition(name=self.tool_name, description=description, parameters_json_schema=_CODE_SCHEMA)
        return {
            self.tool_name: ToolsetTool(
                toolset=self, tool_def=tool_def, max_retries=self.max_retries, args_validator=_CODE_VALIDATOR
            )
        }

    @staticmethod
    def deny(reason: str = "") -> ToolApproved:
        """The approval value that denies a paused script's call and resumes the script: the
        call raises ``PermissionError`` (with ``reason``) in the script, which may catch it and
        go on, so what ran before the pause is not run again and the model sees the script's
        outcome (its value or traceback, and everything it printed). Use it in
        ``DeferredToolResults(approvals={id: CodeActToolset.deny("over budget")}, metadata=...)``
        where a plain ``ToolDenied`` would end the script with only the reason."""
        return ToolApproved(override_args={"code": "", DENIAL_ARG: reason})

    @staticmethod
    def approve(args: dict[str, Any] | None = None) -> ToolApproved | bool:
        """The approval value that approves a paused script's call, with ``args`` (edited
        arguments, by name) in place of the script's: the paused call runs with them, once,
        after they pass the inner tool's own argument validator (a bad edit raises
        ``DecisionValueError`` naming the field; nothing runs and the pause stays pending).
        Without ``args`` it is ``True``. pydantic-ai's own ``ToolApproved(override_args=...)``
        would replace ``run_code``'s arguments (the script), not the inner tool's. Use it in
        ``DeferredToolResults(approvals={id: CodeActToolset.approve(args={...})}, metadata=...)``
        with the metadata the pause announced (its ``digest`` binds the edit to the call shown).
        """
        if args is None:
            return True
        return ToolApproved(override_args={"code": "", EDIT_ARG: json.dumps(args)})  # run_code takes str values

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """pydantic-ai's ``AbstractToolset.call_tool``: run the script in ``tool_args["code"]`` with
        the wrapped tools callable from it, or resume a script paused for approval.

        Returns:
            ``{"value": ..., "stdout": ...}``, both capped to ``max_result_chars``
            characters (a value whose JSON is longer comes back as its truncated JSON text).

        Raises:
            ApprovalRequired: a wrapped tool needs approval; the pause travels in the metadata.
            ModelRetry: the script failed (its error and what it printed go back to the model).
        """
        inner = await self.wrapped.get_tools(ctx)
        claimed = await self._claim(ctx) if ctx.tool_call_approved else None
        pause = ScriptSuspended.from_dict(claimed.data) if claimed is not None else None
        approved_call: list[str] = [pause.tool] if pause is not None else []
        ran: list[str] = []
        edited = tool_args.get(EDIT_ARG) if pause is not None else None
        if pause is not None and edited is not None:
            try:
                edited = _checked_edit(pause.tool, edited, inner.get(pause.tool), ctx.tool_call_id or "")
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self.pauses.finish(claimed, settled=False)  # type: ignore[arg-type]
                raise
        tools = {n: self._bind(n, t, ctx, approved_call, ran, edited) for n, t in inner.items()}
        denied = tool_args.get(DENIAL_ARG) if pause is not None else None
        on_output = _OutputReporter(ctx, self.output_interval) if self.report_output else None
        settled = False
        try:
            if pause is not None:
                outcome = None
                if denied is not None:
                    because = f": {denied}" if denied else ""
                    message = f"call to {pause.tool!r} was denied by a human reviewer{because}"
                    outcome = ResumeError(message, "PermissionError")
                    settled = True  # the denial reaches the script
                resumed = aresume_script(
                    self.runtime,
                    pause,
                    tools=tools,
                    outcome=outcome,
                    max_tool_calls=self.max_tool_calls,
                    inline_steps=self.inline_steps,
                    on_output=on_output,
                )
                try:
                    result = await resumed
                finally:
                    settled = settled or not approved_call  # the approved call started
            else:
                result = await arun_script(
                    self.runtime,
                    tool_args["code"],
                    tools=tools,
                    max_tool_calls=self.max_tool_calls,
                    inline_steps=self.inline_steps,
                    on_output=on_output,
                )
        except ScriptSuspended as paused:
            data = paused.to_dict()
            call_id = ctx.tool_call_id or ""
            digest = pause_digest(call_id, paused.tool, paused.tool_args, paused.positional, paused.snapshot)
            await self.pauses.put(call_id, data, digest, claimed)
            claimed = None  # settled (or kept pending, the same pause) by put
            metadata: dict[str, Any] = {
                "tool": paused.tool,
                "args": paused.tool_args,
                "stdout": paused.stdout,
                "ran": ran,
                "digest": digest,
            }
            if self.pauses.holds(call_id):
                metadata[PAUSE_METADATA_KEY] = data
            raise ApprovalRequired(metadata) from None
        except ScriptError as err:
            feedback = truncate_middle(err.message, self.max_error_chars)
            if err.stdout:
                feedback += f"\n\nPrinted before the error:\n{truncate_middle(err.stdout, self.max_error_chars)}"
            raise ModelRetry(feedback) from err
        except ValueConversionError as err:  # a value the checks above let through; the host is fine
            raise ModelRetry(f"the script could not go on: {err}") from err
        finally:
            if claimed is not None:
                with anyio.CancelScope(shield=True):
                    await self.pauses.finish(claimed, settled=settled)
        return {
            "value": self._capped_value(result.value),
            "stdout": truncate_middle(result.stdout, self.max_result_chars),
        }

    def _capped_value(self, value: Any) -> Any:
        """The value as the model gets it: plain JSON as it is, anything JSON cannot hold (a
        tuple, a set, bytes, a dict with non-str keys, an int too long for JSON) as its
        Python text (``{(1, 2): 3}``); either one capped as its text."""
        if isinstance(value, str):
            return truncate_middle(value, self.max_result_chars)
        if not json_native(value):
            return truncate_middle(readable(value), self.max_result_chars)
        if value is None or isinstance(value, (bool, int, float)):
            return value
        text = json.dumps(value, ensure_ascii=False)
        return value if len(text) <= self.max_result_chars else truncate_middle(text, self.max_result_chars)

    async def _claim(self, ctx: RunContext[Any]) -> Claimed:
        """The pause an approved (or ``deny``-ed) ``run_code`` call decides, claimed for it and
        checked against the verified continuation.

        Raises:
            NoPendingCallError: no pause can be found (no metadata, none held or stored), or
                it was settled already: nothing runs, never the script from its top.
            AlreadyResumingError: another decision is resuming it now.
            SnapshotError: the pause carried in the metadata is not the call its
                continuation waits on (edited), or the continuation fails its check.
            DecisionMismatchError: the metadata's ``digest``, ``tool`` or ``args`` are not
                the paused call's (a stale or edited view).
        """
        call_id = ctx.tool_call_id or ""
        metadata = ctx.tool_call_metadata if isinstance(ctx.tool_call_metadata, dict) else {}
        carried = metadata.get(PAUSE_METADATA_KEY)
        shown = metadata.get("digest")
        claimed = await self.pauses.claim(
            call_id, carried if isinstance(carried, dict) else None, str(shown) if shown is not None else None
        )
        try:
            pause = ScriptSuspended.from_dict(claimed.data)
            name, positional, keyword, _ = await anyio.to_thread.run_sync(self.runtime.inspect, pause.snapshot)
            call = (name, tuple(positional), dict(keyword))
            if call != (pause.tool, tuple(pause.positional), pause.tool_args):
                raise SnapshotError(
                    f"the paused call given ({pause.tool!r} with {pause.tool_args!r}) is not the call the "
                    f"continuation waits on ({name!r} with {dict(keyword)!r}); nothing ran"
                )
            digest = pause_digest(call_id, name, dict(keyword), positional, pause.snapshot)
            if shown is not None and shown != digest:
                raise DecisionMismatchError(
                    f"the approval of tool call {call_id!r} names pause {shown!r}, but the paused call is "
                    f"{name!r} with {dict(keyword)!r} (pause {digest!r}): the view it was made on is stale or "
                    "edited; nothing ran"
                )
            if "tool" in metadata or "args" in metadata:
                tool = metadata.get("tool", name)
                args = metadata.get("args", {})
                try:
                    same = pause_digest(call_id, str(tool), dict(args), positional, pause.snapshot) == digest
                except (TypeError, ValueError):
                    same = False
                if not same:
                    raise DecisionMismatchError(
                        f"the call shown for tool call {call_id!r} ({tool!r} with {args!r}) is not the paused "
                        f"call ({name!r} with {dict(keyword)!r}); nothing ran"
                    )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.pauses.finish(claimed, settled=False)
            raise
        return claimed

    def _bind(
        self,
        name: str,
        tool: ToolsetTool[Any],
        ctx: RunContext[Any],
        approved_call: list[str],
        ran: list[str],
        edited: dict[str, Any] | None = None,
    ) -> Callable[..., Any]:
        plain_ctx = dataclasses.replace(ctx, tool_name=name, tool_call_approved=False)

        async def call(**args: Any) -> Any:
            approved = bool(approved_call) and approved_call[0] == name
            if approved:
                approved_call.clear()  # approval covers the paused call only
                if edited is not None:
                    args = edited  # an edited approval: the paused call runs with the reviewer's arguments
            if tool.tool_def.kind == "external":
                raise RuntimeError(f"tool {name!r} runs outside the agent and cannot be called from a script")
            if tool.tool_def.kind == "unapproved" and not approved:
                raise SuspendScript({"tool": name})
            try:
                validated = tool.args_validator.validate_python(args)
            except ValidationError as exc:
                raise TypeError(f"tool {name!r} got invalid arguments: {exc.errors(include_url=False)}") from None
            inner_ctx = dataclasses.replace(ctx, tool_name=name, tool_call_approved=True) if approved else plain_ctx
            try:
                value = await self.wrapped.call_tool(name, validated, inner_ctx, tool)
            except ApprovalRequired as exc:
                raise SuspendScript({"tool": name, "metadata": exc.metadata}) from None
            except CallDeferred:
                raise RuntimeError(f"tool {name!r} deferred its call; that is not possible inside a script") from None
            except ModelRetry as exc:
                raise RuntimeError(exc.message) from None
            ran.append(name)
            value = to_plain(value)
            problem = plain_value_problem(value, f"the result of tool {name!r}")
            if problem is not None:
                raise TypeError(f"{problem}; the tool ran, but its result cannot reach the script")
            return value

        return call


def _checked_edit(name: str, edited: Any, tool: ToolsetTool[Any] | None, call_id: str) -> dict[str, Any]:
    """The edited arguments of an approval, checked with the inner tool's own validator
    before anything runs.

    Raises:
        DecisionValueError: not a dict of plain data, or the validator refuses them (each
            failing field named).
    """
    errors: list[tuple[str, str]] = []
    if isinstance(edited, str):
        try:
            edited = json.loads(edited)
        except ValueError as exc:
            errors = [("", f"edited arguments are not JSON ({exc})")]
    if errors:
        pass
    elif not isinstance(edited, dict):
        errors = [("", f"edited arguments must be an object, not {type(edited).__name__}")]
    elif tool is None:
        errors = [("", f"tool {name!r} is no longer offered")]
    else:
        problem = plain_value_problem(edited, f"the edited arguments of {name!r}")
        if problem is not None:
            errors = [("", problem)]
        else:
            try:
                tool.args_validator.validate_python(edited)
            except ValidationError as exc:
                errors = [(".".join(str(p) for p in e["loc"]), str(e["msg"])) for e in exc.errors(include_url=False)]
    if errors:
        shown = "; ".join(f"{f}: {m}" if f else m for f, m in errors)
        raise DecisionValueError(
            f"the edited arguments for tool call {call_id!r} to {name!r} do not fit the tool ({shown}); nothing ran "
            "and the call is still pending",
            call_key=call_id,
            tool=name,
            what="args",
            errors=errors,
        )
    assert isinstance(edited, dict)
    return edited


def read_only_tool(tool_def: ToolDefinition) -> bool:
    """Whether a pydantic-ai tool is declared read-only: ``metadata={"read_only": True}`` on
    its definition (the key pydantic-ai-harness reads), as codeact's ``Tool(read_only=True)``."""
    metadata = tool_def.metadata
    return isinstance(metadata, dict) and metadata.get("read_only") is True
