"""The inbox's plain-data views (``codeact.web._views``): where a paused call is in its
script, and what the reviewer reads (issue 46)."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="codeact[web] is not installed")
pytest.importorskip("jinja2", reason="codeact[web] is not installed")

from codeact.web._views import BIDI_CONTROLS, call_sites, call_text, escape_bidi, excerpt


@pytest.mark.parametrize(
    ("code", "sites"),
    [
        ('print("pay")\nr = call_tool("pay", {"amount": 1})', [2]),  # a mention is no call
        ("# pay(1)\nx = \"call_tool('pay')\"\npay(amount=1)", [3]),
        ('for a in [1, 2]:\n    call_tool("pay", {"amount": a})', [2]),  # one call site, run twice
        ('call_tool("lookup", {})\ncall_tool("pay", {})\ncall_tool("pay", {})', [2, 3]),
        ('call_tool(\n    "pay",\n    {"amount": 1},\n)', [1]),
        ("r = bank.pay(1)", [1]),
        ('call_tool("lookup", {})', []),
        ('name = "pay"\ncall_tool(name, {})', None),  # a computed name: any tool
        ("f = pay\nf(1)", None),  # the tool passed around
        ("f = call_tool\nf('pay', {})", None),
        ('exec("pay(1)")\npay(2)', None),
        ('getattr(x, "pay")(1)', None),
        ("call_tool(", None),  # does not parse
    ],
)
def test_call_sites_read_the_syntax(code: str, sites: list[int] | None) -> None:
    assert call_sites(code, "pay") == sites


def test_excerpt_marks_only_a_known_line() -> None:
    code = 'label = "pay"\nwho = call_tool("lookup", {})\nr = call_tool("pay", {"amount": 900})'
    found = excerpt(code, "pay")
    assert found["line"] == 3 and [x["n"] for x in found["lines"] if x["here"]] == [3] and not found["note"]
    two = excerpt('call_tool("pay", {})\ncall_tool("pay", {})', "pay")
    assert two["line"] is None and not any(x["here"] for x in two["lines"]) and "lines 1, 2" in two["note"]
    # A namespace kept across scripts: an earlier script's function may be what calls pay.
    earlier = excerpt('r = call_tool("pay", {})', "pay", ['def settle():\n    return call_tool("pay", {})'])
    assert earlier["line"] is None and "earlier script" in earlier["note"]
    assert excerpt('r = call_tool("pay", {})', "pay", ["x = 1"])["line"] == 1


def test_bidi_controls_are_written_escaped() -> None:
    assert len(BIDI_CONTROLS) == 12
    text = "".join(sorted(BIDI_CONTROLS))
    shown = escape_bidi(f"a{text}b")
    assert not set(shown) & BIDI_CONTROLS and shown.startswith("a\\u061c\\u200e\\u200f\\u202a") and shown.endswith("b")
    lines = excerpt('x = "\u202e"\ncall_tool("pay", {"memo": "\u2066"})', "pay")["lines"]
    assert lines[0]["text"] == 'x = "\\u202e"'
    assert call_text("pay", {"memo": "\u2067x"}) == 'pay(memo="\\u2067x")'


def test_earlier_scripts_are_those_before_the_paused_one() -> None:
    from codeact.events import Content, Event, ExecutableCode, Part
    from codeact.web._views import _earlier_scripts

    def script(invocation: str, code: str) -> Event:
        return Event(
            invocation_id=invocation,
            author="a",
            content=Content(role="model", parts=[Part(executable_code=ExecutableCode(code=code))]),
        )

    events = [script("run-1", "a = 1"), script("run-2", "def f(): ..."), script("run-2", "f()"), script("run-3", "z")]
    assert _earlier_scripts(events, "run-2") == ["a = 1", "def f(): ..."]
