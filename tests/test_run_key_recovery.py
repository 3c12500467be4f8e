"""A keyed run killed after its model reply is stored, before its script's first tool call,
is recovered under its run key (not replayed as finished): found by the DBOS scenario
(issue 25), where a worker died in that window. The kill happens in a child process at a
barrier (the store signals once the reply is stored, then blocks), never after a sleep."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from agent_helpers import sigkill_at_barrier
from codeact import (
    CodeActAgent,
    FunctionTool,
    LongRunningFunctionTool,
    MontyRuntime,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)

pytestmark = pytest.mark.anyio

CHILD = textwrap.dedent(
    """
    import sys, threading
    import anyio
    from codeact import (CodeActAgent, FunctionTool, LongRunningFunctionTool, MontyRuntime, Runner, ScriptedModel,
                         SqliteSessionService)

    db, ledger, barrier, turns = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

    class Stopping(SqliteSessionService):
        async def append_event(self, session, event):
            if turns == 0 and event.long_running_tool_ids:
                open(barrier, "w").close()  # suspended, its announcement not stored yet
                threading.Event().wait(600)
            stored = await super().append_event(session, event)
            replies = [e for e in session.events if e.kind == "model_reply"]
            if event.kind == "model_reply" and len(replies) == turns:
                open(barrier, "w").close()  # the reply is stored: the test kills now
                threading.Event().wait(600)
            return stored

    def note(text: str) -> str:
        \"\"\"Writes a note.\"\"\"
        with open(ledger, "a") as f:
            f.write(text + "\\n")
        return "noted " + text

    REPLIES = [
        '```python\\na = call_tool("note", {"text": "a"})\\n{"type": "observation", "value": a}\\n```',
        '```python\\nb = call_tool("note", {"text": "b"})\\n{"type": "final_result", "value": b}\\n```',
    ]
    if turns == 0:
        REPLIES = ['```python\\nr = call_tool("render", {"scene": "a"})\\n{"type": "final_result", "value": r}\\n```']

    def render(scene: str) -> dict:
        \"\"\"Starts a render.\"\"\"
        with open(ledger, "a") as f:
            f.write("render " + scene + "\\n")
        return {"status": "started"}

    async def main():
        with Stopping(db) as service:
            agent = CodeActAgent(name="coder", model=ScriptedModel(REPLIES), runtime=MontyRuntime(),
                                 tools=[FunctionTool(note), LongRunningFunctionTool(render)])
            runner = Runner(app_name="app", agent=agent, session_service=service, auto_create_session=True)
            async for _ in runner.run_async(user_id="u", session_id="s", new_message="go", run_key="m-1"):
                pass

    anyio.run(main)
    """
)

REPLIES = [
    '```python\na = call_tool("note", {"text": "a"})\n{"type": "observation", "value": a}\n```',
    '```python\nb = call_tool("note", {"text": "b"})\n{"type": "final_result", "value": b}\n```',
]


@pytest.mark.parametrize("turns", [1, 2], ids=["first-turn", "second-turn"])
async def test_run_key_killed_after_the_model_reply_recovers_the_run(tmp_path: Path, turns: int) -> None:
    db, ledger, barrier = tmp_path / "s.db", tmp_path / "ledger", tmp_path / "barrier"
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    sigkill_at_barrier([sys.executable, str(child), str(db), str(ledger), str(barrier), str(turns)], barrier)
    before = ledger.read_text().splitlines() if ledger.exists() else []
    assert before == (["a"] if turns == 2 else [])

    def note(text: str) -> str:
        """Writes a note."""
        with ledger.open("a") as f:
            f.write(text + "\n")
        return "noted " + text

    # the redelivered run key: the stored turn's script runs from its record, then the model
    # is asked for the second turn (again, when it had answered it before the kill)
    def render(scene: str) -> dict:
        """Starts a render."""
        return {}

    model = ScriptedModel(REPLIES[1:])
    tools = [FunctionTool(note), LongRunningFunctionTool(render)]
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=tools)
    with SqliteSessionService(db) as service:
        runner = Runner(app_name="app", agent=agent, session_service=service)
        events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go", run_key="m-1")]
        assert events and not any((e.custom_metadata or {}).get("codeact_replayed") for e in events)
        assert events[-1].text == "noted b"
        again = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go", run_key="m-1")]
        assert again[-1].text == "noted b" and all(e.custom_metadata["codeact_replayed"] for e in again)
        session = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert [e.text for e in session.events if e.author == "user" and e.text == "go"] == ["go"]
    assert ledger.read_text().splitlines() == ["a", "b"]


async def test_run_key_killed_before_its_pause_was_announced_announces_it(tmp_path: Path) -> None:
    db, ledger, barrier = tmp_path / "s.db", tmp_path / "ledger", tmp_path / "barrier"
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    sigkill_at_barrier([sys.executable, str(child), str(db), str(ledger), str(barrier), "0"], barrier)

    def note(text: str) -> str:
        """Writes a note."""
        raise AssertionError("no note in this run")

    def render(scene: str) -> dict:
        """Starts a render."""
        raise AssertionError("the render started once already")

    tools = [FunctionTool(note), LongRunningFunctionTool(render)]
    agent = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime(), tools=tools)
    with SqliteSessionService(db) as service:
        runner = Runner(app_name="app", agent=agent, session_service=service)
        events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go", run_key="m-1")]
        assert events[-1].long_running_tool_ids  # announced again, nothing ran
        (pending,) = await runner.pending(user_id="u", session_id="s")
        done = [e async for e in runner.complete(user_id="u", session_id="s", call_key=pending.call_key, value="ok")]
        assert done[-1].text == "ok"
    assert ledger.read_text().splitlines() == ["render a"]


DECIDER = textwrap.dedent(
    """
    import sys, threading
    import anyio
    from codeact import (CodeActAgent, FunctionTool, LongRunningFunctionTool, MontyRuntime, Runner, ScriptedModel,
                         SqliteSessionService)

    db, ledger, barrier, kind = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

    class Stopping(SqliteSessionService):
        async def save_turn(self, **kw):
            version = await super().save_turn(**kw)
            claim = (kw["data"] or {}).get("claim") or {}
            if str(claim.get("run_key") or "").startswith(kind + ":"):
                open(barrier, "w").close()  # the decision's claim is stored, its resume not journaled
                threading.Event().wait(600)
            return version

        async def append_event(self, session, event):
            key = str((event.custom_metadata or {}).get("codeact_run_key") or "")
            if kind == "approve-paused" and key.startswith("approve:") and event.long_running_tool_ids:
                open(barrier, "w").close()  # paid, suspended at the render: its announcement not stored
                threading.Event().wait(600)
            return await super().append_event(session, event)

    def pay(amount: int) -> str:
        \"\"\"Pays.\"\"\"
        with open(ledger, "a") as f:
            f.write(f"pay {amount}\\n")
        return f"paid {amount}"

    def render(scene: str) -> dict:
        \"\"\"Starts a render.\"\"\"
        with open(ledger, "a") as f:
            f.write("render " + scene + "\\n")
        return {"status": "started"}

    call = 'call_tool("pay", {"amount": 5})' if kind == "approve" else 'call_tool("render", {"scene": "a"})'
    REPLIES = [f'```python\\nr = {call}\\n{{"type": "final_result", "value": r}}\\n```']
    if kind == "approve-paused":
        REPLIES = ['```python\\np = call_tool("pay", {"amount": 5})\\nr = call_tool("render", {"scene": "a"})\\n'
                   '{"type": "final_result", "value": p + "; " + r["frame"]}\\n```']

    async def main():
        with Stopping(db) as service:
            agent = CodeActAgent(name="coder", model=ScriptedModel(REPLIES), runtime=MontyRuntime(),
                                 tools=[FunctionTool(pay, requires_confirmation=True), LongRunningFunctionTool(render)])
            runner = Runner(app_name="app", agent=agent, session_service=service, auto_create_session=True)
            async for _ in runner.run_async(user_id="u", session_id="s", new_message="go", run_key="m-1"):
                pass
            (pending,) = await runner.pending(user_id="u", session_id="s")
            key = kind.split("-")[0] + ":" + pending.call_key
            if kind.startswith("approve"):
                decision = runner.approve(user_id="u", session_id="s", call_key=pending.call_key, run_key=key)
            else:
                decision = runner.complete(user_id="u", session_id="s", call_key=pending.call_key, value="frame",
                                           run_key=key)
            async for _ in decision:
                pass

    anyio.run(main)
    """
)


@pytest.mark.parametrize("kind", ["approve", "complete"])
async def test_a_keyed_decision_killed_after_its_claim_is_applied_by_its_redelivery(tmp_path: Path, kind: str) -> None:
    """Found by the DBOS scenario (issue 25): a worker died after an approval's or a
    completion's claim was stored, before the resume journaled the decision. DBOS redelivered
    the same request under the same run key, which recovered the turn without the decision:
    the run paused again at the same call, and that pause became the decision's stored result,
    so the approver decided the same call under the same key forever."""
    db, ledger, barrier = tmp_path / "s.db", tmp_path / "ledger", tmp_path / "barrier"
    child = tmp_path / "child.py"
    child.write_text(DECIDER)
    sigkill_at_barrier([sys.executable, str(child), str(db), str(ledger), str(barrier), kind], barrier)
    before = ledger.read_text().splitlines() if ledger.exists() else []
    assert before == ([] if kind == "approve" else ["render a"])

    def pay(amount: int) -> str:
        """Pays."""
        with ledger.open("a") as f:
            f.write(f"pay {amount}\n")
        return f"paid {amount}"

    def render(scene: str) -> dict:
        """Starts a render."""
        raise AssertionError("the render started once already")

    tools = [FunctionTool(pay, requires_confirmation=True), LongRunningFunctionTool(render)]
    agent = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime(), tools=tools)
    with SqliteSessionService(db) as service:
        runner = Runner(app_name="app", agent=agent, session_service=service)
        (pending,) = await runner.pending(user_id="u", session_id="s")
        key = f"{kind}:{pending.call_key}"

        async def redeliver() -> list:
            if kind == "approve":
                decision = runner.approve(user_id="u", session_id="s", call_key=pending.call_key, run_key=key)
            else:
                decision = runner.complete(
                    user_id="u", session_id="s", call_key=pending.call_key, value="frame", run_key=key
                )
            return [e async for e in decision]

        events = await redeliver()
        assert not events[-1].long_running_tool_ids and not events[-1].interrupted, events[-1]
        assert events[-1].text == ("paid 5" if kind == "approve" else "frame")
        assert await runner.pending(user_id="u", session_id="s") == []
        again = await redeliver()  # the same key once more: the stored run, replayed
        assert again[-1].text == events[-1].text
        assert all((e.custom_metadata or {}).get("codeact_replayed") for e in again)
    assert ledger.read_text().splitlines() == (["pay 5"] if kind == "approve" else ["render a"])


async def test_a_keyed_approval_killed_before_announcing_its_next_pause_announces_it(tmp_path: Path) -> None:
    """Found by the DBOS scenario (issue 25): a worker died after an approved call ran and its
    script suspended at the next call (a long-running render), before that pause was
    announced. The redelivered approval found no event and no claim under its run key, took
    itself for a first delivery and failed: the approved call was no longer pending."""
    db, ledger, barrier = tmp_path / "s.db", tmp_path / "ledger", tmp_path / "barrier"
    child = tmp_path / "child.py"
    child.write_text(DECIDER)
    sigkill_at_barrier([sys.executable, str(child), str(db), str(ledger), str(barrier), "approve-paused"], barrier)
    assert ledger.read_text().splitlines() == ["pay 5", "render a"]

    def pay(amount: int) -> str:
        """Pays."""
        raise AssertionError("paid once already")

    def render(scene: str) -> dict:
        """Starts a render."""
        raise AssertionError("the render started once already")

    tools = [FunctionTool(pay, requires_confirmation=True), LongRunningFunctionTool(render)]
    agent = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime(), tools=tools)
    with SqliteSessionService(db) as service:
        runner = Runner(app_name="app", agent=agent, session_service=service)
        (render_call,) = await runner.pending(user_id="u", session_id="s")
        assert render_call.kind == "completion"
        session = await service.get_session(app_name="app", user_id="u", session_id="s")
        approvals = [e for e in session.events if e.actions.requested_tool_confirmations]
        (pay_key,) = approvals[-1].actions.requested_tool_confirmations
        events = [
            e async for e in runner.approve(user_id="u", session_id="s", call_key=pay_key, run_key=f"approve:{pay_key}")
        ]
        assert render_call.call_key in (events[-1].long_running_tool_ids or [])  # announced again, nothing ran
        done = [
            e
            async for e in runner.complete(
                user_id="u", session_id="s", call_key=render_call.call_key, value={"frame": "f1"}, run_key="c-1"
            )
        ]
        assert done[-1].text == "paid 5; f1"
    assert ledger.read_text().splitlines() == ["pay 5", "render a"]
