"""``LangChainTool``: a langchain-core ``BaseTool`` behind codeact's ``Tool`` interface."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import anyio.to_thread
import sniffio
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, ToolException
from langchain_core.tools import Tool as LcTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ...exceptions import LangChainToolError
from ...tools import Tool
from ...tools._context import ToolContext

__all__ = ("InjectHook", "LangChainTool", "LangChainToolError", "from_langchain")

InjectHook = Callable[[BaseTool, ToolContext], Mapping[str, Any]]
"""``inject(tool, tool_context) -> {name: value}``: the values of a tool's ``InjectedToolArg``
parameters for one call (``tool_context`` is None when the tool is called outside an agent)."""


def _error_text(flag: Any, exc: ToolException) -> str:
    """What langchain's ``handle_tool_error`` makes of ``exc`` (a bool, a text, a callable)."""
    if isinstance(flag, str):
        return flag
    if callable(flag) and not isinstance(flag, bool):
        return str(flag(exc))
    return str(exc.args[0]) if exc.args else "Tool execution error"


def _is_call_id(field: Any) -> bool:
    return any(m is InjectedToolCallId or isinstance(m, InjectedToolCallId) for m in field.metadata)


class LangChainTool(Tool):
    """Wraps a langchain ``BaseTool``: same name and description; the parameters are the JSON
    schema langchain itself sends to models (``convert_to_openai_tool``, so injected arguments
    stay hidden). ``run`` calls the tool (langchain runs a sync-only tool on a worker thread).

    - a failure langchain marks as an error (a ``ToolException``, also one that the tool's
      ``handle_tool_error`` turns into text, or a returned ``ToolMessage`` with
      ``status="error"``) reaches the script as ``LangChainToolError`` (a ``RuntimeError``);
    - ``InjectedToolArg`` parameters get the values ``inject`` returns for the call; an
      ``InjectedToolCallId`` parameter gets codeact's call key;
    - a ``response_format="content_and_artifact"`` tool returns
      ``{"content": ..., "artifact": ...}``; a ``ToolMessage`` result becomes its ``content``.

    Args:
        tool: the langchain tool.
        requires_confirmation: a human must approve each call (codeact's human in the loop).
        is_long_running: as for every codeact ``Tool``.
        inject: the injection hook (``InjectHook``).
        read_only: the tool changes nothing outside the script (``Tool``'s ``read_only``:
            no journal intent, its outcome durable with the turn's next durable write);
            langchain has no standard flag for it, so it is declared here.

    Raises:
        TypeError: (at a call, into the script) the tool has injected parameters no hook filled.
    """

    def __init__(
        self,
        tool: BaseTool,
        *,
        requires_confirmation: bool = False,
        is_long_running: bool = False,
        inject: InjectHook | None = None,
        read_only: bool = False,
    ) -> None:
        spec = convert_to_openai_tool(tool)["function"]
        super().__init__(
            tool.name,
            spec.get("description") or tool.description or "",
            spec.get("parameters") or {"type": "object", "properties": {}},
            requires_confirmation=requires_confirmation,
            is_long_running=is_long_running,
            read_only=read_only,
        )
        self.tool = tool
        self.inject = inject
        fields = dict(getattr(tool.get_input_schema(), "model_fields", {}))
        call_schema = tool.tool_call_schema  # a pydantic model, or a JSON schema dict given by the tool
        shown = set(getattr(call_schema, "model_fields", None) or fields)
        hidden = {n: f for n, f in fields.items() if n not in shown}
        self._call_id_args = {n for n, f in hidden.items() if _is_call_id(f)}
        self._injected = {n for n, f in hidden.items() if n not in self._call_id_args and f.is_required()}
        self._as_call = bool(self._call_id_args) or tool.response_format == "content_and_artifact"
        # Our copy raises what the tool's handle_tool_error would turn into text, so the
        # script gets an exception (langchain marks it status="error" only on a tool call).
        self._raw = tool.model_copy(update={"handle_tool_error": False})

    def _input(self, args: dict[str, Any], tool_context: ToolContext | None) -> dict[str, Any] | Any:
        given = dict(args)
        if self.inject is not None:
            given.update(self.inject(self.tool, tool_context))  # type: ignore[arg-type]
        missing = sorted(n for n in self._injected if n not in given)
        if missing:
            names = ", ".join(repr(n) for n in missing)
            raise TypeError(
                f"langchain tool {self.name!r} has injected argument(s) {names} that nothing filled; pass "
                "from_langchain(..., inject=lambda tool, tool_context: {...}) to supply them"
            )
        if not self._as_call:
            return given
        call_id = getattr(tool_context, "function_call_id", None) or f"codeact-{self.name}"
        return {"type": "tool_call", "name": self.name, "args": given, "id": call_id}

    async def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Call the LangChain tool with ``args`` (plus what ``inject`` fills in).

        An async tool runs with ``ainvoke`` on asyncio; otherwise the sync ``invoke`` runs in a
        worker thread (so trio works too).

        Returns:
            The tool's result; for a ``ToolMessage`` its ``content`` (``{"content", "artifact"}``
            with ``response_format="content_and_artifact"``).

        Raises:
            TypeError: an injected argument was not filled.
            RuntimeError: the tool is async-only and the event loop is not asyncio.
            LangChainToolError: the tool raised ``ToolException`` or returned an error ``ToolMessage``.
        """
        payload = self._input(args, tool_context)
        has_sync = getattr(self.tool, "func", None) is not None or not isinstance(self.tool, StructuredTool | LcTool)
        is_async = getattr(self.tool, "coroutine", None) is not None or _overrides_arun(self.tool)
        try:
            if is_async and (sniffio.current_async_library() == "asyncio" or not has_sync):
                if sniffio.current_async_library() != "asyncio":
                    raise RuntimeError(
                        f"langchain tool {self.name!r} is async-only, and langchain runs those on asyncio only"
                    )
                result = await self._raw.ainvoke(payload)
            else:  # langchain's ainvoke would use asyncio's executor; this works under trio too
                result = await anyio.to_thread.run_sync(self._raw.invoke, payload)
        except ToolException as exc:
            raise LangChainToolError(_error_text(self.tool.handle_tool_error, exc)) from exc
        if isinstance(result, ToolMessage):
            if result.status == "error":
                raise LangChainToolError(str(result.content) or f"langchain tool {self.name!r} failed")
            if self.tool.response_format == "content_and_artifact":
                return {"content": result.content, "artifact": result.artifact}
            return result.content
        return result


def _overrides_arun(tool: BaseTool) -> bool:
    """Whether the tool class has its own async implementation (``_arun``)."""
    return type(tool)._arun is not BaseTool._arun and not isinstance(tool, StructuredTool | LcTool)


def from_langchain(
    tools: Iterable[BaseTool],
    *,
    require_confirmation: Iterable[str] = (),
    inject: InjectHook | None = None,
    read_only: bool | Iterable[str] = False,
) -> list[Tool]:
    """Each langchain tool as a codeact tool, for ``CodeActAgent(tools=...)`` or a
    ``FunctionToolset``; the tools named in ``require_confirmation`` need approval; ``inject``
    fills ``InjectedToolArg`` parameters (``InjectHook``); ``read_only`` declares the tools
    that change nothing outside the script (``True``: all of them, or their names), as
    ``Tool(read_only=True)``: langchain has no standard flag for it.

    Raises:
        TypeError: an item is not a langchain ``BaseTool`` (the message names it).
    """
    out: list[Tool] = []
    gated = set(require_confirmation)
    reads = read_only if isinstance(read_only, bool) else frozenset(read_only)
    for t in tools:
        if not isinstance(t, BaseTool):
            raise TypeError(
                f"from_langchain expects langchain tools (@tool functions, StructuredTool, BaseTool), got "
                f"{type(t).__name__}: pass plain functions and codeact tools to CodeActAgent(tools=...) directly"
            )
        marked = reads if isinstance(reads, bool) else t.name in reads
        out.append(LangChainTool(t, requires_confirmation=t.name in gated, inject=inject, read_only=marked))
    return out
