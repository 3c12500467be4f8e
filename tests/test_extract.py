"""``codeact.agent.extract_code``: which script a reply holds (SPEC §4 "Extraction")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codeact import extract_code
from codeact.agent import NO_CODE_FEEDBACK
from codeact.agent._extract import explain_no_code


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("```python\nreturn 42\n```", "return 42"),
        ("```py\nx = 1\n```", "x = 1"),
        ("```python3\nx = 1\n```", "x = 1"),
        ("```\nx = 1\n```", "x = 1"),
        ("```Python\nx = 1\n```", "x = 1"),
        ("Sure! Here you go:\n\n```python\nx = 1\ny = 2\n```\nThat sets x and y.", "x = 1\ny = 2"),
        ("~~~python\nx = 1\n~~~", "x = 1"),
        ("```python\nif x:\n    y = 1\n```", "if x:\n    y = 1"),
    ],
)
def test_fenced_blocks(reply: str, code: str) -> None:
    assert extract_code(reply) == code


def test_indentation_of_the_first_line_is_kept_relative() -> None:
    reply = "```python\nfor i in range(2):\n    print(i)\n```"
    assert extract_code(reply) == "for i in range(2):\n    print(i)"


def test_every_python_block_runs_in_order() -> None:
    reply = "First:\n```python\na = 1\n```\nThen:\n```python\nb = a + 1\n```"
    assert extract_code(reply) == "a = 1\n\nb = a + 1"


def test_python_block_after_a_bash_block_is_chosen() -> None:
    reply = "Install:\n```bash\npip install x\n```\nThen:\n```python\nimport json\n```"
    assert extract_code(reply) == "import json"


@pytest.mark.parametrize("lang", ["bash", "sh", "json", "sql", "javascript", "text"])
def test_other_languages_are_never_run(lang: str) -> None:
    assert extract_code(f"Run this:\n```{lang}\nrm -rf /tmp/x\n```") is None


def test_think_blocks_are_ignored() -> None:
    reply = "<think>\nmaybe\n```python\nsecret = 1\n```\n</think>\nFinal:\n```python\nanswer = 2\n```"
    assert extract_code(reply) == "answer = 2"
    assert extract_code("<think>```python\nx = 1\n```</think>Nothing to run.") is None
    # an unterminated think block hides the rest
    assert extract_code("<think>```python\nx = 1\n```") is None


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("<execute>\nx = 1\n</execute>", "x = 1"),
        ("Let me run:\n<execute>x = call_tool('a', {})</execute>", "x = call_tool('a', {})"),
        ("<code>\ny = 2\n</code>", "y = 2"),
        ("<execute_ipython>\nz = 3\n</execute_ipython>", "z = 3"),
        ("Thought: compute it.\nCode:\nx = 1\ny = x + 1\n<end_code>", "x = 1\ny = x + 1"),
    ],
)
def test_tags_and_markers(reply: str, code: str) -> None:
    assert extract_code(reply) == code


def test_unterminated_fence_runs_to_the_end() -> None:
    assert extract_code("Here:\n```python\nx = 1\ny = 2") == "x = 1\ny = 2"


def test_one_line_dict_literal_reply_is_code() -> None:
    reply = '{"type": "final_result", "value": 42}'
    assert extract_code(reply) == reply


def test_bare_code_reply_is_code() -> None:
    reply = 'r = call_tool("add", {"a": 1})\n{"type": "observation", "value": r}'
    assert extract_code(reply) == reply


@pytest.mark.parametrize(
    "reply",
    [
        "The answer is 42.",
        "I don't know",
        "hello",
        "Paris",
        "",
        "   \n  ",
        "not (a or b)",
    ],
)
def test_plain_prose_is_not_code(reply: str) -> None:
    assert extract_code(reply) is None


def test_empty_fenced_block_is_not_code() -> None:
    assert extract_code("```python\n\n```") is None


def test_smolagents_code_block_closed_by_end_code() -> None:
    reply = "Thought: compute it.\nCode:\n```py\nx = 1\n```<end_code>"
    assert extract_code(reply) == "x = 1"


# ------------------------------------------------------------------ more styles of our own


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        # <think> closed, code after it
        ("<think>\nI should add.\n</think>\n```python\nx = 1 + 1\n```", "x = 1 + 1"),
        # Thought: / Code: with <end_code> and no fence
        ("Thought: sum them.\nCode:\ntotal = sum([1, 2])\nprint(total)<end_code>", "total = sum([1, 2])\nprint(total)"),
        # <code> tags
        ("Here it is: <code>\nprint('hi')\n</code> done", "print('hi')"),
        # <execute_ipython> cut by a stop sequence (no closing tag)
        ("Let me check:\n<execute_ipython>\nprint(1)\n", "print(1)"),
        # a tag wrapping a fence
        ("<execute>\n```python\nx = 3\n```\n</execute>", "x = 3"),
        # one-line fence body
        ("```python\nprint(42)\n```", "print(42)"),
        # unterminated fence with prose before
        ("Running:\n```py\nfor i in range(2):\n    print(i)", "for i in range(2):\n    print(i)"),
        # an opener after prose on the same line (AutoGen "script  ```")
        ("script  ```\nprint('x')\n```", "print('x')"),
        # console artefacts are not fences
        ("``` [STEP 2]:\nThought: t\nCode:\n```py\ny = 1\n```<end_code>", "y = 1"),
        # a bash block is skipped, the Python ones join in order
        ("```bash\npip install x\n```\n```python\na = 1\n```\n```\nprint(a)\n```", "a = 1\n\nprint(a)"),
    ],
)
def test_styles_of_our_own(reply: str, code: str) -> None:
    assert extract_code(reply) == code


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ("```bash\nls -la\n```", "shell command"),
        ("```sh\npip install pandas\n```", "shell command"),
        ("<execute_bash>\necho hi\n", "shell command"),
        ("<execute_ipython>\n%pip install x\n</execute_ipython>", "shell command"),
        ("```\npip install requests\n```", "shell command"),
        ("```sql\nSELECT 1;\n```", "SQL query"),
        ('```json\n{"a": 1}\n```', "json"),
        ("<think>```python\nx = 1\n```</think>Nothing else.", "inside <think>"),
    ],
)
def test_no_code_feedback_says_why(reply: str, needle: str) -> None:
    assert extract_code(reply) is None
    message = explain_no_code(reply)
    assert needle in message
    assert "```python" in message  # names the expected form


def test_plain_prose_gets_the_generic_feedback() -> None:
    assert explain_no_code("TERMINATE") == NO_CODE_FEEDBACK
    assert explain_no_code("The answer is 42.") == NO_CODE_FEEDBACK


def test_a_bare_block_that_does_not_parse_is_returned_when_nothing_else_is() -> None:
    # the syntax error is then fed back, which tells the model more than "no code"
    assert extract_code("```\nprint('a'\n```") == "print('a'"


# ------------------------------------------------------------------ issue 12: kinds of fault


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("```python\r\nx = 1\r\n```\r\nThat sets x.", "x = 1"),
        ("Here:\r\n```python\r\nx = 1\r\ny = 2\r\n```\r\nDone, x is 1.\r\n", "x = 1\ny = 2"),
        ("```python\nx = 1\n```\r\nThen we print it.", "x = 1"),
        ("<execute>\r\nx = 1\r\n</execute>\r\nok", "x = 1"),
        ("Thought: t\r\nCode:\r\nx = 1\r\n<end_code>\r\n", "x = 1"),
        ("```python\rx = 1\r```\rprose", "x = 1"),  # old Mac line ends
    ],
)
def test_crlf_line_ends_close_a_block(reply: str, code: str) -> None:
    assert extract_code(reply) == code


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("```\n```py\nx = 1\n```", "x = 1"),
        ("```\n```python\nx = 1\n```\n```", "x = 1"),
        ("```python\n```python\nx = 1\n```", "x = 1"),
        ("Here:\n~~~\n```py\nx = 1\n```\n~~~", "x = 1"),
        ("```\n  ```py  \nfor i in range(2):\n    print(i)\n```", "for i in range(2):\n    print(i)"),
    ],
)
def test_a_doubled_opener_is_markup_not_code(reply: str, code: str) -> None:
    assert extract_code(reply) == code


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("<code>\nx = 1\n</code", "x = 1"),
        ("<code>\nx = 1\n</cod", "x = 1"),
        ("<execute>\nx = 1\n</execute\nDone.", "x = 1"),
        ("<execute_ipython>\nprint(1)\n</", "print(1)"),
        ("```python\nx = 1\n``", "x = 1"),
        ("```python\nx = 1\n``\nThat is all.", "x = 1"),
        ("```python\nx = 1\n`", "x = 1"),
        ("Thought: t\nCode:\n```py\nx = 1\n```<end_code", "x = 1"),
        ("Thought: t\nCode:\nx = 1\n<end_co", "x = 1"),
        ("```python\nprint(1)```", "print(1)"),  # the closer glued to the last code line
        ("```python\nprint(1)```\nDone.", "print(1)"),
    ],
)
def test_a_closer_cut_short_is_not_kept_in_the_script(reply: str, code: str) -> None:
    assert extract_code(reply) == code


def test_a_short_backtick_line_inside_a_string_is_not_a_closer() -> None:
    code = 's = """\n``\n"""\nprint(s)'
    assert extract_code(f"```python\n{code}\n```") == code


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("```python print('hi')```", "print('hi')"),
        ("Run ```py x = 1``` now.", "x = 1"),
        ("```print('hi')```", "print('hi')"),
        ("```python x = call_tool('add', {'a': 1})```", "x = call_tool('add', {'a': 1})"),
        ('```{"type": "final_result", "value": 42}```', '{"type": "final_result", "value": 42}'),
    ],
)
def test_a_one_line_inline_fence_is_code(reply: str, code: str) -> None:
    assert extract_code(reply) == code


@pytest.mark.parametrize(
    "reply",
    [
        "Use ``` to open a block and ``` to close it.",
        "Wrap the name in ```answer``` when you write it.",
        "```bash ls -la```",
    ],
)
def test_prose_or_other_languages_between_triple_backticks_do_not_run(reply: str) -> None:
    assert extract_code(reply) is None


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("```python\nprint(6*7)\n```\nOutput:\n```\n42\n```", "print(6*7)"),
        (
            "```python\nr = 6*7\n{'type': 'final_result', 'value': r}\n```\nExpected output:\n```\n{'a': 1}\n```",
            "r = 6*7\n{'type': 'final_result', 'value': r}",
        ),
        ("```python\nprint([1, 2])\n```\n```\n[1, 2]\n```", "print([1, 2])"),  # unlabelled, only values
        ("```python\nprint('Hello')\n```\nThis prints:\n```\nHello\n```", "print('Hello')"),
        ("```python\nprint(x)\n```\n**Output:**\n```\nprint(x) ran\n```", "print(x)"),
        ("```python\nprint(1)\n```\nResult: ```\n1\n```", "print(1)"),
        ("```python\nx = 1\n```\nOutput: ```x = 2```", "x = 1"),
    ],
)
def test_program_output_after_the_code_is_not_joined(reply: str, code: str) -> None:
    assert extract_code(reply) == code


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        # a bare block of real code after a Python block still joins (AutoGen runs it)
        ("```python\na = 1\n```\n```\nprint(a)\n```", "a = 1\n\nprint(a)"),
        # a tagged result in a block of its own is code, not output
        (
            "```python\nr = 2\n```\n```\n{'type': 'final_result', 'value': r}\n```",
            "r = 2\n\n{'type': 'final_result', 'value': r}",
        ),
        (
            '```python\nx = 1\n```\n```\n{"type": "observation", "value": 1}\n```',
            'x = 1\n\n{"type": "observation", "value": 1}',
        ),
        # prose introducing code is not an output label
        ("Here is the code that prints the result:\n```\nprint(1)\n```", "print(1)"),
        # a labelled ```python block is always code
        ("```python\nx = 1\n```\nOutput:\n```python\nprint(x)\n```", "x = 1\n\nprint(x)"),
    ],
)
def test_code_after_code_is_still_joined(reply: str, code: str) -> None:
    assert extract_code(reply) == code


def test_output_alone_is_not_a_script() -> None:
    reply = "Output:\n```\n42\n```"
    assert extract_code(reply) is None
    assert explain_no_code(reply) == NO_CODE_FEEDBACK


# ------------------------------------------------------------------ the shared corpus


def _shared() -> Path | None:
    for candidate in (Path(__file__).parents[2] / "shared", Path("/work/shared")):
        if (candidate / "corpus" / "replies.jsonl").exists():
            return candidate
    return None


SHARED = _shared()
REPLIES = (
    [json.loads(line) for line in (SHARED / "corpus" / "replies.jsonl").read_text().splitlines() if line.strip()]
    if SHARED
    else []
)


@pytest.mark.skipif(SHARED is None, reason="../shared (the shared corpus) is not present")
@pytest.mark.parametrize("item", REPLIES, ids=lambda r: r["id"])
def test_every_shared_reply_matches_what_its_framework_ran(item: dict) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
    from gen_docs import compare

    got = extract_code(item["reply"])
    _chosen, verdict = compare(item)
    assert "DIFFERENT" not in verdict
    if got is None:
        assert explain_no_code(item["reply"])
    if "no-code" in (item.get("styles") or []):
        assert got is None


@pytest.mark.skipif(SHARED is None, reason="../shared (the shared corpus) is not present")
def test_docs_extraction_table_is_up_to_date() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
    from gen_docs import ROOT, extraction_md

    assert (ROOT / "docs" / "extraction.md").read_text() == extraction_md(SHARED), "run python tools/gen_docs.py"


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("1. Do this:\n   ```python\n   x = 1\n   print(x)\n   ```", "x = 1\nprint(x)"),
        (
            "- step\n  ```python\n  for i in range(2):\n      print(i)\n  ```\n- next",
            "for i in range(2):\n    print(i)",
        ),
        ("1. a\n   ```python\n   x = 1\n\n  y = 2\n   ```", "x = 1\n\ny = 2"),  # less than the opener: all removed
        ("2. Then:\n    ~~~py\n    if x:\n        y = 1\n    ~~~", "if x:\n    y = 1"),
        ("Run this ```python\n  x = 1\n```", "  x = 1"),  # opener after prose: no indent of its own
    ],
)
def test_a_fence_s_own_indentation_is_removed_from_its_lines(reply: str, code: str) -> None:
    script = extract_code(reply)
    assert script == code
    if not code.startswith(" "):
        compile(script, "<reply>", "exec")


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ('```python\ns = """\n```\n"""\nprint(s)\n```', 's = """\n```\n"""\nprint(s)'),
        ('```python\ns = """\n```\n"""\n```\nThen:\n```python\nt = 1\n```', 's = """\n```\n"""\n\nt = 1'),
        ('<code>s = "</code>"</code>', 's = "</code>"'),
        ('<code>s = "</code>"\nprint(s)</code> and <code>y = 2</code>', 's = "</code>"\nprint(s)\n\ny = 2'),
        # a block that does not parse either way keeps its first closer: the next block is not swallowed
        ("```python\nx = (\n```\nOutput:\n```\n42\n```", "x = ("),
        ("<code>x = (</code> <code>y = 2</code>", "x = (\n\ny = 2"),
    ],
)
def test_a_closer_inside_a_string_literal_does_not_cut_the_script(reply: str, code: str) -> None:
    assert extract_code(reply) == code


