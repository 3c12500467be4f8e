"""Sessions: conversation data (``Session``, ``Event``, ``Content``, ...) and the services that
store it (``InMemorySessionService``, ``SqliteSessionService``)."""

from ._journal import JournalKind, JournalRecord, TurnSlot
from ._memory import InMemorySessionService
from ._service import (
    BaseSessionService,
    SessionExistsError,
    SessionNotFoundError,
    SessionStoreError,
    StaleSessionError,
)
from ._sqlite import SqliteSessionService
from ._turns import (
    DEFAULT_CLAIM_LEASE,
    TURN_FORMAT,
    CallPosition,
    Claim,
    Clock,
    PendingEntry,
    TurnRecord,
    claim_abandoned,
)
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

__all__ = (
    "DEFAULT_CLAIM_LEASE",
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
    "ToolConfirmation",
    "UsageMetadata",
    "new_id",
)
