"""The configuration values of ``MontyRuntime``: the resource limits of each advance, the host
folders mounted into the sandbox, and the clocks that can stand in for the system clock.

Plain frozen pydantic models; ``codeact.runtime.monty`` re-exports them.
"""

from __future__ import annotations

import enum
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import _monty

__all__ = (
    "DEFAULT_MAX_STDOUT",
    "FrozenClock",
    "MiB",
    "Mount",
    "PathAccess",
    "ResourceLimits",
    "SteppingClock",
)

MiB = 1024 * 1024
DEFAULT_MAX_STDOUT = 10 * MiB
"""Bytes of ``print()`` output kept per advance; the rest is dropped behind a marker."""


class ResourceLimits(BaseModel):
    """Limits for each advance of a script (a start, or a resume up to the next stop).

    They travel inside snapshots, so a script resumed elsewhere stays bounded; time spent
    in tools between advances does not count.

    Attributes:
        max_duration: seconds of interpreter time per advance, sleeps (``time.sleep``,
            ``asyncio.sleep``) included, or None for no cap.
        max_memory: bytes of interpreter heap, or None for no cap. Checked before large
            allocations, so ``'x' * 10**10`` fails fast without allocating.
        max_recursion_depth: Python frames; capped at ``RECURSION_CEILING`` (10,000) even
            when "unlimited", so the host stack always holds.
        max_os_calls: OS calls (file and directory operations, clock reads, environment
            lookups, sleeps) one run may make across all its advances (default 1,000,000), or
            None for no cap. They are answered in place and never count as tool calls (so a
            script that reads many files is not taken for a tool loop); past the budget the
            script ends with an uncatchable ``RuntimeError`` naming ``max_os_calls``. Counted
            per run and carried in its snapshots.
    """

    model_config = ConfigDict(frozen=True)

    max_duration: float | None = Field(default=5.0, gt=0)
    max_memory: int | None = Field(default=256 * MiB, gt=0)
    max_recursion_depth: int = Field(default=1000, ge=1, le=_monty.RECURSION_CEILING)
    max_os_calls: int | None = Field(default=1_000_000, gt=0)

    @classmethod
    def unlimited(cls) -> ResourceLimits:
        """No time or memory cap, recursion at the ceiling. For trusted scripts only."""
        return cls(max_duration=None, max_memory=None, max_recursion_depth=_monty.RECURSION_CEILING, max_os_calls=None)


class PathAccess(str, enum.Enum):
    """What a script may do under a mount."""

    READ_ONLY = "read-only"
    READ_WRITE = "read-write"
    OVERLAY = "overlay"
    """Reads see the host folder plus the session's overlay; writes stay in the overlay, kept
    in the session store across turns and runs, and never reach the host (SPEC §5 "Files")."""


DEFAULT_OVERLAY_MAX_BYTES = 16 * 1024 * 1024
"""An overlay mount's default bound on the bytes of the files it holds."""

DEFAULT_OVERLAY_MAX_FILES = 1000
"""An overlay mount's default bound on the number of entries (files, folders, deletions) it holds."""


class Mount(BaseModel):
    """A host folder visible to scripts at ``virtual_path``.

    Attributes:
        virtual_path: absolute path scripts use (``/data``): no ``..``, no trailing ``/``,
            not ``/``; validated when the runtime is built.
        host_path: an existing folder on the host.
        access: ``PathAccess.READ_ONLY`` (default) or ``PathAccess.READ_WRITE``. Under
            ``CodeActAgent`` a read-write mount's writes go to the turn's file layer and reach
            the host folder once, after the commit that records the script's end (SPEC §5
            "Files", docs/durability.md); a direct ``MontyRuntime.start`` writes as it goes.
            ``PathAccess.OVERLAY``: reads see the host folder plus the session's overlay, writes
            stay in the overlay (kept in the session store, listed by ``Runner.files``) and never
            reach the host, not even from a direct ``MontyRuntime.start``. ``MontyRuntime`` only.
        max_bytes: an overlay mount's bound on the bytes of the files it holds (default 16 MiB);
            a script that ends past it gets an ``OSError`` and its writes to the mount are dropped.
        max_files: an overlay mount's bound on the entries it holds (files, folders, deletions;
            default 1000), enforced as ``max_bytes``.
    """

    model_config = ConfigDict(frozen=True)

    virtual_path: str
    host_path: Path
    access: PathAccess = PathAccess.READ_ONLY
    max_bytes: int = Field(default=DEFAULT_OVERLAY_MAX_BYTES, ge=0)
    max_files: int = Field(default=DEFAULT_OVERLAY_MAX_FILES, ge=0)