# ------------------------------------------------------------------ thinking: nesting, quoting, unclosed (issue 20)

_DRAFT = '```python\ncall_tool("delete_all", {})\n```'
_REAL = '```python\nprint("safe")\n```'


@pytest.mark.parametrize(
    "reply",
    [
        # nested: the inner close tag does not end the outer block
        f"<think>Outer <think>inner</think> so maybe:\n{_DRAFT}\n</think>\n{_REAL}",
        f"<think>a <think>b <think>c</think> d</think>\n{_DRAFT}\n</think>{_REAL}",
        # a quoted close tag is prose, not markup
        f'<think>I must not write "</think>" early.\n{_DRAFT}\n</think>\n{_REAL}',
        f"<think>The tag `</think>` ends this.\n{_DRAFT}\n</think>\n{_REAL}",
        f"<think>Quote '</think>' here\n{_DRAFT}\n</think>\n{_REAL}",
        # an unquoted literal close tag in the thought: the stray one after it is the real end
        f"<think>I'll end with </think> when done.\n{_DRAFT}\n</think>\n{_REAL}",
        # mixed case, both names, spaces inside the tag
        f"<THINK>\n{_DRAFT}\n</Think>\n{_REAL}",
        f"<Thinking>\n{_DRAFT}\n</THINKING>\n{_REAL}",
        f"<think >\n{_DRAFT}\n</ think>\n{_REAL}",
        # a close tag of the other name inside does not close
        f"<thinking>hmm </think>\n{_DRAFT}\n</thinking>\n{_REAL}",
        # a quoted opener is prose: the block closes at its own close tag
        f'<think>Should I write "<think>" again? No.\n{_DRAFT}\n</think>\n{_REAL}',
        # the opener was in the prompt (DeepSeek-R1): text before a leading close tag is thinking
        f"Let me draft:\n{_DRAFT}\n</think>\n{_REAL}",
        # thinking between two action blocks: the draft inside is dropped, both real blocks run
        f"{_REAL}\n<think>\n{_DRAFT}\n</think>",
    ],
)
def test_a_fence_inside_thinking_never_runs(reply: str) -> None:
    script = extract_code(reply)
    assert script is not None
    assert "delete_all" not in script
    assert 'print("safe")' in script


