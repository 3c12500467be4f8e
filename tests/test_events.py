"""A run's events in ADK's shape (docs/events.md): model replies with the script
(``executable_code``), script results (feedback and ``code_execution_result``), opt-in tool
call / response events, usage totals, the transcript kept at ``max_iterations``, the
OpenTelemetry spans of a real run, and tool exceptions logged on the host.

Real Monty interpreter throughout; SQLite files where storage matters."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest

from codeact import (
    CodeActAgent,
    FunctionTool,
    InMemorySessionService,
    MontyRuntime,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.models import LlmResponse, Usage
from codeact.sessions import Content, Event, Part

pytestmark = pytest.mark.anyio

APP, USER = "app", "u"


def fence(code: str) -> str:
    return f"Let me look.\n```python\n{code.strip()}\n```\n"


def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def lookup(key: str) -> dict[str, Any]:
    """Looks a key up."""
    return {"key": key, "found": True}


def broken(x: int) -> int:
    """Always fails."""
    raise ValueError(f"bad x {x}")


OBSERVE = fence('print("hi")\n{"type": "observation", "value": call_tool("add", {"a": 1, "b": 2})}')
FINAL = fence('{"type": "final_result", "value": "three"}')


async def run_once(
    agent: CodeActAgent, service: Any, message: str = "go", session_id: str = "s", **config: Any
) -> list[Event]:
    runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
    return [
        e
        async for e in runner.run_async(
            user_id=USER, session_id=session_id, new_message=message, run_config=RunConfig(**config)
        )
    ]


# ------------------------------------------------------------------ per-script events


async def test_model_reply_and_script_result_events_have_adks_shape(anyio_backend):
    model = ScriptedModel(
        [
            LlmResponse(
                content=Content.from_text(OBSERVE, role="model"), usage=Usage(prompt_tokens=10, completion_tokens=4)
            ),
            LlmResponse(
                content=Content.from_text(FINAL, role="model"), usage=Usage(prompt_tokens=30, completion_tokens=2)
            ),
        ]
    )
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[add])
    events = await run_once(agent, InMemorySessionService())
    assert [e.kind for e in events] == ["model_reply", "script_result", "model_reply", "script_result", None]

    reply = events[0]
    assert reply.author == "coder" and reply.content.role == "model"
    text, code = reply.content.parts
    assert text.text == OBSERVE  # the reply as the model wrote it (what the transcript holds)
    assert code.executable_code.language == "PYTHON"
    assert code.executable_code.code.startswith('print("hi")') and "call_tool" in code.executable_code.code
    assert reply.usage_metadata.model_dump() == {
        "prompt_token_count": 10,
        "candidates_token_count": 4,
        "total_token_count": 14,
        "model_calls": 1,
    }

    result = events[1]
    assert result.content.role == "user"
    fed, out, ended = result.content.parts
    assert fed.text == "Observation:\n3"
    assert out.text == "Output (stdout):\nhi\n"
    assert (ended.code_execution_result.outcome, ended.code_execution_result.output) == ("OUTCOME_OK", "hi\n")
    # exactly what the model was sent next
    assert [c.text for c in model.requests[1].contents[-2:]] == [fed.text, out.text]

    # the final script's result has no feedback, only its outcome; then the answer
    assert [p.text for p in events[3].content.parts][:-1] == []
    assert events[3].content.parts[-1].code_execution_result.outcome == "OUTCOME_OK"
    assert events[-1].text == "three"
    assert [e.is_final_response() for e in events] == [False, False, False, False, True]
    # no tool events by default: the call is in the journal only
    assert not any(e.get_function_calls() or e.get_function_responses() for e in events)


async def test_failed_scripts_and_replies_without_code_are_shown(anyio_backend):
    model = ScriptedModel(["I think the answer is 3.", fence("1 / 0"), FINAL])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[add])
    events = await run_once(agent, InMemorySessionService())
    kinds = [e.kind for e in events]
    assert kinds == ["model_reply", "script_result"] * 3 + [None]
    no_code = events[0]
    assert [p.executable_code for p in no_code.content.parts] == [None]
    assert events[1].content.parts[-1].code_execution_result is None  # nothing ran
    failed = events[3].content.parts
    assert failed[0].text.startswith("Error during execution:") and "ZeroDivisionError" in failed[0].text
    assert failed[-1].code_execution_result.outcome == "OUTCOME_FAILED"


async def test_progress_events_do_not_enter_the_next_runs_history(anyio_backend):
    model = ScriptedModel([OBSERVE, FINAL, FINAL])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[add])
    service = InMemorySessionService()
    await run_once(agent, service, "first")
    await run_once(agent, service, "second")
    assert [(c.role, c.text) for c in model.requests[2].contents] == [
        ("user", "first"),
        ("model", "three"),
        ("user", "second"),
    ]


# ------------------------------------------------------------------ tool events (opt-in)


async def test_tool_events_are_opt_in_and_stored_in_sqlite(tmp_path, anyio_backend):
    db = tmp_path / "events.db"
    seen_before_run: list[list[str | None]] = []

    with SqliteSessionService(db) as service:

        async def watched(a: int, b: int) -> int:
            """Adds, and records which events were stored when it ran."""
            stored = await service.get_session(app_name=APP, user_id=USER, session_id="s")
            seen_before_run.append([e.kind for e in stored.events])
            return a + b

        script = fence(
            'x = call_tool("watched", {"a": 1, "b": 2})\n'
            'info = call_tool("lookup", {"key": "k"})\n'
            "try:\n"
            '    call_tool("broken", {"x": 7})\n'
            "except ValueError as e:\n"
            "    err = str(e)\n"
            '{"type": "final_result", "value": [x, info["found"], err]}'
        )
        agent = CodeActAgent(
            name="coder",
            model=ScriptedModel([script]),
            runtime=MontyRuntime(),
            tools=[FunctionTool(watched), lookup, broken],
        )
        events = await run_once(agent, service, emit_tool_events=True)

    calls = [e for e in events if e.kind == "tool_call"]
    responses = [e for e in events if e.kind == "tool_response"]
    assert [c.get_function_calls()[0].name for c in calls] == ["watched", "lookup", "broken"]
    assert [r.get_function_responses()[0].name for r in responses] == ["watched", "lookup", "broken"]
    first_call = calls[0].get_function_calls()[0]
    assert first_call.args == {"a": 1, "b": 2}
    assert calls[0].content.role == "model" and responses[0].content.role == "user"
    # each response has its call's id (the call key: <invocation>:<iteration>:<position>)
    assert [c.get_function_calls()[0].id for c in calls] == [r.get_function_responses()[0].id for r in responses]
    assert first_call.id == f"{events[0].invocation_id}:1:0"
    # ADK's convention: a non-dict result is wrapped as {"result": ...}; a dict is as is
    assert [r.get_function_responses()[0].response for r in responses] == [
        {"result": 3},
        {"key": "k", "found": True},
        {"error": "ValueError: bad x 7"},
    ]
    # the call event is stored before the tool runs
    assert seen_before_run == [[None, "model_reply", "tool_call"]]
    assert not any(e.is_final_response() for e in calls + responses)
    # order: call, response, call, response ...
    assert [e.kind for e in events if e.kind and e.kind.startswith("tool")] == ["tool_call", "tool_response"] * 3

    with SqliteSessionService(db) as service:
        stored = await service.get_session(app_name=APP, user_id=USER, session_id="s")
    assert [e.model_dump() for e in stored.events[1:]] == [e.model_dump() for e in events]


class _Crash(BaseException):
    pass


async def test_a_recovered_turn_does_not_repeat_the_tool_events_of_journaled_calls(tmp_path, anyio_backend):
    """The turn crashes just after the second call's outcome is journaled; the recovery
    replays both calls from the journal (no tool runs, no new events for them) and runs the
    third."""
    db = tmp_path / "crash.db"
    ran: list[int] = []

    def inc(x: int) -> int:
        """Adds one."""
        ran.append(x)
        return x + 1

    script = fence(
        't = 0\nfor i in range(3):\n    t += call_tool("inc", {"x": i})\n{"type": "final_result", "value": t}'
    )

    class CrashAfterTwo(SqliteSessionService):
        outcomes = 0

        async def append_journal(self, session: Any, turn: str, records: Any, **kwargs: Any) -> None:
            await super().append_journal(session, turn, records, **kwargs)
            self.outcomes += sum(1 for r in records if r.kind == "outcome")
            if self.outcomes == 2:
                raise _Crash

    def build(replies: list[str]) -> CodeActAgent:
        return CodeActAgent(name="coder", model=ScriptedModel(replies), runtime=MontyRuntime(), tools=[inc])

    with CrashAfterTwo(db) as service:
        with pytest.raises(_Crash):
            await run_once(build([script]), service, emit_tool_events=True)
    with SqliteSessionService(db) as service:
        runner = Runner(app_name=APP, agent=build([]), session_service=service)
        events = [
            e async for e in runner.run_async(user_id=USER, session_id="s", run_config=RunConfig(emit_tool_events=True))
        ]
        stored = await service.get_session(app_name=APP, user_id=USER, session_id="s")
    assert events[-1].text == "6"
    assert ran == [0, 1, 2]  # each tool ran once
    # the recovery emitted only the third call's pair
    assert [
        (e.kind, (e.get_function_calls() or e.get_function_responses())[0].id[-1])
        for e in events
        if e.kind and e.kind.startswith("tool")
    ] == [("tool_call", "2"), ("tool_response", "2")]
    keys = [
        (e.kind, (e.get_function_calls() or e.get_function_responses())[0].id)
        for e in stored.events
        if e.kind in ("tool_call", "tool_response")
    ]
    assert len(keys) == len(set(keys))  # no duplicates
    # the crash fell between call 1's journaled outcome and its response event: that one
    # response event is missing (docs/events.md: tool events are at most once around a crash)
    first = keys[0][1].rsplit(":", 1)[0]
    assert keys == [
        ("tool_call", f"{first}:0"),
        ("tool_response", f"{first}:0"),
        ("tool_call", f"{first}:1"),
        ("tool_call", f"{first}:2"),
        ("tool_response", f"{first}:2"),
    ]


# ------------------------------------------------------------------ usage


async def test_usage_totals_on_the_final_event(anyio_backend):
    model = ScriptedModel(
        [
            LlmResponse(
                content=Content.from_text(OBSERVE, role="model"), usage=Usage(prompt_tokens=100, completion_tokens=7)
            ),
            LlmResponse(
                content=Content.from_text(FINAL, role="model"), usage=Usage(prompt_tokens=150, completion_tokens=5)
            ),
        ]
    )
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[add])
    events = await run_once(agent, InMemorySessionService())
    per_call = [e.usage_metadata.total_token_count for e in events if e.kind == "model_reply"]
    assert per_call == [107, 155]
    assert events[-1].usage_metadata.model_dump() == {
        "prompt_token_count": 250,
        "candidates_token_count": 12,
        "total_token_count": 262,
        "model_calls": 2,
    }
    assert [e.usage_metadata for e in events if e.kind == "script_result"] == [None, None]


async def test_usage_totals_on_an_error_and_on_a_suspension(anyio_backend):
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([OBSERVE, OBSERVE]),
        runtime=MontyRuntime(),
        tools=[add],
        max_iterations=2,
    )
    events = await run_once(agent, InMemorySessionService())
    assert events[-1].error_code == "codeact.max_iterations"
    assert events[-1].usage_metadata.model_calls == 2
    assert events[-1].usage_metadata.total_token_count is None  # the model reported no tokens

    gated = CodeActAgent(
        name="coder",
        model=ScriptedModel([fence('call_tool("add", {"a": 1, "b": 1})')]),
        runtime=MontyRuntime(),
        tools=[FunctionTool(add, requires_confirmation=True)],
    )
    events = await run_once(gated, InMemorySessionService())
    (ask,) = [e for e in events if e.actions.requested_tool_confirmations]
    assert ask.usage_metadata.model_calls == 1


# ------------------------------------------------------------------ max_iterations keeps the transcript


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_run_ended_at_max_iterations_continues_with_its_transcript(store, tmp_path, anyio_backend):
    replies = [
        fence('{"type": "observation", "value": call_tool("add", {"a": 1, "b": 1})}'),
        fence('print("half way")\n{"type": "observation", "value": call_tool("add", {"a": 2, "b": 2})}'),
        FINAL,
    ]
    model = ScriptedModel(replies)
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[add], max_iterations=2)
    service = InMemorySessionService() if store == "memory" else SqliteSessionService(tmp_path / "t.db")
    with service:
        first = await run_once(agent, service, "add things")
        assert first[-1].error_code == "codeact.max_iterations"
        assert "send another message" in first[-1].error_message
        transcript = [(c.role, c.text) for c in model.requests[1].contents] + [
            ("user", "Observation:\n4"),
            ("user", "Output (stdout):\nhalf way\n"),
        ]
        second = await run_once(agent, service, "continue")
    assert second[-1].text == "three"
    sent = [(c.role, c.text) for c in model.requests[2].contents]
    assert sent == [*transcript[:3], ("model", replies[1]), *transcript[3:], ("user", "continue")]
    assert sent[:4] == [
        ("user", "add things"),
        ("model", replies[0]),
        ("user", "Observation:\n2"),
        ("model", replies[1]),
    ]


# ------------------------------------------------------------------ OpenTelemetry spans of a real run

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk (test extra) is not installed")
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def exporter():
    """The process's tracer provider (set once: OpenTelemetry allows one) feeding an
    in-memory exporter, cleared for each test."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, otel_sdk.TracerProvider):
        provider = otel_sdk.TracerProvider()
        trace.set_tracer_provider(provider)
        provider = trace.get_tracer_provider()
    if not getattr(provider, "_codeact_events_test", False):
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        provider._codeact_events_test = True  # type: ignore[attr-defined]
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


