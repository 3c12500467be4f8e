"""OpenTelemetry spans for agent runs, following the GenAI semantic conventions.

Only ``opentelemetry-api`` is needed (``pip install 'codeact[otel]'``); without it every
function here is a no-op. Spans go to whatever tracer provider the application configured
(the API's default provider drops them). Span names and attributes follow the OpenTelemetry
GenAI semantic conventions (``gen_ai.*``; "Semantic conventions for generative AI systems"):

- ``invoke_agent {agent}``: one agent run (``gen_ai.operation.name = "invoke_agent"``,
  ``gen_ai.agent.name``, ``gen_ai.conversation.id`` = the session id), INTERNAL;
- ``chat {model}``: one model call (``gen_ai.request.model``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, ``gen_ai.response.finish_reasons``), CLIENT;
- ``execute_tool {tool}``: one tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.type = "function"``), INTERNAL;
- ``execute_script``: one script advanced on the interpreter (codeact's own operation,
  ``codeact.script.*`` attributes: outcome, tool calls, stdout bytes), INTERNAL.

A failure sets the span status to ERROR with ``error.type`` (the exception class name, or
the run's error code). Message contents (the script, tool arguments and results) are
recorded only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true`` or
``capture_content=True`` is passed, as the conventions ask.

Usage (the agent loop does this; it is an async generator, so the run span is never made
"current" across a ``yield``: children get it as their explicit parent)::

    run = start_agent_run("coder", session_id=s.id, user_id=u, invocation_id=i)
    with run.chat("gpt-x") as chat:
        response = await model.generate_content(request)
        chat.record_response(response)
    with run.script(code) as script:
        ...
        script.record_step(step)
    with run.tool("search", call_key, args) as call:
        call.record_result(value)
    run.end(error_code=None)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:  # the optional dependency: opentelemetry-api
    from opentelemetry import trace as _trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # pragma: no cover - exercised only without the extra
    _trace = None  # type: ignore[assignment]

__all__ = ("AgentRun", "SpanHandle", "capture_content_enabled", "start_agent_run", "tracing_available")

TRACER_NAME = "codeact"
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_MAX_ATTRIBUTE_CHARS = 8192


def tracing_available() -> bool:
    """Whether ``opentelemetry-api`` is installed (spans are then created)."""
    return _trace is not None


def capture_content_enabled() -> bool:
    """Whether contents may be recorded: ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ATTRIBUTE_CHARS else text[:_MAX_ATTRIBUTE_CHARS] + "...[truncated]"


def _json(value: Any) -> str:
    try:
        return _clip(json.dumps(value, ensure_ascii=False, default=repr))
    except (TypeError, ValueError):
        return _clip(repr(value))


class SpanHandle:
    """One span (or nothing, without opentelemetry-api): set attributes and outcomes on it."""

    def __init__(self, span: Any, capture_content: bool) -> None:
        self.span = span
        self.capture_content = capture_content
        self._owned = False

    def set(self, key: str, value: Any) -> None:
        """Sets an attribute (skipped when ``value`` is None)."""
        if self.span is not None and value is not None:
            self.span.set_attribute(key, value)

    def fail(self, error_type: str, message: str = "") -> None:
        """Marks the span failed: status ERROR and ``error.type``."""
        if self.span is not None:
            self.span.set_attribute("error.type", error_type)
            self.span.set_status(Status(StatusCode.ERROR, message or error_type))

    def record_response(self, response: Any) -> None:
        """For a ``chat`` span: usage, finish reason and (when capturing) the reply text of an ``LlmResponse``."""
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.set("gen_ai.usage.input_tokens", usage.prompt_tokens)
            self.set("gen_ai.usage.output_tokens", usage.completion_tokens)
        reason = getattr(response, "finish_reason", None)
        if reason:
            self.set("gen_ai.response.finish_reasons", [reason])
        error = getattr(response, "error_code", None)
        if error:
            self.fail(error, getattr(response, "error_message", None) or "")
        if self.capture_content:
            self.set("gen_ai.output.messages", _json([{"role": "assistant", "content": getattr(response, "text", "")}]))

    def end(self) -> None:
        """Ends a span opened with ``AgentRun.begin_script`` (a no-op for context-managed spans)."""
        if self.span is not None and getattr(self, "_owned", False):
            self._owned = False
            self.span.end()

    def record_result(self, value: Any) -> None:
        """For an ``execute_tool`` span: the result (only when capturing contents)."""
        if self.capture_content:
            self.set("gen_ai.tool.call.result", _json(value))

    def record_step(self, step: Any) -> None:
        """For an ``execute_script`` span: the step the script stopped at (``Complete``,
        ``Raised``, ``Call``...) as ``codeact.script.outcome``; ``Raised`` fails the span with
        ``error.type = "script_error"``."""
        kind = type(step).__name__.lower()
        self.set("codeact.script.outcome", kind)
        stdout = getattr(step, "stdout", "") or ""
        if stdout:
            self.set("codeact.script.stdout_bytes", len(stdout.encode()))
        if kind == "raised":
            self.fail("script_error", getattr(step, "message", "")[:200])


