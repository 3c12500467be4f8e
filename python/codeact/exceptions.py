"""The exception tree of codeact, defined once.

``CodeActError`` is the root. Script mistakes (a syntax error, an uncaught exception, a
resource limit) are never exceptions on the host: they come back as ``Raised`` steps and
are fed back to the model. The classes here are for host failures, which abort a run, and
for the outcomes of the one-shot ``run_script`` API (``ScriptError``, ``ScriptSuspended``).
Every class is also importable from where it is used (``codeact.runtime``,
``codeact.services``, the integrations); this module imports nothing else from codeact
(``PendingCallInfo`` only for type checking, from ``codeact.events``).

The tree (a second base, in parentheses, lets an ``except`` of the builtin catch it too)::

    CodeActError
    ├── CodeRuntimeError                 a code runtime failed on the host side
    │   ├── SnapshotError                snapshot bytes that cannot be loaded
    │   ├── ValueConversionError         a host value that cannot cross into a script
    │   ├── UnsupportedMountError        (ValueError) a runtime given a mount it cannot serve
    │   └── ReplayDivergenceError        a replayed script asked the OS for something else
    ├── ScriptError                      run_script: the script failed
    │   └── ToolCallLimitError           run_script: more tool calls than max_tool_calls
    ├── ScriptSuspended                  run_script: a tool paused the script
    ├── SuspendScript                    raised by a tool to pause the script
    ├── ModelError                       a model request failed
    │   ├── ModelTimeoutError
    │   ├── ModelRateLimitError
    │   ├── ModelResponseError
    │   └── ModelRequestsNotAllowedError
    ├── ScriptExhaustedError             a ScriptedModel ran out of replies
    ├── SessionStoreError                the session store failed
    │   ├── SessionNotFoundError         (LookupError)
    │   ├── SessionExistsError
    │   ├── SessionStoreConnectionError  (ConnectionError) the store cannot be reached
    │   ├── StaleSessionError
    │   ├── TurnConflictError
    │   └── StoreMethodMissingError      (NotImplementedError) a store lacks a contract method
    ├── ToolArgumentError                (TypeError) a tool call's arguments are invalid
    ├── UnknownToolError                 (LookupError) a setting names a tool the agent lacks
    ├── ToolHostError                    a tool cannot run for a host-side reason
    │   └── McpConnectionError           the MCP server cannot be reached
    ├── McpToolError                     (RuntimeError) an MCP tool answered isError
    ├── LangChainToolError               (RuntimeError) a langchain tool failed
    ├── MissingStateError                (KeyError) an instruction names a missing state key
    ├── SecretNotFoundError              (KeyError) a secret name the provider does not know
    ├── ServiceNotConfiguredError        (RuntimeError) a service the Runner was not given
    └── SuspensionError                  the suspension protocol (SPEC §5)
        ├── NoPendingCallError           (LookupError)
        │   └── DecisionRefusedError     the call's kind does not accept the decision
        ├── CallsPendingError
        ├── AlreadyResumingError
        ├── DecisionMismatchError
        ├── StaleCheckpointError
        ├── EditNotSupportedError        (NotImplementedError) the tool forbids edited args
        ├── DecisionValueError           (ValueError) edited args, a result or a payload of the wrong shape
        └── ConfirmationHandlerError
"""

from __future__ import annotations

import base64
import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .events import PendingCallInfo

