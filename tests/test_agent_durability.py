"""Suspending and resuming (reference §11, §19.3, §19.8; SPEC §5 v2): the 0.1.0 checkpoint
wire shapes (still readable), the resume paths of confirmation and completion, stale turns,
crash consistency at every journal boundary, and a resume in a fresh process from SQLite."""

from __future__ import annotations

import base64
import gc
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import anyio
import pytest

from agent_helpers import (
    APP,
    SESSION,
    USER,
    FakeTool,
    fence,
    outcomes_of,
    run,
    scripted_agent,
    slot_of,
)
from codeact import (
    PENDING_STATE_KEY,
    CodeActAgent,
    Content,
    FunctionResponse,
    InMemorySessionService,
    MontyRuntime,
    Part,
    ResumeError,
    ResumeValue,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.agent import (
    decode_script_output,
    render_final,
    truncate_middle,
)
from codeact.agent._output import Error, FinalResult, Observation, TransferToAgent
from codeact.testing import PlannedCall, PlannedComplete

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parent


def final(value: object) -> PlannedComplete:
    return PlannedComplete({"type": "final_result", "value": value})


# --------------------------------------------------------------------- 0.1.0 sessions

# What codeact 0.1.0 stored under ``codeact_pending`` for a script paused at a confirmation
# (checkpoint format 1): this version refuses it as stale and can discard it.
LEGACY_FORMAT_1 = {
    "version": 1,
    "agent_name": "coder",
    "invocation_id": "inv",
    "iteration": 3,
    "system_prompt": "SYS",
    "transcript": [{"role": "user", "parts": [{"text": "q"}]}],
    "turn_stdout": "",
    "snapshot": base64.b64encode(bytes(range(256))).decode(),
    "call": {"call_key": "inv:3:1", "call_id": 1, "tool": "render_video", "args": {"id": 7}},
    "disposition": {"kind": "awaiting_confirmation"},
    "tool_roster": ["fetch", "render_video"],
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"type": "observation", "value": [1]}, Observation([1])),
        ({"type": "error", "message": "m"}, Error("m")),
        ({"type": "final_result", "value": 7}, FinalResult(7)),
        ({"type": "final_result", "value": None}, FinalResult(None)),
        ({"type": "transfer_to_agent", "agent_name": "billing"}, TransferToAgent("billing")),
        ({"type": "final_result", "value": 1, "extra": "ignored"}, FinalResult(1)),
    ],
)
def test_decode_script_output_variants(value: object, expected: object) -> None:
    assert decode_script_output(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        {"not": "a variant"},
        None,
        7,
        "final",
        [1],
        (1, 2),
        {"type": "FINAL_RESULT", "value": 1},
        {"type": "final_result"},
        {"type": "observation"},
        {"type": "error", "message": None},
        {"type": "transfer_to_agent", "agent_name": 3},
        {"type": 1, "value": 1},
    ],
)
def test_decode_rejects_non_variants(value: object) -> None:
    out = decode_script_output(value)
    assert isinstance(out, Error)
    assert out.message.startswith("the script must end with an expression")
    assert "got " in out.message


def test_decode_error_names_the_value_compactly() -> None:
    out = decode_script_output({"not": "a variant"})
    assert '{"not":"a variant"}' in out.message


def test_final_result_and_transfer_wire_shapes_decode() -> None:
    assert decode_script_output(json.loads('{"type":"final_result","value":7}')) == FinalResult(7)
    assert decode_script_output(json.loads('{"type":"transfer_to_agent","agent_name":"billing"}')) == TransferToAgent(
        "billing"
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain text", "plain text"),
        ("", ""),
        ({"a": 1, "b": [1, 2]}, '{\n  "a": 1,\n  "b": [\n    1,\n    2\n  ]\n}'),
        ([1], "[\n  1\n]"),
        (7, "7"),
        (0.5, "0.5"),
        (True, "true"),
        (None, "null"),
        ({"name": "Zoë"}, '{\n  "name": "Zoë"\n}'),
    ],
)
def test_render_final(value: object, text: str) -> None:
    assert render_final(value) == text


