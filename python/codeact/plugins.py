"""Plugins: cross-cutting hooks (logging, policy, caching, redaction) around a run.

Subclass ``Plugin`` and override the hooks you need; each may be sync or async. Plugins
listed in ``CodeActAgent(plugins=[...])`` compose in list order, and at every point they
run **before** the agent's own callbacks.

- ``on_user_message(ctx, content)``: before the message is stored; a ``Content`` (or
  ``str``) rewrites it, and the next plugin sees the rewrite.
- ``before_run(ctx)``: start of the agent's run, before ``before_agent``; a ``Content`` or
  ``str`` short-circuits: it is yielded as the agent's answer and the model is never called.
- ``after_run(ctx)``: end of the run, whatever the outcome; observe only.
- ``on_event(ctx, event)``: each event the agent yields, before it is stored; an ``Event``
  rewrites it.
- ``before_model(ctx, request)``: before each model call, before ``before_model``; an
  ``LlmRequest`` rewrites the request; an ``LlmResponse`` / ``Content`` / ``str``
  short-circuits the model (and the agent's ``before_model``).
- ``after_model(ctx, response)``: after each model call, before ``after_model``; an
  ``LlmResponse`` / ``Content`` / ``str`` rewrites the reply.
- ``before_tool(tool, args, tool_context)``: before each tool call, before ``before_tool``
  (mutate ``args`` in place to rewrite them); non-None short-circuits: the value is the
  call's result (the tool and the agent's ``before_tool`` do not run).
- ``on_tool_error(tool, args, tool_context, error)``: a call failed, before
  ``on_tool_error``; non-None is the fallback result.
- ``after_tool(tool, args, tool_context, result)``: after a successful call (or fallback),
  before ``after_tool``; non-None rewrites the result.

``ctx`` is the ``CallbackContext`` (``on_user_message`` gets a ``ReadonlyContext``). An
exception from a model or run hook aborts the run; from a tool hook it is raised into the
script like a tool failure.
"""

from __future__ import annotations

from typing import Any

__all__ = ("Plugin",)


class Plugin:
    """Base class of plugins; every hook does nothing by default.

    Args:
        name: shown in errors.
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name or type(self).__name__

    def on_user_message(self, ctx: Any, content: Any) -> Any:
        return None

    def before_run(self, ctx: Any) -> Any:
        return None

    def after_run(self, ctx: Any) -> Any:
        return None

    def on_event(self, ctx: Any, event: Any) -> Any:
        return None

    def before_model(self, ctx: Any, request: Any) -> Any:
        return None

    def after_model(self, ctx: Any, response: Any) -> Any:
        return None

    def before_tool(self, tool: Any, args: dict[str, Any], tool_context: Any) -> Any:
        return None

    def after_tool(self, tool: Any, args: dict[str, Any], tool_context: Any, result: Any) -> Any:
        return None

    def on_tool_error(self, tool: Any, args: dict[str, Any], tool_context: Any, error: str) -> Any:
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
