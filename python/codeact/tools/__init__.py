"""Tools: what a script reaches through ``call_tool("name", {...})``.

This module holds the minimal ``Tool`` interface the runtime seam needs (SPEC §2):
``name``, ``description``, ``parameters`` (a JSON schema) and ``is_long_running``.
"""

from __future__ import annotations

from typing import Any

__all__ = ("Tool",)


class Tool:
    """A tool a script can call.

    Args:
        name: the name scripts call it by; any string ("fetch-cart", "class" work).
        description: one paragraph for the model.
        parameters: a JSON schema (``type: object``) of its arguments, or None.
        is_long_running: the tool's result arrives later; the run suspends on it.
    """

    def __init__(
        self,
        name: str,
        description: str = "",
        parameters: dict[str, Any] | None = None,
        *,
        is_long_running: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a tool needs a non-empty string name")
        self.name = name
        self.description = description
        self.parameters = parameters
        self.is_long_running = is_long_running

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
