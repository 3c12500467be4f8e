"""A restored continuation or namespace session runs under the limits of the runtime that
restores it, tightened: the stricter of those and the limits stored with it apply (Monty's
``ResourceTracker.tighten_limits``), so lowering ``max_memory`` reaches paused scripts too."""

from __future__ import annotations

from codeact import MontyRuntime, ResourceLimits, ResumeValue
from codeact.runtime import Call, Complete, Raised

MiB = 1024 * 1024
PAUSED = f'held = "y" * (3 * {MiB})\nx = call_tool("t", {{}})\nmore = "z" * (4 * {MiB})\nx'


def _paused_bytes() -> bytes:
    step = MontyRuntime(ResourceLimits(max_memory=20 * MiB)).start(PAUSED)
    assert type(step) is Call, step
    return step.call.dump()


def test_a_lower_cap_applies_to_a_resumed_script() -> None:
    step = MontyRuntime(ResourceLimits(max_memory=5 * MiB)).resume(_paused_bytes(), ResumeValue(1))
    assert type(step) is Raised and "MemoryError" in step.message, step


def test_the_same_cap_lets_the_resumed_script_finish() -> None:
    step = MontyRuntime(ResourceLimits(max_memory=20 * MiB)).resume(_paused_bytes(), ResumeValue(1))
    assert type(step) is Complete and step.value == 1, step


def test_a_lower_cap_applies_to_a_loaded_namespace_session() -> None:
    session = MontyRuntime(ResourceLimits(max_memory=20 * MiB)).start_session()
    assert type(session.feed(f'held = "y" * (12 * {MiB})')) is Complete
    data = session.dump()
    small = MontyRuntime(ResourceLimits(max_memory=5 * MiB)).load_session(data).feed(f'more = "z" * (1 * {MiB})')
    assert type(small) is Raised and "MemoryError" in small.message, small
    same = MontyRuntime(ResourceLimits(max_memory=20 * MiB)).load_session(data).feed(f'more = "z" * (1 * {MiB})\n1')
    assert type(same) is Complete, same
