"""Adapters to the agent stacks people already use, each behind its own extra.

- ``codeact.integrations.pydantic_ai`` (``pip install 'codeact[pydantic-ai]'``): a pydantic-ai
  toolset whose ``run_code`` tool runs a script calling the agent's other tools in process,
  and any pydantic-ai model as a codeact model.
- ``codeact.integrations.mcp`` (``codeact[mcp]``): an MCP server's tools as a codeact toolset,
  over stdio or streamable HTTP, with the official ``mcp`` SDK.
- ``codeact.integrations.langchain`` (``codeact[langchain]``): langchain-core tools as codeact tools.

Importing one without its extra raises ``ImportError`` naming the ``pip install`` to run.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ("require",)


def require(module: str, extra: str) -> ModuleType:
    """Imports ``module`` or raises ``ImportError`` naming ``pip install 'codeact[<extra>]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this integration needs {module!r}, which is not installed: pip install 'codeact[{extra}]'"
        ) from exc