def test_truncate_middle() -> None:
    marker = "\n...[truncated]...\n"
    assert truncate_middle("abc", 3) == "abc"
    assert truncate_middle("", 0) == ""
    assert truncate_middle("abcdefghij", 4) == "ab" + marker + "ij"
    assert truncate_middle("abcdefghij", 5) == "ab" + marker + "ij"
    # counts code points, never splits one
    assert truncate_middle("é" * 10 + "ü" * 10, 10) == "ééééé" + marker + "üüüüü"
    assert truncate_middle("🙂" * 3, 3) == "🙂" * 3
    assert truncate_middle("🙂" * 4, 2) == "🙂" + marker + "🙂"


# --------------------------------------------------------------------- confirmation on resume (ScriptedRuntime)


def gated_agent(**kw):
    delete = FakeTool("delete_file", "deleted")
    agent, rt, model = scripted_agent(
        [[PlannedCall("delete_file", {"path": "/tmp/x"}), final("done")]],
        tools=[delete],
        require_tool_confirmation=["delete_file"],
        **kw,
    )
    return agent, rt, model, delete


async def suspended_on_confirmation():
    agent, rt, _model, delete = gated_agent()
    events, _session, service = await run(agent)
    (key,) = events[-1].actions.requested_tool_confirmations
    slot = await slot_of(service)
    assert slot.data["status"] == "suspended"
    return agent, rt, delete, service, key


@pytest.mark.parametrize("decision", ["approve", True])
async def test_confirmation_resume_with_approve(decision) -> None:
    agent, rt, delete, service, key = await suspended_on_confirmation()
    rc = RunConfig(tool_confirmation_decisions={key: decision})
    events, _session, _ = await run(agent, service=service, message=None, run_config=rc)
    assert outcomes_of(service) == [{"v": "deleted"}]
    assert events[-1].text == "done"
    assert delete.calls == [{"path": "/tmp/x"}]
    assert delete.contexts[0].function_call_id == key
    assert rt.outcomes == [ResumeValue("deleted")]
    assert await slot_of(service) is None


@pytest.mark.parametrize("decision", ["deny", False])
async def test_confirmation_resume_with_deny(decision) -> None:
    agent, rt, delete, service, key = await suspended_on_confirmation()
    rc = RunConfig(tool_confirmation_decisions={key: decision})
    events, _session, _ = await run(agent, service=service, message=None, run_config=rc)
    denied = "call to 'delete_file' was denied by a human reviewer"
    assert outcomes_of(service) == [{"e": denied, "t": "PermissionError"}]
    assert delete.calls == []
    assert rt.outcomes == [ResumeError(denied, "PermissionError")]
    assert events[-1].text == "done"


async def test_confirmation_without_a_decision_reannounces_and_stores_nothing() -> None:
    agent, rt, delete, service, key = await suspended_on_confirmation()
    before = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    slot = await slot_of(service)
    for _ in range(3):
        events, session, _ = await run(agent, service=service, message=None)
        (again,) = events
        assert again.interrupted and again.turn_complete
        assert list(again.actions.requested_tool_confirmations) == [key]
        assert len(session.events) == len(before.events)
        assert await slot_of(service) == slot
    assert delete.calls == [] and rt.outcomes == []
    # the original key still works afterwards
    events, _, _ = await run(
        agent, service=service, message=None, run_config=RunConfig(tool_confirmation_decisions={key: "approve"})
    )
    assert events[-1].text == "done"
    assert len(delete.calls) == 1


# --------------------------------------------------------------------- long-running completion on resume


async def suspended_on_long_running():
    slow = FakeTool("render_video", {"status": "pending", "task_id": "t1"}, is_long_running=True)
    agent, rt, _model = scripted_agent([[PlannedCall("render_video", {"v": 1}), final("rendered")]], tools=[slow])
    events, _session, service = await run(agent)
    (key,) = events[-1].long_running_tool_ids
    return agent, rt, slow, service, key


def response_message(*responses: FunctionResponse) -> Content:
    return Content(role="user", parts=[Part(function_response=r) for r in responses])


