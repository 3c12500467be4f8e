"""The type check before a script runs (issue 48 item 1), on the real checker and interpreter:
a tool call that cannot succeed is fed back before any tool runs, with its line, column and
the tool's expected call; nothing the interpreter would run is refused."""

from __future__ import annotations

import concurrent.futures
import json
from typing import Any

import pytest

from codeact import _monty

if not hasattr(_monty, "type_check"):
    pytest.skip(
        "the extension was built without the type-check cargo feature (make build FEATURES=type-check)",
        allow_module_level=True,
    )

from agent_helpers import fence, run
from codeact import CodeActAgent, CPythonRuntime, MontyRuntime, ScriptedModel
from codeact._monty import type_check, type_checkers_idle
from codeact.runtime import ToolCallChecking, check_tool_calls
from codeact.runtime._stubs import schema_type, tool_signatures, tool_stubs
from codeact.runtime._typecheck import check_tool_calls as find_errors
from codeact.runtime._typecheck import clear_type_check_cache
from codeact.tools import FunctionTool

END = fence('{"type": "final_result", "value": "end"}')


class Ledger:
    """Tools that record each call (so a test can prove a tool did or did not run)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def tools(self) -> list[FunctionTool]:
        def get_order(order_id: str, verbose: bool = False) -> dict[str, Any]:
            """Looks up an order."""
            self.calls.append(f"get_order:{order_id}")
            return {"id": order_id, "total": 120}

        def add(a: int, b: float) -> float:
            """Adds."""
            self.calls.append("add")
            return a + b

        def tag(names: list[str]) -> int:
            """Tags."""
            self.calls.append("tag")
            return len(names)

        return [FunctionTool(get_order), FunctionTool(add), FunctionTool(tag)]


def errors(script: str, *, style: str = "call_tool", namespace: Any = ()) -> list[str]:
    return [
        str(e) for e in find_errors(script, Ledger().tools(), functions_style=style == "functions", namespace=namespace)
    ]


# ------------------------------------------------------------------ the native checker


def test_the_native_checker_returns_json_diagnostics_with_positions() -> None:
    raw = type_check("def f(x: int) -> int:\n    return x\nf('a')\n", "")
    assert raw is not None
    (found,) = json.loads(raw)
    assert found["code"] == "invalid-argument-type"
    assert found["location"] == {"row": 3, "column": 3}
    assert type_check("x = 1\n", "") is None


def test_checkers_are_pooled_and_concurrent_checks_do_not_share_one() -> None:
    scripts = [f"def f(x: int) -> int:\n    return x\nf({i!r})\n" for i in ("a", 1, "b", 2)] * 4
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda s: type_check(s, ""), scripts))
    assert [f is None for f in found] == [False, True, False, True] * 4
    assert 1 <= type_checkers_idle() <= 8


# ------------------------------------------------------------------ stubs


@pytest.mark.parametrize(
    ("schema", "annotation"),
    [
        ({"type": "string"}, "str"),
        ({"type": ["string", "null"]}, "str | None"),
        ({"type": "array", "items": {"type": "integer"}}, "Sequence[int]"),
        ({"enum": ["a", "b"]}, "str"),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "Any"),
        ({"$ref": "#/$defs/Node"}, "Any"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "Mapping[str, Any]"),
        ({"anyOf": [{"type": "string"}, {"$ref": "#/$defs/X"}]}, "Any"),
    ],
)
def test_a_schema_the_stubs_cannot_express_is_any(schema: dict[str, Any], annotation: str) -> None:
    assert schema_type(schema) == annotation


def test_stubs_are_call_tool_overloads_with_typed_dicts_and_typed_functions() -> None:
    stubs = tool_stubs(tool_signatures(Ledger().tools()), functions_style=True, namespace=["rows"])
    assert '@overload\ndef call_tool(name: Literal["get_order"], arguments: _Args0, /)' in stubs
    assert "class _Args0(TypedDict):\n    order_id: str\n    verbose: NotRequired[bool]\n" in stubs
    assert 'def _t0______(name: Literal["get_order"], arguments: _Args0, /)' in stubs
    assert "def get_order(order_id: str, verbose: bool = ...) -> Any: ..." in stubs
    assert "rows: Any" in stubs
    assert type_check("x = 1\n", stubs) is None  # the stubs themselves check clean


# ------------------------------------------------------------------ what gates


@pytest.mark.parametrize(
    ("script", "wanted"),
    [
        ('call_tool("get_ordr", {"order_id": "A"})', "unknown tool 'get_ordr'"),
        ('call_tool("get_order", {"id": "A"})', "line 1, column"),
        ('call_tool("get_order", {})', "order_id"),
        ('call_tool("get_order", {"order_id": 17})', "order_id"),
        ('x = 1\ncall_tool("add", {"a": "one", "b": 2})', "line 2"),
        ('call_tool("tag", {"names": 5})', "names"),
    ],
)
def test_a_tool_call_that_cannot_succeed_is_reported(script: str, wanted: str) -> None:
    found = errors(script)
    assert found, script
    assert any(wanted in f for f in found), found
    assert all("; expected: " in f for f in found)


@pytest.mark.parametrize(
    ("script", "wanted"),
    [
        ('get_ordr(order_id="A")', "unknown tool 'get_ordr'"),
        ('get_order(id="A")', "get_order(order_id: str, verbose: bool = ...)"),
        ("get_order()", "order_id"),
        ("get_order(17)", "order_id"),
        ("add(1, 2, 3)", "add(a: int, b: float)"),
    ],
)
def test_the_functions_style_is_checked_against_typed_functions(script: str, wanted: str) -> None:
    found = errors(script, style="functions")
    assert found, script
    assert any(wanted in f for f in found), found


@pytest.mark.parametrize(
    "script",
    [
        'call_tool("get_order", {"order_id": "A"})',
        'call_tool("get_order", {"order_id": "A", "verbose": True})',
        'call_tool("add", {"a": 1, "b": 2})',  # an int where a number is wanted
        'call_tool("tag", {"names": ["a", "b"]})',
        'names = ["a"]\ncall_tool("tag", {"names": names})',
        'args = {"order_id": "A"}\ncall_tool("get_order", args)',  # not a literal dict: not gated
        'name = "get_ordr"\ncall_tool(name, {"order_id": "A"})',  # not a literal name
        'import os\ncall_tool("get_order", {"order_id": os.getenv("X")})',  # str | None may be str
        'o = call_tool("get_order", {"order_id": "A"})\ncall_tool("add", {"a": o["total"], "b": 1})',
        'try:\n    call_tool("nope", {})\nexcept Exception:\n    pass',  # handled: runs as written
        'x: int = "a"\nimport requests\nundefined_name + 1',  # not tool calls: dropped
        'def f(a: int) -> int:\n    return a\ncall_tool("get_order", {"order_id": str(f("x"))})',
        'r = await call_tool("get_order", {"order_id": "A"})',
    ],
)
def test_what_may_succeed_is_never_refused(script: str) -> None:
    assert errors(script) == []


def test_functions_style_unknown_names_are_tools_only_when_close_and_unbound() -> None:
    assert errors("helper(1)", style="functions") == []  # not close to a tool: the interpreter says
    assert errors("def get_ordr(x):\n    return x\nget_ordr(1)", style="functions") == []
    assert errors("get_ordr(1)", style="functions", namespace=None) == []  # an earlier script may define it
    assert errors("final_answer(1)", style="functions") == []
    assert errors("try:\n    get_ordr(1)\nexcept NameError:\n    pass", style="functions") == []


def test_a_tool_name_the_script_binds_itself_is_not_a_tool_call() -> None:
    # a tool named like a library function: the script's own import is what it calls
    def partial(text: str) -> str:
        """A tool that happens to share a library function's name."""
        return text

    tools = [*Ledger().tools(), FunctionTool(partial)]
    script = "from functools import partial\npartial(1)"
    assert find_errors(script, tools, functions_style=True) == ()
    assert find_errors("def add(a, b):\n    return a\nadd('x', 'y')", tools, functions_style=True) == ()


