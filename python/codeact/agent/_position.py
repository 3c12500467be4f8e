"""Where a paused call sits in the model's script, for the pages that show it (issue 46).

The interpreter reports the paused call expression as a byte range of the text it was
given (``MontyContinuation.position``). That text is the model's script after the host's
changes: the subset check's same-meaning rewrites, and with ``persist_namespace`` on a
runtime without namespace sessions the carried prelude before it and the capture of its last
expression. ``script_position`` maps the range back to the model's script, or gives None
when it cannot be sure (a rewrite moved lines, the call sits in carried code).
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from ._namespace import _MARK

__all__ = ("map_raised_lines", "map_traceback", "paused_position", "ran_line_map", "script_position", "text_position")

_CAPTURE = f"{_MARK}_result = ("


def text_position(text: str, start: int, end: int) -> tuple[int, int, int, int] | None:
    """``(line, column, end_line, end_column)`` of the byte range ``[start, end)`` of
    ``text``'s UTF-8 form: 1-based lines, 1-based columns in characters (``end_column``
    exclusive, as ``ast``'s ``end_col_offset`` + 1). None for a range outside the text or
    not on character boundaries."""
    data = text.encode("utf-8", "surrogatepass")
    if not 0 <= start <= end <= len(data):
        return None
    try:
        before, inside = data[:start].decode("utf-8"), data[start:end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    end_line = line + inside.count("\n")
    end_column = (column + len(inside)) if "\n" not in inside else len(inside) - inside.rfind("\n")
    return line, column, end_line, end_column


def script_position(ran: str, given: str, byte_range: tuple[int, int], prelude_lines: int = 0) -> list[int] | None:
    """The call at ``byte_range`` of ``ran`` (the text the interpreter ran) as
    ``[line, column, end_line, end_column]`` (see ``text_position``) in the model's script.

    ``given`` is the text the host handed to the runtime (``ran`` before the subset check's
    rewrites); ``prelude_lines`` the lines of carried namespace before the model's script in
    it. None when a rewrite changed the lines around the call (so ``ran``'s lines are not
    ``given``'s), or the call sits in the prelude or after the model's script."""
    at = text_position(ran, *byte_range)
    if at is None:
        return None
    line, column, end_line, end_column = at
    ran_lines, given_lines = ran.split("\n"), given.split("\n")
    if ran != given and (
        len(ran_lines) != len(given_lines)
        or ran_lines[line - 1] != given_lines[line - 1]
        or ran_lines[end_line - 1] != given_lines[end_line - 1]
    ):
        return None
    if prelude_lines:
        first = given_lines[line - 1]
        cut = first.find(_CAPTURE)
        if 0 <= cut < column - 1:  # the script's last expression, captured: drop the capture
            column -= len(_CAPTURE)
            if end_line == line:
                end_column -= len(_CAPTURE)
        line, end_line = line - prelude_lines, end_line - prelude_lines
        if line < 1:
            return None
    return [line, column, end_line, end_column]


def paused_position(runtime: Any, call: Any, record: Any) -> list[int] | None:
    """Where ``call`` (a ``Call`` step's continuation) paused in the model's script of the
    turn ``record`` (a ``TurnRecord``): ``[line, column, end_line, end_column]``, or None when
    the runtime does not report it or it cannot be mapped back (``script_position``)."""
    byte_range = getattr(call, "position", None)
    as_run = getattr(runtime, "script_as_run", None)
    if byte_range is None or as_run is None:
        return None
    given = record.script
    namespace = record.namespace if isinstance(record.namespace, dict) else {}
    carried = namespace.get("script")
    prelude = int(carried.get("prelude_lines", 0)) if isinstance(carried, dict) else 0
    try:
        ran = as_run(given)
    except Exception:  # a runtime's own check failing here must not stop the pause
        return None
    if not isinstance(ran, str):
        return None
    return script_position(ran, given, tuple(byte_range), prelude)


_TRACEBACK_LINE = re.compile(r'^(\s*File "([^"]*)", line )(\d+)(.*)$')
_CARETS = re.compile(r"^\s*[~^]+\s*$")


def ran_line_map(ran: str, given: str) -> dict[int, int]:
    """``{line of ran: line of given}`` (1-based) for every line of ``ran``, the text the
    interpreter ran, mapped to ``given``, the text it was handed before the subset check's
    rewrites. Lines a rewrite put in (a hoisted loop) map to the line of the statement they
    replace. Empty when the two are equal."""
    if ran == given:
        return {}
    ran_lines, given_lines = ran.split("\n"), given.split("\n")
    mapping: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, ran_lines, given_lines, autojunk=False)
    for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
        for offset, i in enumerate(range(i1, i2)):
            if tag == "equal":
                mapping[i + 1] = j1 + offset + 1
            else:  # replaced or inserted lines: the given statement they stand for (a
                # hoisted loop is put in before its statement: the next given line)
                mapping[i + 1] = min(j1 + 1, len(given_lines))
    return mapping


def map_traceback(message: str, ran: str, given: str, script_name: str) -> str:
    """``message`` (a traceback of ``script_name``) with its line numbers and source lines
    those of ``given`` rather than of ``ran`` (see ``ran_line_map``); a caret line under a
    source line that changed is dropped (it would point into the rewritten text)."""
    mapping = ran_line_map(ran, given)
    if not mapping:
        return message
    given_lines = given.split("\n")
    ran_lines = ran.split("\n")
    out: list[str] = []
    lines = message.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _TRACEBACK_LINE.match(line)
        if m is None or m.group(2) != script_name:
            out.append(line)
            i += 1
            continue
        n = int(m.group(3))
        mapped = mapping.get(n, n)
        out.append(f"{m.group(1)}{mapped}{m.group(4)}")
        i += 1
        if i < len(lines) and 0 < n <= len(ran_lines) and lines[i].strip() == ran_lines[n - 1].strip():
            shown = given_lines[mapped - 1].strip() if 0 < mapped <= len(given_lines) else lines[i].strip()
            changed = shown != lines[i].strip()
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            out.append(indent + shown)
            i += 1
            if changed and i < len(lines) and _CARETS.match(lines[i]):
                i += 1
    return "\n".join(out)


def map_raised_lines(message: str, runtime: Any, given: str, script_name: str) -> str:
    """A script's traceback with the lines of ``given`` (the text handed to ``runtime``), not
    those of the text the subset check's rewrites made of it; unchanged when the runtime does
    not rewrite (no ``script_as_run``) or the mapping fails."""
    as_run = getattr(runtime, "script_as_run", None)  # an optional method: error path only
    if as_run is None:
        return message
    try:
        ran = as_run(given)
    except Exception:  # a runtime's own check failing here must not hide the script's error
        return message
    return map_traceback(message, ran, given, script_name) if isinstance(ran, str) else message
