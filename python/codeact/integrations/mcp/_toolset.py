"""``McpToolset``: the tools of an MCP server, as codeact tools."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, CallToolResult, TextContent

from ...exceptions import McpConnectionError, McpToolError

if sys.version_info < (3, 11):  # pragma: no cover - anyio brings the backport there
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found,unused-ignore]
from ...tools import Tool
from ...tools._context import ToolContext
from ...toolsets import ToolFilter, Toolset

__all__ = ("McpConnectionError", "McpTool", "McpToolError", "McpToolset")


_SDK_PREFIX = re.compile(r"^Error executing tool [^:]+: ")


def _connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection is gone (not that the call failed)."""
    if isinstance(exc, MCPError):
        return exc.error.code == CONNECTION_CLOSED
    if isinstance(exc, BaseExceptionGroup):
        return any(_connection_lost(e) for e in exc.exceptions)
    return isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError))


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


def _read_only_hint(tool: Any) -> bool:
    """Whether a listed MCP tool's annotations say ``readOnlyHint: true``."""
    annotations = getattr(tool, "annotations", None)
    if annotations is None:
        return False
    if isinstance(annotations, Mapping):
        return annotations.get("readOnlyHint") is True or annotations.get("read_only_hint") is True
    return getattr(annotations, "read_only_hint", None) is True or getattr(annotations, "readOnlyHint", None) is True


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
        """Call the tool on the MCP server through its toolset's session.

        Returns:
            ``structuredContent`` when the server gave it (unwrapped from ``{"result": x}`` when the
            output schema wraps), else the joined text blocks, else the content blocks as dicts.

        Raises:
            McpToolError: the server reported ``isError`` (its message, without the SDK's prefix).
        """
        result = await self.toolset._call(self.name, args)
        if result.is_error:
            text = _SDK_PREFIX.sub("", str(_result_value(result)))
            raise McpToolError(text or f"MCP tool {self.name!r} failed")
        return _result_value(result, self.output_schema)


