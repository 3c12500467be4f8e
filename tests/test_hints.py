"""What the model is told after a script mistake (issue 12 "Hints"), on the real interpreter:
each kind of mistake with several inputs, and the inputs that must not trigger the hint."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest

from agent_helpers import fence, run
from codeact import CodeActAgent, CPythonRuntime, MontyRuntime, ScriptedModel
from codeact.agent._hints import precheck
from codeact.tools import FunctionTool

pytestmark = pytest.mark.anyio

END = fence('{"type": "final_result", "value": "end"}')


class Ledger:
    """Tools that record each call (so a test can prove a tool did or did not run)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def tools(self) -> list[FunctionTool]:
        def search(query: str) -> str:
            """Searches."""
            self.calls.append(f"search:{query}")
            return "r:" + query

        def add(a: int, b: int) -> int:
            """Adds."""
            self.calls.append("add")
            return a + b

        return [FunctionTool(search), FunctionTool(add)]


async def _feedback(script: str, *, runtime: Any = None, tools: list | None = None, **agent: Any) -> tuple[str, str]:  # type: ignore[type-arg]
    """(the feedback after ``script``, the final text) for a run whose second reply ends it."""
    model = ScriptedModel([fence(script), END])
    agent_obj = CodeActAgent(name="coder", model=model, runtime=runtime or MontyRuntime(), tools=tools or [], **agent)
    events, _session, _ = await run(agent_obj)
    final = events[-1].content.text if events[-1].content is not None else ""
    if len(model.requests) < 2:
        return "", final
    return "\n".join(c.text for c in model.requests[1].contents[2:]), final


# ------------------------------------------------------------------ await call_tool


@pytest.mark.parametrize(
    "script",
    [
        'r = await call_tool("search", {"query": "x"})\n{"type": "final_result", "value": r}',
        'x = 1\nif x:\n    r = await call_tool("search", {"query": "x"})\n{"type": "final_result", "value": r}',
        'import asyncio\nrs = await asyncio.gather(call_tool("search", {"query": "a"}), call_tool("search", '
        '{"query": "b"}))\n{"type": "final_result", "value": rs}',
        'async def go():\n    return await call_tool("add", {"a": 1, "b": 2})\n{"type": "final_result", "value": 1}',
    ],
)
async def test_await_on_a_tool_call_is_refused_before_any_tool_runs(script: str) -> None:
    ledger = Ledger()
    feedback, final = await _feedback(script, runtime=NonAwaitingRuntime(), tools=ledger.tools())
    assert ledger.calls == []
    assert "The script was not run (no tool was called)" in feedback
    assert "without `await`" in feedback or "one after another" in feedback
    assert "can't be awaited" not in feedback
    assert final == "end"


async def test_await_hint_in_the_functions_style() -> None:
    ledger = Ledger()
    script = 'r = await search("x")\n{"type": "final_result", "value": r}'
    feedback, _ = await _feedback(script, runtime=NonAwaitingRuntime(tool_style="functions"), tools=ledger.tools())
    assert ledger.calls == []
    assert "`await search(...)`" in feedback and "`result = search(...)` without `await`" in feedback


@pytest.mark.parametrize(
    "script",
    [
        'r = call_tool("search", {"query": "await call_tool"})\n{"type": "final_result", "value": r}',
        '# we never await call_tool here\nr = call_tool("search", {"query": "q"})\n'
        '{"type": "final_result", "value": r}',
    ],
)
async def test_await_in_a_string_or_comment_is_not_refused(script: str) -> None:
    ledger = Ledger()
    _feedback_text, final = await _feedback(script, tools=ledger.tools())
    assert final.startswith("r:")
    assert len(ledger.calls) == 1


class NonAwaitingRuntime(MontyRuntime):
    """A runtime whose tool calls cannot be awaited (``supports_await=False``)."""

    def capabilities(self):  # type: ignore[no-untyped-def]
        return dataclasses.replace(super().capabilities(), supports_await=False)


async def test_await_hint_follows_the_runtime_capability() -> None:
    script = 'r = await call_tool("search", {"query": "x"})\n{"type": "final_result", "value": r}'
    assert precheck(script, tools=["search"], await_supported=True) is None
    assert precheck(script, tools=["search"], await_supported=False) is not None
    ledger = Ledger()
    feedback, final = await _feedback(script, tools=ledger.tools())
    # MontyRuntime awaits tool calls: no static refusal, the script runs and finishes
    assert MontyRuntime().capabilities().supports_await is True
    assert "The script was not run" not in feedback
    assert ledger.calls == ["search:x"]
    assert final.startswith("r:")


# ------------------------------------------------------------------ importing tools


