"""The type check before a script runs: tool calls that cannot succeed, found with ty.

``check_tool_calls`` checks a whole script against stubs of the tools it can see
(``_stubs.tool_stubs``) with ``monty-type-checking`` (the ty-based checker of the pinned Monty
release, ``codeact._monty.type_check``: native, pooled checkers, the GIL released) and keeps
only what a tool call gets wrong:

- an unknown tool: ``call_tool("nme", ...)`` with a literal name no tool has, or, in the
  ``functions`` style, a bare call of a name the script never defines that is close to a
  tool's name;
- an unknown or missing argument;
- a wrong argument type where both sides are known (a single type the schema's type does not
  take: a value whose type ty sees as a union, or partly unknown, is let through, since the
  value that runs may be the member that fits).

Every other diagnostic is dropped: ty's view of a value may be wider than what runs, and the
checker also flags standard-library surface Monty lacks (the subset check covers that). A call
whose tool name or argument dict is not a literal (``call_tool(name, args)``), and any call
inside a ``try`` block that handles exceptions, is not gated: what it does is decided when it
runs. A checker that fails gives no verdict (the script runs).

Results are cached by script text and stubs (``_CACHE_SIZE`` entries, least recently used
first out), like the subset check's.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._precheck import parse_script
from ._stubs import ANY_TOOL, FINAL_ANSWER, ToolSignature, call_tool_alias, tool_signatures, tool_stubs

if TYPE_CHECKING:
    from ._render import Tool

__all__ = ("ToolCallError", "check_tool_calls", "clear_type_check_cache", "format_tool_call_errors")

_CACHE_SIZE = 256
_GATING = frozenset(
    {
        "invalid-argument-type",
        "missing-argument",
        "unknown-argument",
        "too-many-positional-arguments",
        "parameter-already-assigned",
        "no-matching-overload",
        "invalid-key",
        "missing-typed-dict-key",
    }
)
"""ty's rule names that say a call's arguments do not fit its signature."""
_AT_CALL = frozenset({"missing-argument", "no-matching-overload"})
"""Rules ty reports at the call itself rather than at an argument."""
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True, slots=True)
class ToolCallError:
    """One tool call that cannot succeed.

    Attributes:
        line: 1-based line of the call.
        column: 1-based column (characters) of what is wrong.
        tool: the tool's name as the script wrote it.
        message: what is wrong.
        expected: the call the tool takes (``ToolSignature.call_tool_form`` / ``function_form``),
            or the tools there are for an unknown one.
    """

    line: int
    column: int
    tool: str
    message: str
    expected: str

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}: {self.message}; expected: {self.expected}"


def format_tool_call_errors(errors: Sequence[ToolCallError]) -> str:
    """The corrective text fed back for ``errors`` (one line each), in the subset check's
    "nothing was executed" form."""
    head = (
        "TypeError: a tool call in the script cannot succeed; nothing was executed (no tool was called). "
        "Fix each of these and send the whole script again:"
    )
    return "\n".join([head, *(f"- {e}" for e in errors)])


@dataclass(slots=True)
class _Site:
    """A tool call in the script."""

    node: ast.Call
    tool: str | None  # the literal tool name, None when not a literal
    style: str  # "call_tool" or "function"
    checked: bool  # not in a try body that handles exceptions
    any_tool: bool  # checked against ANY_TOOL: a name or argument dict that is not a literal
    swap: str | None = None  # the stub name ``call_tool`` is replaced by before checking


_cache: OrderedDict[tuple[str, str, bool, bool], tuple[ToolCallError, ...]] = OrderedDict()
_cache_lock = threading.Lock()


def clear_type_check_cache() -> None:
    """Forgets every stored verdict."""
    with _cache_lock:
        _cache.clear()


def check_tool_calls(
    script: str,
    tools: Sequence[Tool],
    *,
    functions_style: bool = False,
    namespace: Iterable[str] | None = (),
) -> tuple[ToolCallError, ...]:
    """The tool calls in ``script`` that cannot succeed (empty: run it).

    Args:
        script: the script about to start.
        tools: the tools it can see (their ``parameters`` JSON schemas give the types).
        functions_style: tools are also bare functions (``tool_style="functions"``).
        namespace: names an earlier script left (``persist_namespace``); None when they are
            not known (then a bare call of an undefined name is never taken for a misspelt
            tool).

    Never raises for a script: one CPython cannot parse, or one the checker fails on, gives
    no errors (the interpreter reports what it finds).
    """
    if not tools and not functions_style and "call_tool" not in script:
        return ()
    signatures = tool_signatures(tools)
    names = None if namespace is None else sorted(set(namespace))
    stubs = tool_stubs(signatures, functions_style=functions_style, namespace=names or ())
    key = (script, stubs, functions_style, names is None)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    found = _check(script, signatures, stubs, functions_style=functions_style, namespace_known=names is not None)
    with _cache_lock:
        _cache[key] = found
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return found


def _check(
    script: str, signatures: dict[str, ToolSignature], stubs: str, *, functions_style: bool, namespace_known: bool
) -> tuple[ToolCallError, ...]:
    tree = parse_script(script)
    if tree is None:
        return ()
    bound = _bound_names(tree)
    sites = _tool_sites(tree, signatures, functions_style, bound)
    if not sites and not functions_style:
        return ()
    lines = script.splitlines(keepends=True)
    errors: list[ToolCallError] = []
    for site in sites:
        if site.checked and site.style == "call_tool" and site.tool is not None and site.tool not in signatures:
            errors.append(
                ToolCallError(
                    site.node.lineno,
                    _col(lines, site.node.lineno, site.node.col_offset) + 1,
                    site.tool,
                    f"unknown tool {site.tool!r}",
                    _known_tools(site.tool, signatures),
                )
            )
    if functions_style and namespace_known:
        errors += _unknown_functions(tree, lines, signatures, bound)
    aliases = {name: call_tool_alias(i) for i, name in enumerate(signatures)}
    for site in sites:
        if site.style == "call_tool":
            site.swap = ANY_TOOL if site.any_tool or site.tool is None else aliases[site.tool]
    swaps = [(s.node.func, s.swap) for s in sites if s.swap is not None]
    if swaps:
        script = _swap_names(script, lines, swaps)
    raw = _run_checker(script, stubs)
    if raw:
        errors += _gating(json.loads(raw), tree, lines, sites, signatures)
    seen: set[tuple[int, int, str]] = set()
    unique = []
    for e in sorted(errors, key=lambda e: (e.line, e.column)):
        if (e.line, e.column, e.message) not in seen:
            seen.add((e.line, e.column, e.message))
            unique.append(e)
    return tuple(unique)


CHECK_TIMEOUT = 2.0
"""Seconds a check may take before the script runs without a verdict. ty 0.0.14 does not
settle on some scripts (a ``functools.partial`` rebound in a class body inside a loop, Monty's
own ``functools__partial.py``) and the crate offers no way to cancel a check: such a check is
left running on its own daemon thread, and while ``_MAX_STUCK`` of them run, scripts are not
checked at all (no verdict), so a hostile script costs at most that many busy threads."""
_MAX_STUCK = 2
_stuck = 0
_stuck_lock = threading.Lock()


def _run_checker(script: str, stubs: str) -> str | None:
    """The native checker's JSON for ``script``, or None (clean, failed, or over
    ``CHECK_TIMEOUT``)."""
    global _stuck
    from .._monty import type_check

    with _stuck_lock:
        if _stuck >= _MAX_STUCK:
            return None
    done = threading.Event()
    answer: list[str | None] = [None]

    def work() -> None:
        global _stuck
        try:
            answer[0] = type_check(script, stubs)
        except Exception:  # the checker failed: no verdict
            answer[0] = None
        finally:
            with _stuck_lock:
                if done.is_set():  # it had been given up on: no longer stuck
                    _stuck -= 1
                done.set()

    threading.Thread(target=work, name="codeact-type-check", daemon=True).start()
    if done.wait(CHECK_TIMEOUT):
        return answer[0]
    with _stuck_lock:
        if done.is_set():  # finished just now
            return answer[0]
        done.set()
        _stuck += 1
    return None


def _col(lines: list[str], lineno: int, byte_col: int) -> int:
    """0-based character column from ast's UTF-8 byte column."""
    if lineno - 1 >= len(lines):
        return byte_col
    return len(lines[lineno - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def _guarded(tree: ast.Module) -> set[int]:
    """The ids of the nodes inside a ``try`` body that handles exceptions."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try | getattr(ast, "TryStar", ast.Try)) and node.handlers:
            for stmt in node.body:
                guarded.update(id(n) for n in ast.walk(stmt))
    return guarded


def _bound_names(tree: ast.Module) -> set[str] | None:
    """Every name the script binds anywhere (assignments, definitions, imports, parameters,
    ``global``), or None after a star import (any name may be bound)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return bound


def _tool_sites(
    tree: ast.Module, signatures: dict[str, ToolSignature], functions_style: bool, bound: set[str] | None
) -> list[_Site]:
    """The script's tool calls: every ``call_tool(...)``, and in the ``functions`` style every
    bare call of a tool's name the script does not bind itself (an imported ``partial`` is
    functools', not a tool; after a star import no bare call is taken for a tool)."""
    sites: list[_Site] = []
    guarded = _guarded(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        name = node.func.id
        free = id(node) not in guarded
        if name == "call_tool":
            first = node.args[0] if node.args else None
            tool = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
            literal_args = (
                not node.keywords
                and tool is not None
                and not any(isinstance(a, ast.Starred) for a in node.args)
                and (
                    len(node.args) == 1
                    or (
                        len(node.args) == 2
                        and isinstance(node.args[1], ast.Dict)
                        and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.args[1].keys)
                    )
                )
            )
            sites.append(_Site(node, tool, "call_tool", free, not literal_args or tool not in signatures))
        elif functions_style and name in signatures and bound is not None and name not in bound:
            sites.append(_Site(node, name, "function", free, False))
    return sites


def _swap_names(script: str, lines: list[str], swaps: list[tuple[ast.expr, str]]) -> str:
    """``script`` with the ``call_tool`` name of each call in ``swaps`` replaced by its stub
    name (as long: every position holds)."""
    out = list(lines)
    for func, new in sorted(swaps, key=lambda f: (f[0].lineno, f[0].col_offset), reverse=True):
        i = func.lineno - 1
        col = _col(lines, func.lineno, func.col_offset)
        line = out[i]
        if line[col : col + len("call_tool")] == "call_tool":
            out[i] = line[:col] + new + line[col + len("call_tool") :]
    return "".join(out)


def _known_tools(name: str, signatures: dict[str, ToolSignature]) -> str:
    close = difflib.get_close_matches(name, list(signatures), n=1, cutoff=0.6)
    if close:
        sig = signatures[close[0]]
        return f"did you mean {sig.call_tool_form()}?"
    listed = ", ".join(sorted(signatures)) or "(none)"
    return f"one of the tools: {listed}"


def _unknown_functions(
    tree: ast.Module, lines: list[str], signatures: dict[str, ToolSignature], bound: set[str] | None
) -> list[ToolCallError]:
    """Bare calls of a name the script never binds, close to a tool's name (a misspelt tool)."""
    if bound is None:
        return []
    tools = [n for n in signatures if n.isidentifier()]
    guarded = _guarded(tree)
    errors = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)) or id(node) in guarded:
            continue
        name = node.func.id
        if name in bound or name in signatures or name in _BUILTINS or name in ("call_tool", ANY_TOOL, FINAL_ANSWER):
            continue
        close = difflib.get_close_matches(name, tools, n=1, cutoff=0.8)
        if close:
            errors.append(
                ToolCallError(
                    node.lineno,
                    _col(lines, node.lineno, node.col_offset) + 1,
                    name,
                    f"unknown tool {name!r} (no tool or function of that name)",
                    f"did you mean {signatures[close[0]].function_form()}?",
                )
            )
    return errors


