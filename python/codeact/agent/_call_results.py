"""What the turn driver makes of one call: the per-tool plan, the tool to run, a pause,
an in-doubt notice, or the end of the turn (SPEC §5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias, final

from ..events import Event
from ..runtime import Complete, PendingCall, ResumeError, ResumeValue
from ..sessions._journal import JournalRecord
from ..tools import FunctionTool, Tool
from ..turns._codec import PendingCallInfo
from ..turns._record import PendingEntry

Outcome = ResumeValue | ResumeError


@final
@dataclass(slots=True)
class _Suspend:
    entry: PendingEntry
    info: PendingCallInfo


@final
@dataclass(slots=True)
class _Stop:
    event: Event


@final
@dataclass(slots=True)
class _Budget:
    message: str


@final
@dataclass(slots=True)
class _Final:
    step: Complete


_TURN_ENDS = frozenset({_Final, _Stop, _Budget})
"""The results of a call that end the turn (no later call of a gather is resolved)."""
_SHORT_SCALARS = frozenset({float, bool, type(None)})
_SHORT_INT = 2**53
"""Ints inside this bound (magnitude) have far fewer digits than ``MAX_INT_DIGITS``: such a
result needs no plain-data walk, no size check and no blob (``_checked_result``, ``_record``)."""


@dataclass(slots=True, frozen=True)
class _Plan:
    """What the driver reads once per tool name and turn (``TurnDriver._plan``).

    Attributes:
        tool: the tool the name resolves to (None: no such tool in this run).
        gated: its calls need a confirmation (``Run.needs_confirmation``).
        in_place: ``tool`` when a quick call of it may run in place (``_in_place``): a
            ``FunctionTool`` whose ``run`` is its own and whose function takes no
            ``ToolContext``, with no retries, in a run that is not traced, has no plugins
            and whose agent has no tool callbacks; else None.
        holds: its calls are read-only (SPEC §5 v4): no intent, and an outcome held until
            the turn's next durable write (``_JournalWrites._held``; written before the
            script goes on when the runtime can write files, as a file write is an effect
            made during the script's advance). A long-running tool never holds.
        call: ``tool``'s name as JSON text (what a held outcome's ``"c"`` names).
        quick: a live call of it may skip ``_resolve``'s walk (``TurnDriver._quick``): no gate.
        names: the parameter names of a closed schema (``additionalProperties: false``), or
            None: a call naming another argument goes through ``_resolve`` (its error).
        pauses: it is long-running and the run can suspend (a call pauses for its result).
        intent: the start of its intent record's text, ``["<tool>",`` (the digest follows).
    """

    tool: Tool | None
    gated: bool
    in_place: FunctionTool | None = None
    holds: bool = False
    call: str = ""
    quick: bool = False
    pauses: bool = False
    intent: str = ""
    names: frozenset[str] | None = None


@final
@dataclass(slots=True)
class _Invoke:
    """The tool is to run now (after its intent is written); once it ran (``_invoke``),
    ``outcome`` is what the script gets, to be recorded (after the tool's state changes,
    ``changes``, are stored)."""

    tool: Tool
    args: dict[str, Any]
    pos: int
    digest: str
    call_key: str
    journaled: bool  # the journal holds its intent already (a recovery re-runs it)
    call: PendingCall
    decided: str = ""  # how it was allowed to run ("approved", "handler", "rerun"), kept in its intent
    note: JournalRecord | None = None  # who decided (a decision record), written with its intent
    outcome: Outcome | None = None  # set when the tool ran
    changes: bool = False  # the tool changed state or artifacts (stored as an event before its outcome)


_Resolved: TypeAlias = "ResumeValue | ResumeError | _Invoke | _Suspend | _Notice | _Final | _Stop | _Budget"
"""What ``TurnDriver._resolve`` makes of one call: an ``Outcome`` the script gets now, an
``_Invoke`` (the tool runs), a ``_Suspend``, a ``_Notice`` (an in-doubt notice and one of the
others), or a ``_Final`` / ``_Stop`` / ``_Budget`` that ends the turn."""

_Settled: TypeAlias = "ResumeValue | ResumeError | _Invoke | _Suspend | _Final | _Stop | _Budget"
"""A call's result once its notice is taken out: what ``_Resolved`` holds but a ``_Notice``.
An ``_Invoke`` with an ``outcome`` ran and its outcome is to be recorded; one without did not
run (a later call ends the turn, or the confirmation handler failed)."""


@final
@dataclass(slots=True)
class _Notice:
    """An event to emit before the call's result (an in-doubt notice), and the result."""

    event: Event
    then: ResumeValue | ResumeError | _Invoke | _Suspend


class _HandlerFailed(Exception):
    def __init__(self, cause: BaseException, suspend: _Suspend) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.suspend = suspend


def handler_verdict(verdict: Any) -> tuple[bool | None, str]:
    """A confirmation handler's answer as ``(approve or None for ask, reason)``.

    Raises:
        ValueError: an answer that is none of the documented forms.
    """
    if verdict is None or verdict == "ask":
        return None, ""
    if verdict is True or verdict in ("approve", "approved", "yes"):
        return True, ""
    if verdict is False or verdict in ("deny", "denied", "no"):
        return False, ""
    if isinstance(verdict, tuple) and len(verdict) == 2 and verdict[0] == "deny" and isinstance(verdict[1], str):
        return False, verdict[1]
    raise ValueError(
        f"a confirmation handler must return 'approve', 'deny', ('deny', reason), 'ask', True, False or None; got "
        f"{verdict!r}"
    )
