"""One typed decision on a paused turn (SPEC §5 v4, "Decisions").

Every front door (``Runner.approve`` / ``deny`` / ``complete`` / ``resolve_in_doubt`` /
``recover``, the CLI, the web inbox, the adapters) builds a ``Decision`` and sends it through
``Runner.decide``. A decision is validated once, when it is built (its shape: which fields
its verb takes); whether the call it names accepts it is checked against the verified turn
(``check_accepted``) before anything is claimed or stored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from ..events import CALL_ACCEPTS, PendingCallInfo
from ..exceptions import DecisionRefusedError, EditNotSupportedError, ValueConversionError, describe_pending
from ._codec import plain_value_problem

__all__ = ("Decision", "DecisionVerb", "InDoubtAction", "check_accepted", "check_supported")

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
        args: edited arguments for an approval. Accepted here; ``Runner.decide`` refuses a
            decision carrying them (``EditNotSupportedError``) until editing is implemented.
        payload: the value completing a long-running call (``complete``), or the result a
            skipped call in doubt gives the script (``resolve`` with ``"skip"``); plain data
            (SPEC §3), checked when the decision is built.
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
        if self.error is not None and verb != "complete":
            raise ValueError(f"error is for 'complete' decisions only, not {verb!r}")
        if self.error is not None and self.payload is not None:
            raise ValueError("complete a call with either value or error (payload or error), not both")
        takes_payload = verb == "complete" or (verb == "resolve" and self.action == "skip")
        if self.payload is not None and not takes_payload:
            what = f"'resolve' with action {self.action!r}" if verb == "resolve" else repr(verb)
            raise ValueError(f"payload is for 'complete' and 'resolve' with 'skip' decisions only, not {what}")
        if takes_payload and self.error is None:
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


def check_supported(decision: Decision) -> None:
    """Refuses what a decision may carry but this version does not do yet.

    Raises:
        EditNotSupportedError: ``decision.args`` is set (edited arguments).
    """
    if decision.args is not None:
        raise EditNotSupportedError(
            f"approving call {decision.call_key or '(the one pending)'} with edited arguments is not supported yet: "
            "send the decision without args (approve the call as it is, or deny it); nothing was claimed or stored"
        )


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
