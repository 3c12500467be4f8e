"""The native quick verdict on a value (``codeact._monty.plain_json``, ``rust/src/plain.rs``;
issue 21) against the Python checks it stands in front of: it says yes only where
``problem`` accepts the value and ``_json_native`` finds its JSON form exact, and it does say
yes for plain data of exact JSON types (else the quick verdict would never answer)."""

from __future__ import annotations

import math
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
import pydantic_core  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from codeact import _values  # noqa: E402
from codeact._values import MAX_DEPTH, plain_json  # noqa: E402
from codeact.turns import _codec as _protocol  # noqa: E402


class Text(str):
    pass


class Number(int):
    pass


class Items(list):  # type: ignore[type-arg]
    pass


class Mapping(dict):  # type: ignore[type-arg]
    pass


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.sampled_from(["\ud800", "a\udfffb", "é", "\x00"]),  # lone surrogates, non-ASCII, a NUL
    st.binary(max_size=3),
    st.builds(Text, st.text(max_size=3)),
    st.builds(Number, st.integers(-5, 5)),
    st.sampled_from([object(), 1j, range(2)]),
)
_KEYS = st.one_of(st.text(max_size=4), st.sampled_from(["\udc80", "$t"]), st.integers(-3, 3), st.booleans(), st.none())
_VALUES = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_KEYS, children, max_size=4),
        st.tuples(children, children),
        st.frozensets(st.integers(0, 5), max_size=3),
        st.builds(Items, st.lists(children, max_size=2)),
        st.builds(Mapping, st.dictionaries(st.text(max_size=2), children, max_size=2)),
    ),
    max_leaves=12,
)

_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63) + 1, 2**63 - 1),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=15,
)


