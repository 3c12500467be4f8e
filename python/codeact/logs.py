"""The ``codeact`` logger tree (standard ``logging``).

Loggers: ``codeact`` (root of the tree, with a ``NullHandler`` as libraries should have),
``codeact.agent`` (runs, turns, suspensions), ``codeact.runtime`` (scripts, one-call runs),
``codeact.tools`` (tool calls and their failures), ``codeact.models`` (model calls),
``codeact.sessions`` (session stores). The application decides where records go; for a quick
look, ``codeact.logs.configure("DEBUG")`` prints them (through rich when installed).

A tool exception is logged on the host with its traceback (``log_tool_exception``); the model
is shown only ``ExceptionType: message``, never the traceback or host paths.
"""

from __future__ import annotations

import importlib.util
import logging

__all__ = (
    "LOGGER_NAMES",
    "agent_logger",
    "configure",
    "log_tool_exception",
    "logger",
    "model_logger",
    "runtime_logger",
    "session_logger",
    "tool_logger",
)

logger = logging.getLogger("codeact")
logger.addHandler(logging.NullHandler())
agent_logger = logging.getLogger("codeact.agent")
runtime_logger = logging.getLogger("codeact.runtime")
tool_logger = logging.getLogger("codeact.tools")
model_logger = logging.getLogger("codeact.models")
session_logger = logging.getLogger("codeact.sessions")
LOGGER_NAMES = ("codeact", "codeact.agent", "codeact.runtime", "codeact.tools", "codeact.models", "codeact.sessions")


def log_tool_exception(
    tool_name: str,
    exc: BaseException,
    *,
    call_key: str | None = None,
    session_id: str | None = None,
    level: int = logging.WARNING,
) -> str:
    """Logs a tool's failure with its traceback on ``codeact.tools`` and returns the text the
    model may see: ``"<ExceptionType>: <message>"`` (no traceback, no host details beyond what
    the message itself says).

    The record carries ``tool_name``, ``call_key`` and ``session_id`` as extra attributes.
    """
    tool_logger.log(
        level,
        "tool %r failed (call %s): %s: %s",
        tool_name,
        call_key or "-",
        type(exc).__name__,
        exc,
        exc_info=(type(exc), exc, exc.__traceback__),
        extra={"tool_name": tool_name, "call_key": call_key, "session_id": session_id},
    )
    return f"{type(exc).__name__}: {exc}"


def configure(level: int | str = logging.INFO, *, rich: bool | None = None) -> logging.Handler:
    """Sends the ``codeact`` tree to stderr at ``level`` (for scripts and the CLI; applications
    usually configure logging themselves). Uses ``rich.logging.RichHandler`` when rich is
    installed (or ``rich=True``). Returns the handler added; calling again replaces it."""
    for old in list(logger.handlers):
        if getattr(old, "_codeact_configured", False):
            logger.removeHandler(old)
    use_rich = importlib.util.find_spec("rich") is not None if rich is None else rich
    handler: logging.Handler
    if use_rich:
        from rich.logging import RichHandler

        handler = RichHandler(rich_tracebacks=True, show_path=False)
    else:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    setattr(handler, "_codeact_configured", True)  # noqa: B010 - marks the handlers configure() owns
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