async def test_a_real_run_records_nested_genai_spans(exporter, anyio_backend):
    model = ScriptedModel(
        [
            LlmResponse(
                content=Content.from_text(OBSERVE, role="model"), usage=Usage(prompt_tokens=10, completion_tokens=4)
            ),
            FINAL,
        ]
    )
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[add, broken])
    events = await run_once(agent, InMemorySessionService(), session_id="otel")
    assert events[-1].text == "three"
    spans = exporter.get_finished_spans()
    names = sorted(s.name for s in spans)
    assert names == sorted(
        ["invoke_agent coder", "chat scripted", "chat scripted", "execute_script", "execute_script", "execute_tool add"]
    )
    root = next(s for s in spans if s.name == "invoke_agent coder")
    assert root.attributes["gen_ai.conversation.id"] == "otel"
    assert root.attributes["gen_ai.usage.input_tokens"] == 10
    assert root.status.status_code is not StatusCode.ERROR
    for s in spans:
        if s is not root:
            assert s.parent is not None and s.parent.span_id == root.context.span_id, s.name
    chat = next(s for s in spans if s.name == "chat scripted")
    assert chat.attributes["gen_ai.usage.output_tokens"] == 4
    tool = next(s for s in spans if s.name == "execute_tool add")
    assert tool.attributes["gen_ai.tool.call.id"] == f"{events[0].invocation_id}:1:0"
    scripts = [s for s in spans if s.name == "execute_script"]
    assert sorted(s.attributes["codeact.script.outcome"] for s in scripts) == ["complete", "complete"]
    assert sorted(s.attributes["codeact.script.tool_calls"] for s in scripts) == [0, 1]


