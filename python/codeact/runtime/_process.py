"""``MontyRuntime(isolation="process")``: the same API, run in a pool of worker processes.

In-process, the host is protected by limits checked before allocating, depth guards and a
stack sized for the recursion limit (``docs/security.md``). What remains (an interpreter
bug that aborts, a forged unsigned snapshot that panics while unwinding) would take the
host down; here it takes down one worker instead, and the call raises
``CodeRuntimeError``.

Design:
- One pool per host process, shared by every process-isolated runtime; a worker serves any
  configuration (the configuration travels with each request and the worker caches one
  engine per configuration). Workers start lazily, up to ``pool_size()`` of them
  (``CODEACT_PROCESS_WORKERS`` or the CPU count, at least 2).
- Workers are plain ``python -m codeact.runtime._process`` children (never ``fork`` of
  the host, never a re-import of the host's ``__main__``). Requests and replies are
  length-prefixed ``marshal`` frames over the child's stdin / a private copy of its
  stdout: plain data only, never ``pickle``, so a compromised worker cannot make the
  host run code by what it sends back.
- A worker is stateless between requests: a paused script comes back as snapshot bytes
  (dumped in the worker at every stop), and the host-side ``PendingCall`` resumes from
  them on any worker. The cost is one dump per tool call, reported by the benchmark.
- A worker that dies (signal, abort, exit) or does not answer within
  ``max_duration + HANG_GRACE`` seconds is killed and replaced; the request raises
  ``CodeRuntimeError`` naming what happened.
"""

from __future__ import annotations

import atexit
import marshal
import os
import select
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .._values import problem
from ..exceptions import CodeRuntimeError, SnapshotError, ValueConversionError
from ._seam import (
    AdvanceTicket,
    Call,
    Complete,
    Gather,
    Raised,
    ReplayDivergenceError,
    ResumeError,
    ResumeValue,
    RunStep,
    resume_in_thread,
    step_within,
)
from ._stepper import usable_cores

__all__ = ("HANG_GRACE", "ProcessContinuation", "ProcessEngine", "pool_size", "shutdown_pool")

HANG_GRACE = 30.0
"""Seconds a worker may take beyond the script's ``max_duration`` before it is killed as hung
(loading and dumping large snapshots, OS calls)."""

ALREADY_RESUMED = "this PendingCall was already resumed; a PendingCall is single use"

_HEADER = struct.Struct("<Q")
_ERRORS: dict[str, type[Exception]] = {
    "SnapshotError": SnapshotError,
    "ValueConversionError": ValueConversionError,
    "CodeRuntimeError": CodeRuntimeError,
    "ReplayDivergenceError": ReplayDivergenceError,
    "ValueError": ValueError,
    "TypeError": TypeError,
}

Config = tuple[Any, ...]
"""(max_duration, max_memory, max_recursion_depth, mounts, environ, system_clock,
tool_style, max_stdout, snapshot_key, max_os_calls, timezone, clock), exactly the native engine's arguments."""

_CONFIG_FIELDS = (
    "max_duration",
    "max_memory",
    "max_recursion_depth",
    "mounts",
    "environ",
    "system_clock",
    "tool_style",
    "max_stdout",
    "snapshot_key",
    "max_os_calls",
    "timezone",
    "clock",
)


def pool_size() -> int:
    """Worker processes the pool grows to: ``CODEACT_PROCESS_WORKERS`` or the CPUs this
    process may run on (its affinity mask; at least 2)."""
    env = os.environ.get("CODEACT_PROCESS_WORKERS")
    if env:
        return max(1, int(env))
    return max(2, usable_cores())


# ------------------------------------------------------------------ framing


def _write_frame(fd: int, obj: Any) -> None:
    data = marshal.dumps(obj)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """Reads ``n`` bytes; ``None`` at EOF. Raises ``TimeoutError`` past ``deadline``."""
    chunks: list[bytes] = []
    left = n
    while left:
        if deadline is not None:
            wait = deadline - _now()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int, deadline: float | None = None) -> Any:
    head = _read_exact(fd, _HEADER.size, deadline)
    if head is None:
        raise EOFError
    (size,) = _HEADER.unpack(head)
    body = _read_exact(fd, size, deadline)
    if body is None:
        raise EOFError
    return marshal.loads(body)


