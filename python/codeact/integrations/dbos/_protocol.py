"""What travels through DBOS: the request a workflow gets, the result it returns, and the
names (workflow ids, queue and partition keys) both sides derive from the same inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import quote

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    ValidationInfo,
    field_serializer,
    field_validator,
)

from ... import __version__
from ..._values import decode_value, encode_value
from ...events import Event, PendingCallInfo

__all__ = (
    "DBOS_APP_NAME",
    "TAGGED",
    "RUN_KINDS",
    "PausedCall",
    "PausedKind",
    "RunKind",
    "RunRequest",
    "RunResult",
    "application_version",
    "default_queue",
    "partition_key",
    "workflow_id",
    "workflow_name",
)

DBOS_APP_NAME = "codeact"
"""The DBOS application name the workers run under and the helpers enqueue for."""

RunKind = Literal["run", "approve", "deny", "complete", "resolve_in_doubt"]
"""The ``Runner`` call a workflow makes: ``run_async``, ``approve``, ``deny``, ``complete``
or ``resolve_in_doubt``."""

RUN_KINDS: tuple[RunKind, ...] = ("run", "approve", "deny", "complete", "resolve_in_doubt")
"""Every ``RunKind``; each is one registered DBOS workflow (``workflow_name``)."""


def application_version() -> str:
    """The DBOS application version of the workers: ``codeact-<version>``. Every worker of
    one codeact version may recover any other's workflows (a workflow holds no DBOS steps,
    so nothing of it is replayed by position)."""
    return f"codeact-{__version__}"


def default_queue(app_name: str) -> str:
    """The queue of an app's runs: ``codeact-<app_name>``."""
    return f"codeact-{app_name}"


def workflow_name(kind: RunKind) -> str:
    """The registered DBOS workflow name of ``kind``: ``codeact.<kind>``."""
    return f"codeact.{kind}"


def _part(text: str) -> str:
    return quote(text, safe="")


TAGGED: dict[str, Any] = {"codeact_tagged": True}
"""The validation context that reads a ``model_dump(mode="json")`` of ``RunRequest`` /
``RunResult`` back exactly: ``Model.model_validate(raw, context=TAGGED)``. In JSON mode
their plain values (``RunRequest.value``, ``PausedCall.args``) are written in the tagged
form (``codeact._values.encode_value``), so a tuple, a set, bytes or a dict with
non-str keys crosses DBOS unchanged."""


def _encoded(value: Any, info: FieldSerializationInfo) -> Any:
    return encode_value(value) if info.mode_is_json() else value


def _decoded(value: Any, info: ValidationInfo) -> Any:
    tagged = info.mode == "json" or bool((info.context or {}).get("codeact_tagged"))
    return decode_value(value) if tagged else value


def partition_key(app_name: str, user_id: str, session_id: str) -> str:
    """The queue partition of a session: at most one of its workflows runs at a time, on
    any worker. Each part is percent-encoded, joined by ``/``."""
    return "/".join(_part(p) for p in (app_name, user_id, session_id))


def workflow_id(app_name: str, user_id: str, session_id: str, run_key: str) -> str:
    """The DBOS workflow id of a run: the session's partition key and the run key, so an
    enqueue repeated with the same run key names the same workflow (and the same run)."""
    return f"codeact/{partition_key(app_name, user_id, session_id)}/{_part(run_key)}"


class RunRequest(BaseModel):
    """The input of a workflow: one ``Runner`` call, as plain data.

    Attributes:
        kind: which call (``RunKind``).
        app_name / user_id / session_id: the session.
        run_key: the run's idempotency key (``Runner.run_async(run_key=)``).
        message: the user's message (``run``): text, or a ``Content`` as a dict.
        call_key: the pending call a decision names (None: the only one pending).
        digest: the ``PendingCallInfo.digest`` an approval was made on (``approve``).
        reason: the denial reason (``deny``), the failure text (``resolve_in_doubt``), or why
            (``approve``, ``complete``: journaled with the decision).
        value: the long-running call's result (``complete``) or the value given to the
            script (``resolve_in_doubt`` with ``"skip"``); plain data.
        error: the long-running call's failure text (``complete``; ``value`` then None).
        action: ``"rerun"``, ``"skip"`` or ``"fail"`` (``resolve_in_doubt``).
        actor: who decided (``Decision.actor``), or None.
        args: an approval's edited arguments (``Decision.args``; needs ``digest``), or None.
    """

    # NaN and the infinities in ``value`` cross as JSON's constants, never as null
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    kind: RunKind
    app_name: str
    user_id: str
    session_id: str
    run_key: str = Field(min_length=1)
    message: str | dict[str, Any] | None = None
    call_key: str | None = None
    digest: str | None = None
    reason: str = ""
    value: Any = None
    error: str | None = None
    action: Literal["rerun", "skip", "fail"] | None = None
    actor: str | None = None
    args: dict[str, Any] | None = None

    _write_value = field_serializer("value")(_encoded)
    _read_value = field_validator("value", mode="before")(_decoded)