async def test_a_failed_tool_and_a_failed_run_mark_their_spans(exporter, anyio_backend):
    model = ScriptedModel([fence('call_tool("broken", {"x": 1})')] * 2)
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[broken], max_iterations=1)
    events = await run_once(agent, InMemorySessionService())
    assert events[-1].error_code == "codeact.max_iterations"
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["execute_tool broken"].status.status_code is StatusCode.ERROR
    assert spans["execute_tool broken"].attributes["error.type"] == "ValueError"
    assert spans["execute_script"].attributes["codeact.script.outcome"] == "raised"
    root = spans["invoke_agent coder"]
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["error.type"] == "codeact.max_iterations"


# ------------------------------------------------------------------ logging and the printer


async def test_a_tool_exception_is_logged_with_its_traceback_and_the_model_sees_no_traceback(caplog, anyio_backend):
    model = ScriptedModel([fence('call_tool("broken", {"x": 5})'), FINAL])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[broken])
    with caplog.at_level(logging.WARNING, logger="codeact.tools"):
        events = await run_once(agent, InMemorySessionService(), session_id="logged")
    (record,) = [r for r in caplog.records if r.name == "codeact.tools"]
    assert record.tool_name == "broken" and record.session_id == "logged"
    assert record.call_key == f"{events[0].invocation_id}:1:0"
    assert record.exc_info is not None and record.exc_info[0] is ValueError
    assert "raise ValueError" in caplog.text  # the traceback is on the host
    fed = model.requests[1].contents[-1].text
    assert fed.endswith("ValueError: bad x 5")  # the script's own traceback, nothing of the host's
    assert "raise ValueError" not in fed and __file__ not in fed and "_dispatch.py" not in fed