@pytest.mark.parametrize(
    "reply",
    [
        f"<think>\n{_DRAFT}",
        f"<think>Outer <think>inner</think>\n{_DRAFT}\n",  # one level still open
        f"<think>plan\nThought: go.\nCode:\n{_DRAFT}<end_code>",  # a smolagents action does not close it
        f"<thinking>plan </think>\n{_DRAFT}",  # the wrong name does not close it
        f"{_REAL}\n<think>\n{_DRAFT}",  # code before the open block does not run either
        f"<THINK>x</think>{_REAL}<Think>\n{_DRAFT}",
    ],
)
def test_an_unclosed_thinking_block_runs_nothing_and_says_why(reply: str) -> None:
    assert extract_code(reply) is None
    message = explain_no_code(reply)
    assert "never closed" in message
    assert "```python" in message


def test_quoted_tags_outside_thinking_are_prose() -> None:
    reply = f'Models may write "<think>" before reasoning.\n{_REAL}'
    assert extract_code(reply) == 'print("safe")'


# ------------------------------------------------------------------ the glued closer's search

_GLUED_ALPHABET = "`~ \tax1(\n"


@pytest.mark.parametrize("fence", ["```", "````", "~~~"])
def test_the_glued_closer_search_finds_what_the_regex_search_finds(fence: str) -> None:
    """``_glued_search`` tries the glued-closer pattern only on lines holding the fence's
    characters (issue 21: the pattern's scan of every line was most of the extraction's
    cost on a long script); on texts made of fence characters, blanks, code and line ends,
    from every start position, it finds exactly the match ``pattern.search`` finds."""
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies

    from codeact.agent._extract import _closer_patterns, _glued_search

    glued = _closer_patterns(fence[0], len(fence))[1]

    @hypothesis.settings(max_examples=400, deadline=None)
    @hypothesis.given(strategies.text(alphabet=_GLUED_ALPHABET + fence[0], max_size=60), strategies.data())
    def check(text: str, data: Any) -> None:
        start = data.draw(strategies.integers(0, len(text)))
        want, got = glued.search(text, start), _glued_search(glued, text, fence, start)
        assert (want.span(), want.span("run")) == (got.span(), got.span("run")) if want else got is None

    check()


