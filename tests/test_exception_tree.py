"""Every exception class of codeact is defined in ``codeact.exceptions``, under ``CodeActError``,
and drawn in the tree of its docstring; the old import locations still give the same classes."""

from __future__ import annotations

import inspect
import re

import codeact.exceptions as exceptions
from codeact.exceptions import CodeActError

CLASSES = {
    name: obj
    for name, obj in vars(exceptions).items()
    if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == exceptions.__name__
}


def test_every_class_is_under_the_root_and_exported() -> None:
    assert [n for n, c in CLASSES.items() if not issubclass(c, CodeActError)] == []
    assert set(CLASSES) == set(exceptions.__all__)


def test_the_docstring_draws_each_class_under_its_parent() -> None:
    lines = [line for line in (exceptions.__doc__ or "").splitlines() if re.search(r"[└├]── \w+", line)]
    drawn: dict[str, str] = {}
    stack: list[tuple[int, str]] = [(-1, "CodeActError")]
    for line in lines:
        match = re.search(r"([└├])── (\w+)", line)
        assert match is not None
        depth = match.start()
        while stack[-1][0] >= depth:
            stack.pop()
        drawn[match.group(2)] = stack[-1][1]
        stack.append((depth, match.group(2)))
    assert set(drawn) | {"CodeActError"} == set(CLASSES)
    for name, parent in drawn.items():
        assert CLASSES[parent] in CLASSES[name].__bases__, f"{name} is drawn under {parent}"


def test_the_old_locations_give_the_same_classes() -> None:
    from codeact.integrations.langchain import LangChainToolError
    from codeact.integrations.mcp import McpConnectionError, McpToolError
    from codeact.runtime import ReplayDivergenceError, ScriptError, ScriptSuspended, SuspendScript, ToolCallLimitError
    from codeact.services import SecretNotFoundError
    from codeact.services._access import ServiceNotConfiguredError

    moved = [
        LangChainToolError,
        McpConnectionError,
        McpToolError,
        ReplayDivergenceError,
        ScriptError,
        ScriptSuspended,
        SuspendScript,
        ToolCallLimitError,
        SecretNotFoundError,
        ServiceNotConfiguredError,
    ]
    assert all(CLASSES[c.__name__] is c for c in moved)
    assert issubclass(ServiceNotConfiguredError, RuntimeError)  # an `except RuntimeError` still catches it
