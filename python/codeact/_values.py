"""Plain data (SPEC §3 v3), defined once: the values that cross the boundary between the
host and a script, the one depth limit, the check and the conversion every layer uses.

Plain data is None, bool, int (any size), float (NaN and infinities included), str (valid
UTF-8: no lone surrogates), bytes, list, tuple, dict, set and frozenset, nested at most
``MAX_DEPTH`` levels. A dict key or a set element may be any plain value but a list, dict
or set. Subclasses of these types count as their base type, as in the native conversion
(``rust/src/convert.rs``), whose verdicts ``problem`` reproduces: a value ``problem``
accepts converts, and one it refuses is refused there with the same text.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

import pydantic_core
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from . import _monty

__all__ = (
    "JSON_INT_DIGITS",
    "MAX_DEPTH",
    "PLAIN_TYPES",
    "decode_state",
    "decode_value",
    "encode_state",
    "encode_value",
    "in_script_check",
    "json_native",
    "plain_json",
    "plain_json_digest",
    "problem",
    "readable",
    "to_plain",
)

MAX_DEPTH: int = _monty.MAX_VALUE_DEPTH
"""Deepest nesting of containers that may cross the boundary, in levels (the native
``MAX_VALUE_DEPTH``): a value nested inside more containers than this is refused."""

plain_json = _monty.plain_json
"""``plain_json(value, lone_surrogates, max_int_digits=None) -> bool``: the native quick
verdict (``rust/src/plain.rs``): True only for plain data of exact JSON types that every
check here and the journal's JSON form accept; False means: ask the Python check."""

plain_json_digest = _monty.plain_json_digest
"""``plain_json_digest(value, max_int_digits, max_bytes) -> str | None``: the native
argument digest (``rust/src/plain.rs``): BLAKE2b-64 hex over ``pydantic_core.to_json``'s
bytes, for values ``plain_json(value, False, max_int_digits)`` accepts whose JSON is at
most ``max_bytes`` long; ``""`` for such a value holding a float (plain: hash pydantic's
JSON in Python); None means: take the Python path."""

PLAIN_TYPES = "None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset"
"""The plain types, as the error messages name them."""

_SCALARS = (bool, int, float, bytes)
_SEQUENCES = (list, tuple, set, frozenset)
_UNHASHABLE = (list, dict, set)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in ("a", "e", "i", "o", "u") else "a"


def _int_too_long(where: str, limit: int) -> str:
    return f"{where} is an int of more than {limit} digits, which cannot be stored (at most {limit} digits)"


def _not_plain(where: str, type_name: str) -> str:
    return f"{where} is {_article(type_name)} {type_name}, which cannot cross the boundary (allowed: {PLAIN_TYPES})"


def _too_many_digits(value: int, limit: int) -> bool:
    # a cheap bound first: fewer than ``limit`` digits whenever bit_length < limit * log2(10)
    return value.bit_length() > limit * 3.3219 and abs(value) >= 10**limit


_CONTAINERS = frozenset({list, tuple, dict, set, frozenset})


def _exact_plain(value: Any, depth: int, lone_surrogates: bool, max_int_digits: int | None) -> bool:
    """Whether ``value``, a container of one of the exact types ``_CONTAINERS`` at ``depth``,
    holds only plain data of exact types (dict keys: scalars and str) that ``problem``
    accepts. False means: let the walk decide (a subclass, another key type, a problem, the
    depth limit reached), so the fast path never changes a verdict or a message."""
    if not value:
        return True
    if depth >= MAX_DEPTH:
        return False
    if type(value) is dict:
        return _exact_items(value, depth, lone_surrogates, max_int_digits, False) and _exact_items(
            value.values(), depth, lone_surrogates, max_int_digits, True
        )
    return _exact_items(value, depth, lone_surrogates, max_int_digits, True)


def _exact_items(items: Any, depth: int, lone_surrogates: bool, max_int_digits: int | None, containers: bool) -> bool:
    """``_exact_plain`` over the items (or a dict's keys, ``containers=False``) of a
    container at ``depth``."""
    for v in items:
        kind = type(v)
        if kind is str:
            if not (lone_surrogates or v.isascii()):
                return False
        elif kind is int:
            if max_int_digits is not None and _too_many_digits(v, max_int_digits):
                return False
        elif containers and kind in _CONTAINERS:
            if not _exact_plain(v, depth + 1, lone_surrogates, max_int_digits):
                return False
        elif v is not None and kind is not bool and kind is not float and kind is not bytes:
            return False
    return True