def test_namespace_names_from_an_earlier_script_are_known() -> None:
    assert errors('call_tool("get_order", {"order_id": rows})', namespace=["rows"]) == []


def test_verdicts_are_cached_per_script_and_tool_set() -> None:
    clear_type_check_cache()
    script = 'call_tool("get_order", {"id": "A"})'
    first = find_errors(script, Ledger().tools())
    assert find_errors(script, Ledger().tools()) is first
    assert find_errors(script, Ledger().tools()[1:]) is not first


# ------------------------------------------------------------------ through the seam and the agent


def test_the_check_is_part_of_the_seam_and_can_be_turned_off() -> None:
    runtime = MontyRuntime()
    assert isinstance(runtime, ToolCallChecking)
    bad = 'call_tool("get_order", {"id": "A"})'
    text = check_tool_calls(runtime, bad, Ledger().tools())
    assert text is not None and text.startswith("TypeError: a tool call in the script cannot succeed; nothing was")
    runtime.check_types = False
    assert check_tool_calls(runtime, bad, Ledger().tools()) is None
    assert check_tool_calls(CPythonRuntime(), bad, Ledger().tools()) is None


async def _feedback(script: str, runtime: Any, ledger: Ledger) -> str:
    model = ScriptedModel([fence(script), END])
    agent = CodeActAgent(name="coder", model=model, runtime=runtime, tools=ledger.tools())
    await run(agent)
    return "\n".join(c.text for c in model.requests[1].contents[2:])


