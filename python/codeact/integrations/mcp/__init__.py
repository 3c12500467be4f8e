"""MCP integration (``pip install 'codeact[mcp]'``): an MCP server's tools as a codeact toolset.

``McpToolset.stdio(command, args)`` launches a server and talks over its stdin/stdout;
``McpToolset.http(url)`` connects over streamable HTTP. Built on the official ``mcp`` SDK's
``mcp.Client``.
"""

from __future__ import annotations

from .. import require

require("mcp", "mcp")

from ._toolset import McpConnectionError, McpTool, McpToolError, McpToolset  # noqa: E402

__all__ = ("McpConnectionError", "McpTool", "McpToolError", "McpToolset")
