"""Moved to ``codeact.turns._verify`` (issue 47: reading a stored turn back is the turns
package's); this old private path re-exports it so code written against it still imports.
New code imports ``codeact.turns``."""

from ..turns._verify import (
    CallView,
    LeaseKeeper,
    SessionKey,
    TurnView,
    call_digest,
    journal_scope,
    open_journal,
    record_data,
    record_seal_problem,
    seal_journal,
    seal_record,
    slot_data,
    upgrade_reason,
    verify_turn,
)

__all__ = (
    "CallView",
    "LeaseKeeper",
    "SessionKey",
    "TurnView",
    "call_digest",
    "journal_scope",
    "open_journal",
    "record_data",
    "record_seal_problem",
    "seal_journal",
    "seal_record",
    "slot_data",
    "upgrade_reason",
    "verify_turn",
)
