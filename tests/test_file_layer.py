"""The session's file layer (issue 53 item 1, SPEC §5 "Files"): a script's writes through a
read-write mount land in the layer during the turn (reads see the host plus the layer), and
reach the host once, after the end commit that records them. A crash anywhere (after a write,
after the end commit, in the middle of the host apply) recovers to the same host contents as a
run that never crashed: one "start" line, and a script that reads its file back does not end in
``nondeterministic_replay``.

In-process crashes (an exception nothing catches) run on memory, SQLite and PostgreSQL stores;
SIGKILL of a child process on SQLite; the same under ``isolation="process"``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_helpers import APP, SESSION, USER, fence
from codeact import (
    CodeActAgent,
    FunctionTool,
    InMemorySessionService,
    MontyRuntime,
    Mount,
    PathAccess,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.agent import _files, _journal_writes
from codeact.agent._files import LayerEntry, apply_layer, decode_layer, encode_layer, preimages

pytestmark = pytest.mark.anyio

LOG_SCRIPT = """
from pathlib import Path
p = Path("/data/log.txt")
old = p.read_text() if p.exists() else ""
p.write_text(old + "start\\n")
seen = p.read_text()
r = call_tool("note", {"text": seen})
p.write_text(p.read_text() + "end\\n")
Path("/data/out").mkdir()
Path("/data/out/x.txt").write_text("x")
Path("/data/old.txt").rename("/data/new.txt")
Path("/data/gone.txt").unlink()
{"type": "final_result", "value": [seen, r, p.read_text()]}
"""


class Crash(BaseException):
    """The process dies: nothing catches it."""


class Host:
    """The host folder and what the tool saw of it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.data.mkdir()
        (self.data / "old.txt").write_text("old")
        (self.data / "gone.txt").write_text("gone")
        self.notes: list[tuple[str, bool]] = []  # (text, whether the host had log.txt then)
        self.crash_in_note = False

    def tool(self) -> FunctionTool:
        host = self

        def note(text: str) -> int:
            """Notes a text (a call with effects).

            Args:
                text: the text.
            """
            host.notes.append((text, (host.data / "log.txt").exists()))
            if host.crash_in_note:
                host.crash_in_note = False
                raise Crash
            return len(text)

        return FunctionTool(note)

    def runtime(self, **kwargs: Any) -> MontyRuntime:
        return MontyRuntime(
            mounts=[Mount(virtual_path="/data", host_path=self.data, access=PathAccess.READ_WRITE)], **kwargs
        )

    def contents(self) -> dict[str, str]:
        return {
            str(p.relative_to(self.data)): p.read_text() if p.is_file() else "<dir>"
            for p in sorted(self.data.rglob("*"))
            if not p.name.startswith(".codeact-")
        }


EXPECTED = {"log.txt": "start\nend\n", "new.txt": "old", "out": "<dir>", "out/x.txt": "x"}


async def run(store: Any, host: Host, *, new: bool, **runtime: Any) -> list[Any] | None:
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel(lambda request: fence(LOG_SCRIPT)),
        runtime=host.runtime(**runtime),
        tools=[host.tool()],
    )
    runner = Runner(app_name=APP, agent=agent, session_service=store)
    if new:
        await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    try:
        return [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message="go" if new else None)]
    except Crash:
        return None


def final(events: list[Any]) -> Any:
    assert events[-1].error_code is None, (events[-1].error_code, events[-1].error_message)
    return json.loads(events[-1].text)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield InMemorySessionService()
        return
    if request.param == "postgres":
        from _postgres import fresh_database
        from codeact.sessions import PostgresSessionService

        with PostgresSessionService(fresh_database(), max_size=2) as pg:
            yield pg
        return
    with SqliteSessionService(tmp_path / "s.db") as service:
        yield service


# ---------------------------------------------------------------------------------- the form


