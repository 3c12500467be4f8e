"""The strict JSON the inbox accepts in a request body or a form's value field."""

from __future__ import annotations

import json
from typing import Any

__all__ = ("_strict_json",)


def _refuse_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


def _strict_json(text: str | bytes) -> Any:
    """``json.loads`` without the NaN and Infinity extensions, nor lone surrogates (``"\\ud800"``:
    no UTF-8 text holds them, so neither a response nor the store could).

    Raises:
        json.JSONDecodeError: not JSON.
        RecursionError: nested too deeply.
    """
    value = json.loads(text, parse_constant=_refuse_constant)
    _no_surrogates(value)
    return value


def _no_surrogates(value: Any) -> None:
    """Raises ``json.JSONDecodeError`` for a string (key or value) that is not valid Unicode text."""
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise json.JSONDecodeError("a string holds a lone surrogate (\\ud800-\\udfff)", "", 0) from None
        elif isinstance(v, dict):
            todo += [*v.keys(), *v.values()]
        elif isinstance(v, list):
            todo += v
