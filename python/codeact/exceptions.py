"""The exception tree of codeact, defined once.

``CodeActError`` is the root. Script mistakes (a syntax error, an uncaught exception, a
resource limit) are never exceptions on the host: they come back as ``Raised`` steps and
are fed back to the model. The classes here are for host failures, which abort a run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent._protocol import PendingCallInfo

__all__ = (
    "AlreadyResumingError",
    "CallsPendingError",
    "CodeActError",
    "CodeRuntimeError",
    "ConfirmationHandlerError",
    "DecisionMismatchError",
    "MissingStateError",
    "ModelError",
    "ModelRateLimitError",
    "ModelRequestsNotAllowedError",
    "ModelResponseError",
    "ModelTimeoutError",
    "NoPendingCallError",
    "ScriptExhaustedError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionStoreConnectionError",
    "SessionStoreError",
    "SnapshotError",
    "StaleCheckpointError",
    "StaleSessionError",
    "SuspensionError",
    "ToolArgumentError",
    "ToolHostError",
    "TurnConflictError",
    "ValueConversionError",
)

_MAX_REPORTED_ERRORS = 10
"""How many argument errors a ``ToolArgumentError`` message lists."""


class CodeActError(Exception):
    """Root of every exception codeact raises on purpose."""


class CodeRuntimeError(CodeActError):
    """A host failure of a code runtime: bad snapshot bytes, an interpreter bug, misuse
    of a single-use ``PendingCall``. Never used for mistakes in a script."""


class SnapshotError(CodeRuntimeError):
    """Snapshot bytes that cannot be loaded: truncated, altered, foreign, written by another
    Monty version or snapshot format, or signed with another key (or unsigned when a key is
    required)."""


class ValueConversionError(CodeRuntimeError):
    """A host value that cannot cross into a script. Only None, bool, int, float, str, bytes,
    list, tuple and dict cross; the message names the offending type and where it sits."""


class ModelError(CodeActError):
    """A model request failed. ``model`` is the model id asked for; ``status_code`` is the HTTP
    status of the failing reply, or ``None`` when there was no HTTP reply (timeout, connection
    failure, refused by the guard)."""

    def __init__(self, message: str, *, model: str | None = None, status_code: int | None = None) -> None:
        super().__init__(message)
        self.model = model
        self.status_code = status_code


class ModelTimeoutError(ModelError):
    """No reply within the configured timeout, after all retries."""


class ModelRateLimitError(ModelError):
    """The endpoint kept answering HTTP 429 (rate limit or quota) after all retries."""


class ModelResponseError(ModelError):
    """The endpoint answered, but not with a usable chat completion: a body that is not JSON,
    no ``choices``, a choice without a message, or an ``error`` object in a 2xx reply."""


class ModelRequestsNotAllowedError(ModelError):
    """A request to a non-loopback host while ``codeact.models.ALLOW_MODEL_REQUESTS`` is False."""


class ScriptExhaustedError(CodeActError):
    """A ``ScriptedModel`` was asked for more replies than it was given."""


class SessionStoreError(CodeActError):
    """The session store failed: the database cannot be opened or written, a value cannot be
    stored (not JSON-serializable), the service is closed. A storage backend error (for
    example ``sqlite3.Error``) is chained as ``__cause__``. Root of the session errors."""


class SessionNotFoundError(SessionStoreError, LookupError):
    """The session addressed by (app_name, user_id, session_id) does not exist (for example
    ``append_event`` on a deleted session)."""


class SessionExistsError(SessionStoreError):
    """``create_session`` was given a ``session_id`` already used by that app and user."""


class SessionStoreConnectionError(SessionStoreError, ConnectionError):
    """The session store cannot be reached: wrong host or port, the server is down,
    authentication failed, the database does not exist, or the connection kept dropping
    through the retries. Nothing was written by the failed call. The driver's error is
    chained as ``__cause__``."""


class StaleSessionError(SessionStoreError):
    """``append_event`` was given a ``Session`` object older than the stored session: another
    object or process appended to it since this one was loaded. Reload it with
    ``get_session`` and retry."""


class ToolArgumentError(TypeError, CodeActError):
    """A tool call's arguments failed validation against the tool's signature.

    A ``TypeError`` (what Python raises for a bad call), so a script can catch it as one.
    The message is short and meant for the model: the tool name, then each error as
    ``arg: message`` (nested locations as ``user.name`` or ``tags[0]``), separated by ``"; "``::

        tool 'add' got invalid arguments: a: Input should be a valid integer; b: missing required argument

    Attributes:
        tool_name: the tool called.
        errors: ``(location, message)`` pairs, location ``""`` for the arguments as a whole.
    """

    def __init__(self, tool_name: str, errors: list[tuple[str, str]]) -> None:
        self.tool_name = tool_name
        self.errors = errors
        shown = [f"{loc}: {msg}" if loc else msg for loc, msg in errors[:_MAX_REPORTED_ERRORS]]
        if len(errors) > _MAX_REPORTED_ERRORS:
            shown.append(f"... and {len(errors) - _MAX_REPORTED_ERRORS} more")
        super().__init__(f"tool {tool_name!r} got invalid arguments: {'; '.join(shown)}")


class ToolHostError(CodeActError):
    """A tool could not run for a reason on the host's side that the script cannot fix (for
    example a tool server that is gone and could not be reconnected). It is not raised into
    the script: the tool runner lets it through, so ``Runner.run_async`` (or
    ``MontyRuntime.arun``) raises it to the application, as for any host failure. Subclass it
    in a tool for such failures."""


class MissingStateError(CodeActError, KeyError):
    """An instruction names a state key ``{key}`` that the session does not have."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class TurnConflictError(SessionStoreError):
    """``save_turn`` was given an ``expected_version`` that is not the stored one: another
    runner wrote (claimed) the turn slot since this one read it (compare-and-set lost)."""


