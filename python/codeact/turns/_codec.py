"""The durable forms of a turn (SPEC §5 v2): the turn record kept in the session's turn
slot, the journal's encodings of arguments and outcomes, the value limits of the boundary,
and the events that announce pending calls.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pydantic_core

from .._values import MAX_DEPTH, decode_value, encode_value, plain_json, plain_json_digest, problem
from ..events import Content, Event, EventActions, FunctionCall, Part, PendingCallInfo, ToolConfirmation
from ..runtime import ResumeError, ResumeValue
from ._record import TURN_FORMAT

__all__ = (
    "INLINE_VALUE_LIMIT",
    "CompletionError",
    "MAX_INT_DIGITS",
    "MAX_VALUE_BYTES",
    "MAX_VALUE_DEPTH",
    "TURN_FORMAT",
    "PendingCallInfo",
    "announced_keys",
    "announcement_events",
    "args_digest",
    "claim_decisions",
    "decision_value",
    "plain_args_digest",
    "decode_outcome",
    "encode_outcome",
    "plain_value_problem",
    "value_problem",
)


INLINE_VALUE_LIMIT = 64 * 1024
"""Bytes of an encoded outcome above which the value is stored once as a blob and the
journal holds its SHA-256."""

MAX_VALUE_DEPTH = MAX_DEPTH
"""Deepest nesting of containers that crosses the boundary (arguments and results): the
native ``MAX_VALUE_DEPTH``, one limit for every layer."""

MAX_INT_DIGITS = 4300
"""Most decimal digits of an int in a journaled or stored value (arguments, results,
completions): the limit of pydantic's JSON reader, which reads the journal and the stored
events back (CPython's default ``sys.get_int_max_str_digits()`` too). A larger int is
refused at the call, before anything is stored, and the script is told."""

MAX_VALUE_BYTES = 64 * 1024 * 1024
"""Largest encoded size (bytes) of an argument set or result that crosses the boundary."""


@dataclass(frozen=True, slots=True)
class CompletionError:
    """A long-running call completed with an error (``FunctionResponse.error``): the driver
    answers the script's call with ``RuntimeError(message)`` and journals that outcome."""

    message: str


def decision_value(raw: Any) -> bool:
    """A confirmation decision as a bool (``True`` / ``"approve"`` approve; ``False`` /
    ``"deny"`` deny).

    Raises:
        ValueError: anything else.
    """
    if isinstance(raw, bool):
        return raw
    if raw in ("approve", "approved", "yes"):
        return True
    if raw in ("deny", "denied", "no"):
        return False
    raise ValueError(f"a tool confirmation decision must be True/False or 'approve'/'deny', got {raw!r}")


def claim_decisions(decisions: dict[str, Any], reasons: dict[str, str]) -> dict[str, Any]:
    """Decisions in the claim's form: call key -> True (approve) or the denial reason."""
    return {k: True if decision_value(v) else reasons.get(k, "") for k, v in decisions.items()}


def announcement_events(
    author: str, invocation_id: str, pending: list[PendingCallInfo], handles: dict[str, Any] | None = None
) -> list[Event]:
    """The events announcing ``pending`` calls, one per kind present:

    - the calls awaiting approval or denial: a confirmation request
      (``requested_tool_confirmations``; ``interrupted``; not ``is_final_response()``);
    - the calls in doubt (they started before their runner stopped and may have run): a
      notice saying so and offering rerun, skip or fail (``interrupted``, not
      ``is_final_response()``; ``custom_metadata`` ``{"codeact_kind": "in_doubt",
      "call_keys": [...], "awaits": "resolve"}``, which the first event of a suspension
      does not keep: the driver's in-doubt notice before it, action ``"ask"``, names the
      call); never a confirmation request, which no approval could settle;
    - the long-running calls awaiting their result: a function-call event
      (``long_running_tool_ids``).
    """
    events: list[Event] = []
    confirm = [p for p in pending if p.kind == "confirmation"]
    doubt = [p for p in pending if p.kind == "in_doubt"]
    complete = [p for p in pending if p.kind == "completion"]
    if confirm:
        keys = ", ".join(p.call_key for p in confirm)
        tools = ", ".join(sorted({repr(p.tool) for p in confirm}))
        events.append(
            Event(
                invocation_id=invocation_id,
                author=author,
                content=Content.from_text(
                    f"Tool confirmation required for {tools}. Approve or deny call {keys} to continue.", role="model"
                ),
                actions=EventActions(
                    requested_tool_confirmations={
                        p.call_key: ToolConfirmation(
                            tool_name=p.tool,
                            function_call_id=p.call_key,
                            args=p.args,
                            hint=p.hint or "",
                            digest=p.digest,
                        )
                        for p in confirm
                    }
                ),
                interrupted=True,
                turn_complete=True,
            )
        )
    if doubt:
        calls = "; ".join(f"call {p.call_key} to {p.tool!r}" for p in doubt)
        events.append(
            Event(
                invocation_id=invocation_id,
                author=author,
                content=Content.from_text(
                    f"In doubt: {calls} started before its runner stopped and its outcome was never recorded, so it "
                    "may have run. Resolve each: rerun (run it again), skip (give the script a result without "
                    "running it) or fail (the script's call raises RuntimeError); Runner.resolve_in_doubt or "
                    "Decision(verb='resolve').",
                    role="model",
                ),
                interrupted=True,
                turn_complete=True,
                custom_metadata={
                    "codeact_kind": "in_doubt",
                    "call_keys": [p.call_key for p in doubt],
                    "tools": [p.tool for p in doubt],
                    "awaits": "resolve",
                },
            )
        )
    if complete:
        events.append(
            Event(
                invocation_id=invocation_id,
                author=author,
                content=Content(
                    role="model",
                    parts=[Part(function_call=FunctionCall(name=p.tool, args=p.args, id=p.call_key)) for p in complete],
                ),
                long_running_tool_ids=[p.call_key for p in complete],
            )
        )
    return events


def announced_keys(events: list[Event]) -> set[str]:
    """The call keys the pause announcement at the end of ``events`` (a run's stored events,
    in order) names: the confirmation request's, the long-running calls' and the calls in
    doubt's (named by the in-doubt notices, ``codeact_kind`` ``"in_doubt"`` with action
    ``"ask"``, that precede a stored pause); empty when ``events`` does not end with one."""
    keys: set[str] = set()
    paused = False
    for event in reversed(events):
        meta = event.custom_metadata or {}
        asks = meta.get("codeact_kind") == "in_doubt" and meta.get("action") == "ask"
        if not (event.interrupted or event.long_running_tool_ids or asks):
            break
        paused = paused or event.interrupted
        keys.update(event.actions.requested_tool_confirmations)
        keys.update(event.long_running_tool_ids or ())
        if isinstance(meta.get("call_keys"), list):
            keys.update(str(k) for k in meta["call_keys"])
        if asks and paused and isinstance(meta.get("call_key"), str):
            keys.add(meta["call_key"])
    return keys


# ---------------------------------------------------------------------- values


def value_problem(value: Any, what: str) -> str | None:
    """Why ``value`` (arguments bound from the script, a tool's converted result) cannot
    cross the boundary, or None: ``codeact._values.problem``, with strings holding
    lone surrogates let through (the driver escapes them before journaling)."""
    return problem(value, what, lone_surrogates=True, max_int_digits=MAX_INT_DIGITS)


def plain_value_problem(value: Any, what: str) -> str | None:
    """Why a host-supplied ``value`` is not plain data that can cross the boundary (SPEC §3
    v3, ``codeact._values.problem``), or encodes to more than ``MAX_VALUE_BYTES``
    bytes in the journal; or None."""
    found = problem(value, what, max_int_digits=MAX_INT_DIGITS)
    if found is not None:
        return found
    try:
        size = len(encode_outcome(ResumeValue(value)))
    except (ValueError, TypeError, pydantic_core.PydanticSerializationError) as exc:
        return f"{what} cannot be encoded ({exc})"
    if size > MAX_VALUE_BYTES:
        return f"{what} is larger than {MAX_VALUE_BYTES} bytes encoded"
    return None


_JSON_SCALARS = (str, bool, int, float)


def _json_native(value: Any) -> bool:
    """Whether a JSON round trip gives ``value`` back exactly (no tuples, bytes, sets,
    non-str keys): the journal's ``{"v": value}`` form, else ``{"x": encode_value(value)}``
    (kept as it was, so the bytes of old journals do not change). Only called on values
    ``value_problem`` accepted (bounded depth)."""
    if value is None or isinstance(value, _JSON_SCALARS) or plain_json(value, True):
        return True  # the usual value: one native walk (``codeact._monty.plain_json``)
    if isinstance(value, list):
        return all(v is None or isinstance(v, _JSON_SCALARS) or _json_native(v) for v in value)
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or not (v is None or isinstance(v, _JSON_SCALARS) or _json_native(v)):
                return False
        return True
    return False


def _to_json(value: Any) -> bytes:
    return pydantic_core.to_json(value, inf_nan_mode="constants")


def args_digest(args: dict[str, Any]) -> str:
    """A digest of bound arguments (16 hex digits of BLAKE2b over their tagged JSON form):
    what the journal's intent records instead of the arguments themselves.

    Raises:
        ValueError: the arguments are larger than ``MAX_VALUE_BYTES`` encoded, or have no
            JSON form.
    """
    return _digest(_to_json(args) if _json_native(args) else _to_json(encode_value(args)))


def _digest(data: bytes) -> str:
    """``args_digest``'s hash of the arguments' JSON form ``data``.

    Raises:
        ValueError: ``data`` is larger than ``MAX_VALUE_BYTES``.
    """
    if len(data) > MAX_VALUE_BYTES:
        raise ValueError(f"they are larger than {MAX_VALUE_BYTES} bytes")
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def plain_args_digest(args: dict[str, Any]) -> str | None:
    """``args_digest(args)`` for arguments ``value_problem`` accepts, else None (no digest,
    or arguments that cannot cross: the caller's general path says why). Plain arguments of
    exact JSON types, the usual call's, take one native walk instead of two: it writes their
    JSON and hashes it (``plain_json_digest``, the same bytes and digest), or, when they hold
    a float, only checks them and pydantic writes the JSON hashed here."""
    if type(args) is dict:
        digest = plain_json_digest(args, MAX_INT_DIGITS, MAX_VALUE_BYTES)
        if digest:
            return digest
        if digest == "":  # plain, with a float
            try:
                return _digest(_to_json(args))
            except (ValueError, TypeError, pydantic_core.PydanticSerializationError):
                return None
    plain = type(args) is dict and plain_json(args, True, MAX_INT_DIGITS)
    if not plain and value_problem(args, "") is not None:
        return None
    try:
        # A lone surrogate has no JSON form; past MAX_VALUE_BYTES there is no digest.
        return _digest(_to_json(args)) if plain else args_digest(args)
    except (ValueError, TypeError, pydantic_core.PydanticSerializationError):
        return None


def encode_outcome(outcome: ResumeValue | ResumeError) -> bytes:
    """The journal form of an outcome: ``{"v": value}``, ``{"x": tagged value}`` or
    ``{"e": message, "t": exception type}`` (JSON bytes)."""
    if isinstance(outcome, ResumeError):
        return _to_json({"e": outcome.message, "t": outcome.exc_type})
    value = outcome.value
    if _json_native(value):
        return _to_json({"v": value})
    return _to_json({"x": encode_value(value)})


def decode_outcome(data: Any) -> ResumeValue | ResumeError:
    """The outcome of a parsed journal record (``encode_outcome``'s inverse)."""
    if "e" in data:
        return ResumeError(data["e"], data.get("t", "RuntimeError"))
    if "x" in data:
        return ResumeValue(decode_value(data["x"]))
    return ResumeValue(data.get("v"))
