"""Toolsets: groups of tools resolved per invocation.

A ``Toolset`` returns its tools for the current run, so the tools may depend on session
state, the user or anything else in the read-only context. ``CodeActAgent(toolsets=[...])``
resolves every toolset at the start of each (fresh or resumed) run: static ``tools`` first,
then each toolset in order. Two tools with the same name end the run with an event
(``error_code="codeact.toolset"``) naming the conflict.

Each toolset can filter its tools (``tool_filter``: a list of names, or a predicate
``(tool, ctx) -> bool``) and prefix their names (``prefix="crm"`` exposes ``lookup`` as
``crm_lookup``; the filter sees the unprefixed names).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .tools import FunctionTool, Tool
from .tools._context import ToolContext

__all__ = ("FunctionToolset", "PrefixedTool", "Toolset", "ToolFilter")

ToolFilter = Sequence[str] | Callable[[Tool, Any], bool]


class PrefixedTool(Tool):
    """``tool`` under the name ``<prefix>_<name>``; runs the original."""

    def __init__(self, tool: Tool, prefix: str) -> None:
        super().__init__(
            f"{prefix}_{tool.name}",
            tool.description,
            tool.parameters,
            is_long_running=tool.is_long_running,
            requires_confirmation=bool(getattr(tool, "requires_confirmation", False)),
        )
        self.original = tool

    async def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Run the original tool unchanged (only the name seen by the model carries the prefix)."""
        return await self.original.run(args, tool_context)

    def check_args(self, args: dict[str, Any]) -> None:
        """The original tool's check (``ToolArgumentError`` when ``args`` never validate)."""
        check = getattr(self.original, "check_args", None)
        if check is not None:
            check(args)

    async def confirmation_required(self, args: dict[str, Any]) -> bool:
        """The original tool's per-call confirmation check."""
        check = getattr(self.original, "confirmation_required", None)
        return True if check is None else bool(await check(args))


class Toolset:
    """Base class: override ``get_tools``.

    Args:
        name: shown in conflict errors (default: the class name).
        tool_filter: names to keep, or a predicate ``(tool, ctx) -> bool``.
        prefix: prepended to every tool name as ``<prefix>_``.
    """

    def __init__(self, *, name: str | None = None, tool_filter: ToolFilter | None = None, prefix: str | None = None):
        self.name = name or type(self).__name__
        self.tool_filter = tool_filter
        self.prefix = prefix

    async def get_tools(self, ctx: Any) -> Sequence[Tool]:
        """The tools for this run (``ctx`` is a ``ReadonlyContext``); may be async or
        depend on state. Unfiltered and unprefixed."""
        raise NotImplementedError(f"toolset {self.name!r} does not implement get_tools()")

    def _keep(self, tool: Tool, ctx: Any) -> bool:
        f = self.tool_filter
        if f is None:
            return True
        if callable(f):
            return bool(f(tool, ctx))
        return tool.name in f

    async def resolve(self, ctx: Any) -> list[Tool]:
        """``get_tools`` with the filter and the prefix applied."""
        raw = await self.get_tools(ctx)
        tools = [t if isinstance(t, Tool) else FunctionTool(t) for t in raw]
        kept = [t for t in tools if self._keep(t, ctx)]
        return [PrefixedTool(t, self.prefix) for t in kept] if self.prefix else kept

    async def close(self) -> None:
        """Releases resources (connections); the default does nothing."""


class FunctionToolset(Toolset):
    """A fixed list of tools (``Tool`` objects or plain functions) as a toolset, so a
    prefix and a filter can apply to it."""

    def __init__(self, tools: Sequence[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._tools = [t if isinstance(t, Tool) else FunctionTool(t) for t in tools]

    async def get_tools(self, ctx: Any) -> Sequence[Tool]:
        """The tools given at construction, in order; ``ctx`` is unused."""
        return list(self._tools)
