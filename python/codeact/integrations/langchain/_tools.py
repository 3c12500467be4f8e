"""``LangChainTool``: a langchain-core ``BaseTool`` behind codeact's ``Tool`` interface."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio.to_thread
import sniffio
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools import Tool as LcTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ...tools import Tool
from ...tools._context import ToolContext

__all__ = ("LangChainTool", "from_langchain")


class LangChainTool(Tool):
    """Wraps a langchain ``BaseTool``: same name and description; the parameters are the JSON
    schema langchain itself sends to models (``convert_to_openai_tool``, so injected arguments
    stay hidden). ``run`` calls ``tool.ainvoke(args)`` (langchain runs a sync-only tool on a
    worker thread). A ``ToolException`` the tool does not handle itself reaches the script as a
    catchable exception; a ``ToolMessage`` result becomes its ``content``.

    Args:
        tool: the langchain tool.
        requires_confirmation: a human must approve each call (codeact's human in the loop).
        is_long_running: as for every codeact ``Tool``.
    """

    def __init__(self, tool: BaseTool, *, requires_confirmation: bool = False, is_long_running: bool = False) -> None:
        spec = convert_to_openai_tool(tool)["function"]
        super().__init__(
            tool.name,
            spec.get("description") or tool.description or "",
            spec.get("parameters") or {"type": "object", "properties": {}},
            requires_confirmation=requires_confirmation,
            is_long_running=is_long_running,
        )
        self.tool = tool

    async def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        has_sync = getattr(self.tool, "func", None) is not None or not isinstance(self.tool, StructuredTool | LcTool)
        is_async = getattr(self.tool, "coroutine", None) is not None or _overrides_arun(self.tool)
        if is_async and (sniffio.current_async_library() == "asyncio" or not has_sync):
            if sniffio.current_async_library() != "asyncio":
                raise RuntimeError(
                    f"langchain tool {self.name!r} is async-only, and langchain runs those on asyncio only"
                )
            result = await self.tool.ainvoke(args)
        else:  # langchain's ainvoke would use asyncio's executor; this works under trio too
            result = await anyio.to_thread.run_sync(self.tool.invoke, args)
        if isinstance(result, ToolMessage):
            return result.content
        return result


def _overrides_arun(tool: BaseTool) -> bool:
    """Whether the tool class has its own async implementation (``_arun``)."""
    return type(tool)._arun is not BaseTool._arun and not isinstance(tool, StructuredTool | LcTool)


def from_langchain(tools: Iterable[BaseTool], *, require_confirmation: Iterable[str] = ()) -> list[Tool]:
    """Each langchain tool as a codeact tool, for ``CodeActAgent(tools=...)`` or a
    ``FunctionToolset``; the tools named in ``require_confirmation`` need approval."""
    gated = set(require_confirmation)
    return [LangChainTool(t, requires_confirmation=t.name in gated) for t in tools]