class FrozenClock(BaseModel):
    """A clock that always reads ``at``, in place of the system clock: every ``datetime.now()``,
    ``date.today()`` and ``time.time()`` of a script answers that instant (shown in the
    sandbox's ``timezone``). Each read is journaled like a system clock read, so a replay
    answers the same values.

    Attributes:
        at: the instant; a naive datetime is taken as UTC.
    """

    model_config = ConfigDict(frozen=True)

    at: datetime

    def instants(self) -> tuple[float, float]:
        """(the first read, the step between reads), in seconds since the Unix epoch."""
        return _epoch_seconds(self.at), 0.0


class SteppingClock(BaseModel):
    """A clock that moves ``step`` at each read: a run's first clock read answers ``start``,
    its n-th (from 0) ``start + n * step``. The count belongs to the run: it goes on across
    the run's tool calls and resumes (it travels in its snapshots, also to another process),
    and starts again at ``start`` for the next run (each ``feed`` of a namespace session is
    one run). Reads are journaled like system clock reads.

    Attributes:
        start: the first instant; a naive datetime is taken as UTC.
        step: the time between two reads (default one second; zero or more).
    """

    model_config = ConfigDict(frozen=True)

    start: datetime
    step: timedelta = timedelta(seconds=1)

    @field_validator("step")
    @classmethod
    def _not_negative(cls, step: timedelta) -> timedelta:
        if step < timedelta(0):
            raise ValueError("step must be zero or more")
        return step

    def instants(self) -> tuple[float, float]:
        """(the first read, the step between reads), in seconds since the Unix epoch."""
        return _epoch_seconds(self.start), self.step.total_seconds()


def as_utc(at: datetime) -> datetime:
    """``at``, a naive datetime taken as UTC."""
    return at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at


def _epoch_seconds(at: datetime) -> float:
    return (as_utc(at) - datetime(1970, 1, 1, tzinfo=timezone.utc)) / timedelta(seconds=1)


def engine_mounts(mounts: tuple[Mount, ...]) -> list[tuple[str, str, bool, int | None]]:
    """The native engine's mount tuples: (virtual path, host path, writable, overlay budget).
    An overlay mount is writable for the engine and always served through a layer
    (``MontyRuntime._layered``), its memory within ``overlay_budget`` (a write past it fails
    in the script)."""
    return [
        (m.virtual_path, os.fspath(m.host_path), m.access is not PathAccess.READ_ONLY, overlay_budget(m))
        for m in mounts
    ]


def overlay_budget(mount: Mount) -> int | None:
    """The memory budget (bytes) monty-fs gives an overlay mount inside an advance: its
    ``max_bytes`` plus room for ``max_files`` entries' paths and bookkeeping
    (``_OVERLAY_ENTRY_ROOM`` each); the exact bounds are checked when the script ends."""
    if mount.access is not PathAccess.OVERLAY:
        return None
    return mount.max_bytes + mount.max_files * _OVERLAY_ENTRY_ROOM


_OVERLAY_ENTRY_ROOM = 512
"""Bytes of overlay memory allowed per entry beside its contents (its path and monty-fs's
per-entry overhead)."""

EMPTY_LAYER = b"CAFL\x01\x00\x00\x00\x00"
"""An empty file layer (``codeact.agent._files.EMPTY``)."""
