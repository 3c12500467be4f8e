"""How tools are listed for the model: defined in ``codeact.runtime._render`` (the runtime
renders the tools it serves), re-exported here."""

from ..runtime._render import ordered_params, python_type, render_call_tool, render_catalog, render_functions

__all__ = ("ordered_params", "python_type", "render_call_tool", "render_catalog", "render_functions")
