"""Exceptions of the model layer. All derive from ``codeact.exceptions.CodeActError``.

Tree::

    CodeActError
    ├── ScriptExhaustedError           a ScriptedModel ran out of replies
    └── ModelError                     a model request failed (status_code when HTTP said so)
        ├── ModelTimeoutError          no reply within the timeout (after retries)
        ├── ModelRateLimitError        HTTP 429 (after retries)
        ├── ModelResponseError         a reply that is not a usable chat completion
        └── ModelRequestsNotAllowedError  ALLOW_MODEL_REQUESTS is False and the host is not loopback

Messages never contain the API key.
"""

from __future__ import annotations

from ..exceptions import (
    ModelError,
    ModelRateLimitError,
    ModelRequestsNotAllowedError,
    ModelResponseError,
    ModelTimeoutError,
    ScriptExhaustedError,
)

__all__ = (
    "ModelError",
    "ModelRateLimitError",
    "ModelRequestsNotAllowedError",
    "ModelResponseError",
    "ModelTimeoutError",
    "ScriptExhaustedError",
)