def _gating(
    diagnostics: Any, tree: ast.Module, lines: list[str], sites: list[_Site], signatures: dict[str, ToolSignature]
) -> list[ToolCallError]:
    """The diagnostics that fall on the arguments of a checked tool call."""
    by_call = {id(s.node): s for s in sites}
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    errors = []
    for d in diagnostics if isinstance(diagnostics, list) else ():
        code = d.get("code") or d.get("name")
        where = d.get("location") or {}
        row, column = where.get("row"), where.get("column")
        if code not in _GATING or not isinstance(row, int) or not isinstance(column, int):
            continue
        message = str(d.get("message") or code)
        if code == "invalid-argument-type" and not _definite(message):
            continue
        site = None
        if code in _AT_CALL:  # said at the call itself (``get_order()``: missing-argument)
            site = next((by_call[id(c)] for c in _calls_at(calls, lines, row, column) if id(c) in by_call), None)
        if site is None:
            call = _owning_call(calls, lines, row, column)
            site = by_call.get(id(call)) if call is not None else None
        if site is None or not site.checked or site.any_tool or site.tool is None:
            continue
        sig = signatures.get(site.tool)
        if sig is None:
            continue
        expected = sig.call_tool_form() if site.style == "call_tool" else sig.function_form()
        errors.append(ToolCallError(row, column, site.tool, _plain(message, site), expected))
    return errors


