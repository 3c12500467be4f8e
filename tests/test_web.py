"""``codeact serve``: the approval inbox, on a real uvicorn server the test starts on a free
loopback port over a real SQLite file, driven by the machine's Chromium through Playwright
(Debian's ``chromium``; never ``playwright install``) and by plain HTTP for the API.

The browser tests skip when Playwright or Chromium is missing, and fail instead under
``CODEACT_REQUIRE_BROWSER=1`` (CI). Every response the server sends is recorded and searched
for the runner's secret."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import anyio
import pytest

REQUIRE_BROWSER = os.environ.get("CODEACT_REQUIRE_BROWSER") == "1"
if REQUIRE_BROWSER:  # CI: a missing part fails the run instead of skipping it
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn
else:
    pytest.importorskip("starlette", reason="codeact[web] is not installed")
    pytest.importorskip("jinja2", reason="codeact[web] is not installed")
    uvicorn = pytest.importorskip("uvicorn", reason="codeact[web] is not installed")

import web_fixtures as wf  # noqa: E402
from codeact.web import create_app, is_loopback  # noqa: E402

# The screenshots of docs/web.md are taken by the browser test; they are written into docs/img
# only when asked (CODEACT_DOCS_SCREENSHOTS=1), so a test run leaves the checkout as it was.
DOCS_IMG = Path(__file__).resolve().parent.parent / "docs" / "img"
TOKEN = "t0ken-for-the-test"
WAIT_MS = 30_000  # a loaded 2-core machine: the page conditions below are awaited this long at most


# ------------------------------------------------------------------ the server


def in_thread(fn: Any, *args: Any) -> Any:
    """``anyio.run(fn, *args)`` in a worker thread (Playwright's sync API holds an event loop
    in this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, fn, *args).result()


class _Recorder:
    """ASGI middleware keeping every response body the server sends."""

    def __init__(self, app: Any, bodies: list[bytes]) -> None:
        self.app, self.bodies = app, bodies

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def recording(message: Any) -> None:
            if message["type"] == "http.response.body":
                self.bodies.append(message.get("body", b""))
            await send(message)

        await self.app(scope, receive, recording)


@dataclass
class Served:
    url: str
    db: Path
    runner: Any
    bodies: list[bytes] = field(default_factory=list)

    def call_of(self, session_id: str) -> dict[str, Any]:
        status, body = http("GET", f"{self.url}/api/pending", token=TOKEN)
        assert status == 200, body
        return next(p for p in body["pending"] if p["session_id"] == session_id)


def _serve(tmp_path: Path, token: str | None, **options: Any) -> Iterator[Served]:
    db = tmp_path / "sessions.db"
    runner = wf.make_runner(str(db))
    in_thread(wf.start, runner, "pay-1", "please pay bob")
    in_thread(wf.start, runner, "job-1", "run the nightly job")
    in_thread(wf.start, runner, "pay-2", "please pay carol", "bob")
    wf.PAID.clear()
    wf.SYNCED.clear()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue from now on: no waiting for uvicorn to start
    port = sock.getsockname()[1]
    served = Served(url=f"http://127.0.0.1:{port}", db=db, runner=runner)
    app = _Recorder(create_app(runner, token=token, poll_interval=0.1, **options), served.bodies)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        runner.session_service.close()
    assert not thread.is_alive(), "the server did not stop"
    leaked = [b[:200] for b in served.bodies if wf.SECRET.encode() in b]
    assert not leaked, f"the secret was served: {leaked}"
    assert served.bodies, "the server sent nothing"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A server with a token (the API tests send it)."""
    yield from _serve(tmp_path, TOKEN)


@pytest.fixture
def open_served(tmp_path: Path) -> Iterator[Served]:
    """A loopback server without a token (the browser tests)."""
    yield from _serve(tmp_path, None)


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy


def http(
    method: str,
    url: str,
    body: Any = None,
    *,
    token: str | None = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """(status, JSON body or text) of one request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None and raw is None:
        req.add_header("Content-Type", "application/json")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with _OPENER.open(req, timeout=60) as resp:
            status, text = resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


# ------------------------------------------------------------------ the browser


def _browser_missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install 'codeact[test-web]')"
    if _chromium() is None:
        return "no chromium on this machine (apt-get install chromium)"
    return None


