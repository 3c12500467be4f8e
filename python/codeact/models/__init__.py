"""The model layer: the ``Llm`` protocol, request / response shapes, a scripted double and an
adapter for OpenAI-compatible chat endpoints.

``ALLOW_MODEL_REQUESTS`` guards real network use (as in pydantic-ai): set
``codeact.models.ALLOW_MODEL_REQUESTS = False`` (e.g. in a test suite's conftest, or with
``monkeypatch.setattr``) and every ``OpenAIChatModel`` request to a host that is not loopback
(``localhost``, ``127.0.0.0/8``, ``::1``) raises ``ModelRequestsNotAllowedError`` before any
I/O. Requests to local servers still go through. The flag is read at each request.
"""

from ._base import BaseLlm, Llm, stream_content
from ._errors import (
    ModelError,
    ModelRateLimitError,
    ModelRequestsNotAllowedError,
    ModelResponseError,
    ModelTimeoutError,
    ScriptExhaustedError,
)
from ._llama import LlamaCppModel
from ._openai import OpenAIChatModel
from ._scripted import ScriptedModel
from ._types import GenerateContentConfig, LlmRequest, LlmResponse, Usage

ALLOW_MODEL_REQUESTS: bool = True
"""When False, ``OpenAIChatModel`` refuses requests to non-loopback hosts."""

__all__ = (
    "ALLOW_MODEL_REQUESTS",
    "BaseLlm",
    "GenerateContentConfig",
    "LlamaCppModel",
    "Llm",
    "LlmRequest",
    "LlmResponse",
    "ModelError",
    "ModelRateLimitError",
    "ModelRequestsNotAllowedError",
    "ModelResponseError",
    "ModelTimeoutError",
    "OpenAIChatModel",
    "ScriptExhaustedError",
    "ScriptedModel",
    "Usage",
    "stream_content",
)
