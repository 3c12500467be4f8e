"""The ``codeact`` command line (typer + rich; ``pip install 'codeact[cli]'``).

- ``codeact run script.py [--mount /data=./data:ro] [--input n=3] [--json]``: runs a script on
  Monty in one call (``MontyRuntime.run``) and prints its output and value.
- ``codeact chat --model NAME [--base-url URL] [--tools module:attr] [--db FILE]``: an
  interactive CodeAct agent on an OpenAI-compatible endpoint (or ``--model-from module:attr``
  for any codeact model object), events printed with ``codeact.console.EventPrinter``.
- ``codeact sessions list|show|pending|approve|deny|complete|discard --db FILE|URL``: the
  sessions in a SQLite file or a PostgreSQL database (a ``postgresql://`` URL,
  ``codeact[postgres]``), the calls waiting for a human, approving, denying or completing
  them, and discarding a turn that cannot resume
  (these rebuild the agent to resume the run: ``--agent module:attr``, or the options chat was
  started with). In chat, a paused call is answered at the prompt.
- ``codeact serve --db FILE|URL --agent module:attr [--host 127.0.0.1 --port 8000] [--token T]``:
  the approval inbox in the browser (``codeact[web]``, ``docs/web.md``).

- ``codeact worker --db postgresql://… --agent module:attr [--concurrency N] [--backend trio]``:
  a DBOS worker running the app's queued runs and decisions (``codeact[dbos]``,
  docs/scale-out.md) until SIGTERM.

Exit codes: 0 success, 1 the script or run failed, 2 bad usage.
"""

from __future__ import annotations

import importlib
import json
import re
import shlex
import sys
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

try:
    import typer
    from rich.console import Console
    from rich.markup import escape
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the codeact command line needs typer and rich: pip install 'codeact[cli]'") from exc

import anyio

from .console import EventPrinter

__all__ = ("app", "load_object", "main", "parse_mount")

