"""What each kind of pending call accepts, for the doors that take decisions from outside
(the DBOS workers, the ADK adapter): a decision the call's kind does not accept is refused
before anything is claimed or runs (SPEC §5 v4, "A call accepts only its kind's verbs")."""

from __future__ import annotations

from collections.abc import Sequence

from ..events import PendingCallInfo
from ..exceptions import DecisionNotAcceptedError

__all__ = ("ACCEPTS", "AWAITS", "check_verb")

VERBS: dict[str, frozenset[str]] = {
    "confirmation": frozenset({"approve", "deny"}),
    "completion": frozenset({"complete", "deny"}),
    "in_doubt": frozenset({"resolve"}),
}
AWAITS: dict[str, str] = {
    "confirmation": "a decision (approve or deny)",
    "completion": "its result",
    "in_doubt": "an in-doubt decision (it started before its runner stopped and may have run)",
}
ACCEPTS: dict[str, str] = {
    "confirmation": "approve or deny",
    "completion": "complete (with its result or an error) or deny",
    "in_doubt": "resolve: rerun, skip (with the value the script gets) or fail",
}


def check_verb(pending: Sequence[PendingCallInfo], call_key: str | None, verb: str, session_id: str) -> None:
    """Refuses ``verb`` on the pending call it names (``call_key``; None: the only call
    pending) when that call's kind does not accept it. A key that names no pending call is
    left to the runner (it raises ``NoPendingCallError``).

    Raises:
        DecisionNotAcceptedError: the call's kind does not take ``verb``; the message names
            what it awaits and what it accepts.
    """
    if call_key is not None:
        found = [p for p in pending if p.call_key == call_key]
    else:
        found = list(pending) if len(pending) == 1 else []
    if not found or verb in VERBS.get(found[0].kind, frozenset({verb})):
        return
    call = found[0]
    raise DecisionNotAcceptedError(
        f"cannot {verb} call {call.call_key!r} ({call.tool!r}) in session {session_id!r}: it awaits "
        f"{AWAITS[call.kind]}, and accepts {ACCEPTS[call.kind]}; nothing ran",
        list(pending),
    )
