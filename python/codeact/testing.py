"""Test doubles: ``ScriptedRuntime`` replays planned steps instead of interpreting code.

Use it to test agent-loop logic (dispatch, checkpoints, recovery) without an
interpreter; it follows the runtime seam exactly, including suspension.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .exceptions import CodeRuntimeError, SnapshotError
from .runtime import (
    AdvanceTicket,
    Call,
    Complete,
    Raised,
    ResumeError,
    ResumeValue,
    RunStep,
    RuntimeCapabilities,
    ToolStyle,
    default_tool_catalog,
    resume_in_thread,
    step_within,
)

if TYPE_CHECKING:
    from .tools import Tool

__all__ = ("PlannedCall", "PlannedComplete", "PlannedRaise", "ScriptedRuntime")


@dataclass(frozen=True)
class PlannedCall:
    """The script calls ``name`` with keyword ``args`` (printing ``stdout`` first)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    stdout: str = ""
    call_id: int | None = None


@dataclass(frozen=True)
class PlannedComplete:
    """The script completes with ``value``."""

    value: Any
    stdout: str = ""


@dataclass(frozen=True)
class PlannedRaise:
    """The script fails with ``message``."""

    message: str
    stdout: str = ""


Planned = PlannedCall | PlannedComplete | PlannedRaise


def _encode(step: Planned) -> dict[str, Any]:
    if isinstance(step, PlannedCall):
        return {"k": "call", "name": step.name, "args": step.args, "stdout": step.stdout, "call_id": step.call_id}
    if isinstance(step, PlannedComplete):
        return {"k": "complete", "value": step.value, "stdout": step.stdout}
    return {"k": "raise", "message": step.message, "stdout": step.stdout}


def _decode(data: dict[str, Any]) -> Planned:
    if data["k"] == "call":
        return PlannedCall(data["name"], data["args"], data["stdout"], data["call_id"])
    if data["k"] == "complete":
        return PlannedComplete(data["value"], data["stdout"])
    return PlannedRaise(data["message"], data["stdout"])


