"""The model layer: ScriptedModel, and OpenAIChatModel against a real local HTTP server."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

import codeact.models
from codeact.exceptions import CodeActError
from codeact.models import (
    BaseLlm,
    GenerateContentConfig,
    Llm,
    LlmRequest,
    LlmResponse,
    ModelError,
    ModelRateLimitError,
    ModelRequestsNotAllowedError,
    ModelResponseError,
    ModelTimeoutError,
    OpenAIChatModel,
    ScriptedModel,
    ScriptExhaustedError,
    Usage,
    stream_content,
)
from codeact.models._openai import _is_loopback
from codeact.sessions._types import Content, Part

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _no_remote_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here may reach a real model: only the loopback server below is allowed."""
    monkeypatch.setattr(codeact.models, "ALLOW_MODEL_REQUESTS", False)


def _request(*texts: str, **kwargs: Any) -> LlmRequest:
    roles = ["user", "model"]
    return LlmRequest(contents=[Content.from_text(t, role=roles[i % 2]) for i, t in enumerate(texts)], **kwargs)


# -- package surface ------------------------------------------------------------------------


def test_exports() -> None:
    public = {name for name in vars(codeact.models) if not name.startswith("_")}
    assert public == set(codeact.models.__all__)
    assert isinstance(codeact.models.__all__, tuple)


def test_error_tree() -> None:
    for cls in (ModelTimeoutError, ModelRateLimitError, ModelResponseError, ModelRequestsNotAllowedError):
        assert issubclass(cls, ModelError)
    assert issubclass(ModelError, CodeActError)
    assert issubclass(ScriptExhaustedError, CodeActError)


def test_response_text_and_usage() -> None:
    content = Content(role="model", parts=[Part(text="hmm", thought=True), Part(text="a"), Part(text="b")])
    assert LlmResponse(content=content).text == "ab"
    assert LlmResponse().text == ""
    assert Usage(prompt_tokens=3, completion_tokens=4).total_tokens == 7
    assert Usage().total_tokens is None


def test_config_forbids_unknown_fields() -> None:
    with pytest.raises(ValueError, match="temprature"):
        GenerateContentConfig(temprature=0.5)  # type: ignore[call-arg]


# -- ScriptedModel --------------------------------------------------------------------------


async def test_scripted_replies_in_order_and_records_requests() -> None:
    reply = LlmResponse(content=Content.from_text("third", role="model"), finish_reason="length")
    model = ScriptedModel(["first", Content.from_text("second", role="model"), reply])
    assert isinstance(model, Llm)
    assert model.name == "scripted"
    first = await model.generate_content(_request("q1"))
    assert first.text == "first"
    assert first.content is not None and first.content.role == "model"
    assert first.finish_reason == "stop"
    assert (await model.generate_content(_request("q1", "first", "q2"))).text == "second"
    assert await model.generate_content(_request("q3")) is reply
    assert model.remaining == 0
    assert [[c.text for c in r.contents] for r in model.requests] == [["q1"], ["q1", "first", "q2"], ["q3"]]


async def test_scripted_records_a_snapshot_of_each_request() -> None:
    model = ScriptedModel(["ok"])
    request = _request("q")
    await model.generate_content(request)
    request.contents.append(Content.from_text("later"))
    assert len(model.requests[0].contents) == 1


async def test_scripted_exhaustion() -> None:
    model = ScriptedModel(["only"], name="demo")
    await model.generate_content(_request("a"))
    with pytest.raises(ScriptExhaustedError) as info:
        await model.generate_content(_request("b"))
    assert str(info.value) == "ScriptedModel 'demo' was given 1 reply and was asked for reply #2"
    assert len(model.requests) == 2
    with pytest.raises(ScriptExhaustedError, match="was given 0 replies and was asked for reply #1"):
        await ScriptedModel([]).generate_content(_request("a"))


async def test_scripted_raises_scripted_exceptions() -> None:
    model = ScriptedModel([ModelTimeoutError("slow"), "after"])
    with pytest.raises(ModelTimeoutError, match="slow"):
        await model.generate_content(_request("a"))
    assert (await model.generate_content(_request("a"))).text == "after"


async def test_scripted_by_sync_function() -> None:
    model = ScriptedModel(lambda req: f"echo {req.contents[-1].text}")
    assert (await model.generate_content(_request("a"))).text == "echo a"
    assert (await model.generate_content(_request("b"))).text == "echo b"
    assert model.remaining is None
    assert len(model.requests) == 2


async def test_scripted_by_async_function() -> None:
    import anyio

    async def reply(req: LlmRequest) -> Content:
        await anyio.sleep(0)
        return Content.from_text(str(len(req.contents)), role="model")

    model = ScriptedModel(reply, name="counter")
    assert model.name == "counter"
    assert (await model.generate_content(_request("a", "b", "c"))).text == "3"


