"""Input schema: when set, the user message must validate against it; a clear error
otherwise."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel
from parity_helpers import APP, ask, final

pytestmark = pytest.mark.anyio


class Order(BaseModel):
    item: str
    qty: int


@pytest.mark.parametrize("schema", [Order, Order.model_json_schema()], ids=["pydantic", "json-schema"])
async def test_user_message_must_match_the_input_schema(service, schema) -> None:
    model = ScriptedModel([final("ordered")])
    agent = CodeActAgent(name="shop", model=model, runtime=MontyRuntime(), input_schema=schema)
    runner = Runner(app_name=APP, agent=agent, session_service=service)

    bad = await ask(runner, '{"item": "pen", "qty": "many"}', session="bad")
    assert bad[-1].error_code == "codeact.input_schema"
    assert bad[-1].error_message.startswith("the user message does not match the input schema of agent 'shop': qty")
    not_json = await ask(runner, "two pens please", session="nj")
    assert not_json[-1].error_code == "codeact.input_schema"
    assert "must be JSON matching the input schema of agent 'shop'" in not_json[-1].error_message
    assert model.requests == []

    good = await ask(runner, '{"item": "pen", "qty": 2}', session="good")
    assert good[-1].text == "ordered"
