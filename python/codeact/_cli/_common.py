"""What the ``codeact`` commands share (``codeact.cli`` and ``_cli._sessions``): the consoles,
the default app and user, loading ``module:attr`` objects, the session store ``--db`` names
(and how it is printed without a password), and the agent ``codeact chat`` runs, which the
``sessions`` commands rebuild from the same options. Split from ``codeact.cli``."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

__all__ = (
    "CHAT_AGENT_NAME",
    "DEFAULT_APP",
    "DEFAULT_USER",
    "BaseUrlOption",
    "InstructionOption",
    "ModelFromOption",
    "ModelOption",
    "ToolsOption",
    "_chat_agent",
    "_err",
    "_existing_store",
    "_first_line",
    "_is_postgres_url",
    "_out",
    "_session_service",
    "_shown_db",
    "_tools_from",
    "load_object",
)

DEFAULT_APP = "codeact"
DEFAULT_USER = "cli"


def _out() -> Console:
    return Console(soft_wrap=True)


def _err() -> Console:
    return Console(stderr=True)


def load_object(spec: str) -> Any:
    """Imports ``module:attr`` (``attr`` may be dotted) and returns the object.

    Raises:
        typer.BadParameter: not of that form, or the module or attribute does not exist.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise typer.BadParameter(f"expected module:attribute, got {spec!r}")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: the current directory's modules are importable
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise typer.BadParameter(f"cannot load {spec!r}: {exc}") from exc
    return obj


def _tools_from(specs: Sequence[str]) -> tuple[list[Any], list[Any]]:
    """``--tools`` objects split into (tools or functions, toolsets)."""
    from ..toolsets import Toolset

    tools: list[Any] = []
    toolsets: list[Any] = []
    for spec in specs:
        obj = load_object(spec)
        items = obj if isinstance(obj, (list, tuple)) else [obj]
        for item in items:
            (toolsets if isinstance(item, Toolset) else tools).append(item)
    return tools, toolsets


_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def _is_postgres_url(db: str | Path) -> bool:
    return isinstance(db, str) and db.lower().startswith(_POSTGRES_SCHEMES)


_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
"""libpq connection parameters that hold a secret: never printed."""


def _shown_db(db: str | Path) -> str:
    """``--db`` as it may be printed: a ``postgresql://`` URL without its password (in the
    user part, a ``password=`` or an ``sslpassword=`` parameter); anything else as given."""
    if not _is_postgres_url(db):
        return str(db)
    from urllib.parse import parse_qsl, urlencode, urlsplit

    parts = urlsplit(str(db))
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = userinfo.split(":", 1)[0] + "@" + hostport
    params = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in params if k.lower() not in _SECRET_PARAMETERS]
    if netloc == parts.netloc and len(kept) == len(params):
        return str(db)
    query = urlencode(kept) if len(kept) != len(params) else parts.query
    return (
        f"{parts.scheme}://{netloc}{parts.path}"
        + (f"?{query}" if query else "")
        + (f"#{parts.fragment}" if parts.fragment else "")
    )


def _session_service(db: str | Path | None) -> Any:
    """The store ``--db`` names: a ``postgresql://`` URL, a SQLite file, or memory (None)."""
    from ..sessions import InMemorySessionService, SqliteSessionService

    if db is None:
        return InMemorySessionService()
    if _is_postgres_url(db):
        from .. import sessions

        try:
            # the scheme in lower case: libpq reads only that, and quotes the whole string
            # (password included) in its error for any other spelling
            scheme, sep, rest = str(db).partition("://")
            return sessions.PostgresSessionService(scheme.lower() + sep + rest)
        except ImportError as exc:
            raise typer.BadParameter(str(exc), param_hint="--db") from exc
    return SqliteSessionService(db)


def _existing_store(db: str) -> str:
    """``--db`` of the sessions commands: a ``postgresql://`` URL or an existing SQLite file."""
    if _is_postgres_url(db):
        return db
    path = Path(db)
    if not path.is_file():
        raise typer.BadParameter(
            f"{db!r} is neither an existing SQLite file nor a postgresql:// URL", param_hint="--db"
        )
    return db


ModelOption = Annotated[str | None, typer.Option(help="model name on an OpenAI-compatible endpoint")]
BaseUrlOption = Annotated[str | None, typer.Option(help="the endpoint (default: OpenAI's)")]
ModelFromOption = Annotated[str | None, typer.Option(help="module:attr of a codeact model object instead")]
ToolsOption = Annotated[list[str] | None, typer.Option(help="module:attr of a tool, list of tools or toolset")]
InstructionOption = Annotated[str, typer.Option(help="the agent's instruction")]
CHAT_AGENT_NAME = "assistant"


def _chat_agent(
    model: str | None, base_url: str | None, model_from: str | None, tools: Sequence[str], instruction: str
) -> Any:
    """The agent ``codeact chat`` runs (also rebuilt by ``sessions approve|deny|complete`` from
    the same options, to resume a chat's paused run)."""
    from ..agent import CodeActAgent
    from ..runtime import MontyRuntime

    if (model is None) == (model_from is None):
        raise typer.BadParameter("give exactly one of --model and --model-from")
    if model_from is not None:
        llm = load_object(model_from)
    else:
        from ..models import OpenAIChatModel

        llm = OpenAIChatModel(model, base_url=base_url)  # type: ignore[arg-type]
    tool_list, toolsets = _tools_from(tools)
    try:
        return CodeActAgent(
            name=CHAT_AGENT_NAME,
            model=llm,
            runtime=MontyRuntime(),
            tools=tool_list,
            toolsets=toolsets,
            instruction=instruction,
        )
    except (TypeError, ValueError) as exc:  # a --tools object codeact cannot use: one line, no traceback
        raise typer.BadParameter(f"--tools: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
