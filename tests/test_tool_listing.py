"""What the model is told about each tool (issue 12 "Tool listing"): every style shows each
argument's type, default and description and the tool's return type; the functions style
shows real annotations and defaults."""

from __future__ import annotations

import ast
from typing import Literal

import pytest
from pydantic import BaseModel

from codeact import CPythonRuntime, MontyRuntime
from codeact.runtime import default_tool_catalog
from codeact.tools import FunctionTool, Tool


def lookup(query: str, fallback: str = "n/a", limit: int = 10) -> str:
    """Looks a query up.

    Args:
        query: the text to look for.
        fallback: returned when nothing matches.
        limit: how many entries to scan.
    """
    return fallback


def top(words: list[str], mode: Literal["fast", "exact"] = "fast", note: str | None = None) -> list[str]:
    """Ranks words.

    Args:
        words: the candidates.
        mode: how hard to try.
        note: a remark kept with the ranking.
    """
    return words


class Weather(BaseModel):
    city: str
    celsius: float


async def weather(city: str) -> Weather:
    """The weather in a city.

    Args:
        city: the city's name.
    """
    return Weather(city=city, celsius=20.0)


def stats(values: list[float]) -> dict[str, float]:
    """Mean and spread of values."""
    return {}


def untyped(x):  # type: ignore[no-untyped-def]
    """No annotations at all."""
    return x


TOOLS = [FunctionTool(f) for f in (lookup, top, weather, stats, untyped)]


def _functions() -> str:
    return MontyRuntime(tool_style="functions").render_tools(TOOLS)


# ------------------------------------------------------------------ functions style


@pytest.mark.parametrize(
    "signature",
    [
        "def lookup(query: str, fallback: str = 'n/a', limit: int = 10) -> str:",
        "def top(words: list[str], mode: Literal['fast', 'exact'] = 'fast', note: str | None = None) -> list[str]:",
        "def weather(city: str) -> Weather:",
        "def stats(values: list[float]) -> dict[str, float]:",
        "def untyped(x: Any) -> Any:",
    ],
)
def test_functions_style_shows_real_types_defaults_and_return_types(signature: str) -> None:
    assert signature in _functions()


def test_functions_style_listing_is_valid_python_with_argument_docs() -> None:
    text = _functions()
    ast.parse(text)
    assert "query: the text to look for." in text
    assert "fallback: returned when nothing matches." in text
    assert "-> Any:" in text  # only the unannotated tool


def test_a_default_that_is_not_none_is_never_rendered_as_none() -> None:
    for line in _functions().splitlines():
        if line.startswith("def lookup"):
            assert "= None" not in line


# ------------------------------------------------------------------ call_tool style (the default)


def _call_tool() -> str:
    return MontyRuntime().render_tools(TOOLS)


@pytest.mark.parametrize(
    "needle",
    [
        "#   query (str): the text to look for.",
        "#   fallback (str, optional, default 'n/a'): returned when nothing matches.",
        "#   limit (int, optional, default 10): how many entries to scan.",
        "# Returns str.",
        'call_tool("lookup", {"query": <str>, "fallback": <str, optional>, "limit": <int, optional>})',
        "#   mode (Literal['fast', 'exact'], optional, default 'fast'): how hard to try.",
        "# Returns list[str].",
        'call_tool("top", {"words": <list[str]>, "mode": <Literal[\'fast\', \'exact\'], optional>, '
        '"note": <str | None, optional>})',
        "#   city (str): the city's name.",
        "# Returns Weather.",
        "# Returns dict[str, float].",
    ],
)
def test_call_tool_style_shows_argument_descriptions_and_return_types(needle: str) -> None:
    assert needle in _call_tool()


def test_call_tool_style_omits_what_a_tool_does_not_declare() -> None:
    text = MontyRuntime().render_tools([FunctionTool(untyped), Tool("ping", "Ping.")])
    assert "Returns" not in text
    assert text == '# No annotations at all.\ncall_tool("untyped", {"x": <Any>})\n\n# Ping.\ncall_tool("ping")'


def test_a_hand_written_tool_can_declare_its_return_type() -> None:
    tool = Tool(
        "rate",
        "Exchange rate.",
        {"type": "object", "properties": {"pair": {"type": "string", "description": "like EURUSD"}}},
        returns={"type": "number"},
    )
    text = MontyRuntime().render_tools([tool])
    assert "#   pair (str, optional): like EURUSD" in text
    assert "# Returns float." in text
    assert "def rate(pair: str | None = None) -> float:" in MontyRuntime(tool_style="functions").render_tools([tool])


# ------------------------------------------------------------------ the language-neutral catalog


@pytest.mark.parametrize("render", [default_tool_catalog, CPythonRuntime().render_tools])
def test_catalog_lists_arguments_and_return_type(render) -> None:  # type: ignore[no-untyped-def]
    text = render(TOOLS)
    assert "    - fallback (str, optional, default 'n/a'): returned when nothing matches." in text
    assert "  returns: str" in text
    assert "  returns: Weather" in text
    assert "  returns: list[str]" in text
