"""Live previews of a run (``RunConfig(streaming=True)``, issue 51): the ``partial`` events
that carry the model's reply as it arrives and what the script prints while it runs. They
are yielded, never stored, never final (docs/events.md).

Printed output goes through one channel per run, ``LiveOutput``: whoever sees new output
``feed``s it (any thread), and the loop ``take``s what is due as one partial event of kind
``"script_output"``: the first at once, then at most one per ``OUTPUT_INTERVAL`` (10 per
second per run), each holding the text printed since the previous one. Today the driver feeds
a step's output at each step boundary (a tool call, the script's end); a runtime that reports
output during an advance (a native callback from the interpreter's worker thread) feeds the
same object, and the driver, while it awaits the advance, takes what is due every
``due_in()`` seconds.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..events import Content, Event, Part

if TYPE_CHECKING:
    from ._run import Run

__all__ = ("OUTPUT_INTERVAL", "LiveOutput", "RedactedStream", "partial_event")

OUTPUT_INTERVAL = 0.1
"""Seconds between two printed-output partial events of one run (at most 10 per second)."""


class RedactedStream:
    """Redacts a text that arrives in pieces: a secret value split across two pieces is
    redacted too. Each ``push`` returns the redacted text that can be shown now; an end of
    it that could be the start of a secret value is held back until the next piece shows
    whether it is (held text the stream never completes is not shown: the stored event that
    follows holds the whole text, redacted).

    Args:
        secrets: the run's secrets (``known_values()`` and ``redact()``), or None.
    """

    def __init__(self, secrets: Any) -> None:
        self._secrets = secrets
        self._held = ""

    def push(self, text: str) -> str:
        """The redacted text of ``text`` (after what was held) that may be shown now."""
        secrets = self._secrets
        if secrets is None:
            return text
        values = [v for v in secrets.known_values() if v]
        redacted = secrets.redact(self._held + text)
        hold = 0
        for h in range(min(max((len(v) for v in values), default=1) - 1, len(redacted)), 0, -1):
            tail = redacted[-h:]
            if any(v.startswith(tail) for v in values):
                hold = h
                break
        cut = len(redacted) - hold
        self._held = redacted[cut:]
        return redacted[:cut]


def partial_event(run: Run, kind: str, text: str) -> Event | None:
    """A ``partial=True`` event of ``run``'s agent: one model-role text part and
    ``custom_metadata={"codeact_kind": kind}``, or None when nothing of ``text`` can be shown
    yet. Secret values are redacted per kind of stream (``RedactedStream``: also one split
    across two events). It carries no state delta (the tools' pending deltas wait for the
    next stored event)."""
    streams = run.live_redaction
    stream = streams.get(kind)
    if stream is None:
        stream = streams[kind] = RedactedStream(run.ctx.secrets)
    text = stream.push(text)
    if not text:
        return None
    return Event(
        invocation_id=run.ctx.invocation_id,
        author=run.settings.name,
        content=Content(role="model", parts=[Part(text=text)]),
        custom_metadata={"codeact_kind": kind},
        partial=True,
    )


class LiveOutput:
    """What a running script printed and no partial event has shown yet, rate-limited.

    Args:
        interval: seconds between two takes (``OUTPUT_INTERVAL``).
        clock: monotonic seconds (tests replace it).

    ``feed`` may be called from any thread; ``take`` and ``due_in`` from the loop.
    """

    def __init__(self, interval: float = OUTPUT_INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._last = -math.inf

    def feed(self, text: str) -> None:
        """Adds printed text (ignored when empty)."""
        if text:
            with self._lock:
                self._pending.append(text)

    def due_in(self) -> float | None:
        """Seconds until the pending text may be taken (0: now), or None when none is pending."""
        with self._lock:
            if not self._pending:
                return None
            return max(0.0, self._last + self.interval - self._clock())

    def take(self) -> str | None:
        """The pending text when it may be shown now (the first take at once, then one per
        ``interval``), else None; what is taken is no longer pending."""
        with self._lock:
            if not self._pending:
                return None
            now = self._clock()
            if now < self._last + self.interval:
                return None
            text = "".join(self._pending)
            self._pending.clear()
            self._last = now
            return text

    def clear(self) -> None:
        """Drops the pending text (the turn ended: its ``script_result`` holds all of it)."""
        with self._lock:
            self._pending.clear()
