"""``ScriptedModel``: a deterministic model double for tests and the offline demo."""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import anyio
import anyio.lowlevel

from codeact.events import Content, Part

from ._base import BaseLlm
from ._errors import ScriptExhaustedError
from ._types import LlmRequest, LlmResponse

__all__ = ("ScriptedModel",)

Reply = str | Content | LlmResponse
ReplyFunction = Callable[[LlmRequest], Reply | Awaitable[Reply]]


def _to_response(reply: Reply) -> LlmResponse:
    if isinstance(reply, LlmResponse):
        return reply
    if isinstance(reply, Content):
        return LlmResponse(content=reply, finish_reason="stop")
    if isinstance(reply, str):
        return LlmResponse(content=Content(role="model", parts=[Part(text=reply)]), finish_reason="stop")
    raise TypeError(f"a scripted reply must be str, Content or LlmResponse, not {type(reply).__name__}")


class ScriptedModel(BaseLlm):
    """A model that answers from a script, deterministically, without I/O.

    Args:
        replies: either a sequence, answered in order, one item per request: a ``str`` (model
            text), a ``Content``, an ``LlmResponse``, or an exception instance, which is raised
            (to test error handling, e.g. ``ModelTimeoutError("...")``); or a function of the
            ``LlmRequest`` returning one of ``str`` / ``Content`` / ``LlmResponse``, or an
            awaitable of one. A function never runs out.
        name: the model's ``name``.
        time_to_first_token: seconds before the first token of a reply (streamed or not).
        tokens_per_second: pace of the tokens after the first (``None``: no wait between
            them). ``generate_content`` waits as long as the whole reply would take to stream,
            then returns it; ``generate_content_stream`` yields it token by token.
        chars_per_token: characters in one streamed token (the last may be shorter).

    Attributes:
        requests: a deep copy of every request received, in order (including the one that
            found the script exhausted).

    ``generate_content`` raises ``ScriptExhaustedError`` once a sequence is used up, and
    ``TypeError`` for a reply of another type. Works under asyncio and trio.
    """

    def __init__(
        self,
        replies: Sequence[Reply | BaseException] | ReplyFunction,
        name: str = "scripted",
        *,
        time_to_first_token: float = 0.0,
        tokens_per_second: float | None = None,
        chars_per_token: int = 4,
    ) -> None:
        if time_to_first_token < 0:
            raise ValueError(f"time_to_first_token must be >= 0 seconds, got {time_to_first_token!r}")
        if tokens_per_second is not None and not tokens_per_second > 0:
            raise ValueError(f"tokens_per_second must be positive, got {tokens_per_second!r}")
        if chars_per_token < 1:
            raise ValueError(f"chars_per_token must be >= 1, got {chars_per_token!r}")
        self.name = name
        self.time_to_first_token = float(time_to_first_token)
        self.tokens_per_second = tokens_per_second
        self.chars_per_token = chars_per_token
        self.requests: list[LlmRequest] = []
        self._function: ReplyFunction | None = None
        self._replies: list[Reply | BaseException] = []
        if callable(replies):
            self._function = replies
        elif isinstance(replies, (str, Content, LlmResponse)):
            raise TypeError("replies must be a sequence of replies or a function, not a single reply")
        else:
            self._replies = list(replies)
        self._next = 0

    @property
    def remaining(self) -> int | None:
        """Replies not yet used (``None`` for a function)."""
        return None if self._function is not None else len(self._replies) - self._next

    @property
    def paced(self) -> bool:
        """Whether replies take time (``time_to_first_token`` or ``tokens_per_second`` set)."""
        return self.time_to_first_token > 0 or self.tokens_per_second is not None

    def _tokens(self, text: str) -> list[str]:
        n = self.chars_per_token
        return [text[i : i + n] for i in range(0, len(text), n)]

    async def generate_content(self, request: LlmRequest) -> LlmResponse:
        """Return the next scripted reply (after the time it would take to stream, when paced).

        Raises:
            ScriptExhaustedError: all replies of the sequence were used.
            TypeError: a reply (or a function's result) is not str, Content or LlmResponse.
            BaseException: a scripted exception instance, as is.
        """
        response = await self._next_response(request)
        if self.paced:
            tokens = len(self._tokens(response.text))
            pace = 0.0 if self.tokens_per_second is None else max(tokens - 1, 0) / self.tokens_per_second
            await anyio.sleep(self.time_to_first_token + pace)
        return response

    async def generate_content_stream(self, request: LlmRequest) -> AsyncIterator[LlmResponse]:
        """Yield the next scripted reply in tokens of ``chars_per_token`` characters, each an
        ``LlmResponse(partial=True)`` holding that token's text (a delta): the first after
        ``time_to_first_token`` seconds, the next ones at ``tokens_per_second`` (deadlines from
        the start, so waits do not drift), then the complete reply (``partial=False``).
        Thought parts are not streamed (they are in the complete reply).

        Raises:
            ScriptExhaustedError / TypeError / BaseException: as ``generate_content``, before
                any chunk.
        """
        start = time.monotonic()
        response = await self._next_response(request)
        rate = self.tokens_per_second
        for i, token in enumerate(self._tokens(response.text)):
            due = start + self.time_to_first_token + (i / rate if rate is not None else 0.0)
            wait = due - time.monotonic()
            if wait > 0:
                await anyio.sleep(wait)
            elif self.paced or i == 0:
                await anyio.lowlevel.checkpoint()
            yield LlmResponse(content=Content(role="model", parts=[Part(text=token)]), partial=True)
        yield response

    async def _next_response(self, request: LlmRequest) -> LlmResponse:
        await anyio.lowlevel.checkpoint()
        self.requests.append(request.model_copy(deep=True))
        if self._function is not None:
            result = self._function(request)
            if inspect.isawaitable(result):
                result = await result
            return _to_response(result)
        if self._next >= len(self._replies):
            given = len(self._replies)
            raise ScriptExhaustedError(
                f"ScriptedModel {self.name!r} was given {given} {'reply' if given == 1 else 'replies'} "
                f"and was asked for reply #{len(self.requests)}"
            )
        reply = self._replies[self._next]
        self._next += 1
        if isinstance(reply, BaseException):
            raise reply
        return _to_response(reply)