PausedKind = Literal["confirmation", "completion", "in_doubt"]
"""What a paused call awaits: ``"confirmation"`` (``CodeActClient.approve`` or ``deny``),
``"completion"`` (``complete``, or ``deny``) or ``"in_doubt"`` (``resolve``: rerun, skip with a
value, or fail; approve and deny are refused)."""


class PausedCall(BaseModel):
    """A call the run paused at, as its announcement events show it.

    Attributes:
        call_key: the key to decide it with (``approve`` / ``deny`` / ``complete`` /
            ``resolve``).
        tool: the tool name.
        args: the bound arguments.
        kind: ``"confirmation"`` (approve or deny), ``"completion"`` (a long-running
            call's result) or ``"in_doubt"`` (a call that started before its runner stopped
            and may have run: ``CodeActClient.resolve`` with rerun, skip or fail; never
            approve or deny).
    """

    model_config = ConfigDict(ser_json_inf_nan="constants")  # NaN and the infinities never null

    call_key: str
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    kind: PausedKind

    _write_args = field_serializer("args")(_encoded)
    _read_args = field_validator("args", mode="before")(_decoded)


class RunResult(BaseModel):
    """What a workflow returns: how the ``Runner`` call ended.

    Attributes:
        workflow_id: the workflow (``workflow_id``).
        status: ``"done"`` (the run ended: a final answer or an error event),
            ``"paused"`` (calls wait for a decision or a result: ``paused``) or
            ``"failed"`` (the call raised a codeact error: ``error_type``, ``error``;
            nothing ran past what the store shows).
        text: the text of the run's last event (the final answer when ``"done"``).
        events: how many events the call yielded.
        replayed: the run had finished before (a repeated run key): its stored events
            were yielded again and nothing ran.
        paused: the calls the run paused at.
        error_type / error: the exception's class name and message (``"failed"``).
    """

    model_config = ConfigDict(ser_json_inf_nan="constants")  # NaN and the infinities never null

    workflow_id: str = ""
    status: Literal["done", "paused", "failed"]
    text: str = ""
    events: int = 0
    replayed: bool = False
    paused: list[PausedCall] = Field(default_factory=list)
    error_type: str | None = None
    error: str | None = None

    @classmethod
    def from_events(
        cls, events: list[Event], workflow: str = "", pending: Sequence[PendingCallInfo] | None = None
    ) -> RunResult:
        """The result of a call that yielded ``events``, read from its last events.

        Args:
            pending: the session's pending calls as the verified turn lists them
                (``Runner.pending``), for the arguments of the calls in doubt, which their
                announcement does not carry.
        """
        known = {p.call_key: p for p in pending or []}
        paused: list[PausedCall] = []
        for event in events:
            if not event.interrupted and not event.long_running_tool_ids:
                continue
            for key, confirmation in event.actions.requested_tool_confirmations.items():
                paused.append(
                    PausedCall(call_key=key, tool=confirmation.tool_name, args=confirmation.args, kind="confirmation")
                )
            meta = event.custom_metadata or {}
            if meta.get("codeact_kind") == "in_doubt" and isinstance(meta.get("call_keys"), list):
                named = meta.get("tools")
                tools: list[Any] = named if isinstance(named, list) else []
                for i, key in enumerate(map(str, meta["call_keys"])):
                    info = known.get(key)
                    tool = info.tool if info is not None else str(tools[i]) if i < len(tools) else ""
                    args = dict(info.args) if info is not None else {}
                    paused.append(PausedCall(call_key=key, tool=tool, args=args, kind="in_doubt"))
            for call in event.get_function_calls():
                if call.id is not None and call.id in event.long_running_tool_ids:
                    paused.append(PausedCall(call_key=call.id, tool=call.name, args=call.args, kind="completion"))
        last = events[-1] if events else None
        # announcements repeat on a later call of the same run: only the last pause counts
        if last is not None and not (last.interrupted or last.long_running_tool_ids):
            paused = []
        replayed = bool(events) and all((e.custom_metadata or {}).get("codeact_replayed") for e in events)
        return cls(
            workflow_id=workflow,
            status="paused" if paused else "done",
            text=last.text if last is not None else "",
            events=len(events),
            replayed=replayed,
            paused=paused,
        )
