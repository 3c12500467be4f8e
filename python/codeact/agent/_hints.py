"""Hints that turn a script mistake into the fix to write (issue 12 "Hints").

Three moments:

- before a script runs (``precheck`` / ``script_hint``, defined in ``runtime._precheck`` and
  re-exported here): mistakes that would otherwise run tools first and fail after, or that
  the interpreter would explain in the wrong words;
- when a script ends without a tagged result (``tools_ran_note``): which tools it already
  called, since running it again calls them again;
- when a script raises (``explain_raised``): a ``NameError`` on a name an earlier script
  defined means variables do not persist between scripts.

Each hint is best effort: a script CPython cannot parse, or a host thread with too little
stack to parse safely, gets no hint (the interpreter reports what it finds).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..runtime._precheck import parse_script, precheck, script_hint

if TYPE_CHECKING:
    from ..events import Content

__all__ = ("explain_raised", "precheck", "script_hint", "tools_ran_note")

_NAME_ERROR = re.compile(r"NameError: name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")


def tools_ran_note(tools_ran: Iterable[str]) -> str:
    """The sentence added to a missing-result error when the script had called tools:
    which ones (with counts), and that a new script calling them again repeats them."""
    counts = Counter(tools_ran)
    if not counts:
        return ""
    listed = ", ".join(f"{name} ({n} call{'s' if n != 1 else ''})" for name, n in counts.items())
    return (
        f" This script already called: {listed}; running it again calls those tools again (and repeats any "
        "side effects). Use what they returned (print it, or put it in the result) and end the script with the "
        "tagged result dict as its last line."
    )


def _monty_fix(message: str, transcript: Sequence[Content], runtime: Any) -> str:
    from ..runtime._check import explain_failure
    from ..runtime.monty import MontyRuntime

    if not isinstance(runtime, MontyRuntime) or not runtime.check_scripts:
        return message
    replies = [c.text for c in transcript if c.role == "model"]
    if not replies or not replies[-1]:
        return message
    from ._extract import extract_code

    script = extract_code(replies[-1])
    fix = explain_failure(script, message, functions_style=runtime.tool_style == "functions") if script else None
    return f"{message}\n{fix}" if fix else message


def _defined_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def explain_raised(
    message: str, transcript: Sequence[Content], *, persist_namespace: bool = False, runtime: Any = None
) -> str:
    """``message`` (a script's traceback) with a hint appended when it is a ``NameError`` on a
    name an earlier script defined (variables do not persist between scripts), or, on a
    ``MontyRuntime`` whose check is on, when Monty refused a construct the check leaves to it
    (``runtime._check.explain_failure``: the fix for each such construct).

    Args:
        message: the traceback text fed back to the model.
        transcript: the conversation so far; its last model reply holds the script that
            raised, the model replies before it the earlier scripts.
        persist_namespace: the agent keeps variables between scripts; then no hint is added.
        runtime: the agent's runtime (None: no Monty hint).
    """
    message = _monty_fix(message, transcript, runtime)
    if persist_namespace:
        return message
    found = _NAME_ERROR.findall(message)
    if not found:
        return message
    name = found[-1]  # the last NameError is the one that ended the script
    from ._extract import extract_code

    replies = [c.text for c in transcript if c.role == "model"][:-1]
    for reply in reversed(replies):
        script = extract_code(reply) if reply else None
        tree = parse_script(script) if script else None
        if tree is not None and name in _defined_names(tree):
            return (
                f"{message}\nHint: `{name}` was defined by an earlier script, and variables do not persist "
                "between scripts: each script starts with an empty namespace. Define it again in this script "
                "(call the tool again, or copy the value from the earlier observation)."
            )
    return message
