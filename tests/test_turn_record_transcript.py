"""The transcript a turn record stores (``CodeActAgent._turn_record``, ``record_data``):
the JSON of every message the model saw plus its reply, turn after turn, though each
message is dumped once; with a model hook (which sees the messages themselves and may
edit one in place), the record shows the messages as they stand."""

from __future__ import annotations

from typing import Any

import pytest

from codeact import CodeActAgent, Content, InMemorySessionService, MontyRuntime, Runner, ScriptedModel
from codeact.agent._slot_context import load_context
from codeact.plugins import Plugin
from codeact.turns._record import TurnRecord
from codeact.turns._verify import record_data

pytestmark = pytest.mark.anyio


def inc(x: int) -> int:
    """Adds one.

    Args:
        x: a number.
    """
    return x + 1


def _fence(code: str) -> str:
    return f"```python\n{code}\n```"


REPLIES = [
    _fence('v = call_tool("inc", {"x": 1})\n{"type": "observation", "value": v}'),
    "no code in this reply",
    _fence('v = call_tool("inc", {"x": 2})\nraise ValueError("boom")'),
    _fence('v = call_tool("inc", {"x": 3})\n{"type": "final_result", "value": v}'),
]


class _Recording(InMemorySessionService):
    """Keeps the data of each turn-slot write."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[dict[str, Any]] = []

    async def save_turn(self, **kwargs: Any) -> int:
        if kwargs["data"] is not None:
            self.saved.append(kwargs["data"])
        return await super().save_turn(**kwargs)


class _EditFirstReply(Plugin):
    """Edits the first model reply of the transcript in place before each later model call."""

    name = "edit"

    def before_model(self, ctx: Any, request: Any) -> None:
        if len(request.contents) > 2:
            request.contents[1].parts[0].text += " (edited)"


def _dump(contents: list[Content]) -> list[dict[str, Any]]:
    return [c.model_dump(mode="json", exclude_none=True) for c in contents]


async def _turn_records(plugins: list[Any]) -> tuple[list[dict[str, Any]], ScriptedModel]:
    service = _Recording()
    model = ScriptedModel(REPLIES)
    agent = CodeActAgent(name="a", model=model, runtime=MontyRuntime(), tools=[inc], plugins=plugins)
    runner = Runner(app_name="app", agent=agent, session_service=service)
    await service.create_session(app_name="app", user_id="u", session_id="s")
    async for _ in runner.run_async(user_id="u", session_id="s", new_message="go"):
        pass
    first_saves: dict[str, dict[str, Any]] = {}
    for data in service.saved:
        first_saves.setdefault(data["turn"], data)
    records = []
    for data in first_saves.values():  # format 4: the transcript is in the session's blobs
        _, transcript = await load_context(service, ("app", "u", "s"), TurnRecord.model_validate(data))
        records.append({**data, "transcript": transcript})
    return records, model


@pytest.mark.parametrize("plugins", [[], [_EditFirstReply()]], ids=["no hooks", "a hook edits a message"])
async def test_each_record_holds_what_the_model_saw_and_its_reply(plugins: list[Any]) -> None:
    records, model = await _turn_records(plugins)
    # the turns that ran a script: the model's 1st, 3rd and 4th requests
    requests = [model.requests[i] for i in (0, 2, 3)]
    assert len(records) == len(requests)
    for data, request in zip(records, requests, strict=True):
        reply = Content.from_text(REPLIES[model.requests.index(request)], role="model")
        assert data["transcript"] == _dump([*request.contents, reply])
    edited = [m["parts"][0]["text"].endswith("(edited)") for m in records[-1]["transcript"][1:2]]
    assert edited == [bool(plugins)]


def _record(**fields: Any) -> TurnRecord:
    """A running turn record of agent ``a`` (``fields`` override or add to it)."""
    values: dict[str, Any] = {
        "format": 3,
        "status": "running",
        "agent_name": "a",
        "turn": "t:1",
        "invocation_id": "t",
        "iteration": 1,
        "script": "1",
        "transcript": [{"role": "user", "parts": [{"text": "hi", "thought": False}]}],
        "roster": ["inc"],
    }
    return TurnRecord(**{**values, **fields})


def test_record_data_is_model_dump_json_with_its_key_order() -> None:
    record = _record(pending=[])
    data = record_data(record)
    assert data == record.model_dump(mode="json")
    assert list(data) == list(record.model_dump(mode="json"))
    assert data["transcript"] is not record.transcript


def test_slot_data_is_the_dump_of_the_updated_record() -> None:
    """``slot_data`` (what the driver saves, from the record's JSON made once a turn) is
    ``record_data`` of the record copied with the save's fields, key for key and in order,
    for a running slot with a claim, a suspended one with pending calls at a gather, and one
    with a snapshot digest."""
    from codeact.turns._record import CallPosition, Claim, PendingEntry
    from codeact.turns._verify import slot_data

    record = _record(script="x = call_tool('inc', {'x': 1})", namespace={"vars": {"a": 1}}, created_at=12.5)
    base = record_data(record)
    claim = Claim(owner="h:1:x", host="h", pid=1, taken_at=99.0, renewed_at=100.0, lease=30.0, run_key="k1")
    updates: list[dict[str, Any]] = [
        {
            "format": 3,
            "status": "running",
            "turn_stdout": "out\n",
            "next_pos": 2,
            "advance": 3,
            "at": [],
            "gather": False,
            "pending": [],
            "snapshot_sha256": None,
            "claim": claim,
            "run_key": "k1",
        },
        {
            "format": 3,
            "status": "suspended",
            "turn_stdout": "",
            "next_pos": 3,
            "advance": 1,
            "at": [CallPosition(call_id=4, pos=1), CallPosition(call_id=5, pos=2)],
            "gather": True,
            "pending": [
                PendingEntry(call_key="t:1:1", pos=1, call_id=4, kind="confirmation", hint=None),
                PendingEntry(call_key="t:1:2", pos=2, call_id=5, kind="completion", hint="started"),
            ],
            "snapshot_sha256": "ab" * 32,
            "claim": None,
            "run_key": None,
        },
    ]
    for update in updates:
        expected = record_data(record.model_copy(update=update))
        data = slot_data(base, update)
        assert data == expected
        assert list(data) == list(expected)
    assert base == record_data(record)  # the base is left as it was
