"""langchain-core integration (``pip install 'codeact[langchain]'``): langchain tools
(``@tool`` functions, ``StructuredTool``, any ``BaseTool``) as codeact tools."""

from __future__ import annotations

from .. import require

require("langchain_core", "langchain")

from ._tools import InjectHook, LangChainTool, LangChainToolError, from_langchain  # noqa: E402

__all__ = ("InjectHook", "LangChainTool", "LangChainToolError", "from_langchain")