# pretty_exceptions_show_locals=False: a traceback never prints local variables (a --db URL
# with its password among them); typer 0.12 showed them by default.
app = typer.Typer(
    help="CodeAct agents and sandboxed Python scripts on Monty.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
sessions_app = typer.Typer(
    help="Inspect sessions in a SQLite file or a PostgreSQL database and act on calls waiting for a human.",
    pretty_exceptions_show_locals=False,
)
app.add_typer(sessions_app, name="sessions")

DEFAULT_APP = "codeact"
DEFAULT_USER = "cli"


def _out() -> Console:
    return Console(soft_wrap=True)


def _err() -> Console:
    return Console(stderr=True)


def _print_version(value: bool) -> None:
    if value:
        from . import __version__

        _out().print(f"codeact {__version__}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """CodeAct agents and sandboxed Python scripts on Monty."""


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


def parse_mount(spec: str) -> Any:
    """``/virtual=host_path[:ro|:rw]`` as a ``Mount`` (read-only unless ``:rw``).

    Raises:
        typer.BadParameter: malformed spec.
    """
    from .runtime import Mount, PathAccess

    virtual, sep, rest = spec.partition("=")
    if not sep or not virtual or not rest:
        raise typer.BadParameter(f"expected /virtual=host_path[:ro|:rw], got {spec!r}")
    access = PathAccess.READ_ONLY
    host = rest
    if rest.endswith((":ro", ":rw")):
        host, mode = rest[:-3], rest[-2:]
        access = PathAccess.READ_WRITE if mode == "rw" else PathAccess.READ_ONLY
    return Mount(virtual_path=virtual, host_path=Path(host).expanduser().resolve(), access=access)


def _parse_input(spec: str) -> tuple[str, Any]:
    name, sep, raw = spec.partition("=")
    if not sep or not name:
        raise typer.BadParameter(f"expected name=value, got {spec!r}")
    try:
        return name, json.loads(raw)
    except json.JSONDecodeError:
        return name, raw  # a bare string


def _tools_from(specs: Sequence[str]) -> tuple[list[Any], list[Any]]:
    """``--tools`` objects split into (tools or functions, toolsets)."""
    from .toolsets import Toolset

    tools: list[Any] = []
    toolsets: list[Any] = []
    for spec in specs:
        obj = load_object(spec)
        items = obj if isinstance(obj, (list, tuple)) else [obj]
        for item in items:
            (toolsets if isinstance(item, Toolset) else tools).append(item)
    return tools, toolsets


def _callables_from(spec: str) -> dict[str, Any]:
    """``run --tools``: the object at ``spec``, which must be a dict {name: callable}.

    Raises:
        typer.BadParameter: not loadable, or not a dict of callables keyed by name.
    """
    obj = load_object(spec)
    if not isinstance(obj, Mapping):
        raise typer.BadParameter(f"{spec!r} is of type {type(obj).__name__}, expected a dict {{name: callable}}")
    for name, fn in obj.items():
        if not isinstance(name, str) or not callable(fn):
            raise typer.BadParameter(
                f"{spec!r} maps {name!r} to a value of type {type(fn).__name__}, expected a dict {{name: callable}}"
            )
    return dict(obj)


# ------------------------------------------------------------------ run


@app.command()
def run(
    script: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="the Python script")],
    mount: Annotated[list[str] | None, typer.Option(help="/virtual=host_path[:ro|:rw], repeatable")] = None,
    inputs: Annotated[
        list[str] | None, typer.Option("--input", "-i", help="name=value (JSON, else a string), repeatable")
    ] = None,
    tools: Annotated[
        str | None, typer.Option(help="module:attr of a dict {name: callable} the script may call")
    ] = None,
    max_duration: Annotated[float, typer.Option(help="seconds of interpreter time per advance")] = 30.0,
    max_memory_mib: Annotated[int, typer.Option(help="interpreter heap cap, MiB")] = 256,
    json_output: Annotated[bool, typer.Option("--json", help="print one JSON object instead of text")] = False,
) -> None:
    """Run SCRIPT in the Monty sandbox and print its output and the value of its last expression."""
    from .runtime import MontyRuntime, ResourceLimits, ScriptError
    from .runtime.monty import MiB

    try:
        try:
            runtime = MontyRuntime(
                limits=ResourceLimits(max_duration=max_duration, max_memory=max_memory_mib * MiB),
                mounts=[parse_mount(m) for m in mount or []],
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        callables = _callables_from(tools) if tools else {}
        bound = dict(_parse_input(i) for i in inputs or [])
    except typer.BadParameter as exc:
        if json_output:  # the JSON reader gets an object too; typer still prints its usage error
            sys.stdout.write(json.dumps({"ok": False, "error": f"Invalid value: {exc.message}", "stdout": ""}) + "\n")
        raise
    code = script.read_text(encoding="utf-8")
    try:
        result = runtime.run(code, tools=callables, inputs=bound, script_name=script.name)
    except ScriptError as err:
        if json_output:
            _out().print_json(
                json.dumps({"ok": False, "error": err.message, "stdout": err.stdout, "stderr": err.stderr})
            )
        else:
            sys.stdout.write(err.stdout)
            sys.stderr.write(err.stderr)
            _err().print(f"[bold red]{err.message}[/]", markup=True, highlight=False)
        raise typer.Exit(1) from None
    if json_output:
        from ._values import encode_value

        try:
            value = encode_value(result.value)  # tuples, sets, bytes, non-str keys: tagged, lossless
        except ValueError as exc:
            message = f"the script's value has no JSON form: {exc}"
            sys.stdout.write(json.dumps({"ok": False, "error": message, "stdout": result.stdout}) + "\n")
            raise typer.Exit(1) from None
        payload = {
            "ok": True,
            "value": value,
            "stdout": result.stdout,
            "stderr": result.stderr,
            "tool_calls": result.tool_calls,
        }
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=repr) + "\n")
        return
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.value is not None:
        _out().print(repr(result.value), highlight=False)


# ------------------------------------------------------------------ chat


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
    from .sessions import InMemorySessionService, SqliteSessionService

    if db is None:
        return InMemorySessionService()
    if _is_postgres_url(db):
        from . import sessions

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
    from .agent import CodeActAgent
    from .runtime import MontyRuntime

    if (model is None) == (model_from is None):
        raise typer.BadParameter("give exactly one of --model and --model-from")
    if model_from is not None:
        llm = load_object(model_from)
    else:
        from .models import OpenAIChatModel

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


def _agent_options(
    model: str | None, base_url: str | None, model_from: str | None, tools: Sequence[str], instruction: str
) -> list[str]:
    """The command-line options that rebuild the chat agent."""
    out = ["--model-from", model_from] if model_from else ["--model", model or ""]
    if base_url and not model_from:
        out += ["--base-url", base_url]
    for spec in tools:
        out += ["--tools", spec]
    if instruction:
        out += ["--instruction", instruction]
    return out


_YES = {"y", "yes", "approve", "approved", "ok", "okay", "sure"}
_NO = {"n", "no", "deny", "denied", "reject", "refuse"}


def _first_word(text: str) -> tuple[str, str]:
    """The first word of ``text`` (lower case) and the rest, without the punctuation between."""
    match = re.match(r"\s*([A-Za-z]+)[\s,.:;!-]*(.*)", text, re.DOTALL)
    return (match.group(1).lower(), match.group(2).strip()) if match else ("", text.strip())


class _ChatPauses:
    """What ``codeact chat`` does when a run pauses at a call waiting for a human: asks at the
    prompt when chat reads its messages from the terminal (approve, deny with a reason, or
    the result of a long-running call), else prints the ``codeact sessions`` lines that
    answer it later."""

    def __init__(
        self, runner: Any, user: str, session_id: str, printer: Any, commands: list[str] | None, note: str = ""
    ) -> None:
        self.runner, self.user, self.session_id, self.printer = runner, user, session_id, printer
        self.commands = commands  # the options after ``codeact sessions VERB``; None: in memory
        self.note = note  # said once before the lines (the --db URL lost its password)

    def pending(self) -> list[Any]:
        async def load() -> list[Any]:
            return list(await self.runner.pending(user_id=self.user, session_id=self.session_id))

        return anyio.run(load)

    def _resume(self, verb: str, **kwargs: Any) -> bool:
        """Runs ``Runner.<verb>`` and prints its events; True when the run failed."""
        from .exceptions import CodeActError

        method = getattr(self.runner, verb)

        async def go() -> bool:
            failed = False
            async for event in method(user_id=self.user, session_id=self.session_id, **kwargs):
                self.printer(event)
                failed = failed or bool(event.error_code)
            return failed

        try:
            return anyio.run(go)
        except CodeActError as exc:
            _err().print(f"{type(exc).__name__}: {exc}", style="red", highlight=False)
            return True

    def show_commands(self, pending: Sequence[Any]) -> None:
        if self.commands is None:
            _err().print(
                "this session is in memory (no --db): answer at the prompt, or start chat with --db to decide later "
                "with `codeact sessions approve`",
                style="yellow",
            )
            return
        base = ["codeact", "sessions"]
        if self.note:
            _err().print(self.note, style="dim")
        for p in pending:
            _out().print(f"{p.call_key}: {p.tool}({json.dumps(p.args)}) waits for a {p.kind}; answer it with:")
            verbs = [["approve"], ["deny"]] if p.kind == "confirmation" else [["complete"], ["deny"]]
            for verb in verbs:
                extra = ["--value", "JSON"] if verb == ["complete"] else []
                line = [*base, *verb, self.session_id, *self.commands, "--call", p.call_key, *extra]
                _out().print("  " + shlex.join(line), highlight=False, markup=False)

    def ask(self, read: Any) -> bool:
        """Asks about each pending call until none is left or the user leaves them; True when
        a resumed run failed."""
        failed = False
        while True:
            pending = self.pending()
            if not pending:
                return failed
            p = pending[0]
            call = f"{p.tool}({json.dumps(p.args)})"
            if p.kind == "confirmation":
                question = f"approve {call}? [y]es / [n]o [reason] / Enter leaves it pending> "
            else:
                hint = f" (it said: {p.hint})" if p.hint else ""
                question = f"result of long-running {call}{hint}: JSON or text / deny [reason] / Enter leaves it> "
            try:
                answer = read(question)
            except EOFError:
                answer = ""
            if not answer.strip():
                self.show_commands(pending)
                return failed
            word, rest = _first_word(answer)
            if word in _NO:
                failed = self._resume("deny", call_key=p.call_key, reason=rest or None) or failed
            elif p.kind == "confirmation" and word in _YES:
                failed = self._resume("approve", call_key=p.call_key) or failed
            elif p.kind == "confirmation":
                _err().print("answer y (approve) or n [reason] (deny); Enter leaves the call pending", style="yellow")
            else:
                try:
                    value = json.loads(answer)
                except json.JSONDecodeError:
                    value = answer.strip()
                failed = self._resume("complete", call_key=p.call_key, value=value) or failed


@app.command()
def chat(
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    model_from: ModelFromOption = None,
    tools: ToolsOption = None,
    db: Annotated[
        str | None, typer.Option(help="session store: a SQLite file or a postgresql:// URL (default: in memory)")
    ] = None,
    session: Annotated[str | None, typer.Option(help="session id to continue or create")] = None,
    user: Annotated[str, typer.Option(help="user id")] = DEFAULT_USER,
    app_name: Annotated[str, typer.Option("--app", help="app name in the store")] = DEFAULT_APP,
    instruction: InstructionOption = "",
    message: Annotated[list[str] | None, typer.Option("--message", "-m", help="send these and exit")] = None,
) -> None:
    """Chat with a CodeAct agent: each line you type is one message; an empty line or EOF ends.

    When a run pauses at a call that waits for a human, chat asks at the prompt (approve or
    deny it, or give a long-running call its result). With --message, chat prints the
    `codeact sessions approve|deny|complete` lines that answer it instead."""
    from .exceptions import CodeActError
    from .runner import Runner

    agent = _chat_agent(model, base_url, model_from, tools or [], instruction)
    runner = Runner(app_name=app_name, agent=agent, session_service=_session_service(db), auto_create_session=True)
    session_id = session or uuid.uuid4().hex[:12]
    printer = EventPrinter(_out())
    failed = False
    commands = None
    note = ""
    if db is not None:
        if _shown_db(db) != db:
            note = "the --db URL is shown without its password: give it with PGPASSWORD or ~/.pgpass"
        commands = ["--db", _shown_db(db), *_agent_options(model, base_url, model_from, tools or [], instruction)]
        if app_name != DEFAULT_APP:
            commands += ["--app", app_name]
        if user != DEFAULT_USER:
            commands += ["--user", user]
    pauses = _ChatPauses(runner, user, session_id, printer, commands, note)

    def lines() -> Any:
        if message:
            yield from message
            return
        while True:
            try:
                line = input("you> ")
            except EOFError:
                return
            if not line.strip():
                return
            yield line

    for line in lines():
        try:
            for event in runner.run(user_id=user, session_id=session_id, new_message=line):
                printer(event)
                failed = failed or bool(event.error_code)
        except CodeActError as exc:  # for example CallsPendingError: a call still waits
            _err().print(f"{type(exc).__name__}: {_first_line(exc)}", style="red", highlight=False)
            failed = True
        if message:
            pending = pauses.pending()
            if pending:
                pauses.show_commands(pending)
        else:
            failed = pauses.ask(input) or failed
    _err().print(f"session {session_id}", style="dim")
    if failed:
        raise typer.Exit(1)


# ------------------------------------------------------------------ sessions


def _runner(db: str, app_name: str, agent_spec: str | None, chat_agent: dict[str, Any] | None = None) -> Any:
    from .agent import CodeActAgent
    from .models import ScriptedModel
    from .runner import Runner
    from .runtime import MontyRuntime

    if agent_spec:
        agent = load_object(agent_spec)
    elif chat_agent is not None and (chat_agent["model"] or chat_agent["model_from"]):
        agent = _chat_agent(**chat_agent)
    elif chat_agent is not None:
        raise typer.BadParameter(
            "give --agent module:attr (the agent that paused), or the --model/--model-from and --tools options the "
            "chat was started with"
        )
    else:
        agent = CodeActAgent(name="inspect", model=ScriptedModel([]), runtime=MontyRuntime())
    return Runner(app_name=app_name, agent=agent, session_service=_session_service(db))


DbOption = Annotated[
    str, typer.Option(help="the session store: a SQLite file or a postgresql:// URL", callback=_existing_store)
]
AppOption = Annotated[str, typer.Option("--app", help="app name")]
UserOption = Annotated[str, typer.Option(help="user id")]


@sessions_app.command("list")
def sessions_list(
    db: DbOption, app_name: AppOption = DEFAULT_APP, user: Annotated[str | None, typer.Option()] = None
) -> None:
    """List the sessions of an app (of one user with --user)."""
    from rich.table import Table

    async def load() -> list[Any]:
        service = _session_service(db)
        try:
            return await service.list_sessions(app_name=app_name, user_id=user)
        finally:
            await _close(service)

    table = Table("session", "user", "updated", "state keys")
    import datetime as _dt

    for s in _call(load):
        updated = _dt.datetime.fromtimestamp(s.last_update_time, tz=_dt.timezone.utc).isoformat(timespec="seconds")
        table.add_row(s.id, s.user_id, updated, ", ".join(sorted(s.state)) or "-")
    _out().print(table)


async def _close(service: Any) -> None:
    close = getattr(service, "close", None)
    if close is not None:
        result = close()
        if hasattr(result, "__await__"):
            await result


@sessions_app.command("show")
def sessions_show(
    session_id: str,
    db: DbOption,
    app_name: AppOption = DEFAULT_APP,
    user: UserOption = DEFAULT_USER,
    json_output: Annotated[bool, typer.Option("--json", help="the session as JSON")] = False,
) -> None:
    """Print a session's events (and state)."""

    async def load() -> Any:
        service = _session_service(db)
        try:
            return await service.get_session(app_name=app_name, user_id=user, session_id=session_id)
        finally:
            await _close(service)

    found = _call(load)
    if found is None:
        _err().print(f"no session {session_id!r} for user {user!r} in app {app_name!r}", style="red")
        raise typer.Exit(1)
    if json_output:
        sys.stdout.write(found.model_dump_json() + "\n")
        return
    printer = EventPrinter(_out())
    for event in found.events:
        printer(event)
    from ._values import json_native, readable

    state = json.dumps(found.state, default=repr) if json_native(found.state) else readable(found.state)
    _out().print(f"state: {state}", style="magenta", highlight=False)


@sessions_app.command("pending")
def sessions_pending(
    session_id: str,
    db: DbOption,
    app_name: AppOption = DEFAULT_APP,
    user: UserOption = DEFAULT_USER,
    json_output: Annotated[bool, typer.Option("--json")] = False,
    agent: Annotated[str | None, typer.Option(help="module:attr of the agent (binds arguments by name)")] = None,
) -> None:
    """List the calls of a session waiting for a human (Runner.pending), read from the
    verified continuation; an interrupted turn is reported with how to recover it."""
    runner = _runner(db, app_name, agent)
    pending = _require(runner, "pending")

    async def load() -> list[Any]:
        return list(await pending(user_id=user, session_id=session_id))

    items = _call(load)
    if json_output:
        sys.stdout.write(json.dumps([p.model_dump(mode="json") for p in items]) + "\n")
        return
    if not items:
        info = _call(lambda: runner.turn_info(user_id=user, session_id=session_id))
        if info is not None and info.status == "interrupted":
            held = info.claim.describe() if info.claim is not None else "a runner"
            _out().print(
                f"nothing pending: turn {info.turn} was interrupted ({held} stopped"
                + (f" during call {', '.join(info.in_flight)}" if info.in_flight else "")
                + f"); recover it with `codeact sessions recover {session_id} --db {db} --agent module:attr`"
            )
        elif info is not None and info.status == "running":
            assert info.claim is not None
            _out().print(f"nothing pending: turn {info.turn} is being run by {info.claim.describe()}")
        elif info is not None and info.status == "stale":
            _out().print(
                f"nothing pending: the stored turn cannot be read here ({info.reason}); drop it with "
                f"`codeact sessions discard {session_id} --db ...`",
                markup=False,
                highlight=False,
            )
        else:
            _out().print("nothing pending")
        return
    for p in items:
        label = "in doubt (it may have run)" if p.kind == "in_doubt" else p.kind
        _out().print(
            f"[bold]{escape(p.call_key)}[/] {label}: {escape(p.tool)}({escape(json.dumps(p.args))})"
            + (f" — {escape(p.hint)}" if p.hint else "")
            + f" [dim](accepts: {', '.join(_CLI_VERBS[a] for a in p.accepts)})[/]",
            highlight=False,
        )


def _require(runner: Any, name: str) -> Any:
    method = getattr(runner, name, None)
    if method is None:
        _err().print(f"this codeact version has no Runner.{name} (the durability API)", style="red")
        raise typer.Exit(1)
    return method


def _call(fn: Any) -> Any:
    from .exceptions import CodeActError

    try:
        return anyio.run(fn)
    except CodeActError as exc:
        _err().print(f"{type(exc).__name__}: {exc}", style="red", highlight=False)
        raise typer.Exit(1) from None


_CLI_VERBS = {
    "approve": "approve",
    "deny": "deny",
    "complete": "complete",
    "rerun": "rerun",
    "skip": "skip",
    "fail": "fail",
}
"""The ``codeact sessions decide`` verb for each decision a pending call accepts."""

DECIDE_VERBS = ("approve", "deny", "complete", "rerun", "skip", "fail", "recover")
"""The verbs of ``codeact sessions decide``: a ``Decision`` each (rerun, skip and fail resolve a
call in doubt)."""


def _decision(
    verb: str,
    call: str | None,
    *,
    value: Any = None,
    error: str | None = None,
    reason: str | None = None,
    digest: str | None = None,
    actor: str | None = None,
) -> Any:
    """The ``Decision`` a CLI verb stands for (exit 2 on a decision that does not validate)."""
    from pydantic import ValidationError

    from .exceptions import ValueConversionError
    from .turns import Decision

    fields: dict[str, Any] = {"call_key": call, "digest": digest, "actor": actor, "reason": reason or None}
    if verb in ("rerun", "skip", "fail"):
        fields.update(verb="resolve", action=verb, payload=value if verb == "skip" else None)
    elif verb == "complete":
        fields.update(verb="complete", payload=value, error=error)
    else:
        fields["verb"] = verb
    try:
        return Decision(**fields)
    except (ValidationError, ValueConversionError) as exc:
        text = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        _err().print(f"cannot {verb}: {text}", style="red", highlight=False)
        raise typer.Exit(2) from None


def _decide(
    decision: Any,
    session_id: str,
    db: str,
    app_name: str,
    user: str,
    agent: str | None,
    chat_agent: dict[str, Any] | None,
) -> None:
    """Sends ``decision`` through ``Runner.decide`` and prints the resumed run's events (exit 1
    on a refusal or an error event)."""
    runner = _runner(db, app_name, agent, chat_agent)
    decide = _require(runner, "decide")
    printer = EventPrinter(_out())

    async def go() -> bool:
        failed = False
        stream: AsyncIterator[Any] = decide(decision, user_id=user, session_id=session_id)
        async for event in stream:
            printer(event)
            failed = failed or bool(event.error_code)
        return failed

    if _call(go):
        raise typer.Exit(1)


AgentOption = Annotated[
    str | None,
    typer.Option(help="module:attr of the agent that resumes the run (or give the options chat was started with)"),
]
CallOption = Annotated[str | None, typer.Option("--call", help="call key (optional when one call is pending)")]


def _chat_options(
    model: str | None, base_url: str | None, model_from: str | None, tools: list[str] | None, instruction: str
) -> dict[str, Any]:
    return {
        "model": model,
        "base_url": base_url,
        "model_from": model_from,
        "tools": tools or [],
        "instruction": instruction,
    }


ValueOption = Annotated[
    str | None, typer.Option(help="the result (complete) or the value given instead (skip): JSON, else the text")
]


def _json_or_text(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


@sessions_app.command("decide")
def sessions_decide(
    session_id: str,
    verb: Annotated[str, typer.Argument(help="approve, deny, complete, rerun, skip, fail or recover")],
    db: DbOption,
    agent: AgentOption = None,
    call: CallOption = None,
    value: ValueOption = None,
    error: Annotated[
        str | None, typer.Option(help="complete: fail the call; the script's call raises RuntimeError with this text")
    ] = None,
    reason: Annotated[str | None, typer.Option(help="deny / fail: the reason told to the model")] = None,
    digest: Annotated[str | None, typer.Option(help="the call's digest as listed: refuse a changed call")] = None,
    actor: Annotated[str | None, typer.Option(help="who decides (recorded with the decision)")] = None,
    app_name: AppOption = DEFAULT_APP,
    user: UserOption = DEFAULT_USER,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    model_from: ModelFromOption = None,
    tools: ToolsOption = None,
    instruction: InstructionOption = "",
) -> None:
    """Decide a paused call and resume the run (Runner.decide): approve or deny a call awaiting
    confirmation, complete (or deny) a long-running call, rerun / skip / fail a call in doubt,
    or recover an interrupted turn. A call accepts only its kind's verbs (`sessions pending`
    lists them); any other is refused before anything runs."""
    if verb not in DECIDE_VERBS:
        _err().print(f"the verb must be one of {', '.join(DECIDE_VERBS)}, not {verb!r}", style="red")
        raise typer.Exit(2)
    if verb == "complete" and (value is None) == (error is None):
        _err().print("complete: give exactly one of --value and --error", style="red")
        raise typer.Exit(2)
    decision = _decision(verb, call, value=_json_or_text(value), error=error, reason=reason, digest=digest, actor=actor)
    chat_agent = _chat_options(model, base_url, model_from, tools, instruction)
    _decide(decision, session_id, db, app_name, user, agent, chat_agent)


@sessions_app.command("approve")
def sessions_approve(
    session_id: str,
    db: DbOption,
    agent: AgentOption = None,
    call: CallOption = None,
    app_name: AppOption = DEFAULT_APP,
    user: UserOption = DEFAULT_USER,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    model_from: ModelFromOption = None,
    tools: ToolsOption = None,
    instruction: InstructionOption = "",
) -> None:
    """Approve a call waiting for confirmation and resume the run (`sessions decide SESSION approve`)."""
    chat_agent = _chat_options(model, base_url, model_from, tools, instruction)
    _decide(_decision("approve", call), session_id, db, app_name, user, agent, chat_agent)


@sessions_app.command("deny")
def sessions_deny(
    session_id: str,
    db: DbOption,
    agent: AgentOption = None,
    call: CallOption = None,
    reason: Annotated[str | None, typer.Option(help="told to the model")] = None,
    app_name: AppOption = DEFAULT_APP,
    user: UserOption = DEFAULT_USER,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    model_from: ModelFromOption = None,
    tools: ToolsOption = None,
    instruction: InstructionOption = "",
) -> None:
    """Deny a call awaiting confirmation or its result and resume the run; the script gets
    PermissionError (`sessions decide SESSION deny`). A call in doubt is not denied: resolve it."""
    chat_agent = _chat_options(model, base_url, model_from, tools, instruction)
    _decide(_decision("deny", call, reason=reason), session_id, db, app_name, user, agent, chat_agent)


@sessions_app.command("complete")
def sessions_complete(
    session_id: str,
    db: DbOption,
    call: Annotated[str, typer.Option("--call", help="the long-running call's key (codeact sessions pending)")],
    value: Annotated[str | None, typer.Option(help="its result: JSON, else the text as a string")] = None,
    error: Annotated[
        str | None, typer.Option(help="complete it as failed: the script's call raises RuntimeError with this text")
    ] = None,
    agent: AgentOption = None,
    app_name: AppOption = DEFAULT_APP,
    user: UserOption = DEFAULT_USER,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    model_from: ModelFromOption = None,
    tools: ToolsOption = None,
    instruction: InstructionOption = "",
) -> None:
    """Complete a long-running call with its result (--value) or as failed (--error) and resume
    the run (`sessions decide SESSION complete`)."""
    if (value is None) == (error is None):
        _err().print("give exactly one of --value and --error", style="red")
        raise typer.Exit(2)
    chat_agent = _chat_options(model, base_url, model_from, tools, instruction)
    decision = _decision("complete", call, value=_json_or_text(value), error=error)
    _decide(decision, session_id, db, app_name, user, agent, chat_agent)


@sessions_app.command("recover")
def sessions_recover(
    session_id: str,
    db: DbOption,
    agent: AgentOption,
    app_name: AppOption = DEFAULT_APP,
    user: UserOption = DEFAULT_USER,
) -> None:
    """Resume an interrupted turn (its runner stopped) from its continuation and journal
    (`sessions decide SESSION recover`); a call that was in flight follows its tool's on_in_doubt."""
    _decide(_decision("recover", None), session_id, db, app_name, user, agent, None)


@sessions_app.command("discard")
def sessions_discard(
    session_id: str,
    db: DbOption,
    app_name: AppOption = DEFAULT_APP,
    user: UserOption = DEFAULT_USER,
) -> None:
    """Drop a session's in-flight turn: a paused script, an interrupted turn, or one this
    version cannot resume, such as a turn sealed by codeact 0.2.0
    (Runner.discard_pending_checkpoint). Nothing runs; the next message starts fresh."""
    runner = _runner(db, app_name, None)

    async def go() -> bool:
        try:
            return bool(await runner.discard_pending_checkpoint(user_id=user, session_id=session_id))
        finally:
            await _close(runner.session_service)

    if _call(go):
        _out().print(f"discarded the in-flight turn of session {session_id!r}; nothing ran", highlight=False)
    else:
        _out().print(f"session {session_id!r} has no turn in flight", highlight=False)


@sessions_app.command("resolve")
def sessions_resolve(
    session_id: str,
    db: DbOption,
    agent: AgentOption,
    call: Annotated[str, typer.Option("--call", help="the call key of the call in doubt")],
    action: Annotated[str, typer.Option(help="rerun, skip or fail")],
    value: Annotated[str | None, typer.Option(help="JSON result for skip")] = None,
    reason: Annotated[str, typer.Option(help="message for fail")] = "",
    app_name: AppOption = DEFAULT_APP,
    user: UserOption = DEFAULT_USER,
) -> None:
    """Decide a call paused in doubt (Runner.resolve_in_doubt): run it again, skip it with a
    JSON value, or fail it into the script."""
    if action not in ("rerun", "skip", "fail"):
        _err().print(f"--action must be rerun, skip or fail, not {action!r}", style="red")
        raise typer.Exit(2)
    try:
        parsed = json.loads(value) if value is not None else None
    except json.JSONDecodeError as exc:
        _err().print(f"--value is not JSON: {exc}", style="red")
        raise typer.Exit(2) from None
    decision = _decision(action, call, value=parsed, reason=reason)
    _decide(decision, session_id, db, app_name, user, agent, None)


# ------------------------------------------------------------------ serve


@app.command()
def serve(
    db: Annotated[str, typer.Option(help="the session store: a SQLite file or a postgresql:// URL")],
    agent: Annotated[str, typer.Option(help="module:attr of the agent that resumes the runs")],
    app_name: AppOption = DEFAULT_APP,
    host: Annotated[str, typer.Option(help="address to bind (loopback unless a token is set)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    token: Annotated[
        str | None,
        typer.Option(help="required on every request (default: $CODEACT_SERVE_TOKEN); needed off loopback"),
    ] = None,
    secrets: Annotated[
        str | None, typer.Option(help="module:attr of the runner's secrets (a mapping or SecretsProvider)")
    ] = None,
) -> None:
    """Serve the approval inbox in the browser: sessions, timelines and the calls waiting for a
    human, decided through the same Runner.approve/deny/complete as `codeact sessions`
    (`pip install 'codeact[web]'`; the JSON API is in docs/web.md)."""
    import os

    try:
        import uvicorn

        from .web import TOKEN_ENV, create_app, is_loopback
    except ImportError as exc:
        _err().print(str(exc), style="red")
        raise typer.Exit(2) from None
    from .runner import Runner

    token = token or os.environ.get(TOKEN_ENV) or None
    if not is_loopback(host) and token is None:
        _err().print(
            f"refusing to bind {host}: off loopback every request needs a token (--token or ${TOKEN_ENV})", style="red"
        )
        raise typer.Exit(2)
    runner = Runner(
        app_name=app_name,
        agent=load_object(agent),
        session_service=_session_service(_existing_store(db)),
        secrets=load_object(secrets) if secrets else None,
    )
    web_app = create_app(runner, token=token)
    _err().print(f"codeact serve: http://{host}:{port}/inbox (app {app_name!r})", style="dim")
    uvicorn.run(web_app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)


@app.command()
def worker(
    db: Annotated[str, typer.Option(help="the PostgreSQL database: sessions and DBOS's tables (postgresql://…)")],
    agent: Annotated[str, typer.Option(help="module:attr of the agent (or of a function returning it)")],
    concurrency: Annotated[int, typer.Option(min=1, help="runs this worker drives at once")] = 8,
    app_name: AppOption = DEFAULT_APP,
    backend: Annotated[str, typer.Option(help="event loop of the runs: asyncio or trio")] = "asyncio",
    grace: Annotated[float, typer.Option(min=0, help="seconds SIGTERM waits for the runs in flight")] = 30.0,
    poll: Annotated[float, typer.Option(min=0.001, help="seconds between two looks at the queue")] = 0.1,
) -> None:
    """Run agent runs and decisions from the app's DBOS queue (codeact[dbos]; docs/scale-out.md)
    until SIGTERM or Ctrl-C: then stop dequeuing, let the runs in flight finish for up to
    --grace seconds and exit; runs still in flight are recovered by another worker."""
    import logging
    import os
    import signal
    import threading

    if not _is_postgres_url(db):
        raise typer.BadParameter(f"{db!r} is not a postgresql:// URL", param_hint="--db")
    if backend not in ("asyncio", "trio"):
        raise typer.BadParameter(f"expected asyncio or trio, got {backend!r}", param_hint="--backend")
    try:
        from .integrations.dbos import Worker
    except ImportError as exc:
        raise typer.BadParameter(str(exc), param_hint="--db") from exc
    from .agent import BaseAgent
    from .runner import Runner
    from .sessions import PostgresSessionService

    loaded = load_object(agent)
    if not isinstance(loaded, BaseAgent) and callable(loaded):
        loaded = loaded()
    if not isinstance(loaded, BaseAgent):
        raise typer.BadParameter(f"{agent!r} is not an agent (got {type(loaded).__name__})", param_hint="--agent")
    # the worker's own warnings (workflows that failed or waited for a claim, recoveries) on stderr
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.getLogger("codeact").addHandler(handler)
    store = PostgresSessionService(db, max_size=max(4, concurrency))
    runner = Runner(app_name=app_name, agent=loaded, session_service=store, auto_create_session=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    running = Worker(
        runner,
        database_url=db,
        concurrency=concurrency,
        backend=backend,  # type: ignore[arg-type]
        polling_interval=poll,
    )
    try:
        running.start()
    except Exception as exc:  # the database unreachable, DBOS failing to launch: one line, exit 1
        store.close()
        _err().print(f"the worker could not start: {type(exc).__name__}: {exc}".strip(), style="red", markup=False)
        raise typer.Exit(1) from None
    out = _out()
    out.print(f"worker {running.executor_id} ready: queue {running.queue_name}, {backend}", markup=False)
    while not stop.wait(0.2):
        if running.lost.is_set():
            _err().print("the worker lost its database connection: exiting (its runs are recovered elsewhere)")
            os._exit(1)
    drained = running.stop(grace)
    if not drained:
        out.print(f"worker {running.executor_id}: {running.active} run(s) left for recovery", markup=False)
        sys.stdout.flush()
        os._exit(0)
    store.close()
    out.print(f"worker {running.executor_id} stopped", markup=False)


def main() -> None:
    """Entry point of the ``codeact`` script. A host failure (an unreadable script or store,
    a store error) ends with one error line and exit status 1, not a traceback."""
    from .exceptions import CodeActError

    try:
        app()
    except (CodeActError, UnicodeDecodeError, OSError) as exc:
        _err().print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", markup=True, highlight=False)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