def test_the_layer_round_trips_and_its_apply_is_idempotent(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "in.txt").write_text("in")
    layer = encode_layer(
        [
            LayerEntry("/w/a.txt", "file", b"a2", 1.0),
            LayerEntry("/w/d", "deleted"),
            LayerEntry("/w/d/in.txt", "deleted"),
            LayerEntry("/w/n", "dir", b"", 2.0),
            LayerEntry("/w/n/f.bin", "file", b"\x00\xff", 3.0),
        ]
    )
    assert [e.path for e in decode_layer(layer)] == ["/w/a.txt", "/w/d", "/w/d/in.txt", "/w/n", "/w/n/f.bin"]
    with pytest.raises(ValueError):
        decode_layer(layer[:-1])
    mounts = {"/w": tmp_path}
    pre = decode_layer(preimages(layer, mounts))
    assert [(e.path, e.kind, e.content) for e in pre] == [
        ("/w/a.txt", "file", b"a"),
        ("/w/d", "dir", b""),
        ("/w/d/in.txt", "file", b"in"),
        ("/w/n", "deleted", b""),
        ("/w/n/f.bin", "deleted", b""),
    ]
    assert apply_layer(layer, mounts) == 5
    after = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert after == ["a.txt", "n", "n/f.bin"]
    assert apply_layer(layer, mounts) == 0  # applied again: nothing changes
    assert (tmp_path / "a.txt").read_text() == "a2" and (tmp_path / "n" / "f.bin").read_bytes() == b"\x00\xff"


def test_a_layer_path_never_leaves_its_mount(tmp_path: Path) -> None:
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    (inside / "link").symlink_to(outside)
    layer = encode_layer([LayerEntry("/w/link/x", "file", b"x"), LayerEntry("/w/../y", "file", b"y")])
    assert apply_layer(layer, {"/w": inside}) == 0
    assert list(outside.iterdir()) == [] and not (tmp_path / "y").exists()


# ---------------------------------------------------------------------------------- a turn


async def test_writes_reach_the_host_once_after_the_script_and_reads_see_the_layer(store: Any, tmp_path: Path) -> None:
    host = Host(tmp_path)
    events = await run(store, host, new=True)
    assert events is not None
    seen, r, text = final(events)
    assert seen == "start\n" and r == len("start\n") and text == "start\nend\n"
    # the tool ran while the script's write was only in the layer: the host had no log.txt
    assert host.notes == [("start\n", False)]
    assert host.contents() == EXPECTED
    assert await store.load_turn(app_name=APP, user_id=USER, session_id=SESSION) is None


async def test_under_process_isolation_too(store: Any, tmp_path: Path) -> None:
    host = Host(tmp_path)
    events = await run(store, host, new=True, isolation="process")
    assert events is not None
    assert final(events)[2] == "start\nend\n"
    assert host.notes == [("start\n", False)]
    assert host.contents() == EXPECTED


async def test_a_crash_after_a_write_recovers_with_one_start_line(store: Any, tmp_path: Path) -> None:
    host = Host(tmp_path)
    host.crash_in_note = True  # the write is in the layer and the tool's intent is durable
    assert await run(store, host, new=True) is None
    assert host.contents() == {"gone.txt": "gone", "old.txt": "old"}  # the host never saw the write
    events = await run(store, host, new=False)
    assert events is not None
    assert final(events) == ["start\n", 6, "start\nend\n"]  # read back: no nondeterministic_replay
    assert host.contents() == EXPECTED


