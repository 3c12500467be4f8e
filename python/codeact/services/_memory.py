"""Memory services: what an agent may recall from past conversations of the same user.

``add_session_to_memory`` indexes a session's text events; ``search_memory`` returns the
entries sharing at least one keyword with the query, best first (most shared keywords, then
most recent).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

from pydantic import BaseModel

from ..sessions._types import Session

__all__ = ("BaseMemoryService", "InMemoryMemoryService", "MemoryEntry", "keywords")

_WORD = re.compile(r"[a-z0-9]+")


def keywords(text: str) -> set[str]:
    """Lower-cased alphanumeric words of ``text`` (the keyword-search vocabulary)."""
    return set(_WORD.findall(text.lower()))


class MemoryEntry(BaseModel):
    """One remembered message.

    Attributes:
        text: the message text.
        author: ``"user"`` or the agent's name.
        session_id: where it was said.
        timestamp: seconds since the epoch.
    """

    text: str
    author: str
    session_id: str
    timestamp: float


class BaseMemoryService(ABC):
    """Stores and searches memories per (app, user)."""

    @abstractmethod
    async def add_session_to_memory(self, session: Session) -> None:
        """Indexes the text of every event of ``session`` (again: re-adding replaces it)."""

    @abstractmethod
    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> list[MemoryEntry]:
        """Entries of this user matching ``query``, best first."""


class InMemoryMemoryService(BaseMemoryService):
    """Keyword search over the events of added sessions, kept in a dict."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], dict[str, list[MemoryEntry]]] = {}

    async def add_session_to_memory(self, session: Session) -> None:
        """Index the text of ``session``'s events (``BaseMemoryService.add_session_to_memory``).

        Events without text and error events are skipped; adding the same session again replaces
        its entries.
        """
        entries = [
            MemoryEntry(text=e.content.text, author=e.author, session_id=session.id, timestamp=e.timestamp)
            for e in session.events
            if e.content is not None and e.content.text and not e.error_code
        ]
        self._sessions.setdefault((session.app_name, session.user_id), {})[session.id] = entries

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> list[MemoryEntry]:
        """Entries of this user sharing a keyword with ``query`` (``BaseMemoryService.search_memory``).

        Returns:
            The matching entries, most shared keywords first, then newest first; ``[]`` when
            ``query`` has no keyword.
        """
        wanted = keywords(query)
        if not wanted:
            return []
        scored: list[tuple[int, float, MemoryEntry]] = []
        for entries in self._sessions.get((app_name, user_id), {}).values():
            for entry in entries:
                hits = len(wanted & keywords(entry.text))
                if hits:
                    scored.append((hits, entry.timestamp, entry))
        scored.sort(key=lambda t: (-t[0], -t[1]))
        return [e for _, _, e in scored]
