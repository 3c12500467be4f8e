"""Finding the script to run in a model reply (SPEC §4 "Extraction"; docs/extraction.md).

The rule, in one sentence: outside ``<think>`` blocks, the script is every Python block of
the reply's action form, in reply order, joined by a blank line; the action form is the
first of execution tags, fenced blocks, a ``Code:`` marker, and the bare reply that is
present. Blocks in another language (shell, SQL, JSON, ...) never run; when nothing
runnable is left, ``explain_no_code`` says why and names the expected form.

Joining every Python block follows what the frameworks in the shared corpus ran: AutoGen 0.2
executes every code block of a reply in order, smolagents joins every ```` ```py ```` block;
the one-block replies of OpenHands, LlamaIndex and MINT come out the same under either rule.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = ("NO_CODE_FEEDBACK", "explain_no_code", "extract_code")

_EXPECTED_FORM = (
    'Reply with exactly one fenced block:\n```python\n# your code\n{"type": "final_result", "value": ...}\n```'
)

NO_CODE_FEEDBACK = "Your reply contained no Python code to run. " + _EXPECTED_FORM

# <think>...</think>; an unterminated one ends where a smolagents-style action starts
# (a line opening with "Thought:" or "Code:") or else runs to the end of the reply.
_THINK = re.compile(
    r"<(think|thinking)>.*?(?:</\1>|(?=^[ \t]*(?:Thought|Code):)|\Z)",
    re.S | re.I | re.M,
)
# A fence opener: ``` or ~~~ plus an info string whose first word is a language name (or
# empty), at the start of a line or after prose on the same line ("script  ```").
_OPEN = re.compile(r"(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[A-Za-z0-9_+#.-]*)(?P<rest>[^\n`]*)\n")
_TAGS = ("execute_ipython", "execute", "code", "python")
_TAG = re.compile(r"<(?P<tag>execute_ipython|execute|code|python)>(?P<body>.*?)(?:</(?P=tag)>|\Z)", re.S | re.I)
_OTHER_TAG = re.compile(r"<(execute_bash|execute_browse|bash|sql)>", re.I)
_CODE_MARKER = re.compile(r"(?:^|\n)[ \t]*Code:[ \t]*\n(.*?)(?:<end_code>|\Z)", re.S)
_PYTHON = {"python", "py", "python3", "py3", "ipython", "pycon", "ipython3", ""}
_SHELL = {"sh", "bash", "shell", "zsh", "console", "shell-session", "powershell", "ps1", "cmd", "bat", "fish"}
_SQL = {"sql", "mysql", "postgresql", "postgres", "sqlite", "plsql", "tsql"}
_SHELL_WORDS = re.compile(
    r"^\s*(?:\$ |!|%)?(?:pip3?|python3?|conda|apt(?:-get)?|brew|npm|yarn|cd|ls|cat|echo|curl|wget|git|mkdir|rm|cp|mv|"
    r"chmod|export|sudo|source|docker|make|uv)\b",
    re.M,
)


@dataclass(slots=True)
class _Block:
    lang: str  # lower-cased language word, "" for a bare fence
    body: str
    kind: str  # "python", "shell", "sql", "other"


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _looks_like_code(text: str) -> bool:
    """A reply that parses as Python but is a bare name or a sentence-like expression is prose."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
        node = tree.body[0].value
        return isinstance(node, (ast.Dict, ast.Call, ast.ListComp, ast.List))
    return True


def _classify(lang: str, body: str) -> str:
    if lang in _SHELL:
        return "shell"
    if lang in _SQL:
        return "sql"
    if lang in _PYTHON:
        if lang == "" and not _parses(body):
            if _SHELL_WORDS.search(body):
                return "shell"
            return "unknown"  # a bare block that does not parse: Python with a mistake, or not code
        if _is_magic(body):
            return "shell"
        return "python"
    return "other"


def _is_magic(body: str) -> bool:
    """IPython shell escapes and magics (``!pip install``, ``%pip install``) that do not parse."""
    return not _parses(body) and any(line.lstrip().startswith(("!", "%")) for line in body.splitlines() if line.strip())


