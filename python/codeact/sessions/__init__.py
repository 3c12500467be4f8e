"""Sessions: conversation data (``Session``, ``Event``, ``Content``, ...), the services that
store it (``InMemorySessionService``, ``SqliteSessionService``, ``PostgresSessionService``) and
the store contract a third-party store implements (docs/stores.md): ``BaseSessionService``,
its types (``TurnSlot``, ``JournalRecord``, ``Claim``, ``TurnRecord``) and the helpers the
bundled stores share. ``codeact.sessions.testing`` is the store test suite.

``PostgresSessionService`` is imported on first use (it needs ``codeact[postgres]``).
"""

from typing import TYPE_CHECKING, Any

from ..exceptions import SessionStoreConnectionError
from ._journal import JournalKind, JournalRecord, StoredDecision, TurnSlot, batch_record, expand_batches
from ._memory import InMemorySessionService
from ._service import (
    APP_PREFIX,
    TEMP_PREFIX,
    USER_PREFIX,
    BaseSessionService,
    Durability,
    PreparedAppend,
    ScopedState,
    SessionExistsError,
    SessionNotFoundError,
    SessionStoreError,
    StaleSessionError,
    StoreMethodMissingError,
    TurnConflictError,
    apply_append,
    check_durability,
    check_not_stale,
    filter_events,
    json_roundtrip_state,
    merge_state,
    next_update_time,
    parse_turn,
    prepare_append,
    resolve_session_id,
    sort_journal,
    split_state,
    to_json,
    turn_conflict,
)
from ._sqlite import SqliteSessionService
from ._types import (
    CodeExecutionResult,
    Content,
    Event,
    EventActions,
    ExecutableCode,
    FunctionCall,
    FunctionResponse,
    Part,
    Session,
    ToolConfirmation,
    UsageMetadata,
    new_id,
)

if TYPE_CHECKING:
    from ..turns._record import (
        DEFAULT_CLAIM_LEASE,
        TURN_FORMAT,
        CallPosition,
        Claim,
        Clock,
        PendingEntry,
        TurnRecord,
        claim_abandoned,
    )
    from ._postgres import PostgresSessionService as PostgresSessionService

_TURN_NAMES = frozenset(
    {
        "DEFAULT_CLAIM_LEASE",
        "TURN_FORMAT",
        "CallPosition",
        "Claim",
        "Clock",
        "PendingEntry",
        "TurnRecord",
        "claim_abandoned",
    }
)
"""The turn record's types, owned by ``codeact.turns`` (issue 47) and still importable from
here, where the store contract first named them; read on first use, so the sessions layer
does not import the turns layer above it when it loads."""


def __dir__() -> list[str]:
    return sorted(set(globals()) | _TURN_NAMES)


def __getattr__(name: str) -> Any:
    if name in _TURN_NAMES:
        from ..turns import _record

        return getattr(_record, name)
    if name == "PostgresSessionService":
        try:
            from ._postgres import PostgresSessionService as PostgresSessionService
        except ImportError as e:  # psycopg missing
            raise ImportError(
                f"PostgresSessionService needs psycopg 3 and psycopg-pool: pip install 'codeact[postgres]' ({e})"
            ) from e
        return PostgresSessionService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = (
    "APP_PREFIX",
    "DEFAULT_CLAIM_LEASE",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "Durability",
    "PreparedAppend",
    "ScopedState",
    "SessionStoreConnectionError",
    "TurnConflictError",
    "apply_append",
    "check_durability",
    "check_not_stale",
    "filter_events",
    "json_roundtrip_state",
    "merge_state",
    "next_update_time",
    "parse_turn",
    "prepare_append",
    "resolve_session_id",
    "sort_journal",
    "batch_record",
    "expand_batches",
    "split_state",
    "to_json",
    "turn_conflict",
    "TURN_FORMAT",
    "BaseSessionService",
    "CallPosition",
    "Claim",
    "Clock",
    "JournalKind",
    "JournalRecord",
    "PendingEntry",
    "TurnRecord",
    "TurnSlot",
    "claim_abandoned",
    "CodeExecutionResult",
    "Content",
    "Event",
    "EventActions",
    "ExecutableCode",
    "FunctionCall",
    "FunctionResponse",
    "InMemorySessionService",
    "Part",
    "Session",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionStoreError",
    "SqliteSessionService",
    "StaleSessionError",
    "StoreMethodMissingError",
    "StoredDecision",
    "ToolConfirmation",
    "UsageMetadata",
    "new_id",
)
