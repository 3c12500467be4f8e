"""``OpenAIChatModel``: any OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, vLLM,
Ollama, llama.cpp server, ...) through the official ``openai`` SDK (``codeact[openai]``)."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from codeact.events import Content, Part

from ._base import BaseLlm
from ._errors import (
    ModelError,
    ModelRateLimitError,
    ModelRequestsNotAllowedError,
    ModelResponseError,
    ModelTimeoutError,
)
from ._types import LlmRequest, LlmResponse, Usage

if TYPE_CHECKING:
    import openai

__all__ = ("OpenAIChatModel",)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
NO_API_KEY = "no-api-key"  # sent when no key is configured (local servers ignore the header)
_ROLES = {"user": "user", "model": "assistant", "assistant": "assistant", "system": "system"}
_MAX_DETAIL = 500  # characters of a server's error text kept in a ModelError message


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as e:  # pragma: no cover - exercised by the test that hides the SDK
        raise ImportError(
            "OpenAIChatModel needs the openai SDK, which is not installed: pip install 'codeact[openai]'"
        ) from e
    return openai


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _needs_api_key(host: str | None) -> bool:
    """Whether a host is a hosted service, which always wants a key: not loopback, not a
    private or link-local address, not a single-label or ``.local`` / ``.internal`` /
    ``.lan`` / ``.home.arpa`` name (a server on the local network may need none)."""
    if not host or _is_loopback(host):
        return False
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        name = host.lower().rstrip(".")
        return "." in name and not name.endswith((".local", ".internal", ".lan", ".home.arpa", ".localdomain"))
    return address.is_global


_VERSIONED_PATH = re.compile(r"/v\d+(?:beta\d*|alpha\d*)?(?:/|$)")


def _requests_allowed() -> bool:
    package = sys.modules.get("codeact.models")
    return bool(getattr(package, "ALLOW_MODEL_REQUESTS", True))


def _part_text(part: Part) -> str | None:
    if part.thought:
        return None
    if part.text is not None:
        return part.text
    if part.function_call is not None:
        call = part.function_call
        return f"[function_call {call.name}] {json.dumps(call.args, default=str)}"
    if part.function_response is not None:
        resp = part.function_response
        return f"[function_response {resp.name}] {json.dumps(resp.response, default=str)}"
    return None


def to_chat_messages(request: LlmRequest) -> list[dict[str, str]]:
    """Map a request to chat-completions ``messages``: ``system_instruction`` first as a system
    message, then one message per ``Content`` (role ``"model"`` -> ``"assistant"``), its
    non-thought parts joined. Contents that render to no text are dropped.

    Raises:
        ValueError: a content's role is not user / model / assistant / system.
    """
    messages: list[dict[str, str]] = []
    if request.system_instruction:
        messages.append({"role": "system", "content": request.system_instruction})
    for content in request.contents:
        role = _ROLES.get(content.role)
        if role is None:
            raise ValueError(f"cannot send a message with role {content.role!r}; expected 'user' or 'model'")
        texts = [t for t in (_part_text(p) for p in content.parts) if t is not None]
        if texts:
            messages.append({"role": role, "content": "".join(texts)})
    return messages


class OpenAIChatModel(BaseLlm):
    """A model behind an OpenAI-compatible chat-completions endpoint.

    Args:
        model: model id sent as ``model`` (``LlmRequest.model`` overrides it per request).
        base_url: endpoint root, e.g. ``"http://localhost:11434/v1"`` (Ollama) or
            ``"http://127.0.0.1:8000/v1"`` (vLLM). Default: ``$OPENAI_BASE_URL``, else OpenAI.
        api_key: the key, sent as ``Authorization: Bearer <key>``. Default: read from the
            environment variable ``api_key_env`` at each request. With neither, a request to a
            hosted endpoint (not loopback, not the local network) raises ``ModelError`` before
            anything is sent; a local server gets the placeholder ``no-api-key`` (most ignore it;
            a 401 then says the key is missing). ``api_key="none"`` sends no real key anywhere.
        api_key_env: name of the environment variable holding the key.
        timeout: seconds allowed for each network step of an attempt (connect, write, each read),
            as in httpx; a step that takes longer fails the attempt.
        max_retries: extra attempts after a timeout, a connection failure, HTTP 408/409/429 or
            5xx, with exponential backoff (0.5 s doubling, up to 8 s) or the server's
            ``retry-after-ms`` / ``retry-after`` header. 0 disables retries.
        extra_body: fields merged into every request body (e.g. vLLM's ``{"min_p": 0.05}``).

    Each request opens and closes its own HTTP client, so one instance works from any event
    loop (asyncio or trio, successive ``anyio.run`` calls). ``async with model:`` keeps one
    client open for the block, reusing connections.

    Raises:
        ImportError: the ``openai`` SDK is not installed (``pip install 'codeact[openai]'``).
        ValueError: ``timeout`` is not positive or ``max_retries`` is negative.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 3,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self._openai = _import_openai()
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries!r}")
        self.name = model
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        self._api_key = api_key
        self._client: openai.AsyncOpenAI | None = None
        self._depth = 0

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    # -- client lifecycle -------------------------------------------------------------------

    def _resolve_api_key(self) -> str:
        if self._api_key is not None:
            return self._api_key
        return os.environ.get(self.api_key_env, "")

    def _new_client(self) -> openai.AsyncOpenAI:
        return self._openai.AsyncOpenAI(
            api_key=self._resolve_api_key() or NO_API_KEY,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    async def __aenter__(self) -> OpenAIChatModel:
        if self._client is None:
            self._client = self._new_client()
        self._depth += 1
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._depth -= 1
        if self._depth == 0:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the client held by ``async with`` (a no-op otherwise)."""
        client, self._client, self._depth = self._client, None, 0
        if client is not None:
            await client.close()

    # -- requests ---------------------------------------------------------------------------

    def _check_allowed(self) -> None:
        if _requests_allowed():
            return
        host = urlsplit(self.base_url).hostname
        if not _is_loopback(host):
            raise ModelRequestsNotAllowedError(
                f"model request to {host!r} refused: codeact.models.ALLOW_MODEL_REQUESTS is False "
                "(only loopback hosts are allowed)",
                model=self.model,
            )

    def _check_api_key(self, model: str) -> None:
        """A hosted endpoint without a key fails here, before any request, instead of after
        the retries of a request that cannot succeed."""
        if self._api_key is not None or self._resolve_api_key():
            return
        host = urlsplit(self.base_url).hostname
        if _needs_api_key(host):
            raise ModelError(
                f"model {model!r} at {self.base_url}: no API key: pass api_key= or set ${self.api_key_env} "
                "(for a server that needs no key, pass api_key='none'); no request was sent",
                model=model,
            )

    def _request_kwargs(self, request: LlmRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": request.model or self.model, "messages": to_chat_messages(request)}
        extra_body = dict(self.extra_body)
        config = request.config
        if config is not None:
            for key, value in (
                ("temperature", config.temperature),
                ("top_p", config.top_p),
                ("max_tokens", config.max_output_tokens),
                ("stop", config.stop_sequences),
                ("seed", config.seed),
            ):
                if value is not None:
                    kwargs[key] = value
            if config.top_k is not None:
                extra_body["top_k"] = config.top_k
            extra_body.update(config.extra)
        if extra_body:
            kwargs["extra_body"] = extra_body
        return kwargs

    async def generate_content(self, request: LlmRequest) -> LlmResponse:
        """Send ``request`` to ``{base_url}/chat/completions`` and return the first choice.

        Returns:
            An ``LlmResponse`` whose content has role ``"model"``: the message text, plus a
            ``thought=True`` part for ``reasoning_content`` / ``reasoning`` when the endpoint
            returns one; ``usage`` and ``finish_reason`` as reported. A ``content_filter`` finish
            sets ``error_code``.

        Raises:
            ModelRequestsNotAllowedError: ``ALLOW_MODEL_REQUESTS`` is False and the host is not loopback.
            ModelTimeoutError: no reply within ``timeout`` seconds, after ``max_retries`` retries.
            ModelRateLimitError: HTTP 429 after ``max_retries`` retries.
            ModelResponseError: a 2xx body that is not a usable chat completion.
            ModelError: any other failure (HTTP 4xx/5xx with ``status_code``, connection refused);
                no key for a hosted endpoint (not loopback or local network) fails before any
                request; an HTTP 404 from a base URL without ``/v1`` suggests adding it.
            ValueError: a content has an unknown role.
        """
        self._check_api_key(request.model or self.model)
        self._check_allowed()
        kwargs = self._request_kwargs(request)
        model = kwargs["model"]
        try:
            if self._client is not None:
                raw = await self._client.chat.completions.with_raw_response.create(**kwargs)
            else:
                async with self._new_client() as client:
                    raw = await client.chat.completions.with_raw_response.create(**kwargs)
        except self._openai.OpenAIError as err:
            raise self._map_error(err, model) from None
        return self._parse(raw.http_response.content, model)

    async def generate_content_stream(self, request: LlmRequest) -> AsyncIterator[LlmResponse]:
        """Stream the reply to ``request`` from ``{base_url}/chat/completions`` (``stream=True``,
        ``stream_options={"include_usage": true}``): server-sent events, read as they arrive.

        Yields:
            One ``LlmResponse(partial=True)`` per chunk that carries text: its ``content`` holds
            that chunk's text (a delta, not the text so far; reasoning deltas as a
            ``thought=True`` part). Last, the complete reply (``partial=False``), as
            ``generate_content`` would return it: all the text, ``finish_reason``, and ``usage``
            from the final chunk (``None`` when the endpoint sends none).

        Raises:
            ModelResponseError: a chunk is not a chat-completion chunk, or the stream ended
                before any choice reported a ``finish_reason`` (the connection dropped
                mid-reply): no complete reply is yielded.
            ModelError: the request failed (as ``generate_content``; the retries apply to the
                request, not to a stream cut off after it began), or the connection failed
                mid-stream.
            ModelRequestsNotAllowedError / ModelTimeoutError / ModelRateLimitError / ValueError:
                as ``generate_content``.
        """
        self._check_api_key(request.model or self.model)
        self._check_allowed()
        kwargs = self._request_kwargs(request)
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
        model = kwargs["model"]
        texts: list[str] = []
        thoughts: list[str] = []
        usage: Usage | None = None
        finish_reason: str | None = None
        done = False
        client = self._client if self._client is not None else self._new_client()
        try:
            try:
                # The SDK makes the request (its retries, errors, headers); the server-sent events
                # are read line by line to the end of the body (the SDK's own stream iterator
                # leaves a generator unfinished, which trio reports).
                async with client.chat.completions.with_streaming_response.create(**kwargs) as response:
                    async for line in response.iter_lines():
                        if done or not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            done = True
                            continue
                        delta_text, delta_thought, reason, chunk_usage = self._chunk(data, model)
                        if chunk_usage is not None:
                            usage = chunk_usage
                        if reason is not None:
                            finish_reason = reason
                        if delta_text or delta_thought:
                            chunk_parts = []
                            if delta_thought:
                                thoughts.append(delta_thought)
                                chunk_parts.append(Part(text=delta_thought, thought=True))
                            if delta_text:
                                texts.append(delta_text)
                                chunk_parts.append(Part(text=delta_text))
                            yield LlmResponse(content=Content(role="model", parts=chunk_parts), partial=True)
            except self._openai.OpenAIError as err:
                raise self._map_error(err, model) from None
            except _transport_errors() as err:  # the connection failed mid-stream
                raise ModelError(
                    f"model {model!r} at {self.base_url}: the stream broke off mid-reply ({type(err).__name__}: "
                    f"{self._redact(str(err))})",
                    model=model,
                ) from None
        finally:
            if client is not self._client:
                await client.close()
        if finish_reason is None:
            raise ModelResponseError(
                f"model {model!r} at {self.base_url}: the stream ended before the reply finished "
                f"(no finish_reason after {sum(map(len, texts))} characters)",
                model=model,
                status_code=200,
            )
        parts: list[Part] = []
        if thoughts:
            parts.append(Part(text="".join(thoughts), thought=True))
        if texts:
            parts.append(Part(text="".join(texts)))
        error_code = error_message = None
        if finish_reason == "content_filter":
            error_code, error_message = "content_filter", "the endpoint's content filter stopped the reply"
        yield LlmResponse(
            content=Content(role="model", parts=parts) if parts else None,
            usage=usage,
            finish_reason=finish_reason,
            error_code=error_code,
            error_message=error_message,
        )

    def _chunk(self, event_data: str, model: str) -> tuple[str, str, str | None, Usage | None]:
        """One chat-completion chunk (an event's JSON ``data``) as (text delta, reasoning
        delta, finish reason, usage)."""
        try:
            data = json.loads(event_data)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ModelResponseError(
                f"model {model!r} at {self.base_url}: malformed chat completion chunk: "
                f"{self._redact(_snippet(event_data))}",
                model=model,
                status_code=200,
            )
        if "error" in data and not data.get("choices"):
            raise ModelResponseError(
                f"model {model!r} at {self.base_url}: error in the stream: {self._redact(_error_detail(data, ''))}",
                model=model,
                status_code=200,
            )
        usage = None
        raw_usage = data.get("usage")
        if isinstance(raw_usage, dict):
            usage = Usage(
                prompt_tokens=_int_or_none(raw_usage.get("prompt_tokens")),
                completion_tokens=_int_or_none(raw_usage.get("completion_tokens")),
            )
        choices = data.get("choices") or []
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        raw_delta = choice.get("delta")
        delta: dict[str, Any] = raw_delta if isinstance(raw_delta, dict) else {}
        text: Any = delta.get("content")
        if isinstance(text, list):
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        reason = choice.get("finish_reason")
        return (
            text if isinstance(text, str) else "",
            thought if isinstance(thought, str) else "",
            reason if isinstance(reason, str) else None,
            usage,
        )

    # -- errors and parsing -----------------------------------------------------------------

    def _redact(self, text: str) -> str:
        key = self._resolve_api_key()
        if key:
            text = text.replace(key, "***")
        return text

    def _map_error(self, err: Exception, model: str) -> ModelError:
        oa = self._openai
        where = f"{model!r} at {self.base_url}"
        tries = f"{self.max_retries} {'retry' if self.max_retries == 1 else 'retries'}"
        if isinstance(err, oa.APITimeoutError):
            return ModelTimeoutError(f"model {where}: no reply within {self.timeout:g} s (after {tries})", model=model)
        if isinstance(err, oa.APIStatusError):
            status = err.status_code
            detail = self._redact(_error_detail(err.body, err.response.text))
            if isinstance(err, oa.RateLimitError):
                return ModelRateLimitError(
                    f"model {where}: rate limited (HTTP 429) after {tries}: {detail}", model=model, status_code=status
                )
            hint = ""
            if status == 401 and not self._resolve_api_key():
                hint = f" (no API key: pass api_key= or set ${self.api_key_env})"
            elif status in (404, 405) and not _VERSIONED_PATH.search(urlsplit(self.base_url).path or "/"):
                hint = (
                    f" (the base URL has no version path; OpenAI-compatible servers serve /v1/chat/completions: "
                    f"try base_url={self.base_url + '/v1'!r})"
                )
            return ModelError(f"model {where}: HTTP {status}{hint}: {detail}", model=model, status_code=status)
        if isinstance(err, oa.APIConnectionError):
            cause = err.__cause__ or err.__context__
            reason = f": {type(cause).__name__}" if cause is not None else ""
            return ModelError(
                f"model {where}: connection failed after {tries}{reason} (is a server listening at {self.base_url}?)",
                model=model,
            )
        return ModelError(f"model {where}: {self._redact(str(err))}", model=model)

    def _parse(self, body: bytes, model: str) -> LlmResponse:
        where = f"model {model!r} at {self.base_url}"

        def bad(what: str) -> ModelResponseError:
            return ModelResponseError(f"{where}: malformed chat completion: {what}", model=model, status_code=200)

        try:
            data = json.loads(body)
        except ValueError:
            raise bad(f"body is not JSON: {self._redact(_snippet(body))}") from None
        if not isinstance(data, dict):
            raise bad(f"expected a JSON object, got {type(data).__name__}")
        if "error" in data and not data.get("choices"):
            raise bad(f"error reply: {self._redact(_error_detail(data, ''))}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise bad("no 'choices'")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise bad("the first choice has no 'message'")

        parts: list[Part] = []
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            parts.append(Part(text=reasoning, thought=True))
        text = message.get("content")
        if isinstance(text, list):  # some servers return content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        if isinstance(text, str) and text:
            parts.append(Part(text=text))
        elif text is not None and not isinstance(text, str):
            raise bad(f"'content' is a {type(text).__name__}")

        usage = None
        raw_usage = data.get("usage")
        if isinstance(raw_usage, dict):
            usage = Usage(
                prompt_tokens=_int_or_none(raw_usage.get("prompt_tokens")),
                completion_tokens=_int_or_none(raw_usage.get("completion_tokens")),
            )
        finish_reason = choice.get("finish_reason")
        finish_reason = finish_reason if isinstance(finish_reason, str) else None
        error_code = error_message = None
        if finish_reason == "content_filter":
            error_code, error_message = "content_filter", "the endpoint's content filter stopped the reply"
        return LlmResponse(
            content=Content(role="model", parts=parts) if parts else None,
            usage=usage,
            finish_reason=finish_reason,
            error_code=error_code,
            error_message=error_message,
        )


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP client's transport error classes: the SDK's own client library (``httpx``, or
    ``httpx2`` in newer SDKs), as loaded by the SDK. A body cut off mid-stream raises one of them."""
    errors: list[type[BaseException]] = []
    for name in ("httpx", "httpx2"):
        module = sys.modules.get(name)
        error = getattr(module, "HTTPError", None) if module is not None else None
        if isinstance(error, type) and issubclass(error, BaseException):
            errors.append(error)
    return tuple(errors)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _snippet(body: bytes | str) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = " ".join(text.split())
    return repr(text[:_MAX_DETAIL] + ("..." if len(text) > _MAX_DETAIL else ""))


def _error_detail(body: Any, fallback: str) -> str:
    """The server's own error message, from ``{"error": {"message": ...}}`` or similar."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _snippet(error["message"])
        if isinstance(error, str):
            return _snippet(error)
    return _snippet(fallback) if fallback else "(no details)"
