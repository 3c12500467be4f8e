"""Overlay mounts (SPEC §5 "Files", issue 53 item 2): a session's files the host never sees.

An overlay mount's part of the file layer (``_files``) is the session's overlay. A turn starts
from the overlay the session holds: a blob of the session store (``put_blob``, addressed by the
SHA-256 of the layer's bytes) named by the session state key ``OVERLAY_STATE_KEY``. The turn
record keeps that name (``TurnRecord.files["start"]``), so a recovery that replays the script
from its start reads the same overlay and recomputes the same layer. When the script ends, the
overlay part of its layer is checked against the mounts' bounds (``Mount.max_bytes``,
``Mount.max_files``): within them it is stored as a blob and the session state moves to it with
an event of the turn (a recovery stores the same blob and the same delta again); past them the
script's result becomes an ``OSError`` fed back to the model and the overlay stays as it was.
Nothing of an overlay is ever applied to a host folder.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, NamedTuple

from ..runtime import Raised
from ._files import EMPTY, decode_layer, overlay_mounts, overlay_part, start_layer
from ._turn_state import TurnEnd

if TYPE_CHECKING:
    from ..events import Event
    from ..sessions import BaseSessionService
    from ._run import Run

__all__ = (
    "OVERLAY_STATE_KEY",
    "SessionFile",
    "end_overlay",
    "load_overlay",
    "session_files",
    "start_files",
    "with_start",
)

OVERLAY_STATE_KEY = "codeact_overlay"
"""The session state key naming the blob of the session's overlay (SHA-256 hex; absent: empty)."""


class SessionFile(NamedTuple):
    """One path of a session's overlay (``Runner.files``).

    Attributes:
        path: the full virtual path (``/scratch/notes.txt``).
        size: a file's size in bytes (0 for a folder or a deletion).
        kind: ``"file"``, ``"dir"`` (a folder the script made) or ``"deleted"`` (a host path the
            script deleted: the session no longer sees it).
    """

    path: str
    size: int
    kind: str


def with_start(files: dict[str, Any] | None, digest: str | None) -> dict[str, Any] | None:
    """A turn record's ``files`` with the name of the overlay the script started from."""
    return files if digest is None else {**(files or {}), "start": digest}


async def load_overlay(service: BaseSessionService | None, key: tuple[str, str, str], digest: str | None) -> bytes:
    """The overlay layer named ``digest`` in the session ``key`` (app, user, session); EMPTY
    for no name or no store.

    Raises:
        ValueError: the store has no such blob, or its bytes are not that layer.
    """
    if not digest or service is None:
        return EMPTY
    app, user, sid = key
    data = await service.get_blob(app_name=app, user_id=user, session_id=sid, digest=digest)
    if data is None or hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"the session's overlay {digest[:12]} is missing or damaged in the store")
    decode_layer(data)
    return data


async def start_files(runtime: Any, run: Run) -> dict[str, Any]:
    """The ``TurnState`` fields a new script starts with: its layer (the session's overlay when
    ``runtime`` has overlay mounts) and the overlay's name (``overlay_start``)."""
    layer = start_layer(runtime)
    digest = run.ctx.session.state.get(OVERLAY_STATE_KEY) if layer is not None and overlay_mounts(runtime) else None
    if not isinstance(digest, str) or not digest:
        return {"files": layer, "overlay_start": None}
    session = run.ctx.session
    data = await load_overlay(run.ctx.session_service, (session.app_name, session.user_id, session.id), digest)
    return {"files": data, "overlay_start": digest}


def over_bounds(layer: bytes, mounts: dict[str, Any]) -> str | None:
    """The ``OSError`` text when the overlay part of ``layer`` passes a mount's bounds, else None."""
    for prefix, mount in sorted(mounts.items()):
        entries = decode_layer(overlay_part(layer, (prefix,)))
        size = sum(len(e.content) for e in entries)
        if size > mount.max_bytes or len(entries) > mount.max_files:
            return (
                f"OSError: the overlay mount {prefix} would hold {size} bytes in {len(entries)} entries, "
                f"past its bounds (max_bytes={mount.max_bytes}, max_files={mount.max_files}); "
                "this script's writes to it were discarded"
            )
    return None


async def end_overlay(driver: Any, driven: AsyncGenerator[Any, None]) -> AsyncGenerator[Any, None]:
    """``driven`` (a ``TurnDriver._drive``) with the overlay's end: before the ``TurnEnd`` of a
    script that ended, its overlay is checked, stored, and the session state moved to it by an
    event (or the end becomes the ``OSError`` of ``over_bounds``)."""
    mounts = overlay_mounts(driver.agent.runtime)
    async with aclosing(driven):
        async for item in driven:
            if mounts and type(item) is TurnEnd and driver.state.files is not None:
                ended = item.how in ("finished", "budget") or driver.run.outcome == "handed_off"
                if ended:
                    event, item = await _store(driver, mounts, item)
                    if event is not None:
                        yield event
            yield item


async def _store(driver: Any, mounts: dict[str, Any], end: TurnEnd) -> tuple[Event | None, TurnEnd]:
    st, run = driver.state, driver.run
    ours = overlay_part(st.files, mounts)
    before = await load_overlay(driver._service, driver._key, st.overlay_start)
    if ours == overlay_part(before, mounts):
        return None, end
    message = over_bounds(ours, mounts)
    if message is not None:
        step = end.step
        stdout = getattr(step, "stdout", "")
        return None, TurnEnd(end.how, Raised(message, stdout=stdout), end.message)
    digest = hashlib.sha256(ours).hexdigest()
    if driver._service is None:
        return None, end
    app, user, sid = driver._key
    await driver._service.put_blob(app_name=app, user_id=user, session_id=sid, digest=digest, data=ours)
    return run.event(state_delta={OVERLAY_STATE_KEY: digest if ours != EMPTY else None}), end


async def session_files(service: BaseSessionService, app_name: str, user_id: str, session_id: str) -> list[SessionFile]:
    """The paths of the session's overlay, in path order (``Runner.files``).

    Raises:
        SessionNotFoundError: no such session.
        ValueError: the overlay's blob is missing or damaged.
    """
    from ..exceptions import SessionNotFoundError

    session = await service.get_session(app_name=app_name, user_id=user_id, session_id=session_id)
    if session is None:
        raise SessionNotFoundError(f"session {session_id!r} of user {user_id!r} not found in app {app_name!r}")
    digest = session.state.get(OVERLAY_STATE_KEY)
    data = await load_overlay(service, (app_name, user_id, session_id), digest if isinstance(digest, str) else None)
    return [SessionFile(e.path, len(e.content), e.kind) for e in decode_layer(data)]
