"""One peer's column of ``latency.py``, run in that peer's own venv (stdlib + the peer only).

Usage: ``python _latency_peers.py {pydantic_ai,smolagents,adk} --first-token 0.4 --rates 30,60
--repeat 5 --chars-per-token 4``; prints one JSON line: rate -> model_first_ms, visible_ms,
gap_ms (medians), and ``"version"``: the peer's package version, after the marker
``LATENCY_FIGURES`` (smolagents' live display writes to stdout too). One warm-up run (imports,
first-use set-up) comes before the measured ones and is not counted.

Each peer gets the same reply (a sentence, then a 38-line script), in its own native form,
from a fake model that sends its first token ``--first-token`` seconds after the request and
then ``rate`` tokens of ``--chars-per-token`` characters per second:

* ``pydantic_ai``: pydantic-ai-harness ``CodeMode()`` (the script goes to its ``run_code``
  tool, as the tool call's streamed JSON arguments) over a ``FunctionModel`` with a
  ``stream_function``; the caller reads ``Agent.run_stream_events``; visible = the first
  ``PartStartEvent`` / ``PartDeltaEvent`` carrying text or tool-call arguments.
* ``smolagents``: ``CodeAgent(stream_outputs=True, code_block_tags="markdown")`` over a
  ``Model`` whose ``generate_stream`` yields ``ChatMessageStreamDelta``; the caller iterates
  ``agent.run(..., stream=True)``; visible = the first delta with content.
* ``adk``: ``LlmAgent`` under ``RunConfig(streaming_mode=StreamingMode.SSE)`` over a
  ``BaseLlm`` yielding ``partial=True`` ``LlmResponse`` chunks, then the whole reply; the
  caller iterates ``Runner.run_async``; visible = the first partial event with text.

``--task answer`` (issue 52) prints instead each peer's median ms to the final answer of one
fixed task (three read-only lookups of 150 ms, one write of 100 ms; every model request paced):
``{"version", "off": {rate: ms}, "eager": {rate: ms}}`` for CodeMode, ``{"version", "answer":
{rate: ms}}`` for smolagents and ADK (their reply shapes are described at their functions).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from importlib import metadata
from typing import Any

PROSE = "I will compute the totals step by step.\n"
SCRIPT = "".join(f"total_{i} = {i} * {i} + {i}\n" for i in range(38))
REPLY = PROSE + "```python\n" + SCRIPT + "final_answer(total_37)\n```"
DISTRIBUTIONS = {"pydantic_ai": "pydantic-ai-harness", "smolagents": "smolagents", "adk": "google-adk"}


class Pace:
    """The fake streaming model's clock: splits a text into tokens, sends them on time and
    records when the first one went out."""

    def __init__(self, first: float, rate: int, chars: int) -> None:
        self.first, self.rate, self.chars = first, rate, chars
        self.first_sent: float | None = None

    def tokens(self, text: str = REPLY) -> list[str]:
        return [text[i : i + self.chars] for i in range(0, len(text), self.chars)]

    def _sent(self) -> None:
        if self.first_sent is None:
            self.first_sent = time.perf_counter()

    async def astream(self, text: str = REPLY, start: float | None = None, skip: int = 0) -> Any:
        """Yields ``text``'s tokens; the i-th is due at ``start + first + (skip + i) / rate``."""
        start = time.perf_counter() if start is None else start
        for i, token in enumerate(self.tokens(text)):
            due = start + self.first + (skip + i) / self.rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            self._sent()
            yield token

    def stream(self, text: str = REPLY) -> Any:
        start = time.perf_counter()
        for i, token in enumerate(self.tokens(text)):
            due = start + self.first + i / self.rate
            time.sleep(max(0.0, due - time.perf_counter()))
            self._sent()
            yield token


