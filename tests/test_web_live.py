"""The web timeline of a running session (issue 51): the live row (``docs/web.md``) shows the
reply the model is writing and what the script prints, also for a run in another process.

A real uvicorn server over a real SQLite file; the run is a separate Python process (a paced
``ScriptedModel`` streaming into the same file); the API is read over HTTP and the page by
the machine's Chromium through Playwright (skipped without them, like tests/test_web.py)."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel
from codeact.events import Content, Event
from codeact.sessions import SqliteSessionService
from codeact.sessions._live import LiveRow

pytest.importorskip("starlette", reason="codeact[web] is not installed")  # (test_web fails instead in CI)

from codeact.web import _views as views
from codeact.web import create_app
from test_web import WAIT_MS, browser, context, http, in_thread, uvicorn  # noqa: F401  (fixtures)

APP, USER, SID = "liveapp", "u", "s"
SECRET = "sk-LIVE-secret-99"

CHILD = """
import sys

import anyio

from codeact import CodeActAgent, FunctionTool, MontyRuntime, RunConfig, Runner, ScriptedModel
from codeact.sessions import SqliteSessionService

SCRIPT = '''```python
# counting, slowly: the web timeline shows this text as it is written
total = 0
for i in range(3):
    print("tick", i)
    total = total + call_tool("wait", {"i": i})
{"type": "final_result", "value": "counted " + str(total)}
```'''


async def wait(i: int) -> int:
    '''Waits a while.'''
    await anyio.sleep(float(sys.argv[3]))
    return i


async def main() -> None:
    model = ScriptedModel([SCRIPT], time_to_first_token=0.3, tokens_per_second=float(sys.argv[2]), chars_per_token=4)
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[FunctionTool(wait)])
    with SqliteSessionService(sys.argv[1]) as store:
        runner = Runner(app_name="liveapp", agent=agent, session_service=store)
        config = RunConfig(streaming=True)
        async for _ in runner.run_async(user_id="u", session_id="s", new_message="count", run_config=config):
            pass


anyio.run(main)
"""


@dataclass
class Served:
    url: str
    db: Path
    runner: Runner

    def events(self) -> dict[str, Any]:
        status, body = http("GET", f"{self.url}/api/sessions/{SID}/events?app={APP}&user={USER}")
        assert status == 200, body
        return body  # type: ignore[no-any-return]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A loopback server (no token) over a SQLite file holding the empty session ``s``."""
    db = tmp_path / "sessions.db"
    store = SqliteSessionService(db)
    agent = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime())
    runner = Runner(app_name=APP, agent=agent, session_service=store)

    async def create() -> None:
        await store.create_session(app_name=APP, user_id=USER, session_id=SID)

    in_thread(create)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(runner, poll_interval=0.1), log_level="warning", timeout_graceful_shutdown=2, lifespan="off"
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield Served(url=f"http://127.0.0.1:{sock.getsockname()[1]}", db=db, runner=runner)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        store.close()
    assert not thread.is_alive(), "the server did not stop"


