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

from codeact.exceptions import CodeActError

__all__ = (
    "ModelError",
    "ModelRateLimitError",
    "ModelRequestsNotAllowedError",
    "ModelResponseError",
    "ModelTimeoutError",
    "ScriptExhaustedError",
)


class ModelError(CodeActError):
    """A model request failed. ``model`` is the model id asked for; ``status_code`` is the HTTP
    status of the failing reply, or ``None`` when there was no HTTP reply (timeout, connection
    failure, refused by the guard)."""

    def __init__(self, message: str, *, model: str | None = None, status_code: int | None = None) -> None:
        super().__init__(message)
        self.model = model
        self.status_code = status_code


class ModelTimeoutError(ModelError):
    """No reply within the configured timeout, after all retries."""


class ModelRateLimitError(ModelError):
    """The endpoint kept answering HTTP 429 (rate limit or quota) after all retries."""


class ModelResponseError(ModelError):
    """The endpoint answered, but not with a usable chat completion: a body that is not JSON,
    no ``choices``, a choice without a message, or an ``error`` object in a 2xx reply."""


class ModelRequestsNotAllowedError(ModelError):
    """A request to a non-loopback host while ``codeact.models.ALLOW_MODEL_REQUESTS`` is False."""


class ScriptExhaustedError(CodeActError):
    """A ``ScriptedModel`` was asked for more replies than it was given."""
