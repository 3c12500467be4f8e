"""Plain data defined once (``codeact._values``): the Python check gives the native
conversion's verdict, with the same text, on the fuzz corpus's values and on generated and
edge-case values; every layer reads the one depth limit."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pydantic_core
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codeact import MontyRuntime, ResumeValue, ValueConversionError, _monty
from codeact._values import MAX_DEPTH, in_script_check, problem, to_plain
from codeact.agent import _protocol

ROOT = Path(__file__).resolve().parent.parent
RT = MontyRuntime()
PROCESS_RT = MontyRuntime(isolation="process")
PREFIX = "cannot resume the script with this value: "


def native_verdict(value: Any, rt: MontyRuntime = RT) -> str | None:
    """None when the native conversion lets ``value`` into a script, else its reason."""
    step = rt.start("call_tool('give')", "values")
    try:
        step.call.resume(ResumeValue(value))  # type: ignore[union-attr]
    except ValueConversionError as exc:
        text = str(exc)
        assert text.startswith(PREFIX), text
        return text[len(PREFIX) :]
    return None


def nested(depth: int, leaf: Any = 1, kind: type = list) -> Any:
    value = leaf
    for _ in range(depth):
        value = kind([value]) if kind is not dict else {"k": value}
    return value


class Opaque:
    pass


class Name(str):
    def __str__(self) -> str:
        return "not me"


EDGES = {
    "none": None,
    "big-int": 2**300,
    "nan": float("nan"),
    "set": {1, 2, 3},
    "frozenset-of-tuples": frozenset({(1, "a"), (2, "b")}),
    "set-of-frozensets": {frozenset({1}), frozenset()},
    "frozenset-key": {frozenset({1, 2}): "x", (1, 2): "y", 3: b"z"},
    "str-subclass": [Name("a")],
    "bool-and-int": [True, 1, False, 0],
    "at-the-limit": nested(MAX_DEPTH),
    "empty-list-at-the-limit-plus-one": nested(MAX_DEPTH, leaf=[]),
    "one-past-the-limit": nested(MAX_DEPTH + 1),
    "dicts-past-the-limit": nested(MAX_DEPTH + 1, kind=dict),
    "tuples-past-the-limit": nested(MAX_DEPTH + 1, kind=tuple),
    "deep-frozensets": nested(MAX_DEPTH + 1, kind=frozenset),
    "lone-surrogate": {"a": ["ok", "\udcff"]},
    "complex": 1j,
    "object-in-a-set": {"rows": [1, {Opaque()}]},
    "function": {"f": len},
    "bytearray": bytearray(b"x"),
    "second-of-two-bad": [1, Opaque(), 2j],
}


def cycle() -> list[Any]:
    x: list[Any] = []
    x.append(x)
    return x


@pytest.mark.parametrize("name", EDGES)
def test_edge_values_get_the_native_verdict_and_text(name: str) -> None:
    value = EDGES[name]
    assert problem(value) == native_verdict(value)


def test_a_cycle_is_refused_as_too_deep_on_both_sides() -> None:
    value = cycle()
    assert problem(value) == native_verdict(value)
    assert problem(value).endswith(f"nests deeper than {MAX_DEPTH} levels")  # type: ignore[union-attr]


def test_the_process_isolation_check_gives_the_same_verdicts() -> None:
    for name, value in EDGES.items():
        assert native_verdict(value, PROCESS_RT) == native_verdict(value), name


def corpus_values() -> list[Any]:
    """The value trees the atheris harness decodes from each seed of ``fuzz/corpus``."""
    atheris = pytest.importorskip("atheris")
    sys.path.insert(0, str(ROOT / "fuzz"))
    try:
        from atheris_harness import value_from
    finally:
        sys.path.pop(0)
    values = []
    for seed in sorted((ROOT / "fuzz" / "corpus").iterdir()):
        fdp = atheris.FuzzedDataProvider(seed.read_bytes()[1:])
        for _ in range(20):
            values.append(value_from(fdp))
            if fdp.remaining_bytes() == 0:
                break
    return values


def test_the_fuzz_corpus_values_get_the_native_verdicts() -> None:
    values = corpus_values()
    assert len(values) >= 22
    for value in values:
        assert problem(value) == native_verdict(value), repr(value)[:200]


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
hashables = st.recursive(scalars, lambda c: st.tuples(c, c) | st.frozensets(c, max_size=3), max_leaves=6)
bad = st.sampled_from([1j, Opaque(), len, bytearray(b"x"), "\udcff", object()])
trees = st.recursive(
    scalars | bad,
    lambda c: (
        st.lists(c, max_size=4)
        | st.lists(c, max_size=4).map(tuple)
        | st.dictionaries(hashables, c, max_size=4)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(trees)
def test_generated_values_get_the_native_verdicts(value: Any) -> None:
    assert problem(value) == native_verdict(value)


def test_every_layer_reads_the_native_depth_limit() -> None:
    assert MAX_DEPTH == _monty.MAX_VALUE_DEPTH == _protocol.MAX_VALUE_DEPTH
    assert f"depth > {_monty.MAX_VALUE_DEPTH}:" in in_script_check("f")
    # No layer keeps a limit of its own any more.
    sources = [p.read_text() for p in (ROOT / "python" / "codeact").rglob("*.py") if p.name != "_values.py"]
    for limit in (50, 64, 200):
        assert not any(f"depth > {limit}" in s for s in sources), limit


@pytest.mark.parametrize("name", [n for n in EDGES if n not in ("lone-surrogate",)])
def test_the_in_script_check_agrees_with_problem_under_cpython_and_monty(name: str) -> None:
    value = EDGES[name]
    namespace: dict[str, Any] = {}
    exec(in_script_check("plain"), namespace)
    assert namespace["plain"](value) == (problem(value) is None)
    if problem(value) is None:  # the same check, run by the sandbox on the value it was given
        step = RT.start(in_script_check("plain") + "\nplain(call_tool('give'))", "values")
        done = step.call.resume(ResumeValue(value))  # type: ignore[union-attr]
        assert done.value is True, done  # type: ignore[union-attr]


def test_to_plain_keeps_plain_values_and_converts_the_rest() -> None:
    import dataclasses
    import datetime
    import enum

    import pydantic

    class Colour(enum.Enum):
        RED = "red"

    @dataclasses.dataclass
    class Point:
        x: int
        tags: frozenset[str]

    class Row(pydantic.BaseModel):
        when: datetime.date
        data: bytes

    value = {
        "set": {1, 2},
        "tuple": (1, b"x"),
        (1, 2): "tuple key",
        "enum": Colour.RED,
        "point": Point(1, frozenset({"a"})),
        "row": Row(when=datetime.date(2026, 1, 2), data=b"\x00"),
    }
    out = to_plain(value)
    assert out == {
        "set": {1, 2},
        "tuple": (1, b"x"),
        (1, 2): "tuple key",
        "enum": "red",
        "point": {"x": 1, "tags": frozenset({"a"})},
        "row": {"when": "2026-01-02", "data": b"\x00"},
    }
    assert problem(out) is None
    assert to_plain(Opaque) is Opaque  # no plain form: left for problem() to name
    assert problem(to_plain(Opaque)) is not None


def test_the_journal_refuses_a_tagged_form_it_could_not_read_back() -> None:
    ok = nested(MAX_DEPTH, kind=list)
    assert _protocol.decode_outcome(pydantic_core.from_json(_protocol.encode_outcome(ResumeValue(ok))))
    deep_tuples = nested(MAX_DEPTH, kind=tuple)
    assert problem(deep_tuples) is None
    with pytest.raises(ValueError, match=r"nests deeper than [0-9]+ levels"):
        _protocol.encode_outcome(ResumeValue(deep_tuples))
    assert "cannot be encoded" in (_protocol.plain_value_problem(deep_tuples, "the value") or "")