@pytest.mark.parametrize("bad", [42, None])
async def test_scripted_rejects_bad_replies(bad: Any) -> None:
    with pytest.raises(TypeError, match="must be str, Content or LlmResponse"):
        await ScriptedModel([bad]).generate_content(_request("a"))


def test_scripted_rejects_a_single_string() -> None:
    with pytest.raises(TypeError, match="sequence of replies or a function"):
        ScriptedModel("hello")


async def test_default_stream_yields_the_complete_reply() -> None:
    class Whole(BaseLlm):
        async def generate_content(self, request: LlmRequest) -> LlmResponse:
            return LlmResponse(content=Content.from_text("x", role="model"))

    items = [r async for r in Whole().generate_content_stream(_request("a"))]
    assert [(r.text, r.partial) for r in items] == [("x", False)]
    assert [r.text async for r in stream_content(Whole(), _request("a"))] == ["x"]


async def test_stream_content_without_stream_method() -> None:
    class Minimal:
        name = "minimal"

        async def generate_content(self, request: LlmRequest) -> LlmResponse:
            return LlmResponse(content=Content.from_text("m", role="model"))

    assert isinstance(Minimal(), Llm)
    assert not isinstance(Minimal(), BaseLlm)
    assert [r.text async for r in stream_content(Minimal(), _request("a"))] == ["m"]


# -- a real local chat-completions server ---------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: bytes | dict[str, Any] = field(default_factory=lambda: completion("hello"))
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)  # arrival time, seconds


def completion(text: str, **message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text, **message}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
    }


class ChatServer:
    """Answers POSTs with the scripted ``replies`` in order (the last one repeats)."""

    def __init__(self) -> None:
        self.replies: list[Reply] = [Reply()]
        self.received: list[Received] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length))
                with server._lock:
                    server.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    n = len(server.received)
                    reply = server.replies[min(n, len(server.replies)) - 1]
                time.sleep(reply.delay)
                payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join()


@pytest.fixture
def server() -> Iterator[ChatServer]:
    s = ChatServer()
    yield s
    s.close()


def _model(server: ChatServer, **kwargs: Any) -> OpenAIChatModel:
    kwargs.setdefault("api_key", "sk-test-secret-123")
    return OpenAIChatModel("test-model", base_url=server.url, **kwargs)


async def test_text_reply_and_request_body(server: ChatServer) -> None:
    model = _model(server)
    assert isinstance(model, Llm)
    assert model.name == "test-model"
    request = LlmRequest(
        contents=[
            Content.from_text("SYSTEM PROMPT\ntask", role="user"),
            Content(role="model", parts=[Part(text="thinking...", thought=True), Part(text="x = 1")]),
            Content.from_text("ok", role="user"),
        ],
        system_instruction="be brief",
        config=GenerateContentConfig(
            temperature=0.2,
            top_p=0.9,
            top_k=40,
            max_output_tokens=64,
            stop_sequences=["```\n"],
            seed=7,
            extra={"min_p": 0.05},
        ),
    )
    response = await model.generate_content(request)
    assert response.text == "hello"
    assert response.content is not None and response.content.role == "model"
    assert response.finish_reason == "stop"
    assert response.usage == Usage(prompt_tokens=11, completion_tokens=2)
    assert response.error_code is None

    [got] = server.received
    assert got.path == "/v1/chat/completions"
    assert got.headers["authorization"] == "Bearer sk-test-secret-123"
    assert got.body == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "SYSTEM PROMPT\ntask"},
            {"role": "assistant", "content": "x = 1"},
            {"role": "user", "content": "ok"},
        ],
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 64,
        "stop": ["```\n"],
        "seed": 7,
        "top_k": 40,
        "min_p": 0.05,
    }


