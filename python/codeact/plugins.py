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

The hooks are typed against Protocols this module defines, so plugins need not import the
agent: ``ReadonlyContextProtocol`` (what ``ReadonlyContext`` offers),
``CallbackContextProtocol`` (``CallbackContext``), ``ModelRequest`` (``LlmRequest``) and
``ModelResponse`` (``LlmResponse``). Annotate overrides with these (a narrower annotation,
such as ``CallbackContext``, breaks the override for a type checker). Each hook returns its
value or an awaitable of it (``MaybeAwaitable``); the ``*Hook`` aliases name the shapes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeAlias, TypeVar

from .events import Content, Event, EventActions
from .services import Artifact, MemoryEntry
from .sessions import Session
from .tools import State, Tool, ToolContext

__all__ = (
    "AfterModelHook",
    "AfterRunHook",
    "AfterToolHook",
    "BeforeModelHook",
    "BeforeRunHook",
    "BeforeToolHook",
    "CallbackContextProtocol",
    "MaybeAwaitable",
    "ModelRequest",
    "ModelResponse",
    "OnEventHook",
    "OnToolErrorHook",
    "OnUserMessageHook",
    "Plugin",
    "ReadonlyContextProtocol",
)

T = TypeVar("T")

MaybeAwaitable: TypeAlias = T | Awaitable[T]
"""A hook's value, or an awaitable of it (hooks may be sync or async)."""


class ReadonlyContextProtocol(Protocol):
    """What ``on_user_message`` sees (``codeact.agent.ReadonlyContext``): the run's identity,
    the user's message and session state, read only."""

    @property
    def state(self) -> Mapping[str, Any]:
        """Session state, with this run's pending changes."""
        ...

    @property
    def agent_name(self) -> str: ...

    @property
    def invocation_id(self) -> str: ...

    @property
    def app_name(self) -> str: ...

    @property
    def user_id(self) -> str: ...

    @property
    def session(self) -> Session: ...

    @property
    def user_content(self) -> Content | None: ...


class CallbackContextProtocol(ReadonlyContextProtocol, Protocol):
    """What the run and model hooks see (``codeact.agent.CallbackContext``): state writes
    are recorded in ``actions.state_delta`` and ride on the next event; the runner's
    services are reached with the same accessors as ``ToolContext``.

    Raises:
        ServiceNotConfiguredError: from a service accessor when the runner has no such
            service.
    """

    actions: EventActions

    @property
    def state(self) -> State:
        """Session state; writes are recorded in ``actions.state_delta``."""
        ...

    async def save_artifact(self, filename: str, artifact: Artifact | str | bytes) -> int:
        """Store a new version of ``filename``; returns its version number."""
        ...

    async def load_artifact(self, filename: str, version: int | None = None) -> Artifact | None:
        """The artifact (the latest version by default), or None."""
        ...

    async def list_artifacts(self) -> list[str]:
        """The session's artifact file names."""
        ...

    async def search_memory(self, query: str) -> list[MemoryEntry]:
        """Memory entries matching ``query``."""
        ...

    def get_secret(self, name: str) -> str:
        """The secret's value."""
        ...


class ModelRequest(Protocol):
    """One model call as the model hooks see it (``codeact.models.LlmRequest``).

    Attributes:
        model: model id, or None for the adapter's own.
        contents: the transcript, oldest first.
        system_instruction: the system prompt, or None.
    """

    model: str | None
    contents: list[Content]
    system_instruction: str | None


class ModelResponse(Protocol):
    """A model reply as the model hooks see it (``codeact.models.LlmResponse``).

    Attributes:
        content: the message, or None when the model produced nothing.
        finish_reason: why generation stopped, as the endpoint said.
        error_code / error_message: a failure reported inside the reply.
        partial: True for an incremental chunk of a streamed reply.
    """

    content: Content | None
    finish_reason: str | None
    error_code: str | None
    error_message: str | None
    partial: bool

    @property
    def text(self) -> str:
        """The non-thought text of ``content`` (``""`` when there is none)."""
        ...


OnUserMessageHook = Callable[[ReadonlyContextProtocol, Content], MaybeAwaitable[Content | str | None]]
"""``on_user_message(ctx, content)``: a ``Content`` or ``str`` rewrites the message."""

