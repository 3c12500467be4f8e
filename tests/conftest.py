"""Shared helpers and fixtures of the test suite.

Store fixtures: ``service`` (one session service), ``make_service`` (a factory of services on
one store, to play several processes) and ``store_kind`` (which store), parametrized over
``STORE_KINDS``. A new store joins by adding its name to ``STORE_KINDS`` and a branch to
``open_service``: every test using these fixtures then runs on it too."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from codeact import (
    BaseSessionService,
    Call,
    Complete,
    InMemorySessionService,
    MontyRuntime,
    Raised,
    SqliteSessionService,
)

REPO = Path(__file__).resolve().parent.parent


def last_line(message: str) -> str:
    """The ``Type: message`` line of a traceback-style text."""
    return message.rstrip().splitlines()[-1]


def start(rt: MontyRuntime, script: str) -> Call | Complete | Raised:
    """Starts ``script`` under the name the agent uses, ``agent``."""
    return rt.start(textwrap.dedent(script), "agent")


def expect_complete(step: object) -> Complete:
    assert isinstance(step, Complete), step
    return step


def expect_raised(step: object) -> Raised:
    assert isinstance(step, Raised), step
    return step


def expect_call(step: object) -> Call:
    assert isinstance(step, Call), step
    return step


def forge(snapshot: bytes, change: Callable[[bytes], bytes], *, claim_unsigned: bool = False) -> bytes:
    """``snapshot`` with its payload replaced by ``change(payload)`` and a SHA-256 tag (32
    bytes) computed over the result: what anyone who can write the session store can make
    without the key. codeact's own section is kept; ``claim_unsigned`` clears the envelope's
    signed bit. The envelope (rust/src/snapshot.rs): magic (4), format version (2), Monty
    version (1 + n), dump version (2), flags (1), recursion depth (4), payload length (8),
    payload, codeact's section when flagged, tag."""
    import hashlib
    import struct

    flag_at = 4 + 2 + 1 + snapshot[6] + 2
    head = flag_at + 1 + 4
    plen = struct.unpack("<Q", snapshot[head : head + 8])[0]
    payload = change(snapshot[head + 8 : head + 8 + plen])
    body = bytearray(snapshot[:head] + struct.pack("<Q", len(payload)) + payload + snapshot[head + 8 + plen : -32])
    if claim_unsigned:
        body[flag_at] &= ~1
    return bytes(body) + hashlib.sha256(body).digest()


def change_bytes(rng: random.Random) -> Callable[[bytes], bytes]:
    """A payload change for ``forge``: one to three bytes set to random values."""

    def change(payload: bytes) -> bytes:
        p = bytearray(payload)
        for _ in range(rng.randint(1, 3)):
            p[rng.randrange(len(p))] = rng.randrange(256)
        return bytes(p)

    return change


