"""Faults of the durable turn found trying codeact as a new user would (issue 47), each pinned:

a. a call in doubt is announced as in doubt (it may have run; rerun, skip or fail), not as a
   confirmation request, and neither that pause nor the in-doubt notice is a final response;
   no approval or denial settles it (a denial used to tell the script "long-running call ...
   was denied" and settle a call that may have run);
b. ``on_pending_message="discard"`` names each discarded call in an event, and the model is
   told which calls of that turn had already run;
c. a message-less run on a session with nothing pending or interrupted calls no model;
d. refusals name what the call awaits;
e. the CLI lists a call in doubt as in doubt and decides through one ``decide`` command;
f. the README's loop prints a pause, and docs/first-agent.md does not call a pause final.

The call in doubt is made in process: an async tool starts (its intent is journaled) and the
run is cancelled inside it, so its outcome is never recorded; the run's claim is released as
its owner ends, so the turn is interrupted and ``recover`` (``on_in_doubt="ask"``) pauses it.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from codeact import (
    CodeActAgent,
    FunctionTool,
    MontyRuntime,
    NoPendingCallError,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
APP, USER, SESSION = "app", "u", "s"

PAY = '```python\nr = call_tool("pay", {"amount": 5})\n{"type": "final_result", "value": r}\n```'
NOTE_THEN_WIRE = (
    '```python\nn = call_tool("note", {"text": "hello"})\nw = call_tool("wire", {"amount": 9})\n'
    '{"type": "final_result", "value": w}\n```'
)
FINAL = '```python\n{"type": "final_result", "value": "done"}\n```'


class Ledger:
    """What the tools did (in memory; one per test)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.hang = False


def tools_for(ledger: Ledger) -> list[Any]:
    async def pay(amount: int) -> str:
        """Pays."""
        ledger.lines.append(f"pay {amount}")
        if ledger.hang:
            await anyio.sleep_forever()  # the run is cancelled here: the outcome is never recorded
        return f"paid {amount}"

    def note(text: str) -> str:
        """Writes a note."""
        ledger.lines.append(f"note {text}")
        return text

    def wire(amount: int) -> str:
        """Wires money."""
        ledger.lines.append(f"wire {amount}")
        return f"wired {amount}"

    return [
        FunctionTool(pay, on_in_doubt="ask"),  # type: ignore[arg-type]
        note,
        FunctionTool(wire, requires_confirmation=True),
    ]


def runner_on(service: SqliteSessionService, ledger: Ledger, replies: list[str] | None = None) -> Runner:
    model = ScriptedModel(replies or [])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=tools_for(ledger))
    return Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


async def paused_in_doubt(service: SqliteSessionService, ledger: Ledger) -> tuple[Runner, list[Any]]:
    """A session whose turn is paused on a call to ``pay`` in doubt; the events of the recovery."""
    ledger.hang = True
    with anyio.move_on_after(1.0):
        await collect(runner_on(service, ledger, [PAY]).run_async(user_id=USER, session_id=SESSION, new_message="go"))
    ledger.hang = False
    assert ledger.lines == ["pay 5"]
    runner = runner_on(service, ledger)
    events = await collect(runner.recover(user_id=USER, session_id=SESSION))
    return runner, events


async def test_a_call_in_doubt_is_announced_as_in_doubt_and_is_not_final(tmp_path: Path) -> None:
    """(a) The pause names the call as possibly run and offers rerun, skip or fail; it carries
    no confirmation request; neither it nor the in-doubt notice is a final response."""
    ledger = Ledger()
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner, events = await paused_in_doubt(service, ledger)
        (call,) = await runner.pending(user_id=USER, session_id=SESSION)
        assert call.kind == "in_doubt"
        notices = [e for e in events if e.kind == "in_doubt"]
        assert notices and not any(e.is_final_response() for e in notices)
        pause = events[-1]
        assert pause.interrupted and not pause.error_code
        assert pause.actions.requested_tool_confirmations == {}
        assert "Tool confirmation required" not in pause.text and "Approve or deny" not in pause.text
        assert call.call_key in pause.text and "may have run" in pause.text
        for verb in ("rerun", "skip", "fail"):
            assert verb in pause.text
        assert not pause.is_final_response()
        assert not any(e.is_final_response() for e in events)


