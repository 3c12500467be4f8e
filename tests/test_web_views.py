"""The inbox's plain-data views (``codeact.web._views``): where a paused call is in its
script, and what the reviewer reads (issue 46)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("starlette", reason="codeact[web] is not installed")
pytest.importorskip("jinja2", reason="codeact[web] is not installed")

from codeact.agent._position import script_position, text_position
from codeact.web._views import BIDI_CONTROLS, call_sites, call_text, escape_bidi, excerpt, script_lines


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


def test_text_position_counts_characters_on_lines() -> None:
    text = 'x = "é"\nfor i in (1, 2):\n    r = call_tool("pay", {})\n'
    start = text.encode().index(b"call_tool")
    end = start + len(b'call_tool("pay", {})')
    assert text_position(text, start, end) == (3, 9, 3, 29)
    assert text_position(text, start + 1, end + 1000) is None  # out of the text
    assert text_position("é", 1, 2) is None  # not on a character boundary


def test_script_position_maps_back_to_the_models_script() -> None:
    script = 'print("pay")\nr = call_tool("pay", {})\n{"value": r}'
    at = script.index("call_tool")
    call = (at, at + len('call_tool("pay", {})'))
    assert script_position(script, script, call) == [2, 5, 2, 25]
    # A rewrite that kept the lines: the same line; one that changed the call's line: unknown.
    assert script_position(script.replace("print", "PRINT"), script, call) == [2, 5, 2, 25]
    moved = script.replace("{})", "{\n})")
    assert script_position(moved, script, call) is None
    # A carried prelude before the script (persist_namespace without sessions): lines shift.
    prelude = "def f():\n    return 1\nrate = 2\n"
    assert script_position(prelude + script, prelude + script, (call[0] + len(prelude), call[1] + len(prelude)), 3) == [
        2,
        5,
        2,
        25,
    ]
    assert script_position(prelude + script, prelude + script, (0, 3), 3) is None  # in the prelude
    # The script's last expression, captured by the namespace epilogue: the capture is dropped.
    captured = prelude + '__codeact_namespace___result = (call_tool("pay", {}))'
    start = captured.index("call_tool")
    assert script_position(captured, captured, (start, start + 20), 3) == [1, 1, 1, 21]


def test_a_known_position_marks_its_line_over_the_syntax() -> None:
    code = 'call_tool("pay", {})\ncall_tool("pay", {})'
    found = excerpt(code, "pay", None, [2, 1, 2, 21])
    assert found["line"] == 2 and found["note"] == ""
    assert [line["n"] for line in found["lines"] if line["here"]] == [2]
    # A position outside the shown script is not trusted: the syntax decides.
    assert excerpt(code, "pay", None, [7, 1, 7, 2])["line"] is None


@pytest.mark.parametrize("sessions", [True, False], ids=["namespace-session", "prelude"])
def test_a_namespace_turn_marks_the_call_in_the_models_script(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, sessions: bool
) -> None:
    import anyio

    import web_fixtures as wf
    from codeact import CodeActAgent
    from codeact.web._views import inbox

    if not sessions:  # the source transform: a prelude of carried code before the script
        monkeypatch.setattr(CodeActAgent, "_uses_session", lambda self: False)
    runner = wf.make_runner(str(tmp_path / "s.db"), persist_namespace=True)

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        await wf.start(runner, "ns-1", "prepare one")  # then the loop, in the same run
        await wf.start(runner, "ns-2", "prepare two")  # then settle(300)
        cards = await inbox(runner, None, lambda text: text)
        slot = await runner.session_service.load_turn(app_name=wf.APP, user_id="alice", session_id="ns-1")
        assert slot is not None
        return cards, slot.data["pending"]

    try:
        cards, pending = anyio.run(scenario)
    finally:
        runner.session_service.close()
    loop = next(c for c in cards if c["session_id"] == "ns-1")
    assert loop["excerpt"]["line"] == 4 and loop["excerpt"]["note"] == ""
    assert [line["n"] for line in loop["excerpt"]["lines"] if line["here"]] == [4]
    assert pending[0]["position"][0] == 4
    if not sessions:  # the script ran after 3 lines of carried code (the function, rate)
        assert loop["excerpt"]["lines"][3]["text"].startswith("    paid.append(call_tool(")
    # The call sits in a function an earlier script defined: no position in this script,
    # and the syntax reading says why nothing is marked.
    settle = next(c for c in cards if c["session_id"] == "ns-2")
    assert settle["excerpt"]["line"] is None and "earlier script" in settle["excerpt"]["note"]


def test_script_lines_break_where_the_interpreter_does() -> None:
    """A U+2028, a form feed or a vertical tab in a string does not start a line of the
    excerpt (the interpreter's positions count ``\\n``, ``\\r\\n`` and ``\\r`` only), and each
    is shown escaped."""
    code = 'note = "a\u2028b\x0cc\x0bd"\ncall_tool("pay", {})\r\nx = 1\rdone = 2\n'
    assert script_lines(code) == ['note = "a\u2028b\x0cc\x0bd"', 'call_tool("pay", {})', "x = 1", "done = 2"]
    assert script_lines("") == [""]
    assert escape_bidi("a\u2028b\x0c\u202e") == "a\\u2028b\\u000c\\u202e"


def test_every_text_a_page_prints_has_its_bidi_controls_escaped() -> None:
    """The pages' Jinja environment escapes bidi controls in any printed text (printed output,
    user messages, ids), plain or already marked safe, and still escapes HTML."""
    import markupsafe

    from codeact.web._app import _shown

    assert _shown("id\u202eevil") == "id\\u202eevil"
    shown = _shown(markupsafe.Markup("<b>\u2066x</b>"))
    assert isinstance(shown, markupsafe.Markup) and shown == "<b>\\u2066x</b>"
    assert _shown(3) == 3
    import jinja2

    env = jinja2.Environment(autoescape=True, finalize=_shown)
    assert env.from_string("{{ v }}").render(v="<i>\u202e</i>") == "&lt;i&gt;\\u202e&lt;/i&gt;"