def _now() -> float:
    import time

    return time.monotonic()


# ------------------------------------------------------------------ host side: values


_EXACT = frozenset({bool, int, float, str, bytes})


def _exact(value: Any) -> Any:
    """A copy of plain ``value`` (``_values.problem`` accepted it) with exact types
    (subclasses reduced to their base, as the native conversion does), so it marshals."""
    if value is None:
        return None
    kind = type(value)
    if kind in _EXACT:
        return value
    # The base types' own conversions: a subclass's overridden __str__ / __int__ do not count.
    if isinstance(value, bool):
        return bool(int.__int__(value))
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bytes):
        return bytes(memoryview(value))
    if isinstance(value, list):
        return [_exact(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_exact(v) for v in value)
    if isinstance(value, frozenset):
        return frozenset(_exact(v) for v in value)
    if isinstance(value, set):
        return {_exact(v) for v in value}
    return {_exact(k): _exact(v) for k, v in value.items()}


def _encode_outcome(outcome: Any) -> tuple[Any, ...]:
    if isinstance(outcome, ResumeValue):
        found = problem(outcome.value, "value")
        if found is not None:
            raise ValueConversionError(f"cannot resume the script with this value: {found}")
        return ("value", _exact(outcome.value))
    if isinstance(outcome, ResumeError):
        if not isinstance(outcome.message, str) or not isinstance(outcome.exc_type, str):
            raise TypeError("ResumeError message and exc_type must be str")
        return ("error", outcome.exc_type, outcome.message)
    raise TypeError(f"resume() takes ResumeValue(value) or ResumeError(message), got {type(outcome).__name__}")


# ------------------------------------------------------------------ host side: pool


class _Worker:
    def __init__(self) -> None:
        env = dict(os.environ)
        env.setdefault("PYTHONFAULTHANDLER", "1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "codeact.runtime._process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env=env,
            close_fds=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()

    def request(self, msg: tuple[Any, ...], timeout: float | None) -> Any:
        deadline = None if timeout is None else _now() + timeout
        try:
            _write_frame(self.wfd, msg)
            return _read_frame(self.rfd, deadline)
        except TimeoutError:
            self.kill()
            raise CodeRuntimeError(
                f"interpreter error: the worker process did not answer within {timeout:.0f} s and was killed"
            ) from None
        except (EOFError, BrokenPipeError, OSError, ValueError) as exc:
            code = self.kill()
            raise CodeRuntimeError(f"interpreter error: the worker process died ({_describe_exit(code)})") from exc

    def kill(self) -> int | None:
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        return code

    def alive(self) -> bool:
        return self.proc.poll() is None


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Pool:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._idle: list[_Worker] = []
        self._count = 0
        self.spawned = 0
        self.crashes = 0
        self._pids: set[int] = set()

    def run(self, msg: tuple[Any, ...], timeout: float | None) -> Any:
        worker = self._checkout()
        ok = False
        try:
            reply = worker.request(msg, timeout)
            ok = True
            return reply
        except CodeRuntimeError:
            with self._lock:
                self.crashes += 1
            raise
        finally:
            self._checkin(worker, ok and worker.alive())

    def _busy_pids(self) -> list[int]:
        """Process ids of the workers serving a request now (for tests)."""
        with self._lock:
            idle = {w.proc.pid for w in self._idle}
            return [pid for pid in self._pids if pid not in idle]

    def _checkout(self) -> _Worker:
        with self._lock:
            while True:
                if self._idle:
                    return self._idle.pop()
                if self._count < pool_size():
                    self._count += 1
                    break
                self._lock.wait()
        try:
            worker = _Worker()
        except BaseException:
            with self._lock:
                self._count -= 1
                self._lock.notify()
            raise
        with self._lock:
            self.spawned += 1
            self._pids.add(worker.proc.pid)
        return worker

    def _checkin(self, worker: _Worker, healthy: bool) -> None:
        if not healthy:
            worker.kill()
        with self._lock:
            if not healthy:
                self._pids.discard(worker.proc.pid)
            if healthy:
                self._idle.append(worker)
            else:
                self._count -= 1
            self._lock.notify()

    def shutdown(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
        for w in idle:
            try:
                if w.proc.stdin is not None:
                    w.proc.stdin.close()
            except OSError:
                pass
            w.kill()


_POOL = _Pool()
atexit.register(_POOL.shutdown)


def shutdown_pool() -> None:
    """Stops the idle worker processes (they restart on the next request)."""
    _POOL.shutdown()


def pool_stats() -> dict[str, int]:
    """Workers spawned and worker failures (crashes, hangs) since the host started."""
    return {"spawned": _POOL.spawned, "crashes": _POOL.crashes}


def _replay(os_replay: Sequence[tuple[str, Any]] | None) -> tuple[tuple[str, Any], ...]:
    """``os_replay`` as a tuple of pairs the frame codec carries."""
    return tuple((str(k), v) for k, v in (os_replay or ()))


_GATHER_RESUMED = "this Gather was already resumed; a Gather is single use"
_NOT_ALONE = "a call of a Gather is not resumed by itself: resume the Gather step with {call_id: outcome}"

_CallInfo = tuple[str, tuple[Any, ...], dict[str, Any], int]


class ProcessContinuation:
    """A script paused in a worker at one tool call or at a gather, held here as its snapshot
    bytes (the process twin of the native continuation); single use. A ``Call`` step's
    ``call`` is the continuation itself; a ``Gather`` step holds it and its ``calls``."""

    __slots__ = (
        "_engine",
        "_snapshot",
        "_used",
        "call_id",
        "call_ids",
        "calls",
        "is_gather",
        "keyword_args",
        "name",
        "positional_args",
    )

    def __init__(self, engine: ProcessEngine, calls: Sequence[_CallInfo], snapshot: bytes, *, gather: bool) -> None:
        self._engine = engine
        self._snapshot = snapshot
        self._used = False
        self.is_gather = gather
        self.name, positional, self.keyword_args, self.call_id = calls[0]
        self.positional_args = tuple(positional)
        self.call_ids = tuple(c[3] for c in calls)
        self.calls = tuple(_ProcessCall(self, *c) for c in calls)

    def _check(self) -> None:
        if self._used:
            raise CodeRuntimeError(_GATHER_RESUMED if self.is_gather else ALREADY_RESUMED)

    def dump(self) -> bytes:
        self._check()
        return self._snapshot

    def resume(self, outcome: Any, os_replay: Sequence[tuple[str, Any]] | None = ()) -> RunStep:
        """A paused call with its ``outcome``, a gather with ``{call_id: outcome}``."""
        if self.is_gather or isinstance(outcome, dict):
            encoded: Any = _encode_outcomes(outcome, self.call_ids)
            kind = "resume_gather" if self.is_gather else "resume"
            if not self.is_gather:
                encoded = encoded[self.call_id]
        else:
            encoded = _encode_outcome(outcome)
            kind = "resume"
        self._check()
        self._used = True
        return self._engine._advance((kind, self._engine.config, self._snapshot, encoded, _replay(os_replay)))

    def resume_async(self, outcome: Any, os_replay: Sequence[tuple[str, Any]] | None = None) -> AdvanceTicket:
        """``resume`` on a worker thread (the worker process's round trip blocks): its ticket."""
        return resume_in_thread(self.resume, outcome, os_replay)

    def resume_within(
        self, outcome: Any, timeout: float, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> RunStep | AdvanceTicket:
        """``resume_async``, then the step when it finished within ``timeout`` seconds, else the ticket."""
        return step_within(self.resume_async(outcome, os_replay), timeout)

    def __repr__(self) -> str:
        if self.is_gather:
            return f"ProcessContinuation(call_ids={list(self.call_ids)})"
        return f"ProcessContinuation(name={self.name!r}, keyword_args={self.keyword_args!r}, call_id={self.call_id})"


class _ProcessCall:
    """One call a ``ProcessContinuation`` awaits (settled through it, never by itself)."""

    __slots__ = ("_continuation", "call_id", "keyword_args", "name", "positional_args")

    def __init__(
        self,
        continuation: ProcessContinuation,
        name: str,
        positional: tuple[Any, ...],
        keyword: dict[str, Any],
        call_id: int,
    ) -> None:
        self._continuation = continuation
        self.name = name
        self.positional_args = tuple(positional)
        self.keyword_args = keyword
        self.call_id = call_id

    def dump(self) -> bytes:
        return self._continuation.dump()

    def resume(self, outcome: Any, *, os_replay: Sequence[tuple[str, Any]] = ()) -> RunStep:
        raise CodeRuntimeError(_NOT_ALONE)

    def resume_async(self, outcome: Any, os_replay: Sequence[tuple[str, Any]] | None = None) -> AdvanceTicket:
        raise CodeRuntimeError(_NOT_ALONE)

    def resume_within(
        self, outcome: Any, timeout: float, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> RunStep | AdvanceTicket:
        raise CodeRuntimeError(_NOT_ALONE)

    def __repr__(self) -> str:
        return f"ProcessCall(name={self.name!r}, keyword_args={self.keyword_args!r}, call_id={self.call_id})"


def _encode_outcomes(outcomes: Any, call_ids: Sequence[int] | None) -> dict[int, tuple[Any, ...]]:
    if not isinstance(outcomes, dict):
        raise TypeError("a Gather resumes with a dict {call_id: ResumeValue | ResumeError}")
    if not outcomes:
        raise ValueError("settle at least one call of the Gather: {call_id: outcome}")
    encoded: dict[int, tuple[Any, ...]] = {}
    for call_id, outcome in outcomes.items():
        if not isinstance(call_id, int) or isinstance(call_id, bool):
            raise TypeError("Gather outcomes are keyed by the calls' call_id (int)")
        if call_ids is not None and call_id not in call_ids:
            raise ValueError(f"call_id {call_id} is not a call this Gather awaits (it awaits {list(call_ids)})")
        encoded[int(call_id)] = _encode_outcome(outcome)
    return encoded


class ProcessEngine:
    """The native engine's API (start / resume / inspect), served by the worker pool."""

    def __init__(self, **config: Any) -> None:
        self.config: Config = tuple(config[k] for k in _CONFIG_FIELDS)
        duration = config["max_duration"]
        self.timeout = None if duration is None else float(duration) + HANG_GRACE

    def start(
        self,
        script: str,
        script_name: str,
        os_replay: Sequence[tuple[str, Any]] | None = None,
        deferred: Sequence[int] | None = None,
    ) -> RunStep:
        if not isinstance(script, str) or not isinstance(script_name, str):
            raise TypeError("start() takes the script and its name as str")
        offsets = tuple(int(o) for o in deferred or ())
        return self._advance(("start", self.config, script, script_name, _replay(os_replay), offsets))

    def resume_gather(
        self, snapshot: bytes, outcomes: Any, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> RunStep:
        encoded = _encode_outcomes(outcomes, None)
        return self._advance(("resume_gather", self.config, bytes(snapshot), encoded, _replay(os_replay)))

    def inspect_gather(self, snapshot: bytes) -> tuple[tuple[str, tuple[Any, ...], dict[str, Any], int], ...]:
        reply = self._request(("inspect_gather", self.config, bytes(snapshot)))
        return tuple((name, tuple(positional), keyword, call_id) for name, positional, keyword, call_id in reply[1])

    def resume(
        self, snapshot: bytes, outcome: ResumeValue | ResumeError, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> RunStep:
        encoded = _encode_outcome(outcome)
        return self._advance(("resume", self.config, bytes(snapshot), encoded, _replay(os_replay)))

    def restore(self, snapshot: bytes, session: bool | None = False) -> RunStep:
        """The step ``snapshot`` paused at, its continuation holding ``snapshot`` itself.
        Raises ``SnapshotError`` for bytes that cannot be loaded (a session's included)."""
        snapshot = bytes(snapshot)
        return self._step(self._request(("restore", self.config, snapshot)), snapshot)

    def inspect(self, snapshot: bytes) -> tuple[str, tuple[Any, ...], dict[str, Any], int]:
        reply = self._request(("inspect", self.config, bytes(snapshot)))
        name, positional, keyword, call_id = reply[1]
        return name, tuple(positional), keyword, call_id

    def _request(self, msg: tuple[Any, ...]) -> Any:
        reply = _POOL.run(msg, self.timeout)
        if reply[0] == "exc":
            raise _ERRORS.get(reply[1], CodeRuntimeError)(reply[2])
        return reply

    def _advance(self, msg: tuple[Any, ...]) -> RunStep:
        return self._step(self._request(msg))

    def _step(self, reply: tuple[Any, ...], snapshot: bytes | None = None) -> RunStep:
        kind = reply[0]
        if kind == "complete":
            return Complete(reply[1], reply[2], reply[3], reply[4])
        if kind == "raised":
            return Raised(reply[1], reply[2], reply[3], reply[4])
        if kind == "gather":
            _, calls, dumped, stdout, os_log, stderr = reply
            gather = ProcessContinuation(self, calls, snapshot or dumped, gather=True)
            return Gather(gather.calls, stdout, os_log, gather, stderr)
        _, name, positional, keyword, call_id, dumped, stdout, os_log, stderr = reply
        pending = ProcessContinuation(self, [(name, positional, keyword, call_id)], snapshot or dumped, gather=False)
        return Call(pending, stdout, os_log, stderr)


# ------------------------------------------------------------------ worker side


def _serve(rfd: int, wfd: int) -> None:
    from .. import _monty

    engines: dict[bytes, Any] = {}

    def engine(config: Config) -> Any:
        key = marshal.dumps(config)
        found = engines.get(key)
        if found is None:
            if len(engines) >= 64:
                engines.clear()
            found = engines[key] = _monty.MontyEngine(**dict(zip(_CONFIG_FIELDS, config, strict=True)))
        return found

    def step_reply(step: Any) -> tuple[Any, ...]:
        if isinstance(step, Complete):
            return ("complete", step.value, step.stdout, step.os_log, step.stderr)
        if isinstance(step, Raised):
            return ("raised", step.message, step.stdout, step.os_log, step.stderr)
        if isinstance(step, Gather):
            calls = tuple((c.name, tuple(c.positional_args), dict(c.keyword_args), c.call_id) for c in step.calls)
            return ("gather", calls, step.dump(), step.stdout, step.os_log, step.stderr)
        call = step.call
        return (
            "call",
            call.name,
            tuple(call.positional_args),
            dict(call.keyword_args),
            call.call_id,
            call.dump(),
            step.stdout,
            step.os_log,
            step.stderr,
        )

    def outcome(encoded: tuple[Any, ...]) -> Any:
        if encoded[0] == "value":
            return ResumeValue(encoded[1])
        return ResumeError(encoded[2], encoded[1])

    handlers: dict[str, Callable[..., tuple[Any, ...]]] = {
        "start": lambda cfg, script, name, replay, deferred=(): step_reply(
            engine(cfg).start(script, name, replay, list(deferred) or None)
        ),
        "resume": lambda cfg, snap, enc, replay: step_reply(engine(cfg).resume(snap, outcome(enc), replay)),
        "resume_gather": lambda cfg, snap, enc, replay: step_reply(
            engine(cfg).resume_gather(snap, {k: outcome(v) for k, v in enc.items()}, replay)
        ),
        "restore": lambda cfg, snap: step_reply(engine(cfg).restore(snap, False)),
        "inspect": lambda cfg, snap: ("inspect", tuple(engine(cfg).inspect(snap))),
        "inspect_gather": lambda cfg, snap: ("inspect_gather", tuple(engine(cfg).inspect_gather(snap))),
    }
    while True:
        try:
            msg = _read_frame(rfd)
        except EOFError:
            return
        try:
            reply = handlers[msg[0]](*msg[1:])
        except Exception as exc:
            name = type(exc).__name__
            reply = ("exc", name if name in _ERRORS else "CodeRuntimeError", str(exc))
        _write_frame(wfd, reply)


def _main() -> None:
    # The protocol owns the original stdout; anything else printing to fd 1 goes to stderr.
    wfd = os.dup(1)
    os.dup2(2, 1)
    rfd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host's Ctrl-C is the host's to handle
    _serve(rfd, wfd)


if __name__ == "__main__":
    _main()