class AgentRun:
    """The ``invoke_agent`` span of one run and the factory of its children."""

    def __init__(self, span: Any, agent_name: str, capture_content: bool, tracer: Any = None) -> None:
        self.handle = SpanHandle(span, capture_content)
        self.tracer = tracer
        self.agent_name = agent_name
        self.capture_content = capture_content
        self._ended = False

    @property
    def active(self) -> bool:
        """Whether spans are recorded (opentelemetry-api installed and a recording provider
        set); callers skip their span bookkeeping otherwise."""
        return self.handle.span is not None

    def _child(self, name: str, kind: Any, attributes: dict[str, Any]) -> Iterator[SpanHandle]:
        if _trace is None or self.handle.span is None:
            yield SpanHandle(None, self.capture_content)
            return
        parent = _trace.set_span_in_context(self.handle.span)
        attrs = {k: v for k, v in attributes.items() if v is not None}
        with self.tracer.start_as_current_span(
            name, context=parent, kind=kind, attributes=attrs, record_exception=True, set_status_on_exception=False
        ) as span:
            handle = SpanHandle(span, self.capture_content)
            try:
                yield handle
            except BaseException as exc:
                handle.fail(type(exc).__qualname__, str(exc))
                raise

    @contextmanager
    def chat(self, model: str | None, *, request: Any = None) -> Iterator[SpanHandle]:
        """A ``chat {model}`` span around one model call (CLIENT)."""
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "codeact",
            "gen_ai.request.model": model,
            "gen_ai.agent.name": self.agent_name,
        }
        config = getattr(request, "config", None)
        if config is not None:
            attrs["gen_ai.request.temperature"] = config.temperature
            attrs["gen_ai.request.max_tokens"] = config.max_output_tokens
            attrs["gen_ai.request.seed"] = config.seed
        if self.capture_content and request is not None:
            attrs["gen_ai.system_instructions"] = _clip(request.system_instruction or "")
            attrs["gen_ai.input.messages"] = _json(
                [{"role": c.role, "content": c.text} for c in getattr(request, "contents", [])]
            )
        kind = SpanKind.CLIENT if _trace is not None else None
        yield from self._child(f"chat {model}" if model else "chat", kind, attrs)

    @contextmanager
    def tool(self, name: str, call_id: str | None = None, args: Any = None) -> Iterator[SpanHandle]:
        """An ``execute_tool {name}`` span around one tool call (INTERNAL)."""
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if self.capture_content and args is not None:
            attrs["gen_ai.tool.call.arguments"] = _json(args)
        kind = SpanKind.INTERNAL if _trace is not None else None
        yield from self._child(f"execute_tool {name}", kind, attrs)

    @contextmanager
    def script(self, code: str | None = None, *, script_name: str = "main.py") -> Iterator[SpanHandle]:
        """An ``execute_script`` span around running (or resuming) one script (INTERNAL)."""
        attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_script", "codeact.script.name": script_name}
        if code is not None:
            attrs["codeact.script.bytes"] = len(code.encode())
            if self.capture_content:
                attrs["codeact.script.code"] = _clip(code)
        kind = SpanKind.INTERNAL if _trace is not None else None
        yield from self._child("execute_script", kind, attrs)

    def begin_script(self, code: str | None = None, *, script_name: str = "main.py") -> SpanHandle:
        """Starts an ``execute_script`` span that is not made current, so it may stay open
        across the agent's yields; end it with ``SpanHandle.end()``."""
        if _trace is None or self.handle.span is None:
            return SpanHandle(None, self.capture_content)
        attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_script", "codeact.script.name": script_name}
        if code is not None:
            attrs["codeact.script.bytes"] = len(code.encode())
            if self.capture_content:
                attrs["codeact.script.code"] = _clip(code)
        span = self.tracer.start_span(
            "execute_script",
            context=_trace.set_span_in_context(self.handle.span),
            kind=SpanKind.INTERNAL,
            attributes=attrs,
        )
        handle = SpanHandle(span, self.capture_content)
        handle._owned = True
        return handle

    def end(self, *, error_code: str | None = None, error_message: str | None = None, usage: Any = None) -> None:
        """Ends the run span (once): ``error_code`` fails it; ``usage`` (with ``prompt_tokens``
        / ``completion_tokens``) records the run's totals."""
        if self._ended:
            return
        self._ended = True
        if usage is not None:
            self.handle.set("gen_ai.usage.input_tokens", getattr(usage, "prompt_tokens", None))
            self.handle.set("gen_ai.usage.output_tokens", getattr(usage, "completion_tokens", None))
        if error_code:
            self.handle.fail(error_code, error_message or "")
        if self.handle.span is not None:
            self.handle.span.end()


def start_agent_run(
    agent_name: str,
    *,
    session_id: str | None = None,
    user_id: str | None = None,
    invocation_id: str | None = None,
    description: str | None = None,
    capture_content: bool | None = None,
    tracer_provider: Any = None,
) -> AgentRun:
    """Starts the ``invoke_agent {agent_name}`` span of one run (not made current: pass the
    returned ``AgentRun`` along and open children from it). End it with ``AgentRun.end``.

    Args:
        agent_name: ``gen_ai.agent.name``.
        session_id: ``gen_ai.conversation.id``.
        user_id: ``codeact.user.id``.
        invocation_id: ``codeact.invocation.id``.
        description: ``gen_ai.agent.description``.
        capture_content: record scripts, messages and tool arguments/results; default from
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
        tracer_provider: the provider to use (default: the global one the application set).
    """
    capture = capture_content_enabled() if capture_content is None else capture_content
    if _trace is None:
        return AgentRun(None, agent_name, capture)
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "codeact",
        "gen_ai.agent.name": agent_name,
        "gen_ai.agent.description": description,
        "gen_ai.conversation.id": session_id,
        "codeact.user.id": user_id,
        "codeact.invocation.id": invocation_id,
    }
    tracer = _trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
    span = tracer.start_span(
        f"invoke_agent {agent_name}",
        kind=SpanKind.INTERNAL,
        attributes={k: v for k, v in attrs.items() if v is not None},
    )
    if not span.is_recording():  # no SDK configured: skip the children's bookkeeping
        span.end()
        return AgentRun(None, agent_name, capture)
    return AgentRun(span, agent_name, capture, tracer)