BeforeRunHook = Callable[[CallbackContextProtocol], MaybeAwaitable[Content | str | None]]
"""``before_run(ctx)``: a ``Content`` or ``str`` is the answer; the model is never called."""

AfterRunHook = Callable[[CallbackContextProtocol], MaybeAwaitable[None]]
"""``after_run(ctx)``: observe only."""

OnEventHook = Callable[[CallbackContextProtocol, Event], MaybeAwaitable[Event | None]]
"""``on_event(ctx, event)``: an ``Event`` replaces the event."""

BeforeModelHook = Callable[
    [CallbackContextProtocol, ModelRequest],
    MaybeAwaitable[ModelRequest | ModelResponse | Content | str | None],
]
"""``before_model(ctx, request)``: an ``LlmRequest`` rewrites the request; a reply
(``LlmResponse``, ``Content`` or ``str``) skips the model."""

AfterModelHook = Callable[
    [CallbackContextProtocol, ModelResponse], MaybeAwaitable[ModelResponse | Content | str | None]
]
"""``after_model(ctx, response)``: a reply (``LlmResponse``, ``Content`` or ``str``) replaces it."""

BeforeToolHook = Callable[[Tool, dict[str, Any], ToolContext], MaybeAwaitable[Any]]
"""``before_tool(tool, args, tool_context)``: a non-None value is the call's result."""

AfterToolHook = Callable[[Tool, dict[str, Any], ToolContext, Any], MaybeAwaitable[Any]]
"""``after_tool(tool, args, tool_context, result)``: a non-None value replaces the result."""

OnToolErrorHook = Callable[[Tool, dict[str, Any], ToolContext, str], MaybeAwaitable[Any]]
"""``on_tool_error(tool, args, tool_context, error)``: a non-None value is the fallback result."""


class Plugin:
    """Base class of plugins; every hook does nothing by default (returns None).

    Override a hook as ``def`` or ``async def``; tool values (``args`` values, results,
    fallbacks) are the plain data tools exchange with the script, hence ``Any``.

    Args:
        name: shown in errors.
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name or type(self).__name__

    def on_user_message(self, ctx: ReadonlyContextProtocol, content: Content) -> MaybeAwaitable[Content | str | None]:
        """Called before the user's message is stored: a ``Content`` or ``str`` rewrites it, None keeps it."""
        return None

    def before_run(self, ctx: CallbackContextProtocol) -> MaybeAwaitable[Content | str | None]:
        """Called once at the start of a run: a ``Content`` or ``str`` is the answer and the model is
        never called; None lets the run go ahead."""
        return None

    def after_run(self, ctx: CallbackContextProtocol) -> MaybeAwaitable[None]:
        """Called once when the run ends (answered, suspended or stopped); observe only."""
        return None

    def on_event(self, ctx: CallbackContextProtocol, event: Event) -> MaybeAwaitable[Event | None]:
        """Called for each event before it is stored: an ``Event`` replaces it, None keeps it."""
        return None

    def before_model(
        self, ctx: CallbackContextProtocol, request: ModelRequest
    ) -> MaybeAwaitable[ModelRequest | ModelResponse | Content | str | None]:
        """Called before each model request: an ``LlmRequest`` rewrites the request; a reply
        (``LlmResponse``, ``Content`` or ``str``) is used instead of calling the model."""
        return None

    def after_model(
        self, ctx: CallbackContextProtocol, response: ModelResponse
    ) -> MaybeAwaitable[ModelResponse | Content | str | None]:
        """Called with each model reply before its script is extracted: a reply (``LlmResponse``,
        ``Content`` or ``str``) replaces it, None keeps it."""
        return None

    def before_tool(self, tool: Tool, args: dict[str, Any], tool_context: ToolContext) -> MaybeAwaitable[Any]:
        """Called before a tool runs with its validated arguments: a non-None value (plain data) is
        the call's result and the tool does not run."""
        return None

    def after_tool(
        self, tool: Tool, args: dict[str, Any], tool_context: ToolContext, result: Any
    ) -> MaybeAwaitable[Any]:
        """Called after a tool returned ``result``: a non-None value (plain data) replaces it."""
        return None

    def on_tool_error(
        self, tool: Tool, args: dict[str, Any], tool_context: ToolContext, error: str
    ) -> MaybeAwaitable[Any]:
        """Called when a tool raised (``error`` is its message): a non-None value (plain data) is the
        call's result instead of the exception the script would see."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