def test_the_one_line_fence_search_finds_what_the_regex_search_finds() -> None:
    """``_inline_matches`` runs the one-line-fence pattern only on lines holding two runs of
    three backticks (issue 21); from every start position it yields exactly the matches of
    ``_INLINE.finditer``."""
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies

    from codeact.agent._extract import _INLINE, _inline_matches

    @hypothesis.settings(max_examples=600, deadline=None)
    @hypothesis.given(
        strategies.lists(strategies.sampled_from(["`", "```", "````", " ", "a", "py ", "\n", "\r", "~"]), max_size=25),
        strategies.data(),
    )
    def check(parts: list[str], data: Any) -> None:
        text = "".join(parts)
        pos = data.draw(strategies.integers(0, len(text)))
        want = [(m.span(), m.group("inner")) for m in _INLINE.finditer(text, pos)]
        assert [(m.span(), m.group("inner")) for m in _inline_matches(text, pos)] == want

    check()


def test_a_reply_with_lone_surrogates_is_read_as_before() -> None:
    """The native parser takes UTF-8 only: a block holding a lone surrogate is asked of
    CPython's parser, so ``extract_code`` still answers (no ``UnicodeEncodeError``)."""
    assert extract_code('```python\nx = "\udce9"\n```') == 'x = "\udce9"'
    assert extract_code("hi \udcff") is None