async def test_long_running_completion_matched_by_key() -> None:
    agent, rt, slow, service, key = await suspended_on_long_running()
    msg = response_message(FunctionResponse(name="render_video", id=key, response={"url": "right"}))
    events, _session, _ = await run(agent, service=service, message=msg)
    assert outcomes_of(service) == [{"v": {"url": "right"}}]
    assert rt.outcomes == [ResumeValue({"url": "right"})]
    assert events[-1].text == "rendered"
    assert len(slow.calls) == 1


async def test_long_running_completion_without_key() -> None:
    agent, rt, _slow, service, _key = await suspended_on_long_running()
    events, _, _ = await run(
        agent, service=service, message=response_message(FunctionResponse(name="render_video", response={"url": "u"}))
    )
    assert rt.outcomes == [ResumeValue({"url": "u"})]
    assert events[-1].text == "rendered"


async def test_long_running_without_a_message_reannounces() -> None:
    agent, rt, slow, service, key = await suspended_on_long_running()
    events, _session, _ = await run(agent, service=service, message=None)
    (again,) = events
    assert again.long_running_tool_ids == [key]
    assert again.is_final_response()
    assert rt.outcomes == [] and len(slow.calls) == 1  # not started again


async def test_null_completion_payload_resumes_with_an_empty_value() -> None:
    agent, rt, _slow, service, key = await suspended_on_long_running()
    events, _, _ = await run(
        agent, service=service, message=response_message(FunctionResponse(name="render_video", id=key))
    )
    assert events[-1].text == "rendered"
    assert rt.outcomes == [ResumeValue({})]


# --------------------------------------------------------------------- stale turns


async def assert_stale_then_discard(agent, service, reason: str, *, tool_calls: list | None = None) -> None:
    before = await slot_of(service)
    key = before.data["pending"][0]["call_key"] if before.data.get("pending") else None
    rc = RunConfig(tool_confirmation_decisions={key: True}) if key else None
    events, _session, _ = await run(agent, service=service, message=None, run_config=rc)
    assert events[-1].error_code == "codeact.stale_checkpoint"
    assert reason in events[-1].error_message
    assert "discard_pending_checkpoint" in events[-1].error_message
    assert tool_calls is None or tool_calls == []  # verified before any approved tool ran
    assert (await slot_of(service)) is not None  # kept until the caller discards it
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    assert await runner.discard_pending_checkpoint(user_id=USER, session_id=SESSION) is True
    assert await slot_of(service) is None
    assert await runner.discard_pending_checkpoint(user_id=USER, session_id=SESSION) is False


async def tamper(service, **changes) -> None:
    slot = await slot_of(service)
    snapshot = changes.pop("snapshot", slot.snapshot)
    await service.save_turn(
        app_name=APP,
        user_id=USER,
        session_id=SESSION,
        data={**slot.data, **changes},
        snapshot=snapshot,
        expected_version=slot.version,
    )


async def test_roster_mismatch_is_stale_and_kept_until_discarded() -> None:
    _agent, _rt, delete, service, _key = await suspended_on_confirmation()
    other, _, _ = scripted_agent([], tools=[FakeTool("delete_file"), FakeTool("extra")])
    await assert_stale_then_discard(other, service, "tool roster changed", tool_calls=delete.calls)


@pytest.mark.parametrize("change", [{"format": 1}, {"transcript": "garbage"}, {"iteration": "x"}])
async def test_malformed_turn_is_stale(change) -> None:
    agent, _rt, delete, service, _key = await suspended_on_confirmation()
    await tamper(service, **change)
    await assert_stale_then_discard(agent, service, "", tool_calls=delete.calls)


async def test_altered_snapshot_is_stale_before_the_approved_tool_runs() -> None:
    agent, _rt, delete, service, _key = await suspended_on_confirmation()
    slot = await slot_of(service)
    await tamper(service, snapshot=slot.snapshot[:-1] + bytes([slot.snapshot[-1] ^ 1]))
    await assert_stale_then_discard(agent, service, "integrity", tool_calls=delete.calls)


