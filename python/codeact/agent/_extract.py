"""Finding the script to run in a model reply (SPEC §4 "Extraction"; docs/extraction.md).

The rule, in one sentence: outside ``<think>`` blocks (and nothing at all from a reply whose
thinking never closes), the script is every Python block of the reply's action form, in
reply order, joined by a blank line; the action form is the first of execution tags, fenced
blocks, a ``Code:`` marker, and the bare reply that is present. Blocks in another language
(shell, SQL, JSON, ...) never run; when nothing runnable is left, ``explain_no_code`` says why
and names the expected form.

Joining every Python block follows what the frameworks in the shared corpus ran: AutoGen 0.2
executes every code block of a reply in order, smolagents joins every ```` ```py ```` block;
the one-block replies of OpenHands, LlamaIndex and MINT come out the same under either rule.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..runtime._precheck import parsed, parses

__all__ = ("NO_CODE_FEEDBACK", "explain_no_code", "extract_code")

_EXPECTED_FORM = (
    'Reply with exactly one fenced block:\n```python\n# your code\n{"type": "final_result", "value": ...}\n```'
)

NO_CODE_FEEDBACK = "Your reply contained no Python code to run. " + _EXPECTED_FORM

# An opening or closing thinking tag, any case: <think>, </THINKING >.
_THINK_TAG = re.compile(r"<(?P<close>/?)[ \t]*(?P<name>think|thinking)[ \t]*>", re.I)
_QUOTES = "`\"'"
# A fence opener: ``` or ~~~ plus an info string whose first word is a language name (or
# empty), at the start of a line or after prose on the same line ("script  ```").
_OPEN = re.compile(r"(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[A-Za-z0-9_+#.-]*)(?P<rest>[^\n`]*)\n")
_TAGS = ("execute_ipython", "execute", "code", "python")
# The closing tag may be missing (a stop sequence cut it) or cut short (``</code`` then a line end).
_TAG = re.compile(
    r"<(?P<tag>execute_ipython|execute|code|python)>(?P<body>.*?)(?:</(?P=tag)(?:>|(?=\s|\Z))|\Z)", re.S | re.I
)
_OTHER_TAG = re.compile(r"<(execute_bash|execute_browse|bash|sql)>", re.I)
_CODE_MARKER = re.compile(r"(?:^|\n)[ \t]*Code:[ \t]*\n(.*?)(?:<end_code>?|\Z)", re.S)
_PYTHON = {"python", "py", "python3", "py3", "ipython", "pycon", "ipython3", ""}
# A fence on one line: ```python print('hi')``` (backticks only; the body holds none).
_INLINE = re.compile(r"(?<!`)(?P<fence>`{3,})(?P<inner>[^`\n]+?)(?P=fence)(?!`)")
# A fence line at the top of a block body: the second opener of a doubled one.
_STRAY_OPENER = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*[A-Za-z0-9_+#.-]*[ \t]*$")
_BARE_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*$")
# The prose line before a fence that labels it as program output.
_OUTPUT_LABEL = re.compile(
    r"\b(?:output|outputs|result|results|prints?|printed|stdout|returns?|displays?|shows?)\b[ \t*_]*:[ \t*_]*$", re.I
)
_CODE_WORDS = re.compile(r"\b(?:code|script|snippet|function|program that|following)\b", re.I)
_SHELL = {"sh", "bash", "shell", "zsh", "console", "shell-session", "powershell", "ps1", "cmd", "bat", "fish"}
_SQL = {"sql", "mysql", "postgresql", "postgres", "sqlite", "plsql", "tsql"}
_KNOWN_LANGS = (
    (_PYTHON - {""})
    | _SHELL
    | _SQL
    | {"json", "javascript", "js", "typescript", "ts", "text", "txt", "output", "html", "xml", "yaml", "toml", "csv"}
)
_SHELL_WORDS = re.compile(
    r"^\s*(?:\$ |!|%)?(?:pip3?|python3?|conda|apt(?:-get)?|brew|npm|yarn|cd|ls|cat|echo|curl|wget|git|mkdir|rm|cp|mv|"
    r"chmod|export|sudo|source|docker|make|uv)\b",
    re.M,
)


@dataclass(slots=True)
class _Block:
    lang: str  # lower-cased language word, "" for a bare fence
    body: str
    kind: str  # "python", "shell", "sql", "other", "unknown", "output" (program output shown after code)


# Monty's own parser, natively: ``ast.parse`` built a Python tree per block only to say yes,
# most of the extraction's cost on a long script (issue 21).
_parses = parses


def _looks_like_code(text: str) -> bool:
    """A reply that parses as Python but is a bare name or a sentence-like expression is prose."""
    tree = parsed(text)
    if tree is None:
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
    return (
        ("!" in body or "%" in body)
        and any(line.lstrip().startswith(("!", "%")) for line in body.splitlines() if line.strip())
        and not _parses(body)
    )


@functools.lru_cache(maxsize=64)
def _closer_patterns(fence_char: str, size: int) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """The three closer lines of ``_closer`` for a fence of ``size`` ``fence_char``
    characters: a full fence, a fence glued to a code line, a fence cut short (compiled
    once per fence shape, not per block)."""
    char = re.escape(fence_char)
    return (
        re.compile(rf"^[ \t]*{char}{{{size},}}[ \t]*(?:<end_code>?)?[ \t]*$", re.M),
        re.compile(rf"^[^\n]*?[^\s{char}](?P<run>{char}{{{size},}})[ \t]*(?:<end_code>?)?[ \t]*$", re.M),
        re.compile(rf"^[ \t]*{char}{{1,{size - 1}}}[ \t]*(?:<end_code>?)?[ \t]*$", re.M),
    )


def _closer(text: str, fence: str, start: int) -> tuple[int, int] | None:
    """(body end, resume position) of the fence opened by ``fence`` whose body starts at
    ``start``, or None when the block runs to the end of the reply.

    Three shapes end a block: a line holding only a fence at least as long as the opener
    (optionally followed by ``<end_code>``); a fence glued to the end of a code line
    (a code line ending in the closing fence); and a closer cut short (a line of one or two of the fence's
    characters, as a stop sequence leaves it), taken only when it reads as the end of the
    code: what comes before it parses, or the block cannot parse anyway.
    """
    full_closer, glued_closer, short_closer = _closer_patterns(fence[0], len(fence))
    full = full_closer.search(text, start)
    glued = _glued_search(glued_closer, text, fence[0] * len(fence), start)
    short = short_closer.search(text, start)
    candidates: list[tuple[int, int]] = []
    if full is not None:
        candidates.append((full.start(), full.end()))
    if glued is not None:
        candidates.append((glued.start("run"), glued.end()))
    if short is not None and (not candidates or short.start() < min(c[0] for c in candidates)):
        before = text[start : short.start()]
        whole = text[start : min(c[0] for c in candidates)] if candidates else text[start:]
        if _parses(before) or not _parses(whole):
            candidates.append((short.start(), short.end()))
    return min(candidates) if candidates else None


def _glued_search(pattern: re.Pattern[str], text: str, run: str, start: int) -> re.Match[str] | None:
    """``pattern.search(text, start)`` for the glued closer, tried only on the lines that
    hold ``run`` (the fence's characters, as many as it has): a line without them cannot
    match, and the pattern's lazy prefix costs a backtracking scan of every other line."""
    for line, _ in _lines_holding(text, run, start):
        if line >= start:  # a line that begins before ``start`` is not one ``search`` tries
            m = pattern.match(text, line)
            if m is not None:
                return m
    return None


def _lines_holding(text: str, needle: str, start: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of ``text`` holding ``needle`` at or after ``start``, in
    order: ``end`` is the line's newline, or the text's end."""
    at = text.find(needle, start)
    while at != -1:
        end = text.find("\n", at)
        if end == -1:
            end = len(text)
        yield text.rfind("\n", 0, at) + 1, end
        at = text.find(needle, end)


def _drop_stray_openers(body: str) -> str:
    """A doubled opener (a bare fence, then a ```` ```py ```` line) leaves fence lines at the
    top of the body: they are markup, never code."""
    lines = body.split("\n")
    dropped = False
    while lines and _STRAY_OPENER.match(lines[0]):
        lines.pop(0)
        dropped = True
    while dropped and lines and _BARE_FENCE.match(lines[-1]):  # its closer, inside ours (~~~ around ```)
        lines.pop()
    return "\n".join(lines)


def _output_label(text: str, opener_start: int) -> bool:
    """Whether the prose right before a fence (on its line, else the line above) labels what
    follows as program output: ``Output:``, ``Expected output:``, ``This prints:``."""
    last = text[:opener_start].rstrip().rsplit("\n", 1)[-1]
    return bool(_OUTPUT_LABEL.search(last)) and not _CODE_WORDS.search(last)


def _is_output_like(body: str) -> bool:
    """A bare block that holds only values (``42``, ``[1, 2]``, ``True``, ``Hello``): printed
    output, not a step. A dict with a ``"type"`` key is a tagged result and counts as code."""
    tree = parsed(body)
    if tree is None:
        return False
    if not tree.body:
        return False
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr) or not _is_value(stmt.value):
            return False
        if isinstance(stmt.value, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == "type" for k in stmt.value.keys
        ):
            return False
    return True


def _is_value(node: ast.expr) -> bool:
    if isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_is_value(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_value(k) for k in node.keys) and all(_is_value(v) for v in node.values)
    return False


def _inline(text: str, pos: int) -> tuple[re.Match[str], _Block] | None:
    """The next one-line fence (```` ```python print('hi')``` ````) from ``pos``, as a block."""
    for m in _inline_matches(text, pos):
        inner = m.group("inner").strip()
        word, _, after = inner.partition(" ")
        lang = word.lower()
        if after.strip() and lang in _KNOWN_LANGS:
            body = after.strip()
        elif _looks_like_code(inner):
            lang, body = "", inner
        else:
            continue  # prose between triple backticks ("use ``` to open a block and ``` to close it")
        return m, _Block(lang, body, _classify(lang, body))
    return None


def _inline_matches(text: str, pos: int) -> Iterator[re.Match[str]]:
    """``_INLINE.finditer(text, pos)``, run only on the lines that hold two runs of three
    backticks (a match never spans lines and needs both): the pattern's lookbehind makes
    ``re`` try every position of every other line."""
    for line, end in _lines_holding(text, "```", pos):
        if text.count("```", max(pos, line), end) >= 2:
            yield from _INLINE.finditer(text, max(pos, line), end)


def _fences(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    pos = 0
    seen_code = False
    while True:
        m = _OPEN.search(text, pos)
        inline = _inline(text, pos)
        if inline is not None and (m is None or inline[0].start() < m.start()):
            im, block = inline
            if block.kind == "python" and _output_label(text, im.start()) and block.lang == "":
                block.kind = "output"
            blocks.append(block)
            seen_code = seen_code or block.kind == "python"
            pos = im.end()
            continue
        if m is None:
            return blocks
        rest = m.group("rest").strip()
        lang = m.group("lang").lower()
        if rest and not re.match(r"^[\w{.#=\"' -]*$", rest):
            # "``` [STEP 2]:" or "```click("10"": not a language, so not a fence opener
            pos = m.end() - 1
            continue
        fence = m.group("fence")
        indent = _opener_indent(text, m.start())
        end = _closer(text, fence, m.end())
        body = _fence_body(text, m.end(), end, indent)
        # A closer inside a string literal is looked past only when text follows the closer:
        # with nothing after it, a longer block would hold the closer's characters (never
        # Python) or equal this one, so the usual reply costs no parse here.
        if end is not None and lang in _PYTHON and not _blank_from(text, end[1]) and not _parses(body):
            end, body = _past_closers_in_strings(text, fence, m.end(), end, indent)
        block = _Block(lang, body, _classify(lang, body))
        if lang == "" and block.kind in ("python", "unknown"):
            # Program output shown after the code ("Output:" then a bare fence with 42) is
            # not a step: joining it would change the script's result.
            if _output_label(text, m.start()) or (seen_code and _is_output_like(body)):
                block.kind = "output"
        blocks.append(block)
        seen_code = seen_code or block.kind == "python"
        if end is None:
            return blocks
        pos = end[1]


def _blank_from(text: str, pos: int) -> bool:
    """Whether ``text`` holds only blank space from ``pos`` on."""
    return not text[pos:].strip()


def _opener_indent(text: str, opener_start: int) -> int:
    """Columns of blank space before a fence opener that starts its line (3 for
    ``   ```python`` in a list item), 0 for one after prose on the same line."""
    before = text[text.rfind("\n", 0, opener_start) + 1 : opener_start]
    return len(before) if not before.strip(" \t") else 0


def _dedent(body: str, indent: int) -> str:
    """Each line without up to ``indent`` leading blanks: the fence's own indentation, removed
    as CommonMark does for an indented fence (a list item's code block); deeper indentation
    (the code's own) is kept."""
    if not indent:
        return body
    return "\n".join(line[min(indent, len(line) - len(line.lstrip(" \t"))) :] for line in body.split("\n"))


def _fence_body(text: str, start: int, end: tuple[int, int] | None, indent: int) -> str:
    body = text[start : end[0]] if end else text[start:]
    return _drop_stray_openers(_dedent(body.strip("\n"), indent)).strip("\n").rstrip()


_MAX_STRING_CLOSERS = 3
"""Closer lines inside string literals looked past before the first closer is kept."""


def _past_closers_in_strings(
    text: str, fence: str, start: int, end: tuple[int, int], indent: int
) -> tuple[tuple[int, int] | None, str]:
    """(end, body) of a Python block whose first closer does not leave code that parses: a
    closer line inside a string literal (``s = \"\"\"`` then a ```` ``` ```` line) does not end
    it when running to a later closer gives code that parses. Else the first closer stands."""
    cursor = end[1]
    for _ in range(_MAX_STRING_CLOSERS):
        later = _closer(text, fence, cursor)
        body = _fence_body(text, start, later, indent)
        if _parses(body):
            return later, body
        if later is None:
            break
        cursor = later[1]
    return end, _fence_body(text, start, end, indent)


def _tag_bodies(text: str) -> list[tuple[str, str]]:
    """(tag, body) of each execution tag. A closing tag inside a string literal
    (``<code>s = "</code>"</code>``) does not end the body when running to the next closing
    tag (up to ``_MAX_STRING_CLOSERS`` of them) gives code that parses and the first does not."""
    found: list[tuple[str, str]] = []
    pos = 0
    while (m := _TAG.search(text, pos)) is not None:
        tag = m.group("tag")
        closer = f"</{tag}>"
        body = _strip_inner_fence(_strip_cut_closer(m.group("body"), closer))
        pos = max(m.end(), pos + 1)
        if m.end() < len(text) and not _parses(body.strip("\n").rstrip()):
            later = re.compile(re.escape(closer), re.I)
            search_from = m.end()
            for _ in range(_MAX_STRING_CLOSERS):
                nxt = later.search(text, search_from)
                if nxt is None:
                    break
                longer = _strip_inner_fence(text[m.start("body") : nxt.start()])
                if _parses(longer.strip("\n").rstrip()):
                    body, pos = longer, nxt.end()
                    break
                search_from = nxt.end()
        found.append((tag, body))
    return found


def _strip_cut_closer(body: str, closer: str) -> str:
    """``body`` without a trailing prefix of ``closer`` (``</cod``, ``<end_``): what a stop
    sequence or a length limit leaves of a closing tag at the end of a reply."""
    tail = body.rstrip()
    for size in range(len(closer) - 1, 1, -1):
        if tail.endswith(closer[:size]):
            return tail[:-size].rstrip()
    return body


def _strip_inner_fence(body: str) -> str:
    inner = _fences(body)
    if inner and inner[0].kind in ("python", "unknown"):
        return inner[0].body
    return body.strip("`\n ").rstrip()


@dataclass(frozen=True, slots=True)
class _Thinking:
    """A reply with its thinking removed: ``outside`` is the text left, ``found`` whether the
    reply held thinking at all, ``unclosed`` whether a thinking block never closed."""

    outside: str
    found: bool
    unclosed: bool


def _quoted(text: str, start: int, end: int) -> bool:
    """Whether the tag at ``text[start:end]`` is quoted (```"</think>"```, ``'<think>'``,
    a backtick span): it is then text the model writes about, not markup."""
    before = text[start - 1] if start > 0 else ""
    after = text[end] if end < len(text) else ""
    return bool(before) and before in _QUOTES and after == before


def _split_thinking(text: str) -> _Thinking:
    """Removes every thinking block from ``text``.

    A block opens at ``<think>`` or ``<thinking>`` (any case) and closes only at the close
    tag of the same name at the same depth: an inner ``<think>`` nests, a close tag of the
    other name inside does not end it. A quoted tag (``"</think>"``, a backtick span) is
    prose. A close tag with no open block (a stray ``</think>`` after a block closed) means
    the earlier close was part of the thought: the block then runs up to the stray one (and a
    reply that opens with a close tag had its opener in the prompt: it thinks from its start). A
    block still open at the end of the reply is unclosed: the whole reply from its opener
    is thinking, and no code runs from the reply at all (``extract_code`` returns None).
    """
    regions: list[list[int]] = []  # [start, end] of each top-level block
    stack: list[str] = []
    for m in _THINK_TAG.finditer(text):
        if _quoted(text, m.start(), m.end()):
            continue
        name = m.group("name").lower()
        if not m.group("close"):
            if not stack:
                regions.append([m.start(), len(text)])
            stack.append(name)
        elif stack:
            if stack[-1] == name:
                stack.pop()
                if not stack:
                    regions[-1][1] = m.end()
        elif regions:
            regions[-1][1] = m.end()  # a stray close: the block's real end
        else:
            regions.append([0, m.end()])  # the opener was in the prompt (a DeepSeek-R1 template)
    if not regions:
        return _Thinking(text, found=False, unclosed=False)
    parts: list[str] = []
    pos = 0
    for start, end in regions:
        parts.append(text[pos:start])
        pos = end
    parts.append(text[pos:])
    return _Thinking("".join(parts), found=True, unclosed=bool(stack))


def _normalise(reply: str) -> str:
    """``\\r\\n`` and lone ``\\r`` line ends as ``\\n``: every rule below reads lines."""
    return reply.replace("\r\n", "\n").replace("\r", "\n")


def _analyse(reply: str) -> tuple[str | None, list[_Block], str]:
    """(script, non-Python blocks seen, text outside think blocks)."""
    thinking = _split_thinking(_normalise(reply))
    text = thinking.outside
    if thinking.unclosed:
        return None, [], text
    tags = _tag_bodies(text)
    if tags:
        blocks = [_Block(tag.lower(), b.strip("\n").rstrip(), "python") for tag, b in tags]
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
        return _strip_cut_closer(marker.group(1), "<end_code>").strip("\n").rstrip(), [], text
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

    1. Thinking is removed first: code inside it never runs. A block opens at ``<think>`` or
       ``<thinking>`` (any case) and closes only at the matching close tag at the same
       depth (an inner ``<think>`` nests); a quoted tag (``"</think>"``, in backticks) is
       prose; a stray close tag after a block closed extends that block up to it (the
       earlier close was quoted in the thought), and one before any opener makes the reply
       think from its start (the opener was in the prompt). A block never closed means
       no code runs from the reply at all, and ``explain_no_code`` says so.
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
    4. Malformed markup is read the way its writer meant it: ``\\r\\n`` line ends count as
       ``\\n``; a doubled opener (a bare fence, then a ```` ```py ```` line) is one opener; a
       closer cut short (``</code``, ``<end_co``, a line of two backticks) or glued to the
       last code line still closes; a one-line fence (```` ```python print('hi')``` ````) is
       a block. A fence indented in a list item loses that indentation from its lines (up to
       the opener's, as in CommonMark). A closer inside a string literal (a ```` ``` ```` line
       in a ``\"\"\"`` string, ``"</code>"``) does not end a Python block when the code up to
       it does not parse and the code up to a later closer does. A bare fence that shows
       program output (after a line such as ``Output:`` or ``This prints:``, or holding only
       values such as ``42`` after a Python block) is not joined: it would change the
       script's result. Whether a block parses is asked of the parser Monty itself runs
       (ruff's, natively): what parses there is what the interpreter accepts.

    Returns:
        The script, or None (then ``explain_no_code(reply)`` is the message to feed back).
    """
    return _analyse(reply)[0]


def explain_no_code(reply: str) -> str:
    """A short corrective message for a reply ``extract_code`` found no script in.

    It names what was found instead (a shell command, SQL, another language, code only
    inside ``<think>``, a ``<think>`` never closed) and the expected form;
    ``NO_CODE_FEEDBACK`` when nothing was found.
    """
    thinking = _split_thinking(_normalise(reply))
    if thinking.unclosed:
        return (
            "Your reply opened a <think> block and never closed it, so nothing in the reply ran: "
            "everything after an unclosed <think> is reasoning. Close the reasoning with </think> (the same "
            "tag you opened), then write the script after it. " + _EXPECTED_FORM
        )
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
    if thinking.found and _analyse(_THINK_TAG.sub("", reply))[0] is not None:
        return (
            "Your reply had code only inside <think>...</think>, and code there never runs. Put the script "
            "after the reasoning. " + _EXPECTED_FORM
        )
    return NO_CODE_FEEDBACK
