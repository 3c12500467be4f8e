"""Helper of ``load.py``: the smolagents column, run in smolagents' own venv (stdlib +
smolagents only; see ``_peers.py``).

For each level N of ``--levels``: N ``CodeAgent`` runs at once in a thread pool of N threads,
each agent over its own scripted model whose one reply is a ``--calls``-call loop over one tool
(``inc``), ending in ``final_answer``. The agents and models are made before the clock starts
(a ``CodeAgent`` holds one run's memory: one per session); the clock covers submitting every
run to the pool until the last one returns. CPU time is this process's (every thread's) user +
system time over the same span (``resource.getrusage``). One warm-up run at level 1 first.

Prints one JSON line: ``version`` and, per level, the best (``--median``: the medians) of
``--repeats`` rounds of ``wall_s`` and ``cpu_s``, and the ``calls`` made.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import smolagents
from smolagents import CodeAgent, Tool
from smolagents.models import ChatMessage, MessageRole, Model
from smolagents.monitoring import LogLevel


class Inc(Tool):
    name = "inc"
    description = "Adds one."
    inputs = {"x": {"type": "integer", "description": "a number"}}
    output_type = "integer"

    def forward(self, x: int) -> int:  # type: ignore[override]
        return x + 1


class Scripted(Model):
    """Replies with one fixed message."""

    def __init__(self, reply: ChatMessage) -> None:
        super().__init__(model_id="scripted")
        self.reply = reply

    def generate(self, messages: Any, stop_sequences: Any = None, **kwargs: Any) -> ChatMessage:  # type: ignore[override]
        return self.reply


def reply(calls: int) -> ChatMessage:
    code = f"total = 0\nfor i in range({calls}):\n    total += inc(x=i)\nfinal_answer(total)"
    return ChatMessage(role=MessageRole.ASSISTANT, content=f"Thought: go\n<code>\n{code}\n</code>")


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def level(sessions: int, calls: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``sessions`` runs at once in a pool of as many threads."""
    message = reply(calls)
    agents = [
        CodeAgent(tools=[Inc()], model=Scripted(message), verbosity_level=LogLevel.OFF, max_steps=3)
        for _ in range(sessions)
    ]
    expected = sum(range(1, calls + 1))
    with ThreadPoolExecutor(max_workers=sessions) as pool:
        c0, t0 = cpu_s(), time.perf_counter()
        results = list(pool.map(lambda agent: agent.run("go"), agents))
        wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    assert results == [expected] * sessions, results[:3]
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1,16,128")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--median", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    level(1, args.calls)  # warm-up, not counted
    out: dict[str, Any] = {"version": smolagents.__version__, "levels": {}}
    for n in (int(x) for x in args.levels.split(",")):
        rounds = [level(n, args.calls) for _ in range(args.repeats)]
        pick = statistics.median if args.median else min
        out["levels"][str(n)] = {
            "wall_s": pick(r[0] for r in rounds),
            "cpu_s": pick(r[1] for r in rounds),
            "calls": n * args.calls,
        }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
