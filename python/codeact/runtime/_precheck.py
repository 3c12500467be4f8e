"""The script pre-check: mistakes refused before a script runs, with the fix to write.

``precheck`` finds what would otherwise run tools first and fail after (``await
call_tool(...)`` on a runtime where ``call_tool`` is synchronous) or what the interpreter
would explain in the wrong words (``from tools import search`` is not a missing third-party
package: tools are reached through ``call_tool``); ``script_hint`` reads the tool style and
``await`` support from a runtime. Used by the agent loop and by ``run_script``.

Best effort: a script CPython cannot parse, or a host thread with too little stack to parse
safely, gets no hint (the interpreter reports what it finds).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Sequence
from typing import Any

from .._monty import parses as _native_parses

__all__ = ("parse_script", "parsed", "parses", "precheck", "script_hint")

_MIN_STACK = 6 * 1024 * 1024  # bytes of thread stack left before CPython's parser is run here
_TOOL_MODULES = frozenset(
    {"tools", "tool", "functions", "call_tool", "codeact", "default_api", "api", "agent_tools", "available_tools"}
)
_AWAIT_HINT = re.compile(r"\bawait\b|\bgather\s*\(")
_IMPORT_HINT = re.compile(r"^[ \t]*(?:from|import)[ \t]", re.M)
_NAME_ERROR = re.compile(r"NameError: name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")


@functools.lru_cache(maxsize=8)
def parsed(script: str) -> ast.Module | None:
    """``ast.parse(script)``, or None when CPython cannot parse it; cached by script text, so
    the agent's pre-check and the runtime's subset check of one script parse it once. The
    tree is shared: callers must not change it. The caller makes sure the thread has the
    stack to parse (``parse_script``, ``_check.check_script_safely``)."""
    try:
        return ast.parse(script)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def parses(script: str) -> bool:
    """Whether ``script`` parses with the parser Monty itself uses (ruff's, natively, the GIL
    released): what the interpreter would accept, without the Python object per node
    ``ast.parse`` builds (about 30 times as costly on a long script). On a thread with a
    short stack, a source nested past Monty's bound reads as not parsing. A script holding
    lone surrogates (no UTF-8 form for the native parser) is asked of CPython's parser."""
    try:
        return _native_parses(script)
    except UnicodeEncodeError:
        return parsed(script) is not None


def parse_script(script: str) -> ast.Module | None:
    """``ast.parse(script)`` (shared, see ``parsed``), or None when CPython cannot parse it or
    too little thread stack is left to parse it safely."""
    try:
        from .._monty import remaining_stack

        if (remaining_stack() or _MIN_STACK) < _MIN_STACK:
            return None
    except ImportError:  # pragma: no cover - the native module ships with the package
        pass
    return parsed(script)


