"""Toolsets: groups of tools resolved per invocation.

A ``Toolset`` returns its tools for the current run, so the tools may depend on session
state, the user or anything else in the read-only context. ``CodeActAgent(toolsets=[...])``
resolves every toolset at the start of each (fresh or resumed) run: static ``tools`` first,
then each toolset in order. Two tools with the same name end the run with an event
(``error_code="codeact.toolset"``) naming the conflict.

Each toolset can filter its tools (``tool_filter``: a list of names, or a predicate
``(tool, ctx) -> bool``) and prefix their names (``prefix="crm"`` exposes ``lookup`` as
``crm_lookup``; the filter sees the unprefixed names). A tool name in an agent setting
(``require_tool_confirmation``) matches a prefixed tool by either name: ``tool_names(tool)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .tools import FunctionTool, Tool
from .tools._context import ToolContext

__all__ = ("FunctionToolset", "PrefixedTool", "ToolFilter", "Toolset", "tool_names")

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
            on_in_doubt=getattr(tool, "on_in_doubt", "rerun"),
            read_only=bool(getattr(tool, "read_only", False)),
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


def tool_names(tool: Tool) -> tuple[str, ...]:
    """The names an agent setting may use for ``tool``: its exposed name (the one scripts
    call), then its name before each toolset prefix (``crm_delete_record``, then
    ``delete_record``; a toolset that prefixes tools another one prefixed adds one name per
    prefix). A tool with no prefix has one name."""
    names = [tool.name]
    while isinstance(tool, PrefixedTool):
        tool = tool.original
        if tool.name not in names:
            names.append(tool.name)
    return tuple(names)


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
        return self._finish(await self.get_tools(ctx), ctx)

    def _finish(self, raw: Sequence[Any], ctx: Any) -> list[Tool]:
        """``raw`` as tools, filtered and prefixed."""
        tools = [t if isinstance(t, Tool) else FunctionTool(t) for t in raw]
        kept = [t for t in tools if self._keep(t, ctx)]
        return [PrefixedTool(t, self.prefix) for t in kept] if self.prefix else kept

    def static_tools(self) -> list[Tool] | None:
        """The tools every run gets (filtered and prefixed, as ``resolve`` gives them) when
        they are known without a run, else None (the default: they are listed at run start).
        ``CodeActAgent`` checks the tool names of its settings against them when it is built;
        names it cannot match there are checked when the run starts."""
        return None

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

    def static_tools(self) -> list[Tool] | None:
        """The tools given at construction, filtered and prefixed; None when a subclass lists
        its own (``get_tools``) or the filter is a predicate (it reads the run's context)."""
        cls = type(self)
        if (
            cls.get_tools is not FunctionToolset.get_tools
            or cls.resolve is not Toolset.resolve
            or callable(self.tool_filter)
        ):
            return None
        return self._finish(self._tools, None)