def run_child(code: str, timeout: float = 60.0, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Runs ``code`` in a fresh interpreter, so a crash fails one test, not the session."""
    env = dict(os.environ)
    env.setdefault("PYTHONFAULTHANDLER", "1")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every async test (``pytest.mark.anyio``) runs under asyncio and under trio."""
    return request.param


@pytest.fixture
def monty() -> MontyRuntime:
    return MontyRuntime()


# ------------------------------------------------------------------ session stores

STORE_KINDS: list[str] = ["memory", "sqlite"]
"""The stores the store fixtures run on: in memory, and a SQLite database file in ``tmp_path``."""

ServiceFactory = Callable[[], BaseSessionService]


def open_service(kind: str, tmp_path: Path) -> BaseSessionService:
    """A new session service on the store ``kind`` kept under ``tmp_path``. SQLite services
    opened on the same ``tmp_path`` share one database file (``sessions.db``)."""
    if kind == "memory":
        return InMemorySessionService()
    if kind == "sqlite":
        return SqliteSessionService(tmp_path / "sessions.db")
    raise ValueError(f"unknown store kind {kind!r}; known: {STORE_KINDS}")


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """The name of the store under test, one of ``STORE_KINDS``."""
    return request.param


@pytest.fixture
def make_service(store_kind: str, tmp_path: Path) -> Iterator[ServiceFactory]:
    """Services sharing one store, as several processes would: the same in-memory service
    each time, or a new SQLite service on the same file. All are closed at teardown."""
    opened: list[BaseSessionService] = []

    def make() -> BaseSessionService:
        if store_kind == "memory" and opened:
            return opened[0]
        opened.append(open_service(store_kind, tmp_path))
        return opened[-1]

    yield make
    for service in opened:
        service.close()


@pytest.fixture
def service(make_service: ServiceFactory) -> BaseSessionService:
    """One real session service on the store under test (``store_kind``)."""
    return make_service()


# ------------------------------------------------------------------ slow and serial groups
# `make test` runs the suite in parallel (pytest-xdist), then the `serial` group one test at a
# time; `make test-quick` (`pytest -m "not slow"`) leaves the slow kinds out. Both marks are
# given here, in one table, so a new test of a listed kind is in its group without a decorator.
# A test not listed here runs in parallel with the others: it must not share a port, a folder,
# a server or an environment variable with another test (docs/building.md, "Tests").

SLOW_MODULES: dict[str, str] = {
    "test_dbos": "DBOS workers in child processes on their own PostgreSQL server",
    "test_postgres": "a PostgreSQL server per test process",
    "test_local_model": "the local GGUF model",
    "test_crash_recovery": "child processes killed at every journal boundary",
    "test_host_survival": "child processes the scripts try to crash",
    "test_examples": "each example in a child process",
    "test_fuzz_atheris": "a fuzzing campaign",
    "test_fuzz_native": "long properties",
    "test_approvals_property": "long properties",
    "test_durability_property": "long properties",
    "test_value_forms_property": "long properties",
    "test_isolation_modes": "the runtime suite again with process isolation",
    "test_escalation": "child processes killed in crash recovery",
    "test_concurrent_resume": "child processes racing to resume",
    "test_load": "many concurrent sessions",
    "test_adk_web": "adk web in a child process, driven by Chromium",
}
"""Modules all of whose tests are slow, with why."""

SLOW_TESTS: dict[str, tuple[str, ...]] = {
    "test_agent_durability": ("test_crash_", "test_monty_crash_", "test_checkpoint_every_bounds_replay"),
    "test_approvals": ("test_failed_resume_in_another_process", "test_edited_record_approved_in_another_process"),
    "test_cli": ("test_chat_approves", "test_chat_denies", "test_host_failures_end_with", "test_the_module_runs_as"),
    "test_corpus": ("test_the_module_runs_as",),
    "test_adversarial": ("test_adversarial_script",),
    "test_doors_pydantic_ai": ("test_an_approval_replayed_by_another_os_process",),  # a real subprocess, ~35 s
}
"""Tests (by module and name prefix) that are slow: child processes or long campaigns."""

SLOW_FIXTURES = frozenset({"browser", "context", "open_served"})
"""Fixtures that make a test slow: Chromium (tests/test_web.py)."""

SECOND_BACKEND = "trio"
"""An async test runs under asyncio and under trio (``anyio_backend``); its trio run counts as
slow, so the inner loop runs each async test once and the full suite runs both."""

SERIAL_MODULES: frozenset[str] = frozenset(
    {"test_event_loop_free", "test_step_race", "test_load", "test_memory_caps", "test_live_output"}
)
"""Modules whose tests measure time or contention: run one at a time, never beside another test."""

SERIAL_TESTS: dict[str, tuple[str, ...]] = {
    "test_oneshot": ("test_arun_leaves_the_event_loop_free",),
    # a paced model streaming in another process, watched growing in Chromium: timing under load
    "test_web_live": ("test_the_timeline_shows_the_reply_and_output_of_a_run_in_another_process_growing",),
    "test_faults": (
        "test_sync_tool_timeout_holds",
        "test_sync_tool_does_not_block_other_sessions",
        "test_budget_max_script_seconds_spans_steps",
    ),
    "test_monty_limits": ("test_time_limit_travels_inside_the_snapshot",),
    "test_runtime_gaps": ("test_loops_of_stops_the_host_answers_end_at_max_duration",),
}
"""Timing-sensitive tests (by module and name prefix): they assert on elapsed time or ticks."""


def _backend(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("anyio_backend") if callspec is not None else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow kinds ``slow`` and the timing-sensitive tests ``serial`` (tables above)."""
    for item in items:
        module = item.module.__name__.rpartition(".")[2] if isinstance(item, pytest.Function) else ""
        name = item.name
        if (
            module in SLOW_MODULES
            or name.startswith(SLOW_TESTS.get(module, ()))
            or SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            or _backend(item) == SECOND_BACKEND
        ):
            item.add_marker(pytest.mark.slow)
        if module in SERIAL_MODULES or name.startswith(SERIAL_TESTS.get(module, ())):
            item.add_marker(pytest.mark.serial)
