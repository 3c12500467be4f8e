"""Where ``CodeActToolset`` keeps its paused scripts, so that each pause is settled once.

A pause belongs to one ``run_code`` tool call (its pydantic-ai ``tool_call_id``); a resumed
script may pause again at a later call under the same tool call id, so a record holds the
current pause and the digests of the pauses already settled. A decision claims the current
pause (``pending`` -> ``resuming``), then settles it (the approved call started, or the
denial was given to the script) or releases it (nothing ran: it stays pending as it was).

- ``MemoryPauses``: in this process only (the toolset's default).
- ``StorePauses``: in a codeact session store, one session per tool call id, the record in the
  session's turn slot and the claim a compare-and-set on its version: any process sharing the
  store sees the same pause, and only one of them resumes it.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from typing import Any, Literal

import pydantic_core

from ..._values import encode_value
from ...exceptions import (
    AlreadyResumingError,
    NoPendingCallError,
    SessionExistsError,
    TurnConflictError,
)
from ...sessions import BaseSessionService

__all__ = ("Claimed", "MemoryPauses", "Pauses", "StorePauses", "pause_digest")

Status = Literal["pending", "resuming", "settled"]


def pause_digest(tool_call_id: str, tool: str, args: dict[str, Any], positional: Any, snapshot: bytes) -> str:
    """16 hex digits naming one pause: the ``run_code`` call, the paused inner call (tool,
    keyword and positional arguments, in their tagged JSON form) and the continuation's bytes,
    so two pauses at equal calls (a loop paying the same amount twice) differ."""
    call = encode_value([tool_call_id, tool, dict(args), list(positional)])
    h = hashlib.blake2b(pydantic_core.to_json(call, inf_nan_mode="constants"), digest_size=8)
    h.update(hashlib.blake2b(snapshot, digest_size=16).digest())
    return h.hexdigest()


def _digest_of(tool_call_id: str, data: dict[str, Any]) -> str | None:
    """``pause_digest`` of a pause as ``ScriptSuspended.to_dict()`` gives it (None: not one)."""
    try:
        snapshot = base64.b64decode(data["snapshot"])
        return pause_digest(tool_call_id, data["tool"], data["tool_args"], data.get("positional", ()), snapshot)
    except (KeyError, TypeError, ValueError):
        return None


@dataclasses.dataclass
class Claimed:
    """A pause claimed for a decision: its data (``ScriptSuspended.to_dict()``) and digest,
    and the store version the claim holds (0 in memory)."""

    tool_call_id: str
    data: dict[str, Any]
    digest: str
    version: int = 0
    adopted: _Record | None = dataclasses.field(default=None, repr=False)
    """(memory) the record a carried pause replaced: restored when the claim is released."""


def _already(tool_call_id: str) -> NoPendingCallError:
    return NoPendingCallError(
        f"the paused script of tool call {tool_call_id!r} was already resumed by an earlier decision (a "
        "pause is settled once); nothing ran"
    )


def _missing(tool_call_id: str) -> NoPendingCallError:
    return NoPendingCallError(
        f"an approval for tool call {tool_call_id!r} names no paused script: none is held here and the "
        "DeferredToolResults metadata carries none (pass metadata=requests.metadata, or give the toolset a "
        "session_service to find the pause by its tool call id); nothing ran"
    )


def _busy(tool_call_id: str) -> AlreadyResumingError:
    return AlreadyResumingError(
        f"the paused script of tool call {tool_call_id!r} is being resumed by another decision now; nothing ran here"
    )


class Pauses:
    """The interface both keepers share."""

    async def put(self, tool_call_id: str, data: dict[str, Any], digest: str, settled: Claimed | None) -> None:
        """Records a new pending pause of ``tool_call_id`` (``settled``: the claimed pause
        whose resume paused again, settled by it unless it is the same pause)."""
        raise NotImplementedError

    async def claim(self, tool_call_id: str, carried: dict[str, Any] | None, shown: str | None) -> Claimed:
        """Claims the pending pause of ``tool_call_id`` for a decision. ``carried``: the pause
        (``ScriptSuspended.to_dict()``) the decision's metadata holds, used when none is held
        here; ``shown``: the metadata's ``digest`` (a settled pause's is refused).

        Raises:
            NoPendingCallError: no pause is held or carried, or it was settled already.
            AlreadyResumingError: another decision claimed it and has not finished.
        """
        raise NotImplementedError

    async def finish(self, claimed: Claimed, *, settled: bool) -> None:
        """Ends a claim: the pause is settled, or (``settled=False``, nothing ran) pending again."""
        raise NotImplementedError

    def holds(self, tool_call_id: str) -> bool:
        """Whether the pause data travels in the metadata (False: the store holds it)."""
        raise NotImplementedError


@dataclasses.dataclass
class _Record:
    data: dict[str, Any] | None
    digest: str
    status: Status
    settled: set[str] = dataclasses.field(default_factory=set)


class MemoryPauses(Pauses):
    """Pauses in this process's memory. Every step is synchronous between awaits, so two
    decisions on one event loop cannot both claim a pause."""

    def __init__(self) -> None:
        self._records: dict[str, _Record] = {}

    def holds(self, tool_call_id: str) -> bool:
        return True

    async def put(self, tool_call_id: str, data: dict[str, Any], digest: str, settled: Claimed | None) -> None:
        record = self._records.get(tool_call_id)
        done = set(record.settled) if record is not None else set()
        if settled is not None and settled.digest != digest:
            done.add(settled.digest)
        self._records[tool_call_id] = _Record(data, digest, "pending", done)

    async def claim(self, tool_call_id: str, carried: dict[str, Any] | None, shown: str | None) -> Claimed:
        record = self._records.get(tool_call_id)
        done = record.settled if record is not None else set()
        digest = _digest_of(tool_call_id, carried) if carried is not None else None
        if (shown is not None and shown in done) or (digest is not None and digest in done):
            raise _already(tool_call_id)
        if record is not None and record.status == "resuming":
            raise _busy(tool_call_id)
        if record is not None and record.status == "pending" and record.data is not None:
            record.status = "resuming"  # the caller compares the digest the decision shows
            return Claimed(tool_call_id, record.data, record.digest)
        if carried is None or digest is None:
            raise _missing(tool_call_id) if record is None else _already(tool_call_id)
        # a pause this process did not make (another process, a restarted one): held from
        # now on, so that it is resumed once here
        previous = record if record is not None else _Record(None, "", "settled")
        self._records[tool_call_id] = _Record(carried, digest, "resuming", set(previous.settled))
        return Claimed(tool_call_id, carried, digest, adopted=previous)

    async def finish(self, claimed: Claimed, *, settled: bool) -> None:
        record = self._records.get(claimed.tool_call_id)
        if record is None or record.digest != claimed.digest or record.status != "resuming":
            return  # a later pause replaced it (put)
        if settled:
            record.settled.add(record.digest)
            record.status, record.data = "settled", None
        elif claimed.adopted is not None:  # nothing ran: as before the carried pause came
            if claimed.adopted.digest:
                self._records[claimed.tool_call_id] = claimed.adopted
            else:
                del self._records[claimed.tool_call_id]
        else:
            record.status = "pending"


class StorePauses(Pauses):
    """Pauses in a codeact session store: session ``(app_name, user_id, <tool call id>)``,
    the record in its turn slot (``data``: status, digest, settled digests and the pause
    without its snapshot; ``snapshot``: the continuation's bytes)."""

    def __init__(self, store: BaseSessionService, app_name: str, user_id: str) -> None:
        self.store = store
        self.app_name = app_name
        self.user_id = user_id

    def holds(self, tool_call_id: str) -> bool:
        return False

    def _ids(self, tool_call_id: str) -> dict[str, Any]:
        return {"app_name": self.app_name, "user_id": self.user_id, "session_id": tool_call_id}

    async def put(self, tool_call_id: str, data: dict[str, Any], digest: str, settled: Claimed | None) -> None:
        ids = self._ids(tool_call_id)
        try:
            await self.store.create_session(**ids)
        except SessionExistsError:
            pass
        slot = await self.store.load_turn(**ids)
        done = list(slot.data.get("settled", [])) if slot is not None else []
        if settled is not None and settled.digest != digest and settled.digest not in done:
            done.append(settled.digest)
        pause = {k: v for k, v in data.items() if k != "snapshot"}
        record = {"status": "pending", "digest": digest, "settled": done, "pause": pause}
        snapshot = base64.b64decode(data["snapshot"])
        try:
            await self.store.save_turn(
                **ids, data=record, snapshot=snapshot, expected_version=slot.version if slot is not None else 0
            )
        except TurnConflictError:
            raise _busy(tool_call_id) from None

    async def claim(self, tool_call_id: str, carried: dict[str, Any] | None, shown: str | None) -> Claimed:
        ids = self._ids(tool_call_id)
        slot = await self.store.load_turn(**ids)
        if slot is None:
            raise _missing(tool_call_id)
        status = slot.data.get("status")
        if shown is not None and shown in slot.data.get("settled", []):
            raise _already(tool_call_id)
        if status == "resuming":
            raise _busy(tool_call_id)
        if status != "pending" or slot.snapshot is None:
            raise _already(tool_call_id)
        try:
            version = await self.store.save_turn(
                **ids, data={**slot.data, "status": "resuming"}, snapshot=slot.snapshot, expected_version=slot.version
            )
        except TurnConflictError:
            raise _busy(tool_call_id) from None
        data = {**slot.data["pause"], "snapshot": base64.b64encode(slot.snapshot).decode("ascii")}
        return Claimed(tool_call_id, data, str(slot.data["digest"]), version)

    async def finish(self, claimed: Claimed, *, settled: bool) -> None:
        ids = self._ids(claimed.tool_call_id)
        slot = await self.store.load_turn(**ids)
        if slot is None or slot.version != claimed.version:
            return  # a later pause replaced it (put)
        if settled:
            done = [*slot.data.get("settled", []), claimed.digest]
            record = {"status": "settled", "digest": claimed.digest, "settled": done}
            await self.store.save_turn(**ids, data=record, snapshot=None, expected_version=slot.version)
        else:
            await self.store.save_turn(
                **ids, data={**slot.data, "status": "pending"}, snapshot=slot.snapshot, expected_version=slot.version
            )