@pytest.mark.parametrize("how", ["approve", "deny", "run_config_deny"])
async def test_no_approval_or_denial_settles_a_call_in_doubt(tmp_path: Path, how: str) -> None:
    """(a) Approving or denying a call in doubt (the verbs, or RunConfig's decisions) is
    refused before anything runs, naming what the call awaits; it stays in doubt, and the tool
    does not run again. A denial used to settle it and tell the script it was "denied"."""
    ledger = Ledger()
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner, _ = await paused_in_doubt(service, ledger)
        (call,) = await runner.pending(user_id=USER, session_id=SESSION)
        if how == "approve":
            calls = runner.approve(user_id=USER, session_id=SESSION, call_key=call.call_key)
        elif how == "deny":
            calls = runner.deny(user_id=USER, session_id=SESSION, call_key=call.call_key, reason="no")
        else:
            config = RunConfig(tool_confirmation_decisions={call.call_key: False})
            calls = runner.run_async(user_id=USER, session_id=SESSION, run_config=config)
        with pytest.raises(NoPendingCallError, match="is in doubt: awaits rerun, skip or fail") as refused:
            await collect(calls)
        assert call.call_key in str(refused.value)
        assert await runner.pending(user_id=USER, session_id=SESSION) == [call]
        assert ledger.lines == ["pay 5"]
        events = await collect(
            runner.resolve_in_doubt(user_id=USER, session_id=SESSION, call_key=call.call_key, action="skip", value="ok")
        )
        assert events[-1].text == "ok" and ledger.lines == ["pay 5"]


async def test_discarding_a_paused_turn_names_the_calls_and_tells_the_model_what_ran(tmp_path: Path) -> None:
    """(b) ``on_pending_message="discard"``: an event names the discarded call, and the model's
    next request says which calls of that turn had already run."""
    ledger = Ledger()
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = runner_on(service, ledger, [NOTE_THEN_WIRE, FINAL])
        await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        (wire,) = await runner.pending(user_id=USER, session_id=SESSION)
        assert wire.tool == "wire" and ledger.lines == ["note hello"]
        turn = wire.call_key.rsplit(":", 1)[0]
        config = RunConfig(on_pending_message="discard")
        events = await collect(
            runner.run_async(user_id=USER, session_id=SESSION, new_message="never mind", run_config=config)
        )
        notices = [e for e in events if wire.call_key in e.text and "discarded" in e.text]
        assert len(notices) == 1, [e.text for e in events]
        notice = notices[0]
        assert not notice.is_final_response()
        assert f"call {turn}:0 to 'note'" in notice.text  # the call that had run
        assert events[-1].text == "done" and ledger.lines == ["note hello"]
        model = runner.agent.model  # type: ignore[attr-defined]
        told = "\n".join(c.text for c in model.requests[-1].contents)
        assert wire.call_key in told and f"call {turn}:0 to 'note'" in told
        assert await runner.pending(user_id=USER, session_id=SESSION) == []


async def test_a_message_less_run_with_nothing_in_flight_calls_no_model(tmp_path: Path) -> None:
    """(c) ``run_async(new_message=None)`` on a session whose last run finished: no model call,
    no event, nothing stored."""
    ledger = Ledger()
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = runner_on(service, ledger, [FINAL])
        first = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        assert first[-1].text == "done"
        stored = len((await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)).events)  # type: ignore[union-attr]
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION))
        assert events == []
        assert len(runner.agent.model.requests) == 1  # type: ignore[attr-defined]
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None and len(session.events) == stored


async def test_refusals_name_what_each_call_awaits(tmp_path: Path) -> None:
    """(d) A decision on the wrong call is refused with what each pending call awaits, not
    "pending"."""
    ledger = Ledger()
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = runner_on(service, ledger, [NOTE_THEN_WIRE])
        await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        (wire,) = await runner.pending(user_id=USER, session_id=SESSION)
        with pytest.raises(NoPendingCallError) as refused:
            await collect(runner.approve(user_id=USER, session_id=SESSION, call_key="nope:1"))
        assert f"call {wire.call_key} to 'wire' awaits approval or denial" in str(refused.value)
        with pytest.raises(NoPendingCallError) as refused:
            await collect(runner.complete(user_id=USER, session_id=SESSION, call_key=wire.call_key, value=1))
        assert "awaits approval or denial" in str(refused.value) and "'approve' or 'deny'" in str(refused.value)
    ledger = Ledger()
    with SqliteSessionService(tmp_path / "t.db") as service:
        runner, _ = await paused_in_doubt(service, ledger)
        (call,) = await runner.pending(user_id=USER, session_id=SESSION)
        with pytest.raises(NoPendingCallError) as refused:
            await collect(runner.complete(user_id=USER, session_id=SESSION, call_key=call.call_key, value=1))
        assert f"call {call.call_key} to 'pay' is in doubt: awaits rerun, skip or fail" in str(refused.value)


AGENT_MODULE = textwrap.dedent(
    """
    from codeact import CodeActAgent, FunctionTool, MontyRuntime, ScriptedModel

    async def pay(amount: int) -> str:
        \"\"\"Pays.\"\"\"
        return f"paid {amount}"

    def note(text: str) -> str:
        \"\"\"Writes a note.\"\"\"
        return text

    def wire(amount: int) -> str:
        \"\"\"Wires money.\"\"\"
        return f"wired {amount}"

    AGENT = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime(),
                         tools=[FunctionTool(pay, on_in_doubt="ask"), note,
                                FunctionTool(wire, requires_confirmation=True)])
    """
)


