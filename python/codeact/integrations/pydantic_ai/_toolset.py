"""``CodeActToolset``: a pydantic-ai toolset whose one tool, ``run_code``, runs a Python script
on Monty that calls the wrapped toolset's tools in process.

The model writes one script instead of one tool call per round trip; each ``call_tool`` in
the script is validated with the inner tool's own argument validator and run by the inner
toolset, between interpreter steps. Human-in-the-loop approval follows pydantic-ai's deferred
tools (docs: "Deferred tools / Human-in-the-loop tool approval"): when the script reaches an
inner tool that needs approval (``requires_approval=True``, or it raises ``ApprovalRequired``),
the script pauses (a codeact suspension: Monty snapshot bytes), and ``run_code`` raises
``ApprovalRequired`` with the inner call and the snapshot in its metadata. The agent run ends with
``DeferredToolRequests``; pass ``DeferredToolResults(approvals={id: True}, metadata=requests.metadata)``
to the next run and the script resumes where it paused. ``CodeActToolset.deny("reason")`` in
place of ``True`` resumes it with ``PermissionError`` at the paused call, as the codeact agent
does (a plain ``ToolDenied`` is reported by pydantic-ai itself; the script does not resume).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_ai import ApprovalRequired, CallDeferred, ModelRetry, RunContext, ToolApproved
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

from ..._values import json_native, readable, to_plain
from ...agent._output import truncate_middle
from ...agent._protocol import plain_value_problem
from ...exceptions import ValueConversionError
from ...runtime import MontyRuntime, ResumeError, ScriptError, ScriptSuspended, SuspendScript
from ...runtime._oneshot import aresume_script, arun_script
from ...tools import Tool

__all__ = ("CodeActToolset", "DENIAL_ARG", "PAUSE_METADATA_KEY")

PAUSE_METADATA_KEY = "codeact_pause"
"""Key of the paused script (``ScriptSuspended.to_dict()``) in the ``ApprovalRequired`` metadata."""

DENIAL_ARG = "codeact_denied"
"""The ``run_code`` argument that ``CodeActToolset.deny`` sets: the reason of the denial."""

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
    _pauses: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict, repr=False)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """pydantic-ai's ``AbstractToolset.get_tools``: the single code tool (``tool_name``), whose
        description carries the runtime's prompt and the wrapped toolset's tools as a catalog.
        """
        inner = await self.wrapped.get_tools(ctx)
        listing = self.runtime.render_tools(
            [Tool(name, t.tool_def.description or "", t.tool_def.parameters_json_schema) for name, t in inner.items()]
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
        pause = self._pause_for(ctx)
        approved_call: list[str] = [pause.tool] if pause is not None else []
        ran: list[str] = []
        tools = {n: self._bind(n, t, ctx, approved_call, ran) for n, t in inner.items()}
        denied = tool_args.get(DENIAL_ARG) if pause is not None else None
        try:
            if pause is not None:
                outcome = None
                if denied is not None:
                    because = f": {denied}" if denied else ""
                    message = f"call to {pause.tool!r} was denied by a human reviewer{because}"
                    outcome = ResumeError(message, "PermissionError")
                result = await aresume_script(
                    self.runtime,
                    pause,
                    tools=tools,
                    outcome=outcome,
                    max_tool_calls=self.max_tool_calls,
                    inline_steps=self.inline_steps,
                )
            else:
                result = await arun_script(
                    self.runtime,
                    tool_args["code"],
                    tools=tools,
                    max_tool_calls=self.max_tool_calls,
                    inline_steps=self.inline_steps,
                )
        except ScriptSuspended as paused:
            data = paused.to_dict()
            if ctx.tool_call_id is not None:
                self._pauses[ctx.tool_call_id] = data
            raise ApprovalRequired(
                {
                    "tool": paused.tool,
                    "args": paused.tool_args,
                    "stdout": paused.stdout,
                    "ran": ran,
                    PAUSE_METADATA_KEY: data,
                }
            ) from None
        except ScriptError as err:
            feedback = truncate_middle(err.message, self.max_error_chars)
            if err.stdout:
                feedback += f"\n\nPrinted before the error:\n{truncate_middle(err.stdout, self.max_error_chars)}"
            raise ModelRetry(feedback) from err
        except ValueConversionError as err:  # a value the checks above let through; the host is fine
            raise ModelRetry(f"the script could not go on: {err}") from err
        finally:
            if pause is not None and ctx.tool_call_id is not None:
                self._pauses.pop(ctx.tool_call_id, None)
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

    def _pause_for(self, ctx: RunContext[Any]) -> ScriptSuspended | None:
        """The paused script this (approved) call resumes, from the results' metadata or memory."""
        if not ctx.tool_call_approved:
            return None
        metadata = ctx.tool_call_metadata if isinstance(ctx.tool_call_metadata, dict) else {}
        data = metadata.get(PAUSE_METADATA_KEY) or self._pauses.get(ctx.tool_call_id or "")
        return ScriptSuspended.from_dict(data) if data else None

    def _bind(
        self, name: str, tool: ToolsetTool[Any], ctx: RunContext[Any], approved_call: list[str], ran: list[str]
    ) -> Callable[..., Any]:
        plain_ctx = dataclasses.replace(ctx, tool_name=name, tool_call_approved=False)

        async def call(**args: Any) -> Any:
            approved = bool(approved_call) and approved_call[0] == name
            if approved:
                approved_call.clear()  # approval covers the paused call only
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
