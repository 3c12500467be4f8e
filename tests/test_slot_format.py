"""The incremental turn slot (issue 54, record format 4): the system prompt and the transcript
are stored in the session's blobs once per run, each turn adding only its delta; a 0.2.0 slot
(format 3, everything inline) still loads, and is written back as format 4."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from codeact import CodeActAgent, Content, FunctionTool, MontyRuntime, Runner, ScriptedModel, SqliteSessionService
from codeact.agent._slot_context import load_context
from codeact.sessions._service import to_json
from codeact.turns._record import TURN_FORMAT, TurnRecord, record_problem

pytestmark = pytest.mark.anyio

FIXTURE_020 = Path(__file__).parent / "data" / "interrupted-0.2.0.sqlite"  # tools/make_journal_fixture.py
KEY = ("app", "u", "s")


def inc(x: int) -> int:
    """Adds one.

    Args:
        x: a number.
    """
    return x + 1


def _fence(code: str) -> str:
    return f"```python\n{code}\n```"


OBSERVE = _fence('v = call_tool("inc", {"x": 1})\n{"type": "observation", "value": v}')
FINAL = _fence('v = call_tool("inc", {"x": 2})\n{"type": "final_result", "value": v}')


class Recording(SqliteSessionService):
    """Keeps every slot write's data and every blob stored."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.saved: list[dict[str, Any]] = []
        self.blobs: list[bytes] = []

    async def save_turn(self, **kwargs: Any) -> int:
        if kwargs["data"] is not None:
            self.saved.append(kwargs["data"])
        return await super().save_turn(**kwargs)

    async def commit_turn(self, session: Any, turn: str, records: Any, **kwargs: Any) -> int:
        self.saved.append(kwargs["data"])
        return await super().commit_turn(session, turn, records, **kwargs)

    async def put_blob(self, **kwargs: Any) -> None:
        self.blobs.append(kwargs["data"])
        await super().put_blob(**kwargs)


async def _run_turns(store: Recording, turns: int) -> tuple[list[Any], ScriptedModel]:
    model = ScriptedModel([OBSERVE] * (turns - 1) + [FINAL])
    agent = CodeActAgent(name="a", model=model, runtime=MontyRuntime(), tools=[inc], max_iterations=turns + 1)
    runner = Runner(app_name="app", agent=agent, session_service=store)
    await store.create_session(app_name="app", user_id="u", session_id="s")
    events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go")]
    return events, model


async def test_each_turn_writes_only_its_delta(tmp_path: Path) -> None:
    """A 6-turn run: every slot write is format 4 with no inline prompt or transcript; the
    prompt is stored once; each turn stores one transcript chunk holding only the messages
    added since the last one; the slot's JSON stays the same size turn after turn, and the
    stored context reads back as exactly what the model saw plus its reply."""
    with Recording(tmp_path / "s.db") as store:
        events, model = await _run_turns(store, 6)
        assert events[-1].text == "3"
        firsts: dict[str, dict[str, Any]] = {}
        for data in store.saved:
            assert data["format"] == TURN_FORMAT == 4
            assert data["system_prompt"] == "" and data["transcript"] == []
            firsts.setdefault(data["turn"], data)
        assert len(firsts) == 6
        prompt = model.requests[0].system_instruction
        assert store.blobs.count(prompt.encode()) == 1  # once per run
        chunks = [json.loads(b) for b in store.blobs if b != prompt.encode()]
        assert [len(c) for c in chunks] == [2] + [2] * 5  # the first turn's messages, then each turn's delta
        sizes = [len(to_json({k: v for k, v in d.items() if k != "transcript_refs"}, "t")) for d in firsts.values()]
        assert max(sizes) - min(sizes) < 64 and max(sizes) < len(prompt)
        for i, data in enumerate(firsts.values()):
            record = TurnRecord.model_validate(data)
            assert len(record.transcript_refs) == i + 1
            stored_prompt, transcript = await load_context(store, KEY, record)
            request = model.requests[i]
            reply = Content.from_text(OBSERVE if i < 5 else FINAL, role="model")
            expected = [c.model_dump(mode="json", exclude_none=True) for c in [*request.contents, reply]]
            assert stored_prompt == request.system_instruction and transcript == expected


async def test_a_missing_transcript_blob_reports_the_turn_as_stale(tmp_path: Path) -> None:
    """A format 4 record whose blob is gone (or altered) does not load: ``load_context``
    names the blob."""
    with Recording(tmp_path / "s.db") as store:
        await _run_turns(store, 2)
        record = TurnRecord.model_validate(store.saved[-1])
        gone = record.model_copy(update={"transcript_refs": [*record.transcript_refs, "0" * 64]})
        with pytest.raises(ValueError, match="missing from the store, or altered"):
            await load_context(store, KEY, gone)
        assert hashlib.sha256(store.blobs[0]).hexdigest() in (record.system_prompt_ref, *record.transcript_refs)


async def test_a_stored_0_2_0_slot_loads_and_is_written_back_as_format_4(tmp_path: Path) -> None:
    """The 0.2.0 fixture's slot (format 3: prompt and transcript inline, 8.8 KB) validates
    and recovers; when the recovered turn pauses (``pay`` now needs a confirmation) its slot
    is written as format 4, whose stored context reads back as the 0.2.0 record's; approving
    finishes the script as 0.2.0 would have."""
    db = tmp_path / "s.db"
    shutil.copyfile(FIXTURE_020, db)

    def lookup(k: int) -> int:
        """Looks up record k.

        Args:
            k: the record.
        """
        return k * 10

    def note(text: str) -> str:
        """Notes text.

        Args:
            text: the text.
        """
        return f"noted {text}"

    def pay(amount: int) -> str:
        """Pays.

        Args:
            amount: the amount.
        """
        return f"paid {amount}"

    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([]),
        runtime=MontyRuntime(),
        tools=[FunctionTool(lookup), FunctionTool(note), FunctionTool(pay, requires_confirmation=True)],
    )
    with Recording(db) as store:
        slot = await store.load_turn(app_name="app", user_id="u", session_id="s")
        assert slot is not None and slot.data["format"] == 3
        old, problem = record_problem(slot.data)
        assert old is not None and problem is None
        assert old.system_prompt and old.transcript and old.system_prompt_ref is None
        assert await load_context(store, KEY, old) == (old.system_prompt, old.transcript)
        runner = Runner(app_name="app", agent=agent, session_service=store)
        events = [e async for e in runner.run_async(user_id="u", session_id="s")]
        paused = await store.load_turn(app_name="app", user_id="u", session_id="s")
        assert paused is not None and paused.data["status"] == "suspended", [e.text for e in events]
        assert paused.data["format"] == 4 and paused.data["system_prompt"] == "" and paused.data["transcript"] == []
        new = TurnRecord.model_validate(paused.data)
        assert await load_context(store, KEY, new) == (old.system_prompt, old.transcript)
        assert len(to_json(paused.data, "t")) < len(to_json(slot.data, "t")) - len(old.system_prompt)
        (pending,) = await runner.pending(user_id="u", session_id="s")
        events = [e async for e in runner.approve(user_id="u", session_id="s", call_key=pending.call_key)]
        assert json.loads(events[-1].text) == [10, "noted x", 20, "paid 30"]
        assert await store.load_turn(app_name="app", user_id="u", session_id="s") is None
