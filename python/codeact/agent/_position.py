"""Where a paused call sits in the model's script, for the pages that show it (issue 46).

The interpreter reports the paused call expression as a byte range of the text it was
given (``MontyContinuation.position``). That text is the model's script after the host's
changes: the subset check's same-meaning rewrites, and with ``persist_namespace`` on a
runtime without namespace sessions the carried prelude before it and the capture of its last
expression. ``script_position`` maps the range back to the model's script, or gives None
when it cannot be sure (a rewrite moved lines, the call sits in carried code).
"""

from __future__ import annotations

from typing import Any

from ._namespace import _MARK

__all__ = ("paused_position", "script_position", "text_position")

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
