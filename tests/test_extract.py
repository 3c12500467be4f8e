"""``codeact.agent.extract_code``: which script a reply holds (SPEC §4 "Extraction")."""

from __future__ import annotations

import pytest

from codeact import extract_code


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
