"""codeact[langchain]: langchain-core tools run as codeact tools, from a script on Monty."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_core", reason="codeact[langchain] is not installed")

from langchain_core.tools import StructuredTool, ToolException, tool
from pydantic import BaseModel, Field

from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel
from codeact.integrations.langchain import LangChainTool, from_langchain

pytestmark = pytest.mark.anyio
calls: list[str] = []


@tool
def multiply(a: int, b: int) -> int:
    """Multiplies two integers."""
    calls.append("multiply")
    return a * b


@tool
async def shout(text: str) -> str:
    """Upper-cases text."""
    return text.upper()


class SearchArgs(BaseModel):
    query: str = Field(description="what to look for")
    limit: int = Field(default=2, description="how many hits")


def _search(query: str, limit: int = 2) -> list[str]:
    if query == "boom":
        raise ToolException("search backend down")
    return [f"{query}-{i}" for i in range(limit)]


search = StructuredTool.from_function(_search, name="search", description="Searches.", args_schema=SearchArgs)


def py(code: str) -> str:
    return f"```python\n{code.strip()}\n```"


def test_schema_and_description_come_from_langchain():
    wrapped = LangChainTool(search)
    assert wrapped.name == "search" and wrapped.description == "Searches."
    assert wrapped.parameters["required"] == ["query"]
    assert wrapped.parameters["properties"]["limit"]["description"] == "how many hits"
    assert LangChainTool(multiply).parameters["properties"].keys() == {"a", "b"}


async def test_a_script_calls_langchain_tools(anyio_backend):
    shout_call = 'call_tool("shout", {"text": hits[0]})' if anyio_backend == "asyncio" else "hits[0].upper()"
    script = """
hits = call_tool("search", {"query": "cats", "limit": 3})
n = call_tool("multiply", {"a": len(hits), "b": 7})
loud = SHOUT
try:
    call_tool("search", {"query": "boom"})
except Exception as e:
    err = str(e)
try:
    call_tool("multiply", {"a": "x", "b": 1})
except Exception as e:
    bad = type(e).__name__
{"type": "final_result", "value": [n, loud, err, bad]}
""".replace("SHOUT", shout_call)
    model = ScriptedModel([py(script)])
    agent = CodeActAgent(
        name="lc", model=model, runtime=MontyRuntime(), tools=from_langchain([search, multiply, shout])
    )
    runner = Runner(app_name="a", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
    events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go")]
    final = events[-1]
    assert final.error_code is None, final.error_message
    n, loud, err, bad = __import__("json").loads(final.text)
    assert (n, loud) == (21, "CATS-0")
    assert "search backend down" in err
    assert bad  # langchain's validation error reached the script as a catchable exception
    assert 'call_tool("search", {"query": <str>, "limit": <int, optional>})' in model.requests[0].system_instruction


async def test_require_confirmation_gates_the_call(anyio_backend):
    calls.clear()
    model = ScriptedModel([py('call_tool("multiply", {"a": 2, "b": 3})')])
    agent = CodeActAgent(
        name="lc",
        model=model,
        runtime=MontyRuntime(),
        tools=from_langchain([multiply], require_confirmation=["multiply"]),
    )
    runner = Runner(app_name="a", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
    events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go")]
    [asked] = events[-1].actions.requested_tool_confirmations.values()
    assert (asked.tool_name, asked.args) == ("multiply", {"a": 2, "b": 3})
    assert calls == []


async def test_one_call_runtime_api_with_langchain_tools(anyio_backend):
    wrapped = {t.name: t for t in from_langchain([multiply, shout])}

    async def call(name: str, **kwargs: object) -> object:
        return await wrapped[name].run(kwargs, None)  # type: ignore[arg-type]

    tools = {"multiply": lambda **kw: call("multiply", **kw), "shout": lambda **kw: call("shout", **kw)}
    code = 'try:\n    s = call_tool("shout", {"text": "a"})\nexcept RuntimeError as e:\n    s = "a"\n'
    code += 's * call_tool("multiply", {"a": 2, "b": 2})'
    result = await MontyRuntime().arun(code, tools=tools)
    assert result.value == ("AAAA" if anyio_backend == "asyncio" else "aaaa")