@pytest.mark.parametrize(
    ("script", "written"),
    [
        ('from tools import search\nr = search("x")\n{"type": "final_result", "value": r}', "from tools import search"),
        ('import tools\nr = tools.search("x")\n{"type": "final_result", "value": r}', "import tools"),
        ('from default_api import search\n{"type": "final_result", "value": 1}', "from default_api import search"),
        ('import search\n{"type": "final_result", "value": 1}', "import search"),
        ('from functions import add\n{"type": "final_result", "value": add(1, 2)}', "from functions import add"),
        ('from helpers import search, add\n{"type": "final_result", "value": 1}', "from helpers import search, add"),
    ],
)
async def test_importing_tools_says_to_use_call_tool(script: str, written: str) -> None:
    ledger = Ledger()
    feedback, _ = await _feedback(script, tools=ledger.tools())
    assert f"`{written}`: tools are not a package and cannot be imported" in feedback
    assert 'call_tool("' in feedback
    assert "third-party" not in feedback
    assert ledger.calls == []


async def test_importing_tools_in_the_functions_style_says_to_call_them_directly() -> None:
    ledger = Ledger()
    script = 'from tools import search\nr = search("x")\n{"type": "final_result", "value": r}'
    feedback, _ = await _feedback(script, runtime=MontyRuntime(tool_style="functions"), tools=ledger.tools())
    assert "already defined as functions" in feedback and "`search(...)`" in feedback


@pytest.mark.parametrize(
    "script",
    [
        'import json\n{"type": "final_result", "value": json.dumps([1])}',
        'from math import sqrt\n{"type": "final_result", "value": sqrt(4)}',
        'import re\nfrom math import floor\n{"type": "final_result", "value": floor(1.5)}',
    ],
)
async def test_standard_library_imports_are_not_mistaken_for_tools(script: str) -> None:
    def sqrt(x: float) -> float:  # a tool that shares a stdlib function's name
        """Square root."""
        return x

    feedback, final = await _feedback(script, tools=[FunctionTool(sqrt)])
    assert "cannot be imported" not in feedback
    assert final != "end"  # the script's own result


# ------------------------------------------------------------------ missing result


@pytest.mark.parametrize("runtime", [MontyRuntime, CPythonRuntime], ids=["monty", "cpython"])
@pytest.mark.parametrize(
    ("script", "listed"),
    [
        ('r = call_tool("search", {"query": "x"})\nprint(r)', "search (1 call)"),
        (
            'a = call_tool("search", {"query": "x"})\nb = call_tool("search", {"query": "y"})\n'
            'c = call_tool("add", {"a": 1, "b": 2})\nresult = [a, b, c]',
            "search (2 calls), add (1 call)",
        ),
        ('for q in ["a", "b", "c"]:\n    call_tool("search", {"query": q})', "search (3 calls)"),
    ],
)
async def test_a_missing_result_names_the_tools_that_already_ran(runtime: Any, script: str, listed: str) -> None:
    ledger = Ledger()
    feedback, _ = await _feedback(script, runtime=runtime(), tools=ledger.tools())
    assert "the script must end with an expression that is a tagged result dict" in feedback
    assert f"This script already called: {listed}; running it again calls those tools again" in feedback


async def test_a_missing_result_without_tool_calls_names_none() -> None:
    feedback, _ = await _feedback("x = 1 + 1", tools=Ledger().tools())
    assert "the script must end with an expression" in feedback
    assert "already called" not in feedback


async def test_each_script_names_only_its_own_tool_calls() -> None:
    ledger = Ledger()
    model = ScriptedModel(
        [
            fence('call_tool("search", {"query": "x"})\n{"type": "observation", "value": 1}'),
            fence('y = call_tool("add", {"a": 1, "b": 2})'),
            END,
        ]
    )
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=ledger.tools())
    await run(agent)
    feedback = model.requests[2].contents[-1].text
    assert "This script already called: add (1 call);" in feedback


# ------------------------------------------------------------------ variables from an earlier script


@pytest.mark.parametrize(
    ("first", "second", "name"),
    [
        ("x = 41", '{"type": "final_result", "value": x + 1}', "x"),
        ("def double(n):\n    return 2 * n", '{"type": "final_result", "value": double(2)}', "double"),
        ("for item in [1, 2]:\n    pass", '{"type": "final_result", "value": item}', "item"),
        ('rows = call_tool("search", {"query": "x"})', '{"type": "final_result", "value": len(rows)}', "rows"),
        ("a, (b, c) = 1, (2, 3)", '{"type": "final_result", "value": c}', "c"),
    ],
)
async def test_a_name_from_an_earlier_script_says_variables_do_not_persist(first: str, second: str, name: str) -> None:
    model = ScriptedModel([fence(first + '\n{"type": "observation", "value": 0}'), fence(second), END])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=Ledger().tools())
    await run(agent)
    feedback = model.requests[2].contents[-1].text
    assert f"NameError: name '{name}' is not defined" in feedback
    assert f"Hint: `{name}` was defined by an earlier script, and variables do not persist between scripts" in feedback


