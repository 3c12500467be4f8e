"""Helper of ``agent.py``: the smolagents peer column, run in a child process whose path has
smolagents (``agent.py --smolagents-site DIR`` or ``--smolagents-python PATH``), so codeact's
environment never needs it.

Measures, with an offline scripted model (no network, no token counting):

* ``code_per_call_us``: a ``CodeAgent`` tool call (smolagents' local Python executor, no
  journal, nothing recorded per call): the slope between a 1-call and a 501-call script;
* ``code_marginal_turn_ms`` / ``tool_calling_marginal_turn_ms``: one more model turn of a
  ``CodeAgent`` (one code step calling the tool once) and of a ``ToolCallingAgent`` (one tool
  call per step): the slope between a 2-turn and a 12-turn run.

Prints one JSON line with those figures and ``version``.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from typing import Any

import smolagents
from smolagents import CodeAgent, Tool, ToolCallingAgent
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model
from smolagents.monitoring import LogLevel


class Inc(Tool):
    name = "inc"
    description = "Adds one."
    inputs = {"x": {"type": "integer", "description": "a number"}}
    output_type = "integer"

    def forward(self, x: int) -> int:  # type: ignore[override]
        return x + 1


class Scripted(Model):
    """Replies from a list, one per model call (restarted by ``reset``)."""

    def __init__(self, replies: list[ChatMessage]) -> None:
        super().__init__(model_id="scripted")
        self.replies = replies
        self.at = 0

    def reset(self) -> None:
        self.at = 0

    def generate(self, messages: Any, stop_sequences: Any = None, **kwargs: Any) -> ChatMessage:  # type: ignore[override]
        reply = self.replies[self.at]
        self.at += 1
        return reply


def code_reply(calls: int, final: bool) -> ChatMessage:
    body = "".join(f"v{i} = inc(x={i})\n" for i in range(calls))
    end = "final_answer(v0)" if final and calls else ("final_answer(0)" if final else "print(v0)")
    text = f"Thought: go\n<code>\n{body}{end}\n</code>"
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def tool_reply(name: str, args: dict[str, Any], i: int) -> ChatMessage:
    call = ChatMessageToolCall(
        function=ChatMessageToolCallFunction(name=name, arguments=args), id=f"c{i}", type="function"
    )
    return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])


def slope(small: tuple[Any, Scripted], big: tuple[Any, Scripted], steps: int, repeats: int) -> float:
    """Median over ``repeats`` alternating pairs of (one ``big`` run - one ``small`` run) / ``steps``,
    in seconds (after one warm-up of each)."""
    samples = []
    for i in range(repeats + 1):
        pair = []
        for agent, model in (small, big):
            model.reset()
            t0 = time.perf_counter()
            agent.run("go", reset=True)
            pair.append(time.perf_counter() - t0)
        if i:
            samples.append((pair[1] - pair[0]) / steps)
    return statistics.median(samples)


def code_agent(replies: list[ChatMessage]) -> tuple[Any, Scripted]:
    model = Scripted(replies)
    agent = CodeAgent(tools=[Inc()], model=model, verbosity_level=LogLevel.OFF, max_steps=1000)
    return agent, model


def tool_agent(replies: list[ChatMessage]) -> tuple[Any, Scripted]:
    model = Scripted(replies)
    agent = ToolCallingAgent(tools=[Inc()], model=model, verbosity_level=LogLevel.OFF, max_steps=1000)
    return agent, model


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    repeats = 5 if args.quick else 31
    many, turns = 501, 12
    out: dict[str, Any] = {"version": smolagents.__version__}

    out["code_per_call_us"] = (
        slope(code_agent([code_reply(1, True)]), code_agent([code_reply(many, True)]), many - 1, repeats) * 1e6
    )

    def code_turns(n: int) -> list[ChatMessage]:
        return [code_reply(1, False) for _ in range(n - 1)] + [code_reply(1, True)]

    def tool_turns(n: int) -> list[ChatMessage]:
        steps = [tool_reply("inc", {"x": i}, i) for i in range(n - 1)]
        return [*steps, tool_reply("final_answer", {"answer": "done"}, n)]

    out["code_marginal_turn_ms"] = (
        slope(code_agent(code_turns(2)), code_agent(code_turns(turns)), turns - 2, repeats) * 1e3
    )
    out["tool_calling_marginal_turn_ms"] = (
        slope(tool_agent(tool_turns(2)), tool_agent(tool_turns(turns)), turns - 2, repeats) * 1e3
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
