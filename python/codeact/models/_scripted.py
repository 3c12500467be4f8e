"""``ScriptedModel``: a deterministic model double for tests and the offline demo."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence

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
    ) -> None:
        self.name = name
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

    async def generate_content(self, request: LlmRequest) -> LlmResponse:
        """Return the next scripted reply.

        Raises:
            ScriptExhaustedError: all replies of the sequence were used.
            TypeError: a reply (or a function's result) is not str, Content or LlmResponse.
            BaseException: a scripted exception instance, as is.
        """
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