def _calls_at(calls: list[ast.Call], lines: list[str], row: int, column: int) -> list[ast.Call]:
    return [c for c in calls if c.lineno == row and _col(lines, row, c.col_offset) == column - 1]


def _definite(message: str) -> bool:
    """Whether an argument-type message names a found type that cannot fit: one type, fully
    known (``found `str | None``` or ``found `list[Unknown]``` may be the member that fits).
    ty says ``found `T``` of a parameter and ``value of type `T``` of a ``TypedDict`` key."""
    for marker in ("found `", "value of type `"):
        _head, sep, found = message.rpartition(marker)
        if sep:
            found = found.rsplit("`", 1)[0]
            return " | " not in found and "Unknown" not in found and "Any" not in found
    return True


def _plain(message: str, site: _Site) -> str:
    """ty's message in the script's words: the stubs' internal names (``_Args3``, the
    aliases) become the tool's."""
    tool = json.dumps(site.tool)
    message = re.sub(r"TypedDict `_Args\d+`( constructor)?", f"the arguments of tool {tool}", message)
    message = re.sub(r"`_Args\d+`", f"the arguments of tool {tool}", message)
    message = re.sub(r"function `_t\d+_*`", f"`call_tool({tool}, ...)`", message)
    return re.sub(r'^(Unknown key "[^"]*") (.*): \1$', r"\1 \2", message)


def _owning_call(calls: list[ast.Call], lines: list[str], row: int, column: int) -> ast.Call | None:
    """The innermost call whose arguments (after its callee) hold ``(row, column)`` (1-based,
    characters)."""
    pos = (row, column - 1)
    best: ast.Call | None = None
    best_start: tuple[int, int] = (0, 0)
    for call in calls:
        func = call.func
        if func.end_lineno is None or call.end_lineno is None or call.end_col_offset is None:
            continue
        after_callee = (func.end_lineno, _col(lines, func.end_lineno, func.end_col_offset or 0))
        end = (call.end_lineno, _col(lines, call.end_lineno, call.end_col_offset))
        if after_callee <= pos < end:
            start = (call.lineno, call.col_offset)
            if best is None or start >= best_start:
                best, best_start = call, start
    return best