@pytest.mark.anyio
async def test_a_gating_error_reaches_the_model_before_any_tool_runs() -> None:
    ledger = Ledger()
    script = 'o = call_tool("get_order", {"order_id": "A"})\ncall_tool("add", {"a": o["total"], "c": 1})\n' + (
        '{"type": "final_result", "value": 1}'
    )
    feedback = await _feedback(script, MontyRuntime(), ledger)
    assert ledger.calls == []  # get_order, before the wrong call, did not run either
    assert "nothing was executed" in feedback
    assert "line 2, column" in feedback
    assert 'call_tool("add", {"a": int, "b": float})' in feedback


@pytest.mark.anyio
async def test_with_the_check_off_the_script_runs_until_the_wrong_call() -> None:
    ledger = Ledger()
    script = 'o = call_tool("get_order", {"order_id": "A"})\ncall_tool("add", {"a": o["total"], "c": 1})'
    await _feedback(script, MontyRuntime(check_types=False), ledger)
    assert ledger.calls == ["get_order:A"]


@pytest.mark.anyio
async def test_a_good_script_runs_with_the_check_on() -> None:
    ledger = Ledger()
    script = 'o = call_tool("get_order", {"order_id": "A"})\n{"type": "final_result", "value": o["total"]}'
    model = ScriptedModel([fence(script)])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=ledger.tools())
    events, _session, _ = await run(agent)
    assert ledger.calls == ["get_order:A"]
    assert events[-1].content is not None and events[-1].content.text == "120"


def test_a_check_past_its_time_gives_no_verdict_and_the_script_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """ty 0.0.14 does not settle on some scripts; the check is given up after CHECK_TIMEOUT
    (here 0: any check) and the script is not refused."""
    import time

    from codeact.runtime import _typecheck

    clear_type_check_cache()
    monkeypatch.setattr(_typecheck, "CHECK_TIMEOUT", 0.0)
    script = 'x = 1\ncall_tool("get_order", {"id": "A"})\n' * 200  # wrong, but not checked in time
    assert find_errors(script, Ledger().tools()) == ()
    deadline = time.monotonic() + 30
    while _typecheck._stuck and time.monotonic() < deadline:  # the abandoned check ends by itself
        time.sleep(0.01)
    assert _typecheck._stuck == 0
    clear_type_check_cache()
