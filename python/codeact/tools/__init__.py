"""Tools: what a script reaches through ``call_tool("name", {...})``."""

from ._base import Tool
from ._context import State, ToolContext

__all__ = ("State", "Tool", "ToolContext")
