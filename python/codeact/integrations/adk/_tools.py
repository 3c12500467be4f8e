"""ADK ``FunctionTool`` / ``LongRunningFunctionTool`` as codeact tools."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from google.adk.tools import FunctionTool as AdkFunctionTool
from google.adk.tools import LongRunningFunctionTool as AdkLongRunningFunctionTool

from ...tools import FunctionTool, LongRunningFunctionTool, Tool

__all__ = ("from_adk",)


def _one(tool: Any) -> Tool:
    if isinstance(tool, Tool):
        return tool
    if not isinstance(tool, AdkFunctionTool):
        if callable(tool):
            return FunctionTool(tool)
        raise TypeError(f"expected an ADK FunctionTool, a codeact Tool or a function, got {type(tool).__name__}")
    func: Callable[..., Any] = tool.func
    confirm = tool._require_confirmation  # ADK keeps the flag (or predicate) here
    # ADK's predicate decides per call; codeact decides per tool: a predicate asks every time.
    requires_confirmation = bool(confirm) if not callable(confirm) else True
    if isinstance(tool, AdkLongRunningFunctionTool):
        return LongRunningFunctionTool(func, name=tool.name, description=tool.description or None)
    return FunctionTool(
        func, name=tool.name, description=tool.description or None, requires_confirmation=requires_confirmation
    )


def from_adk(tools: Iterable[Any]) -> list[Tool]:
    """Each ADK ``FunctionTool`` (or ``LongRunningFunctionTool``) as a codeact tool with the same
    name, description and parameters; ``require_confirmation=True`` (or a predicate, which
    becomes "always ask") maps to ``requires_confirmation``. codeact tools and plain functions
    pass through (functions wrapped in ``FunctionTool``)."""
    return [_one(t) for t in tools]
