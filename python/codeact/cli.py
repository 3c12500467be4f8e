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
- ``codeact serve --db FILE|URL --agent module:attr [--host 127.0.0.1 --port 8000] [--token T] [--reviewers FILE]``:
  the approval inbox in the browser (``codeact[web]``, ``docs/web.md``).

- ``codeact worker --db postgresql://… --agent module:attr [--concurrency N] [--backend trio]``:
  a DBOS worker running the app's queued runs and decisions (``codeact[dbos]``,
  docs/scale-out.md) until SIGTERM.

Exit codes: 0 success, 1 the script or run failed, 2 bad usage.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

try:
    import rich  # noqa: F401 - the extra's other half (the consoles in _cli)
    import typer
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the codeact command line needs typer and rich: pip install 'codeact[cli]'") from exc

import anyio

from ._cli._common import (
    DEFAULT_APP,
    DEFAULT_USER,
    BaseUrlOption,
    InstructionOption,
    ModelFromOption,
    ModelOption,
    ToolsOption,
    _chat_agent,
    _err,
    _existing_store,
    _first_line,
    _is_postgres_url,
    _out,
    _session_service,
    _shown_db,
    load_object,
)
from ._cli._sessions import AppOption, sessions_app
from .console import EventPrinter

__all__ = ("app", "load_object", "main", "parse_mount")

# pretty_exceptions_show_locals=False: a traceback never prints local variables (a --db URL
# with its password among them); typer 0.12 showed them by default.
app = typer.Typer(
    help="CodeAct agents and sandboxed Python scripts on Monty.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(sessions_app, name="sessions")


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
            if p.kind == "in_doubt":
                _out().print(
                    f"{p.call_key}: {p.tool}({json.dumps(p.args)}) is in doubt (it may have run before its runner "
                    "stopped); resolve it with:",
                    highlight=False,
                    markup=False,
                )
                for act in p.accepts:
                    extra = ["--value", "JSON"] if act == "skip" else []
                    line = [*base, "decide", self.session_id, act, *self.commands, "--call", p.call_key, *extra]
                    _out().print("  " + shlex.join(line), highlight=False, markup=False)
                continue
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
            elif p.kind == "in_doubt":
                question = (
                    f"{call} may have run before its runner stopped: rerun / skip <JSON or text> / fail [reason] / "
                    "Enter leaves it> "
                )
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
            if p.kind == "in_doubt":
                if word not in ("rerun", "skip", "fail"):
                    _err().print("answer rerun, skip <value> or fail [reason]; Enter leaves the call", style="yellow")
                    continue
                value: Any = None
                if word == "skip":
                    try:
                        value = json.loads(rest)
                    except json.JSONDecodeError:
                        value = rest
                resolved = self._resume(
                    "resolve_in_doubt",
                    call_key=p.call_key,
                    action=word,
                    value=value,
                    reason=rest if word == "fail" else "",
                )
                failed = resolved or failed
                if resolved:
                    return failed
                continue
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
    from .agent import RunConfig
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

    async def send(line: str) -> bool:
        # streamed: the reply's tokens and the script's prints appear as they come (partial events)
        error = False
        async for event in runner.run_async(
            user_id=user, session_id=session_id, new_message=line, run_config=RunConfig(streaming=True)
        ):
            printer(event)
            error = error or bool(event.error_code)
        return error

    for line in lines():
        try:
            failed = anyio.run(send, line) or failed
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
    reviewers: Annotated[
        Path | None,
        typer.Option(help="a file of 'name token' lines: each reviewer's own token; decisions record the name"),
    ] = None,
) -> None:
    """Serve the approval inbox in the browser: sessions, timelines and the calls waiting for a
    human, decided through the same Runner.approve/deny/complete as `codeact sessions`
    (`pip install 'codeact[web]'`; the JSON API is in docs/web.md)."""
    import os

    try:
        import uvicorn

        from .web import TOKEN_ENV, create_app, is_loopback, load_reviewers
    except ImportError as exc:
        _err().print(str(exc), style="red")
        raise typer.Exit(2) from None
    from .runner import Runner

    token = token or os.environ.get(TOKEN_ENV) or None
    named: dict[str, str] | None = None
    if reviewers is not None:
        try:
            named = load_reviewers(reviewers)
        except (OSError, ValueError) as exc:
            _err().print(f"--reviewers: {exc}", style="red")
            raise typer.Exit(2) from None
    if not is_loopback(host) and token is None and named is None:
        _err().print(
            f"refusing to bind {host}: off loopback every request needs a token (--token, ${TOKEN_ENV} or --reviewers)",
            style="red",
        )
        raise typer.Exit(2)
    runner = Runner(
        app_name=app_name,
        agent=load_object(agent),
        session_service=_session_service(_existing_store(db)),
        secrets=load_object(secrets) if secrets else None,
    )
    try:
        web_app = create_app(runner, token=token, reviewers=named)
    except ValueError as exc:
        _err().print(str(exc), style="red")
        raise typer.Exit(2) from None
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
    live: Annotated[
        bool, typer.Option(help="stream each run into the session's live row (the web timeline shows it growing)")
    ] = False,
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
        streaming=live,
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
