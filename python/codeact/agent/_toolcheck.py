"""The agent's side of the type check before a script runs (issue 48): which tools and names
the script can see, asked of any runtime through the seam (``runtime.check_tool_calls``)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..runtime import check_tool_calls
from ._stepper import run_step

if TYPE_CHECKING:
    from ._run import Run

__all__ = ("tool_call_problem",)


def _namespace_names(run: Run, *, persist_namespace: bool, uses_session: bool) -> list[str] | None:
    """The names an earlier script left: none without ``persist_namespace``; not known (None)
    on an interpreter session, whose globals are not listed; else the carried variables and
    definitions."""
    if not persist_namespace:
        return []
    if uses_session:
        return None
    names = list(run.namespace.variables)
    for source in run.namespace.definitions:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.append(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names += [(a.asname or a.name).split(".")[0] for a in node.names]
            else:
                names += [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return names


async def tool_call_problem(
    run: Run, runtime: Any, script: str, *, persist_namespace: bool, uses_session: bool
) -> str | None:
    """The runtime's verdict on the script's tool calls (``check_tool_calls``), off the event
    loop: the text to feed back before anything runs, or None. A runtime without the check,
    or with it turned off, reports nothing."""
    if getattr(runtime, "check_tool_calls", None) is None or getattr(runtime, "check_types", True) is False:
        return None
    namespace = _namespace_names(run, persist_namespace=persist_namespace, uses_session=uses_session)
    tools = list(run.tools.values())
    problem: str | None = await run_step(_check, runtime, script, tools, namespace)
    return problem


def _check(runtime: Any, script: str, tools: list[Any], namespace: list[str] | None) -> str | None:
    return check_tool_calls(runtime, script, tools, namespace=namespace)
