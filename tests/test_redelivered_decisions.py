"""Keyed decisions delivered again after the process running them was killed (issue 25: a
DBOS worker dies, DBOS starts the workflow again with the same request and run key).

A child process runs one ``Runner`` call and is killed with SIGKILL at a barrier: after the
decision's claim is stored, inside a tool after its side effect, or after the first of two
announcement events. The test process then delivers the same call again, as DBOS would, and
checks that it ends as an uninterrupted call would have: the decision applied once, nothing
run twice that was recorded, nothing stored twice, and a call that may have run asked about
again rather than run again. Found by a review of the first redelivery fixes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_helpers import sigkill_at_barrier
from codeact import (
    CodeActAgent,
    FunctionTool,
    LongRunningFunctionTool,
    MontyRuntime,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)

pytestmark = pytest.mark.anyio

CHILD = textwrap.dedent(
    """
    import json, sys, threading
    import anyio
    from codeact import (CodeActAgent, FunctionTool, LongRunningFunctionTool, MontyRuntime, RunConfig, Runner,
                         ScriptedModel, SqliteSessionService)

    db, ledger, barrier, spec = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    action, key, stop = spec["action"], spec.get("call_key"), spec["stop"]

    def halt():
        open(barrier, "w").close()
        threading.Event().wait(600)  # the test kills this process now

    class Stopping(SqliteSessionService):
        async def save_turn(self, **kw):
            version = await super().save_turn(**kw)
            if stop == "claim" and ((kw["data"] or {}).get("claim") or {}).get("run_key") == "K":
                halt()  # the claim is stored; the resume has journaled nothing
            return version

        async def append_event(self, session, event):
            if stop == "announce2" and (event.custom_metadata or {}).get("codeact_run_key") == "K":
                if event.long_running_tool_ids:
                    halt()  # the first announcement event is stored, this second one not
            return await super().append_event(session, event)

    def pay(amount: int) -> str:
        \"\"\"Pays.\"\"\"
        with open(ledger, "a") as f:
            f.write(f"pay {amount} ({action})\\n")
        if stop == "tool":
            halt()  # the side effect is done, its outcome not recorded
        return f"paid {amount}"

    def render(scene: str) -> dict:
        \"\"\"Starts a render.\"\"\"
        with open(ledger, "a") as f:
            f.write(f"render {scene}\\n")
        return {"status": "started"}

    async def main():
        with Stopping(db) as service:
            gated, doubt = spec.get("gated", True), spec.get("doubt", "rerun")
            tools = [FunctionTool(pay, requires_confirmation=gated, on_in_doubt=doubt), LongRunningFunctionTool(render)]
            model = ScriptedModel(spec["replies"])
            agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=tools)
            runner = Runner(app_name="app", agent=agent, session_service=service, auto_create_session=True)
            if action == "start":
                calls = runner.run_async(user_id="u", session_id="s", new_message="go", run_key="m-1")
            elif action == "message":
                calls = runner.run_async(user_id="u", session_id="s", new_message="never mind",
                                         run_config=RunConfig(on_pending_message="deny"), run_key="K")
            elif action == "approve":
                calls = runner.approve(user_id="u", session_id="s", call_key=key, run_key="K")
            elif action == "complete":
                calls = runner.complete(user_id="u", session_id="s", call_key=key, value={"frame": "f"}, run_key="K")
            else:
                calls = runner.resolve_in_doubt(user_id="u", session_id="s", call_key=key, action="rerun", run_key="K")
            async for _ in calls:
                pass

    anyio.run(main)
    """
)

PAY = '```python\nr = call_tool("pay", {"amount": 5})\n{"type": "final_result", "value": r}\n```'


def _child(tmp: Path, spec: dict[str, Any], *, killed: bool = True) -> None:
    """Runs the child with ``spec``; when ``killed``, kills it at its barrier."""
    child, barrier = tmp / "child.py", tmp / "barrier"
    child.write_text(CHILD)
    args = [sys.executable, str(child), str(tmp / "s.db"), str(tmp / "ledger"), str(barrier), json.dumps(spec)]
    if killed:
        sigkill_at_barrier(args, barrier)
        return
    done = subprocess.run(args, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]


def _ledger(tmp: Path) -> list[str]:
    path = tmp / "ledger"
    return path.read_text().splitlines() if path.exists() else []


def _runner(service: SqliteSessionService, tmp: Path, replies: list[str] | None = None, **pay_options: Any) -> Runner:
    def pay(amount: int) -> str:
        """Pays."""
        with (tmp / "ledger").open("a") as f:
            f.write(f"pay {amount} (redelivery)\n")
        return f"paid {amount}"

    def render(scene: str) -> dict:
        """Starts a render."""
        raise AssertionError("the render started once already")

    options = {"requires_confirmation": True, **pay_options}
    tools = [FunctionTool(pay, **options), LongRunningFunctionTool(render)]
    agent = CodeActAgent(name="coder", model=ScriptedModel(replies or []), runtime=MontyRuntime(), tools=tools)
    return Runner(app_name="app", agent=agent, session_service=service)


def _replayed(events: list[Any]) -> bool:
    return bool(events) and all((e.custom_metadata or {}).get("codeact_replayed") for e in events)


async def test_a_redelivered_rerun_of_a_call_in_doubt_asks_again(tmp_path: Path) -> None:
    """An ``on_in_doubt="ask"`` tool's "rerun" decision, killed inside the rerun: the call may
    have run twice now, so the redelivery asks again instead of running it a third time."""
    _child(tmp_path, {"action": "start", "stop": "tool", "gated": False, "doubt": "ask", "replies": [PAY]})
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = _runner(service, tmp_path, requires_confirmation=False, on_in_doubt="ask")
        [e async for e in runner.recover(user_id="u", session_id="s")]
        (call,) = await runner.pending(user_id="u", session_id="s")
        assert call.kind == "in_doubt"
    spec = {"action": "resolve", "call_key": call.call_key, "stop": "tool", "gated": False, "doubt": "ask"}
    _child(tmp_path, {**spec, "replies": [PAY]})
    assert _ledger(tmp_path) == ["pay 5 (start)", "pay 5 (resolve)"]
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = _runner(service, tmp_path, requires_confirmation=False, on_in_doubt="ask")
        events = [
            e
            async for e in runner.resolve_in_doubt(
                user_id="u", session_id="s", call_key=call.call_key, action="rerun", run_key="K"
            )
        ]
        assert events[-1].interrupted  # asked again
        (again,) = await runner.pending(user_id="u", session_id="s")
        assert (again.call_key, again.kind) == (call.call_key, "in_doubt")
    assert _ledger(tmp_path) == ["pay 5 (start)", "pay 5 (resolve)"]


async def test_a_redelivered_approval_without_a_call_key_applies(tmp_path: Path) -> None:
    _child(tmp_path, {"action": "start", "stop": "none", "replies": [PAY]}, killed=False)
    _child(tmp_path, {"action": "approve", "call_key": None, "stop": "claim", "replies": [PAY]})
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = _runner(service, tmp_path)
        events = [e async for e in runner.approve(user_id="u", session_id="s", run_key="K")]
        assert events[-1].text == "paid 5" and not _replayed(events)
        again = [e async for e in runner.approve(user_id="u", session_id="s", run_key="K")]
        assert again[-1].text == "paid 5" and _replayed(again)
        assert await runner.pending(user_id="u", session_id="s") == []
    assert _ledger(tmp_path) == ["pay 5 (redelivery)"]


async def test_a_redelivered_completion_stores_its_response_once_under_the_tool_name(tmp_path: Path) -> None:
    render = '```python\nr = call_tool("render", {"scene": "a"})\n{"type": "final_result", "value": r["frame"]}\n```'
    _child(tmp_path, {"action": "start", "stop": "none", "replies": [render]}, killed=False)
    with SqliteSessionService(tmp_path / "s.db") as service:
        (call,) = await _runner(service, tmp_path).pending(user_id="u", session_id="s")
    _child(tmp_path, {"action": "complete", "call_key": call.call_key, "stop": "claim", "replies": [render]})
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = _runner(service, tmp_path)
        for _ in range(2):
            events = [
                e
                async for e in runner.complete(
                    user_id="u", session_id="s", call_key=call.call_key, value={"frame": "f"}, run_key="K"
                )
            ]
            assert events[-1].text == "f"
        session = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert session is not None
        responses = [p.function_response for e in session.events for p in e.content.parts if p.function_response]
        assert [(r.id, r.name, r.response) for r in responses] == [(call.call_key, "render", {"frame": "f"})]
    assert _ledger(tmp_path) == ["render a"]


async def test_a_pause_announced_in_part_is_announced_whole(tmp_path: Path) -> None:
    """The approved call ran and the script paused at a gather of a gated call and a
    long-running one; killed after the first of the two announcement events was stored."""
    gather = (
        "```python\nimport asyncio\n"
        'p = call_tool("pay", {"amount": 5})\n'
        'a, b = await asyncio.gather(call_tool("pay", {"amount": 6}), call_tool("render", {"scene": "a"}))\n'
        '{"type": "final_result", "value": p + a + b["frame"]}\n```'
    )
    _child(tmp_path, {"action": "start", "stop": "none", "replies": [gather]}, killed=False)
    with SqliteSessionService(tmp_path / "s.db") as service:
        (first,) = await _runner(service, tmp_path).pending(user_id="u", session_id="s")
    _child(tmp_path, {"action": "approve", "call_key": first.call_key, "stop": "announce2", "replies": [gather]})
    assert _ledger(tmp_path) == ["pay 5 (approve)", "render a"]
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = _runner(service, tmp_path)
        pending = {p.call_key: p.kind for p in await runner.pending(user_id="u", session_id="s")}
        assert sorted(pending.values()) == ["completion", "confirmation"]
        events = [e async for e in runner.approve(user_id="u", session_id="s", call_key=first.call_key, run_key="K")]
        announced = {k: "confirmation" for e in events for k in e.actions.requested_tool_confirmations}
        announced.update({k: "completion" for e in events for k in e.long_running_tool_ids or ()})
        assert announced == pending
    assert _ledger(tmp_path) == ["pay 5 (approve)", "render a"]


async def test_a_new_message_that_decides_by_policy_is_stored_by_its_redelivery(tmp_path: Path) -> None:
    """``on_pending_message="deny"``: a new message denies the pending call; killed after its
    claim, before the message was stored."""
    answer = '```python\n{"type": "final_result", "value": "answered"}\n```'
    _child(tmp_path, {"action": "start", "stop": "none", "replies": [PAY, answer]}, killed=False)
    _child(tmp_path, {"action": "message", "stop": "claim", "replies": [PAY, answer]})
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = _runner(service, tmp_path, replies=[answer])
        config = RunConfig(on_pending_message="deny")
        for replay in (False, True):
            events = [
                e
                async for e in runner.run_async(
                    user_id="u", session_id="s", new_message="never mind", run_config=config, run_key="K"
                )
            ]
            assert events[-1].text == "answered" and _replayed(events) is replay
        session = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert session is not None
        assert [e.text for e in session.events if e.author == "user" and e.text] == ["go", "never mind"]
        assert await runner.pending(user_id="u", session_id="s") == []
    assert _ledger(tmp_path) == []
