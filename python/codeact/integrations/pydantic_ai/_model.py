"""``PydanticAIModel``: any pydantic-ai model (``"openai:gpt-5"``, ``AnthropicModel(...)``,
``TestModel()``, ``FunctionModel(...)``) as a codeact model (the ``Llm`` protocol).

Requests go through ``pydantic_ai.direct.model_request`` without tools: codeact's model only
writes text (the script). Works under asyncio and trio as far as the pydantic-ai model does
(the in-memory ``TestModel``/``FunctionModel`` do; HTTP providers use httpx, which does too).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai import exceptions as pai_exceptions
from pydantic_ai.direct import model_request, model_request_stream
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    SystemPromptPart,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from ...events import Content, Part
from ...exceptions import ModelError, ModelRateLimitError, ModelTimeoutError
from ...models import BaseLlm, LlmRequest, LlmResponse, Usage

__all__ = ("PydanticAIModel",)


def _text_of(part: Part) -> str | None:
    if part.text is not None:
        return part.text
    if part.function_call is not None:
        return f"[call {part.function_call.name}({part.function_call.args})]"
    if part.function_response is not None:
        return f"[result of {part.function_response.name}: {part.function_response.response}]"
    return None


def to_messages(request: LlmRequest) -> list[ModelMessage]:
    """codeact's transcript as pydantic-ai messages: user turns as ``ModelRequest`` with a
    ``UserPromptPart`` (the system instruction as a ``SystemPromptPart`` in the first one),
    model turns as ``ModelResponse`` with ``TextPart``s; thought parts are not sent back."""
    messages: list[ModelMessage] = []
    pending: list[Any] = [SystemPromptPart(request.system_instruction)] if request.system_instruction else []
    for content in request.contents:
        role = content.role
        texts = [t for p in content.parts if not p.thought and (t := _text_of(p)) is not None]
        if role == "system":
            pending.extend(SystemPromptPart(t) for t in texts)
        elif role in ("model", "assistant"):
            if pending:
                messages.append(ModelRequest(parts=pending))
                pending = []
            messages.append(ModelResponse(parts=[TextPart(t) for t in texts]))
        else:
            pending.append(UserPromptPart("\n".join(texts)))
    if pending:
        messages.append(ModelRequest(parts=pending))
    return messages


def _settings(request: LlmRequest) -> ModelSettings | None:
    config = request.config
    if config is None:
        return None
    settings: dict[str, Any] = {}
    for ours, theirs in (
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("max_output_tokens", "max_tokens"),
        ("stop_sequences", "stop_sequences"),
        ("seed", "seed"),
    ):
        value = getattr(config, ours)
        if value is not None:
            settings[theirs] = value
    if config.extra:
        settings["extra_body"] = dict(config.extra)
    return ModelSettings(**settings)  # type: ignore[typeddict-item]


class PydanticAIModel(BaseLlm):
    """A pydantic-ai model behind codeact's ``Llm`` protocol.

    Args:
        model: a pydantic-ai ``Model`` or a known model name (``"openai:gpt-5"``).
        settings: pydantic-ai ``ModelSettings`` merged under each request's own config.

    ``generate_content`` raises ``ModelRateLimitError`` (HTTP 429), ``ModelTimeoutError`` and
    ``ModelError`` (any other ``pydantic_ai.exceptions.ModelAPIError``, with ``status_code`` when
    there was one); the pydantic-ai exception is chained as ``__cause__``.
    """

    def __init__(self, model: Model | str, *, settings: ModelSettings | None = None) -> None:
        self.model = model
        self.settings = settings
        self.name = model if isinstance(model, str) else f"{model.system}:{model.model_name}"

    async def generate_content(self, request: LlmRequest) -> LlmResponse:
        """Send ``request`` to the wrapped pydantic-ai model with ``pydantic_ai.direct.model_request``.

        Settings are this wrapper's ``settings`` overlaid by the request's. Text and thinking
        parts are kept (thinking as ``thought=True``), with token usage and the finish reason.

        Raises:
            ModelTimeoutError: pydantic-ai reported a request timeout.
            ModelRateLimitError: pydantic-ai reported a rate limit (``status_code`` kept).
            ModelError: any other ``ModelAPIError``.
        """
        try:
            response = await model_request(self.model, to_messages(request), model_settings=self._settings(request))
        except pai_exceptions.ModelAPIError as exc:
            raise self._error(exc) from exc
        return self._response(response)

    async def generate_content_stream(self, request: LlmRequest) -> AsyncIterator[LlmResponse]:
        """Stream the reply through ``pydantic_ai.direct.model_request_stream``: each text (or
        thinking) delta the model streams is yielded as an ``LlmResponse(partial=True)`` holding
        that delta (thinking as ``thought=True``), then the complete reply, as
        ``generate_content`` returns it. A model that cannot stream (pydantic-ai raises
        ``NotImplementedError``) answers with ``generate_content``'s one complete reply.

        Raises:
            ModelTimeoutError / ModelRateLimitError / ModelError: as ``generate_content``,
                also when the stream breaks off mid-reply (no complete reply is yielded then).
        """
        messages = to_messages(request)
        settings = self._settings(request)
        streamed = False
        try:
            async with model_request_stream(self.model, messages, model_settings=settings) as stream:
                async for event in stream:
                    delta: str | None = None
                    thought = False
                    if isinstance(event, PartStartEvent):
                        if isinstance(event.part, (TextPart, ThinkingPart)):
                            delta, thought = event.part.content, isinstance(event.part, ThinkingPart)
                    elif isinstance(event, PartDeltaEvent):
                        if isinstance(event.delta, TextPartDelta):
                            delta = event.delta.content_delta
                        elif isinstance(event.delta, ThinkingPartDelta):
                            delta, thought = event.delta.content_delta, True
                    if delta:
                        streamed = True
                        yield LlmResponse(
                            content=Content(role="model", parts=[Part(text=delta, thought=thought)]), partial=True
                        )
                response = stream.get()
        except NotImplementedError:
            if streamed:
                raise
            yield await self.generate_content(request)
            return
        except pai_exceptions.ModelAPIError as exc:
            raise self._error(exc) from exc
        yield self._response(response)

    def _settings(self, request: LlmRequest) -> ModelSettings:
        """This wrapper's ``settings`` overlaid by the request's."""
        settings: dict[str, Any] = {**(self.settings or {}), **(_settings(request) or {})}
        return ModelSettings(**settings)  # type: ignore[typeddict-item]

    def _error(self, exc: pai_exceptions.ModelAPIError) -> ModelError:
        if isinstance(exc, (pai_exceptions.ModelRequestTimeout, pai_exceptions.ModelTimeoutError)):
            return ModelTimeoutError(str(exc), model=self.name)
        status = getattr(exc, "status_code", None)
        cls = ModelRateLimitError if isinstance(exc, pai_exceptions.ModelRateLimitError) else ModelError
        return cls(str(exc), model=self.name, status_code=status)

    def _response(self, response: ModelResponse) -> LlmResponse:
        parts: list[Part] = []
        for part in response.parts:
            if isinstance(part, TextPart):
                parts.append(Part(text=part.content))
            elif isinstance(part, ThinkingPart):
                parts.append(Part(text=part.content, thought=True))
        usage = response.usage
        return LlmResponse(
            content=Content(role="model", parts=parts),
            usage=Usage(prompt_tokens=usage.input_tokens, completion_tokens=usage.output_tokens),
            finish_reason=response.finish_reason,
        )
