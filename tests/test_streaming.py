"""Streaming (issue 51): models stream their replies (a chunked ScriptedModel, OpenAIChatModel
against a real local server speaking the OpenAI streaming protocol, LlamaCppModel,
PydanticAIModel), and the runner yields partial events that are never stored."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import codeact.models
from codeact import CodeActAgent, FunctionTool, MontyRuntime, RunConfig, Runner, SqliteSessionService
from codeact.events import Event
from codeact.models import (
    LlmRequest,
    LlmResponse,
    ModelError,
    OpenAIChatModel,
    ScriptedModel,
    stream_content,
)
from codeact.sessions import InMemorySessionService
from codeact.sessions._types import Content
from streaming_server import StreamReply, StreamServer, stream_server

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _no_remote_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codeact.models, "ALLOW_MODEL_REQUESTS", False)


@pytest.fixture
def server() -> Iterator[StreamServer]:
    yield from stream_server()


def _request(text: str = "hi") -> LlmRequest:
    return LlmRequest(contents=[Content.from_text(text)])


async def _collect(model: Any, request: LlmRequest | None = None) -> list[LlmResponse]:
    return [r async for r in stream_content(model, request or _request())]


# -- ScriptedModel ------------------------------------------------------------------------------


async def test_scripted_streams_in_tokens_then_the_complete_reply() -> None:
    model = ScriptedModel(["abcdefghij"], chars_per_token=4)
    items = await _collect(model)
    assert [(r.text, r.partial) for r in items] == [
        ("abcd", True),
        ("efgh", True),
        ("ij", True),
        ("abcdefghij", False),
    ]
    assert items[-1].finish_reason == "stop"


async def test_scripted_paces_first_token_and_rate() -> None:
    model = ScriptedModel(["x" * 20], time_to_first_token=0.15, tokens_per_second=50, chars_per_token=4)
    start = time.monotonic()
    stamps = []
    async for item in model.generate_content_stream(_request()):
        stamps.append((time.monotonic() - start, item.partial))
    first = stamps[0][0]
    assert 0.14 <= first < 0.25
    # 5 tokens: the last one due 4 / 50 s = 80 ms after the first's due time (deadlines do not drift)
    assert 0.225 <= stamps[4][0] < 0.4
    assert stamps[-1][1] is False


async def test_scripted_paced_non_streaming_takes_the_whole_reply_time() -> None:
    model = ScriptedModel(["x" * 8], time_to_first_token=0.1, tokens_per_second=20, chars_per_token=4)
    start = time.monotonic()
    reply = await model.generate_content(_request())
    assert reply.text == "x" * 8
    assert 0.14 <= time.monotonic() - start < 0.3  # 0.1 s, then one more token at 20/s


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"time_to_first_token": -1}, "time_to_first_token"),
        ({"tokens_per_second": 0}, "tokens_per_second"),
        ({"chars_per_token": 0}, "chars_per_token"),
    ],
)
def test_scripted_pacing_settings_are_checked(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScriptedModel(["x"], **kwargs)


# -- OpenAIChatModel over a real local server ------------------------------------------------


def _openai(server: StreamServer) -> OpenAIChatModel:
    return OpenAIChatModel("test-model", base_url=server.url, api_key="sk-test", max_retries=0, timeout=5)


async def test_openai_streams_deltas_then_the_complete_reply_with_usage(server: StreamServer) -> None:
    server.replies = [StreamReply(["Hel", "lo ", "world"], reasoning=["think"])]
    items = await _collect(_openai(server))
    assert [(r.text, r.partial) for r in items[:-1]] == [("", True), ("Hel", True), ("lo ", True), ("world", True)]
    assert items[0].content is not None and items[0].content.parts[0].thought
    final = items[-1]
    assert (final.text, final.partial, final.finish_reason) == ("Hello world", False, "stop")
    assert final.usage is not None and (final.usage.prompt_tokens, final.usage.completion_tokens) == (7, 3)
    assert final.content is not None and final.content.parts[0].thought and final.content.parts[0].text == "think"
    body = server.received[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_openai_stream_without_usage_gives_none(server: StreamServer) -> None:
    server.replies = [StreamReply(["a", "b"], usage=None)]
    items = await _collect(_openai(server))
    assert items[-1].text == "ab" and items[-1].usage is None


async def test_openai_chunks_arrive_as_they_are_sent(server: StreamServer) -> None:
    server.replies = [StreamReply(["a", "b", "c"], first_delay=0.05, delay=0.4)]
    start = time.monotonic()
    arrivals = []
    async for item in _openai(server).generate_content_stream(_request()):
        if item.partial and item.text:
            arrivals.append(time.monotonic() - start)
    assert len(arrivals) == 3
    assert arrivals[0] < 0.45  # not held until the reply ends (0.85 s)
    assert arrivals[2] - arrivals[0] >= 0.7


async def test_openai_stream_cut_off_raises_and_yields_no_complete_reply(server: StreamServer) -> None:
    server.replies = [StreamReply(["print(", "1)", "\n"], drop_after=1)]
    seen: list[LlmResponse] = []
    with pytest.raises(ModelError) as info:
        async for item in _openai(server).generate_content_stream(_request()):
            seen.append(item)
    assert all(r.partial for r in seen)
    assert "mid-reply" in str(info.value) or "before the reply finished" in str(info.value)


async def test_openai_stream_under_async_with_reuses_the_client(server: StreamServer) -> None:
    model = _openai(server)
    async with model:
        first = await _collect(model)
        second = await _collect(model)
    assert first[-1].text == second[-1].text == "hello"


# -- LlamaCppModel (llama-cpp-python's streamed chunk shape) ------------------------------------


class _FakeLlama:
    """The part of ``llama_cpp.Llama`` LlamaCppModel uses; llama-cpp-python is not installed in
    the test environment (it compiles llama.cpp), so the chunk shape is checked here."""

    def __init__(self, **kwargs: Any) -> None:
        self.closed = False

    def create_chat_completion(self, stream: bool = False, **kwargs: Any) -> Any:
        assert stream

        def chunks() -> Iterator[dict[str, Any]]:
            yield {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
            for token in ["x = ", "1"]:
                yield {"choices": [{"index": 0, "delta": {"content": token}, "finish_reason": None}]}
            yield {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}

        return chunks()


async def test_llama_streams_chunks(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from codeact.models import _llama

    monkeypatch.setattr(_llama, "_import_llama_cpp", lambda: types.SimpleNamespace(Llama=_FakeLlama))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    model = _llama.LlamaCppModel(gguf)
    items = await _collect(model)
    assert [(r.text, r.partial) for r in items] == [("x = ", True), ("1", True), ("x = 1", False)]
    assert items[-1].finish_reason == "stop" and items[-1].usage is None
    assert not model._lock.locked()


# -- PydanticAIModel ---------------------------------------------------------------------------


async def test_pydantic_ai_model_streams_through_pydantic_ai() -> None:
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from codeact.integrations.pydantic_ai import PydanticAIModel

    async def stream(messages: Any, info: AgentInfo) -> Any:
        for piece in ["one ", "two ", "three"]:
            yield piece

    def whole(messages: Any, info: AgentInfo) -> Any:
        raise AssertionError("the streamed path must be used")

    model = PydanticAIModel(FunctionModel(whole, stream_function=stream))
    items = await _collect(model)
    assert [r.text for r in items if r.partial] == ["one ", "two ", "three"]
    assert (items[-1].partial, items[-1].text) == (False, "one two three")
    assert items[-1].usage is not None


async def test_pydantic_ai_model_stream_broken_off_raises_model_error() -> None:
    from pydantic_ai.exceptions import ModelAPIError
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from codeact.integrations.pydantic_ai import PydanticAIModel

    async def stream(messages: Any, info: AgentInfo) -> Any:
        yield "print("
        raise ModelAPIError("m", "connection dropped")

    def whole(messages: Any, info: AgentInfo) -> Any:
        raise AssertionError("unused")

    seen: list[LlmResponse] = []
    with pytest.raises(ModelError, match="connection dropped"):
        async for item in PydanticAIModel(FunctionModel(whole, stream_function=stream)).generate_content_stream(
            _request()
        ):
            seen.append(item)
    assert [r.partial for r in seen] == [True]


# -- partial events from the runner ------------------------------------------------------------

SCRIPT_REPLY = 'Let me add them.\n```python\nprint("adding")\nx = 2 + 3\n{"type": "final_result", "value": x}\n```'


def _agent(model: Any) -> CodeActAgent:
    return CodeActAgent(name="calc", model=model, runtime=MontyRuntime())


async def _run(model: Any, *, streaming: bool, service: Any = None) -> tuple[list[Event], Any]:
    service = service or InMemorySessionService()
    runner = Runner(app_name="app", agent=_agent(model), session_service=service)
    await service.create_session(app_name="app", user_id="u", session_id="s")
    events = [
        e
        async for e in runner.run_async(
            user_id="u",
            session_id="s",
            new_message="add 2 and 3",
            run_config=RunConfig(streaming=streaming),
        )
    ]
    return events, service


async def _stored(service: Any) -> list[Event]:
    session = await service.get_session(app_name="app", user_id="u", session_id="s")
    return list(session.events)


async def test_streaming_yields_partial_reply_events_that_are_never_stored() -> None:
    events, service = await _run(ScriptedModel([SCRIPT_REPLY], chars_per_token=5), streaming=True)
    partial = [e for e in events if e.partial]
    assert partial and all(e.kind == "model_reply" for e in partial if e.kind != "script_output")
    reply_chunks = [e.text for e in partial if e.kind == "model_reply"]
    assert "".join(reply_chunks) == SCRIPT_REPLY
    assert not any(e.is_final_response() for e in partial)
    assert all(not e.actions.state_delta for e in partial)
    # the complete model_reply follows its chunks, as without streaming
    complete = next(e for e in events if e.kind == "model_reply" and not e.partial)
    assert events.index(complete) > max(events.index(e) for e in partial if e.kind == "model_reply")
    assert complete.text == SCRIPT_REPLY
    stored = await _stored(service)
    assert not any(e.partial for e in stored)
    assert [e.id for e in stored if e.author != "user"] == [e.id for e in events if not e.partial]
    assert events[-1].is_final_response()


async def test_streaming_off_yields_no_partial_event_and_stores_the_same_events() -> None:
    _, service_on = await _run(ScriptedModel([SCRIPT_REPLY], chars_per_token=5), streaming=True)
    off, service_off = await _run(ScriptedModel([SCRIPT_REPLY], chars_per_token=5), streaming=False)
    assert not any(e.partial for e in off)
    shape = lambda events: [(e.author, e.kind, e.text) for e in events]  # noqa: E731
    assert shape(await _stored(service_on)) == shape(await _stored(service_off))


async def test_printed_output_arrives_as_partial_script_output_events() -> None:
    reply = (
        '```python\nprint("step one")\ncall_tool("noop", {})\nprint("step two")\n'
        '{"type": "final_result", "value": 1}\n```'
    )

    def noop() -> int:
        """Does nothing."""
        return 0

    agent = CodeActAgent(name="calc", model=ScriptedModel([reply]), runtime=MontyRuntime(), tools=[FunctionTool(noop)])
    service = InMemorySessionService()
    runner = Runner(app_name="app", agent=agent, session_service=service)
    await service.create_session(app_name="app", user_id="u", session_id="s")
    events = [
        e
        async for e in runner.run_async(
            user_id="u", session_id="s", new_message="go", run_config=RunConfig(streaming=True)
        )
    ]
    output = [e for e in events if e.partial and e.kind == "script_output"]
    assert output and output[0].text == "step one\n"
    assert not any(e.is_final_response() for e in output)
    assert not any(e.partial for e in await _stored(service))


async def test_a_stream_cut_off_mid_reply_stores_nothing_partial_and_runs_nothing(server: StreamServer) -> None:
    ran: list[int] = []

    def effect() -> int:
        """An effect that must not run."""
        ran.append(1)
        return 1

    server.replies = [StreamReply(['```python\ncall_tool("effect", {})\n', "```"], drop_after=1)]
    model = OpenAIChatModel("m", base_url=server.url, api_key="k", max_retries=0, timeout=5)
    agent = CodeActAgent(name="calc", model=model, runtime=MontyRuntime(), tools=[FunctionTool(effect)])
    service = InMemorySessionService()
    runner = Runner(app_name="app", agent=agent, session_service=service)
    await service.create_session(app_name="app", user_id="u", session_id="s")
    seen: list[Event] = []
    with pytest.raises(ModelError):
        async for e in runner.run_async(
            user_id="u", session_id="s", new_message="go", run_config=RunConfig(streaming=True)
        ):
            seen.append(e)
    assert seen and all(e.partial for e in seen)
    assert ran == []
    stored = await _stored(service)
    assert [e.author for e in stored] == ["user"]  # the message only: no reply, no partial


class _BrokenStream(ScriptedModel):
    async def generate_content_stream(self, request: LlmRequest) -> Any:
        yield LlmResponse(content=Content.from_text("```python\nx = 1\n", role="model"), partial=True)
        raise ModelError("the model failed mid-reply", model="broken")


async def test_a_model_error_mid_stream_stores_nothing_partial(tmp_path: Any) -> None:
    service = SqliteSessionService(str(tmp_path / "s.db"))
    with pytest.raises(ModelError, match="mid-reply"):
        await _run(_BrokenStream(["unused"]), streaming=True, service=service)
    stored = await _stored(service)
    assert [e.author for e in stored] == ["user"]


async def test_streaming_over_a_real_openai_stream(server: StreamServer) -> None:
    server.replies = [StreamReply(["```python\n", 'print("hi")\n', '{"type": "final_result", "value": 5}\n', "```"])]
    model = OpenAIChatModel("m", base_url=server.url, api_key="k", max_retries=0, timeout=5)
    events, service = await _run(model, streaming=True)
    chunks = [e.text for e in events if e.partial and e.kind == "model_reply"]
    assert len(chunks) == 4
    final = events[-1]
    assert final.is_final_response() and "5" in final.text
    complete = next(e for e in events if e.kind == "model_reply" and not e.partial)
    assert complete.usage_metadata is not None and complete.usage_metadata.prompt_token_count == 7
    assert not any(e.partial for e in await _stored(service))


async def test_the_first_partial_event_follows_the_first_token_at_once() -> None:
    model = ScriptedModel([SCRIPT_REPLY], time_to_first_token=0.2, tokens_per_second=20)
    service = InMemorySessionService()
    runner = Runner(app_name="app", agent=_agent(model), session_service=service)
    await service.create_session(app_name="app", user_id="u", session_id="s")
    start = time.monotonic()
    first = None
    async for e in runner.run_async(
        user_id="u", session_id="s", new_message="go", run_config=RunConfig(streaming=True)
    ):
        if e.partial and first is None:
            first = time.monotonic() - start
    assert first is not None and 0.19 <= first < 0.3


# -- Google ADK: StreamingMode.SSE and NONE ---------------------------------------------------


async def _adk_run(mode: str) -> tuple[list[Any], list[Any]]:
    pytest.importorskip("google.adk")
    from google.adk.agents.run_config import RunConfig as AdkRunConfig
    from google.adk.agents.run_config import StreamingMode
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from codeact.integrations.adk import CodeActAdkAgent

    agent = CodeActAgent(name="calc", model=ScriptedModel([SCRIPT_REPLY], chars_per_token=6), runtime=MontyRuntime())
    runner = InMemoryRunner(agent=CodeActAdkAgent.wrap(agent), app_name="a")
    await runner.session_service.create_session(app_name="a", user_id="u", session_id="s")
    events = [
        e
        async for e in runner.run_async(
            user_id="u",
            session_id="s",
            new_message=types.Content(role="user", parts=[types.Part(text="add 2 and 3")]),
            run_config=AdkRunConfig(streaming_mode=getattr(StreamingMode, mode)),
        )
    ]
    session = await runner.session_service.get_session(app_name="a", user_id="u", session_id="s")
    assert session is not None
    return events, [e for e in session.events if e.author == "calc"]


def _code_of(event: Any) -> str | None:
    parts = event.content.parts if event.content is not None else []
    return next((p.executable_code.code for p in parts or [] if p.executable_code is not None), None)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # ADK is asyncio-only
async def test_adk_sse_streams_partial_chunks_then_the_complete_reply_stored_and_not_final(anyio_backend: str) -> None:
    events, stored = await _adk_run("SSE")
    partial = [e for e in events if e.partial]
    assert len(partial) >= len(SCRIPT_REPLY) // 6
    assert (
        "".join(
            p.text or "" for e in partial for p in e.content.parts if e.custom_metadata["codeact_kind"] == "model_reply"
        )
        == SCRIPT_REPLY
    )
    assert not any(e.is_final_response() for e in partial)
    carrier = next(e for e in events if not e.partial and _code_of(e) is not None)
    assert (
        events.index(carrier) > events.index(partial[-1])
        or partial[-1].custom_metadata["codeact_kind"] != "model_reply"
    )
    assert carrier.content.parts[0].text == SCRIPT_REPLY and not carrier.is_final_response()
    assert [e.id for e in stored] == [e.id for e in events if not e.partial]  # ADK stored no partial event
    assert any(_code_of(e) is not None for e in stored)
    assert events[-1].is_final_response() and "5" in (events[-1].content.parts[0].text or "")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_adk_none_yields_no_partial_event_and_the_complete_reply_is_visible(anyio_backend: str) -> None:
    events, stored = await _adk_run("NONE")
    assert not any(e.partial for e in events)
    carrier = next(e for e in events if _code_of(e) is not None)
    assert carrier.content.parts[0].text == SCRIPT_REPLY and not carrier.is_final_response()
    assert [e.is_final_response() for e in events] == [False] * (len(events) - 1) + [True]
    assert [e.id for e in stored] == [e.id for e in events]


# -- codeact chat on a terminal ---------------------------------------------------------------


def test_chat_prints_tokens_and_printed_output_live_on_a_terminal() -> None:
    """``codeact chat`` on a pseudo-terminal: the reply's first words and the script's first
    print appear while the reply (~2 s) and the script (~1 s tool) are still going."""
    import os
    import pty
    import re
    import select
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    tree = Path(codeact.models.__file__).resolve().parents[2]  # the codeact under test
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tests}", "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"}
    args = [
        "chat",
        "--model-from",
        "streaming_fixtures:SLOW_MODEL",
        "--tools",
        "streaming_fixtures:SLOW_TOOLS",
        "-m",
        "count",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "codeact.cli", *args], stdin=slave, stdout=slave, stderr=slave, cwd=tests, env=env
    )
    os.close(slave)
    ansi = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
    seen = ""
    when: dict[str, float] = {}
    marks = ["Counting slowly", "so the reply streams", "── ", "printed 1", "printed 2", "counted"]
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += ansi.sub("", chunk.decode(errors="replace"))
            now = time.monotonic()
            for mark in marks:
                if mark in seen and mark not in when:
                    when[mark] = now
            if proc.poll() is not None and not ready:
                break
        assert proc.wait(timeout=30) == 0, seen
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert set(marks) <= set(when), seen
    # the reply's first words show ~1.5 s before the reply ends (about 140 characters at 25 tokens/s)
    assert when["── "] - when["Counting slowly"] > 1.0, when  # "── NAME · model reply": the reply ended
    assert when["Counting slowly"] < when["so the reply streams"] < when["── "]
    # the first print shows while the 1 s tool runs, before the second
    assert when["printed 2"] - when["printed 1"] > 0.7, when


def test_a_secret_split_across_pieces_is_redacted() -> None:
    from codeact.agent._streaming import RedactedStream
    from codeact.services import SecretsProvider

    secrets = SecretsProvider({"key": "sk-LIVE-7f3a9c"})
    stream = RedactedStream(secrets)
    pieces = ["the key is sk-", "LIVE-7f", "3a9c and sk-L", "ater text"]
    shown = [stream.push(p) for p in pieces]
    assert "".join(shown) == "the key is [REDACTED] and sk-Later text"
    assert shown[0] == "the key is " and shown[1] == ""  # held until it is known
    assert not any(part in "".join(shown) for part in ("LIVE", "7f3a9c"))
    assert RedactedStream(None).push("sk-LIVE") == "sk-LIVE"


async def test_streamed_reply_and_output_never_show_a_secret_split_across_chunks() -> None:
    from codeact.services import SecretsProvider

    secret = "sk-LIVE-7f3a9c2e51"
    script = f'print("k=" + "{secret[:6]}" + "{secret[6:]}")\n{{"type": "final_result", "value": 1}}'
    reply = f"Using {secret} now.\n```python\n{script}\n```"
    agent = _agent(ScriptedModel([reply], chars_per_token=3))
    service = InMemorySessionService()
    runner = Runner(app_name="app", agent=agent, session_service=service, secrets=SecretsProvider({"k": secret}))
    await service.create_session(app_name="app", user_id="u", session_id="s")
    events = [
        e
        async for e in runner.run_async(
            user_id="u", session_id="s", new_message="go", run_config=RunConfig(streaming=True)
        )
    ]
    chunks = [e.text for e in events if e.partial and e.kind == "model_reply"]
    assert len(chunks) > 10 and "".join(chunks).startswith("Using [REDACTED] now.")
    assert not any(secret[:4] in "".join(chunks[:i]) for i in range(1, 12))  # split over chunks, never shown
    complete = next(e for e in events if e.kind == "model_reply" and not e.partial)
    assert "".join(chunks) == complete.text.replace(secret, "[REDACTED]")  # all of it, redacted
    output = [e.text for e in events if e.partial and e.kind == "script_output"]
    assert output == ["k=[REDACTED]\n"]