async def test_a_0_1_0_checkpoint_is_reported_clearly_and_discardable() -> None:
    echo = FakeTool("echo")
    agent, _rt, model = scripted_agent([[final("fresh")]], tools=[echo])
    legacy = dict(LEGACY_FORMAT_1)
    events, _session, service = await run(agent, message=None, state={PENDING_STATE_KEY: legacy})
    assert events[-1].error_code == "codeact.stale_checkpoint"
    assert "codeact 0.1.0" in events[-1].error_message
    assert echo.calls == [] and model.requests == []
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    assert await runner.discard_pending_checkpoint(user_id=USER, session_id=SESSION) is True
    events, session, _ = await run(agent, service=service, message="again")
    assert events[-1].text == "fresh"
    assert session.state[PENDING_STATE_KEY] is None


# --------------------------------------------------------------------- crash consistency at each journal boundary


class Crash(BaseException):
    """Simulates the process dying: nothing catches it."""


class CrashingService(InMemorySessionService):
    """Crashes right after (or before) durably storing the n-th journal record of a kind."""

    def __init__(self, kind: str, nth: int = 1, *, before: bool = False) -> None:
        super().__init__()
        self.kind, self.nth, self.before = kind, nth, before
        self.seen = 0

    async def append_journal(self, session, turn, records, **kwargs):
        hit = any(r.kind == self.kind for r in records)
        if hit:
            self.seen += 1
        if hit and self.before and self.seen == self.nth:
            raise Crash
        await super().append_journal(session, turn, records, **kwargs)
        if hit and not self.before and self.seen == self.nth:
            raise Crash