@pytest.mark.parametrize("when", ["before", "during", "after"])
async def test_a_crash_around_the_host_apply_applies_it_once(
    store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Killed after the end commit: before the apply, half-way through it, or just after it
    (the script is replayed against the stored pre-images and applied again)."""
    host = Host(tmp_path)
    real = _files.apply_layer
    calls = []

    def crashing(data: bytes, mounts: dict[str, Path]) -> int:
        calls.append(data)
        if len(calls) > 1:
            return real(data, mounts)
        if when == "during":  # only the first file of the layer reaches the host
            entries = [e for e in decode_layer(data) if e.kind == "file"][:1]
            real(encode_layer(entries), mounts)
        elif when == "after":
            real(data, mounts)
        raise Crash

    monkeypatch.setattr(_journal_writes, "apply_layer", crashing)
    assert await run(store, host, new=True) is None
    slot = await store.load_turn(app_name=APP, user_id=USER, session_id=SESSION)
    assert slot is not None and "pre" in slot.data["files"] and slot.snapshot is None
    events = await run(store, host, new=False)
    assert events is not None
    assert final(events) == ["start\n", 6, "start\nend\n"]
    same = [[(e.path, e.kind, e.content) for e in decode_layer(c)] for c in calls]
    assert same[0] == same[1]  # the same layer (but for the times the overlay noted), applied again
    assert host.contents() == EXPECTED


FIRST = """
from pathlib import Path
Path("/data/log.txt").write_text("one\\n")
{"type": "observation", "value": "FIRST-DONE"}
"""
SECOND = """
from pathlib import Path
p = Path("/data/log.txt")
p.write_text(p.read_text() + "two\\n")
{"type": "final_result", "value": p.read_text()}
"""


async def test_a_later_script_reads_what_an_earlier_one_applied_and_a_crash_in_its_apply_does_not_double(
    store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = Host(tmp_path)
    real = _files.apply_layer
    applied: list[bytes] = []

    def crashing(data: bytes, mounts: dict[str, Path]) -> int:
        applied.append(data)
        n = real(data, mounts)
        if len(applied) == 2:  # the second script's apply is done, then the process dies
            raise Crash
        return n

    monkeypatch.setattr(_journal_writes, "apply_layer", crashing)

    def runner() -> Runner:
        model = ScriptedModel(lambda request: fence(SECOND if "FIRST-DONE" in repr(request) else FIRST))
        agent = CodeActAgent(name="coder", model=model, runtime=host.runtime(), tools=[host.tool()])
        return Runner(app_name=APP, agent=agent, session_service=store)

    await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    with pytest.raises(Crash):
        [e async for e in runner().run_async(user_id=USER, session_id=SESSION, new_message="go")]
    assert (host.data / "log.txt").read_text() == "one\ntwo\n"
    events = [e async for e in runner().run_async(user_id=USER, session_id=SESSION)]
    assert events[-1].error_code is None and events[-1].text == "one\ntwo\n"
    assert (host.data / "log.txt").read_text() == "one\ntwo\n"


FAILING = """
from pathlib import Path
Path("/data/log.txt").write_text("before the error\\n")
raise ValueError("boom")
"""
AFTER_FAILING = """
from pathlib import Path
{"type": "final_result", "value": Path("/data/log.txt").read_text()}
"""


async def test_the_writes_of_a_script_that_raised_reach_the_host_as_on_cpython(tmp_path: Path) -> None:
    """A script that raises after a write: the write happened (as on CPython), so its layer is
    applied at its end, and the model's next script reads it."""
    host = Host(tmp_path)
    model = ScriptedModel(lambda request: fence(AFTER_FAILING if "boom" in repr(request) else FAILING))
    agent = CodeActAgent(name="coder", model=model, runtime=host.runtime(), tools=[])
    store = InMemorySessionService()
    await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    runner = Runner(app_name=APP, agent=agent, session_service=store)
    events = [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message="go")]
    assert events[-1].error_code is None and events[-1].text == "before the error\n"


PAUSING_SCRIPT = """
from pathlib import Path
p = Path("/data/log.txt")
p.write_text("start\\n")
paid = call_tool("pay", {"amount": len(p.read_text())})
p.write_text(p.read_text() + "paid\\n")
{"type": "final_result", "value": [paid, p.read_text()]}
"""


async def test_a_suspended_script_keeps_its_layer_beside_its_continuation(store: Any, tmp_path: Path) -> None:
    """The script pauses for a confirmation after a write: the host does not have it, the
    turn slot keeps the layer with the continuation, and the approval (a new runner: another
    process) resumes reading what the script wrote; the host gets it once, at the end."""
    host = Host(tmp_path)
    paid: list[int] = []

    def pay(amount: int) -> str:
        """Pays.

        Args:
            amount: how much.
        """
        paid.append(amount)
        return f"paid {amount}"

    def runner() -> Runner:
        agent = CodeActAgent(
            name="coder",
            model=ScriptedModel(lambda request: fence(PAUSING_SCRIPT)),
            runtime=host.runtime(),
            tools=[FunctionTool(pay, requires_confirmation=True)],
        )
        return Runner(app_name=APP, agent=agent, session_service=store)

    await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    [e async for e in runner().run_async(user_id=USER, session_id=SESSION, new_message="go")]
    slot = await store.load_turn(app_name=APP, user_id=USER, session_id=SESSION)
    assert slot is not None and slot.snapshot is not None and "base" in slot.data["files"]
    layer = decode_layer(_files.from_text(slot.data["files"]["base"]))
    assert [(e.path, e.content) for e in layer] == [("/data/log.txt", b"start\n")]
    assert not (host.data / "log.txt").exists()
    events = [e async for e in runner().approve(user_id=USER, session_id=SESSION)]
    assert final(events) == ["paid 6", "start\npaid\n"]
    assert paid == [6]
    assert (host.data / "log.txt").read_text() == "start\npaid\n"


