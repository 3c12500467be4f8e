"""The model seam: the ``Llm`` protocol and the ``BaseLlm`` helper class."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from ._types import LlmRequest, LlmResponse

__all__ = ("BaseLlm", "Llm", "stream_content")


@runtime_checkable
class Llm(Protocol):
    """What the agent loop needs from a model.

    Implementations must work under both asyncio and trio (use anyio, never asyncio directly).

    Streaming is optional. A model that streams defines ``generate_content_stream(request)``:
    an async iterator of ``LlmResponse`` items, first any number of chunks with
    ``partial=True`` whose ``content`` holds the text that chunk adds (a delta, never the text
    so far), then exactly one complete reply with ``partial=False``, equal to what
    ``generate_content`` returns (all the text, ``usage``, ``finish_reason``). A stream that
    breaks off raises ``ModelError`` and yields no complete reply. ``BaseLlm`` supplies a
    ``generate_content_stream`` that yields the single complete reply, and
    ``stream_content(llm, request)`` streams from any ``Llm``.
    """

    name: str

    async def generate_content(self, request: LlmRequest) -> LlmResponse:
        """Return the model's reply to ``request``.

        Raises:
            ModelError: the request failed (timeout, rate limit, malformed reply, ...).
        """
        ...


class BaseLlm:
    """Convenience base for ``Llm`` implementations: subclasses define ``generate_content``
    and inherit a non-incremental ``generate_content_stream``."""

    name: str = "llm"

    async def generate_content(self, request: LlmRequest) -> LlmResponse:
        """Return the model's reply to ``request``; subclasses implement it (``Llm``'s contract).

        Raises:
            NotImplementedError: the subclass does not implement it.
        """
        raise NotImplementedError

    async def generate_content_stream(self, request: LlmRequest) -> AsyncIterator[LlmResponse]:
        """Yield the reply to ``request``: chunks with ``partial=True`` (none by default), then
        the complete reply with ``partial=False``. Raises what ``generate_content`` raises."""
        yield await self.generate_content(request)


async def stream_content(llm: Llm, request: LlmRequest) -> AsyncIterator[LlmResponse]:
    """Stream from any ``Llm``: its ``generate_content_stream`` when it has one, else one item,
    the complete reply from ``generate_content``."""
    stream = getattr(llm, "generate_content_stream", None)
    if stream is None:
        yield await llm.generate_content(request)
        return
    async for item in stream(request):
        yield item
