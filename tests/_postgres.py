"""A throwaway PostgreSQL server for the tests: ``initdb`` + ``pg_ctl`` in a temporary
folder, on 127.0.0.1 and a free port, started on first use and stopped at the end of the
test session (by its data folder). As root the server runs as the ``postgres`` user.

Import the fixtures into a test module: ``from _postgres import postgres_server, postgres_url``.
``postgres_url`` is a fresh, empty database per test. Without the binaries the tests skip,
unless ``CODEACT_REQUIRE_POSTGRES=1`` (CI), where they fail.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ("PostgresServer", "fresh_database", "postgres_server", "postgres_url", "require_server")

_SEARCH = [os.environ.get("CODEACT_PG_BIN", ""), *sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)]


def _bin_dir() -> Path | None:
    for candidate in _SEARCH:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One server: ``url(dbname)`` gives a connection URL, ``admin(sql)`` runs SQL as the
    superuser on the ``postgres`` database. ``fsync``: the server flushes its WAL to disk
    (on for the benchmark's ``"power"`` figures; the tests need no flushes)."""

    def __init__(self, bin_dir: Path, *, fsync: bool = False) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="codeact-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_postgres = os.geteuid() == 0
        self.user = "postgres"
        self._counter = itertools.count()
        self._lock = threading.Lock()
        if self.as_postgres:
            shutil.chown(self.root, "postgres")
            self.root.chmod(0o755)
        self._run("initdb", "-D", str(self.data), "-U", self.user, "-A", "trust", "--no-sync", "-E", "UTF8")
        log = self.root / "server.log"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(log),
            "-w",
            "-t",
            "60",
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c max_connections=200 "
            f"-c fsync={'on' if fsync else 'off'}",
            "start",
        )
        self.started = True

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bin_dir / tool), *args]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{tool} failed ({proc.returncode}): {proc.stdout}\n{proc.stderr}")

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def admin(self, sql: str) -> list[tuple[object, ...]]:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else []

    def new_database(self) -> str:
        with self._lock:
            name = f"t{os.getpid()}_{next(self._counter)}"
        self.admin(f"CREATE DATABASE {name}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        self.admin(f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)")

    def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


_server: PostgresServer | None = None
_server_lock = threading.Lock()


def require_server() -> PostgresServer:
    """The shared server, started on first use; skips the test without the binaries or
    psycopg (fails instead when ``CODEACT_REQUIRE_POSTGRES=1``)."""
    global _server
    required = os.environ.get("CODEACT_REQUIRE_POSTGRES") == "1"
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as e:
        if required:
            pytest.fail(f"CODEACT_REQUIRE_POSTGRES=1 but psycopg is missing: {e}")
        pytest.skip(f"psycopg not installed ({e})")
    with _server_lock:
        if _server is None:
            bin_dir = _bin_dir()
            if bin_dir is None:
                if required:
                    pytest.fail("CODEACT_REQUIRE_POSTGRES=1 but no initdb found (apt-get install postgresql)")
                pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not found")
            _server = PostgresServer(bin_dir)
            atexit.register(_server.stop)
        return _server


def fresh_database() -> str:
    """The URL of a new empty database on the shared server."""
    return require_server().new_database()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The throwaway server of the test session (stopped at its end)."""
    server = require_server()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh empty database on the session's server (dropped after the test)."""
    url = postgres_server.new_database()
    yield url
    postgres_server.drop_database(url)
