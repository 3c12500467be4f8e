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
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
    Session,
    ToolConfirmation,
    new_id,
)

__all__ = (
    "BaseSessionService",
    "Content",
    "Event",
    "EventActions",
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
    "new_id",
)
