"""Sessions: conversation data (``Session``, ``Event``, ``Content``, ...) and the services that
store it (``InMemorySessionService``, ``SqliteSessionService``)."""

from ._memory import InMemorySessionService
from ._service import (
    BaseSessionService,
    SessionExistsError,
    SessionNotFoundError,
    SessionStoreError,
    StaleSessionError,
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

__all__ = (
    "BaseSessionService",
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
