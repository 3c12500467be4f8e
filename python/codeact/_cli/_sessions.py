"""``codeact sessions``: the sessions in a store, the calls waiting for a human, deciding
them (``Runner.decide``: approve, deny, complete, resolve a call in doubt, recover an
interrupted turn) and discarding a turn that cannot resume. Split from ``codeact.cli``, which
adds ``sessions_app`` to the ``codeact`` command."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
import typer
from rich.markup import escape

from ..console import EventPrinter
from ._common import (
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
    _out,
    _session_service,
    load_object,
)

__all__ = ("DECIDE_VERBS", "AppOption", "sessions_app")

sessions_app = typer.Typer(
    help="Inspect sessions in a SQLite file or a PostgreSQL database and act on calls waiting for a human.",
    pretty_exceptions_show_locals=False,
)


def _runner(db: str, app_name: str, agent_spec: str | None, chat_agent: dict[str, Any] | None = None) -> Any:
    from ..agent import CodeActAgent
    from ..models import ScriptedModel
    from ..runner import Runner
    from ..runtime import MontyRuntime

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

    async def load() -> tuple[Any, list[dict[str, Any]]]:
        service = _session_service(db)
        try:
            found = await service.get_session(app_name=app_name, user_id=user, session_id=session_id)
            return found, (await _decisions(service, app_name, user, session_id) if found is not None else [])
        finally:
            await _close(service)

    found, decisions = _call(load)
    if found is None:
        _err().print(f"no session {session_id!r} for user {user!r} in app {app_name!r}", style="red")
        raise typer.Exit(1)
    if json_output:
        data = json.loads(found.model_dump_json())
        data["decisions"] = decisions
        sys.stdout.write(json.dumps(data) + "\n")
        return
    printer = EventPrinter(_out())
    for event in found.events:
        printer(event)
    from .._values import json_native, readable

    state = json.dumps(found.state, default=repr) if json_native(found.state) else readable(found.state)
    _out().print(f"state: {state}", style="magenta", highlight=False)
    for d in decisions:
        import datetime as _dt

        when = _dt.datetime.fromtimestamp(d.get("at", 0), tz=_dt.timezone.utc).isoformat(timespec="seconds")
        who = d.get("actor") or "(no actor)"
        line = f"decision: {when} {who} {d.get('act')} call {d.get('call_key')} to {d.get('tool', '')!r}"
        if d.get("args") is not None:
            line += f" with edited args {json.dumps(d['args'])}"
        if d.get("reason"):
            line += f" — {d['reason']}"
        if d.get("sealed"):
            line += " (sealed: not checked without the key)"
        _out().print(_one_line(line), style="cyan", highlight=False, markup=False)


def _one_line(text: str) -> str:
    """``text`` with its control and format characters (escape sequences, newlines, bidi
    controls) written as ``\\n`` / ``\\uXXXX``: a stored actor or reason cannot drive the terminal
    or fake another line of an audit listing."""
    import unicodedata

    return "".join(
        (repr(c)[1:-1] if c in "\n\r\t" else f"\\u{ord(c):04x}")
        if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")
        else c
        for c in text
    )


async def _decisions(service: Any, app_name: str, user: str, session_id: str) -> list[dict[str, Any]]:
    """The session's decision records (who decided what), oldest first, as JSON data. A
    sealed record is read without checking its seal (the command has no key) and marked
    ``"sealed": true``; ``Runner.decisions`` checks seals. A store without ``list_decisions``
    gives none."""
    from ..exceptions import StoreMethodMissingError

    try:
        rows = await service.list_decisions(app_name=app_name, user_id=user, session_id=session_id)
    except StoreMethodMissingError:
        return []
    found: list[dict[str, Any]] = []
    for row in rows:
        try:
            data = json.loads(row.record.data)
            if isinstance(data, dict) and isinstance(data.get("p"), str) and "m" in data:
                data = {**json.loads(data["p"]), "sealed": True}
        except ValueError:
            continue
        if isinstance(data, dict):
            found.append({**data, "turn": row.turn})
    found.sort(key=lambda d: d.get("at", 0))
    return found


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
    from ..exceptions import CodeActError

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
    args: dict[str, Any] | None = None,
) -> Any:
    """The ``Decision`` a CLI verb stands for (exit 2 on a decision that does not validate)."""
    from pydantic import ValidationError

    from ..exceptions import ValueConversionError
    from ..turns import Decision

    who = actor if actor is not None else _os_user()  # every decision says who made it
    fields: dict[str, Any] = {"call_key": call, "digest": digest, "actor": who, "reason": reason or None}
    if verb in ("rerun", "skip", "fail"):
        fields.update(verb="resolve", action=verb, payload=value if verb == "skip" else None)
    elif verb == "complete":
        fields.update(verb="complete", payload=value, error=error)
    else:
        fields.update(verb=verb, args=args)
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
CallOption = Annotated[
    str | None,
    typer.Option(
        "--call",
        help="call key (`sessions pending` lists them); approve and deny may leave it out when one call is pending",
    ),
]


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


def _os_user() -> str | None:
    """The OS user running the command (the default ``--actor``), or None when unknown."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no user name in the environment nor the password database
        return None


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
    reason: Annotated[
        str | None,
        typer.Option(
            help="why: recorded with the decision (who, when, why); for deny / fail also the reason told to the model"
        ),
    ] = None,
    digest: Annotated[str | None, typer.Option(help="the call's digest as listed: refuse a changed call")] = None,
    actor: Annotated[
        str | None, typer.Option(help="who decides (journaled with the decision; default: the OS user)")
    ] = None,
    args: Annotated[
        str | None,
        typer.Option(
            "--args", help="approve: run the call with these arguments (a JSON object) instead; needs --digest"
        ),
    ] = None,
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
    takes = {"complete": ("value", "error"), "skip": ("value",), "approve": ("args",)}
    given = {"value": value, "error": error, "args": args}
    stray = [f"--{k}" for k, v in given.items() if v is not None and k not in takes.get(verb, ())]
    if stray:  # an option the verb ignores: the operator may have meant another verb
        _err().print(f"{verb} does not take {', '.join(stray)}; nothing was decided", style="red")
        raise typer.Exit(2)
    if verb == "complete" and (value is None) == (error is None):
        _err().print("complete: give exactly one of --value and --error", style="red")
        raise typer.Exit(2)
    edited: Any = None
    if args is not None:
        try:
            edited = json.loads(args)
        except json.JSONDecodeError as exc:
            _err().print(f"--args is not JSON ({exc}); nothing was decided", style="red")
            raise typer.Exit(2) from None
        if not isinstance(edited, dict):
            _err().print("--args must be a JSON object (the arguments by name); nothing was decided", style="red")
            raise typer.Exit(2)
    decision = _decision(
        verb, call, value=_json_or_text(value), error=error, reason=reason, digest=digest, actor=actor, args=edited
    )
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
