"""One peer's column of ``latency.py``, run in that peer's own venv (stdlib + the peer only).

Usage: ``python _latency_peers.py {pydantic_ai,smolagents,adk} --first-token 0.4 --rates 30,60
--repeat 5 --chars-per-token 4``; prints one JSON line: rate -> model_first_ms, visible_ms,
gap_ms (medians).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

REPLY = (
    "I will compute the totals step by step.\n```python\n"
    + "".join(f"total_{i} = {i} * {i} + {i}\n" for i in range(38))
    + "final_answer(total_37)\n```"
)


class Pace:
    """The fake streaming model's clock: yields (delay, token) and records the first send."""

    def __init__(self, first: float, rate: int, chars: int) -> None:
        self.first, self.rate, self.chars = first, rate, chars
        self.first_sent: float | None = None

    def tokens(self) -> list[str]:
        return [REPLY[i : i + self.chars] for i in range(0, len(REPLY), self.chars)]

    async def astream(self) -> Any:
        start = time.perf_counter()
        for i, token in enumerate(self.tokens()):
            due = start + self.first + i / self.rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            if self.first_sent is None:
                self.first_sent = time.perf_counter()
            yield token

    def stream(self) -> Any:
        start = time.perf_counter()
        for i, token in enumerate(self.tokens()):
            due = start + self.first + i / self.rate
            time.sleep(max(0.0, due - time.perf_counter()))
            if self.first_sent is None:
                self.first_sent = time.perf_counter()
            yield token


async def pydantic_ai_once(pace: Pace) -> tuple[float, float]:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    async def stream(messages: Any, info: Any) -> Any:
        async for token in pace.astream():
            yield token

    def whole(messages: Any, info: Any) -> Any:
        raise AssertionError("streamed only")

    capabilities: list[Any] = []
    try:  # pydantic-ai-harness's code mode, when installed
        from pydantic_ai_harness import CodeMode  # type: ignore[import-not-found]

        capabilities.append(CodeMode())
    except Exception:
        pass
    kwargs: dict[str, Any] = {"capabilities": capabilities} if capabilities else {}
    agent = Agent(FunctionModel(whole, stream_function=stream), **kwargs)
    start = time.perf_counter()
    seen = None
    async with agent.run_stream("go") as result:
        async for text in result.stream_text(delta=True):
            if seen is None and text:
                seen = time.perf_counter()
    assert seen is not None and pace.first_sent is not None
    return (pace.first_sent - start) * 1000, (seen - start) * 1000


def smolagents_once(pace: Pace) -> tuple[float, float]:
    from smolagents import CodeAgent
    from smolagents.models import ChatMessage, ChatMessageStreamDelta, Model

    class Fake(Model):
        def generate(self, messages: Any, **kwargs: Any) -> Any:
            return ChatMessage(role="assistant", content=REPLY)

        def generate_stream(self, messages: Any, **kwargs: Any) -> Any:
            for token in pace.stream():
                yield ChatMessageStreamDelta(content=token)

    agent = CodeAgent(tools=[], model=Fake(), stream_outputs=True, max_steps=1)
    start = time.perf_counter()
    seen = None
    for event in agent.run("go", stream=True):
        if seen is None and isinstance(event, ChatMessageStreamDelta) and event.content:
            seen = time.perf_counter()
    assert seen is not None and pace.first_sent is not None
    return (pace.first_sent - start) * 1000, (seen - start) * 1000


async def adk_once(pace: Pace) -> tuple[float, float]:
    from google.adk.agents import LlmAgent
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.adk.models import BaseLlm, LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    class Fake(BaseLlm):
        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            text = ""
            async for token in pace.astream():
                text += token
                yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=token)]), partial=True)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]), partial=False)

    runner = InMemoryRunner(agent=LlmAgent(name="peer", model=Fake(model="fake")), app_name="b")
    await runner.session_service.create_session(app_name="b", user_id="u", session_id="s")
    start = time.perf_counter()
    seen = None
    message = types.Content(role="user", parts=[types.Part(text="go")])
    async for event in runner.run_async(
        user_id="u", session_id="s", new_message=message, run_config=RunConfig(streaming_mode=StreamingMode.SSE)
    ):
        if seen is None and event.partial and event.content and event.content.parts and event.content.parts[0].text:
            seen = time.perf_counter()
    assert seen is not None and pace.first_sent is not None
    return (pace.first_sent - start) * 1000, (seen - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("peer", choices=["pydantic_ai", "smolagents", "adk"])
    parser.add_argument("--first-token", type=float, default=0.4)
    parser.add_argument("--rates", default="30,60,120")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chars-per-token", type=int, default=4)
    args = parser.parse_args()
    out: dict[str, Any] = {}
    for rate in map(int, args.rates.split(",")):
        runs = []
        for _ in range(args.repeat):
            pace = Pace(args.first_token, rate, args.chars_per_token)
            if args.peer == "pydantic_ai":
                runs.append(asyncio.run(pydantic_ai_once(pace)))
            elif args.peer == "adk":
                runs.append(asyncio.run(adk_once(pace)))
            else:
                runs.append(smolagents_once(pace))
        out[str(rate)] = {
            "model_first_ms": statistics.median(r[0] for r in runs),
            "visible_ms": statistics.median(r[1] for r in runs),
            "gap_ms": statistics.median(r[1] - r[0] for r in runs),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