async def test_the_event_printer_shows_scripts_results_and_tool_events(anyio_backend):
    from rich.console import Console

    from codeact.console import EventPrinter

    model = ScriptedModel([OBSERVE, FINAL])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[add])
    events = await run_once(agent, InMemorySessionService(), emit_tool_events=True)
    out = io.StringIO()
    printer = EventPrinter(Console(file=out, width=100, color_system=None))
    for event in events:
        printer(event)
    text = out.getvalue()
    for expected in (
        "coder · model reply",
        'print("hi")',
        "coder · script result",
        "Observation:",
        "hi",
        "script ended",
        "→ add",
        "← add",
        "three",
    ):
        assert expected in text, expected
    # an executable_code part the text does not show is printed as code
    out.truncate(0)
    bare = Event(author="coder", content=Content(role="model", parts=[Part(text="see below")]))
    bare.content.parts.append(Part.model_validate({"executable_code": {"code": "x = 41 + 1"}}))
    printer(bare)
    assert "x = 41 + 1" in out.getvalue()


async def test_a_bytes_result_is_stored_in_its_tool_response_as_base64(tmp_path, anyio_backend):
    def blob() -> bytes:
        """Returns raw bytes."""
        return b"\xff\x00"

    model = ScriptedModel([fence('b = call_tool("blob", {})\n{"type": "final_result", "value": len(b)}')])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[blob])
    with SqliteSessionService(tmp_path / "b.db") as service:
        events = await run_once(agent, service, emit_tool_events=True)
        stored = await service.get_session(app_name=APP, user_id=USER, session_id="s")
    assert events[-1].text == "2"
    (response,) = [e for e in stored.events if e.kind == "tool_response"]
    assert response.get_function_responses()[0].response == {"result": "_wA="}