class SuspensionError(CodeActError):
    """Base of the suspension protocol errors (SPEC §5).

    Attributes:
        pending: the calls pending in the session when the error was raised (possibly empty),
            so the caller can show what to decide on.
    """

    def __init__(self, message: str, pending: list[PendingCallInfo] | None = None) -> None:
        super().__init__(message)
        self.pending: list[PendingCallInfo] = list(pending or [])


class NoPendingCallError(SuspensionError, LookupError):
    """A decision or a function response names no pending call: the key matches nothing,
    nothing is pending, or the session's run has finished. Nothing was stored and no tool
    ran."""


class CallsPendingError(SuspensionError):
    """A new user message arrived while calls are pending and
    ``RunConfig.on_pending_message`` is ``"reject"``. Nothing was stored."""


class AlreadyResumingError(SuspensionError):
    """Another runner claimed the suspension first (compare-and-set in the store), or is
    running the decided call now, or took over this runner's turn (its later writes are
    refused). The message names the claim's owner, when it was taken and until when its lease
    runs, and how to recover an interrupted turn (``Runner.recover``). This runner stored
    nothing more and ran no tool."""


class DecisionMismatchError(SuspensionError):
    """A decision named the digest of a call (``PendingCallInfo.digest``) that is not the
    call pending under that key: the view it was made on is stale. Nothing was claimed or
    stored and no tool ran; the call stays pending."""


class StaleCheckpointError(SuspensionError):
    """A decision or completion was sent for a paused script this agent cannot resume (a
    changed tool roster, another agent, a different format, a continuation that fails its
    integrity check). Nothing was claimed or stored and no tool ran: the call stays pending
    for an agent that can resume it, or the turn can be discarded
    (``Runner.discard_pending_checkpoint``)."""


class ConfirmationHandlerError(SuspensionError):
    """``RunConfig.tool_confirmation_handler`` raised. The run ended; the call it was asked
    about is left pending (listed, approvable, deniable). The handler's exception is the
    ``__cause__``."""


def describe_pending(pending: list[Any]) -> str:
    """``"call k1 (tool 'a', awaiting confirmation), ..."`` or ``"no call is pending"``."""
    if not pending:
        return "no call is pending"
    return "pending: " + ", ".join(f"call {p.call_key} (tool {p.tool!r}, awaiting {p.kind})" for p in pending)
