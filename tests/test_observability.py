"""Logging tree, OpenTelemetry GenAI spans (SDK in-memory exporter) and the rich event printer."""

from __future__ import annotations

import logging

import anyio
import pytest

from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel
from codeact.logs import LOGGER_NAMES, configure, log_tool_exception, logger
from codeact.models import LlmRequest
from codeact.runtime import Complete, Raised
from codeact.sessions import Content, Event, EventActions, FunctionCall, FunctionResponse, Part, ToolConfirmation

pytestmark = pytest.mark.anyio

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk (test extra) is not installed")
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from codeact.telemetry import CAPTURE_ENV, start_agent_run, tracing_available  # noqa: E402


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = otel_sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


# ------------------------------------------------------------------ OpenTelemetry


async def test_run_spans_nest_and_follow_the_genai_conventions(spans, anyio_backend):
    provider, exporter = spans
    assert tracing_available()
    model = ScriptedModel(["```python\n1\n```"])
    run = start_agent_run("coder", session_id="s1", user_id="u1", invocation_id="i1", tracer_provider=provider)
    request = LlmRequest(contents=[Content.from_text("hi")])
    with run.chat("scripted", request=request) as chat:
        chat.record_response(await model.generate_content(request))
    with run.script("x = 1\nx") as script:
        script.record_step(Complete(1, "out\n"))
    with run.tool("search", "call-1", {"q": "cats"}) as call:
        call.record_result(["a"])
    run.end()
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    assert set(by_name) == {"invoke_agent coder", "chat scripted", "execute_script", "execute_tool search"}
    root = by_name["invoke_agent coder"]
    assert root.parent is None and root.kind is SpanKind.INTERNAL
    assert dict(root.attributes) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "codeact",
        "gen_ai.agent.name": "coder",
        "gen_ai.conversation.id": "s1",
        "codeact.user.id": "u1",
        "codeact.invocation.id": "i1",
    }
    for child in ("chat scripted", "execute_script", "execute_tool search"):
        assert by_name[child].parent.span_id == root.context.span_id
        assert by_name[child].context.trace_id == root.context.trace_id
    chat_span = by_name["chat scripted"]
    assert chat_span.kind is SpanKind.CLIENT
    assert chat_span.attributes["gen_ai.request.model"] == "scripted"
    assert chat_span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    tool_span = by_name["execute_tool search"]
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call-1"
    assert tool_span.attributes["gen_ai.tool.type"] == "function"
    # contents are not recorded unless asked for
    assert "gen_ai.tool.call.arguments" not in tool_span.attributes
    assert "codeact.script.code" not in by_name["execute_script"].attributes
    assert by_name["execute_script"].attributes["codeact.script.outcome"] == "complete"
    assert by_name["execute_script"].attributes["codeact.script.stdout_bytes"] == 4


def test_failures_set_error_status_and_type(spans):
    provider, exporter = spans
    run = start_agent_run("coder", tracer_provider=provider)
    with pytest.raises(ValueError), run.tool("flaky"):
        raise ValueError("nope")
    with run.script("1/0") as script:
        script.record_step(Raised("ZeroDivisionError: division by zero"))
    run.end(error_code="max_iterations", error_message="too many turns")
    run.end(error_code="ignored")  # ends once
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    tool_span = by_name["execute_tool flaky"]
    assert tool_span.status.status_code is StatusCode.ERROR and tool_span.attributes["error.type"] == "ValueError"
    assert [e.name for e in tool_span.events] == ["exception"]
    assert by_name["execute_script"].attributes["error.type"] == "script_error"
    root = by_name["invoke_agent coder"]
    assert root.status.status_code is StatusCode.ERROR and root.attributes["error.type"] == "max_iterations"
    assert len(exporter.get_finished_spans()) == 3


def test_content_capture_is_opt_in(spans, monkeypatch):
    provider, exporter = spans
    monkeypatch.setenv(CAPTURE_ENV, "true")
    run = start_agent_run("coder", tracer_provider=provider)
    with run.tool("search", "k", {"q": "cats"}) as call:
        call.record_result({"hits": 2})
    with run.script("print(1)"):
        pass
    run.end()
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    assert by_name["execute_tool search"].attributes["gen_ai.tool.call.arguments"] == '{"q": "cats"}'
    assert by_name["execute_tool search"].attributes["gen_ai.tool.call.result"] == '{"hits": 2}'
    assert by_name["execute_script"].attributes["codeact.script.code"] == "print(1)"


