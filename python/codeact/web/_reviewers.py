"""Who decides in the inbox: the reviewers file of ``codeact serve --reviewers FILE``, which
gives each reviewer a token of their own, so every decision made in the browser or through
the JSON API is recorded with the name of the reviewer whose token the request carried."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ("MIN_TOKEN_CHARS", "SHARED_TOKEN_ACTOR", "LOOPBACK_ACTOR", "load_reviewers", "reviewer_tokens")

MIN_TOKEN_CHARS = 16
"""The shortest token a reviewers file may give (``secrets.token_urlsafe(16)`` is 22)."""
SHARED_TOKEN_ACTOR = "web"
"""The actor recorded for a decision made with the single ``--token`` (no reviewer named)."""
LOOPBACK_ACTOR = "web (localhost)"
"""The actor recorded for a decision made on a server without any token (loopback only)."""

_NAME = re.compile(r"[A-Za-z0-9._@+-]{1,64}")


def load_reviewers(path: str | Path) -> dict[str, str]:
    """Reads a reviewers file: one ``name token`` per line (blank lines and lines starting
    with ``#`` are skipped). Names are 1-64 characters of letters, digits and ``._@+-``;
    tokens are at least ``MIN_TOKEN_CHARS`` characters without spaces.

    Returns:
        ``{token: name}``.

    Raises:
        OSError: the file cannot be read.
        ValueError: a line is malformed, a name or token is repeated, or the file names no
            reviewer (the message gives the line number, never a token).
    """
    tokens: dict[str, str] = {}
    names: set[str] = set()
    for n, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"{path}:{n}: expected 'name token', got {len(fields)} fields")
        name, token = fields
        if not _NAME.fullmatch(name):
            raise ValueError(f"{path}:{n}: the name {name!r} must be 1-64 letters, digits or ._@+-")
        if len(token) < MIN_TOKEN_CHARS:
            raise ValueError(f"{path}:{n}: {name}'s token is shorter than {MIN_TOKEN_CHARS} characters")
        if name in names:
            raise ValueError(f"{path}:{n}: the reviewer {name!r} is named twice")
        if token in tokens:
            raise ValueError(f"{path}:{n}: {name}'s token is also {tokens[token]}'s; each reviewer needs their own")
        tokens[token] = name
        names.add(name)
    if not tokens:
        raise ValueError(f"{path}: names no reviewer (one 'name token' per line)")
    return tokens


def reviewer_tokens(token: str | None, reviewers: Mapping[str, str] | None) -> dict[str, str]:
    """The tokens a server accepts, ``{token: actor}``: each reviewer's, and the single shared
    ``token`` (recorded as ``SHARED_TOKEN_ACTOR``).

    Raises:
        ValueError: the shared token is also a reviewer's.
    """
    accepted = dict(reviewers or {})
    if token is not None:
        if token in accepted:
            raise ValueError(f"the shared token is also {accepted[token]}'s reviewer token")
        accepted[token] = SHARED_TOKEN_ACTOR
    return accepted