async def pydantic_ai_once(pace: Pace) -> tuple[float, float]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, PartDeltaEvent, PartStartEvent, ToolReturnPart
    from pydantic_ai.models.function import DeltaToolCall, FunctionModel
    from pydantic_ai_harness import CodeMode

    code = SCRIPT + "total_37"

    async def stream(messages: list[Any], info: Any) -> Any:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            yield "The total is 1406."  # after run_code: the closing reply, not timed
            return
        start = time.perf_counter()
        async for token in pace.astream(PROSE, start):
            yield token
        skip = len(pace.tokens(PROSE))
        args = json.dumps({"code": code})
        first = True
        async for token in pace.astream(args, start, skip):
            name = "run_code" if first else None
            yield {0: DeltaToolCall(name=name, json_args=token, tool_call_id="call-1" if first else None)}
            first = False

    def whole(messages: Any, info: Any) -> Any:
        raise AssertionError("streamed only")

    agent = Agent(FunctionModel(whole, stream_function=stream), capabilities=[CodeMode()])

    @agent.tool_plain
    def square(x: int) -> int:
        """x * x."""
        return x * x

    start = time.perf_counter()
    seen = None
    ran_code = False
    async with agent.run_stream_events("go") as events:
        async for event in events:
            if seen is None and isinstance(event, (PartStartEvent, PartDeltaEvent)):
                part = getattr(event, "part", None) or getattr(event, "delta", None)
                if (
                    getattr(part, "content", None)
                    or getattr(part, "content_delta", None)
                    or getattr(part, "args_delta", None)
                ):
                    seen = time.perf_counter()
            if type(event).__name__ == "FunctionToolResultEvent":
                ran_code = True
    assert seen is not None and pace.first_sent is not None and ran_code
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

    agent = CodeAgent(
        tools=[], model=Fake(), stream_outputs=True, max_steps=1, code_block_tags="markdown", verbosity_level=0
    )
    start = time.perf_counter()
    seen = None
    answer = None
    for event in agent.run("go", stream=True):
        if seen is None and isinstance(event, ChatMessageStreamDelta) and event.content:
            seen = time.perf_counter()
        if type(event).__name__ == "FinalAnswerStep":
            answer = event.output
    assert seen is not None and pace.first_sent is not None and answer == 37 * 37 + 37, answer
    return (pace.first_sent - start) * 1000, (seen - start) * 1000


async def adk_once(pace: Pace) -> tuple[float, float]:
    from google.adk.agents import LlmAgent
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.adk.models import BaseLlm, LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    class Fake(BaseLlm):
        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            assert stream, "the runner asked for a whole reply under SSE"
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


# ---- time to the answer (issue 52): three read-only lookups early, one write late

LOOKUP_S, WRITE_S = 0.15, 0.1
ANSWER_CHARS = 290  # the reply's length: the median of the shared corpus's 32 real replies
ANSWER_CODE = (
    'a = await lookup(key="alpha")\nb = await lookup(key="beta")\nc = await lookup(key="gamma")\n'
    "s = await save(text=a + b + c)\ns\n"
)
ANSWER_CLOSING = "Saved: the summary holds all three records."
_FILLER = "I will look up the three records first, then save their summary of all of them together. " * 4
ANSWER_PROSE = _FILLER[: ANSWER_CHARS - len(json.dumps({"code": ANSWER_CODE})) - 1].rstrip() + "\n"


async def pydantic_ai_answer_once(pace: Pace, eager: bool) -> float:
    """ms from the request to the final answer, CodeMode with ``eager`` and
    ``speculate="declared"`` on or both off. The closing reply after ``run_code`` is paced
    like every reply of the fake model (first token after ``pace.first``, then ``pace.rate``):
    a real model answers the tool's return with a second request; codeact's script returns
    the answer itself."""
    from pydantic_ai import Agent, Tool
    from pydantic_ai.messages import ModelRequest, ToolReturnPart
    from pydantic_ai.models.function import DeltaToolCall, FunctionModel
    from pydantic_ai_harness import CodeMode

    async def stream(messages: list[Any], info: Any) -> Any:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            async for token in pace.astream(ANSWER_CLOSING):
                yield token
            return
        start = time.perf_counter()
        async for token in pace.astream(ANSWER_PROSE, start):
            yield token
        skip = len(pace.tokens(ANSWER_PROSE))
        first = True
        async for token in pace.astream(json.dumps({"code": ANSWER_CODE}), start, skip):
            name = "run_code" if first else None
            yield {0: DeltaToolCall(name=name, json_args=token, tool_call_id="call-1" if first else None)}
            first = False

    def whole(messages: Any, info: Any) -> Any:
        raise AssertionError("streamed only")

    async def lookup(key: str) -> str:
        """Looks a record up (read-only)."""
        await asyncio.sleep(LOOKUP_S)
        return key[:1].upper()

    async def save(text: str) -> str:
        """Saves the summary (an effect)."""
        await asyncio.sleep(WRITE_S)
        return "saved " + text

    tools = [Tool(lookup, metadata={"read_only": True}), Tool(save)]
    mode = CodeMode(eager=True, speculate="declared") if eager else CodeMode()
    agent = Agent(FunctionModel(whole, stream_function=stream), tools=tools, capabilities=[mode])
    start = time.perf_counter()
    output = None
    async with agent.run_stream_events("go") as events:
        async for event in events:
            if type(event).__name__ == "AgentRunResultEvent":
                output = event.result.output
                break
    assert output == ANSWER_CLOSING, output
    return (time.perf_counter() - start) * 1000


