"""How a tool's exception is raised into a script: one mapping for the agent loop
(``agent._dispatch``) and for ``MontyRuntime.run`` / ``arun`` (``runtime._oneshot``)."""

from __future__ import annotations

from ..exceptions import ToolArgumentError

__all__ = ("SCRIPT_EXCEPTION_TYPES", "failure_message", "script_exc_type")

SCRIPT_EXCEPTION_TYPES = frozenset(
    {
        "ArithmeticError", "AssertionError", "AttributeError", "FileExistsError", "FileNotFoundError",
        "ImportError", "IndexError", "IsADirectoryError", "KeyError", "LookupError", "MemoryError",
        "ModuleNotFoundError", "NameError", "NotADirectoryError", "NotImplementedError", "OSError",
        "OverflowError", "PermissionError", "RecursionError", "RuntimeError", "StopIteration", "TimeoutError",
        "TypeError", "UnboundLocalError", "UnicodeDecodeError", "UnicodeEncodeError", "ValueError",
        "ZeroDivisionError",
    }
)  # fmt: skip
"""Builtin exception types every runtime raises into a script as themselves (Monty knows no
others: ``ConnectionError``, ``BrokenPipeError``, ``InterruptedError`` ... are not in it)."""


def script_exc_type(exc: BaseException) -> str:
    """The exception type a tool failure is raised into the script as: the nearest builtin
    class in ``exc``'s MRO that every runtime has (``ConnectionError`` -> ``OSError``, a
    ``ValueError`` subclass -> ``ValueError``), else ``RuntimeError``."""
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins" and cls.__name__ in SCRIPT_EXCEPTION_TYPES:
            return cls.__name__
    return "RuntimeError"


def failure_message(exc: BaseException, exc_type: str) -> str:
    """The text of the exception the script sees. The script prints ``<exc_type>: <text>``, so
    the original class name leads the text only when it differs from ``exc_type``
    (``OSError: ConnectionError: refused``, never ``TypeError: TypeError: ...``).

    A ``KeyError`` with one argument passes that argument's text, not ``str(exc)`` (which is
    its repr): the script's ``KeyError`` quotes it once, so ``str(e)`` there is CPython's
    ``'zz'``, not ``"'zz'"``."""
    if isinstance(exc, KeyError) and len(exc.args) == 1 and exc_type == "KeyError":
        text = str(exc.args[0])
    else:
        text = str(exc)
    name = type(exc).__name__
    if name == exc_type or (isinstance(exc, ToolArgumentError) and text):
        # A ToolArgumentError's text names the tool and what is wrong; "TypeError:
        # ToolArgumentError: ..." would say the kind twice.
        return text or name
    return f"{name}: {text}" if text else name