class McpToolset(Toolset):
    """The tools of one MCP server.

    Args:
        server: a URL (streamable HTTP), ``mcp.StdioServerParameters`` (launch a server), or
            anything ``mcp.Client`` accepts (an in-process ``MCPServer``, a transport).
        require_confirmation: ``True`` for every tool, or the names of the tools that need a
            human's approval before each call (codeact's human-in-the-loop flow): the server's
            name of a tool, or its name with the toolset's ``prefix``.
        read_timeout: seconds to wait for each answer, or None for the SDK's default.
        trust_read_only_hints: take a tool's ``readOnlyHint`` annotation as codeact's
            ``read_only`` (its calls write no journal intent; their outcomes become durable
            with the turn's next durable write). Default False: MCP says hints are hints,
            untrusted unless the server is, so every call is an effect.
        name / tool_filter / prefix: as for every ``Toolset``.

    Connection: use ``async with toolset:``. Inside it one connection (one server process for
    stdio) serves every listing and call, and a connection that breaks (the server died or
    restarted) is reopened once per call before the call fails with ``McpConnectionError``, a
    host error the run stops with. Without ``async with`` each listing and each call opens its
    own connection and closes it: correct, but a stdio server is then started per call
    (seconds each for a Python server). The tool list is read once per connection.
    """

    def __init__(
        self,
        server: Any,
        *,
        require_confirmation: bool | Sequence[str] = False,
        read_timeout: float | None = None,
        trust_read_only_hints: bool = False,
        name: str | None = None,
        tool_filter: ToolFilter | None = None,
        prefix: str | None = None,
    ) -> None:
        super().__init__(name=name or "mcp", tool_filter=tool_filter, prefix=prefix)
        self.server = server
        self.require_confirmation = require_confirmation
        self.trust_read_only_hints = trust_read_only_hints
        self.read_timeout = read_timeout
        self._open: Client | None = None
        self._tools: list[Tool] | None = None
        self._lock = anyio.Lock()
        self._group: Any = None  # the task group holding the connection's owner task
        self._redial: anyio.Event | None = None  # set: the owner closes the connection and opens another
        self._dialed: anyio.Event | None = None  # set by the owner once a connection is open (or failed)
        self._dial_error: BaseException | None = None
        self._closing = False

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
        # The connection is opened and closed by one owner task (anyio wants a context entered
        # and left in the same task); calls from any task use it, and ask it to reconnect.
        self._closing = False
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        try:
            await self._dial()
        except BaseException:
            await self.close()
            raise
        if self._dial_error is not None:
            error, self._dial_error = self._dial_error, None
            await self.close()
            raise McpConnectionError(f"cannot connect to MCP server {self.name!r}: {_describe(error)}") from error
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connection held by ``async with`` (stops a stdio server)."""
        group, self._group = self._group, None
        self._closing = True
        if self._redial is not None:
            self._redial.set()
        self._open, self._tools = None, None
        if group is not None:
            await group.__aexit__(None, None, None)

    async def _dial(self) -> None:
        """Starts the owner task on a new connection and waits until it is open (or failed)."""
        assert self._group is not None
        self._dialed = anyio.Event()
        self._redial = anyio.Event()
        self._dial_error = None
        self._group.start_soon(self._own, self._dialed, self._redial)
        await self._dialed.wait()

    async def _own(self, dialed: anyio.Event, redial: anyio.Event) -> None:
        try:
            async with Client(self.server) as client:
                self._open, self._tools = client, None
                dialed.set()
                await redial.wait()
        except BaseException as exc:  # the owner must never take the host's task down
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                raise
            if not dialed.is_set():
                self._dial_error = exc
        finally:
            dialed.set()

    async def _reconnect(self) -> None:
        async with self._lock:
            old = self._redial
            self._open, self._tools = None, None
            if old is not None:
                old.set()
            await self._dial()

    async def _call(self, name: str, args: dict[str, Any]) -> CallToolResult:
        """``tools/call``: on the held connection (reopened once if it broke), else on a
        connection of its own."""
        if self._group is None:
            try:
                async with Client(self.server) as client:
                    return await client.call_tool(name, args, read_timeout_seconds=self.read_timeout)
            except Exception as exc:
                if _connection_lost(exc):
                    raise McpConnectionError(f"MCP server {self.name!r} is unreachable: {_describe(exc)}") from exc
                raise
        first: BaseException | None = None
        for attempt in range(2):
            live = self._open
            if live is None or attempt:
                await self._reconnect()
                live = self._open
                if live is None:
                    raise McpConnectionError(
                        f"MCP server {self.name!r} is unreachable: the connection broke "
                        f"({_describe(first) if first else 'closed'}) and reconnecting failed "
                        f"({_describe(self._dial_error) if self._dial_error else 'no connection'}); "
                        f"{name!r} did not run"
                    ) from (self._dial_error or first)
            try:
                return await live.call_tool(name, args, read_timeout_seconds=self.read_timeout)
            except Exception as exc:
                if not _connection_lost(exc):
                    raise
                first = first or exc
        raise McpConnectionError(
            f"MCP server {self.name!r} is unreachable: the connection broke again right after reconnecting "
            f"({_describe(first) if first else 'closed'})"
        ) from first

    def _confirm(self, name: str) -> bool:
        rc = self.require_confirmation
        if isinstance(rc, bool):
            return rc
        return name in rc or (bool(self.prefix) and f"{self.prefix}_{name}" in rc)

    async def get_tools(self, ctx: Any = None) -> Sequence[Tool]:
        """Lists the server's tools (``tools/list``, all pages).

        Raises:
            McpConnectionError: the server cannot be reached.
        """
        async with self._lock:
            if self._tools is not None and self._open is not None:
                return list(self._tools)
            try:
                if self._open is not None:
                    listed = await self._list(self._open)
                else:
                    async with Client(self.server) as client:
                        listed = await self._list(client)
            except Exception as exc:
                if _connection_lost(exc):
                    raise McpConnectionError(f"MCP server {self.name!r} is unreachable: {_describe(exc)}") from exc
                raise
            tools: list[Tool] = [
                McpTool(
                    self,
                    t.name,
                    t.description or "",
                    dict(t.input_schema),
                    dict(t.output_schema) if t.output_schema else None,
                    requires_confirmation=self._confirm(t.name),
                    read_only=self.trust_read_only_hints and _read_only_hint(t),
                )
                for t in listed
            ]
            if self._open is not None:
                self._tools = tools
            return list(tools)

    @staticmethod
    async def _list(client: Client) -> list[Any]:
        listed: list[Any] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return listed

    def as_callables(self, tools: Sequence[Tool]) -> dict[str, Callable[..., Any]]:
        """``{name: async callable}`` for ``MontyRuntime.arun(code, tools=...)``."""

        def bind(tool: Tool) -> Callable[..., Any]:
            async def call(**args: Any) -> Any:
                return await tool.run(args, None)  # type: ignore[arg-type]

            return call

        return {t.name: bind(t) for t in tools}


def _describe(exc: BaseException) -> str:
    """One line for ``exc`` (the first leaf of an exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