async def crash_run(agent, service) -> None:
    """One run that must die with ``Crash``. The abandoned agent generators are collected
    here, with the (trio) ResourceWarning about them silenced: a real crash ends the
    process instead. (That the runner leaves them unclosed is tested in test_runner.py.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            await run(agent, service=service)
        except Crash:
            pass
        else:
            pytest.fail("the run did not crash")
        for _ in range(10):  # trio finalizes abandoned generators one level per tick
            gc.collect()
            await anyio.sleep(0.001)


COUNT_SCRIPT = 'a = call_tool("fetch")\nb = call_tool("fetch")\n{"type": "final_result", "value": [a, b]}'


def counting_agent():
    runs: list[int] = []

    def fetch() -> int:
        """Fetches a number (the side effect: counted)."""
        runs.append(1)
        return len(runs)

    agent = CodeActAgent(
        name="coder", model=ScriptedModel(lambda r: fence(COUNT_SCRIPT)), runtime=MontyRuntime(), tools=[fetch]
    )
    return agent, runs


@pytest.mark.parametrize("nth", [1, 2])
async def test_crash_before_an_intent_runs_the_call_once(nth: int) -> None:
    agent, runs = counting_agent()
    service = CrashingService("intent", nth, before=True)
    await crash_run(agent, service)
    assert len(runs) == nth - 1  # crashed before the call's tool ran
    events, _, _ = await run(agent, service=service, message=None)
    assert events[-1].text == "[\n  1,\n  2\n]"
    assert len(runs) == 2


@pytest.mark.parametrize("nth", [1, 2])
async def test_crash_after_an_intent_reruns_at_most_that_call(nth: int) -> None:
    agent, runs = counting_agent()
    service = CrashingService("intent", nth)
    await crash_run(agent, service)
    assert len(runs) == nth - 1  # the intent is durable, the tool has not run
    events, _, _ = await run(agent, service=service, message=None)
    assert events[-1].text == "[\n  1,\n  2\n]"
    assert len(runs) == 2


@pytest.mark.parametrize("nth", [1, 2])
async def test_crash_while_the_tool_ran_reruns_it_at_least_once(nth: int) -> None:
    # the outcome write fails: the tool ran, its outcome is not recorded (the at-least-once window)
    agent, runs = counting_agent()
    service = CrashingService("outcome", nth, before=True)
    await crash_run(agent, service)
    assert len(runs) == nth
    events, _, _ = await run(agent, service=service, message=None)
    assert len(runs) == 3  # the interrupted call ran twice, the other once
    assert events[-1].error_code is None


@pytest.mark.parametrize("nth", [1, 2])
async def test_crash_after_an_outcome_never_reruns_the_tool(nth: int) -> None:
    agent, runs = counting_agent()
    service = CrashingService("outcome", nth)
    await crash_run(agent, service)
    assert len(runs) == nth
    events, _, _ = await run(agent, service=service, message=None)
    assert events[-1].text == "[\n  1,\n  2\n]"  # the recorded outcomes were replayed, unchanged
    assert len(runs) == 2


async def test_replay_divergence_ends_the_run_and_runs_no_tool() -> None:
    agent, runs = counting_agent()
    service = CrashingService("outcome", 1)
    await crash_run(agent, service)
    # the same turn replayed by a process whose script now calls another tool first
    slot = await slot_of(service)
    changed = slot.data["script"].replace('a = call_tool("fetch")', 'a = call_tool("other")')
    await tamper(service, script=changed)
    other = FakeTool("other", 5)
    agent2 = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime(), tools=[*agent.tools, other])
    await tamper(service, roster=["fetch", "other"])
    events, _, _ = await run(agent2, service=service, message=None)
    assert events[-1].error_code == "codeact.nondeterministic_replay"
    assert "'fetch'" in events[-1].error_message and "'other'" in events[-1].error_message
    assert other.calls == [] and len(runs) == 1
    assert await slot_of(service) is not None  # the caller decides: discard


async def test_monty_crash_after_the_outcome_resumes_from_sqlite(tmp_path: Path) -> None:
    count = {"n": 0}

    def fetch() -> int:
        count["n"] += 1
        return 41

    script = 'x = call_tool("fetch")\n{"type": "final_result", "value": x + 1}'

    class CrashingSqlite(SqliteSessionService):
        crash = True

        async def append_journal(self, session, turn, records, **kwargs):
            await super().append_journal(session, turn, records, **kwargs)
            if self.crash and any(r.kind == "outcome" for r in records):
                self.crash = False
                raise Crash

    db = tmp_path / "s.db"
    with CrashingSqlite(db) as service:
        agent = CodeActAgent(name="coder", model=ScriptedModel([fence(script)]), runtime=MontyRuntime(), tools=[fetch])
        await crash_run(agent, service)
    with SqliteSessionService(db) as service:
        agent = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime(), tools=[fetch])
        events, _session, _ = await run(agent, service=service, message=None)
    assert events[-1].text == "42"
    assert count["n"] == 1


# --------------------------------------------------------------------- suspend here, resume in a fresh process

CHILD = """
import json, os, sys
import anyio
from codeact import CodeActAgent, MontyRuntime, RunConfig, Runner, ScriptedModel, SqliteSessionService, tool

def log(line):
    with open(os.environ["TOOL_LOG"], "a") as f:
        f.write(line + "\\n")

def fetch_cart(user_id: str) -> dict:
    \"\"\"The cart.\"\"\"
    log(f"fetch_cart {os.getpid()}")
    return {"items": [10, 20, 30]}

@tool(requires_confirmation=True)
def delete_cart(user_id: str) -> str:
    \"\"\"Deletes the cart.\"\"\"
    log(f"delete_cart {os.getpid()}")
    return "deleted"

def build(replies):
    tools = [fetch_cart, delete_cart]
    return CodeActAgent(name="coder", model=ScriptedModel(replies), runtime=MontyRuntime(), tools=tools)

async def main(mode):
    with SqliteSessionService(os.environ["DB"]) as service:
        if mode == "resume":
            key = sys.argv[2]
            model_reply = "```python\\n{'type': 'final_result', 'value': 'cleared ' + str(3)}\\n```"
            agent = build([model_reply])
            runner = Runner(app_name="app", agent=agent, session_service=service)
            events = [e async for e in runner.approve(user_id="u", session_id="s", call_key=key)]
            prompt = [c.text for c in agent.model.requests[0].contents[-2:]] if agent.model.requests else None
            print(json.dumps({"texts": [e.text for e in events], "errors": [e.error_code for e in events],
                              "prompt": prompt}))

