"""codeact[langchain]: langchain-core tools run as codeact tools, from a script on Monty."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

pytest.importorskip("langchain_core", reason="codeact[langchain] is not installed")

from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolArg, InjectedToolCallId, StructuredTool, ToolException, tool
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


# ------------------------------------------------------------------ langchain's own error flags and extras


def _flaky(query: str) -> str:
    raise ToolException(f"no results for {query}")


def callables(tools: list[Any]) -> dict[str, Any]:
    def bind(t: Any) -> Any:
        return lambda **kw: t.run(kw, None)

    return {t.name: bind(t) for t in tools}


handled = StructuredTool.from_function(_flaky, name="flaky", description="Fails.", handle_tool_error=True)
custom = StructuredTool.from_function(_flaky, name="custom", description="Fails.", handle_tool_error="try later")


async def test_handled_tool_exception_is_an_exception_in_the_script(anyio_backend):
    # What langchain itself does when a model calls the tool: an error-marked message.
    marked = handled.invoke({"type": "tool_call", "name": "flaky", "args": {"query": "q"}, "id": "1"})
    assert isinstance(marked, ToolMessage) and marked.status == "error"

    script = """
out = []
for name in ["flaky", "custom"]:
    try:
        out.append(call_tool(name, {"query": "cats"}))
    except RuntimeError as e:
        out.append(type(e).__name__ + ": " + str(e))
out
"""
    result = await MontyRuntime().arun(script, tools=callables(from_langchain([handled, custom])))
    assert result.value == [
        "RuntimeError: LangChainToolError: no results for cats",
        "RuntimeError: LangChainToolError: try later",
    ]


async def test_a_returned_error_tool_message_is_an_exception(anyio_backend):
    from codeact.integrations.langchain import LangChainToolError

    @tool
    def status_tool(x: int) -> ToolMessage:
        """Answers with its own message."""
        return ToolMessage(content=f"bad {x}", tool_call_id="t", status="error")

    [wrapped] = from_langchain([status_tool])
    with pytest.raises(LangChainToolError, match="bad 3"):
        await wrapped.run({"x": 3}, None)  # type: ignore[arg-type]


async def test_injected_arguments_come_from_the_hook(anyio_backend):
    @tool
    def greet(name: str, user: Annotated[str, InjectedToolArg], call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Greets on behalf of a user."""
        return f"{user} greets {name} ({call_id})"

    [bare] = from_langchain([greet])
    assert set(bare.parameters["properties"]) == {"name"}  # injected args stay hidden from the model
    script = 'try:\n    r = call_tool("greet", {"name": "Ann"})\nexcept TypeError as e:\n    r = str(e)\n'
    script += '{"type": "final_result", "value": r}'

    async def answer(tools: list[Any]) -> str:
        agent = CodeActAgent(name="lc", model=ScriptedModel([py(script)]), runtime=MontyRuntime(), tools=tools)
        runner = Runner(app_name="a", agent=agent, auto_create_session=True)
        events = [e async for e in runner.run_async(user_id="bob", session_id="s", new_message="go")]
        return events[-1].text

    assert "injected argument(s) 'user' that nothing filled" in await answer([bare])
    hooked = from_langchain([greet], inject=lambda t, ctx: {"user": ctx.user_id})
    text = await answer(hooked)
    assert text.startswith("bob greets Ann (") and text.endswith(")") and "codeact-" not in text  # the call key


async def test_content_and_artifact_keeps_the_artifact(anyio_backend):
    @tool(response_format="content_and_artifact")
    def fetch(n: int) -> tuple[str, list[int]]:
        """Fetches rows."""
        return f"{n} rows", list(range(n))

    [wrapped] = from_langchain([fetch])
    assert await wrapped.run({"n": 3}, None) == {"content": "3 rows", "artifact": [0, 1, 2]}  # type: ignore[arg-type]


def test_from_langchain_names_what_it_got():
    def plain(x: int) -> int:
        return x

    with pytest.raises(TypeError, match=r"from_langchain expects langchain tools .* got function"):
        from_langchain([plain])  # type: ignore[list-item]


def test_a_langchain_tool_given_directly_names_from_langchain():
    with pytest.raises(TypeError, match=r"^StructuredTool is a langchain tool: wrap it with .*from_langchain"):
        CodeActAgent(name="lc", model=ScriptedModel([]), runtime=MontyRuntime(), tools=[multiply])
    [plain] = CodeActAgent(name="ok", model=ScriptedModel([]), runtime=MontyRuntime(), tools=[_search])._tools
    assert plain.name == "_search"  # plain functions are unaffected