async def test_the_run_span_survives_yields_of_an_async_generator(spans, anyio_backend):
    """The agent loop is an async generator: the run span must not be attached to the context
    across a yield (children name it as parent explicitly)."""
    provider, exporter = spans

    async def loop():
        run = start_agent_run("gen", tracer_provider=provider)
        assert not trace.get_current_span().get_span_context().is_valid
        for i in range(3):
            with run.tool(f"t{i}"):
                await anyio.sleep(0)
            yield i
        run.end()

    seen = [i async for i in loop()]
    assert seen == [0, 1, 2]
    finished = exporter.get_finished_spans()
    root = next(s for s in finished if s.name == "invoke_agent gen")
    assert sorted(s.name for s in finished if s.parent and s.parent.span_id == root.context.span_id) == [
        "execute_tool t0",
        "execute_tool t1",
        "execute_tool t2",
    ]


# ------------------------------------------------------------------ logging


def test_tool_exceptions_are_logged_with_traceback_and_the_model_text_is_short(caplog):
    def failing() -> None:
        raise KeyError("customer 7")

    try:
        failing()
    except KeyError as caught:
        exc = caught
        with caplog.at_level(logging.WARNING, logger="codeact.tools"):
            text = log_tool_exception("lookup", exc, call_key="c1", session_id="s")
    assert text == "KeyError: 'customer 7'"
    [record] = caplog.records
    assert record.name == "codeact.tools" and record.tool_name == "lookup" and record.call_key == "c1"
    assert record.exc_info[1] is exc
    assert "in failing" in caplog.text  # the traceback is on the host


def test_logger_tree_and_configure():
    assert all(logging.getLogger(n).name.startswith("codeact") for n in LOGGER_NAMES)
    assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)
    try:
        first = configure("DEBUG", rich=False)
        second = configure("INFO", rich=True)
        ours = [h for h in logger.handlers if getattr(h, "_codeact_configured", False)]
        assert ours == [second] and first not in logger.handlers and logger.level == logging.INFO
    finally:
        for h in list(logger.handlers):
            if getattr(h, "_codeact_configured", False):
                logger.removeHandler(h)
        logger.setLevel(logging.NOTSET)


# ------------------------------------------------------------------ console printer


def test_event_printer_renders_each_kind_of_event():
    rich_console = pytest.importorskip("rich.console")
    from codeact.console import EventPrinter

    console = rich_console.Console(record=True, width=100, color_system=None)
    printer = EventPrinter(console, show_empty=True)
    printer(Event(author="user", content=Content.from_text("what is 2+2?")))
    printer(Event(author="coder", content=Content.from_text("Let me compute.\n```python\nx = 2 + 2\nx\n```", "model")))
    printer(
        Event(
            author="coder",
            content=Content(
                role="model",
                parts=[
                    Part(function_call=FunctionCall(name="add", args={"a": 2}, id="k")),
                    Part(function_response=FunctionResponse(name="add", response={"result": 4}, id="k")),
                    Part(text="secret reasoning", thought=True),
                ],
            ),
            actions=EventActions(
                state_delta={"total": 4},
                requested_tool_confirmations={"k2": ToolConfirmation(tool_name="pay", function_call_id="k2", args={})},
            ),
        )
    )
    printer(Event(author="coder", error_code="max_iterations", error_message="gave up"))
    printer(Event(author="coder"))
    out = console.export_text()
    for fragment in ("what is 2+2?", "x = 2 + 2", '→ add({"a": 2})', '← add: {"result": 4}', 'state Δ {"total": 4}'):
        assert fragment in out
    assert "approval needed: pay({}) [k2]" in out and "error max_iterations: gave up" in out
    assert "[coder] ·" in out and "secret reasoning" not in out


async def test_event_printer_on_a_real_run(anyio_backend):
    rich_console = pytest.importorskip("rich.console")
    from codeact.console import EventPrinter

    console = rich_console.Console(record=True, width=100, color_system=None)
    printer = EventPrinter(console)
    model = ScriptedModel(['```python\n{"type": "final_result", "value": "forty-two"}\n```'])
    agent = CodeActAgent(name="calc", model=model, runtime=MontyRuntime())
    runner = Runner(app_name="a", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
    async for event in runner.run_async(user_id="u", session_id="s", new_message="answer"):
        printer(event)
    assert "forty-two" in console.export_text()
