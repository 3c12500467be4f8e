"""The script's return contract (the four tagged outputs) and feedback text helpers."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._values import encode_value, json_native, readable
from ._hints import tools_ran_note

__all__ = (
    "schema_errors_summary",
    "STDERR_TAG",
    "Error",
    "FinalResult",
    "Observation",
    "ScriptOutput",
    "TransferToAgent",
    "compact_json",
    "decode_script_output",
    "output_header",
    "render_final",
    "render_observation",
    "step_output",
    "truncate_middle",
)

TRUNCATION_MARKER = "\n...[truncated]...\n"


@dataclass(frozen=True, slots=True)
class Observation:
    """``{"type": "observation", "value": v}``: fed back to the model; the loop goes on."""

    value: Any


@dataclass(frozen=True, slots=True)
class Error:
    """``{"type": "error", "message": m}``: fed back as an error; the loop goes on."""

    message: str


@dataclass(frozen=True, slots=True)
class FinalResult:
    """``{"type": "final_result", "value": v}``: the run's answer; the run ends."""

    value: Any


@dataclass(frozen=True, slots=True)
class TransferToAgent:
    """``{"type": "transfer_to_agent", "agent_name": n}``: control passes to agent ``n``."""

    agent_name: str


ScriptOutput = Observation | Error | FinalResult | TransferToAgent


def compact_json(value: Any) -> str:
    """JSON with compact separators, non-ASCII kept, bytes as text when UTF-8 (else base64)."""
    return _COMPACT.encode(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            import base64

            return base64.b64encode(value).decode("ascii")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_json_default)
"""The encoder ``compact_json`` uses: what ``json.dumps`` with its options builds per call."""


def render_final(value: Any) -> str:
    """The text of a final answer: strings as they are, anything else as 2-space JSON of its
    tagged form (``codeact._values.encode_value``: plain JSON as it is; a tuple, a
    set, bytes or a dict with non-str keys as a one-key ``{"$t": ...}``-style dict), so the
    caller can read the value back exactly with ``decode_value``.

    Raises:
        ValueError: the value is not plain data, or its tagged form nests deeper than
            ``JSON_DEPTH`` levels.
    """
    if isinstance(value, str):  # a lone surrogate (no UTF-8 form) as ``\\udcxx`` text
        return value if value.isascii() else value.encode("utf-8", "backslashreplace").decode("utf-8")
    return json.dumps(encode_value(value), ensure_ascii=False, indent=2)


def render_observation(value: Any) -> str:
    """The text the model reads for an observation: compact JSON for plain JSON values (as
    before), Python's notation for the rest (``{(1, 2): 3}``, ``b'..'``, ``{1, 2}``), which
    the model reads as the script would print it. Never raises for plain data."""
    if json_native(value):
        return compact_json(value)
    return readable(value)


