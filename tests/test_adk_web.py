"""``adk web`` shows the script a ``CodeActAdkAgent`` writes (issue 51), under ``StreamingMode.SSE``
(the dev UI's "Streaming" option: the reply grows on the page as it streams) and ``NONE`` (the
complete reply appears at once).

A real ``adk web`` server (google-adk's CLI, in a child process on a free loopback port, with
its own ``HOME`` holding telemetry off) serves an agents folder written by the test: one agent,
a ``CodeActAdkAgent`` over a ``ScriptedModel`` replaying a script slowly. The machine's Chromium
(Debian's ``chromium``, through Playwright; never ``playwright install``) opens the dev UI,
sends a message and reads the page; every request leaving loopback (the UI's web fonts) is
refused. Skips when google-adk, Playwright or Chromium is missing; fails instead under
``CODEACT_REQUIRE_BROWSER=1`` (CI)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import codeact

REQUIRE_BROWSER = os.environ.get("CODEACT_REQUIRE_BROWSER") == "1"
if REQUIRE_BROWSER:  # CI: a missing part fails the run instead of skipping it
    import google.adk  # noqa: F401
else:
    pytest.importorskip("google.adk", reason="codeact[adk] is not installed")

WAIT_MS = 30_000  # a loaded 2-core machine: the page conditions below are awaited this long at most
PROSE = "Let me add them."
LAST_LINE = '{"type": "final_result", "value": sum_of_two}'
REPLY = f'{PROSE}\n```python\nprint("adding")\nsum_of_two = 2 + 3\n{LAST_LINE}\n```'
# ~17 tokens of 6 characters at 8 tokens/s: the reply streams for about two seconds
AGENT_PY = f"""
from codeact import CodeActAgent, MontyRuntime, ScriptedModel
from codeact.integrations.adk import CodeActAdkAgent

REPLY = {REPLY!r}
model = ScriptedModel(lambda request: REPLY, time_to_first_token=0.2, tokens_per_second=8, chars_per_token=6)
root_agent = CodeActAdkAgent.wrap(CodeActAgent(name="calc", model=model, runtime=MontyRuntime()))
"""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def adk_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a running ``adk web`` serving the ``calc`` agent."""
    root = tmp_path_factory.mktemp("adk-web")
    (root / "agents" / "calc").mkdir(parents=True)
    (root / "agents" / "calc" / "__init__.py").write_text("from . import agent  # noqa: F401\n")
    (root / "agents" / "calc" / "agent.py").write_text(AGENT_PY)
    (root / "home" / ".adk").mkdir(parents=True)
    (root / "home" / ".adk" / "config.json").write_text(json.dumps({"telemetry": False}))
    tree = Path(codeact.__file__).resolve().parents[1]  # the codeact under test
    env = {**os.environ, "HOME": str(root / "home"), "PYTHONPATH": str(tree), "NO_PROXY": "127.0.0.1"}
    port = _free_port()
    args = [sys.executable, "-m", "google.adk.cli", "web", "--host", "127.0.0.1", "--port", str(port)]
    log = (root / "server.log").open("wb")
    proc = subprocess.Popen([*args, "--no-reload", str(root / "agents")], env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with opener.open(f"{url}/list-apps", timeout=5) as response:
                    assert json.loads(response.read()) == ["calc"]
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"adk web did not start: {(root / 'server.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _chromium() -> str | None:
    return shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing: str | None = "playwright is not installed (pip install 'codeact[test-web]')"
    else:
        missing = None if _chromium() is not None else "no chromium on this machine (apt-get install chromium)"
    if missing is not None:
        if REQUIRE_BROWSER:
            pytest.fail(f"CODEACT_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--no-proxy-server"])
        try:
            yield chromium
        finally:
            chromium.close()


# In the page: the first time (ms since the poller started) the chat shows the reply's first
# sentence, and the first time it shows the script's last line.
_WATCH = """([prose, last]) => {
  window.__seen = {prose: null, last: null};
  const t0 = performance.now();
  window.__poll = setInterval(() => {
    const text = document.body.innerText;
    const now = performance.now() - t0;
    if (window.__seen.prose === null && text.includes(prose)) window.__seen.prose = now;
    if (window.__seen.last === null && text.includes(last)) window.__seen.last = now;
  }, 20);
}"""


@pytest.mark.parametrize("mode", ["SSE", "NONE"])
def test_adk_web_shows_the_script_text(adk_web: str, browser: Any, mode: str) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    context.set_default_timeout(WAIT_MS)
    # loopback only: the dev UI also asks fonts.gstatic.com for its fonts
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(adk_web) else route.abort())
    runs: list[dict[str, Any]] = []
    try:
        page = context.new_page()
        page.on(
            "request",
            lambda r: runs.append(json.loads(r.post_data or "{}")) if r.url == f"{adk_web}/run_sse" else None,
        )
        page.goto(f"{adk_web}/dev-ui/?app=calc")
        box = page.get_by_placeholder("Type a message...")
        expect(box).to_be_visible()
        if mode == "SSE":  # the dev UI's "Streaming" option: /run_sse with streaming=true -> StreamingMode.SSE
            page.get_by_role("button", name="More options").click()
            page.get_by_text("Streaming", exact=True).click()
            page.keyboard.press("Escape")
        page.evaluate(_WATCH, [PROSE, LAST_LINE])
        box.fill("add 2 and 3")
        box.press("Enter")
        # the script, its printed output and the final answer end up on the page
        expect(page.get_by_text("sum_of_two = 2 + 3").first).to_be_visible()
        expect(page.get_by_text(LAST_LINE).first).to_be_visible()
        expect(page.get_by_text("adding", exact=True).first).to_be_visible()
        expect(page.get_by_text("5", exact=True).first).to_be_visible()
        seen = page.evaluate("window.__seen")
        body = page.locator("body").inner_text()
    finally:
        context.close()
    assert [run["streaming"] for run in runs] == [mode == "SSE"]
    assert seen["prose"] is not None and seen["last"] is not None
    if mode == "SSE":
        # partial text: the first sentence was on the page well before the script's last line
        assert seen["last"] - seen["prose"] > 300, seen
    else:
        # no partial event: the complete reply appeared at once
        assert seen["last"] - seen["prose"] < 100, seen
    assert body.count(PROSE) == 1  # the streamed chunks were replaced by the complete reply, not added to
