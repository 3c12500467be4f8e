"""A small MCP server (official ``mcp`` SDK) used by the MCP example and the tests.

Run over stdio: ``python examples/mcp_toolset/server.py``
Run over streamable HTTP: ``python examples/mcp_toolset/server.py --http 8765`` (serves ``/mcp``).
"""

from __future__ import annotations

import argparse

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("inventory", log_level="WARNING")
STOCK = {"bread": 12, "cheese": 3, "wine": 0}


@server.tool()
def stock(item: str) -> int:
    """How many of an item are in stock."""
    if item not in STOCK:
        raise ToolError(f"unknown item {item!r}")
    return STOCK[item]


@server.tool()
def items() -> list[str]:
    """The names of all items, sorted."""
    return sorted(STOCK)


@server.tool()
def restock(item: str, count: int) -> dict[str, int]:
    """Adds ``count`` units of ``item``; returns the new level."""
    STOCK[item] = STOCK.get(item, 0) + count
    return {"item_count": STOCK[item]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on 127.0.0.1:PORT")
    ns = parser.parse_args()
    if ns.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=ns.http)


if __name__ == "__main__":
    main()