def _callee(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return None


def _gather_aliases(tree: ast.AST) -> set[str]:
    """Other names the script gives ``asyncio.gather``: ``from asyncio import gather as g``,
    ``g = asyncio.gather``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "asyncio":
            names.update(a.asname for a in node.names if a.name == "gather" and a.asname)
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Name, ast.Attribute)):
            value = node.value
            if (value.id if isinstance(value, ast.Name) else value.attr) == "gather":
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _tool_call_form(tool_style: str, name: str) -> str:
    if tool_style == "functions":
        return f"{name}(...)"
    return f'call_tool("{name}", {{...}})'


def precheck(
    script: str,
    *,
    tools: Sequence[str],
    tool_style: str = "call_tool",
    await_supported: bool = False,
    importable: Sequence[str] | None = None,
) -> str | None:
    """What to tell the model instead of running ``script``, or None to run it.

    Args:
        script: the script about to start.
        tools: the names of the tools the script may call.
        tool_style: ``"call_tool"`` or ``"functions"`` (tools are bare functions).
        await_supported: the runtime lets a script ``await`` tool calls (``asyncio.gather``
            over several calls; ``RuntimeCapabilities.supports_await``). When False,
            ``await call_tool(...)`` would run the tool and then fail on the result, so it is
            refused before anything runs.
        importable: the modules a script may import (``RuntimeCapabilities.importable_modules``;
            None: any installed one). When a tool import is refused, every other import of a
            module outside them is named in the same message, with the list.

    Returns:
        A message naming each problem (with its line) and what to write instead; nothing
        has run when it is given.
    """
    # A substring test first: the patterns' word boundaries make ``re`` try every position.
    want_await = (
        not await_supported and ("await" in script or "gather" in script) and _AWAIT_HINT.search(script) is not None
    )
    want_import = ("import" in script or "from" in script) and _IMPORT_HINT.search(script) is not None
    if not (want_await or want_import):
        return None
    tree = parse_script(script)
    if tree is None:
        return None
    callables = {"call_tool", *tools} if tool_style == "functions" else {"call_tool"}
    gathers = {"gather", *_gather_aliases(tree)}
    problems: list[str] = []
    for node in ast.walk(tree):
        if want_await and isinstance(node, ast.Await):
            name = _callee(node.value)
            if name in callables:
                problems.append(
                    f"line {node.lineno}: `await {name}(...)`: tool calls are synchronous here and return the "
                    f"tool's result directly; write `result = {name}(...)` without `await`"
                )
            elif name in gathers:
                problems.append(
                    f"line {node.lineno}: `await asyncio.gather(...)`: tool calls cannot run concurrently here; "
                    "call the tools one after another, each without `await`"
                )
        elif want_import and isinstance(node, (ast.Import, ast.ImportFrom)):
            problem = _import_problem(node, tools, tool_style)
            if problem is not None:
                problems.append(problem)
    if not problems:
        return None
    if importable is not None and any("cannot be imported" in p for p in problems):
        problems += _unavailable_imports(tree, set(importable), set(tools))
    return (
        "The script was not run (no tool was called):\n"
        + "\n".join(f"- {p}" for p in sorted(set(problems), key=_line_key))
        + "\nFix it and send the whole script again."
    )


def _unavailable_imports(tree: ast.Module, importable: set[str], tools: set[str]) -> list[str]:
    """One problem per import of a module outside ``importable`` (tool imports aside: they
    have their own), so that one answer fixes every import of the script."""
    out = []
    listed = ", ".join(sorted(importable))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots = [node.module.split(".")[0]]
        elif isinstance(node, ast.Import):
            roots = [a.name.split(".")[0] for a in node.names]
        else:
            continue
        for root in roots:
            if root in importable or root in _TOOL_MODULES or root in tools or root == "__future__":
                continue
            out.append(
                f"line {node.lineno}: `{root}` cannot be imported here (ModuleNotFoundError); the importable "
                f"modules are: {listed}"
            )
    return out


def _line_key(problem: str) -> tuple[int, str]:
    match = re.match(r"line (\d+)", problem)
    return (int(match.group(1)) if match else 0, problem)


def _import_problem(node: ast.Import | ast.ImportFrom, tools: Sequence[str], tool_style: str) -> str | None:
    """``import tools`` / ``from tools import search`` / ``import search`` (a tool's name): tools
    are reached through ``call_tool`` (or, in the functions style, are already defined)."""
    roster = set(tools)
    if isinstance(node, ast.ImportFrom):
        if node.level or not node.module:
            return None
        top = node.module.split(".")[0]
        names = [a.name for a in node.names]
        if top in sys.stdlib_module_names:
            return None
        if top not in _TOOL_MODULES and top not in roster and not any(n in roster or n == "call_tool" for n in names):
            return None
        written = f"from {node.module} import {', '.join(names)}"
        wanted = [n for n in names if n in roster] or [n for n in (top,) if n in roster]
    else:
        mods = [a.name.split(".")[0] for a in node.names]
        hit = [m for m in mods if (m in _TOOL_MODULES or m in roster) and m not in sys.stdlib_module_names]
        if not hit:
            return None
        written = f"import {', '.join(a.name for a in node.names)}"
        wanted = [m for m in hit if m in roster]
    example = _tool_call_form(tool_style, wanted[0] if wanted else (tools[0] if tools else "tool_name"))
    if tool_style == "functions":
        how = f"the tools are already defined as functions in every script: call them directly, e.g. `{example}`"
    else:
        how = f'call a tool with the built-in `call_tool("name", {{...}})`, e.g. `{example}`'
    return f"line {node.lineno}: `{written}`: tools are not a package and cannot be imported; {how}, with no import" + (
        f" (available tools: {', '.join(sorted(roster))})" if roster else " (no tools are available)"
    )


def script_hint(script: str, runtime: Any, tools: Sequence[str]) -> str | None:
    """``precheck`` with the tool style and ``await`` support read from ``runtime``
    (``runtime.tool_style``, ``runtime.capabilities().supports_await``; absent means
    ``"call_tool"`` and False). None without looking when the runtime's checks are turned
    off (``check_scripts=False``)."""
    if getattr(runtime, "check_scripts", True) is False:
        return None
    try:
        capabilities = runtime.capabilities()
        await_supported = bool(getattr(capabilities, "supports_await", False))
        importable = getattr(capabilities, "importable_modules", None)
    except Exception:  # a runtime whose capabilities() fails gets the strict reading
        await_supported, importable = False, None
    style = getattr(runtime, "tool_style", "call_tool")
    return precheck(
        script,
        tools=tools,
        tool_style=style if isinstance(style, str) else "call_tool",
        await_supported=await_supported,
        importable=importable,
    )