__all__ = (
    "AlreadyResumingError",
    "CallsPendingError",
    "CodeActError",
    "UnsupportedMountError",
    "CodeRuntimeError",
    "ConfirmationHandlerError",
    "DecisionMismatchError",
    "DecisionRefusedError",
    "DecisionValueError",
    "EditNotSupportedError",
    "LangChainToolError",
    "McpConnectionError",
    "McpToolError",
    "MissingStateError",
    "ModelError",
    "ModelRateLimitError",
    "ModelRequestsNotAllowedError",
    "ModelResponseError",
    "ModelTimeoutError",
    "NoPendingCallError",
    "ReplayDivergenceError",
    "ScriptError",
    "ScriptExhaustedError",
    "ScriptSuspended",
    "SecretNotFoundError",
    "ServiceNotConfiguredError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionStoreConnectionError",
    "SessionStoreError",
    "SnapshotError",
    "StaleCheckpointError",
    "StaleSessionError",
    "StoreMethodMissingError",
    "SuspendScript",
    "SuspensionError",
    "ToolArgumentError",
    "ToolCallLimitError",
    "ToolHostError",
    "TurnConflictError",
    "UnknownToolError",
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


class UnsupportedMountError(CodeRuntimeError, ValueError):
    """A runtime was given a mount it cannot serve: ``CPythonRuntime`` has no sandboxed
    filesystem, so it refuses every mount, overlay mounts included (their writes would reach
    the host). Raised when the runtime is built."""


class ReplayDivergenceError(CodeRuntimeError):
    """A replayed script asked for a nondeterministic value of another kind than the
    journal recorded next (``os_replay``): it no longer runs the same way."""


class ScriptError(CodeActError):
    """The script failed: a syntax error, an uncaught exception (including one a tool raised
    into it), a resource limit, or a construct the subset check refused.

    Attributes:
        message: the traceback-style text Monty gave (what a model would be shown).
        stdout: what the script printed before it failed.
        stderr: what it wrote to stderr before it failed.
        tool_calls: how many tool calls the host served.

    When the script failed right after a tool raised into it (and did not catch it), the
    tool's original exception is chained as ``__cause__``.
    """

    def __init__(self, message: str, *, stdout: str = "", tool_calls: int = 0, stderr: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.stdout = stdout
        self.stderr = stderr
        self.tool_calls = tool_calls


class ToolCallLimitError(ScriptError):
    """The script made more tool calls than ``max_tool_calls`` allowed; it was stopped."""


class SuspendScript(CodeActError):
    """Raised by a tool to pause the script at this call (for example to ask a human first).

    ``run`` / ``arun`` then raise ``ScriptSuspended`` carrying the script's snapshot;
    ``aresume_script`` continues it later, in this process or another.

    Attributes:
        payload: anything the caller wants to carry along (JSON data if it must be stored).
    """

    def __init__(self, payload: Any = None) -> None:
        super().__init__(payload)
        self.payload = payload


@dataclass(eq=False)
class ScriptSuspended(CodeActError):
    """A tool paused the script (it raised ``SuspendScript``); nothing is lost.

    Attributes:
        snapshot: the paused script (Monty snapshot bytes, signed when the runtime has a
            ``snapshot_key``).
        tool: the tool whose call is paused.
        tool_args: its keyword arguments (the ``call_tool`` dict).
        positional: its positional arguments (``functions`` style).
        payload: what the tool passed to ``SuspendScript``.
        stdout: what the script printed before the pause.
        tool_calls: tool calls served before the pause (the paused one included).
        stderr: what the script wrote to stderr before the pause.
    """

    snapshot: bytes
    tool: str
    tool_args: dict[str, Any]
    positional: tuple[Any, ...] = ()
    payload: Any = None
    stdout: str = ""
    tool_calls: int = 0
    stderr: str = ""

    def __str__(self) -> str:
        return f"the script is paused at a call to {self.tool!r}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (snapshot as base64), for storing the pause."""
        data = dataclasses.asdict(self)
        data["snapshot"] = base64.b64encode(self.snapshot).decode("ascii")
        data["positional"] = list(self.positional)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScriptSuspended:
        """The inverse of ``to_dict``."""
        fields = dict(data)
        fields["snapshot"] = base64.b64decode(fields["snapshot"])
        fields["positional"] = tuple(fields.get("positional", ()))
        return cls(**fields)


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


class UnknownToolError(CodeActError, LookupError):
    """An agent setting names a tool the agent does not have (a misspelt name in
    ``require_tool_confirmation``). Raised when the agent is built, or, when a toolset's tools
    are known only at run start (an MCP toolset, a custom ``Toolset``), from ``run_async`` before
    anything runs. A ``LookupError``; not a ``ValueError``, so pydantic lets it through
    ``CodeActAgent(...)`` unwrapped.

    Attributes:
        setting: the agent option, ``"require_tool_confirmation"``.
        agent_name: the agent it belongs to.
        names: the names that match no tool, in the order given.
        suggestions: each of ``names`` -> the closest tool names (``difflib``; may be empty).
    """

    def __init__(
        self, setting: str, agent_name: str, names: list[str], suggestions: Mapping[str, list[str]], known: list[str]
    ) -> None:
        self.setting = setting
        self.agent_name = agent_name
        self.names = list(names)
        self.suggestions = {n: list(suggestions.get(n, [])) for n in names}
        parts = []
        for n in names:
            close = self.suggestions[n]
            parts.append(f"{n!r} (did you mean {' or '.join(map(repr, close))}?)" if close else repr(n))
        shown = ", ".join(known[:20]) + (f", ... ({len(known)} in all)" if len(known) > 20 else "")
        super().__init__(
            f"{setting} of agent {agent_name!r} names no tool of the agent: {', '.join(parts)}; "
            f"a name is a tool's exposed name or its name before a toolset prefix; known names: {shown or '(none)'}"
        )


class ToolHostError(CodeActError):
    """A tool could not run for a reason on the host's side that the script cannot fix (for
    example a tool server that is gone and could not be reconnected). It is not raised into
    the script: the tool runner lets it through, so ``Runner.run_async`` (or
    ``MontyRuntime.arun``) raises it to the application, as for any host failure. Subclass it
    in a tool for such failures."""


class McpConnectionError(ToolHostError):
    """The MCP server cannot be reached: the connection broke (a stdio server died, an HTTP
    server went away) and one reconnect did not bring it back. A host error
    (``ToolHostError``): not raised into the script, whose model cannot fix it; the run stops
    with it."""


class McpToolError(RuntimeError, CodeActError):
    """An MCP tool answered with ``isError``; the message is the text it returned (without the
    SDK's ``"Error executing tool <name>: "`` prefix). A ``RuntimeError``, so a script can catch
    it. Logged at INFO, not WARNING: the server reported it, nothing on the host failed."""

    log_level = logging.INFO


class LangChainToolError(RuntimeError, CodeActError):
    """A langchain tool failed: it raised ``ToolException`` (whether or not its
    ``handle_tool_error`` turns that into text, as langchain marks with
    ``ToolMessage(status="error")``), or it returned a ``ToolMessage`` with ``status="error"``.
    The message is the text langchain would send the model. A ``RuntimeError``, so a script can
    catch it."""


class MissingStateError(CodeActError, KeyError):
    """An instruction names a state key ``{key}`` that the session does not have."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class SecretNotFoundError(CodeActError, KeyError):
    """A secret name the provider does not know (the message names it, never a value)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "secret not found"


class ServiceNotConfiguredError(RuntimeError, CodeActError):
    """A service was used but the ``Runner`` was given none."""


class TurnConflictError(SessionStoreError):
    """``save_turn`` was given an ``expected_version`` that is not the stored one: another
    runner wrote (claimed) the turn slot since this one read it (compare-and-set lost)."""


class StoreMethodMissingError(SessionStoreError, NotImplementedError):
    """The session store does not implement a method of the store contract that was called
    (a third-party store written against an older contract; ``codeact.sessions.testing``
    lists the contract). The message names the store class and the method.

    Attributes:
        method: the missing method's name (``"list_decisions"``).
    """

    def __init__(self, message: str, *, method: str = "") -> None:
        super().__init__(message)
        self.method = method


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


class DecisionRefusedError(NoPendingCallError):
    """A decision names a pending call whose kind does not accept it (SPEC §5 v4): an
    approval or a denial of a call in doubt, an approval of a call awaiting its result, a
    resolution of a call awaiting approval, ... The message says what the call awaits and
    which decisions it accepts. Refused before anything was claimed or stored; no tool ran
    and the call stays pending as it was.

    Attributes:
        call_key: the call decided on.
        kind: what it waits for (``"confirmation"``, ``"completion"`` or ``"in_doubt"``).
        accepts: the decisions it accepts (``PendingCallInfo.accepts``).
    """

    def __init__(
        self,
        message: str,
        pending: list[PendingCallInfo] | None = None,
        *,
        call_key: str = "",
        kind: str = "",
        accepts: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, pending)
        self.call_key = call_key
        self.kind = kind
        self.accepts = accepts


class EditNotSupportedError(SuspensionError, NotImplementedError):
    """A ``Decision`` approves a call with edited arguments (``args``) but the call's tool
    forbids edits (``editable=False``). Refused before anything was claimed or stored; no
    tool ran and the call stays pending as it was.

    Attributes:
        call_key: the call decided on.
        tool: its tool.
    """

    def __init__(
        self, message: str, pending: list[PendingCallInfo] | None = None, *, call_key: str = "", tool: str = ""
    ) -> None:
        super().__init__(message, pending)
        self.call_key = call_key
        self.tool = tool


class DecisionValueError(SuspensionError, ValueError):
    """A decision's value does not have the shape its call declares: edited arguments
    that fail the tool's schema, a completion value that is not the tool's ``result_type``,
    a confirmation payload that is not its ``payload_type``. The message names each field
    that fails. Refused before anything was claimed or stored; no tool ran and the call
    stays pending as it was.

    Attributes:
        call_key: the call decided on.
        tool: its tool.
        what: ``"args"``, ``"result"`` or ``"payload"``.
        errors: ``(field, message)`` per failure; the field is a dotted path (``"amount"``,
            ``"items.0.sku"``) or ``""`` for the value as a whole.
    """

    def __init__(
        self,
        message: str,
        pending: list[PendingCallInfo] | None = None,
        *,
        call_key: str = "",
        tool: str = "",
        what: str = "",
        errors: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message, pending)
        self.call_key = call_key
        self.tool = tool
        self.what = what
        self.errors: list[tuple[str, str]] = list(errors or [])


class ConfirmationHandlerError(SuspensionError):
    """``RunConfig.tool_confirmation_handler`` raised. The run ended; the call it was asked
    about is left pending (listed, approvable, deniable). The handler's exception is the
    ``__cause__``."""


def describe_pending(pending: list[Any]) -> str:
    """``"call k1 to 'a' awaits approval or denial; call k2 to 'b' is in doubt: awaits rerun,
    skip or fail"`` (each call and what it waits for, ``PendingCallInfo.awaits``), or ``"no
    call is pending"``."""
    if not pending:
        return "no call is pending"
    return "; ".join(f"call {p.call_key} to {p.tool!r} {_awaits(p)}" for p in pending)


def _awaits(p: Any) -> str:
    awaits = getattr(p, "awaits", None)
    return awaits if isinstance(awaits, str) else f"awaits {p.kind}"