async def test_request_model_overrides_and_extra_body(server: ChatServer) -> None:
    model = _model(server, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    await model.generate_content(_request("hi", model="other-model"))
    body = server.received[0].body
    assert body["model"] == "other-model"
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "temperature" not in body


async def test_reasoning_becomes_a_thought_part(server: ChatServer) -> None:
    server.replies = [Reply(body=completion("answer", reasoning_content="let me think"))]
    response = await _model(server).generate_content(_request("q"))
    assert response.content is not None
    assert [(p.text, p.thought) for p in response.content.parts] == [("let me think", True), ("answer", False)]
    assert response.text == "answer"


async def test_api_key_from_env(server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "sk-from-env-456")
    model = OpenAIChatModel("test-model", base_url=server.url, api_key_env="MY_LLM_KEY")
    await model.generate_content(_request("q"))
    assert server.received[0].headers["authorization"] == "Bearer sk-from-env-456"
    assert "sk-from-env-456" not in repr(model)


@pytest.mark.parametrize(
    ("status", "error"),
    [(429, {"error": {"message": "slow down", "type": "rate_limit"}}), (500, {"error": {"message": "boom"}})],
)
async def test_retry_then_success(server: ChatServer, status: int, error: dict[str, Any]) -> None:
    server.replies = [Reply(status=status, body=error, headers={"retry-after-ms": "10"}), Reply()]
    response = await _model(server, max_retries=2).generate_content(_request("q"))
    assert response.text == "hello"
    first, second = server.received
    assert second.body == first.body
    # The server's 10 ms retry-after was honoured, not the SDK's default backoff (>= 0.375 s).
    assert second.at - first.at < 0.3


async def test_rate_limit_after_retries(server: ChatServer) -> None:
    server.replies = [
        Reply(status=429, body={"error": {"message": "quota exceeded"}}, headers={"retry-after-ms": "10"})
    ]
    with pytest.raises(ModelRateLimitError) as info:
        await _model(server, max_retries=2).generate_content(_request("q"))
    assert len(server.received) == 3
    assert info.value.status_code == 429
    assert "'test-model'" in str(info.value)
    assert "after 2 retries" in str(info.value)
    assert "quota exceeded" in str(info.value)


async def test_no_retry_on_client_errors(server: ChatServer) -> None:
    server.replies = [Reply(status=400, body={"error": {"message": "bad 'temperature'"}})]
    with pytest.raises(ModelError) as info:
        await _model(server, max_retries=3).generate_content(_request("q"))
    assert type(info.value) is ModelError
    assert info.value.status_code == 400
    assert "HTTP 400" in str(info.value) and "bad 'temperature'" in str(info.value)
    assert len(server.received) == 1


async def test_timeout(server: ChatServer) -> None:
    server.replies = [Reply(delay=0.6)]
    with pytest.raises(ModelTimeoutError) as info:
        await _model(server, timeout=0.2, max_retries=0).generate_content(_request("q"))
    assert str(info.value) == f"model 'test-model' at {server.url}: no reply within 0.2 s (after 0 retries)"
    assert info.value.status_code is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "body is not JSON: '{not json'"),
        ({"id": "x", "object": "chat.completion"}, "no 'choices'"),
        ({"choices": []}, "no 'choices'"),
        ({"choices": [{"index": 0}]}, "the first choice has no 'message'"),
        ({"error": {"message": "model not loaded"}}, "error reply: 'model not loaded'"),
        (b"[1, 2]", "expected a JSON object, got list"),
    ],
)
async def test_malformed_body(server: ChatServer, body: bytes | dict[str, Any], message: str) -> None:
    server.replies = [Reply(body=body)]
    with pytest.raises(ModelResponseError) as info:
        await _model(server).generate_content(_request("q"))
    assert str(info.value) == f"model 'test-model' at {server.url}: malformed chat completion: {message}"


