"""Shared helpers for the runtime tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codeact import Call, Complete, MontyRuntime, Raised

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