# smolagents: the same prose, the script as its markdown code block (lookups and save as plain
# calls, the answer through final_answer); the closing fence is its stop sequence, so the reply
# ends there and nothing follows it. The reply is ANSWER_CHARS characters like the others.
SMOL_CODE = (
    'a = lookup(key="alpha")\nb = lookup(key="beta")\nc = lookup(key="gamma")\n'
    "s = save(text=a + b + c)\nfinal_answer(s)\n```"
)
SMOL_REPLY = _FILLER[: ANSWER_CHARS - len(SMOL_CODE) - len("\n```py\n")].rstrip() + "\n```py\n" + SMOL_CODE


def smolagents_answer_once(pace: Pace) -> float:
    """ms from the request to the final answer, ``CodeAgent(stream_outputs=True)``: the code
    block runs once the reply is complete (one model request; ``final_answer`` ends the run)."""
    from smolagents import CodeAgent, tool
    from smolagents.models import ChatMessageStreamDelta, Model

    @tool
    def lookup(key: str) -> str:
        """Looks a record up (read-only).

        Args:
            key: the record's key.
        """
        time.sleep(LOOKUP_S)
        return key[:1].upper()

    @tool
    def save(text: str) -> str:
        """Saves the summary (an effect).

        Args:
            text: the summary.
        """
        time.sleep(WRITE_S)
        return "saved " + text

    class Fake(Model):
        def generate(self, messages: Any, **kwargs: Any) -> Any:
            raise AssertionError("streamed only")

        def generate_stream(self, messages: Any, **kwargs: Any) -> Any:
            for token in pace.stream(SMOL_REPLY):
                yield ChatMessageStreamDelta(content=token)

    agent = CodeAgent(
        tools=[lookup, save],
        model=Fake(),
        stream_outputs=True,
        max_steps=1,
        code_block_tags="markdown",
        verbosity_level=0,
    )
    start = time.perf_counter()
    answer = None
    for event in agent.run("go", stream=True):
        if type(event).__name__ == "FinalAnswerStep":
            answer = event.output
    assert answer == "saved ABG", answer
    return (time.perf_counter() - start) * 1000


# ADK: no code execution by default, so the same task as function calls. Request 1 streams the
# prose (partial text) and then three parallel lookup calls in one response (ADK runs them
# concurrently); request 2 calls save with the lookups' results; request 3 streams the closing
# text. Each request is paced (first token after pace.first); the calls' JSON is paced as tokens
# and arrives whole in the final (non-partial) response, as Gemini sends function calls. Prose +
# both requests' call JSON is ANSWER_CHARS characters; the closing reply comes on top, as in
# CodeMode's second request.
ADK_LOOKUPS = [{"name": "lookup", "args": {"key": key}} for key in ("alpha", "beta", "gamma")]
ADK_SAVE = {"name": "save", "args": {"text": "ABG"}}
ADK_PROSE = _FILLER[: ANSWER_CHARS - len(json.dumps(ADK_LOOKUPS)) - len(json.dumps(ADK_SAVE)) - 1].rstrip() + "\n"


