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
to the next run and the script resumes where it paused (denied: pydantic-ai tells the model).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_ai import ApprovalRequired, CallDeferred, ModelRetry, RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

from ...runtime import MontyRuntime, ScriptError, ScriptSuspended, SuspendScript
from ...runtime._oneshot import aresume_script, arun_script
from ...tools import Tool

__all__ = ("CodeActToolset", "PAUSE_METADATA_KEY")

PAUSE_METADATA_KEY = "codeact_pause"
"""Key of the paused script (``ScriptSuspended.to_dict()``) in the ``ApprovalRequired`` metadata."""

_CODE_SCHEMA = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "The Python script to run."}},
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

    The tool returns ``{"value": <last expression>, "stdout": <printed text>}``.
    """

    wrapped: AbstractToolset[Any]
    runtime: MontyRuntime = dataclasses.field(default_factory=MontyRuntime)
    tool_name: str = "run_code"
    max_retries: int = 3
    max_tool_calls: int | None = 1000
    inline_steps: bool = True
    _pauses: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict, repr=False)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
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

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        inner = await self.wrapped.get_tools(ctx)
        pause = self._pause_for(ctx)
        approved_call: list[str] = [pause.tool] if pause is not None else []
        tools = {n: self._bind(n, t, ctx, approved_call) for n, t in inner.items()}
        try:
            if pause is not None:
                result = await aresume_script(
                    self.runtime, pause, tools=tools, max_tool_calls=self.max_tool_calls, inline_steps=self.inline_steps
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
                {"tool": paused.tool, "args": paused.tool_args, "stdout": paused.stdout, PAUSE_METADATA_KEY: data}
            ) from None
        except ScriptError as err:
            feedback = err.message if not err.stdout else f"{err.message}\n\nPrinted before the error:\n{err.stdout}"
            raise ModelRetry(feedback) from err
        finally:
            if pause is not None and ctx.tool_call_id is not None:
                self._pauses.pop(ctx.tool_call_id, None)
        return {"value": result.value, "stdout": result.stdout}

    def _pause_for(self, ctx: RunContext[Any]) -> ScriptSuspended | None:
        """The paused script this (approved) call resumes, from the results' metadata or memory."""
        if not ctx.tool_call_approved:
            return None
        metadata = ctx.tool_call_metadata if isinstance(ctx.tool_call_metadata, dict) else {}
        data = metadata.get(PAUSE_METADATA_KEY) or self._pauses.get(ctx.tool_call_id or "")
        return ScriptSuspended.from_dict(data) if data else None

    def _bind(
        self, name: str, tool: ToolsetTool[Any], ctx: RunContext[Any], approved_call: list[str]
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
                return await self.wrapped.call_tool(name, validated, inner_ctx, tool)
            except ApprovalRequired as exc:
                raise SuspendScript({"tool": name, "metadata": exc.metadata}) from None
            except CallDeferred:
                raise RuntimeError(f"tool {name!r} deferred its call; that is not possible inside a script") from None
            except ModelRetry as exc:
                raise RuntimeError(exc.message) from None

        return call