def _chromium() -> str | None:
    return shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = _browser_missing()
    if missing is not None:
        if REQUIRE_BROWSER:
            pytest.fail(f"CODEACT_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--no-proxy-server"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    ctx = browser.new_context(viewport={"width": 1100, "height": 900})
    ctx.set_default_timeout(WAIT_MS)
    try:
        yield ctx
    finally:
        ctx.close()  # before the server stops: its event streams end with the pages


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


def test_the_inbox_lists_the_call_and_approve_runs_it_once_live(
    open_served: Served, context: Any, tmp_path: Path
) -> None:
    expect = _expect()
    shots = DOCS_IMG if os.environ.get("CODEACT_DOCS_SCREENSHOTS") == "1" else tmp_path
    inbox = context.new_page()
    inbox.goto(f"{open_served.url}/inbox")
    card = inbox.locator("article.pending", has_text="pay(amount=900)").first
    expect(card).to_be_visible()
    expect(card.locator("pre.excerpt .here")).to_contain_text('call_tool("pay", {"amount": 900})')
    expect(card.locator("ul.ran")).to_contain_text("found bob (key [REDACTED])")
    expect(card.locator("pre.stdout")).to_contain_text("looked up found bob")
    expect(inbox.locator("article.pending", has_text="start_job")).to_be_visible()
    shots.mkdir(parents=True, exist_ok=True)
    inbox.screenshot(path=str(shots / "web-inbox.png"), full_page=True)

    timeline = context.new_page()  # a second tab on the session, left alone: it updates itself
    timeline.goto(f"{open_served.url}/sessions/pay-1?user=alice")
    expect(timeline.locator(".item.waiting")).to_contain_text("pay(amount=900)")
    expect(timeline.locator(".item.reply")).to_have_count(0)

    card = inbox.locator("article.pending", has_text="pay(amount=900)").filter(has_text="pay-1")
    card.locator("button.approve").click()
    expect(inbox.locator(".notice")).to_contain_text("Approved")
    expect(inbox.locator(".item.reply")).to_contain_text("paid 900")
    expect(timeline.locator(".item.reply")).to_contain_text("paid 900")  # live, no reload
    expect(timeline.locator(".status").first).to_have_text("finished")
    assert wf.PAID == [900]
    timeline.screenshot(path=str(shots / "web-timeline.png"), full_page=True)
    assert (shots / "web-inbox.png").stat().st_size > 0 and (shots / "web-timeline.png").stat().st_size > 0

    inbox.goto(f"{open_served.url}/inbox")
    expect(inbox.locator("article.pending", has_text="pay-1")).to_have_count(0)
    sessions = context.new_page()
    sessions.goto(f"{open_served.url}/sessions?user=alice")
    expect(sessions.locator("tr", has_text="pay-1")).to_contain_text("finished")
    expect(sessions.locator("tr", has_text="job-1")).to_contain_text("paused")
    expect(sessions.locator("tr", has_text="pay-2")).to_have_count(0)  # bob's, filtered out
    assert wf.PAID == [900]


def test_a_new_pending_call_appears_in_an_open_inbox(open_served: Served, context: Any) -> None:
    expect = _expect()
    inbox = context.new_page()
    inbox.goto(f"{open_served.url}/inbox")
    expect(inbox.locator("article.pending")).to_have_count(3)
    in_thread(wf.start, open_served.runner, "pay-3", "please pay dave", "carol")
    expect(inbox.locator("article.pending")).to_have_count(4)
    expect(inbox.locator("article.pending", has_text="pay-3")).to_contain_text("pay(amount=900)")


def test_deny_feeds_the_reason_back(open_served: Served, context: Any) -> None:
    expect = _expect()
    page = context.new_page()
    page.goto(f"{open_served.url}/sessions/pay-1?user=alice")
    page.locator("article.pending input[name=reason]").fill("over the weekly budget")
    page.locator("article.pending button.deny").click()
    expect(page.locator(".notice")).to_contain_text("Denied")
    expect(page.locator(".item.reply")).to_contain_text("refused")
    expect(page.locator(".item.reply")).to_contain_text("over the weekly budget")
    assert wf.PAID == []


def test_a_stale_page_shows_the_conflict_and_runs_nothing(open_served: Served, context: Any) -> None:
    expect = _expect()
    page = context.new_page()
    page.route("**/api/stream*", lambda route: route.abort())  # a page that stopped updating
    page.goto(f"{open_served.url}/inbox")
    card = page.locator("article.pending", has_text="pay-1")
    expect(card).to_be_visible()
    call = open_served.call_of("pay-1")
    status, body = http(
        "POST",
        f"{open_served.url}/api/pending/{call['call_key']}/deny",
        {"digest": call["digest"], "session_id": "pay-1"},
    )
    assert status == 200, body  # decided elsewhere
    card.locator("button.approve").click()
    expect(page.locator("h1")).to_have_text("Conflict")
    expect(page.locator(".error")).to_contain_text("nothing ran")
    assert wf.PAID == []


def test_the_completion_form_resumes_the_long_running_call(open_served: Served, context: Any) -> None:
    expect = _expect()
    page = context.new_page()
    page.goto(f"{open_served.url}/inbox")
    card = page.locator("article.pending", has_text="start_job")
    card.locator("textarea[name=value]").fill("{not json")
    card.locator("button.complete").click()
    expect(page.locator(".error")).to_contain_text("not JSON")
    page.goto(f"{open_served.url}/inbox")
    card = page.locator("article.pending", has_text="start_job")
    card.locator("textarea[name=value]").fill('{"rows": 3}')
    card.locator("button.complete").click()
    expect(page.locator(".notice")).to_contain_text("Completed")
    expect(page.locator(".item.reply")).to_contain_text("job said {'rows': 3}")


def test_recover_an_interrupted_turn_then_decide_the_call_in_doubt(open_served: Served, context: Any) -> None:
    expect = _expect()
    crashed = wf.make_runner(str(open_served.db))
    try:
        in_thread(wf.crash, crashed, "sync-1", "sync the ledger")
    finally:
        crashed.session_service.close()
    assert wf.SYNCED == [3]
    page = context.new_page()
    page.goto(f"{open_served.url}/sessions?user=alice")
    expect(page.locator("tr", has_text="sync-1")).to_contain_text("interrupted")
    page.goto(f"{open_served.url}/sessions/sync-1?user=alice")
    expect(page.locator("div.recover")).to_contain_text("interrupted")
    page.locator("button.recover").click()
    expect(page.locator(".notice")).to_contain_text("Recovered")
    card = page.locator("article.pending.in_doubt")
    expect(card).to_contain_text("sync_ledger(n=3)")
    assert wf.SYNCED == [3]  # in doubt: asked, not run again
    card.locator("input[name=value]").fill('"checked by hand"')
    card.locator("button.skip").click()
    expect(page.locator(".notice")).to_contain_text("Decided")
    expect(page.locator(".item.reply").last).to_contain_text("synced checked by hand")
    assert wf.SYNCED == [3]


def test_a_token_protected_server_refuses_the_browser_without_it(served: Served, context: Any) -> None:
    expect = _expect()
    page = context.new_page()
    response = page.goto(f"{served.url}/inbox")
    assert response is not None and response.status == 401
    expect(page.locator("body")).to_contain_text("token")
    response = page.goto(f"{served.url}/inbox?token={TOKEN}")
    assert response is not None and response.status == 200
    assert "token=" not in page.url  # kept in a cookie, dropped from the address bar
    expect(page.locator("article.pending")).to_have_count(3)
    page.locator("article.pending", has_text="pay-1").locator("button.approve").click()
    expect(page.locator(".item.reply")).to_contain_text("paid 900")
    assert wf.PAID == [900]


# ------------------------------------------------------------------ the API, bad input, safety


def test_the_api_lists_sessions_pending_calls_and_events(served: Served) -> None:
    status, body = http("GET", f"{served.url}/api/sessions", token=TOKEN)
    assert status == 200
    assert {s["id"]: s["status"] for s in body["sessions"]} == {"pay-1": "paused", "job-1": "paused", "pay-2": "paused"}
    status, body = http("GET", f"{served.url}/api/pending?user=alice", token=TOKEN)
    assert status == 200
    assert sorted((p["session_id"], p["tool"], p["kind"]) for p in body["pending"]) == [
        ("job-1", "start_job", "completion"),
        ("pay-1", "pay", "confirmation"),
    ]
    pay = next(p for p in body["pending"] if p["tool"] == "pay")
    assert pay["args"] == {"amount": 900} and pay["digest"] and pay["ran"][0]["tool"] == "lookup"
    status, body = http("GET", f"{served.url}/api/sessions/pay-1/events", token=TOKEN)
    assert status == 200
    assert body["session"]["user_id"] == "alice" and body["pending"][0]["call_key"] == pay["call_key"]
    assert any(i["kind"] == "script" for i in body["timeline"])
    status, body = http("GET", f"{served.url}/api/sessions/nope/events", token=TOKEN)
    assert status == 404
    status, body = http("GET", f"{served.url}/api/sessions?app=another", token=TOKEN)
    assert status == 200 and body == {"app_name": "another", "sessions": []}
    status, body = http("GET", f"{served.url}/api/sessions?user=bob&token={TOKEN}")
    assert status == 200 and [s["id"] for s in body["sessions"]] == ["pay-2"]


def test_approve_through_the_api_then_again_is_a_conflict(served: Served) -> None:
    call = served.call_of("pay-1")
    url = f"{served.url}/api/pending/{call['call_key']}/approve"
    status, body = http("POST", url, {"digest": call["digest"], "session_id": "pay-1"}, token=TOKEN)
    assert status == 200, body
    assert body["pending"] == [] and any("paid 900" in json.dumps(e) for e in body["events"])
    status, body = http("POST", url, {"digest": call["digest"], "session_id": "pay-1"}, token=TOKEN)
    assert status == 409 and "decided already" in body["error"]
    assert wf.PAID == [900]


def test_bad_input_is_refused_and_nothing_runs(served: Served) -> None:
    call = served.call_of("pay-1")
    url = f"{served.url}/api/pending/{call['call_key']}/approve"
    status, body = http("POST", url, raw=b"{not json", token=TOKEN, headers={"Content-Type": "application/json"})
    assert status == 400 and "not JSON" in body["error"]
    status, body = http("POST", url, raw=b"[1, 2]", token=TOKEN, headers={"Content-Type": "application/json"})
    assert status == 400 and "object" in body["error"]
    status, body = http("POST", url, {"session_id": "pay-1"}, token=TOKEN)
    assert status == 400 and "digest is required" in body["error"]
    status, body = http("POST", url, {"digest": "0000000000000000", "session_id": "pay-1"}, token=TOKEN)
    assert status == 409 and "stale view" in body["error"]
    status, body = http("POST", f"{served.url}/api/pending/nope:1:1/approve", {"digest": "x"}, token=TOKEN)
    assert status == 404
    status, body = http("POST", f"{served.url}/api/pending/{call['call_key']}/launch", {"digest": "x"}, token=TOKEN)
    assert status == 404
    job = served.call_of("job-1")
    status, body = http(
        "POST", f"{served.url}/api/pending/{job['call_key']}/approve", {"digest": job["digest"]}, token=TOKEN
    )
    assert status == 409  # a long-running call is completed, not approved
    status, body = http(
        "POST",
        f"{served.url}/api/pending/{job['call_key']}/complete",
        {"digest": job["digest"], "value": {"f": float("inf")}},
        token=TOKEN,
    )
    assert status == 400  # not JSON (Infinity)
    status, body = http("POST", url, raw=b"digest=x", token=TOKEN, headers={"Content-Type": "text/plain"})
    assert status == 415
    assert wf.PAID == []
    assert served.call_of("pay-1")["digest"] == call["digest"] and served.call_of("job-1")


def test_a_missing_or_wrong_token_is_401_and_nothing_runs(served: Served) -> None:
    call = served.call_of("pay-1")
    url = f"{served.url}/api/pending/{call['call_key']}/approve"
    for token in (None, "wrong"):
        status, _ = http("POST", url, {"digest": call["digest"], "session_id": "pay-1"}, token=token)
        assert status == 401
        status, _ = http("GET", f"{served.url}/api/pending", token=token)
        assert status == 401
        status, _ = http("GET", f"{served.url}/inbox", token=token)
        assert status == 401
    assert wf.PAID == []
    assert served.call_of("pay-1")["call_key"] == call["call_key"]


def test_a_cross_site_post_is_refused_and_nothing_runs(served: Served) -> None:
    call = served.call_of("pay-1")
    form = f"digest={call['digest']}&session_id=pay-1&user_id=alice&csrf=guess".encode()
    form_type = {"Content-Type": "application/x-www-form-urlencoded"}
    for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        status, body = http(
            "POST",
            f"{served.url}/pending/{call['call_key']}/approve",
            raw=form,
            token=TOKEN,
            headers={**form_type, **headers},
        )
        assert status == 403 and "cross-site" in body["error"]
        status, body = http(
            "POST",
            f"{served.url}/api/pending/{call['call_key']}/approve",
            {"digest": call["digest"], "session_id": "pay-1"},
            token=TOKEN,
            headers=headers,
        )
        assert status == 403
    # Same site but no CSRF cookie matching the form's field: refused too.
    status, body = http(
        "POST", f"{served.url}/pending/{call['call_key']}/approve", raw=form, token=TOKEN, headers=form_type
    )
    assert status == 403 and "CSRF" in body
    assert wf.PAID == []


def test_the_secret_reaches_the_tool_and_the_store_but_is_never_served(served: Served) -> None:
    # The lookup tool read the secret, and the store holds it (the journal and the turn's
    # stdout): something to leak. The fixture's teardown searches every response.
    assert wf.SECRET.encode() in b"".join(p.read_bytes() for p in served.db.parent.glob("sessions.db*"))
    for path in ("/api/pending", "/api/sessions", "/api/sessions/pay-1/events", "/inbox", "/sessions"):
        status, body = http("GET", f"{served.url}{path}", token=TOKEN)
        assert status == 200
        assert wf.SECRET not in json.dumps(body)
    status, body = http("GET", f"{served.url}/sessions/pay-1?user=alice", token=TOKEN)
    assert status == 200 and "[REDACTED]" in body


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.3.0.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("example.org")


# ------------------------------------------------------------------ the command


def test_codeact_serve_refuses_to_bind_off_loopback_without_a_token(tmp_path: Path, monkeypatch: Any) -> None:
    pytest.importorskip("typer")
    from typer.testing import CliRunner

    from codeact.cli import app

    db = tmp_path / "s.db"
    in_thread(wf.start, wf.make_runner(str(db)), "pay-1", "please pay bob")
    monkeypatch.delenv("CODEACT_SERVE_TOKEN", raising=False)
    started: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.append({"app": app, **kw}))
    cli = CliRunner()
    args = ["serve", "--db", str(db), "--agent", "web_fixtures:AGENT", "--app", wf.APP]
    result = cli.invoke(app, [*args, "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "token" in result.output and not started
    monkeypatch.setenv("CODEACT_SERVE_TOKEN", TOKEN)
    result = cli.invoke(app, [*args, "--host", "0.0.0.0", "--port", "8123"])
    assert result.exit_code == 0, result.output
    assert started[0]["host"] == "0.0.0.0" and started[0]["port"] == 8123
    from starlette.testclient import TestClient

    with TestClient(started[0]["app"]) as client:
        assert client.get("/api/pending").status_code == 401
        listed = client.get("/api/pending", headers={"Authorization": f"Bearer {TOKEN}"}).json()
        assert [p["tool"] for p in listed["pending"]] == ["pay"]


def test_a_host_that_is_not_loopback_is_refused_without_a_token(open_served: Served) -> None:
    # A page of another site whose name was rebound to 127.0.0.1 (DNS rebinding) is
    # same-origin to the browser: its requests carry its own name as Host and Origin.
    call = open_served.call_of("pay-1")
    port = open_served.url.rsplit(":", 1)[1]
    rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    status, body = http(
        "POST",
        f"{open_served.url}/api/pending/{call['call_key']}/approve",
        {"digest": call["digest"], "session_id": "pay-1"},
        headers=rebound,
    )
    assert status == 403 and "loopback" in body["error"]
    for path in ("/api/pending", "/inbox", "/api/sessions/pay-1/events"):
        status, body = http("GET", f"{open_served.url}{path}", headers={"Host": f"evil.example:{port}"})
        assert status == 403, path
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        status, _ = http("GET", f"{open_served.url}/api/pending", headers={"Host": host})
        assert status == 200
    assert wf.PAID == []
    assert open_served.call_of("pay-1")["digest"] == call["digest"]


def test_odd_bodies_are_refused_with_a_status_and_nothing_runs(served: Served) -> None:
    call = served.call_of("pay-1")
    url = f"{served.url}/api/pending/{call['call_key']}/approve"
    json_type = {"Content-Type": "application/json"}
    status, body = http("POST", url, raw=b"[" * 100_000 + b"]" * 100_000, token=TOKEN, headers=json_type)
    assert status == 400 and "nested" in body["error"]
    lone = b'{"digest": "\\ud800", "session_id": "pay-1"}'  # valid JSON, not Unicode text
    status, body = http("POST", url, raw=lone, token=TOKEN, headers=json_type)
    assert status == 400 and "surrogate" in body["error"]
    # Over MAX_BODY_BYTES by its Content-Length: refused before a byte of it is read.
    conn = HTTPConnection(served.url.removeprefix("http://"), timeout=60)
    conn.putrequest("POST", f"/api/pending/{call['call_key']}/approve")
    for k, v in {**json_type, "Authorization": f"Bearer {TOKEN}", "Content-Length": str(9 * 1024 * 1024)}.items():
        conn.putheader(k, v)
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413 and b"nothing ran" in resp.read()
    conn.close()
    assert wf.PAID == []
    assert served.call_of("pay-1")["digest"] == call["digest"]


def test_a_form_decision_lands_on_the_timeline_of_a_session_id_with_url_characters(served: Served) -> None:
    odd = "pay 3?x=1#y"
    in_thread(wf.start, served.runner, odd, "please pay dan", "dan")
    call = served.call_of(odd)
    form = urllib.parse.urlencode(
        {"digest": call["digest"], "session_id": odd, "user_id": "dan", "csrf": "c5rf"}
    ).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": "codeact_csrf=c5rf"}
    status, page = http(
        "POST", f"{served.url}/pending/{call['call_key']}/approve", raw=form, token=TOKEN, headers=headers
    )
    assert wf.PAID == [900]
    assert status == 200 and "Approved" in page  # the redirect landed on that session's timeline


def _headers_of(served: Served, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> Any:
    """(status, response headers) of one request; the body is not read (the event stream
    never ends)."""
    conn = HTTPConnection(served.url.removeprefix("http://"), timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.headers
    finally:
        conn.close()


def test_every_route_sends_the_security_headers(served: Served) -> None:
    from starlette.routing import Mount, Route

    from codeact.web._app import SECURITY_HEADERS

    call = served.call_of("pay-1")
    params = {"session_id": "pay-1", "call_key": call["call_key"], "verb": "deny"}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    routes = create_app(served.runner).routes
    asked: list[tuple[str, str, dict[str, str]]] = []
    for route in routes:
        if isinstance(route, Mount):
            asked.append(("GET", route.path + "/live.js", auth))
            continue
        assert isinstance(route, Route)
        path = route.path.format(**{k: urllib.parse.quote(v, safe="") for k, v in params.items()})
        for method in sorted((route.methods or {"GET"}) - {"HEAD"}):
            kind = "application/json" if path.startswith("/api/") else "application/x-www-form-urlencoded"
            asked.append((method, path, {**auth, "Content-Type": kind} if method == "POST" else auth))
    assert len({(m, p) for m, p, _ in asked}) >= len(routes)
    asked += [("GET", "/inbox", {}), ("GET", "/no-such-page", auth), ("POST", "/api/pending/x/approve", {})]
    statuses = set()
    for method, path, headers in asked:
        body = b'{"digest": "0", "session_id": "pay-1"}' if method == "POST" else None
        status, got = _headers_of(served, method, path, body, headers)
        statuses.add(status)
        for name, value in SECURITY_HEADERS.items():
            assert got.get_all(name) == [value], (method, path, status, name, got.get_all(name))
    assert {200, 401, 404}.issubset(statuses)
    assert wf.PAID == [] and served.call_of("pay-1")["digest"] == call["digest"]


# ------------------------------------------------------------------ issue 46: the inbox points at the right call


def _tamper(db: Path, session_id: str) -> None:
    """Edits the stored turn of ``session_id`` behind the runner's back (its continuation's
    digest no longer matches): the turn fails verification."""
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        with conn:
            changed = conn.execute(
                "UPDATE turns SET data = json_set(data, '$.snapshot_sha256', ?) WHERE session_id = ?",
                ("0" * 64, session_id),
            ).rowcount
    finally:
        conn.close()
    assert changed == 1


def test_an_open_card_never_changes_its_call(open_served: Served, context: Any) -> None:
    expect = _expect()
    in_thread(wf.start, open_served.runner, "twice-1", "please pay twice")
    page = context.new_page()
    page.goto(f"{open_served.url}/inbox")
    first = page.locator("article.card", has_text="twice-1")
    expect(first).to_have_count(1)
    expect(first).to_contain_text("pay(amount=100)")
    first.locator("input[name=reason]").fill("typed before the update")
    old_key = first.get_attribute("data-key")
    call = open_served.call_of("twice-1")
    status, body = http(
        "POST",
        f"{open_served.url}/api/pending/{call['call_key']}/approve",
        {"digest": call["digest"], "session_id": "twice-1"},
    )
    assert status == 200 and body["pending"][0]["args"] == {"amount": 200}, body  # decided elsewhere; pay(200) waits
    new = page.locator("article.card:not(.gone)", has_text="twice-1")
    expect(new).to_contain_text("pay(amount=200)")  # a new call is a new card, added live
    old = page.locator(f'article.card[data-key="{old_key}"]')
    expect(old).to_have_class("card pending confirmation gone")
    expect(old).to_contain_text("pay(amount=100)")  # never swapped to the next call
    expect(old.locator(".gone-note")).to_contain_text("Nothing runs from this card")
    expect(old.locator("button.approve")).to_be_disabled()
    expect(old.locator("input[name=reason]")).to_have_value("typed before the update")
    expect(old.locator("input[name=digest]").first).to_have_value(call["digest"])
    expect(new.locator("button.approve")).to_be_enabled()
    assert wf.PAID == [100]


def test_the_excerpt_marks_the_paused_call_not_a_mention_of_its_name(served: Served) -> None:
    in_thread(wf.start, served.runner, "decoy-1", "please pay the decoy")
    in_thread(wf.start, served.runner, "twice-2", "please pay twice")
    status, body = http("GET", f"{served.url}/api/pending", token=TOKEN)
    assert status == 200
    decoy = next(p for p in body["pending"] if p["session_id"] == "decoy-1")
    assert decoy["excerpt"]["line"] == 4 and decoy["excerpt"]["note"] == ""
    assert [line["n"] for line in decoy["excerpt"]["lines"] if line["here"]] == [4]
    twice = next(p for p in body["pending"] if p["session_id"] == "twice-2")
    # Two call expressions can call pay: the interpreter's own position tells which one paused.
    assert twice["excerpt"]["line"] == 1 and twice["excerpt"]["note"] == ""
    assert [line["n"] for line in twice["excerpt"]["lines"] if line["here"]] == [1]
    status, _ = http(
        "POST",
        f"{served.url}/api/pending/{twice['call_key']}/approve",
        {"digest": twice["digest"], "session_id": "twice-2"},
        token=TOKEN,
    )
    assert status == 200
    second = served.call_of("twice-2")
    assert second["args"] == {"amount": 200}
    assert second["excerpt"]["line"] == 2
    assert [line["n"] for line in second["excerpt"]["lines"] if line["here"]] == [2]


def test_the_excerpt_marks_the_call_in_a_loop_on_its_second_round(served: Served) -> None:
    # The tool's name is printed (and written as a call inside a string) before the call;
    # the second round pauses in a continuation restored from the store.
    in_thread(wf.start, served.runner, "loop-1", "please pay in a loop")
    first = served.call_of("loop-1")
    assert first["args"] == {"amount": 100} and first["excerpt"]["line"] == 4
    status, _ = http(
        "POST",
        f"{served.url}/api/pending/{first['call_key']}/approve",
        {"digest": first["digest"], "session_id": "loop-1"},
        token=TOKEN,
    )
    assert status == 200
    second = served.call_of("loop-1")
    assert second["args"] == {"amount": 200} and second["call_key"] != first["call_key"]
    assert second["excerpt"]["line"] == 4 and second["excerpt"]["note"] == ""
    assert [line["n"] for line in second["excerpt"]["lines"] if line["here"]] == [4]
    assert "paid.append(call_tool" in next(line["text"] for line in second["excerpt"]["lines"] if line["here"])

    async def stored() -> Any:
        return await served.runner.session_service.load_turn(app_name=wf.APP, user_id="alice", session_id="loop-1")

    slot = in_thread(stored)
    line = wf.LOOP_SCRIPT.splitlines()[3]
    call = 'call_tool("pay", {"amount": amount})'
    column = line.index(call) + 1
    assert [p["position"] for p in slot.data["pending"]] == [[4, column, 4, column + len(call)]]


def test_a_record_without_positions_falls_back_to_the_syntax(served: Served) -> None:
    # A turn record written before positions were kept: the excerpt reads the script's syntax.
    in_thread(wf.start, served.runner, "twice-3", "please pay twice")
    in_thread(wf.start, served.runner, "decoy-3", "please pay the decoy")
    service = served.runner.session_service

    async def strip(session_id: str) -> None:
        slot = await service.load_turn(app_name=wf.APP, user_id="alice", session_id=session_id)
        assert slot is not None and all(p.get("position") for p in slot.data["pending"])
        data = {**slot.data, "pending": [{k: v for k, v in p.items() if k != "position"} for p in slot.data["pending"]]}
        await service.save_turn(
            app_name=wf.APP,
            user_id="alice",
            session_id=session_id,
            data=data,
            snapshot=slot.snapshot,
            expected_version=slot.version,
        )

    in_thread(strip, "twice-3")
    in_thread(strip, "decoy-3")
    twice, decoy = served.call_of("twice-3"), served.call_of("decoy-3")
    assert twice["excerpt"]["line"] is None and not any(line["here"] for line in twice["excerpt"]["lines"])
    assert "lines 1, 2" in twice["excerpt"]["note"]
    assert decoy["excerpt"]["line"] == 4 and decoy["excerpt"]["note"] == ""
    status, page = http("GET", f"{served.url}/inbox", token=TOKEN)
    assert status == 200 and "which one paused is not known" in page


def test_the_live_poll_restores_no_continuation(served: Served, monkeypatch: Any) -> None:
    from codeact.web import _views as views

    runtime = served.runner.agent.runtime
    restores: list[int] = []
    for name in ("restore", "restore_session"):
        real = getattr(runtime, name)

        def counted(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            restores.append(1)
            return _real(*args, **kwargs)

        monkeypatch.setattr(runtime, name, counted)
    assert http("GET", f"{served.url}/api/pending", token=TOKEN)[0] == 200
    assert restores, "the counter sees the restores of a page load"
    for session_id in (None, "pay-1", "nope"):
        restores.clear()
        before = in_thread(views.live_version, served.runner, None, session_id)
        assert restores == [], f"a poll of {session_id} restored {len(restores)} continuations"
        assert in_thread(views.live_version, served.runner, None, session_id) == before
    restores.clear()
    for view in ("view=inbox", "view=session&session=pay-1&user=alice"):
        conn = HTTPConnection(served.url.removeprefix("http://"), timeout=60)
        conn.request("GET", f"/api/stream?{view}", headers={"Authorization": f"Bearer {TOKEN}"})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.readline().startswith(b"data: ")
        time.sleep(1.0)  # about ten polls at 0.1 s
        conn.close()
    assert restores == []
    before = in_thread(views.live_version, served.runner, None, None)
    call = served.call_of("pay-1")
    restores.clear()
    status, _ = http(
        "POST",
        f"{served.url}/api/pending/{call['call_key']}/deny",
        {"digest": call["digest"], "session_id": "pay-1"},
        token=TOKEN,
    )
    assert status == 200 and in_thread(views.live_version, served.runner, None, None) != before


def test_a_turn_that_fails_verification_shows_as_stale_before_a_click(open_served: Served, context: Any) -> None:
    expect = _expect()
    page = context.new_page()
    page.goto(f"{open_served.url}/inbox")
    card = page.locator("article.card.pending", has_text="pay-1")
    expect(card.locator("button.approve")).to_be_enabled()
    _tamper(open_served.db, "pay-1")
    expect(card.locator("button.approve")).to_be_disabled()  # live, before anyone clicks
    stale = page.locator("article.card.stale", has_text="pay-1")
    expect(stale).to_contain_text("fails verification")
    expect(stale.locator("button")).to_have_count(0)
    page.goto(f"{open_served.url}/sessions/pay-1?user=alice")
    expect(page.locator(".status").first).to_have_text("stale")
    expect(page.locator("article.card.pending")).to_have_count(0)
    assert wf.PAID == []


def test_an_interrupted_turn_is_listed_with_recover(open_served: Served, context: Any) -> None:
    expect = _expect()
    crashed = wf.make_runner(str(open_served.db))
    try:
        in_thread(wf.crash, crashed, "sync-2", "sync the ledger")
    finally:
        crashed.session_service.close()
    page = context.new_page()
    page.goto(f"{open_served.url}/inbox")
    card = page.locator("article.card.interrupted", has_text="sync-2")
    expect(card).to_contain_text("Interrupted")
    card.locator("button.recover").click()
    expect(page.locator(".notice")).to_contain_text("Recovered")
    expect(page.locator("article.pending.in_doubt")).to_contain_text("sync_ledger(n=3)")


def test_error_feedback_is_labelled_on_the_timeline_not_an_answer(served: Served) -> None:
    in_thread(wf.start, served.runner, "err-1", "please explode")
    status, body = http("GET", f"{served.url}/api/sessions/err-1/events", token=TOKEN)
    assert status == 200
    kinds = [i["kind"] for i in body["timeline"]]
    feedback = [i for i in body["timeline"] if i["kind"] == "feedback"]
    assert feedback and feedback[0]["error"] is True and "kaput" in feedback[0]["text"]
    assert kinds.count("reply") == 1 and kinds[-1] == "reply"  # only the final answer is an answer
    status, page = http("GET", f"{served.url}/sessions/err-1?user=alice", token=TOKEN)
    assert status == 200 and "error fed back to the model" in page


def test_bidi_controls_are_escaped_and_long_arguments_cut(served: Served) -> None:
    in_thread(wf.start, served.runner, "mirror-1", "please pay the mirror")
    in_thread(wf.start, served.runner, "long-1", "please pay a lot")
    status, page = http("GET", f"{served.url}/inbox", token=TOKEN)
    assert status == 200
    for control in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c":
        assert control not in page
    assert "\\u202e 009 yap \\u202c" in page
    assert '<code class="call cut">pay(amount=&#34;' + "9" * 1988 + "…</code>" in page  # 2,000 characters
    assert "show all (3014 characters)" in page
    assert "&#34;" + "9" * 3000 + "&#34;)" in page  # the whole call, behind "show all"


def test_a_decision_from_the_inbox_restores_the_continuation_once(served: Served, monkeypatch: Any) -> None:
    """The web looks nothing up before the runner: the runner finds the call, checks its digest
    and kind, and restores the paused continuation once (issue 47; it was restored 4 times,
    then twice: the page's own pending lookup, then the runner's)."""
    runtime = served.runner.agent.runtime
    restores: list[int] = []
    for name in ("restore", "restore_session"):
        real = getattr(runtime, name)

        def counted(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            restores.append(1)
            return _real(*args, **kwargs)

        monkeypatch.setattr(runtime, name, counted)
    call = served.call_of("pay-1")
    restores.clear()
    body = {"digest": call["digest"], "session_id": "pay-1"}
    status, answer = http("POST", f"{served.url}/api/pending/{call['call_key']}/approve", body, token=TOKEN)
    assert status == 200, answer
    assert wf.PAID == [900] and len(restores) == 1
    restores.clear()
    status, answer = http("POST", f"{served.url}/api/pending/{call['call_key']}/approve", body, token=TOKEN)
    assert status == 409 and "not pending any more" in answer["error"] and restores == []
    assert wf.PAID == [900]