def truncate_middle(text: str, limit: int) -> str:
    """Keeps the first and last ``limit // 2`` characters of ``text`` around a marker when
    it is longer than ``limit`` characters (code points)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + TRUNCATION_MARKER + text[len(text) - half :]


SCHEMA_ERRORS_SHOWN = 5
"""Schema errors listed by path in the feedback; the rest are counted."""


def schema_errors_summary(errors: Sequence[tuple[str, str]], limit: int) -> str:
    """The schema-retry feedback for ``errors`` ((path, message) pairs, in path order):
    the number of errors and the first ``SCHEMA_ERRORS_SHOWN`` by path, in at most ``limit``
    characters (``max_error_chars``; each message cut in the middle when long), so that a
    2,000-row output gets a short, actionable answer rather than 2,000 lines.

    Returns:
        ``"<n> error(s); <path>: <message>; ...; and <m> more"`` (``""`` for no errors).
    """
    if not errors:
        return ""
    shown = errors[:SCHEMA_ERRORS_SHOWN]
    head = f"{len(errors)} error{'s' if len(errors) != 1 else ''}" + (
        f" (the first {len(shown)} by path)" if len(errors) > len(shown) else ""
    )
    tail = f"; and {len(errors) - len(shown)} more" if len(errors) > len(shown) else ""
    room = max(limit - len(head) - len(tail) - 2 * len(shown), 40 * len(shown))
    each = max(room // len(shown), 40)
    parts = [truncate_middle(f"{path or '(root)'}: {message}", each) for path, message in shown]
    return truncate_middle(f"{head}: " + "; ".join(parts) + tail, max(limit, 80))


_KINDS = {"observation": "value", "final_result": "value", "error": "message", "transfer_to_agent": "agent_name"}


def decode_script_output(value: Any, *, tools_ran: Sequence[str] = ()) -> ScriptOutput:
    """Reads a script's completion value as one of the four tagged outputs.

    Anything else (not a dict, no or unknown ``type``, a missing or ill-typed field, a
    script whose last statement is not an expression) becomes an ``Error`` naming the
    problem, which the agent feeds back like any error. ``tools_ran`` (the tools the script
    called, in order) are named in that error: running the script again calls them again.
    """
    problem = _problem(value)
    if problem is not None:
        return Error(
            "the script must end with an expression that is a tagged result dict, e.g. "
            '{"type": "final_result", "value": ...} or {"type": "observation", "value": ...}; '
            f"got {_preview(value)} ({problem})." + tools_ran_note(tools_ran)
        )
    kind = value["type"]
    if kind == "observation":
        return Observation(value["value"])
    if kind == "final_result":
        return FinalResult(value["value"])
    if kind == "error":
        return Error(value["message"])
    return TransferToAgent(value["agent_name"])


def _problem(value: Any) -> str | None:
    digits = _huge_int_digits(value)
    if digits is not None:
        return (
            f"it holds an int of about {digits} digits, more than the {sys.get_int_max_str_digits()} "
            "that can be turned into text (for the model or the store); return a part of it "
            "(x % 10**100), its number of digits or x.bit_length() instead"
        )
    if value is None:
        return "the last statement is not an expression, so the script returned None"
    if not isinstance(value, dict):
        return f"a {type(value).__name__} is not a dict"
    kind = value.get("type")
    if kind is None:
        return "the dict has no 'type' key"
    if kind not in _KINDS:
        return f"unknown type {kind!r}; expected one of {', '.join(_KINDS)}"
    field = _KINDS[kind]
    if field not in value:
        return f"a {kind} needs a {field!r} key"
    if field != "value" and not isinstance(value[field], str):
        return f"{field!r} must be a string"
    return None


def _huge_int_digits(value: Any) -> int | None:
    """About how many decimal digits the first int of ``value`` (walked through dicts, lists
    and tuples) too long for ``str()`` has (``sys.get_int_max_str_digits``), or None."""
    limit = sys.get_int_max_str_digits()
    if not limit:
        return None
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, int) and not isinstance(v, bool):
            digits = int(abs(v).bit_length() * 0.30103) + 1
            if digits > limit:
                try:
                    str(v)  # near the limit the estimate is one digit high; CPython refuses fast
                except ValueError:
                    return digits
        elif isinstance(v, dict):
            todo += [*v.keys(), *v.values()]
        elif isinstance(v, (list, tuple)):
            todo += v
    return None


def _preview(value: Any, limit: int = 300) -> str:
    try:
        text = compact_json(value)
    except (TypeError, ValueError):
        try:
            text = repr(value)
        except ValueError:  # an int too long for str()
            text = f"a {type(value).__name__}"
    return text if len(text) <= limit else text[:limit] + "..."


# ------------------------------------------------------------------ the two output streams
# The model sees a script's output as one text in which each line the script wrote to stderr
# starts with ``[stderr] `` (stdout lines as they are), so it knows which stream a line came
# from; the turn record keeps that same text.

STDERR_TAG = "[stderr] "


def step_output(step: Any) -> str:
    """The output of one step: its stdout, then its stderr with each line tagged."""
    out: str = step.stdout
    err: str = getattr(step, "stderr", "")
    if not err:
        return out
    tagged = "".join(STDERR_TAG + line for line in err.splitlines(keepends=True))
    return out + ("\n" if out and not out.endswith("\n") else "") + tagged


def output_header(text: str) -> str:
    """The heading of the output shown to the model, naming the streams it holds."""
    if any(line.startswith(STDERR_TAG) for line in text.splitlines()):
        return f"Output (stdout; lines from stderr start with {STDERR_TAG.strip()}):"
    return "Output (stdout):"