def _python_verdicts(value: Any, lone_surrogates: bool, digits: int | None, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both Python checks without the native shortcut."""
    with monkeypatch.context() as m:
        m.setattr(_values, "plain_json", lambda *args: False)
        m.setattr(_protocol, "plain_json", lambda *args: False)
        if _values.problem(value, lone_surrogates=lone_surrogates, max_int_digits=digits) is not None:
            return False
        return _protocol._json_native(value)


@settings(max_examples=600, deadline=None)
@given(_VALUES, st.booleans(), st.sampled_from([None, 1, 4, 18, 19, 4300]))
def test_a_yes_is_a_yes_of_both_python_checks(value: Any, lone_surrogates: bool, digits: int | None) -> None:
    if plain_json(value, lone_surrogates, digits):
        with pytest.MonkeyPatch.context() as monkeypatch:
            assert _python_verdicts(value, lone_surrogates, digits, monkeypatch), value


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_plain_json_data_of_exact_types_gets_a_yes(value: Any) -> None:
    assert plain_json(value, True, 4300)
    assert plain_json(value, False, None) == all(
        _no_surrogates(s) for s in _strings(value)
    )  # lone surrogates are refused only when asked


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    return []


def _no_surrogates(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_the_edges_go_to_the_python_check() -> None:
    deep: Any = 1
    for _ in range(MAX_DEPTH):
        deep = [deep]
    assert plain_json(deep, True)  # MAX_DEPTH containers: still plain
    assert not plain_json([deep], True)  # one more: the Python check names the depth
    cycle: list[Any] = []
    cycle.append(cycle)
    assert not plain_json(cycle, True)  # a cycle ends at the depth bound, never loops
    assert not plain_json(2**63, True) and plain_json(2**63 - 1, True)  # past 64 bits: Python's int rules
    assert plain_json(9999, True, 4) and not plain_json(10000, True, 4) and not plain_json(-10000, True, 4)
    assert not plain_json({1: 2}, True)  # a non-str key is tagged in the journal
    assert not plain_json((1, 2), True) and not plain_json(b"x", True) and not plain_json({1}, True)
    assert not plain_json(Text("a"), True) and not plain_json(Mapping(a=1), True)
    assert plain_json({"a": "\ud800"}, True) and not plain_json({"a": "\ud800"}, False)
    assert plain_json(math.nan, False) and plain_json(None, False)
    # A digit bound that is no non-negative 32-bit int is left to the Python check, no error.
    for bound in (-1, 2**32, 4300.0, True):
        assert not plain_json([5], True, bound)  # type: ignore[arg-type]


def test_the_digest_of_arguments_is_the_one_the_python_checks_give(monkeypatch: pytest.MonkeyPatch) -> None:
    """A journal written before the native verdict replays after it: same digests, same
    outcome bytes."""
    values = [{"x": 1}, {"q": "é", "n": [1.5, None, True]}, {"t": (1, 2)}, {"k": {1: "a"}}, {"b": b"\x00"}]
    quick = [(_protocol.args_digest(v), _protocol.encode_outcome(_protocol.ResumeValue(v))) for v in values]
    monkeypatch.setattr(_protocol, "plain_json", lambda *args: False)
    monkeypatch.setattr(_values, "plain_json", lambda *args: False)
    slow = [(_protocol.args_digest(v), _protocol.encode_outcome(_protocol.ResumeValue(v))) for v in values]
    assert quick == slow


def _digest_or_none(args: dict[str, Any]) -> str | None:
    """What the call path did before ``plain_args_digest``: ``value_problem``, then
    ``args_digest``."""
    if _protocol.value_problem(args, "") is not None:
        return None
    try:
        return _protocol.args_digest(args)
    except (ValueError, TypeError, pydantic_core.PydanticSerializationError):
        return None


def test_the_short_paths_one_walk_digest_is_the_two_checks_digest() -> None:
    """``plain_args_digest`` (one native walk) gives the digest ``value_problem`` then
    ``args_digest`` give, and None exactly where either refuses."""
    values: list[dict[str, Any]] = [
        {"x": 1},
        {"q": "é", "n": [1.5, None, True]},
        {"t": (1, 2)},
        {"k": {1: "a"}},
        {"b": b"\x00"},
        {"s": "\ud800"},  # a lone surrogate: let through (escaped before it is journaled)
        {"big": 10**5000},  # past MAX_INT_DIGITS: refused
        {"wide": 2**70},  # past 64 bits, within the digit bound: the Python checks decide
        {"o": object()},  # not plain: refused
        {"long": "y" * (_protocol.MAX_VALUE_BYTES + 1)},  # past MAX_VALUE_BYTES: no digest
        {"nan": math.nan},
        {},
    ]
    results = [_protocol.plain_args_digest(v) for v in values]
    assert results == [_digest_or_none(v) for v in values]
    assert results[0] is not None and results[6] is None and results[8] is None and results[9] is None


def _pydantic_digest(value: Any) -> str:
    """``args_digest``'s hash of ``pydantic_core.to_json``'s bytes (``_protocol._digest``)."""
    return _protocol._digest(pydantic_core.to_json(value, inf_nan_mode="constants"))


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    return False


_CONTROL = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x9F), max_size=8)


@settings(max_examples=500, deadline=None)
@given(
    st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-(2**63), 2**63 - 1),
            st.text(max_size=6),
            _CONTROL,  # every control character, DEL and the C1 range: serde_json's escapes
            st.floats(allow_nan=True, allow_infinity=True),
        ),
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.one_of(st.text(max_size=4), _CONTROL), children, max_size=4),
        ),
        max_leaves=15,
    )
)
def test_the_native_digest_is_pydantics_json_hashed(value: Any) -> None:
    """``plain_json_digest`` writes pydantic_core's JSON byte for byte (so a journal written
    before it replays after it) and answers for every float-free JSON value; a float is left
    to the Python path."""
    digest = _values.plain_json_digest(value, _protocol.MAX_INT_DIGITS, _protocol.MAX_VALUE_BYTES)
    if not all(_no_surrogates(s) for s in _strings(value)):
        assert digest is None
    elif _has_float(value):
        assert digest == ""  # plain: pydantic writes the float's text, hashed in Python
    else:
        assert digest == _pydantic_digest(value), value
    if isinstance(value, dict):
        assert _protocol.plain_args_digest(value) == _digest_or_none(value)


def test_the_native_digest_leaves_every_edge_to_the_python_path() -> None:
    digest = _values.plain_json_digest
    assert digest({"x": 1}, 4300, 100) == _pydantic_digest({"x": 1}) == _protocol.args_digest({"x": 1})
    assert digest({"x": 1}, 4300, 6) is None and digest({"x": 1}, 4300, 7) is not None  # `{"x":1}` is 7 bytes
    assert digest({"s": "\ud800"}, 4300, 100) is None  # a lone surrogate has no JSON form
    assert digest({"w": 2**63}, 4300, 100) is None  # past 64 bits
    assert digest({"n": 10000}, 4, 100) is None and digest({"n": 9999}, 4, 100) is not None
    assert digest({"t": (1,)}, 4300, 100) is None and digest({1: 2}, 4300, 100) is None
    assert digest({"b": b"x"}, 4300, 100) is None and digest(Mapping(a=1), 4300, 100) is None
    assert digest({"a": Text("x")}, 4300, 100) is None and digest({"a": Number(1)}, 4300, 100) is None
    assert digest({"f": 1.0}, 4300, 100) == ""  # plain, but a float's text is pydantic's to write
    assert digest({"f": 1.0, "t": (1,)}, 4300, 100) is None  # not plain after the float: checked on
    assert digest([1.0, [math.nan, {"s": "\ud800"}]], 4300, 100) is None
    for bound in (-1, 2**32, 4300.0, True):  # no non-negative 32-bit int: the Python path
        assert digest({"x": 1}, bound, 100) is None  # type: ignore[arg-type]
    for limit in (-1, 2**64, 1.5, None, "7", True):  # never raises, whatever it is given
        assert digest({"x": 1}, 4300, limit) is None  # type: ignore[arg-type]
    deep: Any = 1
    for _ in range(MAX_DEPTH):
        deep = [deep]
    assert digest(deep, 4300, 10_000) == _pydantic_digest(deep)
    assert digest([deep], 4300, 10_000) is None  # one level more: the Python check names the depth
    cycle: list[Any] = []
    cycle.append(cycle)
    assert digest(cycle, 4300, 10_000) is None