if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
"""

FIRST_SCRIPT = """
cart = call_tool("fetch_cart", {"user_id": "u-42"})
n = len(cart["items"])
print("items:", n)
status = call_tool("delete_cart", {"user_id": "u-42"})
{"type": "observation", "value": {"n": n, "status": status}}
"""


async def test_suspend_then_resume_in_a_fresh_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    db, log = tmp_path / "sessions.db", tmp_path / "tools.log"
    child = tmp_path / "child_app.py"
    child.write_text(textwrap.dedent(CHILD))
    monkeypatch.setenv("TOOL_LOG", str(log))
    monkeypatch.setenv("DB", str(db))
    env = dict(os.environ)
    # first process: this one, with the very same agent definition as the child
    spec = importlib.util.spec_from_file_location("child_app", child)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agent = module.build([fence(FIRST_SCRIPT)])
    with SqliteSessionService(db) as service:
        events, _session, _ = await run(agent, service=service, message="clear my cart")
    (key,) = list(events[-1].actions.requested_tool_confirmations)
    assert log.read_text().splitlines() == [f"fetch_cart {os.getpid()}"]

    proc = subprocess.run(
        [sys.executable, str(child), "resume", key], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(out["errors"]) == {None}
    assert out["texts"][-1] == "cleared 3"
    assert out["prompt"] == ['Observation:\n{"n":3,"status":"deleted"}', "Output (stdout):\nitems: 3\n"]
    lines = log.read_text().splitlines()
    assert lines[0] == f"fetch_cart {os.getpid()}"
    assert len(lines) == 2 and lines[1].startswith("delete_cart ") and lines[1] != f"delete_cart {os.getpid()}"
    with SqliteSessionService(db) as service:
        assert await slot_of(service) is None


# --------------------------------------------------------------------- periodic continuations


@pytest.mark.parametrize(("every", "crash_after", "resume_pos"), [(2, 5, 4), (3, 5, 3), (1, 2, 1)])
async def test_checkpoint_every_bounds_replay(every: int, crash_after: int, resume_pos: int) -> None:
    runs: list[int] = []

    def fetch(i: int) -> int:
        """Fetches (counted)."""
        runs.append(i)
        return i * 10

    script = "out = []\nfor i in range(6):\n    out.append(call_tool('fetch', {'i': i}))\n" + (
        '{"type": "final_result", "value": out}'
    )
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([fence(script)]),
        runtime=MontyRuntime(),
        tools=[fetch],
        checkpoint_every=every,
    )
    service = CrashingService("outcome", crash_after)
    await crash_run(agent, service)
    slot = await slot_of(service)
    # the continuation replaced the previous one at every `every` calls, before the call ran
    assert slot.snapshot is not None
    assert [a["pos"] for a in slot.data["at"]] == [resume_pos]
    events, _, _ = await run(agent, service=service, message=None)
    assert events[-1].text == json.dumps([i * 10 for i in range(6)], indent=2)
    assert runs == list(range(6))  # recovered from the continuation: nothing ran twice


async def test_a_0_1_0_sqlite_file_is_upgraded_in_place(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "old.db"
    with SqliteSessionService(db) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION, state={"k": 1})
    con = sqlite3.connect(db)  # make it what codeact 0.1.0 wrote: schema 1, no durability tables
    for table in ("turns", "journal", "blobs", "live"):
        con.execute(f"DROP TABLE {table}")
    con.execute("UPDATE schema_version SET version = 1")
    con.commit()
    con.close()

    def fetch() -> int:
        """Fetches."""
        return 41

    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([fence('{"type": "final_result", "value": call_tool("fetch")}')]),
        runtime=MontyRuntime(),
        tools=[fetch],
    )
    with SqliteSessionService(db) as service:
        events, session, _ = await run(agent, service=service)
        assert outcomes_of(service) == [{"v": 41}]
    assert events[-1].text == "41" and session.state["k"] == 1
    con = sqlite3.connect(db)
    assert con.execute("SELECT version FROM schema_version").fetchone() == (3,)
    con.close()