def _fences(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    pos = 0
    while True:
        m = _OPEN.search(text, pos)
        if m is None:
            return blocks
        rest = m.group("rest").strip()
        lang = m.group("lang").lower()
        if rest and not re.match(r"^[\w{.#=\"' -]*$", rest):
            # "``` [STEP 2]:" or "```click("10"": not a language, so not a fence opener
            pos = m.end() - 1
            continue
        fence = m.group("fence")
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*(?:<end_code>)?[ \t]*$", re.M)
        c = close.search(text, m.end())
        body = text[m.end() : c.start()] if c else text[m.end() :]
        body = body.strip("\n").rstrip()
        blocks.append(_Block(lang, body, _classify(lang, body)))
        if c is None:
            return blocks
        pos = c.end()


def _strip_inner_fence(body: str) -> str:
    inner = _fences(body)
    if inner and inner[0].kind in ("python", "unknown"):
        return inner[0].body
    return body.strip("`\n ").rstrip()


def _analyse(reply: str) -> tuple[str | None, list[_Block], str]:
    """(script, non-Python blocks seen, text outside think blocks)."""
    text = _THINK.sub("", reply)
    tags = list(_TAG.finditer(text))
    if tags:
        bodies = [_strip_inner_fence(t.group("body")) for t in tags]
        blocks = [
            _Block(t.group("tag").lower(), b.strip("\n").rstrip(), "python") for t, b in zip(tags, bodies, strict=True)
        ]
        for b in blocks:
            if _is_magic(b.body):
                b.kind = "shell"
        python = [b.body for b in blocks if b.kind == "python" and b.body.strip()]
        return ("\n\n".join(python) if python else None), [b for b in blocks if b.kind != "python"], text
    fences = _fences(text)
    if fences:
        python = [b.body for b in fences if b.kind == "python" and b.body.strip()]
        if not python:
            python = [b.body for b in fences if b.kind == "unknown" and b.body.strip()][:1]
        return ("\n\n".join(python) if python else None), [b for b in fences if b.kind != "python"], text
    marker = _CODE_MARKER.search(text)
    if marker and marker.group(1).strip():
        return marker.group(1).strip("\n").rstrip(), [], text
    other = [
        _Block(f"<{m.group(1).lower()}>", "", "shell" if "bash" in m.group(1).lower() else "other")
        for m in _OTHER_TAG.finditer(text)
    ]
    stripped = text.strip()
    if stripped and not other and _parses(stripped) and _looks_like_code(stripped):
        return stripped, [], text
    return None, other, text


def extract_code(reply: str) -> str | None:
    """Returns the Python script to run from ``reply``, or None when it holds none.

    Rule (docs/extraction.md has it checked reply by reply against the shared corpus):

    1. ``<think>...</think>`` blocks are removed first: code inside them never runs. An
       unterminated ``<think>`` ends at a line opening with ``Thought:`` or ``Code:`` (the
       smolagents action that follows cut-off reasoning), else at the end of the reply.
    2. The action form is the first present of: execution tags (``<execute>``,
       ``<execute_ipython>``, ``<code>``, ``<python>``; the closing tag may be missing, as
       when a stop sequence cut it), fenced blocks (```` ``` ```` or ``~~~``, terminated or
       running to the end, the opener at a line start or after prose), a ``Code:`` marker
       (up to ``<end_code>``), and the bare reply when it parses as Python and is not prose.
    3. The script is every Python block of that form, in order, joined by a blank line.
       Fences tagged ``python`` / ``py`` / ``python3`` run as written; a bare fence runs when
       it parses (or, when nothing else is left, so its syntax error is fed back); fences
       in other languages (``bash``, ``sh``, ``sql``, ``json``, ...), IPython ``!`` / ``%``
       lines and shell-like bare blocks never run.

    Returns:
        The script, or None (then ``explain_no_code(reply)`` is the message to feed back).
    """
    return _analyse(reply)[0]


def explain_no_code(reply: str) -> str:
    """A short corrective message for a reply ``extract_code`` found no script in.

    It names what was found instead (a shell command, SQL, another language, code only
    inside ``<think>``) and the expected form; ``NO_CODE_FEEDBACK`` when nothing was found.
    """
    _script, others, _text = _analyse(reply)
    kinds = {b.kind for b in others}
    if "shell" in kinds:
        return (
            "Your reply held a shell command, which cannot run here: there is no shell, no subprocess and "
            "nothing can be installed. Write the step in Python instead. " + _EXPECTED_FORM
        )
    if "sql" in kinds:
        return (
            "Your reply held a SQL query, which cannot run here: only Python runs (call a tool to query a "
            "database). " + _EXPECTED_FORM
        )
    langs = sorted({b.lang for b in others if b.kind == "other" and b.lang})
    if langs:
        return f"Your reply held {', '.join(langs)} content, which is not Python and does not run. " + _EXPECTED_FORM
    if _THINK.search(reply) and _analyse(re.sub(r"</?think(?:ing)?>", "", reply, flags=re.I))[0] is not None:
        return (
            "Your reply had code only inside <think>...</think>, and code there never runs. Put the script "
            "after the reasoning. " + _EXPECTED_FORM
        )
    return NO_CODE_FEEDBACK
