"""Per-call context handed to tools: ``State`` with delta tracking and ``ToolContext``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..events import Content, EventActions
from ..services._access import ServiceAccess

if TYPE_CHECKING:
    from ..services import BaseArtifactService, BaseMemoryService, SecretsProvider
    from ..sessions._types import Session

__all__ = ("State", "ToolConfirmationAnswer", "ToolContext")


class State(MutableMapping[str, Any]):
    """Session state as seen during a run: reads see the committed value overlaid with this
    run's changes; writes are recorded in ``delta`` and ride on the next event.

    Keys prefixed ``app:`` are shared by the whole app, ``user:`` by one user's sessions,
    ``temp:`` live only for the current invocation (never persisted).
    """

    APP_PREFIX = "app:"
    USER_PREFIX = "user:"
    TEMP_PREFIX = "temp:"

    def __init__(self, value: MutableMapping[str, Any], delta: MutableMapping[str, Any]) -> None:
        self._value = value
        self._delta = delta

    def __getitem__(self, key: str) -> Any:
        if key in self._delta:
            return self._delta[key]
        return self._value[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._delta[key] = value

    def __delitem__(self, key: str) -> None:
        raise TypeError("state keys cannot be deleted; set them to None instead")

    def __iter__(self) -> Iterator[str]:
        yield from self._value
        for k in self._delta:
            if k not in self._value:
                yield k

    def __len__(self) -> int:
        return len(set(self._value) | set(self._delta))

    def __contains__(self, key: object) -> bool:
        return key in self._delta or key in self._value

    @property
    def delta(self) -> Mapping[str, Any]:
        """The changes made through this view."""
        return self._delta

    def has_delta(self) -> bool:
        """Whether anything was set through this view."""
        return bool(self._delta)

    def to_dict(self) -> dict[str, Any]:
        """A plain ``dict`` of the current values: the stored ones overlaid with the changes."""
        return {**self._value, **self._delta}


@dataclass(frozen=True, slots=True)
class ToolConfirmationAnswer:
    """A reviewer's answer to a confirmation, as the approved tool reads it
    (``ToolContext.tool_confirmation``; ADK's ``ToolConfirmation`` shape).

    Attributes:
        confirmed: True (the tool runs only when approved).
        payload: what the reviewer sent with the approval (``Decision.payload``), validated
            against the tool's ``payload_type`` when it declares one; None when none was sent.
        actor / reason: who approved and why (``Decision.actor`` / ``reason``), or None.
    """

    confirmed: bool = True
    payload: Any = None
    actor: str | None = None
    reason: str | None = None


class ToolContext(ServiceAccess):
    """What a tool sees of the live run, one fresh instance per call.

    Attributes:
        function_call_id: the call key, unique within the session.
        agent_name / invocation_id: who is running.
        session: the live session (read only by convention).
        user_content: the message that started this run.
        state: session state; writes are tracked into ``actions.state_delta``.
        actions: side effects to carry on the next event; a tool may set
            ``escalate``, ``skip_summarization`` or ``transfer_to_agent`` to end the run.
        artifact_service / memory_service / secrets: the runner's services, also reached
            through ``save_artifact`` / ``load_artifact`` / ``list_artifacts``,
            ``search_memory`` and ``get_secret`` (the same accessors as ``CallbackContext``).
        tool_outcome: in after-tool callbacks, the ``ToolOutcome`` of the call (attempts,
            duration, timed out, error category); None before the tool ran.
        tool_confirmation: for a call a reviewer approved (``Runner.approve`` /
            ``decide``), the ``ToolConfirmationAnswer`` (its ``payload``); else None.
    """

    def __init__(
        self,
        *,
        function_call_id: str,
        agent_name: str,
        invocation_id: str,
        session: Session,
        user_content: Content | None,
        committed_state: MutableMapping[str, Any],
        artifact_service: BaseArtifactService | None = None,
        memory_service: BaseMemoryService | None = None,
        secrets: SecretsProvider | None = None,
    ) -> None:
        self.function_call_id = function_call_id
        self.agent_name = agent_name
        self.invocation_id = invocation_id
        self.session = session
        self.user_content = user_content
        self.actions = EventActions()
        self.state = State(committed_state, self.actions.state_delta)
        self.artifact_service = artifact_service
        self.memory_service = memory_service
        self.secrets = secrets
        self.tool_outcome: Any = None
        self.tool_confirmation: ToolConfirmationAnswer | None = None

    @property
    def app_name(self) -> str:
        """The app of the session the tool is called in."""
        return self.session.app_name

    @property
    def user_id(self) -> str:
        """The user of the session the tool is called in."""
        return self.session.user_id
