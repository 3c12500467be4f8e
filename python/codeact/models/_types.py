"""Request and response shapes exchanged with a model (``Llm``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from codeact.events import Content

__all__ = ("GenerateContentConfig", "LlmRequest", "LlmResponse", "Usage")


class GenerateContentConfig(BaseModel):
    """Sampling settings. ``None`` means "the endpoint's default" and is not sent.

    Attributes:
        temperature: sampling temperature (0 = greedy).
        top_p: nucleus sampling mass, in (0, 1].
        top_k: sample from the k most likely tokens. Not part of the OpenAI API; sent as an extra
            body field, which vLLM, llama.cpp server and Ollama understand.
        max_output_tokens: cap on generated tokens (sent as ``max_tokens``).
        stop_sequences: generation stops before any of these strings.
        seed: sampling seed, for endpoints that honour it.
        extra: provider-specific fields merged into the request body as is
            (e.g. ``{"max_completion_tokens": 512}`` or ``{"repetition_penalty": 1.1}``).
    """

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_output_tokens: int | None = None
    stop_sequences: list[str] | None = None
    seed: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class LlmRequest(BaseModel):
    """One model call.

    Attributes:
        model: model id; ``None`` uses the adapter's own model.
        contents: the transcript, oldest first. Roles are ``"user"`` and ``"model"``
            (``"assistant"`` and ``"system"`` are accepted too).
        system_instruction: optional system prompt, sent before ``contents``.
        config: sampling settings; ``None`` uses the endpoint's defaults.
    """

    model: str | None = None
    contents: list[Content] = Field(default_factory=list)
    system_instruction: str | None = None
    config: GenerateContentConfig | None = None


class Usage(BaseModel):
    """Token counts reported by the endpoint (``None`` when it did not say)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def total_tokens(self) -> int | None:
        """``prompt_tokens + completion_tokens`` (a missing one counts 0), or ``None`` when both are missing."""
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)


class LlmResponse(BaseModel):
    """A model reply.

    Attributes:
        content: the message (role ``"model"``); reasoning text, when the endpoint returns it,
            is a part with ``thought=True``. ``None`` when the model produced nothing.
        usage: token counts, when reported.
        finish_reason: why generation stopped, as the endpoint said (``"stop"``, ``"length"``, ...).
        error_code / error_message: a failure reported inside an otherwise well-formed reply
            (e.g. ``"content_filter"``). Transport and protocol failures raise ``ModelError`` instead.
        partial: True for an incremental chunk of a streamed reply; the last item of a stream
            is the complete reply with ``partial=False``.
    """

    content: Content | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    partial: bool = False

    @property
    def text(self) -> str:
        """The non-thought text of ``content`` (``""`` when there is none)."""
        return self.content.text if self.content is not None else ""
