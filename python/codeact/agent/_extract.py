"""Finding the script to run in a model reply."""

from __future__ import annotations

import ast
import re

__all__ = ("NO_CODE_FEEDBACK", "extract_code")

NO_CODE_FEEDBACK = (
    "Your reply contained no Python code to run. Reply with exactly one fenced block:\n"
    '```python\n# your code\n{"type": "final_result", "value": ...}\n```'
)

_THINK = re.compile(r"<think(?:ing)?>.*?(?:</think(?:ing)?>|\Z)", re.S | re.I)
_FENCE = re.compile(
    r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.#-]*)[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*(?:<end_code>)?[ \t]*$|\Z)", re.S | re.M
)
_TAG = re.compile(r"<(execute_ipython|execute|code|python)>\s*(.*?)\s*(?:</\1>|\Z)", re.S | re.I)
_CODE_MARKER = re.compile(r"(?:^|\n)\s*Code:\s*\n(.*?)(?:<end_code>|\Z)", re.S)
_PYTHON_TAGS = {"python", "py", "python3", "py3", "ipython", "pycon", ""}
_NOT_PYTHON = {
    "sh",
    "bash",
    "shell",
    "zsh",
    "console",
    "sql",
    "json",
    "yaml",
    "yml",
    "toml",
    "text",
    "txt",
    "javascript",
    "js",
    "ts",
    "typescript",
    "html",
    "xml",
    "csv",
    "diff",
    "output",
    "markdown",
    "md",
}


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def extract_code(reply: str) -> str | None:
    """Returns the Python script a careful reader would run from ``reply``, or None.

    Rules, in order:

    1. ``<think>...</think>`` blocks are removed first: code inside them never runs.
    2. Fenced blocks (```` ``` ```` or ``~~~``, terminated or running to the end): the
       first block tagged ``python`` / ``py`` (or untagged) is the script; blocks tagged
       as another language (``bash``, ``sql``, ``json``, ...) are never run.
    3. ``<execute>``, ``<execute_ipython>``, ``<code>`` or ``<python>`` tags.
    4. ``Code:`` ... ``<end_code>`` markers (the smolagents format).
    5. No marker at all: the whole reply, when it parses as Python and is not plain prose.

    A reply with none of these holds no runnable Python: None (the agent feeds back
    ``NO_CODE_FEEDBACK``).
    """
    text = _THINK.sub("", reply)
    blocks = [(m.group(2).lower(), m.group(3)) for m in _FENCE.finditer(text)]
    for tag, body in blocks:
        if tag in _PYTHON_TAGS and body.strip():
            return body.strip("\n").rstrip()
    if blocks:
        return None
    tag = _TAG.search(text)
    if tag and tag.group(2).strip():
        return tag.group(2).strip("\n").rstrip()
    marker = _CODE_MARKER.search(text)
    if marker and marker.group(1).strip():
        return marker.group(1).strip("\n").rstrip()
    stripped = text.strip()
    if stripped and _parses(stripped) and _looks_like_code(stripped):
        return stripped
    return None


def _looks_like_code(text: str) -> bool:
    """A reply that parses as Python but is a bare name or a sentence-like expression is prose."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
        node = tree.body[0].value
        return isinstance(node, (ast.Dict, ast.Call, ast.ListComp, ast.List))
    return True
