"""``codeact.Decision`` and ``Runner.decide`` (issue 47): one typed decision, validated once
when built, sent through one path; a decision its call's kind does not accept is refused with
``DecisionRefusedError`` naming what the call accepts, before anything runs; an approval
restores the paused continuation once. Edited arguments: ``test_decision_edits``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import codeact
from codeact import (
    CodeActAgent,
    Decision,
    DecisionRefusedError,
    EditNotSupportedError,
    FunctionTool,
    InDoubtDecision,
    LongRunningFunctionTool,
    MontyRuntime,
    NoPendingCallError,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
    ValueConversionError,
)

pytestmark = pytest.mark.anyio

APP, USER, SESSION = "app", "u", "s"
WIRE = '```python\nw = call_tool("wire", {"amount": 9})\n{"type": "final_result", "value": w}\n```'
RENDER = '```python\nr = call_tool("render", {"scene": "a"})\n{"type": "final_result", "value": r}\n```'


def test_decision_is_exported_with_its_errors() -> None:
    assert {"Decision", "DecisionRefusedError", "EditNotSupportedError"} <= set(codeact.__all__)
    assert issubclass(DecisionRefusedError, NoPendingCallError)
    assert issubclass(EditNotSupportedError, NotImplementedError)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"verb": "resolve", "call_key": "t:0"}, "needs an action"),
        ({"verb": "approve", "action": "rerun"}, "action is for 'resolve' decisions only"),
        ({"verb": "complete"}, "needs the call_key"),
        ({"verb": "resolve", "action": "skip"}, "needs the call_key"),
        ({"verb": "recover", "call_key": "t:0"}, "names the turn, not a call"),
        ({"verb": "deny", "payload": 1}, "payload is for 'complete', 'approve'"),
        ({"verb": "resolve", "call_key": "t:0", "action": "rerun", "payload": 1}, "not 'resolve' with action 'rerun'"),
        ({"verb": "deny", "args": {"amount": 1}}, "are for 'approve' decisions only, not 'deny'"),
        ({"verb": "complete", "call_key": "t:0", "payload": 1, "error": "x"}, "either value or error"),
        ({"verb": "complete", "call_key": "t:0", "error": 7}, "error must be a str"),
        ({"verb": "deny", "error": "x"}, "error is for 'complete'"),
        ({"verb": "wave"}, "Input should be"),
        ({"verb": "approve", "colour": "red"}, "Extra inputs"),
    ],
)
def test_a_malformed_decision_is_refused_when_built(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Decision(**fields)


def test_a_payload_that_cannot_cross_is_refused_when_built() -> None:
    with pytest.raises(ValueConversionError, match="call 't:0'"):
        Decision(verb="complete", call_key="t:0", payload={"f": object()})
    decision = Decision(verb="resolve", call_key="t:0", action="skip", payload={"ok": [1, 2]}, actor="ops")
    assert decision.act == "skip" and decision.actor == "ops"
    assert Decision(verb="approve").act == "approve"


def runner_on(service: SqliteSessionService, replies: list[str], ran: list[str]) -> Runner:
    def wire(amount: int) -> str:
        """Wires money."""
        ran.append(f"wire {amount}")
        return f"wired {amount}"

    def render(scene: str) -> dict:
        """Starts a render."""
        ran.append(f"render {scene}")
        return {"status": "started"}

    tools = [FunctionTool(wire, requires_confirmation=True), LongRunningFunctionTool(render)]
    agent = CodeActAgent(name="coder", model=ScriptedModel(replies), runtime=MontyRuntime(), tools=tools)
    return Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


async def test_decide_approves_and_the_verbs_are_decide(tmp_path: Path) -> None:
    ran: list[str] = []
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = runner_on(service, [WIRE], ran)
        await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        (call,) = await runner.pending(user_id=USER, session_id=SESSION)
        assert call.accepts == ("approve", "deny") and call.awaits == "awaits approval or denial"
        decision = Decision(verb="approve", call_key=call.call_key, digest=call.digest, actor="reviewer")
        events = await collect(runner.decide(decision, user_id=USER, session_id=SESSION))
        assert events[-1].text == "wired 9" and ran == ["wire 9"]


@pytest.mark.parametrize(
    ("script", "decision", "awaits", "accepts"),
    [
        (WIRE, {"verb": "complete", "payload": 1}, "awaits approval or denial", ("approve", "deny")),
        (WIRE, {"verb": "resolve", "action": "rerun"}, "awaits approval or denial", ("approve", "deny")),
        (RENDER, {"verb": "approve"}, "awaits its result", ("complete", "deny")),
        (RENDER, {"verb": "resolve", "action": "skip", "payload": 1}, "awaits its result", ("complete", "deny")),
    ],
    ids=["complete-confirmation", "resolve-confirmation", "approve-completion", "skip-completion"],
)
async def test_a_decision_the_kind_does_not_accept_is_refused(
    tmp_path: Path, script: str, decision: dict[str, Any], awaits: str, accepts: tuple[str, ...]
) -> None:
    ran: list[str] = []
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = runner_on(service, [script], ran)
        await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        before = list(ran)
        (call,) = await runner.pending(user_id=USER, session_id=SESSION)
        with pytest.raises(DecisionRefusedError, match=awaits) as refused:
            await collect(runner.decide(Decision(call_key=call.call_key, **decision), user_id=USER, session_id=SESSION))
        assert (refused.value.call_key, refused.value.accepts) == (call.call_key, accepts)
        assert ran == before and await runner.pending(user_id=USER, session_id=SESSION) == [call]


async def test_a_run_config_in_doubt_decision_on_a_confirmation_is_refused(tmp_path: Path) -> None:
    ran: list[str] = []
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = runner_on(service, [WIRE], ran)
        await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        (call,) = await runner.pending(user_id=USER, session_id=SESSION)
        config = RunConfig(in_doubt_decisions={call.call_key: InDoubtDecision(action="rerun")})
        with pytest.raises(DecisionRefusedError, match="awaits approval or denial"):
            await collect(runner.run_async(user_id=USER, session_id=SESSION, run_config=config))
        assert ran == []


async def test_an_approval_restores_the_continuation_once(tmp_path: Path) -> None:
    """The runner verifies the paused turn once per call and the run resumes the continuation
    it restored (it was restored three times: the pick, the run's check, the agent's)."""
    ran: list[str] = []
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = runner_on(service, [WIRE], ran)
        await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        runtime = runner.agent.runtime  # type: ignore[attr-defined]
        real, restores = runtime.restore, []

        def counting(*args: Any, **kwargs: Any) -> Any:
            restores.append(1)
            return real(*args, **kwargs)

        runtime.restore = counting
        events = await collect(runner.approve(user_id=USER, session_id=SESSION))
        assert events[-1].text == "wired 9" and len(restores) == 1


@pytest.mark.parametrize("actor", ["al\x1b[31mice", "alice\nbob", "eve\u202e", "x" * 201])
def test_an_actor_with_control_characters_or_too_long_is_refused(actor: str) -> None:
    with pytest.raises(ValidationError, match="actor"):
        Decision(verb="approve", actor=actor)
    assert Decision(verb="approve", actor="Alice Smith (ops)").actor == "Alice Smith (ops)"
