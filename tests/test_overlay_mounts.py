"""Overlay mounts (issue 53 item 2, SPEC §5 "Files"): a script reads the host folder plus the
session's overlay, its writes stay in the overlay, kept in the session store across turns, runs
and processes (``Runner.files`` lists it), and never reach the host; a crash recovers to the
same overlay with nothing written to the host; the overlay is bounded; ``CPythonRuntime``
refuses overlay mounts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_helpers import APP, SESSION, USER, fence
from codeact import (
    CodeActAgent,
    CPythonRuntime,
    FunctionTool,
    InMemorySessionService,
    MontyRuntime,
    Mount,
    PathAccess,
    Runner,
    ScriptedModel,
    SqliteSessionService,
    UnsupportedMountError,
)
from codeact.agent import OVERLAY_STATE_KEY, SessionFile
from codeact.runtime import Complete

pytestmark = pytest.mark.anyio

APPEND = """
from pathlib import Path
p = Path("/ov/log.txt")
old = p.read_text() if p.exists() else ""
p.write_text(old + "start\\n")
seen = p.read_text()
r = call_tool("note", {"text": seen})
p.write_text(p.read_text() + "end\\n")
if Path("/ov/host.txt").exists():
    Path("/ov/host.txt").unlink()
if not Path("/ov/sub").exists():
    Path("/ov/sub").mkdir()
{"type": "final_result", "value": [seen, r, p.read_text(), sorted(x.name for x in Path("/ov").iterdir())]}
"""


class Crash(BaseException):
    """The process dies: nothing catches it."""


class Host:
    def __init__(self, root: Path) -> None:
        self.folder = root / "ov"
        self.folder.mkdir()
        (self.folder / "host.txt").write_text("host")
        self.notes: list[str] = []
        self.crash_in_note = False

    def snapshot(self) -> dict[str, str]:
        return {str(p.relative_to(self.folder)): p.read_text() for p in sorted(self.folder.rglob("*"))}

    def tool(self) -> FunctionTool:
        host = self

        def note(text: str) -> int:
            """Notes a text (a call with effects).

            Args:
                text: the text.
            """
            host.notes.append(text)
            if host.crash_in_note:
                host.crash_in_note = False
                raise Crash
            return len(text)

        return FunctionTool(note)

    def runtime(self, isolation: Any = "in_process", **kwargs: Any) -> MontyRuntime:
        mount = Mount(virtual_path="/ov", host_path=self.folder, access=PathAccess.OVERLAY, **kwargs)
        return MontyRuntime(mounts=[mount], isolation=isolation)

    def runner(self, store: Any, script: Any = APPEND, isolation: str = "in_process", **kwargs: Any) -> Runner:
        model = ScriptedModel(script if callable(script) else (lambda request: fence(script)))
        runtime = self.runtime(isolation, **kwargs)
        agent = CodeActAgent(name="coder", model=model, runtime=runtime, tools=[self.tool()])
        return Runner(app_name=APP, agent=agent, session_service=store)


async def drive(runner: Runner, *, session: str = SESSION, message: str | None = "go") -> list[Any] | None:
    try:
        return [e async for e in runner.run_async(user_id=USER, session_id=session, new_message=message)]
    except Crash:
        return None


def final(events: list[Any] | None) -> Any:
    assert events is not None
    assert events[-1].error_code is None, (events[-1].error_code, events[-1].error_message)
    return json.loads(events[-1].text)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield InMemorySessionService()
        return
    with SqliteSessionService(tmp_path / "s.db") as service:
        yield service


async def test_writes_stay_off_the_host_and_the_overlay_is_listed(store: Any, tmp_path: Path) -> None:
    host = Host(tmp_path)
    await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    runner = host.runner(store)
    seen, r, text, names = final(await drive(runner))
    assert (seen, r, text) == ("start\n", 6, "start\nend\n")
    assert names == ["log.txt", "sub"]  # the host's file is hidden, the overlay's are listed
    assert host.snapshot() == {"host.txt": "host"}  # the host never changes
    files = await runner.files(user_id=USER, session_id=SESSION)
    assert files == [
        SessionFile("/ov/host.txt", 0, "deleted"),
        SessionFile("/ov/log.txt", len("start\nend\n"), "file"),
        SessionFile("/ov/sub", 0, "dir"),
    ]


async def test_a_second_turn_and_a_new_runner_on_the_same_sqlite_file_see_the_earlier_writes(tmp_path: Path) -> None:
    host = Host(tmp_path)
    with SqliteSessionService(tmp_path / "s.db") as store:
        await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert final(await drive(host.runner(store)))[2] == "start\nend\n"
        # a second run of the same runner's session: the log grows
        (host.folder / "host.txt").write_text("host")  # unchanged anyway; the overlay hides it
        assert final(await drive(host.runner(store)))[0] == "start\nend\nstart\n"
    with SqliteSessionService(tmp_path / "s.db") as again:  # a new process's store and runner
        runner = host.runner(again)
        assert final(await drive(runner))[2] == "start\nend\nstart\nend\nstart\nend\n"
        listed = {f.path: f.size for f in await runner.files(user_id=USER, session_id=SESSION)}
        assert listed["/ov/log.txt"] == len("start\nend\n") * 3
    assert host.snapshot() == {"host.txt": "host"}


async def test_under_process_isolation_too(store: Any, tmp_path: Path) -> None:
    host = Host(tmp_path)
    await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert final(await drive(host.runner(store, isolation="process")))[2] == "start\nend\n"
    assert final(await drive(host.runner(store, isolation="process")))[0] == "start\nend\nstart\n"
    assert host.snapshot() == {"host.txt": "host"}


async def test_two_scripts_of_one_run_share_the_overlay(store: Any, tmp_path: Path) -> None:
    host = Host(tmp_path)
    first = 'from pathlib import Path\nPath("/ov/a.txt").write_text("A")\n{"type": "observation", "value": "FIRST"}'
    second = 'from pathlib import Path\n{"type": "final_result", "value": Path("/ov/a.txt").read_text()}'
    runner = host.runner(store, lambda request: fence(second if "FIRST" in repr(request) else first))
    await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    events = await drive(runner)
    assert events is not None and events[-1].text == "A"
    assert not (host.folder / "a.txt").exists()


async def test_a_crash_recovers_the_same_overlay_and_writes_nothing_to_the_host(store: Any, tmp_path: Path) -> None:
    host = Host(tmp_path)
    await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert final(await drive(host.runner(store))) is not None  # a first turn: the session holds an overlay
    first = await host.runner(store).files(user_id=USER, session_id=SESSION)
    host.crash_in_note = True
    assert await drive(host.runner(store)) is None  # dies in the tool, its intent durable
    assert host.snapshot() == {"host.txt": "host"}
    # the session still holds the first turn's overlay; the turn record names it
    assert await host.runner(store).files(user_id=USER, session_id=SESSION) == first
    slot = await store.load_turn(app_name=APP, user_id=USER, session_id=SESSION)
    assert slot is not None and isinstance(slot.data["files"]["start"], str)
    events = await drive(host.runner(store), message=None)  # recovery replays against the same overlay
    seen, _, text, _ = final(events)
    assert (seen, text) == ("start\nend\nstart\n", "start\nend\nstart\nend\n")  # no doubled line
    assert host.notes == ["start\n", "start\nend\nstart\n", "start\nend\nstart\n"]
    assert host.snapshot() == {"host.txt": "host"}
    listed = {f.path: f.size for f in await host.runner(store).files(user_id=USER, session_id=SESSION)}
    assert listed["/ov/log.txt"] == len("start\nend\n") * 2


async def test_limits_feed_an_oserror_to_the_model_and_keep_the_overlay(store: Any, tmp_path: Path) -> None:
    host = Host(tmp_path)
    big = 'from pathlib import Path\nPath("/ov/big.bin").write_bytes(b"x" * 2000)\n"done"'
    many = 'from pathlib import Path\nfor i in range(5):\n    Path(f"/ov/f{i}").write_text("")\n"done"'
    for script, bounds in ((big, {"max_bytes": 1000}), (many, {"max_files": 3})):
        seen: list[str] = []

        def model(request: Any, script: str = script, seen: list[str] = seen) -> str:
            seen.append(repr(request))
            if len(seen) == 1:
                return fence(script)
            return fence('{"type": "final_result", "value": "gave up"}')

        runner = host.runner(store, model, **bounds)
        session = f"s-{len(bounds)}-{next(iter(bounds))}"
        await store.create_session(app_name=APP, user_id=USER, session_id=session)
        events = await drive(runner, session=session)
        assert events is not None and events[-1].text == "gave up"
        assert "OSError: the overlay mount /ov would hold" in seen[1] and next(iter(bounds)) in seen[1]
        assert await runner.files(user_id=USER, session_id=session) == []  # nothing kept
    assert host.snapshot() == {"host.txt": "host"}


def test_a_write_far_past_the_bounds_fails_in_the_script(tmp_path: Path) -> None:
    host = Host(tmp_path)
    script = (
        "from pathlib import Path\n"
        "try:\n"
        '    Path("/ov/big.bin").write_bytes(b"x" * 100000)\n'
        '    out = "written"\n'
        "except Exception as e:\n"
        "    out = type(e).__name__ + ': ' + str(e)\n"
        "out"
    )
    step = host.runtime(max_bytes=1000, max_files=2).start(script)
    assert isinstance(step, Complete)
    assert step.value.startswith("MemoryError: mount memory usage limit of 2 KB exceeded")
    assert host.snapshot() == {"host.txt": "host"}


async def test_two_sessions_overlays_are_isolated(store: Any, tmp_path: Path) -> None:
    host = Host(tmp_path)
    for sid in ("one", "two"):
        await store.create_session(app_name=APP, user_id=USER, session_id=sid)
    assert final(await drive(host.runner(store), session="one"))[2] == "start\nend\n"
    assert final(await drive(host.runner(store), session="one"))[2] == "start\nend\nstart\nend\n"
    assert final(await drive(host.runner(store), session="two"))[2] == "start\nend\n"
    runner = host.runner(store)
    sizes = {sid: {f.path: f.size for f in await runner.files(user_id=USER, session_id=sid)} for sid in ("one", "two")}
    assert sizes["one"]["/ov/log.txt"] == 20 and sizes["two"]["/ov/log.txt"] == 10
    s1 = await store.get_session(app_name=APP, user_id=USER, session_id="one")
    s2 = await store.get_session(app_name=APP, user_id=USER, session_id="two")
    assert s1 is not None and s2 is not None and s1.state[OVERLAY_STATE_KEY] != s2.state[OVERLAY_STATE_KEY]


async def test_beside_a_read_write_mount_only_the_read_write_writes_reach_the_host(store: Any, tmp_path: Path) -> None:
    host = Host(tmp_path)
    rw = tmp_path / "rw"
    rw.mkdir()
    script = (
        'from pathlib import Path\nPath("/rw/a.txt").write_text("A")\nPath("/ov/b.txt").write_text("B")\n'
        '{"type": "final_result", "value": Path("/rw/a.txt").read_text() + Path("/ov/b.txt").read_text()}'
    )
    mounts = [
        Mount(virtual_path="/ov", host_path=host.folder, access=PathAccess.OVERLAY),
        Mount(virtual_path="/rw", host_path=rw, access=PathAccess.READ_WRITE),
    ]
    agent = CodeActAgent(
        name="coder", model=ScriptedModel(lambda request: fence(script)), runtime=MontyRuntime(mounts=mounts)
    )
    runner = Runner(app_name=APP, agent=agent, session_service=store)
    await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    events = await drive(runner)
    assert events is not None and events[-1].text == "AB"
    assert (rw / "a.txt").read_text() == "A" and host.snapshot() == {"host.txt": "host"}
    assert await runner.files(user_id=USER, session_id=SESSION) == [SessionFile("/ov/b.txt", 1, "file")]


MIXED = """
from pathlib import Path
for name in ("/rw/log.txt", "/ov/log.txt"):
    p = Path(name)
    p.write_text((p.read_text() if p.exists() else "") + "start\\n")
{"type": "final_result", "value": Path("/rw/log.txt").read_text() + Path("/ov/log.txt").read_text()}
"""


async def test_a_crash_in_the_read_write_apply_recovers_both_layers_once(
    store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codeact.agent import _files, _journal_writes

    host = Host(tmp_path)
    rw = tmp_path / "rw"
    rw.mkdir()
    real, calls = _files.apply_layer, []

    def crashing(data: bytes, mounts: dict[str, Path]) -> int:
        calls.append(data)
        n = real(data, mounts)
        if len(calls) == 1:
            raise Crash
        return n

    monkeypatch.setattr(_journal_writes, "apply_layer", crashing)
    mounts = [
        Mount(virtual_path="/ov", host_path=host.folder, access=PathAccess.OVERLAY),
        Mount(virtual_path="/rw", host_path=rw, access=PathAccess.READ_WRITE),
    ]

    def runner() -> Runner:
        model = ScriptedModel(lambda request: fence(MIXED))
        agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(mounts=mounts))
        return Runner(app_name=APP, agent=agent, session_service=store)

    await store.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert await drive(runner()) is None
    events = await drive(runner(), message=None)
    assert events is not None and events[-1].text == "start\nstart\n"  # one line each, no divergence
    assert (rw / "log.txt").read_text() == "start\n" and host.snapshot() == {"host.txt": "host"}
    assert await runner().files(user_id=USER, session_id=SESSION) == [SessionFile("/ov/log.txt", 6, "file")]


def test_a_direct_start_never_writes_the_host(tmp_path: Path) -> None:
    host = Host(tmp_path)
    step = host.runtime().start(
        'from pathlib import Path\nPath("/ov/n.txt").write_text("n")\nPath("/ov/host.txt").write_text("changed")\n'
        'Path("/ov/host.txt").read_text() + Path("/ov/n.txt").read_text()'
    )
    assert isinstance(step, Complete) and step.value == "changedn"
    assert host.snapshot() == {"host.txt": "host"}
    assert step.os_log and step.os_log[-1][0] == "files"  # the layer comes back to the caller


def test_process_isolation_keeps_the_host_untouched(tmp_path: Path) -> None:
    host = Host(tmp_path)
    runtime = MontyRuntime(
        mounts=[Mount(virtual_path="/ov", host_path=host.folder, access=PathAccess.OVERLAY)], isolation="process"
    )
    step = runtime.start('from pathlib import Path\nPath("/ov/n.txt").write_text("n")\nPath("/ov/n.txt").read_text()')
    assert isinstance(step, Complete) and step.value == "n"
    assert host.snapshot() == {"host.txt": "host"}


def test_cpython_runtime_refuses_overlay_mounts(tmp_path: Path) -> None:
    mount = Mount(virtual_path="/ov", host_path=tmp_path, access=PathAccess.OVERLAY)
    with pytest.raises(UnsupportedMountError, match="overlay mount /ov"):
        CPythonRuntime(mounts=[mount])
    assert CPythonRuntime().capabilities() is not None
