"""Property-based fuzzing of the native API (hypothesis): random source text, random value
trees across the boundary, random and mutated snapshot bytes to ``resume``.

Whatever the input: a ``Call`` / ``Complete`` / ``Raised`` step or a typed codeact
exception, never a crash, never a hang beyond the time limit. Example counts are CI-sized;
``CODEACT_FUZZ_EXAMPLES`` scales them (``make fuzz`` runs thousands).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codeact import (
    Call,
    CodeRuntimeError,
    Complete,
    Gather,
    MontyRuntime,
    Raised,
    ResourceLimits,
    ResumeValue,
    SnapshotError,
    ValueConversionError,
)
from conftest import forge

EXAMPLES = int(os.environ.get("CODEACT_FUZZ_EXAMPLES", "150"))
STATS = Path(os.environ.get("CODEACT_FUZZ_STATS", "")) if os.environ.get("CODEACT_FUZZ_STATS") else None
LIMITS = ResourceLimits(max_duration=0.25, max_memory=32 * 1024 * 1024, max_recursion_depth=200)
KEY = b"fuzz-key-0123456789abcdef"
RT = MontyRuntime(LIMITS)
SIGNED = MontyRuntime(LIMITS, snapshot_key=KEY)
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False, database=None
)
_counts: dict[str, int] = {}


def count(name: str) -> None:
    _counts[name] = _counts.get(name, 0) + 1
    if STATS is not None:
        STATS.write_text(json.dumps(_counts))


def is_step(step: Any) -> bool:
    return isinstance(step, (Call, Gather, Complete, Raised))


def timed_start(rt: MontyRuntime, script: str) -> Any:
    t0 = time.perf_counter()
    step = rt.start(script, "fuzz")
    # The time limit holds (generous slack for a loaded CI machine).
    assert time.perf_counter() - t0 < 0.25 + 5.0
    return step


# ------------------------------------------------------------------ random source

TOKENS = [
    "x",
    "y",
    "f",
    "call_tool",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":",
    ",",
    ".",
    "=",
    "+",
    "*",
    "**",
    "-",
    "/",
    "//",
    "%",
    "<",
    "==",
    "not",
    "and",
    "or",
    "if",
    "else",
    "for",
    "in",
    "while",
    "def",
    "return",
    "lambda",
    "try",
    "except",
    "finally",
    "raise",
    "import",
    "json",
    "class",
    "1",
    "0",
    "10**9",
    "'s'",
    "b'b'",
    "None",
    "True",
    "\n",
    "    ",
    "\n    ",
    "range",
    "len",
    "print",
    "async",
    "await",
    "global",
    "nonlocal",
    "with",
    "as",
    "assert",
    "del",
    "yield",
    "'\\x00'",
    "f'{x}'",
    "...",
    ";",
    "#",
    "\\",
]


@FUZZ
@given(st.text(max_size=300))
def test_random_text_never_crashes(source: str) -> None:
    count("random_text")
    assert is_step(timed_start(RT, source))


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=60).map(" ".join))
def test_random_token_soup_never_crashes(source: str) -> None:
    count("token_soup")
    step = timed_start(RT, source)
    assert is_step(step)
    if isinstance(step, Call):  # resume whatever it asked for, once, from bytes
        count("token_soup_resume")
        assert is_step(RT.resume(step.call.dump(), ResumeValue(None)))
    elif isinstance(step, Gather):
        count("token_soup_gather")
        assert is_step(RT.resume_gather(step.dump(), {c.call_id: ResumeValue(None) for c in step.calls}))


# ------------------------------------------------------------------ value trees

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**300), max_value=2**300)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
# bytes keys: see test_a_bytes_dict_key_is_a_script_error_not_a_host_error (a known bug).
keys = st.none() | st.booleans() | st.integers() | st.text(max_size=10) | st.floats(allow_nan=False)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=5).map(tuple)
        | st.dictionaries(keys, children, max_size=5)
    ),
    max_leaves=40,
)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return len(a) == len(b) and all(same(ka, kb) and same(a[ka], b[kb]) for ka, kb in zip(a, b, strict=True))
    return a == b


@FUZZ
@given(values)
def test_value_trees_cross_both_ways_unchanged(value: Any) -> None:
    """host -> script (resume value) -> dump and load -> script -> host (tool argument,
    then result), unchanged: types, order, NaN, -0.0, big ints."""
    count("value_trees")
    step = RT.start('x = call_tool("give")\ny = call_tool("take", {"x": x})\n[x, y]', "fuzz")
    assert isinstance(step, Call)
    step = RT.resume(step.call.dump(), ResumeValue(value))
    assert isinstance(step, Call), step
    assert same(step.call.keyword_args["x"], value)
    done = RT.resume(step.call.dump(), ResumeValue("ok"))
    assert isinstance(done, Complete), done
    assert same(done.value[0], value)


def test_a_bytes_dict_key_crosses_the_boundary() -> None:
    # Found by hypothesis: the plain-data check accepted bytes keys but the conversion
    # refused them, aborting the run with a host error. Bytes keys are plain data: they cross.
    step = RT.start("{b'k': 1}", "fuzz")
    assert isinstance(step, Complete) and step.value == {b"k": 1}, step
    step = RT.start("call_tool('t', {'a': {b'k': 1}})", "fuzz")
    assert isinstance(step, Call) and step.call.keyword_args == {"a": {b"k": 1}}, step


class Opaque:
    pass


bad_leaves = st.sampled_from([{1j}, frozenset({Opaque()}), Opaque(), object(), len, "\udcff", bytearray(b"x"), 1j])


@FUZZ
@given(
    st.recursive(
        bad_leaves,
        lambda c: st.lists(c, min_size=1, max_size=3) | st.dictionaries(st.text(max_size=3), c, min_size=1, max_size=3),
        max_leaves=5,
    )
)
def test_values_that_cannot_cross_are_refused_by_name(value: Any) -> None:
    count("bad_values")
    step = RT.start('call_tool("give")', "fuzz")
    assert isinstance(step, Call)
    try:
        step.call.resume(ResumeValue(value))
    except ValueConversionError as exc:
        assert "cannot resume the script with this value: value" in str(exc)
    else:
        raise AssertionError("a non-plain value crossed")


# ------------------------------------------------------------------ snapshot bytes

_SNAP_SCRIPT = 'data = {"a": [1, 2.5, "s", b"b"], "n": 2**80}\nr = call_tool("t", {"k": data})\n[r, data]'


def _snapshot(rt: MontyRuntime) -> bytes:
    step = rt.start(_SNAP_SCRIPT, "fuzz")
    assert isinstance(step, Call)
    return step.call.dump()


UNSIGNED_SNAP = _snapshot(RT)
SIGNED_SNAP = _snapshot(SIGNED)


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_are_refused(data: bytes) -> None:
    count("random_snapshot_bytes")
    for rt in (RT, SIGNED):
        try:
            rt.resume(data, ResumeValue(1))
        except SnapshotError:
            pass
        else:
            raise AssertionError("random bytes loaded")


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        if op == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            del b[rng.randrange(len(b)) :]
        elif op == 2:
            pos = rng.randrange(len(b) + 1)
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif b:
            b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


@FUZZ
@given(st.integers(min_value=0, max_value=2**32))
def test_mutated_snapshots_are_refused_or_load_unchanged(seed: int) -> None:
    """Signed: any change is refused. Unsigned: any change without recomputing the SHA-256
    is refused (a forgery that recomputes it is the documented limit, fuzzed under
    ``isolation="process"`` below)."""
    rng = random.Random(seed)
    for rt, snap in ((SIGNED, SIGNED_SNAP), (RT, UNSIGNED_SNAP)):
        count("mutated_snapshots")
        data = mutate(snap, rng)
        if data == snap:
            continue
        try:
            rt.resume(data, ResumeValue(1))
        except SnapshotError:
            pass
        else:
            raise AssertionError("altered snapshot bytes loaded")


PROCESS_RT = MontyRuntime(LIMITS, isolation="process")


@settings(FUZZ, max_examples=max(20, EXAMPLES // 3))
@given(st.integers(min_value=0, max_value=2**32))
def test_forged_unsigned_snapshots_are_contained_by_process_isolation(seed: int) -> None:
    count("forged_snapshots_process")
    forged = forge(UNSIGNED_SNAP, lambda payload: mutate(payload, random.Random(seed)))
    try:
        step = PROCESS_RT.resume(forged, ResumeValue(1))
    except CodeRuntimeError:
        return
    assert is_step(step)
