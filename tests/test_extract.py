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


# ------------------------------------------------------------------ more styles of our own

from codeact.agent import NO_CODE_FEEDBACK  # noqa: E402
from codeact.agent._extract import explain_no_code  # noqa: E402


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        # <think> closed, code after it
        ("<think>\nI should add.\n</think>\n```python\nx = 1 + 1\n```", "x = 1 + 1"),
        # <think> never closed, smolagents action after it
        ("<think>\nplan: ```python\nbad = 1\n```\nThought: go.\nCode:\n```py\ngood = 2\n```<end_code>", "good = 2"),
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


# ------------------------------------------------------------------ the shared corpus

import json  # noqa: E402
from pathlib import Path  # noqa: E402


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
