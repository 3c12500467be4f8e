"""FunctionTool: schema and descriptions from type hints and docstrings, validation, dispatch, results."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import inspect
import threading
import time
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from codeact.exceptions import CodeActError
from codeact.sessions._types import Session
from codeact.tools import FunctionTool, LongRunningFunctionTool, Tool, ToolArgumentError, ToolContext, tool
from codeact.tools._function import QUICK_CALL, _parse_docstring

pytestmark = pytest.mark.anyio


def make_context(state: dict[str, Any] | None = None) -> ToolContext:
    return ToolContext(
        function_call_id="k1",
        agent_name="a",
        invocation_id="i",
        session=Session(app_name="app", user_id="u"),
        user_content=None,
        committed_state=state if state is not None else {},
    )


class User(BaseModel):
    name: str
    age: int = 0


@dataclasses.dataclass
class Point:
    x: int
    y: int
    when: datetime.date


class Color(enum.Enum):
    RED = "red"


def add(a: int, b: int) -> int:
    """Adds two numbers.

    Args:
        a: the first number.
        b (int): the second number,
            on two lines.

    Returns:
        The sum.
    """
    return a + b


# ------------------------------------------------------------------ schema


def schema_of(annotation: Any, **default: Any) -> dict[str, Any]:
    def f(x): ...

    f.__annotations__ = {"x": annotation}
    if default:
        f.__defaults__ = (default["default"],)
    return FunctionTool(f).parameters["properties"]["x"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (int, {"type": "integer"}),
        (str, {"type": "string"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (dict, {"type": "object", "additionalProperties": True}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Any, {}),
    ],
    ids=lambda v: repr(v) if not isinstance(v, dict) else "",
)
def test_schema_of_parameter_types(annotation: Any, expected: dict[str, Any]) -> None:
    assert schema_of(annotation) == expected


def test_schema_shape_required_order_defaults_and_no_extras() -> None:
    def f(b: int, a: str, c: float = 1.5, d: int | None = None, e=3) -> None: ...

    assert FunctionTool(f).parameters == {
        "type": "object",
        "properties": {
            "b": {"type": "integer"},
            "a": {"type": "string"},
            "c": {"type": "number", "default": 1.5},
            "d": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "e": {"default": 3},
        },
        "required": ["b", "a"],
        "additionalProperties": False,
    }


def test_schema_of_a_function_without_parameters() -> None:
    def ping() -> str:
        return "pong"

    assert FunctionTool(ping).parameters == {"type": "object", "properties": {}, "additionalProperties": False}


def test_schema_of_a_pydantic_model_parameter() -> None:
    def save(user: User) -> None: ...

    params = FunctionTool(save).parameters
    assert params is not None
    assert params["properties"] == {"user": {"$ref": "#/$defs/User"}}
    assert params["required"] == ["user"]
    assert params["$defs"]["User"]["properties"] == {
        "name": {"type": "string"},
        "age": {"type": "integer", "default": 0},
    }


def test_annotated_field_description_wins_over_docstring() -> None:
    def f(x: Annotated[int, Field(description="from Field", ge=0)]) -> None:
        """Does f.

        Args:
            x: from docstring.
        """

    assert FunctionTool(f).parameters["properties"]["x"] == {  # type: ignore[index]
        "type": "integer",
        "minimum": 0,
        "description": "from Field",
    }


# ------------------------------------------------------------------ descriptions


def test_google_docstring() -> None:
    t = FunctionTool(add)
    assert t.name == "add"
    assert t.description == "Adds two numbers.\n\nReturns:\n    The sum."
    props = t.parameters["properties"]  # type: ignore[index]
    assert props["a"]["description"] == "the first number."
    assert props["b"]["description"] == "the second number, on two lines."


def test_sphinx_docstring() -> None:
    def fetch(url: str, timeout: float = 5.0) -> str:
        """Fetches a page.

        :param url: the address,
            absolute.
        :param float timeout: seconds to wait.
        :type timeout: float
        :returns: the body.
        """
        return url

    t = FunctionTool(fetch)
    assert t.description == "Fetches a page.\n\n:returns: the body."
    props = t.parameters["properties"]  # type: ignore[index]
    assert props["url"]["description"] == "the address, absolute."
    assert props["timeout"] == {"type": "number", "default": 5.0, "description": "seconds to wait."}


def test_numpy_docstring() -> None:
    description, params = _parse_docstring(
        """Scales values.

        Parameters
        ----------
        xs : list of float
            The values,
            any length.
        factor, offset : float

        Returns
        -------
        list of float
        """
    )
    assert description == "Scales values.\n\nReturns\n-------\nlist of float"
    assert params == {"xs": "The values, any length.", "factor": "", "offset": ""}


def test_explicit_name_and_description_and_no_docstring() -> None:
    def f(x: int) -> int:
        return x

    assert FunctionTool(f).description == ""
    t = FunctionTool(f, name="fetch-cart", description="Gets the cart.", requires_confirmation=True)
    assert (t.name, t.description, t.requires_confirmation, t.is_long_running) == (
        "fetch-cart",
        "Gets the cart.",
        True,
        False,
    )
    assert isinstance(t, Tool)


def test_names_of_partials_bound_methods_and_callable_instances() -> None:
    class Greeter:
        def hello(self, who: str) -> str:
            return f"hi {who}"

        def __call__(self, who: str) -> str:
            return who

    assert FunctionTool(Greeter().hello).name == "hello"
    assert FunctionTool(Greeter()).name == "Greeter"
    t = FunctionTool(functools.partial(add, b=1))
    assert t.name == "add"
    assert t.parameters["required"] == ["a"]  # type: ignore[index]


# ------------------------------------------------------------------ construction errors


def test_var_positional_and_var_keyword_rejected() -> None:
    def star(*args: int) -> None: ...

    def double_star(a: int, **kwargs: int) -> None: ...

    with pytest.raises(TypeError, match=r"tool 'star': \*args is not supported"):
        FunctionTool(star)
    with pytest.raises(TypeError, match=r"tool 'double_star': \*\*kwargs is not supported"):
        FunctionTool(double_star)


def test_unresolvable_hint_and_unsupported_type_rejected() -> None:
    def f(x: NoSuchType) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(TypeError, match="cannot resolve the type hints"):
        FunctionTool(f)

    def g(lock: threading.Lock) -> None: ...

    with pytest.raises(TypeError, match="tool 'g': cannot build a validator"):
        FunctionTool(g)
    with pytest.raises(TypeError, match="needs a callable"):
        FunctionTool(3)  # type: ignore[arg-type]


# ------------------------------------------------------------------ context injection


async def test_tool_context_injected_by_annotation() -> None:
    def remember(key: str, ctx: ToolContext) -> str:
        ctx.state[key] = ctx.function_call_id
        return key

    t = FunctionTool(remember)
    assert t.context_parameter == "ctx"
    assert t.parameters == {
        "type": "object",
        "properties": {"key": {"type": "string"}},
        "required": ["key"],
        "additionalProperties": False,
    }
    context = make_context()
    assert await t.run({"key": "k"}, context) == "k"
    assert dict(context.actions.state_delta) == {"k": "k1"}


async def test_tool_context_injected_by_name() -> None:
    async def who(tool_context, greeting: str = "hi") -> str:
        return f"{greeting} {tool_context.user_id}"

    t = FunctionTool(who)
    assert t.parameters["properties"] == {"greeting": {"type": "string", "default": "hi"}}  # type: ignore[index]
    assert "required" not in t.parameters  # type: ignore[operator]
    assert await t.run({}, make_context()) == "hi u"
    with pytest.raises(ToolArgumentError, match="tool_context: unexpected argument"):
        await t.run({"tool_context": 1}, make_context())


# ------------------------------------------------------------------ running


async def test_sync_function_runs_in_a_worker_thread_by_default() -> None:
    seen: list[int] = []

    def f(a: int) -> int:
        seen.append(threading.get_ident())
        return a * 2

    assert await FunctionTool(f).run({"a": 21}, make_context()) == 42
    assert seen and seen[0] != threading.get_ident()


async def test_sync_function_runs_inline_on_request() -> None:
    seen: list[int] = []

    def f(a: int) -> int:
        seen.append(threading.get_ident())
        return a * 2

    assert await FunctionTool(f, run_in_thread=False).run({"a": 21}, make_context()) == 42
    assert seen == [threading.get_ident()]


async def test_run_in_thread_runs_off_the_loop_thread() -> None:
    seen: list[int] = []

    def f(a: int) -> int:
        seen.append(threading.get_ident())
        return a + 1

    t = FunctionTool(f, run_in_thread=True)
    assert await t.run({"a": 1}, make_context()) == 2
    assert len(seen) == 1
    assert seen[0] != threading.get_ident()


async def test_a_quick_sync_function_earns_inline_and_slow_calls_send_it_back_to_threads() -> None:
    # Three quick threaded calls in a row put a sync function inline; an inline call slower
    # than QUICK_CALL puts it back on threads (a busy host can preempt a quick call, so
    # one is not for good); the third such overrun keeps it on threads for good.
    loop_thread = threading.get_ident()
    slow = threading.Event()
    seen: list[bool] = []

    def f(a: int) -> int:
        seen.append(threading.get_ident() == loop_thread)
        if slow.is_set():
            time.sleep(QUICK_CALL * 5)
        return a

    t = FunctionTool(f)

    async def calls(n: int) -> list[bool]:
        seen.clear()
        for i in range(n):
            assert await t.run({"a": i}, make_context()) == i
        return list(seen)

    assert await calls(4) == [False, False, False, True]  # threaded three times, then inline
    for overrun in range(2):
        slow.set()
        assert await calls(1) == [True]  # inline, and slow
        slow.clear()
        assert not t.runs_inline, overrun  # back on threads ...
        assert await calls(4) == [False, False, False, True]  # ... until three quick calls again
    slow.set()
    assert await calls(1) == [True]  # the third slow inline call
    slow.clear()
    assert await calls(5) == [False] * 5  # on threads for good
    assert not t.runs_inline


async def test_run_inline_is_run_without_a_coroutine() -> None:
    """``run_inline`` (how the agent runs a quick call in place) validates, counts quick
    calls and converts the result as ``run`` does, on the calling thread; it refuses a call
    that is not inline and hands an awaitable result back to be awaited."""
    loop_thread = threading.get_ident()
    slow = threading.Event()
    seen: list[bool] = []

    class Point(BaseModel):
        x: int

    def f(a: int) -> Point:
        seen.append(threading.get_ident() == loop_thread)
        if slow.is_set():
            time.sleep(QUICK_CALL * 5)
        return Point(x=a)

    t = FunctionTool(f)
    assert t.run_inline({"a": 1}) is NotImplemented and not seen  # threaded until three quick calls
    for i in range(3):
        assert await t.run({"a": i}, make_context()) == {"x": i}
    assert t.runs_inline and t.run_inline({"a": "7"}) == {"x": 7} and seen[-1]  # lax "7", plain dict
    with pytest.raises(ToolArgumentError):
        t.run_inline({"a": "seven"})
    slow.set()
    assert t.run_inline({"a": 1}) == {"x": 1}  # slow: an overrun sends it back to threads, as run's would
    assert not t.runs_inline
    slow.clear()

    async def later(a: int) -> int:
        return a

    def gives_awaitable(a: int) -> Any:
        return later(a + 1)

    g = FunctionTool(gives_awaitable, run_in_thread=False)
    pending = g.run_inline({"a": 1})
    assert inspect.iscoroutine(pending) and await pending == 2
    assert FunctionTool(later).run_inline({"a": 1}) is NotImplemented  # an async tool: through run
    with pytest.raises(TypeError, match="not plain data"):
        FunctionTool(lambda: object(), name="obj", run_in_thread=False).run_inline({})

    def with_context(a: int, tool_context: ToolContext) -> int:
        return a

    with pytest.raises(RuntimeError, match="takes a context"):
        FunctionTool(with_context, run_in_thread=False).run_inline({"a": 1})

    def stops(a: int) -> int:
        raise StopIteration(a)

    s = FunctionTool(stops, run_in_thread=False)
    with pytest.raises(RuntimeError, match=r"^coroutine raised StopIteration$") as inline:
        s.run_inline({"a": 1})
    assert isinstance(inline.value.__cause__, StopIteration)
    with pytest.raises(RuntimeError, match=r"^coroutine raised StopIteration$"):
        await s.run({"a": 1}, make_context())  # the same as run, a coroutine, raises


async def test_a_slow_threaded_call_restarts_the_quick_streak() -> None:
    slow = threading.Event()

    def f(a: int) -> int:
        if slow.is_set():
            time.sleep(QUICK_CALL * 5)
        return a

    t = FunctionTool(f)
    for i in range(2):
        await t.run({"a": i}, make_context())
    slow.set()
    await t.run({"a": 2}, make_context())  # slow on its thread: the streak starts over
    slow.clear()
    for i in range(2):
        await t.run({"a": i}, make_context())
        assert not t.runs_inline
    await t.run({"a": 3}, make_context())
    assert t.runs_inline


async def test_async_function_is_awaited() -> None:
    async def f(a: int, b: int = 2) -> list[int]:
        return [a, b]

    assert await FunctionTool(f).run({"a": 1}, make_context()) == [1, 2]


async def test_async_callable_instance_and_positional_only() -> None:
    class Adder:
        async def __call__(self, a: int, b: int) -> int:
            return a + b

    def sub(a: int, b: int, /) -> int:
        return a - b

    assert await FunctionTool(Adder()).run({"a": 1, "b": 2}, make_context()) == 3
    assert await FunctionTool(sub).run({"b": 1, "a": 5}, make_context()) == 4


async def test_lax_coercion_and_model_argument() -> None:
    def f(n: int, user: User, tags: list[str] = []) -> dict[str, Any]:  # noqa: B006
        assert isinstance(user, User)
        return {"n": n, "user": user, "tags": tags}

    result = await FunctionTool(f).run({"n": "3", "user": {"name": "ann"}, "tags": ("x",)}, make_context())
    assert result == {"n": 3, "user": {"name": "ann", "age": 0}, "tags": ["x"]}


async def test_none_args_for_a_tool_without_parameters() -> None:
    assert await FunctionTool(lambda: "pong", name="ping").run(None, make_context()) == "pong"  # type: ignore[arg-type]


# ------------------------------------------------------------------ validation errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"a": None, "b": 1}, "tool 'add' got invalid arguments: a: Input should be a valid integer"),
        (
            {"a": "x"},
            "tool 'add' got invalid arguments: a: Input should be a valid integer, unable to parse string as an "
            "integer; b: missing required argument",
        ),
        ({"a": 1, "b": 2, "c": 3}, "tool 'add' got invalid arguments: c: unexpected argument (parameters: a, b)"),
        ([1, 2], "tool 'add' got invalid arguments: Input should be a valid dictionary"),
    ],
    ids=["type", "two-errors", "unknown-argument", "not-a-dict"],
)
async def test_validation_error_message(args: Any, message: str) -> None:
    with pytest.raises(ToolArgumentError) as info:
        await FunctionTool(add).run(args, make_context())
    assert str(info.value) == message
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, CodeActError)
    assert info.value.tool_name == "add"


async def test_validation_error_nested_locations() -> None:
    def f(xs: list[int], user: User) -> None: ...

    with pytest.raises(ToolArgumentError) as info:
        await FunctionTool(f).run({"xs": [1, "y"], "user": {"age": 1}}, make_context())
    assert info.value.errors == [
        ("xs[1]", "Input should be a valid integer, unable to parse string as an integer"),
        ("user.name", "Field required"),
    ]


# ------------------------------------------------------------------ results


async def test_result_conversion() -> None:
    def f() -> dict[Any, Any]:
        return {
            "model": User(name="ann", age=3),
            "dataclass": Point(1, 2, datetime.date(2024, 1, 2)),
            "datetime": datetime.datetime(2024, 1, 2, 3, 4, 5),
            "set": {7},
            "tuple": (1, (2, 3)),
            "bytes": b"\x00\xff",
            "enum": Color.RED,
            1: "int key",
        }

    # Plain values stay as they are (SPEC §3 v3: sets, tuples, int keys cross as such).
    result = await FunctionTool(f).run({}, make_context())
    assert result == {
        "model": {"name": "ann", "age": 3},
        "dataclass": {"x": 1, "y": 2, "when": "2024-01-02"},
        "datetime": "2024-01-02T03:04:05",
        "set": {7},
        "tuple": (1, (2, 3)),
        "bytes": b"\x00\xff",
        "enum": "red",
        1: "int key",
    }
    assert type(result["set"]) is set and type(result["tuple"]) is tuple


async def test_unconvertible_result_is_a_type_error() -> None:
    t = FunctionTool(lambda: object(), name="bad")
    with pytest.raises(TypeError, match="tool 'bad' returned a value that is not plain data"):
        await t.run({}, make_context())


async def test_function_exceptions_propagate_unchanged() -> None:
    def boom() -> None:
        raise KeyError("nope")

    with pytest.raises(KeyError, match="nope"):
        await FunctionTool(boom).run({}, make_context())


# ------------------------------------------------------------------ long running, decorator


async def test_long_running_function_tool() -> None:
    def start_job(spec: str) -> dict[str, str]:
        """Starts a job."""
        return {"status": "pending", "task_id": f"t-{spec}"}

    t = LongRunningFunctionTool(start_job)
    assert t.is_long_running is True
    assert FunctionTool(start_job).is_long_running is False
    assert t.description == "Starts a job."
    assert await t.run({"spec": "x"}, make_context()) == {"status": "pending", "task_id": "t-x"}


def test_tool_decorator_forms() -> None:
    @tool
    def one(x: int) -> int:
        return x

    @tool(name="two-two", run_in_thread=True, requires_confirmation=True)
    def two(x: int) -> int:
        return x

    assert isinstance(one, FunctionTool)
    assert one.name == "one"
    assert one.func(4) == 4
    assert isinstance(two, FunctionTool)
    assert (two.name, two.run_in_thread, two.requires_confirmation) == ("two-two", True, True)
    assert tool(add).parameters == FunctionTool(add).parameters