def problem(
    value: Any, where: str = "value", *, lone_surrogates: bool = False, max_int_digits: int | None = None
) -> str | None:
    """Why ``value`` is not plain data, or None when it is.

    Args:
        value: any Python value.
        where: how the message names the value (``"the result of 'lookup'"``); inner
            values are named from it (``value['rows'][2]``).
        lone_surrogates: accept strings holding lone surrogates (for a caller that escapes
            them before the value crosses).
        max_int_digits: refuse an int of more decimal digits than this (None: any size;
            a caller that stores the value as JSON passes the JSON reader's limit).

    Returns:
        None, or one sentence: ``<where> is a <type>, which cannot cross the boundary
        (allowed: ...)`` or ``<where> nests deeper than <MAX_DEPTH> levels``, naming the
        first offending value in order. Iterative, so any depth (and a cycle) is safe.
    """
    kind = type(value)
    if value is None or kind in _SCALARS:
        if max_int_digits is not None and kind is int and _too_many_digits(value, max_int_digits):
            return _int_too_long(where, max_int_digits)
        return None
    if kind is str and (lone_surrogates or value.isascii()):
        return None
    if kind in _CONTAINERS and (
        plain_json(value, lone_surrogates, max_int_digits) or _exact_plain(value, 0, lone_surrogates, max_int_digits)
    ):
        return None  # the common case (arguments, a tool's result): one native walk, or no walk
    # Depth-first in order, as the native conversion walks, so the first problem is the same.
    # A path is ``None`` (``where``) or ``(parent path, index or key, by index)``, spelled out
    # only for the message (``_label``), not for every value walked.
    stack: list[tuple[Any, int, Any, bool]] = [(value, 0, None, False)]
    while stack:
        item, depth, path, is_key = stack.pop()
        if is_key and isinstance(item, _UNHASHABLE):  # only a subclass that hashes gets here
            return _not_plain(_label(where, path), type(item).__name__)
        if depth > MAX_DEPTH:
            return f"{_label(where, path)} nests deeper than {MAX_DEPTH} levels"
        if item is None or isinstance(item, _SCALARS):
            if (
                max_int_digits is not None
                and isinstance(item, int)
                and not isinstance(item, bool)
                and _too_many_digits(int(item), max_int_digits)
            ):
                return _int_too_long(_label(where, path), max_int_digits)
            continue
        if isinstance(item, str):
            if not lone_surrogates and not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return _not_plain(_label(where, path), "str with lone surrogates")
            continue
        if isinstance(item, _SEQUENCES):
            stack.extend((v, depth + 1, (path, i, True), False) for i, v in reversed(list(enumerate(item))))
            continue
        if isinstance(item, dict):
            children: list[tuple[Any, int, Any, bool]] = []
            for k, v in item.items():
                label = (path, k, False)
                children += [(k, depth + 1, label, True), (v, depth + 1, label, False)]
            stack.extend(reversed(children))
            continue
        return _not_plain(_label(where, path), type(item).__name__)
    return None


def _label(where: str, path: Any) -> str:
    """The text of a path of ``problem``'s walk: ``where`` then ``[index]`` / ``[key!r]``
    (``[?]`` for a key whose repr fails) from the outermost level in."""
    parts: list[str] = []
    while path is not None:
        path, key, by_index = path
        if by_index:
            parts.append(f"[{key}]")
        else:
            try:
                parts.append(f"[{key!r}]")
            except Exception:
                parts.append("[?]")
    return f"{where}{''.join(reversed(parts))}" if parts else where


def to_plain(value: Any) -> Any:
    """``value`` as plain data, keeping what already is (bytes stay bytes, tuples tuples,
    sets sets, non-str dict keys as they are): pydantic models (``model_dump``),
    dataclasses (their fields), enums (their value), ``Mapping`` s (dicts), bytearrays
    (bytes) and anything ``pydantic_core.to_jsonable_python`` knows (datetimes, UUIDs,
    decimals, paths: their JSON form) are converted, inside containers too.

    A value with no plain form, or nested deeper than ``MAX_DEPTH``, is left as it is, so
    ``problem`` (or the native conversion) names it. Never raises.
    """
    kind = type(value)
    if value is None or kind in _SCALARS or kind is str:
        return value
    if kind is dict and all(
        type(k) is str and (v is None or type(v) in _SCALARS or type(v) is str) for k, v in value.items()
    ):
        return value  # the common case: a flat dict of scalars
    return _convert(value, 0)


