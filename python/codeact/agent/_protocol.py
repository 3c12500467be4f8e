"""Moved to ``codeact.turns._codec`` (issue 47: one journal codec, owned by the turns
package); this old private path re-exports it so code written against it still imports. New
code imports ``codeact.turns``."""

from ..turns._codec import (
    INLINE_VALUE_LIMIT,
    MAX_INT_DIGITS,
    MAX_VALUE_BYTES,
    MAX_VALUE_DEPTH,
    TURN_FORMAT,
    CompletionError,
    PendingCallInfo,
    announcement_events,
    args_digest,
    claim_decisions,
    decision_value,
    decode_outcome,
    encode_outcome,
    plain_args_digest,
    plain_value_problem,
    value_problem,
)

__all__ = (
    "INLINE_VALUE_LIMIT",
    "MAX_INT_DIGITS",
    "MAX_VALUE_BYTES",
    "MAX_VALUE_DEPTH",
    "TURN_FORMAT",
    "CompletionError",
    "PendingCallInfo",
    "announcement_events",
    "args_digest",
    "claim_decisions",
    "decision_value",
    "decode_outcome",
    "encode_outcome",
    "plain_args_digest",
    "plain_value_problem",
    "value_problem",
)
