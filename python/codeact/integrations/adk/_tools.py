"""ADK ``FunctionTool`` / ``LongRunningFunctionTool`` as codeact tools."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from google.adk.tools import FunctionTool as AdkFunctionTool
from google.adk.tools import LongRunningFunctionTool as AdkLongRunningFunctionTool

from ...tools import FunctionTool, LongRunningFunctionTool, Tool

__all__ = ("from_adk",)


class _PredicateTool(FunctionTool):
    """An ADK function tool whose ``require_confirmation`` is a predicate: it is asked per
    call with the call's arguments, as ADK's ``FunctionTool.check_require_confirmation``
    does (sync or async; a ``tool_context`` parameter of the predicate gets None)."""

    def __init__(self, func: Callable[..., Any], predicate: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(func, requires_confirmation=True, **kwargs)
        self._predicate = predicate
        params: Mapping[str, inspect.Parameter]
        try:
            params = inspect.signature(predicate).parameters
        except (TypeError, ValueError):
            params = {}
        self._takes_any = not params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        self._names = frozenset(params)

    async def confirmation_required(self, args: dict[str, Any]) -> bool:
        kwargs = dict(args) if self._takes_any else {k: v for k, v in args.items() if k in self._names}
        if "tool_context" in self._names and "tool_context" not in kwargs:
            kwargs["tool_context"] = None
        verdict = self._predicate(**kwargs)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return bool(verdict)


def _one(tool: Any, reads: bool | frozenset[str]) -> Tool:
    if isinstance(tool, Tool):
        return tool
    if not isinstance(tool, AdkFunctionTool):
        if callable(tool):
            made = FunctionTool(tool)
            made.read_only = reads if isinstance(reads, bool) else made.name in reads
            return made
        raise TypeError(f"expected an ADK FunctionTool, a codeact Tool or a function, got {type(tool).__name__}")
    func: Callable[..., Any] = tool.func
    confirm = tool._require_confirmation  # ADK keeps the flag (or predicate) here
    read_only = reads if isinstance(reads, bool) else tool.name in reads
    if isinstance(tool, AdkLongRunningFunctionTool):
        return LongRunningFunctionTool(func, name=tool.name, description=tool.description or None)
    if callable(confirm):
        return _PredicateTool(func, confirm, name=tool.name, description=tool.description or None, read_only=read_only)
    return FunctionTool(
        func,
        name=tool.name,
        description=tool.description or None,
        requires_confirmation=bool(confirm),
        read_only=read_only,
    )


def from_adk(tools: Iterable[Any], *, read_only: bool | Iterable[str] = False) -> list[Tool]:
    """Each ADK ``FunctionTool`` (or ``LongRunningFunctionTool``) as a codeact tool with the same
    name, description and parameters. ``require_confirmation=True`` maps to
    ``requires_confirmation``; a predicate is called per call with the call's arguments (as
    keywords, sync or async, as ADK does) and the call waits for a human only when it returns
    true. codeact tools pass through as they are; plain functions are wrapped in
    ``FunctionTool``.

    ``read_only`` declares the tools that change nothing outside the script (``True``: every
    function tool converted here, or their names), as ``Tool(read_only=True)``: ADK has no
    standard flag for it. A long-running tool is never read-only (its result arrives later)."""
    reads = read_only if isinstance(read_only, bool) else frozenset(read_only)
    return [_one(t, reads) for t in tools]
