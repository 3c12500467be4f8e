"""Tools: what a script reaches through ``call_tool("name", {...})``."""

from ._base import Tool
from ._context import State, ToolConfirmationAnswer, ToolContext
from ._function import FunctionTool, LongRunningFunctionTool, ToolArgumentError, tool

__all__ = (
    "FunctionTool",
    "LongRunningFunctionTool",
    "State",
    "Tool",
    "ToolArgumentError",
    "ToolConfirmationAnswer",
    "ToolContext",
    "tool",
)