async def test_a_name_no_script_defined_gets_no_persistence_hint() -> None:
    model = ScriptedModel(
        [fence('x = 1\n{"type": "observation", "value": x}'), fence('{"type": "final_result", "value": y}'), END]
    )
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime())
    await run(agent)
    feedback = model.requests[2].contents[-1].text
    assert "NameError: name 'y' is not defined" in feedback
    assert "do not persist" not in feedback


async def test_with_persist_namespace_the_variable_is_there_and_no_hint_is_needed() -> None:
    model = ScriptedModel(
        [fence('x = 41\n{"type": "observation", "value": x}'), fence('{"type": "final_result", "value": x + 1}')]
    )
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), persist_namespace=True)
    events, _session, _ = await run(agent)
    assert events[-1].content is not None and events[-1].content.text == "42"


# ------------------------------------------------------------------ tool failures as the script sees them


class Unplain:
    pass


def _failing_tools() -> list[FunctionTool]:
    def junk() -> str:
        """Returns something that is not data."""
        return Unplain()  # type: ignore[return-value]

    def invalid() -> str:
        """Raises a ValueError."""
        raise ValueError("bad input")

    def custom() -> str:
        """Raises a ValueError subclass."""
        raise type("QuotaError", (ValueError,), {})("out of quota")

    def wrong_type() -> str:
        """Raises a TypeError."""
        raise TypeError("expected a list")

    return [FunctionTool(f) for f in (junk, invalid, custom, wrong_type)]


@pytest.mark.parametrize(
    ("tool", "line"),
    [
        ("junk", "TypeError: tool 'junk' returned a value that is not plain data"),
        ("invalid", "ValueError: bad input"),
        ("custom", "ValueError: QuotaError: out of quota"),
        ("wrong_type", "TypeError: expected a list"),
    ],
)
async def test_a_tool_failure_names_its_type_once(tool: str, line: str) -> None:
    feedback, _ = await _feedback(
        f'call_tool("{tool}")\n{{"type": "final_result", "value": 1}}', tools=_failing_tools()
    )
    assert line in feedback
    for name in ("TypeError", "ValueError"):
        assert f"{name}: {name}:" not in feedback


def _os_tools() -> list[FunctionTool]:
    def connect() -> str:
        """Host connection fails."""
        raise ConnectionError("connection refused by example.com")

    def refused() -> str:
        """A ConnectionError subclass."""
        raise ConnectionRefusedError("port 443 closed")

    def slow() -> str:
        """Raises its own TimeoutError."""
        raise TimeoutError("upstream took too long")

    def forbidden() -> str:
        """No access."""
        raise PermissionError("no access to /secret")

    def missing() -> str:
        """No such file."""
        raise FileNotFoundError("report.csv")

    return [FunctionTool(f) for f in (connect, refused, slow, forbidden, missing)]


@pytest.mark.parametrize("runtime", [MontyRuntime, CPythonRuntime], ids=["monty", "cpython"])
@pytest.mark.parametrize(
    ("tool", "caught_as", "expected"),
    [
        ("connect", "OSError", "OSError|ConnectionError: connection refused by example.com"),
        ("refused", "OSError", "OSError|ConnectionRefusedError: port 443 closed"),
        ("slow", "TimeoutError", "TimeoutError|upstream took too long"),
        ("forbidden", "PermissionError", "PermissionError|no access to /secret"),
        ("missing", "FileNotFoundError", "FileNotFoundError|report.csv"),
    ],
)
async def test_host_os_errors_reach_the_script_as_os_errors(
    runtime: Any, tool: str, caught_as: str, expected: str
) -> None:
    script = (
        f'try:\n    call_tool("{tool}")\n    r = "no error"\nexcept {caught_as} as e:\n'
        '    r = type(e).__name__ + "|" + str(e)\n{"type": "final_result", "value": r}'
    )
    _feedback_text, final = await _feedback(script, runtime=runtime(), tools=_os_tools())
    assert final == expected


async def test_a_real_tool_timeout_still_says_timed_out() -> None:
    async def hang() -> str:
        """Never answers in time."""
        await anyio.sleep(5)
        return "late"

    script = (
        'try:\n    call_tool("hang")\n    r = "no"\nexcept TimeoutError as e:\n    r = str(e)\n'
        '{"type": "final_result", "value": r}'
    )
    _feedback_text, final = await _feedback(script, tools=[FunctionTool(hang)], tool_timeout=0.05)
    assert final == "tool 'hang' timed out after 0.05 s"
