"""The faults of issue 9, each as a kind with several inputs, through ``Runner`` on real
SQLite files with the real interpreter (fresh processes where the fault needs them).

1. a script pausing three or more times;              test_many_pauses_*
2. idle runs / new messages while a call is pending;  test_idle_runs_*, test_new_message_*
3. an altered continuation, then approve;             test_altered_continuation_*
4. concurrent resumers in two processes;              test_two_processes_*
5. inputs that match nothing;                         test_unmatched_*
6. values too deep for the boundary;                  test_deep_*, test_large_result_*
7. gather over long-running calls;                    test_gather_*
8. sync tools: timeout and the event loop;            test_sync_tool_*
9. budgets per script and per run;                    test_budget_*, test_usage_limit_*
"""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_helpers import APP, SESSION, USER, fence, outcomes_of, slot_of
from codeact import (
    CallsPendingError,
    CodeActAgent,
    FunctionTool,
    LlmResponse,
    LongRunningFunctionTool,
    MontyRuntime,
    NoPendingCallError,
    RunConfig,
    Runner,
    ScriptedModel,
    SessionNotFoundError,
    SqliteSessionService,
)
from codeact.models._types import Usage

pytestmark = pytest.mark.anyio


def final_script(expr: str) -> str:
    return f'{{"type": "final_result", "value": {expr}}}'


