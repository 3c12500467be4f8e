"""The Starlette application of ``codeact serve``: pages, the JSON API, server-sent events,
the token and the cross-site checks."""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets as _secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

try:
    import jinja2
    import markupsafe
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.types import ASGIApp, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("codeact serve needs starlette, uvicorn and jinja2: pip install 'codeact[web]'") from exc

import anyio

from .._values import readable
from ..exceptions import (
    AlreadyResumingError,
    CodeActError,
    DecisionMismatchError,
    DecisionRefusedError,
    DecisionValueError,
    EditNotSupportedError,
    NoPendingCallError,
    SessionNotFoundError,
    StaleCheckpointError,
    StoreMethodMissingError,
    ValueConversionError,
)
from ..runner import Runner
from ..turns import Decision
from . import _views as views
from ._json import _strict_json
from ._reviewers import LOOPBACK_ACTOR, reviewer_tokens

TOKEN_ENV = "CODEACT_SERVE_TOKEN"
"""The environment variable ``codeact serve`` reads its token from when ``--token`` is not given."""

TOKEN_COOKIE = "codeact_token"
CSRF_COOKIE = "codeact_csrf"
CSRF_FIELD = "csrf"
HERE = Path(__file__).parent
MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest request body served (a decision's JSON or a form); larger ones get 413."""
VERBS = ("approve", "deny", "complete", "resolve")
DISMISS_REASON = "dismissed in the inbox by {actor}: nobody should act on this call"
"""The reason a **Dismiss** (a deny nobody had to write) gives the script."""
LABELS = {
    "user": "message",
    "reply": "answer",
    "feedback": "fed back",
    "script": "script",
    "output": "printed",
    "tool_call": "tool call",
    "tool_result": "tool result",
    "waiting": "paused",
    "pause": "paused",
    "remark": "notice",
    "error": "error",
    "state": "state change",
    "decision": "decision",
}
NOTICES = {
    "approve": "Approved; the run resumed.",
    "deny": "Denied; the reason was fed back to the script.",
    "complete": "Completed; the run resumed with the value.",
    "resolve": "Decided; the run resumed.",
    "dismiss": "Dismissed; the call was denied and the script was told why.",
    "recover": "Recovered; the interrupted turn ran on.",
    "batch": "Decided together in one step; the run resumed.",
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only listens on this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HttpError(Exception):
    """A request refused with ``status`` and a message (nothing ran)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_ERROR_STATUS: list[tuple[type[BaseException], int]] = [
    # First match wins: the decision errors before their bases (DecisionRefusedError is a
    # NoPendingCallError, DecisionValueError a ValueError, EditNotSupportedError a
    # NotImplementedError).
    (DecisionValueError, 400),  # edited arguments, a payload or a value of the wrong shape
    (EditNotSupportedError, 409),  # the tool forbids edits (editable=False): approve as made, or deny
    (DecisionRefusedError, 409),  # the call's kind does not take this verb
    (StoreMethodMissingError, 501),  # the store lacks a method of the contract (list_decisions)
    (DecisionMismatchError, 409),
    (AlreadyResumingError, 409),
    (NoPendingCallError, 409),
    (StaleCheckpointError, 409),
    (SessionNotFoundError, 404),
    (ValueConversionError, 400),
    (ValueError, 400),
]


def _status_of(exc: BaseException) -> int:
    for kind, status in _ERROR_STATUS:
        if isinstance(exc, kind):
            return status
    return 500


class _Guard:
    """ASGI middleware: a token on every request (when any is set), the cross-site checks on
    every POST, and who is asking: ``scope["state"]["actor"]`` is the name of the reviewer
    whose token the request carried (``SHARED_TOKEN_ACTOR`` for the shared token,
    ``LOOPBACK_ACTOR`` on a server without tokens)."""

    def __init__(self, app: ASGIApp, tokens: dict[str, str]) -> None:
        self.app = app
        self.tokens = tokens
        self.token = next(iter(tokens), None)  # any: a token is required when one is set

    def _actor(self, request: Request) -> tuple[str | None, str]:
        """(the actor, the token given) of the first token the request carries that matches."""
        # What the request says explicitly wins over the cookie an earlier sign-in left.
        auth = request.headers.get("authorization", "")
        given = [auth[7:].strip() if auth.lower().startswith("bearer ") else ""]
        given += [request.query_params.get("token", ""), request.cookies.get(TOKEN_COOKIE, "")]
        for g in given:
            if not g:
                continue
            for token, actor in self.tokens.items():
                if hmac.compare_digest(g.encode(), token.encode()):
                    return actor, token
        return None, ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        response: Response | None = None
        host = urlsplit("//" + request.headers.get("host", "")).hostname or ""
        actor, given = self._actor(request) if self.token is not None else (LOOPBACK_ACTOR, "")
        scope.setdefault("state", {})["actor"] = actor
        if self.token is None and not is_loopback(host):
            # Without a token only this machine may ask: a page of another site whose name was
            # rebound to 127.0.0.1 (DNS rebinding) sends its own name as Host, and is same-origin.
            response = JSONResponse(
                {"error": f"Host {host!r} is not a loopback name; without a token only localhost is served"},
                status_code=403,
            )
        elif actor is None:
            response = JSONResponse(
                {"error": "a valid token is required (Authorization: Bearer TOKEN, or ?token=TOKEN once)"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        elif request.method == "POST":
            problem = _cross_site(request)
            if problem:
                response = JSONResponse({"error": f"cross-site request refused: {problem}; nothing ran"}, 403)
        elif (
            self.token is not None
            and request.method == "GET"
            and "token" in request.query_params
            and not request.url.path.startswith("/api/")
        ):
            # ?token= once: kept in a cookie, and dropped from the address bar.
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + ("?" + urlencode(rest) if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict")
        if response is None and request.method == "POST":
            length = request.headers.get("content-length", "")
            if length.isdigit() and int(length) > MAX_BODY_BYTES:
                response = JSONResponse({"error": f"the body is over {MAX_BODY_BYTES} bytes; nothing ran"}, 413)
        if response is not None:
            await response(scope, receive, send)
            return
        await self.app(scope, _capped(receive) if request.method == "POST" else receive, send)


SECURITY_HEADERS = {
    "content-security-policy": "frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
"""Sent with every response (pages, the API, the event stream, static files, refusals): no
page of another origin may frame the inbox (a click on a framed Approve would run the call),
nothing is sniffed, leaks its address, or is kept in a cache."""


class _Headers:
    """ASGI middleware (the outermost): ``SECURITY_HEADERS`` on every HTTP response, in
    place of any the route set."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.extra = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
        self.names = {k.encode() for k in SECURITY_HEADERS}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in self.names]
                message = {**message, "headers": kept + self.extra}
            await send(message)

        await self.app(scope, receive, sending)


def _capped(receive: Receive) -> Receive:
    """``receive`` that stops a body without a Content-Length past ``MAX_BODY_BYTES``."""
    seen = 0

    async def capped() -> Any:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > MAX_BODY_BYTES:
                raise HttpError(413, f"the body is over {MAX_BODY_BYTES} bytes; nothing ran")
        return message

    return capped


def _cross_site(request: Request) -> str:
    """Why a POST looks cross-site, or ""."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"Sec-Fetch-Site is {site}"
    origin = request.headers.get("origin")
    if origin == "null" and site == "same-origin":
        # Our own pages send "Referrer-Policy: no-referrer", under which a browser sends a
        # form's Origin as "null"; its Sec-Fetch-Site still says same-origin.
        return ""
    if origin is not None:
        parts = urlsplit(origin)
        if parts.netloc.lower() != request.headers.get("host", "").lower():
            return f"Origin {origin} is not this server"
    return ""


def create_app(
    runner: Runner,
    *,
    token: str | None = None,
    reviewers: Mapping[str, str] | None = None,
    poll_interval: float = 0.5,
) -> Starlette:
    """The ``codeact serve`` application over ``runner`` (its app, store, agent and secrets).

    Args:
        runner: decides and resumes the calls (``Runner.approve/deny/complete/resolve_in_doubt``,
            ``Runner.recover``); its ``secrets`` are redacted from everything served.
        token: when given, every request must carry it or a reviewer's token
            (``Authorization: Bearer TOKEN``, or ``?token=TOKEN`` once in a browser, then kept
            in a cookie); else 401. Decisions made with it are recorded as actor ``"web"``.
        reviewers: ``{token: name}`` (``load_reviewers``): each reviewer's own token; a
            decision made with it is recorded with the reviewer's name as its actor. Any of
            these tokens, or ``token``, is then required on every request.
        poll_interval: seconds between two looks at the store by a server-sent events stream.

    Returns:
        An ASGI application (run it with uvicorn). Routes and JSON shapes: ``docs/web.md``.

    Raises:
        ValueError: the shared token is also a reviewer's.
    """
    tokens = reviewer_tokens(token, reviewers)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=jinja2.select_autoescape(("html",), default=True),
        undefined=jinja2.StrictUndefined,
        finalize=_shown,  # every text a page shows: bidi controls and stray separators escaped
    )
    env.filters["tojson_pretty"] = lambda v: views.escape_bidi(_pretty(v))
    env.globals["call_text"] = views.call_text
    env.globals["max_call_chars"] = views.MAX_CALL_CHARS
    redact = views.redactor(runner)

    def runner_for(app_name: str | None) -> Runner:
        """The runner of ``?app=`` (another app of the same store, agent and secrets)."""
        if not app_name or app_name == runner.app_name:
            return runner
        return Runner(
            app_name=app_name, agent=runner.agent, session_service=runner.session_service, secrets=runner.secrets
        )

    def page(request: Request, template: str, http_status: int = 200, **data: Any) -> HTMLResponse:
        csrf = request.cookies.get(CSRF_COOKIE) or _secrets.token_urlsafe(24)
        html = env.get_template(template).render(
            csrf=csrf,
            csrf_field=CSRF_FIELD,
            labels=LABELS,
            actor=getattr(request.state, "actor", None),
            app=request.query_params.get("app") or runner.app_name,
            **data,
        )
        response = HTMLResponse(redact(html), status_code=http_status)
        if request.cookies.get(CSRF_COOKIE) != csrf:
            response.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="strict")
        return response

    def error_page(request: Request, exc: HttpError) -> HTMLResponse:
        return page(request, "error.html", exc.status, message=redact(exc.message), code=exc.status)

    # ------------------------------------------------------------ data

    async def found_session(r: Runner, session_id: str, user_id: str | None, after: str = "") -> Any:
        """The session, or an HttpError: 400 for an ambiguous id, 404 (message + ``after``) when absent."""
        try:
            session = await views.find_session(r, session_id, user_id)
        except ValueError as exc:
            raise HttpError(400, str(exc)) from None
        if session is None:
            raise HttpError(404, f"no session {session_id!r} in app {r.app_name!r}{after}")
        return session

    async def session_view(r: Runner, session_id: str, user_id: str | None) -> dict[str, Any]:
        session = await found_session(r, session_id, user_id)
        status, info = await views.session_status(r, session)
        pending = [views.pending_dict(session.user_id, session.id, p) for p in (info.pending if info else [])]
        detail = await views.turn_detail(r, session, info)
        return {
            "session": views.scrub(
                {
                    "id": session.id,
                    "app_name": session.app_name,
                    "user_id": session.user_id,
                    "status": status,
                    "updated": views._iso(session.last_update_time),
                    "in_flight": info.in_flight if info is not None else [],
                },
                redact,
            ),
            "items": views.timeline(session.events, redact),
            "live": await views.live_item(r, session, redact),
            "pending": views.scrub(pending, redact),
            "detail": views.scrub(detail, redact),
            "events": session.events,
            "state": views.scrub(session.state, redact),
        }

    def decision_of(verb: str, call_key: str, body: dict[str, Any], actor: str) -> Decision:
        """The ``Decision`` a request's ``body`` asks for on ``call_key``, made by ``actor``.
        ``body["dismiss"]`` true denies with the stock reason ``DISMISS_REASON``.

        Raises:
            HttpError: no such verb (404), bad input (400); nothing ran.
        """
        if verb not in VERBS:
            raise HttpError(404, f"no such decision {verb!r}: one of {', '.join(VERBS)}")
        digest = body.get("digest")
        if not isinstance(digest, str) or not digest:
            raise HttpError(400, "digest is required: the digest of the pending call decided on (/api/pending)")
        fields: dict[str, Any] = {"call_key": call_key, "digest": digest, "actor": actor}
        if verb == "deny":
            reason = body.get("reason")
            if reason is not None and not isinstance(reason, str):
                raise HttpError(400, "reason must be a string")
            if body.get("dismiss") is True:
                reason = DISMISS_REASON.format(actor=actor)
            fields.update(verb="deny", reason=reason or None)
        elif verb == "complete":
            error = body.get("error")
            if error is not None and not isinstance(error, str):
                raise HttpError(400, "error must be a string")
            if error is None and "value" not in body:
                raise HttpError(400, "give the call's result as value (any JSON), or error (a text)")
            reason = body.get("reason")
            if reason is not None and not isinstance(reason, str):
                raise HttpError(400, "reason must be a string")
            fields.update(
                verb="complete",
                payload=None if error is not None else body.get("value"),
                error=error,
                reason=reason or None,
            )
        elif verb == "resolve":
            action = body.get("action")
            if action not in ("rerun", "skip", "fail"):
                raise HttpError(400, "action must be rerun, skip or fail")
            reason = body.get("reason") or ""
            if not isinstance(reason, str):
                raise HttpError(400, "reason must be a string")
            value = body.get("value") if action == "skip" else None
            fields.update(verb="resolve", action=action, payload=value, reason=reason or None)
        else:
            fields["verb"] = verb
            reason = body.get("reason")
            if reason is not None and not isinstance(reason, str):
                raise HttpError(400, "reason must be a string")
            fields["reason"] = reason or None  # why it was approved: journaled, shown on the timeline
            if (
                body.get("args") is not None
            ):  # approve with edited arguments (validated by the runner, before anything runs)
                if not isinstance(body["args"], dict):
                    raise HttpError(400, "args must be a JSON object of the call's arguments; nothing ran")
                fields["args"] = body["args"]
            if body.get("payload") is not None:  # what the approved tool reads (its payload_type)
                fields["payload"] = body["payload"]
        try:
            return Decision(**fields)
        except CodeActError as exc:
            raise HttpError(_status_of(exc), f"{exc}") from None
        except ValueError as exc:
            raise HttpError(400, str(exc)) from None

    async def run_decisions(
        r: Runner, decision: Decision | list[Decision], user_id: str, session_id: str, session: Any
    ) -> dict[str, Any]:
        """Runs one decision, or a batch as one ``Runner.decide([...])`` (all or none), and
        returns ``{"session_id", "user_id", "events", "pending"}``.

        Raises:
            HttpError: bad input (400), no such call (404), not pending any more or decided
                on a stale view (409); nothing ran.
        """
        keys = [d.call_key or "" for d in (decision if isinstance(decision, list) else [decision])]
        try:
            events = [e async for e in r.decide(decision, user_id=user_id, session_id=session_id)]
        except DecisionMismatchError as exc:
            which = ", ".join(keys)
            raise HttpError(
                409,
                f"call {which} has changed since the page was loaded: the decision was made on a stale view ({exc})",
            ) from None
        except (DecisionRefusedError, AlreadyResumingError) as exc:
            raise HttpError(409, str(exc)) from None
        except NoPendingCallError as exc:
            gone = [k for k in keys if session is not None and _mentions(session.events, k)]
            if gone:
                raise HttpError(
                    409, f"call {', '.join(gone)} is not pending any more (it was decided already); nothing ran"
                ) from None
            raise HttpError(
                404,
                f"{exc}; nothing ran"
                if len(keys) > 1
                else f"no pending call {keys[0]!r} in session {session_id!r}; nothing ran",
            ) from None
        except CodeActError as exc:
            raise HttpError(_status_of(exc), f"{exc}") from None
        except ValueError as exc:
            raise HttpError(400, str(exc)) from None
        return await _after(r, user_id, session_id, events)

    async def decide(r: Runner, verb: str, call_key: str, body: dict[str, Any], actor: str) -> dict[str, Any]:
        """Runs one decision, recorded as made by ``actor``, and returns ``{"session_id",
        "user_id", "events", "pending"}`` (``decision_of``, ``run_decisions``).

        Raises:
            HttpError: bad input (400), no such call (404), not pending any more or decided
                on a stale view (409); nothing ran.
        """
        decision = decision_of(verb, call_key, body, actor)
        session_id, user_id = body.get("session_id"), body.get("user_id")
        for name, value in (("session_id", session_id), ("user_id", user_id)):
            if value is not None and not isinstance(value, str):
                raise HttpError(400, f"{name} must be a string")
        session = None
        if session_id is not None:
            # The runner finds the call, checks its digest and kind, and restores the paused
            # continuation once: nothing is looked up here beforehand (issue 47).
            session = await found_session(r, session_id, user_id, "; nothing ran")
            user_id = session.user_id
        else:
            for (user, sid), calls in (await r.list_pending(user_id=user_id)).items():
                if any(p.call_key == call_key for p in calls):
                    user_id, session_id = user, sid
            if session_id is None:
                raise HttpError(404, f"no pending call {call_key!r} (unknown, or decided already); nothing ran")
        assert user_id is not None and session_id is not None
        return await run_decisions(r, decision, user_id, session_id, session)

    async def decide_batch(r: Runner, session_id: str, user_id: str | None, members: Any, actor: str) -> dict[str, Any]:
        """Runs several decisions on calls of one session's turn as one durable step
        (``Runner.decide([...])``: all or none, one claim, one resume). ``members``: a list of
        ``{"call_key", "verb", "digest", ...}`` (the fields of ``POST /api/pending/...``).

        Raises:
            HttpError: as ``decide``, for the first member refused; nothing ran.
        """
        if not isinstance(members, list) or not members:
            raise HttpError(400, "decisions must be a non-empty list of decisions; nothing ran")
        decisions: list[Decision] = []
        for i, m in enumerate(members):
            if not isinstance(m, dict):
                raise HttpError(400, f"decision {i} is not a JSON object; nothing ran")
            key, verb = m.get("call_key"), m.get("verb")
            if not isinstance(key, str) or not key or not isinstance(verb, str):
                raise HttpError(400, f"decision {i} needs call_key and verb (strings); nothing ran")
            try:
                decisions.append(decision_of(verb, key, m, actor))
            except HttpError as exc:
                raise HttpError(exc.status, f"decision {i} (call {key}): {exc.message}") from None
        session = await found_session(r, session_id, user_id, "; nothing ran")
        return await run_decisions(r, decisions, session.user_id, session.id, session)

    async def _after(r: Runner, user_id: str, session_id: str, events: list[Any]) -> dict[str, Any]:
        pending = await r.pending(user_id=user_id, session_id=session_id)
        return {
            "session_id": session_id,
            "user_id": user_id,
            "events": views.scrub([e.model_dump(mode="json") for e in events], redact),
            "pending": views.scrub([views.pending_dict(user_id, session_id, p) for p in pending], redact),
        }

    async def _drain(stream: AsyncIterator[Any]) -> list[Any]:
        try:
            return [event async for event in stream]
        except CodeActError as exc:
            raise HttpError(_status_of(exc), f"{exc}") from None
        except ValueError as exc:
            raise HttpError(400, str(exc)) from None

    async def recover(r: Runner, session_id: str, user_id: str | None) -> dict[str, Any]:
        session = await found_session(r, session_id, user_id, "; nothing ran")
        events = await _drain(r.recover(user_id=session.user_id, session_id=session.id))
        return await _after(r, session.user_id, session.id, events)

    def _filters(request: Request) -> dict[str, str | None]:
        """``?kind=`` and ``?tool=`` of an inbox request.

        Raises:
            HttpError: 400 for a kind not in ``views.INBOX_KINDS``.
        """
        kind = request.query_params.get("kind") or None
        if kind is not None and kind not in views.INBOX_KINDS:
            raise HttpError(400, f"no such kind {kind!r}: one of {', '.join(views.INBOX_KINDS)}")
        return {"kind": kind, "tool": request.query_params.get("tool") or None}

    async def inbox_data(r: Runner, user: str | None, **filters: str | None) -> list[dict[str, Any]]:
        return await views.inbox(r, user, redact, **filters)

    async def inbox_calls(r: Runner, user: str | None, **filters: str | None) -> list[dict[str, Any]]:
        return [c for c in await inbox_data(r, user, **filters) if c["card"] == "call"]

    # ------------------------------------------------------------ pages

    def _user(request: Request) -> str | None:
        return request.query_params.get("user") or None

    async def sessions_page(request: Request) -> Response:
        r = runner_for(request.query_params.get("app"))
        user = _user(request)
        rows = await views.list_sessions(r, user, redact)
        return page(request, "sessions.html", sessions=rows, user=user or "", app_name=r.app_name)

    async def inbox_page(request: Request) -> Response:
        r = runner_for(request.query_params.get("app"))
        user = _user(request)
        version = await views.live_version(r, user)  # before the data: a change in between shows again
        try:
            filters = _filters(request)
        except HttpError as exc:
            return error_page(request, exc)
        calls = views.batches(await inbox_data(r, user, **filters))
        stream = "/api/stream?" + urlencode({"view": "inbox", "app": r.app_name, **({"user": user} if user else {})})
        return page(
            request,
            "inbox.html",
            calls=calls,
            kinds=views.INBOX_KINDS,
            kind=filters["kind"] or "",
            tool=filters["tool"] or "",
            user=user or "",
            version=version,
            stream=stream,
            app_name=r.app_name,
        )

    async def session_page(request: Request) -> Response:
        r = runner_for(request.query_params.get("app"))
        version = await views.live_version(r, _user(request), request.path_params["session_id"])
        try:
            view = await session_view(r, request.path_params["session_id"], _user(request))
        except HttpError as exc:
            return error_page(request, exc)
        s = view["session"]
        stream = "/api/stream?" + urlencode(
            {"view": "session", "app": r.app_name, "session": s["id"], "user": s["user_id"]}
        )
        notice = NOTICES.get(request.query_params.get("done", ""))
        return page(
            request,
            "session.html",
            **view,
            version=version,
            stream=stream,
            notice=notice,
            app_name=r.app_name,
        )

    async def _form(request: Request) -> dict[str, Any]:
        form = await request.form()
        given = str(form.get(CSRF_FIELD, ""))
        cookie = request.cookies.get(CSRF_COOKIE, "")
        if not given or not cookie or not hmac.compare_digest(given.encode(), cookie.encode()):
            raise HttpError(403, "the form's CSRF token is missing or wrong (reload the page); nothing ran")
        return {k: str(v) for k, v in form.items() if k != CSRF_FIELD}

    def _timeline_url(app_name: str, session_id: str, user_id: str, done: str) -> str:
        path = quote(session_id, safe="")  # an id may hold ?, # or spaces
        return f"/sessions/{path}?" + urlencode({"app": app_name, "user": user_id, "done": done})

    async def decide_form(request: Request) -> Response:
        r = runner_for(request.query_params.get("app"))
        verb = request.path_params["verb"]
        try:
            fields = await _form(request)
            body: dict[str, Any] = {k: fields.get(k) for k in ("digest", "session_id", "user_id", "reason", "action")}
            body = {k: v for k, v in body.items() if v not in (None, "")}
            typed = fields.get("typed") == "1"  # a typed answer's form (result_type / payload_type)
            if verb == "complete" and fields.get("outcome") == "error":
                body["error"] = fields.get("error") or "failed"
            elif verb == "complete" and typed:
                try:
                    body["value"] = views.args_from_form(fields, "result")
                except ValueError as exc:
                    raise HttpError(400, f"{exc}; nothing ran") from None
            elif verb in ("complete", "resolve") and fields.get("value", "") != "":
                try:
                    body["value"] = _strict_json(fields["value"])
                except json.JSONDecodeError as exc:
                    raise HttpError(400, f"the value is not JSON: {exc}; nothing ran") from None
                except RecursionError:
                    raise HttpError(400, "the value is nested too deeply; nothing ran") from None
            elif verb == "complete":
                raise HttpError(400, "give the call's result as JSON; nothing ran")
            if verb == "deny" and fields.get("dismiss") == "1":
                body["dismiss"] = True
            if verb == "approve" and (fields.get("edit") == "1" or typed):
                try:
                    if fields.get("edit") == "1":
                        body["args"] = views.args_from_form(fields)
                    if typed:
                        body["payload"] = views.args_from_form(fields, "payload")
                except ValueError as exc:
                    raise HttpError(400, f"{exc}; nothing ran") from None
            result = await decide(r, verb, request.path_params["call_key"], body, request.state.actor)
        except HttpError as exc:
            return error_page(request, exc)
        done = "dismiss" if body.get("dismiss") else verb
        return RedirectResponse(_timeline_url(r.app_name, result["session_id"], result["user_id"], done), 303)

    def batch_members(fields: dict[str, str]) -> list[dict[str, Any]]:
        """The decisions a batch card's form gives: per call ``i``, ``call:i`` and ``digest:i``
        with the reviewer's ``choice:i`` (``approve``, ``deny``, ``complete`` with ``value:i``
        as JSON, or ``leave``: not decided now) and ``reason:i``; ``all=approve`` (the
        **Approve all** button) approves every call of the card instead.

        Raises:
            HttpError: 400 for a value that is not JSON, or nothing chosen; nothing ran.
        """
        members: list[dict[str, Any]] = []
        everything = fields.get("all") == "approve"
        i = 0
        while f"call:{i}" in fields:
            key, digest = fields[f"call:{i}"], fields.get(f"digest:{i}", "")
            choice = "approve" if everything else fields.get(f"choice:{i}", "leave")
            i += 1
            if choice == "leave":
                continue
            member: dict[str, Any] = {"call_key": key, "digest": digest}
            if choice in ("approve", "deny", "complete"):
                member["verb"] = choice
            elif choice in ("rerun", "fail"):
                member.update(verb="resolve", action=choice)
            else:
                raise HttpError(400, f"no such choice {choice!r} for call {key}; nothing ran")
            reason = fields.get(f"reason:{i - 1}", "")
            if reason:
                member["reason"] = reason
            if choice == "complete":
                try:
                    member["value"] = _strict_json(fields.get(f"value:{i - 1}", ""))
                except (json.JSONDecodeError, RecursionError) as exc:
                    raise HttpError(400, f"the value for call {key} is not JSON: {exc}; nothing ran") from None
            members.append(member)
        if not members:
            raise HttpError(400, "choose what to do with at least one call (or Approve all); nothing ran")
        return members

    async def batch_form(request: Request) -> Response:
        r = runner_for(request.query_params.get("app"))
        try:
            fields = await _form(request)
            members = batch_members(fields)
            result = await decide_batch(
                r, request.path_params["session_id"], fields.get("user_id") or None, members, request.state.actor
            )
        except HttpError as exc:
            return error_page(request, exc)
        return RedirectResponse(_timeline_url(r.app_name, result["session_id"], result["user_id"], "batch"), 303)

    async def recover_form(request: Request) -> Response:
        r = runner_for(request.query_params.get("app"))
        try:
            fields = await _form(request)
            result = await recover(r, request.path_params["session_id"], fields.get("user_id") or None)
        except HttpError as exc:
            return error_page(request, exc)
        return RedirectResponse(_timeline_url(r.app_name, result["session_id"], result["user_id"], "recover"), 303)

    # ------------------------------------------------------------ JSON API

    def api(fn: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return JSONResponse(await fn(request))
            except HttpError as exc:
                return JSONResponse({"error": redact(exc.message)}, status_code=exc.status)

        return endpoint

    async def _json_body(request: Request) -> dict[str, Any]:
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            raise HttpError(415, "send the body as application/json; nothing ran")
        try:
            body = _strict_json(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HttpError(400, f"the body is not JSON: {exc}; nothing ran") from None
        except RecursionError:
            raise HttpError(400, "the body is nested too deeply; nothing ran") from None
        if not isinstance(body, dict):
            raise HttpError(400, "the body must be a JSON object; nothing ran")
        return body

    @api
    async def api_sessions(request: Request) -> Any:
        r = runner_for(request.query_params.get("app"))
        return {"app_name": r.app_name, "sessions": await views.list_sessions(r, _user(request), redact)}

    @api
    async def api_pending(request: Request) -> Any:
        r = runner_for(request.query_params.get("app"))
        return {"app_name": r.app_name, "pending": await inbox_calls(r, _user(request), **_filters(request))}

    @api
    async def api_events(request: Request) -> Any:
        r = runner_for(request.query_params.get("app"))
        view = await session_view(r, request.path_params["session_id"], _user(request))
        return {
            "session": view["session"],
            "events": views.scrub([e.model_dump(mode="json") for e in view["events"]], redact),
            "state": view["state"],
            "pending": view["pending"],
            "timeline": view["items"],
            "live": view["live"],  # what a running turn streams now (never an event), or None
        }

    @api
    async def api_decide(request: Request) -> Any:
        r = runner_for(request.query_params.get("app"))
        body = await _json_body(request)
        return await decide(r, request.path_params["verb"], request.path_params["call_key"], body, request.state.actor)

    @api
    async def api_decide_batch(request: Request) -> Any:
        r = runner_for(request.query_params.get("app"))
        body = await _json_body(request)
        user = body.get("user_id")
        if user is not None and not isinstance(user, str):
            raise HttpError(400, "user_id must be a string")
        return await decide_batch(
            r, request.path_params["session_id"], user, body.get("decisions"), request.state.actor
        )

    @api
    async def api_recover(request: Request) -> Any:
        r = runner_for(request.query_params.get("app"))
        body = await _json_body(request)
        user = body.get("user_id")
        if user is not None and not isinstance(user, str):
            raise HttpError(400, "user_id must be a string")
        return await recover(r, request.path_params["session_id"], user)

    async def api_stream(request: Request) -> Response:
        """Server-sent events: ``data: VERSION`` each time what the page shows changes."""
        r = runner_for(request.query_params.get("app"))
        view_name = request.query_params.get("view", "inbox")
        user = _user(request)
        session_id = request.query_params.get("session", "")

        async def version() -> str:
            # From the store's versions and counts: a poll restores no continuation.
            return await views.live_version(r, user, session_id if view_name == "session" else None)

        async def events() -> AsyncIterator[str]:
            last = None
            while not await request.is_disconnected():
                current = await version()
                if current != last:
                    last = current
                    yield f"data: {current}\n\n"
                await anyio.sleep(poll_interval)

        return StreamingResponse(events(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})

    routes = [
        Route("/", lambda request: RedirectResponse("/inbox" + _query(request), 303)),
        Route("/sessions", sessions_page),
        Route("/sessions/{session_id}", session_page),
        Route("/sessions/{session_id}/recover", recover_form, methods=["POST"]),
        Route("/sessions/{session_id}/decide", batch_form, methods=["POST"]),
        Route("/inbox", inbox_page),
        Route("/pending/{call_key}/{verb}", decide_form, methods=["POST"]),
        Route("/api/sessions", api_sessions),
        Route("/api/sessions/{session_id}/events", api_events),
        Route("/api/sessions/{session_id}/recover", api_recover, methods=["POST"]),
        Route("/api/sessions/{session_id}/decide", api_decide_batch, methods=["POST"]),
        Route("/api/pending", api_pending),
        Route("/api/pending/{call_key}/{verb}", api_decide, methods=["POST"]),
        Route("/api/stream", api_stream),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(_Guard, tokens=tokens)
    app.add_middleware(_Headers)  # added last: the outermost, so refusals get the headers too
    return app


def _shown(value: Any) -> Any:
    """Jinja's ``finalize``: a text a page prints with its bidirectional controls and the line
    separators the interpreter does not break at written as ``\\uXXXX`` (``views.escape_bidi``),
    so printed output, user messages and ids cannot reorder what the reviewer reads."""
    if isinstance(value, markupsafe.Markup):
        return markupsafe.Markup(views.escape_bidi(str(value)))
    if isinstance(value, str):
        return views.escape_bidi(value)
    return value


def _pretty(value: Any) -> str:
    """The ``tojson_pretty`` filter: indented JSON, or Python's notation for a value JSON
    cannot hold (a dict with tuple keys reads ``{(1, 2): 3}``)."""
    try:
        return json.dumps(value, ensure_ascii=False, indent=1, default=repr)
    except (TypeError, ValueError):
        return readable(value)


def _query(request: Request) -> str:
    return "?" + request.url.query if request.url.query else ""


def _mentions(events: list[Any], call_key: str) -> bool:
    """Whether the session's events name ``call_key`` (a call that was pending once)."""
    for event in events:
        if call_key in event.actions.requested_tool_confirmations or call_key in event.long_running_tool_ids:
            return True
        for part in event.content.parts if event.content is not None else []:
            for ref in (part.function_call, part.function_response):
                if ref is not None and ref.id == call_key:
                    return True
    return False
