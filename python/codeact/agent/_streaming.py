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

For watchers in other processes (the web timeline), the runner also keeps the session's
*live row* in the store (``LiveRowWriter``, ``BaseSessionService.save_live``): the reply and
the output so far, bounded, overwritten, never part of the event log (docs/events.md).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from ..events import Content, Event, Part
from ..exceptions import SessionStoreError
from ..logs import agent_logger
from ..sessions._live import LIVE_MAX_CHARS, LiveRow

if TYPE_CHECKING:
    from ..sessions._service import BaseSessionService
    from ..sessions._types import Session
    from ._run import Run

__all__ = ("LIVE_INTERVAL", "OUTPUT_INTERVAL", "LiveOutput", "LiveRowWriter", "RedactedStream", "partial_event")

LIVE_INTERVAL = 0.2
"""Seconds between two writes of a run's live row (at most 5 a second), except the first
write after a stored event, which is made at once (so what follows the event shows)."""

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


def _tail(text: str) -> tuple[str, bool]:
    """``text`` cut to its last ``LIVE_MAX_CHARS`` characters, and whether it was cut."""
    return (text[-LIVE_MAX_CHARS:], True) if len(text) > LIVE_MAX_CHARS else (text, False)


class LiveRowWriter:
    """Keeps one run's live row in the store: what the run's partial events showed since the
    last stored event that holds it (the reply the model is writing, what the script printed
    since its last stored result), for watchers in other processes.

    The runner makes one on a run's first partial event (``RunConfig(streaming=True)``), and
    only for a store that keeps live rows (``BaseSessionService.keeps_live``), then hands it
    every event after yielding it (``see``) and ``close``s it when the run ends: the row is
    deleted. A stored ``model_reply`` ends the live reply and a stored ``script_result`` the
    live output (the event log now holds them). Writes: the first after a stored event at
    once, then at most one per ``interval``; text that arrives within the interval is written
    with the next event once it has passed. A store error never fails the run: it is logged
    once and the run writes no more live rows.

    Args:
        service: the store.
        session: the run's live ``Session`` (its last stored event is what the row follows).
        interval: seconds between two writes (``LIVE_INTERVAL``).
        clock: monotonic seconds (tests replace it).
    """

    def __init__(
        self,
        service: BaseSessionService,
        session: Session,
        interval: float = LIVE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._service = service
        self._session = session
        self.interval = interval
        self._clock = clock
        self._reply = ""
        self._output = ""
        self._truncated = False
        self._author = ""
        self._invocation = ""
        self._fresh = True  # nothing written since the last stored event: the next write is at once
        self._dirty = False
        self._last = -math.inf
        self.writes = 0  # rows written (deletes not counted)
        self._written = False  # a row may be in the store (close deletes it)
        self._broken = False

    def _last_id(self) -> str | None:
        events = self._session.events
        return events[-1].id if events else None

    async def see(self, event: Event) -> None:
        """Takes in an event the run yielded (after it was yielded): a partial event adds its
        text; a stored one may end the live reply or output. Writes the row when due."""
        if self._broken:
            return
        kind = event.kind
        if event.partial:
            text = "".join(p.text for p in event.content.parts if p.text) if event.content is not None else ""
            if not text:
                return
            if kind == "model_reply":
                self._reply, cut = _tail(self._reply + text)
            elif kind == "script_output":
                self._output, cut = _tail(self._output + text)
            else:
                return
            self._truncated = self._truncated or cut
            self._author, self._invocation = event.author, event.invocation_id
            self._dirty = True
        else:
            if kind == "model_reply":
                self._reply = ""
            elif kind == "script_result":
                self._output = ""
            else:
                return  # another stored event (a tool call, a state change): the text stays
            self._truncated = False
            self._fresh = True
            # the stored row follows an older event now: readers hide it until it is rewritten
            self._dirty = bool(self._reply or self._output)
        if self._dirty and (self._fresh or self._clock() - self._last >= self.interval):
            await self._write()

    async def _write(self) -> None:
        row = LiveRow(
            reply=self._reply,
            output=self._output,
            author=self._author,
            invocation_id=self._invocation,
            after=self._last_id(),
            truncated=self._truncated,
        )
        s = self._session
        self._dirty, self._fresh, self._last = False, False, self._clock()
        try:
            await self._service.save_live(app_name=s.app_name, user_id=s.user_id, session_id=s.id, live=row)
        except SessionStoreError as exc:
            self._broken = True
            _log.warning("the live row of session %r cannot be written (%s): no more this run", s.id, exc)
            return
        self._written = True
        self.writes += 1

    async def close(self) -> None:
        """Deletes the row (the run ended: its stored events hold everything it showed).
        Shielded from cancellation; a store error is logged, never raised."""
        if not self._written:
            return
        s = self._session
        self._written = False
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            try:
                await self._service.save_live(app_name=s.app_name, user_id=s.user_id, session_id=s.id, live=None)
            except SessionStoreError as exc:
                _log.warning("the live row of session %r cannot be deleted (%s)", s.id, exc)


_log = agent_logger
