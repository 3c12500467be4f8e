"""Batches of decisions (issue 49, item 4), on SQLite and PostgreSQL: ``Runner.decide([...])``
decides several pending calls of one turn (a gather paused at more than one call) in one
durable step, all or none: one claim, one resume; a batch with one member refused (a stale
digest, an edit the tool refuses, a call that is not pending, a verb its kind does not accept)
decides nothing, claims nothing and runs nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import codeact.runner
from _postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from codeact import (
    CodeActAgent,
    Decision,
    DecisionMismatchError,
    DecisionRefusedError,
    DecisionValueError,
    FunctionTool,
    MontyRuntime,
    NoPendingCallError,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.sessions import BaseSessionService

pytestmark = pytest.mark.anyio

APP, USER, SESSION = "app", "u", "s"
GATHER = (
    "```python\nimport asyncio\n"
    'r = await asyncio.gather(call_tool("charge", {"item": "x", "cents": 5}), call_tool("note", {"text": "n"}),'
    ' call_tool("charge", {"item": "y", "cents": 7}))\n'
    '{"type": "final_result", "value": r}\n```'
)

DONE = '```python\n{"type": "final_result", "value": "gave up"}\n```'


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSessionService]:
    if request.param == "sqlite":
        service: BaseSessionService = SqliteSessionService(tmp_path / "s.db")
    else:
        from codeact.sessions import PostgresSessionService

        service = PostgresSessionService(request.getfixturevalue("postgres_url"), max_size=2)
    yield service
    service.close()


def runner_on(service: BaseSessionService, ran: list[str]) -> Runner:
    def charge(item: str, cents: int) -> str:
        """Charges an item."""
        ran.append(f"charge {item} {cents}")
        return f"charged {item} {cents}"

    def note(text: str) -> str:
        """Notes."""
        ran.append(f"note {text}")
        return f"noted {text}"

    tools = [FunctionTool(charge, requires_confirmation=True), FunctionTool(note)]
    agent = CodeActAgent(
        name="coder", model=ScriptedModel([GATHER, DONE]), runtime=MontyRuntime(snapshot_key=b"b" * 32), tools=tools
    )
    return Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


async def paused(runner: Runner, ran: list[str]) -> list[Any]:
    await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    pending = await runner.pending(user_id=USER, session_id=SESSION)
    assert [(p.tool, p.args["item"]) for p in pending] == [("charge", "x"), ("charge", "y")] and ran == ["note n"]
    return pending


async def test_a_batch_decides_every_call_in_one_claim_and_one_resume(
    store: BaseSessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    runner = runner_on(store, ran)
    x, y = await paused(runner, ran)
    claims: list[int] = []
    real = codeact.runner.claim_turn

    async def counting(*args: Any, **kwargs: Any) -> Any:
        claims.append(1)
        return await real(*args, **kwargs)

    monkeypatch.setattr(codeact.runner, "claim_turn", counting)
    batch = [
        Decision(verb="approve", call_key=x.call_key, digest=x.digest, actor="ann"),
        Decision(
            verb="approve",
            call_key=y.call_key,
            digest=y.digest,
            args={"item": "y", "cents": 3},
            actor="ann",
            reason="fix",
        ),
    ]
    events = await collect(runner.decide(batch, user_id=USER, session_id=SESSION))
    assert claims == [1]  # one claim, one resume
    assert json.loads(events[-1].text) == ["charged x 5", "noted n", "charged y 3"]
    assert ran[0] == "note n" and sorted(ran[1:]) == ["charge x 5", "charge y 3"]  # they run concurrently
    shown = (events[0].custom_metadata or {})["codeact_decisions"]
    assert sorted((d["call_key"], d["actor"]) for d in shown) == [(x.call_key, "ann"), (y.call_key, "ann")]
    listed = await runner.decisions()
    assert sorted((d.call_key, d.args) for d in listed) == [(x.call_key, None), (y.call_key, {"item": "y", "cents": 3})]
    assert await runner.pending(user_id=USER, session_id=SESSION) == []


async def test_a_batch_may_approve_one_call_and_deny_another(store: BaseSessionService) -> None:
    ran: list[str] = []
    runner = runner_on(store, ran)
    x, y = await paused(runner, ran)
    batch = [Decision(verb="deny", call_key=x.call_key, reason="no"), Decision(verb="approve", call_key=y.call_key)]
    events = await collect(runner.decide(batch, user_id=USER, session_id=SESSION))
    assert ran == ["note n", "charge y 7"] and events[-1].text == "gave up"
    fed_back = [e.text for e in events if "denied by a human reviewer: no" in (e.text or "")]
    assert fed_back  # the denial reached the script (and the model)


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"verb": "approve", "digest": "0" * 16}, DecisionMismatchError),
        ({"verb": "approve", "args": {"item": "y", "cents": "lots"}}, DecisionValueError),
        ({"verb": "complete", "payload": 1}, DecisionRefusedError),
        ({"verb": "approve", "call_key": "nope:9"}, NoPendingCallError),
    ],
    ids=["stale-digest", "bad-edit", "wrong-verb", "no-such-call"],
)
async def test_a_batch_with_one_invalid_member_decides_nothing(
    store: BaseSessionService, bad: dict[str, Any], error: type[Exception]
) -> None:
    ran: list[str] = []
    runner = runner_on(store, ran)
    x, y = await paused(runner, ran)
    fields = {"call_key": y.call_key, "digest": y.digest, **bad}
    batch = [Decision(verb="approve", call_key=x.call_key, digest=x.digest), Decision(**fields)]
    with pytest.raises(error):
        await collect(runner.decide(batch, user_id=USER, session_id=SESSION))
    assert ran == ["note n"]  # x was not approved either
    assert await runner.pending(user_id=USER, session_id=SESSION) == [x, y]
    info = await runner.turn_info(user_id=USER, session_id=SESSION)
    assert info is not None and info.status == "suspended" and info.claim is None
    assert await runner.decisions() == []


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ([], "empty batch"),
        ([Decision(verb="approve", call_key="t:0"), Decision(verb="deny", call_key="t:0")], "appear twice"),
        ([Decision(verb="approve")], "without a call_key"),
        ([Decision(verb="recover")], "'recover'"),
        (
            [
                Decision(verb="approve", call_key="t:0", run_key="a"),
                Decision(verb="approve", call_key="t:1", run_key="b"),
            ],
            "share one run_key",
        ),
    ],
    ids=["empty", "twice", "no-key", "recover", "run-keys"],
)
async def test_a_malformed_batch_is_refused(store: BaseSessionService, batch: list[Decision], message: str) -> None:
    ran: list[str] = []
    runner = runner_on(store, ran)
    await paused(runner, ran)
    with pytest.raises(ValueError, match=message):
        await collect(runner.decide(batch, user_id=USER, session_id=SESSION))
    assert ran == ["note n"]