def _child(db: Path, tokens_per_second: float = 12, wait: float = 1.0) -> subprocess.Popen[str]:
    """The run, in another process, streaming into ``db``."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(db), str(tokens_per_second), str(wait)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONFAULTHANDLER="1"),
    )


def _finish(proc: subprocess.Popen[str]) -> None:
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err


def _write(served: Served, live: LiveRow | None) -> None:
    async def write() -> None:
        await served.runner.session_service.save_live(app_name=APP, user_id=USER, session_id=SID, live=live)

    in_thread(write)


def _append(served: Served, text: str) -> str:
    async def append() -> str:
        store = served.runner.session_service
        session = await store.get_session(app_name=APP, user_id=USER, session_id=SID)
        assert session is not None
        return (await store.append_event(session, Event(author="user", content=Content.from_text(text)))).id

    return in_thread(append)  # type: ignore[no-any-return]


# ------------------------------------------------------------------ the API


def test_the_api_shows_the_live_row_beside_the_events_never_among_them(served: Served) -> None:
    first = _append(served, "count")
    assert served.events()["live"] is None
    version = in_thread(views.live_version, served.runner, USER, SID)
    _write(served, LiveRow(reply="```python\nprint(", author="coder", invocation_id="i", after=first))
    body = served.events()
    assert body["live"]["reply"] == "```python\nprint(" and body["live"]["author"] == "coder"
    assert body["live"]["output"] == "" and body["live"]["version"] == 1
    assert [e["content"]["parts"][0]["text"] for e in body["events"]] == ["count"]  # never an event
    assert all(item.get("kind") != "live" for item in body["timeline"])
    grown = in_thread(views.live_version, served.runner, USER, SID)
    assert grown != version  # the page's stream announces each write
    _write(served, LiveRow(reply="```python\nprint('hi')", author="coder", after=first))
    assert in_thread(views.live_version, served.runner, USER, SID) != grown
    _append(served, "a stored event after the row: its text is in the log now")
    assert served.events()["live"] is None  # a row that follows an older event is not shown
    _write(served, None)
    assert served.events()["live"] is None


def test_a_secret_in_the_live_row_is_never_served(tmp_path: Path) -> None:
    from codeact.services import SecretsProvider

    store = SqliteSessionService(tmp_path / "s.db")
    agent = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime())
    runner = Runner(app_name=APP, agent=agent, session_service=store, secrets=SecretsProvider({"key": SECRET}))

    async def check() -> dict[str, Any] | None:
        session = await store.create_session(app_name=APP, user_id=USER, session_id=SID)
        await store.save_live(app_name=APP, user_id=USER, session_id=SID, live=LiveRow(output=f"key {SECRET}\n"))
        return await views.live_item(runner, session, views.redactor(runner))

    try:
        item = in_thread(check)
    finally:
        store.close()
    assert item is not None and SECRET not in str(item) and item["output"].startswith("key ")


def test_the_api_shows_a_run_in_another_process_as_it_streams(served: Served) -> None:
    proc = _child(served.db)
    replies: list[str] = []
    outputs: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            body = served.events()
            live = body["live"]
            if live is not None:
                if live["reply"] and (not replies or replies[-1] != live["reply"]):
                    replies.append(live["reply"])
                if live["output"] and (not outputs or outputs[-1] != live["output"]):
                    outputs.append(live["output"])
                texts = [p.get("text") or "" for e in body["events"] for p in e["content"]["parts"]]
                assert not any(live["reply"] and t == live["reply"] for t in texts)
            time.sleep(0.05)
    finally:
        _finish(proc)
    assert len(replies) >= 3, replies  # the reply grew, write after write
    assert all(b.startswith(a) for a, b in itertools.pairwise(replies))
    assert outputs and outputs[-1].startswith("tick 0\n") and "tick 2" in outputs[-1], outputs
    body = served.events()
    assert body["live"] is None  # the run ended: the row is gone and the log holds it all
    assert body["events"][-1]["content"]["parts"][0]["text"] == "counted 3"
    assert not any(e.get("partial") for e in body["events"])


# ------------------------------------------------------------------ the page, in Chromium


def test_the_timeline_shows_the_reply_and_output_of_a_run_in_another_process_growing(
    served: Served,
    context: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    page = context.new_page()
    page.goto(f"{served.url}/sessions/{SID}?app={APP}&user={USER}")
    expect(page.locator("h1")).to_contain_text(SID)
    proc = _child(served.db)
    try:
        reply = page.locator("#live-reply pre")
        expect(reply).to_be_visible(timeout=WAIT_MS)
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and page.locator("#live-output").count() == 0:
            text = reply.text_content(timeout=WAIT_MS) if reply.count() else None
            if text and (not seen or seen[-1] != text):
                seen.append(text)
            time.sleep(0.05)
        assert len(seen) >= 3, seen  # the reply grows on the page, without a reload
        assert all(len(b) > len(a) for a, b in itertools.pairwise(seen)), seen
        assert seen[0].startswith("```"), seen  # from the first token on
        output = page.locator("#live-output pre")
        expect(output).to_contain_text("tick 0", timeout=WAIT_MS)
        expect(output).to_contain_text("tick 1", timeout=WAIT_MS)
        expect(page.locator("#live-output .label")).to_have_text("printing…")
        # the script's text is in the stored timeline now, the live reply gone
        expect(page.locator("#live-reply")).to_have_count(0)
        expect(page.locator(".item.script")).to_contain_text("counting, slowly")
    finally:
        _finish(proc)
    expect(page.locator(".item.reply").last).to_contain_text("counted 3", timeout=WAIT_MS)
    expect(page.locator(".item.live")).to_have_count(0, timeout=WAIT_MS)