class ScriptedPendingCall:
    """The ``PendingCall`` a ``ScriptedRuntime`` returns for a ``PlannedCall`` (SPEC §2).

    ``name``, ``keyword_args`` and ``call_id`` come from the planned step; ``positional_args``
    is always ``()``. Single use, like every ``PendingCall``.
    """

    def __init__(self, runtime: ScriptedRuntime, rest: list[Planned], step: PlannedCall, call_id: int) -> None:
        self._runtime = runtime
        self._rest = rest
        self._used = False
        self.name = step.name
        self.positional_args: tuple[Any, ...] = ()
        self.keyword_args = dict(step.args)
        self.call_id = call_id
        self._step = step
        self._origin: bytes | None = None

    def dump(self) -> bytes:
        """The paused run as bytes: JSON of the remaining planned steps, the next call id and this call.

        Returns:
            UTF-8 JSON bytes that ``ScriptedRuntime.resume`` accepts.

        Raises:
            CodeRuntimeError: the call was already resumed, or the runtime has ``supports_suspension=False``.
        """
        if self._used:
            raise CodeRuntimeError("this PendingCall was already resumed; a PendingCall is single use")
        if not self._runtime.supports_suspension:
            raise CodeRuntimeError("this ScriptedRuntime cannot suspend")
        if self._origin is not None:
            return self._origin
        call = {"name": self.name, "args": self.keyword_args, "call_id": self.call_id}
        return json.dumps(
            {"rest": [_encode(s) for s in self._rest], "next_id": self.call_id + 1, "call": call}
        ).encode()

    def resume(self, outcome: ResumeValue | ResumeError, *, os_replay: Sequence[tuple[str, Any]] = ()) -> RunStep:
        """Answers the call with ``outcome``. ``os_replay`` is accepted for the seam's signature
        and unused: a scripted runtime answers no OS calls, so there is nothing to replay."""
        if self._used:
            raise CodeRuntimeError("this PendingCall was already resumed; a PendingCall is single use")
        self._used = True
        return self._runtime._advance(self._rest, outcome, self.call_id + 1)

    def resume_async(
        self, outcome: ResumeValue | ResumeError, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> AdvanceTicket:
        """``resume`` on a worker thread (this runtime has no native worker): its ticket."""
        return resume_in_thread(self.resume, outcome, os_replay)

    def resume_within(
        self, outcome: ResumeValue | ResumeError, timeout: float, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> RunStep | AdvanceTicket:
        """``resume_async``, then the step when it finished within ``timeout`` seconds, else the ticket."""
        return step_within(self.resume_async(outcome, os_replay), timeout)


class ScriptedRuntime:
    """Replays planned programs: each ``start`` takes the next program (the script text is
    recorded in ``scripts`` and otherwise ignored).

    A ``PlannedCall`` followed by more steps pauses there; the resume outcome is recorded in
    ``outcomes``. A ``ResumeError`` makes the program raise unless the next planned step is
    a ``PlannedComplete`` or ``PlannedCall`` (the script caught it). An exhausted program
    completes with None.

    Args:
        programs: one list of planned steps per expected ``start``.
        supports_suspension: whether ``dump`` / ``resume`` from bytes work.
        prompt: the capabilities prompt.
    """

    def __init__(
        self,
        programs: Sequence[Sequence[Planned]],
        *,
        supports_suspension: bool = True,
        prompt: str = "scripted test runtime",
    ) -> None:
        self.programs = [list(p) for p in programs]
        self.supports_suspension = supports_suspension
        self.prompt = prompt
        self.scripts: list[str] = []
        self.outcomes: list[ResumeValue | ResumeError] = []
        self.starts = 0

    def capabilities(self) -> RuntimeCapabilities:
        """``RuntimeCapabilities`` with this runtime's ``supports_suspension`` and ``prompt``."""
        return RuntimeCapabilities(supports_suspension=self.supports_suspension, prompt=self.prompt)

    def render_tools(self, tools: Sequence[Tool]) -> str:
        """The tool catalog of ``default_tool_catalog(tools)`` (the seam's default rendering)."""
        return default_tool_catalog(tools)

    @property
    def tool_style(self) -> ToolStyle:
        """``"call_tool"``: scripts reach tools only through ``call_tool``."""
        return "call_tool"

    def seal(self, data: bytes) -> str | None:
        """None: this runtime has no snapshot key (stored turns are not sealed)."""
        return None

    def start(self, script: str, script_name: str = "main.py") -> RunStep:
        """Take the next planned program and run it to its first call or end; ``script`` is only
        recorded in ``scripts``.

        Returns:
            The first ``RunStep`` of the program.

        Raises:
            CodeRuntimeError: no programs are left.
        """
        self.scripts.append(script)
        if not self.programs:
            raise CodeRuntimeError("ScriptedRuntime has no programs left")
        self.starts += 1
        return self._advance(self.programs.pop(0), None, 0)

    def resume(
        self, snapshot: bytes, outcome: ResumeValue | ResumeError, *, os_replay: Sequence[tuple[str, Any]] = ()
    ) -> RunStep:
        """Resume from bytes made by ``ScriptedPendingCall.dump`` with ``outcome`` as the call's answer.
        ``os_replay`` is the seam's and unused: a scripted runtime answers no OS calls.

        Raises:
            CodeRuntimeError: the runtime has ``supports_suspension=False``.
            SnapshotError: ``snapshot`` is not a ``ScriptedRuntime`` snapshot.
        """
        if not self.supports_suspension:
            raise CodeRuntimeError("this ScriptedRuntime cannot suspend")
        try:
            data = json.loads(snapshot)
            rest = [_decode(s) for s in data["rest"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise SnapshotError(f"snapshot error: not a ScriptedRuntime snapshot ({exc})") from exc
        return self._advance(rest, outcome, int(data["next_id"]))

    def restore(self, snapshot: bytes) -> RunStep:
        """The ``Call`` a snapshot made by ``ScriptedPendingCall.dump`` is paused at, live (the
        seam's ``SuspendingRuntime.restore``); its call's ``dump()`` gives back ``snapshot``.

        Raises:
            CodeRuntimeError: the runtime has ``supports_suspension=False``.
            SnapshotError: not a ScriptedRuntime snapshot.
        """
        if not self.supports_suspension:
            raise CodeRuntimeError("this ScriptedRuntime cannot suspend")
        try:
            data = json.loads(snapshot)
            rest = [_decode(s) for s in data["rest"]]
            call = data["call"]
            planned = PlannedCall(str(call["name"]), dict(call["args"]))
            pending = ScriptedPendingCall(self, rest, planned, int(call["call_id"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise SnapshotError(f"snapshot error: not a ScriptedRuntime snapshot ({exc})") from exc
        pending._origin = bytes(snapshot)
        return Call(pending)

    def _advance(self, rest: list[Planned], outcome: ResumeValue | ResumeError | None, next_id: int) -> RunStep:
        if outcome is not None:
            self.outcomes.append(outcome)
            if isinstance(outcome, ResumeError) and not rest:
                return Raised(f"{outcome.exc_type}: {outcome.message}")
        if not rest:
            return Complete(None)
        step, rest = rest[0], rest[1:]
        if isinstance(step, PlannedCall):
            call_id = step.call_id if step.call_id is not None else next_id
            return Call(ScriptedPendingCall(self, rest, step, call_id), step.stdout)
        if isinstance(step, PlannedComplete):
            return Complete(step.value, step.stdout)
        return Raised(step.message, step.stdout)