class Ledger:
    """Side effects, one line per tool run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, line: str) -> None:
        with self.path.open("a") as f:
            f.write(line + "\n")

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []


def tools_for(ledger: Ledger) -> list[Any]:
    def charge(item: str) -> str:
        """Charges an item (needs approval)."""
        ledger.add(f"charge {item}")
        return f"charged {item}"

    def render(scene: str) -> dict:
        """Starts a render; its result arrives later."""
        ledger.add(f"render {scene}")
        return {"status": "pending", "scene": scene}

    def note(text: str) -> str:
        """Writes a note."""
        ledger.add(f"note {text}")
        return f"noted {text}"

    return [FunctionTool(charge, requires_confirmation=True), LongRunningFunctionTool(render), note]


def agent_for(ledger: Ledger, replies: Any, **kwargs: Any) -> CodeActAgent:
    model = replies if isinstance(replies, ScriptedModel) else ScriptedModel(replies)
    return CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=tools_for(ledger), **kwargs)


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


async def start(db: Path, ledger: Ledger, script: str, **kwargs: Any) -> list[Any]:
    with SqliteSessionService(db) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(app_name=APP, agent=agent_for(ledger, [fence(script)], **kwargs), session_service=service)
        return await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))


def fresh_runner(service: SqliteSessionService, ledger: Ledger, **kwargs: Any) -> Runner:
    """A runner as a new process would build it (its model has no replies left)."""
    return Runner(app_name=APP, agent=agent_for(ledger, [], **kwargs), session_service=service)


# --------------------------------------------------------------------- 1. many pauses

PAUSES = {
    "three-confirmations": ["c", "c", "c"],
    "three-completions": ["l", "l", "l"],
    "mixed-four": ["c", "l", "n", "c", "l"],
    "five-confirmations": ["c"] * 5,
}


def pause_script(kinds: list[str]) -> str:
    lines = []
    for i, kind in enumerate(kinds):
        if kind == "c":
            lines.append(f'r{i} = call_tool("charge", {{"item": "i{i}"}})')
        elif kind == "l":
            lines.append(f'r{i} = call_tool("render", {{"scene": "s{i}"}})')
        else:
            lines.append(f'r{i} = call_tool("note", {{"text": "t{i}"}})')
    values = ", ".join(f"r{i}" for i in range(len(kinds)))
    return "\n".join(lines) + "\n" + final_script(f"[{values}]")


@pytest.mark.parametrize("kinds", list(PAUSES.values()), ids=list(PAUSES))
async def test_many_pauses_resume_each_time_and_keep_every_effect(tmp_path: Path, kinds: list[str]) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    events = await start(db, ledger, pause_script(kinds))
    expected: list[Any] = []
    for i, kind in enumerate(kinds):
        if kind == "n":
            expected.append(f"noted t{i}")
            continue
        with SqliteSessionService(db) as service:  # each decision from a fresh service
            runner = fresh_runner(service, ledger)
            (pending,) = await runner.pending(user_id=USER, session_id=SESSION)
            assert pending.call_key.endswith(f":{i}")
            if kind == "c":
                assert (pending.kind, pending.args) == ("confirmation", {"item": f"i{i}"})
                events = await collect(runner.approve(user_id=USER, session_id=SESSION))
                expected.append(f"charged i{i}")
            else:
                assert (pending.kind, pending.args) == ("completion", {"scene": f"s{i}"})
                value = {"url": f"u{i}"}
                events = await collect(
                    runner.complete(user_id=USER, session_id=SESSION, call_key=pending.call_key, value=value)
                )
                expected.append(value)
        assert all(e.error_code is None for e in events), [e.error_message for e in events]
    assert json.loads(events[-1].text) == expected
    # every side effect once, every outcome in the journal
    effect = {"c": "charge i{}", "l": "render s{}", "n": "note t{}"}
    assert sorted(ledger.lines()) == sorted(effect[k].format(i) for i, k in enumerate(kinds))
    with SqliteSessionService(db) as service:
        assert len(outcomes_of(service)) == len(kinds)
        assert await slot_of(service) is None


# --------------------------------------------------------------------- 2. idle runs and new messages


@pytest.mark.parametrize(
    "interruptions",
    [["idle"], ["idle", "idle", "idle"], ["message", "idle"], ["idle", "message", "message", "idle"]],
    ids=["one-idle", "three-idle", "message-then-idle", "mixed"],
)
@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_idle_runs_and_rejected_messages_change_nothing(
    tmp_path: Path, interruptions: list[str], decision: str
) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    script = 'try:\n    r = call_tool("charge", {"item": "x"})\nexcept PermissionError as e:\n    r = "refused"\n'
    await start(db, ledger, script + final_script("r"))
    with SqliteSessionService(db) as service:
        before_slot = await slot_of(service)
        before_events = len((await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)).events)
        runner = fresh_runner(service, ledger)
        for kind in interruptions:
            if kind == "idle":
                (again,) = await collect(runner.run_async(user_id=USER, session_id=SESSION))
                assert list(again.actions.requested_tool_confirmations) == [before_slot.data["pending"][0]["call_key"]]
            else:
                with pytest.raises(CallsPendingError) as err:
                    await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="cancel that"))
                assert [p.tool for p in err.value.pending] == ["charge"]
        assert await slot_of(service) == before_slot
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert len(session.events) == before_events
        verb = runner.approve if decision == "approve" else runner.deny
        events = await collect(verb(user_id=USER, session_id=SESSION))
    assert events[-1].text == ("charged x" if decision == "approve" else "refused")
    assert ledger.lines() == (["charge x"] if decision == "approve" else [])


@pytest.mark.parametrize("policy", ["deny", "discard"])
async def test_new_message_while_pending_follows_the_policy(tmp_path: Path, policy: str) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    script = (
        'try:\n    r = call_tool("charge", {"item": "x"})\nexcept PermissionError as e:\n    r = "refused: " + str(e)\n'
    )
    await start(db, ledger, script + final_script("r"))
    with SqliteSessionService(db) as service:
        model = ScriptedModel([fence(final_script('"answered the new message"'))])
        runner = Runner(app_name=APP, agent=agent_for(ledger, model), session_service=service)
        events = await collect(
            runner.run_async(
                user_id=USER,
                session_id=SESSION,
                new_message="cancel that",
                run_config=RunConfig(on_pending_message=policy),
            )
        )
        assert await slot_of(service) is None
        assert await runner.pending(user_id=USER, session_id=SESSION) == []
    assert ledger.lines() == []  # the pending call never ran
    if policy == "deny":
        assert events[-1].text.startswith("refused: call to 'charge' was denied")
        assert "new message" in events[-1].text
        assert model.requests == []
    else:
        assert events[-1].text == "answered the new message"
        assert model.requests[0].contents[-1].text == "cancel that"


# --------------------------------------------------------------------- 3. altered continuation


@pytest.mark.parametrize("where", ["first", "middle", "last"])
async def test_altered_continuation_is_refused_before_the_tool_runs(tmp_path: Path, where: str) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger, 'r = call_tool("charge", {"item": "x"})\n' + final_script("r"))
    con = sqlite3.connect(db)
    (snapshot,) = con.execute("SELECT snapshot FROM turns").fetchone()
    i = {"first": 0, "middle": len(snapshot) // 2, "last": len(snapshot) - 1}[where]
    altered = snapshot[:i] + bytes([snapshot[i] ^ 0x01]) + snapshot[i + 1 :]
    con.execute("UPDATE turns SET snapshot = ?", (altered,))
    con.commit()
    con.close()
    for attempt in range(3):  # approving, then restarting, never runs it
        with SqliteSessionService(db) as service:
            runner = fresh_runner(service, ledger)
            if attempt == 0:
                events = await collect(runner.approve(user_id=USER, session_id=SESSION))
            else:
                events = await collect(runner.run_async(user_id=USER, session_id=SESSION))
        assert events[-1].error_code == "codeact.stale_checkpoint"
        assert "integrity" in events[-1].error_message
        assert ledger.lines() == []
    with SqliteSessionService(db) as service:
        runner = fresh_runner(service, ledger)
        assert await runner.discard_pending_checkpoint(user_id=USER, session_id=SESSION)
        assert await runner.pending(user_id=USER, session_id=SESSION) == []
    assert ledger.lines() == []


# --------------------------------------------------------------------- 4. two processes resuming at once

RESUMER = textwrap.dedent(
    """
    import json, os, sys, time
    import anyio
    from codeact import AlreadyResumingError, CodeActAgent, FunctionTool, LongRunningFunctionTool, MontyRuntime
    from codeact import NoPendingCallError
    from codeact import Runner, ScriptedModel, SqliteSessionService

    db, ledger, delay, hold = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])

    def charge(item: str) -> str:
        \"\"\"Charges.\"\"\"
        with open(ledger, "a") as f:
            f.write(f"charge {item} {os.getpid()}\\n")
        time.sleep(hold)
        return f"charged {item}"

    def render(scene: str) -> dict:
        \"\"\"Starts a render.\"\"\"
        return {}

    def note(text: str) -> str:
        \"\"\"Writes a note.\"\"\"
        return text

    async def main():
        time.sleep(delay)
        with SqliteSessionService(db) as service:
            agent = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime(),
                                 tools=[FunctionTool(charge, requires_confirmation=True),
                                        LongRunningFunctionTool(render), note])
            runner = Runner(app_name="app", agent=agent, session_service=service)
            try:
                events = [e async for e in runner.approve(user_id="u", session_id="s")]
                print(json.dumps({"result": events[-1].text}))
            except AlreadyResumingError as exc:
                print(json.dumps({"result": "already-resuming", "pending": [p.call_key for p in exc.pending]}))
            except NoPendingCallError:
                print(json.dumps({"result": "nothing-pending"}))

    anyio.run(main)
    """
)


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.3])
async def test_two_processes_approving_run_the_tool_once(tmp_path: Path, delay: float) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    await start(db, ledger, 'r = call_tool("charge", {"item": "x"})\n' + final_script("r"))
    child = tmp_path / "resumer.py"
    child.write_text(RESUMER)
    procs = [
        subprocess.Popen(
            [sys.executable, str(child), str(db), str(ledger.path), str(d), "1.0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # the child imports codeact as installed (the wheel in CI), not from the source tree
        for d in (0.0, delay)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]  # both reaped before any assertion
    results = []
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1])["result"])
    assert sorted(results) in (["already-resuming", "charged x"], ["charged x", "nothing-pending"]), results
    assert len(ledger.lines()) == 1, ledger.lines()


# --------------------------------------------------------------------- 5. inputs that match nothing


async def test_unmatched_keys_raise_and_run_nothing(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    events = await start(db, ledger, 'r = call_tool("charge", {"item": "x"})\n' + final_script("r"))
    (key,) = events[-1].actions.requested_tool_confirmations
    with SqliteSessionService(db) as service:
        runner = fresh_runner(service, ledger)
        for bad in ("nope", key + "0", key.rsplit(":", 1)[0] + ":7", "0"):
            with pytest.raises(NoPendingCallError) as err:
                await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=bad))
            assert [p.call_key for p in err.value.pending] == [key]
            assert key in str(err.value)
            with pytest.raises(NoPendingCallError):
                rc = RunConfig(tool_confirmation_decisions={bad: True})
                await collect(runner.run_async(user_id=USER, session_id=SESSION, run_config=rc))
        with pytest.raises(NoPendingCallError):  # a decision cannot complete a call awaiting a decision
            await collect(runner.complete(user_id=USER, session_id=SESSION, call_key=key, value=1))
        assert (await slot_of(service)).data["status"] == "suspended"
        events = await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=key))
        assert events[-1].text == "charged x"
        # the same approval again, on the finished session: nothing pending, no model call, no tool
        for attempt in (
            runner.approve(user_id=USER, session_id=SESSION, call_key=key),
            runner.approve(user_id=USER, session_id=SESSION),
            runner.deny(user_id=USER, session_id=SESSION, call_key=key),
            runner.run_async(
                user_id=USER, session_id=SESSION, run_config=RunConfig(tool_confirmation_decisions={key: True})
            ),
        ):
            with pytest.raises(NoPendingCallError) as err:
                await collect(attempt)
            assert err.value.pending == []
    assert ledger.lines() == ["charge x"]


async def test_unmatched_function_responses_raise(tmp_path: Path) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    events = await start(db, ledger, 'r = call_tool("render", {"scene": "a"})\n' + final_script("r"))
    (key,) = events[-1].long_running_tool_ids
    from codeact import Content, FunctionResponse, Part

    def response(**kw: Any) -> Content:
        return Content(role="user", parts=[Part(function_response=FunctionResponse(**kw))])

    with SqliteSessionService(db) as service:
        runner = fresh_runner(service, ledger)
        for bad in (
            response(name="render", id="nope", response=1),
            response(name="other_tool", response=1),
            response(name="other_tool", id=key, response=1),
        ):
            with pytest.raises(NoPendingCallError):
                await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message=bad))
        with pytest.raises(NoPendingCallError):
            await collect(runner.complete(user_id=USER, session_id=SESSION, call_key="nope", value=1))
        with pytest.raises(NoPendingCallError):  # a completion cannot be approved
            await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=key))
        events = await collect(runner.complete(user_id=USER, session_id=SESSION, call_key=key, value={"ok": 1}))
    assert json.loads(events[-1].text) == {"ok": 1}
    assert ledger.lines() == ["render a"]


async def test_a_long_running_call_completed_with_an_error_raises_in_the_script(tmp_path: Path) -> None:
    """Runner.complete(error=...): the script's call raises RuntimeError (catchable), the failure
    is journaled, and a second process sees the run finished (issue 22: framework error flags)."""
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    script = (
        'try:\n    r = call_tool("render", {"scene": "a"})\n'
        'except RuntimeError as exc:\n    r = "caught: " + str(exc)\n' + final_script("r")
    )
    events = await start(db, ledger, script)
    (key,) = events[-1].long_running_tool_ids
    with SqliteSessionService(db) as service:
        runner = fresh_runner(service, ledger)
        with pytest.raises(ValueError, match="either value or error"):
            await collect(runner.complete(user_id=USER, session_id=SESSION, call_key=key, value=1, error="x"))
        with pytest.raises(ValueError, match="must be a str"):
            await collect(runner.complete(user_id=USER, session_id=SESSION, call_key=key, error=7))  # type: ignore[arg-type]
        assert [p.call_key for p in await runner.pending(user_id=USER, session_id=SESSION)] == [key]  # nothing lost
        events = await collect(runner.complete(user_id=USER, session_id=SESSION, call_key=key, error="farm is down"))
        assert events[-1].text.startswith("caught: ") and "farm is down" in events[-1].text
        assert "render" in events[-1].text
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        stored = [p.function_response for e in session.events for p in (e.content.parts if e.content else [])]
        assert any(r is not None and r.error == "farm is down" and r.response is None for r in stored)
    with SqliteSessionService(db) as service:
        runner = fresh_runner(service, ledger)
        assert await runner.pending(user_id=USER, session_id=SESSION) == []
        with pytest.raises(NoPendingCallError):
            await collect(runner.complete(user_id=USER, session_id=SESSION, call_key=key, error="again"))
    assert ledger.lines() == ["render a"]


@pytest.mark.parametrize("verb", ["pending", "approve", "deny", "complete", "discard", "decision"])
async def test_unmatched_session_raises_and_is_not_created(tmp_path: Path, verb: str) -> None:
    ledger = Ledger(tmp_path / "ledger")
    model = ScriptedModel([fence(final_script("1"))])
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent_for(ledger, model), session_service=service, auto_create_session=True)
        with pytest.raises(SessionNotFoundError) as caught:
            if verb == "pending":
                await runner.pending(user_id=USER, session_id="missing")
            elif verb == "approve":
                await collect(runner.approve(user_id=USER, session_id="missing"))
            elif verb == "deny":
                await collect(runner.deny(user_id=USER, session_id="missing", call_key="k"))
            elif verb == "complete":
                await collect(runner.complete(user_id=USER, session_id="missing", call_key="k", value=1))
            elif verb == "discard":
                await runner.discard_pending_checkpoint(user_id=USER, session_id="missing")
            else:
                rc = RunConfig(tool_confirmation_decisions={"k": True})
                await collect(runner.run_async(user_id=USER, session_id="missing", run_config=rc))
        # these calls never create a session, so the error does not advise auto_create_session
        assert "auto_create_session" not in str(caught.value)
        assert "never creates a session" in str(caught.value)
        assert await service.get_session(app_name=APP, user_id=USER, session_id="missing") is None
    assert model.requests == []


# --------------------------------------------------------------------- 6. values too deep or too large

DEEP_ARG = "x = 0\nfor i in range({depth}):\n    x = [x]\n"


@pytest.mark.parametrize("depth", [101, 199, 1000])
async def test_deep_argument_is_an_error_in_the_script_before_the_tool_runs(tmp_path: Path, depth: int) -> None:
    ledger = Ledger(tmp_path / "ledger")
    script = (
        DEEP_ARG.format(depth=depth)
        + 'try:\n    r = call_tool("note", {"text": x})\nexcept ValueError as e:\n    r = "caught: " + str(e)\n'
    )
    model = ScriptedModel([fence(script + final_script("r")), fence(final_script('"after feedback"'))])
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent_for(ledger, model), session_service=service, auto_create_session=True)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    assert events[-1].error_code is None
    if events[-1].text != "after feedback":
        assert events[-1].text.startswith("caught: the arguments of 'note'")
        assert "nests deeper than 100 levels; the tool did not run" in events[-1].text
    else:  # the interpreter itself refused to build or pass the value: a script error fed back
        assert "Error during execution" in model.requests[1].contents[-1].text
    assert ledger.lines() == []


@pytest.mark.parametrize("depth", [101, 199, 1000])
async def test_deep_result_is_the_tools_error_and_never_reruns(tmp_path: Path, depth: int) -> None:
    ledger = Ledger(tmp_path / "ledger")

    def deep() -> list:
        """Returns a deep list."""
        ledger.add("deep")
        x: Any = 0
        for _ in range(depth):
            x = [x]
        return x

    script = 'try:\n    r = call_tool("deep")\nexcept ValueError as e:\n    r = "caught: " + str(e)\n'
    model = ScriptedModel([fence(script + final_script("r")), fence(final_script('"second"'))])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[deep])
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        assert events[-1].text.startswith("caught: ")
        assert events[-1].text.startswith("caught: the result of 'deep'[0][0]")
        assert "nests deeper than 100 levels" in events[-1].text
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="again"))
        assert events[-1].text == "second"
    assert ledger.lines() == ["deep"]


@pytest.mark.parametrize("tool", ["charge", "render", "note"])
@pytest.mark.parametrize("digits", [4301, 5001])
async def test_an_int_too_long_to_store_is_refused_at_the_call(tmp_path: Path, tool: str, digits: int) -> None:
    # The journal and the stored events are JSON read back by pydantic, which takes ints of
    # at most 4300 digits: a longer one (a gated call's pause event, a long-running call's
    # announcement, an inline call's journal) is refused before anything is stored.
    ledger = Ledger(tmp_path / "ledger")
    arg = "item" if tool == "charge" else "scene" if tool == "render" else "text"
    script = (
        f'try:\n    r = call_tool("{tool}", {{"{arg}": 10 ** {digits - 1}}})\n'
        "except ValueError as e:\n    r = 'caught: ' + str(e)\n"
    )
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(
            app_name=APP,
            agent=agent_for(ledger, [fence(script + final_script("r"))]),
            session_service=service,
            auto_create_session=True,
        )
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        assert events[-1].text == (
            f"caught: the arguments of '{tool}'['{arg}'] is an int of more than 4300 digits, which cannot be "
            "stored (at most 4300 digits); the tool did not run"
        )
        assert await runner.pending(user_id=USER, session_id=SESSION) == []
    assert ledger.lines() == []


async def test_an_int_of_4300_digits_crosses_and_is_stored(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")

    def pay(amount: int) -> int:
        """Pays (needs approval)."""
        ledger.add(f"pay {len(str(amount))}")
        return amount + 1

    script = 'r = call_tool("pay", {"amount": 10 ** 4299 - 1})\n' + final_script("len(str(r))")
    model = ScriptedModel([fence(script)])
    agent = CodeActAgent(
        name="coder", model=model, runtime=MontyRuntime(), tools=[FunctionTool(pay, requires_confirmation=True)]
    )
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
        await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        (pending,) = await runner.pending(user_id=USER, session_id=SESSION)
        assert pending.args == {"amount": 10**4299 - 1}
        events = await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=pending.call_key))
    assert events[-1].text == "4300"  # 10 ** 4299: 4300 digits, stored in the journal and read back
    assert ledger.lines() == ["pay 4299"]


async def test_a_tool_result_with_an_int_too_long_to_store_is_the_tools_error(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")

    def huge() -> dict:
        """Returns a huge number."""
        ledger.add("huge")
        return {"n": 10**5000}

    script = 'try:\n    r = call_tool("huge")\nexcept ValueError as e:\n    r = "caught: " + str(e)\n'
    agent = CodeActAgent(
        name="coder", model=ScriptedModel([fence(script + final_script("r"))]), runtime=MontyRuntime(), tools=[huge]
    )
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    assert events[-1].text.startswith("caught: the result of 'huge'['n'] is an int of more than 4300 digits")
    assert ledger.lines() == ["huge"]


@pytest.mark.parametrize("size", [70_000, 300_000])
async def test_large_result_is_stored_once_and_referenced(tmp_path: Path, size: int) -> None:
    def big(n: int) -> str:
        """A long text."""
        return "y" * n

    script = f'a = call_tool("big", {{"n": {size}}})\nb = call_tool("big", {{"n": {size}}})\n'
    model = ScriptedModel([fence(script + final_script("len(a) + len(b)"))])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[big])
    db = tmp_path / "s.db"
    with SqliteSessionService(db) as service:
        runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    assert events[-1].text == str(2 * size)
    con = sqlite3.connect(db)
    blobs = con.execute("SELECT length(data) FROM blobs").fetchall()
    outcomes = [json.loads(d) for (d,) in con.execute("SELECT data FROM journal WHERE kind = 'outcome'")]
    con.close()
    values = [n for (n,) in blobs if n > size]  # (the others: the run's prompt and transcript, format 4)
    assert len(values) == 1  # the same value twice: stored once
    assert all(set(o) == {"r", "n"} for o in outcomes) and outcomes[0] == outcomes[1]


# --------------------------------------------------------------------- 7. gather over long-running calls


@pytest.mark.parametrize("n", [2, 3])
async def test_gather_over_long_running_calls_loses_no_result(tmp_path: Path, n: int) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    calls = ", ".join(f'call_tool("render", {{"scene": "s{i}"}})' for i in range(n))
    gather = f"import asyncio\nasync def main():\n    return await asyncio.gather({calls})\nr = await main()\n"
    assert MontyRuntime().capabilities().supports_await  # the gather is one Gather step
    with SqliteSessionService(db) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(
            app_name=APP, agent=agent_for(ledger, [fence(gather + final_script("r"))]), session_service=service
        )
        await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        # every render started at once (concurrently: in any order), each waiting on its own completion
        assert sorted(ledger.lines()) == [f"render s{i}" for i in range(n)]
        pending = await runner.pending(user_id=USER, session_id=SESSION)
        assert [(p.tool, p.kind) for p in pending] == [("render", "completion")] * n
    results = []
    for _ in range(n * 2):
        with SqliteSessionService(db) as service:
            runner = fresh_runner(service, ledger)
            pending = await runner.pending(user_id=USER, session_id=SESSION)
            if not pending:
                break
            for p in pending:  # with a gather step every call is pending at once
                events = await collect(
                    runner.complete(user_id=USER, session_id=SESSION, call_key=p.call_key, value=p.args["scene"])
                )
                results.append(p.args["scene"])
                assert all(e.error_code is None for e in events), [e.error_message for e in events]
    assert results == [f"s{i}" for i in range(n)]
    assert sorted(ledger.lines()) == [f"render s{i}" for i in range(n)]  # each started once
    with SqliteSessionService(db) as service:
        assert [o["v"] for o in outcomes_of(service)] == results  # every result recorded
        assert await slot_of(service) is None
    assert json.loads(events[-1].text) == results


# --------------------------------------------------------------------- 8. sync tools


@pytest.mark.parametrize("sleep", [1.0, 3.0])
async def test_sync_tool_timeout_holds_and_the_late_result_is_discarded(
    tmp_path: Path, sleep: float, caplog: pytest.LogCaptureFixture
) -> None:
    finished: list[str] = []

    def slow() -> str:
        """Blocks."""
        time.sleep(sleep)
        finished.append("late")
        return "late"

    script = 'try:\n    r = call_tool("slow")\nexcept TimeoutError as e:\n    r = "timeout: " + str(e)\n'
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([fence(script + final_script("r"))]),
        runtime=MontyRuntime(),
        tools=[slow],
        tool_timeout=0.2,
    )
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
        t0 = time.perf_counter()
        with caplog.at_level(logging.WARNING, logger="codeact.tools"):
            events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
            elapsed = time.perf_counter() - t0
            assert events[-1].text == "timeout: tool 'slow' timed out after 0.2 s"
            assert elapsed < sleep * 0.8
            assert outcomes_of(service) == [{"e": "tool 'slow' timed out after 0.2 s", "t": "TimeoutError"}]
            with anyio.fail_after(sleep + 5):
                while not finished:
                    await anyio.sleep(0.05)
            await anyio.sleep(0.1)
        assert any("discarded" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("sleep", [0.6, 1.2])
async def test_sync_tool_does_not_block_other_sessions(tmp_path: Path, sleep: float) -> None:
    def block() -> str:
        """Blocks the calling thread."""
        time.sleep(sleep)
        return "done"

    finished: dict[str, float] = {}
    t0 = time.perf_counter()
    with SqliteSessionService(tmp_path / "s.db") as service:

        async def one(sid: str, script: str, delay: float) -> None:
            await anyio.sleep(delay)
            agent = CodeActAgent(
                name="coder", model=ScriptedModel([fence(script)]), runtime=MontyRuntime(), tools=[block]
            )
            runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
            await collect(runner.run_async(user_id=USER, session_id=sid, new_message="go"))
            finished[sid] = time.perf_counter() - t0

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "slow", 'r = call_tool("block")\n' + final_script("r"), 0.0)
            tg.start_soon(one, "quick", final_script("1"), 0.1)
    assert finished["quick"] < finished["slow"]
    assert finished["quick"] < sleep * 0.8


# --------------------------------------------------------------------- 9. budgets


@pytest.mark.parametrize("limit", [1, 50, 400])
async def test_budget_max_tool_calls_stops_the_script_and_tells_the_model(tmp_path: Path, limit: int) -> None:
    ledger = Ledger(tmp_path / "ledger")
    model = ScriptedModel(
        [fence('while True:\n    call_tool("note", {"text": "x"})'), fence(final_script('"gave up"'))]
    )
    agent = agent_for(ledger, model, max_tool_calls=limit)
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    assert events[-1].text == "gave up"
    assert len(ledger.lines()) == limit
    feedback = model.requests[1].contents[-1].text
    assert f"max_tool_calls={limit}" in feedback


@pytest.mark.parametrize("seconds", [0.2, 0.5])
async def test_budget_max_script_seconds_spans_steps(tmp_path: Path, seconds: float) -> None:
    calls: list[int] = []

    async def tick() -> int:
        """Waits a little."""
        await anyio.sleep(0.05)
        calls.append(1)
        return len(calls)

    model = ScriptedModel([fence('while True:\n    call_tool("tick")'), fence(final_script('"stopped"'))])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[tick], max_script_seconds=seconds)
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
        t0 = time.perf_counter()
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    assert events[-1].text == "stopped"
    assert time.perf_counter() - t0 < seconds + 2
    assert "max_script_seconds" in model.requests[1].contents[-1].text
    assert 1 <= len(calls) <= seconds / 0.05 + 2


@pytest.mark.parametrize("limit", [1, 3])
async def test_usage_limit_model_calls_ends_the_run(tmp_path: Path, limit: int) -> None:
    model = ScriptedModel(lambda request: fence('{"type": "observation", "value": 1}'))
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime())
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
        events = await collect(
            runner.run_async(
                user_id=USER, session_id=SESSION, new_message="go", run_config=RunConfig(max_model_calls=limit)
            )
        )
    assert events[-1].error_code == "codeact.usage_limit"
    assert len(model.requests) == limit


@pytest.mark.parametrize(("per_reply", "limit", "calls"), [(100, 250, 3), (1000, 1000, 1)])
async def test_usage_limit_tokens_ends_the_run(tmp_path: Path, per_reply: int, limit: int, calls: int) -> None:
    from codeact import Content

    def reply(request: Any) -> LlmResponse:
        return LlmResponse(
            content=Content.from_text(fence('{"type": "observation", "value": 1}'), role="model"),
            usage=Usage(prompt_tokens=per_reply - 10, completion_tokens=10),
        )

    model = ScriptedModel(reply)
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime())
    with SqliteSessionService(tmp_path / "s.db") as service:
        runner = Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)
        events = await collect(
            runner.run_async(
                user_id=USER, session_id=SESSION, new_message="go", run_config=RunConfig(max_total_tokens=limit)
            )
        )
    assert events[-1].error_code == "codeact.usage_limit"
    assert len(model.requests) == calls


async def test_two_runners_a_resumer_that_loaded_the_session_early_still_finishes(tmp_path: Path) -> None:
    """Runner B loads the session, then runner A resumes and pauses again at the next call;
    B claims that next suspension and must finish (not fail on its stale session object)."""
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    script = 'a = call_tool("charge", {"item": "a"})\nb = call_tool("charge", {"item": "b"})\n'
    events = await start(db, ledger, script + final_script("[a, b]"))
    (first,) = events[-1].actions.requested_tool_confirmations
    second = first.rsplit(":", 1)[0] + ":1"
    gate = anyio.Event()

    class Held(SqliteSessionService):
        async def load_turn(self, **kwargs: Any) -> Any:
            await gate.wait()
            return await super().load_turn(**kwargs)

    results: dict[str, Any] = {}

    async def runner_b() -> None:
        with Held(db) as service:
            rc = RunConfig(tool_confirmation_decisions={second: True})
            events = await collect(
                fresh_runner(service, ledger).run_async(user_id=USER, session_id=SESSION, run_config=rc)
            )
            results["b"] = events[-1].text

    async with anyio.create_task_group() as tg:
        tg.start_soon(runner_b)
        await anyio.sleep(0.2)  # B has loaded the session and waits for the turn slot
        with SqliteSessionService(db) as service:
            events = await collect(
                fresh_runner(service, ledger).approve(user_id=USER, session_id=SESSION, call_key=first)
            )
        assert list(events[-1].actions.requested_tool_confirmations) == [second]
        gate.set()
    assert json.loads(results["b"]) == ["charged a", "charged b"]
    assert ledger.lines() == ["charge a", "charge b"]
