"""The host process never crashes, whatever the script (SPEC §3: deep nesting, deep
recursion, huge allocations and long loops end as ``Raised``).

Each case runs in a child interpreter so a crash (abort, stack overflow) fails one test
instead of the whole session. Every case runs with the default limits, with
``ResourceLimits.unlimited()`` (where the case terminates without really allocating
gigabytes) and on a Python thread with a 256 KiB stack, to prove the stack policy.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

N = 100_000
NEST = f"x = []\ny = []\nfor i in range({N}):\n    x = [x]\n    y = [y]\n"
NEST_TUPLE = f"x = ()\nfor i in range({N}):\n    x = (x,)\n"
NEST_DICT = f"x = {{}}\nfor i in range({N}):\n    x = {{'k': x}}\n"

COMPLETE = "Complete"
SKIP = "skip"

# name -> (script, outcome with default limits, outcome with unlimited limits).
# An outcome is "Complete", the prefix of the Raised step's last line, or SKIP (the case
# would really allocate gigabytes without a memory cap: the host's OOM, not ours).
CASES: dict[str, tuple[str, str, str]] = {
    "nested-brackets-source": ("[" * N + "]" * N, "SyntaxError", "SyntaxError"),
    "nested-parens-source": ("(" * N + "1" + ")" * N, "SyntaxError", "SyntaxError"),
    "nested-dict-source": ("{'a': " * N + "1" + "}" * N, "SyntaxError", "SyntaxError"),
    "unary-chain-source": ("x = " + "-" * N + "1\nx", "SyntaxError", "SyntaxError"),
    "binop-chain-source": ("1" + " + 1" * N, "SyntaxError", "SyntaxError"),
    "call-chain-source": ("f" + "()" * N, "SyntaxError", "SyntaxError"),
    "lambda-chain-source": ("lambda: " * N + "1", "SyntaxError", "SyntaxError"),
    "nested-blocks-source": (
        "".join(" " * i + "if True:\n" for i in range(2000)) + " " * 2000 + "x = 1\n",
        "SyntaxError",
        "SyntaxError",
    ),
    "unbounded-recursion": ("def f(n):\n    return f(n + 1)\nf(0)", "RecursionError", "RecursionError"),
    "mutual-recursion": (
        "def a(n):\n    return b(n)\ndef b(n):\n    return a(n + 1)\na(0)",
        "RecursionError",
        "RecursionError",
    ),
    "huge-string": ("'x' * 10**10", "MemoryError", SKIP),
    "huge-list": ("[0] * 10**9", "MemoryError", SKIP),
    "huge-power": ("2 ** 10**9", "MemoryError", COMPLETE),
    "endless-loop": ("while True:\n    pass", "TimeoutError", "TimeoutError"),
    "deep-list-str": (NEST + "len(str(x))", COMPLETE, COMPLETE),
    "deep-list-eq": (NEST + "x == y", "RecursionError", "RecursionError"),
    "deep-list-json": (NEST + "import json\nlen(json.dumps(x))", "RecursionError", "RecursionError"),
    "deep-tuple-hash": (NEST_TUPLE + "hash(x)", "RecursionError", "RecursionError"),
    "deep-tuple-dict-key": (NEST_TUPLE + "d = {x: 1}\nlen(d)", "RecursionError", "RecursionError"),
    "deep-dict-str": (NEST_DICT + "len(str(x))", COMPLETE, COMPLETE),
    "deep-list-sorted": (NEST + "len(sorted([x, y]))", "RecursionError", "RecursionError"),
    "deep-list-print": (NEST + "print(x)\n1", COMPLETE, COMPLETE),
    "deep-list-dropped": (NEST + "x = None\ny = None\n1", COMPLETE, COMPLETE),
    "deep-json-loads": (
        f"import json\ns = '[' * {N} + ']' * {N}\njson.loads(s)\n1",
        "json.JSONDecodeError",
        "json.JSONDecodeError",
    ),
    "deep-list-as-tool-argument": (NEST + "call_tool('t', {'a': x})", "TypeError", "TypeError"),
    "deep-list-held-across-a-dump": (NEST + "call_tool('t')\nx == y", "RecursionError", "RecursionError"),
    "deep-list-result": (NEST + "x", "TypeError", "TypeError"),
}

CHILD = """
import json, sys, threading
from codeact import Call, MontyRuntime, Raised, ResourceLimits, ResumeValue

script, unlimited, in_thread, endless = json.loads(sys.stdin.read())
limits = ResourceLimits.unlimited() if unlimited else ResourceLimits()
if endless:
    limits = limits.model_copy(update={"max_duration": 0.5})
result = {}

def run():
    rt = MontyRuntime(limits)
    step = rt.start(script, "agent")
    dumps = 0
    while isinstance(step, Call):
        snapshot = step.call.dump()  # the whole heap goes through the serializer and back
        step = MontyRuntime().resume(snapshot, ResumeValue(None))
        dumps += 1
    result["kind"] = type(step).__name__
    result["dumps"] = dumps
    if isinstance(step, Raised):
        result["line"] = step.message.rstrip().splitlines()[-1][:200]
    else:
        v = step.value
        result["value"] = v.bit_length() if isinstance(v, int) and v > 10**100 else repr(v)[:200]

if in_thread:
    threading.stack_size(256 * 1024)
    t = threading.Thread(target=run)
    t.start()
    t.join()
else:
    run()
print(json.dumps(result))
"""


def params():
    for name, (script, default, unlimited) in CASES.items():
        yield pytest.param(script, False, False, default, id=f"{name}-default")
        if unlimited != SKIP:
            yield pytest.param(script, True, False, unlimited, id=f"{name}-unlimited")
        # On a small-stack thread, the harshest configuration the case allows.
        if unlimited != SKIP:
            yield pytest.param(script, True, True, unlimited, id=f"{name}-thread-unlimited")
        else:
            yield pytest.param(script, False, True, default, id=f"{name}-thread-default")


@pytest.mark.parametrize("script, unlimited, in_thread, outcome", list(params()))
def test_the_host_survives(script, unlimited, in_thread, outcome):
    endless = script.startswith("while True")
    child = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=json.dumps([script, unlimited, in_thread, endless]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, f"child died with {child.returncode}:\n{child.stderr[-3000:]}"
    result = json.loads(child.stdout.strip().splitlines()[-1])
    if outcome == COMPLETE:
        assert result["kind"] == "Complete", result
    else:
        assert result["kind"] == "Raised", result
        assert result["line"].startswith(outcome), result
    if "call_tool('t')" in script:
        assert result["dumps"] == 1