def _convert(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        return value
    kind = type(value)
    if value is None or kind in _SCALARS or kind is str:
        return value
    if kind is list:
        return [_convert(v, depth + 1) for v in value]
    if kind is tuple:
        return tuple(_convert(v, depth + 1) for v in value)
    if kind is dict:
        return {_key(k, depth): _convert(v, depth + 1) for k, v in value.items()}
    if kind is set or kind is frozenset:
        items = [_key(v, depth) for v in value]
        return set(items) if kind is set else frozenset(items)
    if isinstance(value, enum.Enum):
        return _convert(value.value, depth)
    if isinstance(value, (str, bool, int, float, bytes, list, tuple, set, frozenset, dict)):
        return value  # subclasses convert natively as their base type
    if isinstance(value, BaseModel):
        return _convert(value.model_dump(), depth)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _convert(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {_key(k, depth): _convert(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    try:
        return to_jsonable_python(value)
    except (PydanticSerializationError, ValueError, TypeError):
        return value


def _key(key: Any, depth: int) -> Any:
    """A dict key or set element converted, if its plain form is hashable."""
    converted = _convert(key, depth + 1)
    try:
        hash(converted)
    except TypeError:
        return key
    return converted


def in_script_check(name: str, *, sets: bool = True, any_keys: bool = True) -> str:
    """Python source defining ``name(value)``: whether ``value`` is plain data by
    ``problem``'s rules, for code running inside the sandbox. Iterative; ``MAX_DEPTH`` is
    written in, so the check cannot drift from the native limit.

    Args:
        name: the function's name.
        sets: whether sets and frozensets count (False for a caller whose storage is plain
            JSON, which has no set).
        any_keys: whether a dict key may be any hashable plain value (False: str keys only,
            for the same reason).
    """
    containers = "list, tuple, set, frozenset" if sets else "list, tuple"
    key_test = "isinstance(k, (list, dict, set))" if any_keys else "not isinstance(k, str)"
    return f"""
def {name}(value):
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > {MAX_DEPTH}:
            return False
        if item is None or isinstance(item, (bool, int, float, str, bytes)):
            continue
        if isinstance(item, ({containers})):
            for v in item:
                stack.append((v, depth + 1))
            continue
        if isinstance(item, dict):
            for k in item:
                if {key_test}:
                    return False
                stack.append((k, depth + 1))
                stack.append((item[k], depth + 1))
            continue
        return False
    return True
"""


# ---------------------------------------------------------------------- the tagged form
# One JSON form for every plain value, used wherever a value is stored or handed on as JSON
# (the journal, checkpoints, stored state, ``codeact run --json``, the DBOS worker): plain
# JSON (str-keyed dicts, lists, str, int, float, bool, None) is written as it is; the rest
# is a one-key dict naming its kind. A dict of the user's whose only key is one of the tags
# is written as a ``$d`` dict, so reading back is exact.

JSON_INT_DIGITS = 4300
"""Most decimal digits of an int written as a JSON number (the limit of pydantic's JSON
reader and of CPython's ``str(int)``); a longer int is tagged ``$i`` (hex digits)."""

TAGS = ("$b", "$t", "$d", "$s", "$f", "$i", "$u")
"""The tags of ``encode_value``: bytes (base64), tuple, dict with non-str keys (a list of
``[key, value]`` pairs), set, frozenset, an int of more than ``JSON_INT_DIGITS`` digits
(hex), a str holding lone surrogates (its UTF-8 bytes with surrogates kept, base64)."""

JSON_DEPTH = 190
"""Deepest JSON nesting ``encode_value`` writes (pydantic's parser stops at about 200; a
record wrapping the value takes the rest). Plain lists and dicts take one level each,
well inside it at ``MAX_DEPTH``; tagged tuples and sets take two, tagged dicts three."""

_JSON_SCALARS = (str, bool, int, float)


def json_native(value: Any) -> bool:
    """Whether ``value``, plain data, is written by ``encode_value`` as it is (JSON types
    only, str keys, no int too long, no lone surrogate, no dict shaped like a tag), so a
    JSON round trip gives it back exactly."""
    if value is None or isinstance(value, _JSON_SCALARS):
        return _native_scalar(value)
    if isinstance(value, list):
        if plain_json(value, False, JSON_INT_DIGITS):
            return not _holds_tag_shape(value)
        return all(json_native(v) for v in value)
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) in TAGS:
            return False
        if plain_json(value, False, JSON_INT_DIGITS):
            return not any(_holds_tag_shape(v) for v in value.values())
        return all(isinstance(k, str) and _native_scalar(k) and json_native(v) for k, v in value.items())
    return False


def _native_scalar(value: Any) -> bool:
    if isinstance(value, str):
        return value.isascii() or _encodes(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return not _too_many_digits(value, JSON_INT_DIGITS)
    return True


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _holds_tag_shape(value: Any) -> bool:
    """Whether a plain-JSON ``value`` holds a one-key dict whose key is a tag."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if len(item) == 1 and next(iter(item)) in TAGS:
                return True
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return False


def encode_value(value: Any) -> Any:
    """The tagged JSON form of the plain value ``value`` (``decode_value`` is its inverse).

    Plain JSON comes back as it is (the same object). Bytes become ``{"$b": base64}``,
    tuples ``{"$t": [...]}``, sets and frozensets ``{"$s": [...]}`` / ``{"$f": [...]}``
    (items sorted by their JSON text, so the form does not depend on the hash seed), a dict
    with a key that is not a str (or whose only key is a tag) ``{"$d": [[key, value], ...]}``,
    an int of more than ``JSON_INT_DIGITS`` digits ``{"$i": hex}`` and a str holding lone
    surrogates ``{"$u": base64 of its UTF-8 bytes, surrogates kept}``. Floats stay floats
    (NaN and the infinities are written as JSON's ``NaN`` / ``Infinity`` constants, which
    pydantic's and Python's JSON readers read back).

    Raises:
        ValueError: the form would nest deeper than ``JSON_DEPTH`` levels, or ``value`` is
            not plain data (``problem`` names why).
    """
    if json_native(value):
        return value
    return _tag(value, 1)


def _tag(value: Any, depth: int) -> Any:
    if depth > JSON_DEPTH:
        raise ValueError(f"its JSON form nests deeper than {JSON_DEPTH} levels")
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, str):
        if value.isascii() or _encodes(value):
            return value
        return {"$u": base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii")}
    if isinstance(value, int):
        if _too_many_digits(value, JSON_INT_DIGITS):
            return {"$i": hex(value)}
        return value
    if isinstance(value, bytes):
        return {"$b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, tuple):
        return {"$t": [_tag(v, depth + 2) for v in value]}
    if isinstance(value, (set, frozenset)):
        items = sorted((_tag(v, depth + 2) for v in value), key=_sort_key)
        return {"$f" if isinstance(value, frozenset) else "$s": items}
    if isinstance(value, list):
        return [_tag(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) and _native_scalar(k) for k in value) and not (
            len(value) == 1 and next(iter(value)) in TAGS
        ):
            return {k: _tag(v, depth + 1) for k, v in value.items()}
        return {"$d": [[_tag(k, depth + 3), _tag(v, depth + 3)] for k, v in value.items()]}
    found = problem(value)
    raise ValueError(found or f"a {type(value).__name__} has no JSON form")


def _sort_key(item: Any) -> bytes:
    return pydantic_core.to_json(item, inf_nan_mode="constants")


_LIST_TAGS = frozenset({"$t", "$d", "$s", "$f"})
_TEXT_TAGS = frozenset({"$b", "$i", "$u"})


def decode_value(data: Any) -> Any:
    """The plain value whose tagged form (``encode_value``) is ``data``, as parsed from JSON.
    A one-key dict whose key is a tag but whose content has the wrong shape (not written by
    ``encode_value``: a record from before a tag existed) is read as the dict it is.

    Raises:
        ValueError: ``data`` holds something no JSON reader gives (not a JSON value).
    """
    if data is None or isinstance(data, _JSON_SCALARS):
        return data
    if isinstance(data, list):
        return [decode_value(v) for v in data]
    if isinstance(data, dict):
        if len(data) == 1:
            key = next(iter(data))
            if key in TAGS:
                try:
                    return _untag(key, data[key])
                except (TypeError, ValueError, UnicodeDecodeError):
                    pass  # not one of ours: the dict as it is
        return {k: decode_value(v) for k, v in data.items()}
    raise ValueError(f"a {type(data).__name__} is not a JSON value")


def encode_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """A state mapping's JSON form: each value made plain (``to_plain``: datetimes, models,
    ...) and then tagged (``encode_value``). Used for session state and event state deltas.

    Raises:
        ValueError: a value's tagged form nests too deep, or it is not plain data.
    """
    return {k: encode_value(to_plain(v)) for k, v in state.items()}


def decode_state(data: Mapping[str, Any]) -> dict[str, Any]:
    """``encode_state``'s inverse, for a mapping parsed from JSON (plain JSON reads as it is)."""
    return {k: decode_value(v) for k, v in data.items()}


def _untag(key: str, inner: Any) -> Any:
    if key in _LIST_TAGS and not isinstance(inner, list):
        raise TypeError(f"{key} holds a list")  # a plain dict that looks like a tag
    if key in _TEXT_TAGS and not isinstance(inner, str):
        raise TypeError(f"{key} holds a str")
    if key == "$d" and not all(isinstance(pair, list) and len(pair) == 2 for pair in inner):
        raise TypeError("$d holds [key, value] pairs")
    if key == "$b":
        return base64.b64decode(inner, validate=True)
    if key == "$t":
        return tuple(decode_value(v) for v in inner)
    if key == "$d":
        return {decode_value(k): decode_value(v) for k, v in inner}
    if key == "$s":
        return {decode_value(v) for v in inner}
    if key == "$f":
        return frozenset(decode_value(v) for v in inner)
    if key == "$i":
        return int(inner, 16)
    return base64.b64decode(inner, validate=True).decode("utf-8", "surrogatepass")  # "$u"


def readable(value: Any) -> str:
    """Python-like text of the plain value ``value`` for the model to read: ``repr`` (a dict
    with tuple keys reads ``{(1, 2): 3}``, bytes ``b'..'``, NaN ``nan``), with sets in a
    stable order and an int too long for ``str()`` as ``<int of N digits: 1234...5678>``.
    Never raises for plain data; iterative, so any depth is safe."""
    out: list[str] = []
    todo: list[Any] = [value]
    while todo:
        item = todo.pop()
        if type(item) is _Text:
            out.append(item)
            continue
        kind = type(item)
        if item is None or isinstance(item, (bool, float, str, bytes)):
            out.append(repr(item))
        elif isinstance(item, int):
            out.append(_int_text(item))
        elif isinstance(item, (list, tuple, set, frozenset, dict)):
            todo.extend(reversed(_pieces(item, kind)))
        else:
            try:
                out.append(repr(item))
            except Exception:
                out.append(f"<{type(item).__name__}>")
    return "".join(out)


class _Text(str):
    """Literal text in ``readable``'s work list (as opposed to a value to render)."""


def _pieces(item: Any, kind: type) -> list[Any]:
    """The work items of a container for ``readable``: literal text and values, in order."""
    if isinstance(item, dict):
        if not item:
            return [_Text("{}")]
        pieces: list[Any] = [_Text("{")]
        for i, (k, v) in enumerate(item.items()):
            pieces += [_Text(", ") if i else _Text(""), k, _Text(": "), v]
        return [*pieces, _Text("}")]
    items = list(item)
    if isinstance(item, (set, frozenset)):
        items.sort(key=readable)
        if not items:
            return [_Text("set()" if isinstance(item, set) else "frozenset()")]
    open_, close = "{", "}"
    if isinstance(item, list):
        open_, close = "[", "]"
    elif isinstance(item, tuple):
        open_, close = "(", ",)" if len(items) == 1 else ")"
    elif isinstance(item, frozenset):
        open_, close = "frozenset({", "})"
    pieces = [_Text(open_)]
    for i, v in enumerate(items):
        if i:
            pieces.append(_Text(", "))
        pieces.append(v)
    return [*pieces, _Text(close)]


def _int_text(value: int) -> str:
    try:
        return str(value)
    except ValueError:  # more digits than sys.get_int_max_str_digits() allows
        digits = len(f"{value:x}") * 1.2041  # log10(16) decimal digits per hex digit
        return f"<int of about {int(digits)} digits: {hex(value)[:18]}...>"
