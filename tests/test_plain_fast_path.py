"""``problem``'s fast path for exact plain data (``_values._exact_plain``) never changes a
verdict or a message: on generated values (subclasses, non-ASCII and lone-surrogate strings,
huge ints, odd keys, deep nesting, objects) it gives what the walk alone gives."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codeact import _values
from codeact._values import MAX_DEPTH, problem


class Text(str):
    pass


class Number(int):
    pass


class Mapping(dict):  # type: ignore[type-arg]
    pass


class Opaque:
    pass


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.just(10**40),
    st.floats(allow_nan=False),
    st.binary(max_size=4),
    st.text(max_size=4),
    st.sampled_from(["\ud800", "é", "ascii"]),
    st.builds(Text, st.text(max_size=3)),
    st.builds(Number, st.integers(-5, 5)),
    st.builds(Opaque),
)
keys = st.one_of(st.text(max_size=3), st.integers(-3, 3), st.none(), st.booleans(), st.just((1, 2)), st.just("\ud800"))


def _values_tree() -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.lists(inner, max_size=3).map(tuple),
            st.dictionaries(keys, inner, max_size=4),
            st.dictionaries(keys, inner, max_size=2).map(Mapping),
            st.frozensets(st.one_of(st.integers(-3, 3), st.text(max_size=2)), max_size=3),
            st.sets(st.integers(-3, 3), max_size=3),
        ),
        max_leaves=25,
    )


def _walk_only(value: Any, **options: Any) -> str | None:
    real = _values._exact_plain
    _values._exact_plain = lambda *args: False  # type: ignore[assignment]
    try:
        return problem(value, "value", **options)
    finally:
        _values._exact_plain = real


@settings(max_examples=1500, deadline=None)
@given(_values_tree(), st.booleans(), st.sampled_from([None, 20, 4300]))
def test_the_fast_path_gives_the_walks_verdict_and_message(value: Any, lone: bool, digits: int | None) -> None:
    options = {"lone_surrogates": lone, "max_int_digits": digits}
    assert problem(value, "value", **options) == _walk_only(value, **options)


@pytest.mark.parametrize("depth", [MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2])
def test_the_depth_limit_edges_agree(depth: int) -> None:
    for leaf in ([], {}, 1, "x"):
        value: Any = leaf
        for i in range(depth):
            value = [value] if i % 2 else {"k": value}
        assert problem(value) == _walk_only(value)


def test_a_cycle_is_left_to_the_walk() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert problem(cycle) == _walk_only(cycle) is not None