def test_the_cli_lists_a_call_in_doubt_and_decides_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(e) ``codeact sessions pending`` lists the call as in doubt with what it accepts;
    ``codeact sessions decide SESSION approve`` on it is refused (exit 1, nothing ran) and
    ``decide SESSION skip`` resolves it."""
    from typer.testing import CliRunner

    from codeact.cli import app

    db = tmp_path / "s.db"
    ledger = Ledger()

    async def setup() -> str:
        with SqliteSessionService(db) as service:
            runner, _ = await paused_in_doubt(service, ledger)
            (call,) = await runner.pending(user_id=USER, session_id=SESSION)
            return call.call_key

    key = anyio.run(setup)
    (tmp_path / "turn_faults_agent.py").write_text(AGENT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    cli = CliRunner()
    common = ["--db", str(db), "--app", APP, "--user", USER]
    agent = ["--agent", "turn_faults_agent:AGENT"]
    shown = cli.invoke(app, ["sessions", "pending", SESSION, *common])
    assert shown.exit_code == 0, shown.output
    assert f"{key} in doubt" in shown.stdout and "rerun, skip, fail" in shown.stdout
    refused = cli.invoke(app, ["sessions", "decide", SESSION, "approve", "--call", key, *common, *agent])
    assert refused.exit_code == 1 and "is in doubt: awaits rerun, skip or fail" in refused.output
    denied = cli.invoke(app, ["sessions", "deny", SESSION, "--call", key, *common, *agent])
    assert denied.exit_code == 1 and "is in doubt" in denied.output
    resolved = cli.invoke(
        app, ["sessions", "decide", SESSION, "skip", "--call", key, "--value", '"checked"', *common, *agent]
    )
    assert resolved.exit_code == 0, resolved.output
    assert "checked" in resolved.stdout
    assert json.loads(cli.invoke(app, ["sessions", "pending", SESSION, *common, "--json"]).stdout) == []
    assert ledger.lines == ["pay 5"]


def test_the_readme_loop_prints_a_pause_and_the_docs_do_not_call_it_final() -> None:
    """(f) The README's agent loop handles a paused run (it is not final) before the final
    response, and docs/first-agent.md no longer lists a pause for a human as final."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Embed an agent in an asyncio program") :]
    loop = section[: section.index("asyncio.run(main())")]
    body = loop[loop.index("async for event in runner.run_async") :]
    assert re.search(r"if event\.interrupted", body), body
    assert body.index("event.interrupted") < body.index("is_final_response")
    first_agent = (ROOT / "docs" / "first-agent.md").read_text()
    assert "a pause for a human, a transfer)" not in first_agent
    assert "A pause for a human decision is **not**" in first_agent


async def test_the_web_timeline_shows_the_in_doubt_pause_as_a_pause_not_an_approval(tmp_path: Path) -> None:
    """(a, web) The session page shows the in-doubt pause as a pause with its text (it used to be a
    "waits for a human" approval item) and the in-doubt notice as a notice, not as an answer."""
    pytest.importorskip("jinja2", reason="codeact[web] is not installed")
    from codeact.web._views import timeline

    ledger = Ledger()
    with SqliteSessionService(tmp_path / "s.db") as service:
        _, events = await paused_in_doubt(service, ledger)
    items = timeline(events, lambda value: value)
    kinds = [item["kind"] for item in items]
    assert "waiting" not in kinds and "reply" not in kinds, kinds
    (pause,) = [item for item in items if item["kind"] == "pause"]
    assert "may have run" in pause["text"]
    assert any(item["kind"] == "remark" for item in items)


async def test_chat_asks_about_a_call_in_doubt_with_its_own_verbs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """(e, chat) ``codeact chat`` shows a call in doubt with the ``decide`` lines that resolve it
    and asks rerun / skip / fail at the prompt (it used to ask for a long-running call's result,
    and its "no" denied the call)."""
    from codeact.cli import _ChatPauses
    from codeact.console import EventPrinter

    ledger = Ledger()
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner, _ = await paused_in_doubt(service, ledger)
        (call,) = await runner.pending(user_id=USER, session_id=SESSION)
        pauses = _ChatPauses(runner, USER, SESSION, EventPrinter(), ["--db", "chat.db"])
        await anyio.to_thread.run_sync(pauses.show_commands, [call])
        shown = capsys.readouterr().out
        assert "is in doubt" in shown
        for verb in ("rerun", "skip", "fail"):
            assert f"codeact sessions decide s {verb} --db chat.db --call {call.call_key}" in shown
        questions: list[str] = []

        def read(question: str) -> str:
            questions.append(question)
            return 'skip "checked"'

        failed = await anyio.to_thread.run_sync(pauses.ask, read)
        assert not failed and "rerun / skip" in questions[0]
        assert "checked" in capsys.readouterr().out
        assert await runner.pending(user_id=USER, session_id=SESSION) == []
        assert ledger.lines == ["pay 5"]