async def adk_answer_once(pace: Pace) -> float:
    """ms from the request to the final answer, ``LlmAgent`` under ``StreamingMode.SSE``."""
    from google.adk.agents import LlmAgent
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.adk.models import BaseLlm, LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    async def lookup(key: str) -> str:
        """Looks a record up (read-only)."""
        await asyncio.sleep(LOOKUP_S)
        return key[:1].upper()

    async def save(text: str) -> str:
        """Saves the summary (an effect)."""
        await asyncio.sleep(WRITE_S)
        return "saved " + text

    def call(spec: dict[str, Any], args: dict[str, Any]) -> Any:
        return types.Part(function_call=types.FunctionCall(name=spec["name"], args=args))

    class Fake(BaseLlm):
        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            assert stream, "the runner asked for a whole reply under SSE"
            results = [
                part.function_response
                for part in (llm_request.contents[-1].parts or [])
                if part.function_response is not None
            ]
            start = time.perf_counter()
            if not results:  # request 1: prose, then the three lookups at once
                async for token in pace.astream(ADK_PROSE, start):
                    yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=token)]), partial=True)
                async for _ in pace.astream(json.dumps(ADK_LOOKUPS), start, len(pace.tokens(ADK_PROSE))):
                    pass
                parts = [types.Part(text=ADK_PROSE)] + [call(c, c["args"]) for c in ADK_LOOKUPS]
                yield LlmResponse(content=types.Content(role="model", parts=parts), partial=False)
            elif results[0].name == "lookup":  # request 2: save what the lookups returned
                async for _ in pace.astream(json.dumps(ADK_SAVE), start):
                    pass
                text = "".join(r.response["result"] for r in results)
                parts = [call(ADK_SAVE, {"text": text})]
                yield LlmResponse(content=types.Content(role="model", parts=parts), partial=False)
            else:  # request 3: the closing text
                async for token in pace.astream(ANSWER_CLOSING, start):
                    yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=token)]), partial=True)
                parts = [types.Part(text=ANSWER_CLOSING)]
                yield LlmResponse(content=types.Content(role="model", parts=parts), partial=False)

    agent = LlmAgent(name="peer", model=Fake(model="fake"), tools=[lookup, save])
    runner = InMemoryRunner(agent=agent, app_name="b")
    await runner.session_service.create_session(app_name="b", user_id="u", session_id="s")
    start = time.perf_counter()
    answer = None
    message = types.Content(role="user", parts=[types.Part(text="go")])
    config = RunConfig(streaming_mode=StreamingMode.SSE)
    async for event in runner.run_async(user_id="u", session_id="s", new_message=message, run_config=config):
        if event.is_final_response() and event.content and event.content.parts:
            answer = "".join(p.text or "" for p in event.content.parts)
    assert answer == ANSWER_CLOSING, answer
    return (time.perf_counter() - start) * 1000


def answer_once(peer: str, pace: Pace, eager: bool) -> float:
    if peer == "pydantic_ai":
        return asyncio.run(pydantic_ai_answer_once(pace, eager))
    if peer == "adk":
        return asyncio.run(adk_answer_once(pace))
    return smolagents_answer_once(pace)


def answer_main(args: Any, rates: list[int]) -> None:
    """Prints the time-to-answer medians: ``{"version", label: {rate: ms}}``, labels ``off`` and
    ``eager`` for CodeMode, ``answer`` for smolagents and ADK."""
    out: dict[str, Any] = {"version": metadata.version(DISTRIBUTIONS[args.peer])}
    labels = {"off": False, "eager": True} if args.peer == "pydantic_ai" else {"answer": False}
    for label, eager in labels.items():
        answer_once(args.peer, Pace(args.first_token, rates[0], args.chars_per_token), eager)  # warm-up
        out[label] = {}
        for rate in rates:
            runs = [
                answer_once(args.peer, Pace(args.first_token, rate, args.chars_per_token), eager)
                for _ in range(args.repeat)
            ]
            out[label][str(rate)] = statistics.median(runs)
    print(f"\nLATENCY_FIGURES {json.dumps(out)}", flush=True)
    os._exit(0)


def once(peer: str, pace: Pace) -> tuple[float, float]:
    if peer == "pydantic_ai":
        return asyncio.run(pydantic_ai_once(pace))
    if peer == "adk":
        return asyncio.run(adk_once(pace))
    return smolagents_once(pace)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("peer", choices=sorted(DISTRIBUTIONS))
    parser.add_argument("--first-token", type=float, default=0.4)
    parser.add_argument("--rates", default="30,60,120")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chars-per-token", type=int, default=4)
    parser.add_argument("--task", choices=["first-token", "answer"], default="first-token")
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    if args.task == "answer":
        answer_main(args, rates)
    once(args.peer, Pace(args.first_token, rates[0], args.chars_per_token))  # warm-up, not counted
    out: dict[str, Any] = {"version": metadata.version(DISTRIBUTIONS[args.peer])}
    for rate in rates:
        runs = [once(args.peer, Pace(args.first_token, rate, args.chars_per_token)) for _ in range(args.repeat)]
        out[str(rate)] = {
            "model_first_ms": statistics.median(r[0] for r in runs),
            "visible_ms": statistics.median(r[1] for r in runs),
            "gap_ms": statistics.median(r[1] - r[0] for r in runs),
        }
    print(f"\nLATENCY_FIGURES {json.dumps(out)}", flush=True)
    sys.stderr.flush()
    # pydantic-monty 1.7 (CodeMode's sandbox) aborts at interpreter shutdown about every other
    # run (PyGILState_Release from its worker thread): the figures are out, skip the shutdown.
    os._exit(0)


if __name__ == "__main__":
    main()
