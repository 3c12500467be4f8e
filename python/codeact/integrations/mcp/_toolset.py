"""``McpToolset``: the tools of an MCP server, as codeact tools."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from ...exceptions import CodeActError
from ...tools import Tool
from ...tools._context import ToolContext
from ...toolsets import ToolFilter, Toolset

__all__ = ("McpTool", "McpToolError", "McpToolset")


class McpToolError(RuntimeError, CodeActError):
    """An MCP tool answered with ``isError``; the message is the text it returned. A
    ``RuntimeError``, so a script can catch it."""


def _wraps_result(output_schema: Mapping[str, Any] | None) -> bool:
    """Whether the server wraps a non-object return as ``{"result": ...}`` (its output schema
    has the single required property ``result``, as the SDK's servers write it)."""
    if not output_schema:
        return False
    props = output_schema.get("properties") or {}
    return set(props) == {"result"} and list(output_schema.get("required") or []) == ["result"]


def _result_value(result: CallToolResult, output_schema: Mapping[str, Any] | None = None) -> Any:
    """A call's result as plain data: ``structuredContent`` when the server gave it (unwrapped
    from ``{"result": x}`` when the output schema says it wraps), else the text of its text
    blocks (joined by newlines), else the content blocks as dicts."""
    structured = result.structured_content
    if structured is not None:
        if _wraps_result(output_schema) and isinstance(structured, dict) and set(structured) == {"result"}:
            return structured["result"]
        return structured
    texts = [b.text for b in result.content if isinstance(b, TextContent)]
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content]


class McpTool(Tool):
    """One tool of an MCP server; ``run`` sends ``tools/call`` through the toolset's connection.

    Raises ``McpToolError`` when the server reports the call failed (``isError``).
    """

    def __init__(
        self,
        toolset: McpToolset,
        name: str,
        description: str,
        parameters: dict[str, Any],
        output_schema: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        super().__init__(name, description, parameters, **kwargs)
        self.toolset = toolset
        self.output_schema = output_schema

    async def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        async with self.toolset._client() as client:
            result = await client.call_tool(self.name, args, read_timeout_seconds=self.toolset.read_timeout)
        if result.is_error:
            raise McpToolError(str(_result_value(result)) or f"MCP tool {self.name!r} failed")
        return _result_value(result, self.output_schema)


class McpToolset(Toolset):
    """The tools of one MCP server.

    Args:
        server: a URL (streamable HTTP), ``mcp.StdioServerParameters`` (launch a server), or
            anything ``mcp.Client`` accepts (an in-process ``MCPServer``, a transport).
        require_confirmation: ``True`` for every tool, or the names of the tools that need a
            human's approval before each call (codeact's human-in-the-loop flow).
        read_timeout: seconds to wait for each answer, or None for the SDK's default.
        name / tool_filter / prefix: as for every ``Toolset``.

    Connection: inside ``async with toolset:`` one connection (one server process for stdio)
    serves every listing and call; outside it, each listing and each call opens its own
    connection and closes it (correct, but a stdio server is then started per call). The tool
    list is read once per connection.
    """

    def __init__(
        self,
        server: Any,
        *,
        require_confirmation: bool | Sequence[str] = False,
        read_timeout: float | None = None,
        name: str | None = None,
        tool_filter: ToolFilter | None = None,
        prefix: str | None = None,
    ) -> None:
        super().__init__(name=name or "mcp", tool_filter=tool_filter, prefix=prefix)
        self.server = server
        self.require_confirmation = require_confirmation
        self.read_timeout = read_timeout
        self._open: Client | None = None
        self._tools: list[Tool] | None = None
        self._lock = anyio.Lock()

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> McpToolset:
        """A server launched as ``command args...``, spoken to over stdin/stdout."""
        params = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None, cwd=os.fspath(cwd) if cwd else None
        )
        return cls(params, **kwargs)

    @classmethod
    def http(cls, url: str, **kwargs: Any) -> McpToolset:
        """A server at ``url`` (for example ``http://127.0.0.1:8000/mcp``), over streamable HTTP."""
        return cls(url, **kwargs)

    async def __aenter__(self) -> McpToolset:
        client = Client(self.server)
        await client.__aenter__()
        self._open = client
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connection held by ``async with`` (stops a stdio server)."""
        client, self._open, self._tools = self._open, None, None
        if client is not None:
            await client.__aexit__(None, None, None)

    def _client(self) -> AbstractAsyncContextManager[Client]:
        return self._held() if self._open is not None else Client(self.server)

    @asynccontextmanager
    async def _held(self) -> AsyncIterator[Client]:
        assert self._open is not None
        yield self._open

    def _confirm(self, name: str) -> bool:
        rc = self.require_confirmation
        return rc if isinstance(rc, bool) else name in rc

    async def get_tools(self, ctx: Any = None) -> Sequence[Tool]:
        """Lists the server's tools (``tools/list``, all pages)."""
        async with self._lock:
            if self._tools is not None and self._open is not None:
                return list(self._tools)
            async with self._client() as client:
                listed = []
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    listed.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
            tools: list[Tool] = [
                McpTool(
                    self,
                    t.name,
                    t.description or "",
                    dict(t.input_schema),
                    dict(t.output_schema) if t.output_schema else None,
                    requires_confirmation=self._confirm(t.name),
                )
                for t in listed
            ]
            if self._open is not None:
                self._tools = tools
            return list(tools)

    def as_callables(self, tools: Sequence[Tool]) -> dict[str, Callable[..., Any]]:
        """``{name: async callable}`` for ``MontyRuntime.arun(code, tools=...)``."""

        def bind(tool: Tool) -> Callable[..., Any]:
            async def call(**args: Any) -> Any:
                return await tool.run(args, None)  # type: ignore[arg-type]

            return call

        return {t.name: bind(t) for t in tools}
