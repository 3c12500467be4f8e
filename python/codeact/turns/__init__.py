"""The durable turn (SPEC §5), between the agent and the runtime: the record a session's
turn slot holds and its seal (``TurnRecord``, ``Claim``), the one journal codec (intents,
outcomes, tagged values), reading a stored turn back verified (``verify_turn``), the pending
calls it waits on with their one kind vocabulary (``confirmation``, ``completion``,
``in_doubt``) and the decisions each accepts, and the typed ``Decision`` every front door
sends through ``Runner.decide``.

This package imports neither the agent nor the runner: both read the turn through it.
"""

from ..events import CALL_ACCEPTS, CALL_AWAITS, CallKind, PendingCallInfo
from ._codec import (
    INLINE_VALUE_LIMIT,
    MAX_INT_DIGITS,
    MAX_VALUE_BYTES,
    MAX_VALUE_DEPTH,
    CompletionError,
    announcement_events,
    args_digest,
    decode_outcome,
    encode_outcome,
    plain_value_problem,
)
from ._decision import (
    Decision,
    DecisionAct,
    DecisionRecord,
    DecisionVerb,
    InDoubtAction,
    check_accepted,
    record_text,
)
from ._record import (
    DEFAULT_CLAIM_LEASE,
    SEAL_VERSION,
    TURN_FORMAT,
    CallPosition,
    Claim,
    Clock,
    PendingEntry,
    TurnRecord,
    claim_abandoned,
    new_claim,
    record_problem,
    release_owner,
)
from ._verify import TurnView, open_journal, verify_turn

__all__ = (
    "CALL_ACCEPTS",
    "CALL_AWAITS",
    "DEFAULT_CLAIM_LEASE",
    "INLINE_VALUE_LIMIT",
    "MAX_INT_DIGITS",
    "MAX_VALUE_BYTES",
    "MAX_VALUE_DEPTH",
    "SEAL_VERSION",
    "TURN_FORMAT",
    "CallKind",
    "CallPosition",
    "Claim",
    "Clock",
    "CompletionError",
    "Decision",
    "DecisionAct",
    "DecisionRecord",
    "DecisionVerb",
    "InDoubtAction",
    "PendingCallInfo",
    "PendingEntry",
    "TurnRecord",
    "TurnView",
    "announcement_events",
    "args_digest",
    "check_accepted",
    "claim_abandoned",
    "decode_outcome",
    "encode_outcome",
    "new_claim",
    "open_journal",
    "plain_value_problem",
    "record_text",
    "record_problem",
    "release_owner",
    "verify_turn",
)
