"""Coverage-guided fuzzing of the Python API with atheris (libFuzzer).

Each input is split by its first byte into one of three targets:
- ``0``: the rest is a script (UTF-8, errors replaced), started and driven to its end,
  every tool call answered from the input, half of them through snapshot bytes;
- ``1``: the rest mutates a signed snapshot, which must then be refused;
- ``2``: the rest is decoded into a value tree resumed into a script and read back.

Only the Python layer is instrumented (stable Rust here: no sanitizer build of the native
core), so guidance comes from the wrapper and the conversions; crashes anywhere still stop
the campaign. Run: ``python fuzz/atheris_harness.py fuzz/corpus -max_total_time=60``
(``make fuzz``). The committed seed corpus is ``fuzz/corpus``.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from codeact import (
        Call,
        Complete,
        Gather,
        MontyRuntime,
        Raised,
        ResourceLimits,
        ResumeValue,
        SnapshotError,
        ValueConversionError,
    )

LIMITS = ResourceLimits(max_duration=0.2, max_memory=32 * 1024 * 1024, max_recursion_depth=200)
KEY = b"atheris-key-0123456789"
RT = MontyRuntime(LIMITS)
SIGNED = MontyRuntime(LIMITS, snapshot_key=KEY)
_step = SIGNED.start('d = {"a": [1, 2.5, "s"]}\nr = call_tool("t", {"k": d})\n[r, d]', "fuzz")
assert isinstance(_step, Call)
SIGNED_SNAP = _step.call.dump()


def value_from(fdp: atheris.FuzzedDataProvider, depth: int = 0) -> object:
    kind = fdp.ConsumeIntInRange(0, 9 if depth < 6 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return fdp.ConsumeBool()
    if kind == 2:
        return fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 64))
    if kind == 3:
        return fdp.ConsumeRegularFloat() if fdp.ConsumeBool() else fdp.ConsumeFloat()
    if kind == 4:
        return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 20))
    if kind == 5:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 20))
    if kind == 6:
        return fdp.ConsumeUnicode(3)  # may hold lone surrogates: must be refused by name
    n = fdp.ConsumeIntInRange(0, 4)
    items = [value_from(fdp, depth + 1) for _ in range(n)]
    if kind == 7:
        return items
    if kind == 8:
        return tuple(items)
    return {fdp.ConsumeUnicodeNoSurrogates(4): v for v in items}


def drive(script: str, fdp: atheris.FuzzedDataProvider) -> None:
    step = RT.start(script, "fuzz")
    for n in range(50):
        if isinstance(step, Gather):
            outcomes = {c.call_id: ResumeValue(value_from(fdp)) for c in step.calls}
            try:
                step = RT.resume_gather(step.dump(), outcomes) if n % 2 else step.resume(outcomes)
            except ValueConversionError:
                return
            continue
        if not isinstance(step, Call):
            break
        value = value_from(fdp)
        try:
            step = RT.resume(step.call.dump(), ResumeValue(value)) if n % 2 else step.call.resume(ResumeValue(value))
        except ValueConversionError:
            return
    assert isinstance(step, (Call, Gather, Complete, Raised))


def test_one_input(data: bytes) -> None:
    if not data:
        return
    target, rest = data[0] % 3, data[1:]
    fdp = atheris.FuzzedDataProvider(rest)
    if target == 0:
        split = fdp.ConsumeIntInRange(0, len(rest))
        drive(rest[:split].decode("utf-8", "replace"), atheris.FuzzedDataProvider(rest[split:]))
    elif target == 1:
        snap = bytearray(SIGNED_SNAP)
        while fdp.remaining_bytes() >= 2:
            snap[fdp.ConsumeIntInRange(0, len(snap) - 1)] = fdp.ConsumeIntInRange(0, 255)
        if bytes(snap) != SIGNED_SNAP:
            try:
                SIGNED.resume(bytes(snap), ResumeValue(1))
            except SnapshotError:
                return
            raise AssertionError("an altered signed snapshot loaded")
    else:
        value = value_from(fdp)
        step = RT.start('x = call_tool("give")\nx', "fuzz")
        assert isinstance(step, Call)
        try:
            step.call.resume(ResumeValue(value))
        except ValueConversionError:
            pass


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
