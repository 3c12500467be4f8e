"""The live row (issue 51): what a running turn has streamed so far, for watchers in other
processes (the web timeline). One bounded, overwritten row per session, beside the event log
and never part of it: ``BaseSessionService.save_live`` / ``load_live``.

A row holds the tail of the reply the model is writing and of what the script printed since
the last stored event that shows them, each cut to its last ``LIVE_MAX_CHARS`` characters, and
the id of the last stored event it follows (``after``): a reader shows the row only while
that event is still the session's last, so the text never shows twice once the complete
reply or the script's result is stored. See docs/events.md ("The live row").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pydantic_core

__all__ = ("LIVE_MAX_CHARS", "LiveRow", "live_from_json", "live_to_json")

LIVE_MAX_CHARS = 16_384
"""Characters kept of the live reply and of the live output each (their last ones)."""


@dataclass(frozen=True, slots=True)
class LiveRow:
    """A running turn's live text as stored (``BaseSessionService.load_live``).

    Attributes:
        reply: the text of the model reply being written (its last ``LIVE_MAX_CHARS``
            characters), ``""`` between replies.
        output: what the running script printed since its last stored result (its last
            ``LIVE_MAX_CHARS`` characters).
        author: the agent writing it.
        invocation_id: the run's invocation.
        after: the id of the session's last stored event when the text was written (None: the
            session had none); the row is current only while that event is still the last.
        truncated: whether ``reply`` or ``output`` lost its head to the bound.
        version: set by the store: 1 on the first write of a row, then one more per write.
        updated_at: set by the store: seconds since the epoch of the last write.
    """

    reply: str = ""
    output: str = ""
    author: str = ""
    invocation_id: str = ""
    after: str | None = None
    truncated: bool = False
    version: int = 0
    updated_at: float = 0.0

    def bounded(self) -> LiveRow:
        """This row with ``reply`` and ``output`` cut to their last ``LIVE_MAX_CHARS`` characters."""
        if len(self.reply) <= LIVE_MAX_CHARS and len(self.output) <= LIVE_MAX_CHARS:
            return self
        return replace(self, reply=self.reply[-LIVE_MAX_CHARS:], output=self.output[-LIVE_MAX_CHARS:], truncated=True)


def live_to_json(row: LiveRow) -> str:
    """The stored JSON text of ``row``'s content (bounded; without ``version`` and
    ``updated_at``, which the store keeps in columns of their own). JSON in a text column
    (never the raw text): a script may print ``chr(0)``, which PostgreSQL's ``TEXT`` refuses."""
    row = row.bounded()
    data = {
        "reply": row.reply,
        "output": row.output,
        "author": row.author,
        "invocation_id": row.invocation_id,
        "after": row.after,
        "truncated": row.truncated,
    }
    try:
        return pydantic_core.to_json(data).decode()
    except (pydantic_core.PydanticSerializationError, UnicodeError, ValueError):
        # a lone surrogate (a script may print one): shown escaped, like the event log's text
        clean = {
            k: v.encode("utf-8", "backslashreplace").decode() if isinstance(v, str) else v for k, v in data.items()
        }
        return pydantic_core.to_json(clean).decode()


def live_from_json(text: str | bytes, version: int, updated_at: float) -> LiveRow | None:
    """A stored row read back (None when its text is not a row this build wrote)."""
    try:
        data: Any = pydantic_core.from_json(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    after = data.get("after")
    return LiveRow(
        reply=str(data.get("reply") or ""),
        output=str(data.get("output") or ""),
        author=str(data.get("author") or ""),
        invocation_id=str(data.get("invocation_id") or ""),
        after=after if isinstance(after, str) else None,
        truncated=bool(data.get("truncated")),
        version=int(version),
        updated_at=float(updated_at),
    )