HOSTILE = """
from pathlib import Path
tried = []
for path in ["/data/link/escape.txt", "/data/../escape.txt", "/data/link", "/elsewhere/x.txt"]:
    try:
        Path(path).write_text("pwned")
        tried.append([path, "written"])
    except Exception as exc:
        tried.append([path, type(exc).__name__])
try:
    Path("/data/link").rename("/data/moved")
    tried.append(["rename", "done"])
except Exception as exc:
    tried.append(["rename", type(exc).__name__])
{"type": "final_result", "value": tried}
"""


async def test_the_layer_keeps_the_mount_boundary(tmp_path: Path) -> None:
    """A hostile script under the layer: a symlink out of the mount, ``..``, a path outside every
    mount; nothing lands outside the mount, in the layer or on the host after the apply."""
    host = Host(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (host.data / "link").symlink_to(outside)
    agent = CodeActAgent(
        name="coder", model=ScriptedModel(lambda request: fence(HOSTILE)), runtime=host.runtime(), tools=[]
    )
    store = InMemorySessionService()
    await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    events = [
        e
        async for e in Runner(app_name=APP, agent=agent, session_service=store).run_async(
            user_id=USER, session_id=SESSION, new_message="go"
        )
    ]
    tried = dict(map(tuple, final(events)))
    assert set(tried.values()) == {"PermissionError"}, tried
    assert list(outside.iterdir()) == [] and not (tmp_path / "escape.txt").exists()
    assert (host.data / "link").is_symlink()  # a write or a rename through the link never replaced it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "outside"]


# ---------------------------------------------------------------------------------- SIGKILL

CHILD = textwrap.dedent(
    '''
    import asyncio, json, os, signal, sys
    from pathlib import Path
    from codeact import (CodeActAgent, FunctionTool, Mount, MontyRuntime, PathAccess, Runner, ScriptedModel,
                         SqliteSessionService)
    from codeact.agent import _files, _journal_writes

    db, data, kill = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    SCRIPT = sys.argv[4]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    def note(text: str) -> int:
        """Notes a text.

        Args:
            text: the text.
        """
        if kill == "after_write":
            die()
        return len(text)

    real = _files.apply_layer

    def apply(layer, mounts):
        if kill == "before_apply":
            die()
        n = real(layer, mounts)
        if kill == "after_apply":
            die()
        return n

    _journal_writes.apply_layer = apply

    async def main():
        with SqliteSessionService(db) as service:
            s = await service.get_session(app_name="app", user_id="u", session_id="s")
            message = "go"
            if s is None:
                await service.create_session(app_name="app", user_id="u", session_id="s")
            else:
                message = None
            runtime = MontyRuntime(mounts=[Mount(virtual_path="/data", host_path=data, access=PathAccess.READ_WRITE)])
            agent = CodeActAgent(name="coder", model=ScriptedModel(lambda r: "```python\\n" + SCRIPT + "\\n```"),
                                 runtime=runtime, tools=[FunctionTool(note)])
            runner = Runner(app_name="app", agent=agent, session_service=service)
            events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message=message)]
            print(json.dumps({"text": events[-1].text, "code": events[-1].error_code}))

    asyncio.run(main())
    '''
)


@pytest.mark.parametrize("kill", ["after_write", "before_apply", "after_apply"])
def test_sigkill_at_each_barrier_on_sqlite(tmp_path: Path, kill: str) -> None:
    host = Host(tmp_path)

    def child(point: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", CHILD, str(tmp_path / "s.db"), str(host.data), point, LOG_SCRIPT],
            capture_output=True,
            text=True,
            timeout=120,
        )

    first = child(kill)
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    second = child("none")
    assert second.returncode == 0, second.stderr[-3000:]
    out = json.loads(second.stdout.strip().splitlines()[-1])
    assert out["code"] is None, out
    assert json.loads(out["text"]) == ["start\n", 6, "start\nend\n"]
    assert host.contents() == EXPECTED