async def test_api_key_never_in_error_messages(server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-live-do-not-leak-789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    server.replies = [Reply(status=401, body={"error": {"message": f"Incorrect API key provided: {secret}"}})]
    model = OpenAIChatModel("test-model", base_url=server.url, max_retries=0)
    with pytest.raises(ModelError) as info:
        await model.generate_content(_request("q"))
    assert server.received[0].headers["authorization"] == f"Bearer {secret}"
    assert info.value.status_code == 401
    assert secret not in str(info.value)
    assert "Incorrect API key provided: ***" in str(info.value)

    server.replies = [Reply(body=f"oops {secret}".encode())]
    with pytest.raises(ModelResponseError) as info2:
        await model.generate_content(_request("q"))
    assert secret not in str(info2.value)


async def test_missing_api_key_hint(server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    server.replies = [Reply(status=401, body={"error": {"message": "unauthorized"}})]
    model = OpenAIChatModel("test-model", base_url=server.url, api_key_env="NO_SUCH_KEY_VAR", max_retries=0)
    with pytest.raises(ModelError, match=r"no API key: pass api_key= or set \$NO_SUCH_KEY_VAR"):
        await model.generate_content(_request("q"))


async def test_connection_refused() -> None:
    s = ChatServer()
    url = s.url
    s.close()
    model = OpenAIChatModel("test-model", base_url=url, api_key="k", max_retries=0)
    with pytest.raises(ModelError, match=r"connection failed after 0 retries") as info:
        await model.generate_content(_request("q"))
    assert f"is a server listening at {url}?" in str(info.value)


@pytest.mark.parametrize(
    "base_url",
    [None, "https://api.openai.com/v1", "https://api.groq.com/openai/v1", "https://8.8.8.8/v1"],
)
async def test_no_api_key_for_a_hosted_endpoint_fails_before_any_request(
    base_url: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAIChatModel("gpt-x", base_url=base_url, max_retries=3)
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        await model.generate_content(_request("q"))
    message = str(info.value)
    assert not isinstance(info.value, ModelRequestsNotAllowedError)  # checked first: nothing is sent
    assert "no API key: pass api_key= or set $OPENAI_API_KEY" in message
    assert "no request was sent" in message and "retries" not in message
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("host", ["127.0.0.1", "10.0.0.5", "192.168.1.20", "gpu-box", "llm.local", "vllm.internal"])
def test_a_local_server_needs_no_key(host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    OpenAIChatModel("m", base_url=f"http://{host}:8000/v1")._check_api_key("m")  # does not raise


async def test_a_local_server_without_a_key_still_gets_the_request(server: ChatServer, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    model = OpenAIChatModel("test-model", base_url=server.url, api_key_env="NO_SUCH_KEY_VAR")
    assert (await model.generate_content(_request("q"))).text == "hello"
    assert server.received[0].headers["authorization"] == "Bearer no-api-key"


async def test_an_explicit_key_or_env_key_is_never_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    OpenAIChatModel("m")._check_api_key("m")
    monkeypatch.delenv("OPENAI_API_KEY")
    OpenAIChatModel("m", api_key="none")._check_api_key("m")


@pytest.mark.parametrize(("suffix", "suggested"), [("", ""), ("/", ""), ("/api", "/api")])
async def test_a_404_from_a_base_url_without_v1_suggests_adding_it(
    server: ChatServer, suffix: str, suggested: str
) -> None:
    root = server.url.removesuffix("/v1")
    server.replies = [Reply(status=404, body={"detail": "Not Found"})]
    model = OpenAIChatModel("test-model", base_url=root + suffix, api_key="k", max_retries=0)
    with pytest.raises(ModelError) as info:
        await model.generate_content(_request("q"))
    assert info.value.status_code == 404
    assert f"try base_url='{root}{suggested}/v1'" in str(info.value)
    assert server.received[0].path == f"{suggested}/chat/completions"


async def test_a_404_under_v1_gives_no_v1_hint(server: ChatServer) -> None:
    server.replies = [Reply(status=404, body={"error": {"message": "model 'nope' not found"}})]
    with pytest.raises(ModelError) as info:
        await _model(server, max_retries=0).generate_content(_request("q"))
    assert "/v1" not in str(info.value).split("HTTP 404", 1)[1]
    assert "model 'nope' not found" in str(info.value)


async def test_shared_client_with_async_with(server: ChatServer) -> None:
    model = _model(server)
    async with model:
        assert (await model.generate_content(_request("a"))).text == "hello"
        assert (await model.generate_content(_request("b"))).text == "hello"
    assert len(server.received) == 2
    assert (await model.generate_content(_request("c"))).text == "hello"  # after close: a fresh client


async def test_unknown_role_is_rejected(server: ChatServer) -> None:
    with pytest.raises(ValueError, match="role 'tool'"):
        await _model(server).generate_content(LlmRequest(contents=[Content.from_text("x", role="tool")]))
    assert server.received == []


# -- the ALLOW_MODEL_REQUESTS guard ---------------------------------------------------------


@pytest.mark.parametrize("base_url", ["https://api.openai.com/v1", "http://10.0.0.5:8000/v1", None])
async def test_guard_refuses_remote_hosts(base_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAIChatModel("gpt-x", base_url=base_url, api_key="k")
    with pytest.raises(ModelRequestsNotAllowedError, match="ALLOW_MODEL_REQUESTS is False"):
        await model.generate_content(_request("q"))


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("[::1]", True),
        ("10.0.0.1", False),
        ("localhost.example.com", False),
        ("api.openai.com", False),
    ],
)
def test_guard_loopback_hosts(host: str, loopback: bool) -> None:
    assert _is_loopback(urlsplit(f"http://{host}:1234/v1").hostname) is loopback


async def test_guard_off_lets_requests_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codeact.models, "ALLOW_MODEL_REQUESTS", True)
    # A non-routable documentation address: the request is attempted and fails on connect.
    model = OpenAIChatModel("gpt-x", base_url="http://192.0.2.1:9/v1", api_key="k", timeout=0.2, max_retries=0)
    with pytest.raises((ModelTimeoutError, ModelError)) as info:
        await model.generate_content(_request("q"))
    assert not isinstance(info.value, ModelRequestsNotAllowedError)


# -- construction ---------------------------------------------------------------------------


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match=r"pip install 'codeact\[openai\]'"):
        OpenAIChatModel("m")


@pytest.mark.parametrize(("kwargs", "message"), [({"timeout": 0}, "timeout"), ({"max_retries": -1}, "max_retries")])
def test_bad_settings(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OpenAIChatModel("m", **kwargs)


def test_base_url_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert OpenAIChatModel("m").base_url == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1/")
    assert OpenAIChatModel("m").base_url == "http://localhost:11434/v1"
