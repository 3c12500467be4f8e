"""One typed decision on a paused turn (SPEC §5 v4, "Decisions").

Every front door (``Runner.approve`` / ``deny`` / ``complete`` / ``resolve_in_doubt`` /
``recover``, the CLI, the web inbox, the adapters) builds a ``Decision`` and sends it through
``Runner.decide``. A decision is validated once, when it is built (its shape: which fields
its verb takes); whether the call it names accepts it is checked against the verified turn
(``check_accepted``) before anything is claimed or stored.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from ..events import CALL_ACCEPTS, PendingCallInfo
from ..exceptions import (
    DecisionRefusedError,
    DecisionValueError,
    EditNotSupportedError,
    ToolArgumentError,
    ValueConversionError,
    describe_pending,
)
from ..tools import Tool
from ._codec import args_digest, plain_value_problem

__all__ = (
    "Decision",
    "DecisionAct",
    "DecisionRecord",
    "DecisionVerb",
    "InDoubtAction",
    "check_accepted",
    "check_answer",
    "check_edit",
    "record_text",
)

DecisionVerb = Literal["approve", "deny", "complete", "resolve", "recover"]
"""What a decision does: approve or deny a call awaiting confirmation, complete (or deny) a
long-running call awaiting its result, resolve a call in doubt, recover an interrupted turn."""

InDoubtAction = Literal["rerun", "skip", "fail"]
"""How a call in doubt is resolved: run it again, give the script ``payload`` as its result
without running it, or fail it into the script (``RuntimeError`` with ``reason``)."""


class Decision(BaseModel):
    """A decision on a paused (or interrupted) turn, sent with ``Runner.decide``.

    Attributes:
        verb: ``"approve"``, ``"deny"``, ``"complete"``, ``"resolve"`` or ``"recover"``.
        call_key: the call decided on (``PendingCallInfo.call_key``). ``None`` for approve
            and deny is accepted only when exactly one call accepts the verb; ``complete``
            and ``resolve`` need it; ``recover`` takes none (it names the turn, not a call).
        action: for ``resolve`` only (and required there): ``"rerun"``, ``"skip"`` or
            ``"fail"``.
        digest: the ``PendingCallInfo.digest`` the decision was made on: a call under that
            key with another digest is refused (a stale view), nothing runs.
        actor: who decided (a user id, an operator's name), or None.
        reason: why: the denial reason the script sees, or the text of a ``"fail"``.
        args: edited arguments for an approval: the tool runs with these instead of the
            script's (the script's call is what replay matches; the edited call is what
            runs). Validated against the tool's schema before anything runs
            (``DecisionValueError``); a tool with ``editable=False`` refuses them
            (``EditNotSupportedError``). Needs ``digest``: the call the reviewer edited.
        payload: the value completing a long-running call (``complete``; validated against
            the tool's ``result_type`` when it declares one), the payload of an approval (the
            approved tool reads it as ``ToolContext.tool_confirmation.payload``; validated
            against its ``payload_type``), or the result a skipped call in doubt gives the
            script (``resolve`` with ``"skip"``); plain data (SPEC §3), checked when the
            decision is built.
        error: for ``complete`` only: the long-running call failed with this text (the
            script's call raises ``RuntimeError``); not together with ``payload``.
        run_key: an idempotency key (``Runner.run_async``): a decision sent again under a key
            already seen is not applied twice.

    Raises (when built):
        pydantic.ValidationError: a field the verb does not take, a missing ``call_key`` or
            ``action``, ``error`` together with ``payload``.
        ValueConversionError: ``payload`` is not plain data, too deep or too large.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    verb: DecisionVerb
    call_key: str | None = None
    action: InDoubtAction | None = None
    digest: str | None = None
    actor: str | None = None
    reason: str | None = None
    args: dict[str, Any] | None = None
    payload: Any = None
    error: str | None = None
    run_key: str | None = None

    @field_validator("actor")
    @classmethod
    def _actor_text(cls, actor: str | None) -> str | None:
        # An actor is printed in audit listings (`codeact sessions show`): no control
        # characters (an escape sequence, a newline faking a second record), at most 200.
        if actor is not None:
            if len(actor) > 200:
                raise ValueError(f"actor is {len(actor)} characters; at most 200")
            bad = next((c for c in actor if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
            if bad is not None:
                raise ValueError(f"actor holds the control character {bad!r}: give a plain name")
        return actor

    @field_validator("error", mode="before")
    @classmethod
    def _error_text(cls, error: Any) -> Any:
        if error is not None and not isinstance(error, str):
            raise ValueError(f"error must be a str, not {type(error).__name__}")
        return error

    @model_validator(mode="after")
    def _shape(self) -> Decision:
        verb = self.verb
        if verb == "resolve":
            if self.action is None:
                raise ValueError("a 'resolve' decision needs an action: 'rerun', 'skip' or 'fail'")
        elif self.action is not None:
            raise ValueError(f"action is for 'resolve' decisions only, not {verb!r}")
        if verb in ("complete", "resolve") and not self.call_key:
            raise ValueError(f"a {verb!r} decision needs the call_key of the call it decides")
        if verb == "recover" and (self.call_key is not None or self.digest is not None):
            raise ValueError("a 'recover' decision names the turn, not a call: give no call_key or digest")
        if self.args is not None and verb != "approve":
            raise ValueError(f"args (edited arguments) are for 'approve' decisions only, not {verb!r}")
        if self.args is not None and not self.digest:
            raise ValueError(
                "approving with edited arguments needs the digest of the call the reviewer saw "
                "(PendingCallInfo.digest): the edit is bound to that call"
            )
        if self.args is not None:
            problem = plain_value_problem(self.args, f"the edited arguments for call {self.call_key!r}")
            if problem is not None:
                raise ValueConversionError(f"{problem}; nothing was claimed or stored")
        if self.error is not None and verb != "complete":
            raise ValueError(f"error is for 'complete' decisions only, not {verb!r}")
        if self.error is not None and self.payload is not None:
            raise ValueError("complete a call with either value or error (payload or error), not both")
        takes_payload = verb in ("complete", "approve") or (verb == "resolve" and self.action == "skip")
        if self.payload is not None and not takes_payload:
            what = f"'resolve' with action {self.action!r}" if verb == "resolve" else repr(verb)
            raise ValueError(
                f"payload is for 'complete', 'approve' and 'resolve' with 'skip' decisions only, not {what}"
            )
        if takes_payload and self.error is None and (verb != "approve" or self.payload is not None):
            problem = plain_value_problem(
                self.payload, f"the value of the {verb!r} decision for call {self.call_key!r}"
            )
            if problem is not None:
                raise ValueConversionError(f"{problem}; nothing was claimed or stored")
        return self

    @property
    def act(self) -> str:
        """The decision as the call's kind names it (``PendingCallInfo.accepts``): the verb,
        or the action of a ``resolve``."""
        return self.action if self.verb == "resolve" and self.action is not None else self.verb


DecisionAct = Literal["approve", "deny", "complete", "rerun", "skip", "fail"]
"""A decision as one call records it: the verb, or the action of a ``resolve``."""


class DecisionRecord(BaseModel):
    """One decision as it is journaled with the resume that uses it, and as
    ``Runner.decisions`` lists it (SPEC §5 v4: who decided what, kept for good).

    Stored, sealed like every journal record, in the same write as the record the decision
    produces: the resumed call's intent for approve, complete and rerun; its outcome for
    deny, skip and fail.

    Attributes:
        act: ``"approve"``, ``"deny"``, ``"complete"``, ``"rerun"``, ``"skip"`` or ``"fail"``.
        call_key: the call decided on.
        tool: its tool ("" when not known).
        actor: who decided (None: not said; the CLI says the OS user).
        reason: why, or None.
        at: when the decision was made, seconds since the epoch (the runner's clock).
        args: the edited arguments the call ran with (an edited approval), else None.
        args_digest: the argument digest of ``args`` (what ran), else None.
        payload: the confirmation payload given with an approval, else None.
        app_name / user_id / session_id / turn: where it was made (set when listed; not
            part of the journaled record, whose seal binds them).
    """

    model_config = ConfigDict(extra="ignore")

    act: DecisionAct
    call_key: str
    tool: str = ""
    actor: str | None = None
    reason: str | None = None
    at: float = 0.0
    args: dict[str, Any] | None = None
    args_digest: str | None = None
    payload: Any = None
    app_name: str = ""
    user_id: str = ""
    session_id: str = ""
    turn: str = ""


def check_accepted(decision: Decision, call: PendingCallInfo, pending: list[PendingCallInfo]) -> None:
    """Refuses a decision the call's kind does not accept (SPEC §5 v4), before anything runs.

    Raises:
        DecisionRefusedError: naming what the call awaits and the decisions it accepts.
    """
    accepts = CALL_ACCEPTS[call.kind]
    if decision.act in accepts:
        return
    raise DecisionRefusedError(
        f"cannot {decision.act} call {call.call_key} to {call.tool!r}: it {call.awaits} and accepts only "
        f"{_either(accepts)} "
        f"({describe_pending(pending)}); nothing was claimed or stored and no tool ran",
        pending,
        call_key=call.call_key,
        kind=call.kind,
        accepts=accepts,
    )


def _either(verbs: tuple[str, ...]) -> str:
    quoted = [repr(v) for v in verbs]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


_WHERE = {"app_name", "user_id", "session_id", "turn"}


def record_text(record: DecisionRecord) -> str:
    """``record`` as the JSON text of its journal record (``kind="decision"``): what was
    decided, without where (the journal row and its seal say where)."""
    return record.model_dump_json(exclude=_WHERE, exclude_none=True)


def check_edit(args: dict[str, Any], call: PendingCallInfo, tool: Tool) -> str:
    """Checks an approval's edited arguments for ``call`` against its ``tool`` before
    anything is claimed or stored; returns their argument digest (what runs).

    A ``FunctionTool`` validates them against its signature (as its ``run`` will); another
    tool against the names its JSON schema declares (unknown and missing arguments).

    Raises:
        EditNotSupportedError: the tool forbids edits (``editable=False``).
        DecisionValueError: the arguments fail the tool's schema (naming each field), or
            cannot be digested.
    """
    key = call.call_key
    if not getattr(tool, "editable", True):
        raise EditNotSupportedError(
            f"tool {tool.name!r} does not allow edited arguments (editable=False): approve call {key} as the script "
            "made it, or deny it; nothing was claimed or stored and no tool ran",
            [call],
            call_key=key,
            tool=tool.name,
        )
    errors: list[tuple[str, str]] = []
    if type(tool).check_args is Tool.check_args:
        errors = _schema_errors(args, tool.parameters)
    else:
        try:
            tool.check_args(args)
        except ToolArgumentError as exc:
            errors = list(exc.errors)
    if not errors:
        try:
            return args_digest(args)
        except (ValueError, TypeError) as exc:
            errors = [("", f"cannot be digested ({exc})")]
    shown = "; ".join(f"{field}: {message}" if field else message for field, message in errors[:10])
    raise DecisionValueError(
        f"the edited arguments for call {key} to {tool.name!r} do not fit the tool's schema ({shown}); nothing was "
        "claimed or stored, no tool ran and the call is still pending",
        [call],
        call_key=key,
        tool=tool.name,
        what="args",
        errors=errors,
    )


def check_answer(what: Literal["result", "payload"], value: Any, call: PendingCallInfo, tool: Tool) -> None:
    """Checks a completion's value (``what="result"``) or an approval's payload
    (``"payload"``) against the type the tool declares (``result_type`` / ``payload_type``),
    before anything is claimed or stored.

    Raises:
        DecisionValueError: the value does not fit, naming each failing field.
    """
    check = getattr(tool, "check_answer", None)
    errors = check(what, value) if check is not None else []
    if not errors:
        return
    shown = "; ".join(f"{field}: {message}" if field else message for field, message in errors[:10])
    kind = "result_type" if what == "result" else "payload_type"
    label = "value completing" if what == "result" else "payload approving"
    raise DecisionValueError(
        f"the {label} call {call.call_key} to {tool.name!r} is not the tool's {kind} ({shown}); nothing was "
        "claimed or stored, the script did not resume and the call is still pending",
        [call],
        call_key=call.call_key,
        tool=tool.name,
        what=what,
        errors=errors,
    )


def _schema_errors(args: dict[str, Any], schema: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The argument names ``args`` gets wrong against a tool's JSON schema (``type:
    object``): unknown ones (when it allows no others) and missing required ones."""
    if not isinstance(schema, dict):
        return []
    properties = schema.get("properties")
    known = set(properties) if isinstance(properties, dict) else set()
    errors: list[tuple[str, str]] = []
    if schema.get("additionalProperties") is False:
        errors += [(k, "unexpected argument") for k in args if k not in known]
    required = schema.get("required")
    if isinstance(required, list):
        errors += [(str(k), "missing required argument") for k in required if k not in args]
    return errors
