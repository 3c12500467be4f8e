"""``SecretsProvider``: values tools need (API keys, passwords) kept away from the model.

Secrets are read by tools with ``tool_context.get_secret(name)``. They never enter a prompt;
the provider's ``repr`` shows names only; and the agent replaces any secret value that shows
up in text fed back to the model (observations, errors, printed output) with ``[REDACTED]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ..exceptions import SecretNotFoundError

__all__ = ("REDACTED", "SecretNotFoundError", "SecretsProvider")

REDACTED = "[REDACTED]"


class SecretsProvider:
    """Secrets by name, from a mapping and/or a lookup function.

    Args:
        secrets: name -> value.
        lookup: called for names missing from ``secrets`` (e.g. a vault client); returns
            the value or None.
    """

    def __init__(self, secrets: Mapping[str, str] | None = None, lookup: Callable[[str], str | None] | None = None):
        self._secrets = dict(secrets or {})
        self._lookup = lookup
        self._seen: set[str] = set(v for v in self._secrets.values() if v)

    def get_secret(self, name: str) -> str:
        """The value of ``name``.

        Raises:
            SecretNotFoundError: no such secret.
        """
        value = self._secrets.get(name)
        if value is None and self._lookup is not None:
            value = self._lookup(name)
            if value:
                self._seen.add(value)
        if value is None:
            raise SecretNotFoundError(f"secret {name!r} is not configured")
        return value

    def names(self) -> list[str]:
        """Names of the secrets given as a mapping (never values)."""
        return sorted(self._secrets)

    def known_values(self) -> Iterable[str]:
        """Values handed out so far or configured; used to redact model-facing text."""
        return tuple(self._seen)

    def redact(self, text: str) -> str:
        """``text`` with every known secret value replaced by ``[REDACTED]``."""
        for value in sorted(self._seen, key=len, reverse=True):
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def __repr__(self) -> str:
        return f"SecretsProvider(names={self.names()!r})"

    __str__ = __repr__
