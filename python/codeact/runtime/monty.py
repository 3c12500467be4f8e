"""``MontyRuntime``: scripts run in-process on the Monty interpreter (SPEC §3).

The native core (``codeact._monty``) parses, steps, suspends, dumps and enforces limits
and the OS-access policy; this module holds the runtime, its prompt and the tool rendering.
The configuration values (limits, mounts, clocks) are in ``_options`` and re-exported here.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import hmac
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .. import _monty
from ..exceptions import CodeRuntimeError, SnapshotError
from . import _options
from ._check import cached_check_result, check_script_safely, format_findings
from ._oneshot import RunResult, arun_script, run_script
from ._options import DEFAULT_MAX_STDOUT, FrozenClock, MiB, Mount, PathAccess, ResourceLimits, SteppingClock, as_utc
from ._seam import (
    Call,
    Complete,
    Gather,
    OutputListener,
    Raised,
    ResumeError,
    ResumeValue,
    RunStep,
    RuntimeCapabilities,
    ThreadTicket,
)
from ._subset import STDLIB_MODULES, render_language_section

if TYPE_CHECKING:
    from ._render import Tool

__all__ = (
    "DEFAULT_MAX_STDOUT",
    "FINAL_ANSWER",
    "FrozenClock",
    "MiB",
    "Mount",
    "MontyRuntime",
    "NamespaceSession",
    "PathAccess",
    "ResourceLimits",
    "SteppingClock",
    "final_answer_step",
)

StepTicket = _monty.StepTicket
"""The native ticket of an advance on a step worker (``start_async``, ``resume_async``,
``resume_within``): ``wait(timeout=None) -> bool``, ``done``, ``result() -> RunStep``."""

_monty.register_seam_types(Call, Complete, Raised, ResumeValue, ResumeError)
_monty.register_gather_type(Gather)

_PATH_READ = (
    "exists()",
    "is_file()",
    "is_dir()",
    "is_symlink()",
    "read_text()",
    "read_bytes()",
    "stat()",
    "iterdir()",
    "resolve()",
    "absolute()",
    'open("r")',
)
_PATH_WRITE = (
    "write_text(s)",
    "write_bytes(b)",
    "append_text(s)",
    "append_bytes(b)",
    "mkdir(parents=False, exist_ok=False)",
    "unlink()",
    "rmdir()",
    "rename(target)",
    'open("w")',
    'open("a")',
)
_PATH_PURE = (
    "the / operator",
    "joinpath(...)",
    "is_absolute()",
    "with_name()",
    "with_stem()",
    "with_suffix()",
    "as_posix()",
    ".name",
    ".parent",
    ".stem",
    ".suffix",
    ".suffixes",
    ".parts",
)

_CALL_CONTRACT = (
    "There is no top-level `return`: the script's result is the value of its LAST EXPRESSION.\n"
    'Tools are reached ONLY through the built-in `call_tool("tool_name", {"arg": value})`, with one dict of '
    "arguments (omit the dict for a tool without arguments). Tool names are never Python functions; never pass "
    "keyword arguments to `call_tool`. `call_tool` returns the tool's result directly. A failed tool raises an "
    "exception you can catch with try/except.\n"
    "To run independent tool calls concurrently, await them together: "
    '`a, b = await asyncio.gather(call_tool("x", {...}), call_tool("y", {...}))` (after `import asyncio`; '
    "also `await asyncio.gather(*[call_tool(...) for ...])`); results come back in call order."
)
_FUNCTIONS_CONTRACT = (
    "There is no top-level `return`: the script's result is the value of its LAST EXPRESSION.\n"
    "Each tool is a Python function you call directly with positional or keyword arguments; it returns the "
    "tool's result. A failed tool raises an exception you can catch with try/except. To run independent tool "
    "calls concurrently, await them together: `a, b = await asyncio.gather(tool_a(...), tool_b(...))` (after "
    "`import asyncio`); results come back in call order. "
    "`final_answer(value)` ends the script with `value` as the final result (the same as ending with "
    '`{"type": "final_result", "value": value}`).'
)


class _Ready:
    """A ticket whose step is already known (same interface as the native ``StepTicket``)."""

    __slots__ = ("_step",)

    def __init__(self, step: RunStep) -> None:
        self._step = step

    done = True

    def wait(self, timeout: float | None = None) -> bool:
        return True

    def result(self) -> RunStep:
        return self._step


_INLINE_CHECK_BYTES = 16 * 1024
# Scripts each runtime remembers the check's answer for (MontyRuntime._checked).
_CHECK_MEMO = 256
"""Scripts longer than this are checked (and started) on a helper thread by ``start_async``."""
_CHECK_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="codeact-check")
_OFFLOAD_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="codeact-offload")
"""Runs the advances of an engine without native ``*_async`` variants (``isolation="process"``:
a blocking IPC round trip) off the caller's thread, so ``*_async`` never blocks an event loop
for an advance (issue 20)."""


class MontyRuntime:
    """Runs scripts in-process on Monty, with suspension, limits and a sandboxed OS view.

    Args:
        limits: per-advance limits (default: 5 s, 256 MiB, 1000 frames).
        mounts: host folders visible to scripts; validated here.
        environ: the only environment ``os.getenv`` / ``os.environ`` see (never the host's).
        system_clock: whether ``date.today()`` / ``datetime.now()`` read the host clock;
            when False (and no ``clock``) they raise ``OSError`` in the script.
        clock: a ``FrozenClock`` or ``SteppingClock`` that answers every clock read in place
            of the host clock (``system_clock`` does not matter then); None (default): the
            host clock.
        timezone: the sandbox's local time zone (``datetime.now()``, ``astimezone()``,
            ``time.localtime()``, ``%Z``, naive ``.timestamp()``): ``"local"`` (default: the
            host's zone by name, from ``TZ`` or ``/etc/localtime``, with its daylight saving
            rules; a fixed offset with no name when the host's tz database does not know
            it), ``"UTC"``, or an IANA name such as ``"America/New_York"``.
        prompt_extra: text appended to the capabilities prompt.
        tool_style: ``"call_tool"`` (only ``call_tool("name", {...})`` reaches tools) or
            ``"functions"`` (tools are bare functions; calls bound by ``bind_call_args``).
        max_stdout: bytes of output (stdout and stderr together) kept per run (default 10
            MiB): the budget holds across the run's advances, resumes and tool calls (and
            travels in its snapshots); the output past it is dropped and a marker
            (``[stdout truncated: ...]``, or ``[stderr truncated: ...]``) shows once, in the
            stream where the cut falls.
        snapshot_key: when given, snapshots are signed with HMAC-SHA256 under this key and
            only snapshots signed with it load. Needed whenever snapshot bytes are stored
            where someone else can write them (docs/security.md).
        isolation: ``"in_process"`` (default: scripts run on a thread of this process) or
            ``"process"``: the same API served by a shared pool of worker processes
            (``CODEACT_PROCESS_WORKERS``, default the CPU count), so an interpreter crash
            kills a worker and raises ``CodeRuntimeError`` instead of ending the host.
            Costs an IPC round trip and a snapshot dump per stop (docs/security.md).
        check_types: whether the agent's type check of a script's tool calls against the
            tools' stubs runs before it starts (``check_tool_calls``); a plain attribute. It
            needs an extension built with the ``type-check`` cargo feature
            (``make build FEATURES=type-check``, docs/type-check.md); without it the attribute
            is False and nothing is checked.
        namespace_sessions: whether ``start_session`` is offered (in process only), so
            ``persist_namespace`` runs on an interpreter session that keeps every value
            (ADR 0003); False keeps the agent's source transform (readable JSON namespace).

    Raises:
        ValueError: an invalid mount (relative, ``..``, ``/``, duplicate, missing host folder)
            or option (a ``timezone`` the tz database does not know).
    """

    file_layer = True
    """Read-write mounts can be served through a session's file layer (SPEC §5 "Files"): given
    an ``os_replay`` entry ``("files", <layer bytes>)``, an advance keeps the script's writes in
    the layer (reads see the host plus the layer) and hands it back as the last ``os_log`` entry
    of that kind; the agent applies it to the host after the commit that records it. Without
    that entry, writes go to the host as the script makes them."""

    def __init__(
        self,
        limits: ResourceLimits | None = None,
        mounts: Iterable[Mount] = (),
        environ: Mapping[str, str] | None = None,
        system_clock: bool = True,
        prompt_extra: str = "",
        tool_style: Literal["call_tool", "functions"] = "call_tool",
        *,
        max_stdout: int = DEFAULT_MAX_STDOUT,
        snapshot_key: bytes | None = None,
        isolation: Literal["in_process", "process"] = "in_process",
        rewrite_scripts: bool = True,
        check_scripts: bool = True,
        check_types: bool = True,
        namespace_sessions: bool = True,
        timezone: str = "local",
        clock: FrozenClock | SteppingClock | None = None,
    ) -> None:
        self.limits = limits if limits is not None else ResourceLimits()
        self.mounts: tuple[Mount, ...] = tuple(mounts)
        # with an overlay mount every advance gets a layer, so no write reaches the host unasked
        self._overlay = any(m.access is PathAccess.OVERLAY for m in self.mounts)
        self.environ: dict[str, str] = dict(environ or {})
        for k, v in self.environ.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise ValueError("environ must map str to str")
        self.system_clock = bool(system_clock)
        if not isinstance(timezone, str):
            raise ValueError(f"timezone must be 'local', 'UTC' or a zone name, not {timezone!r}")
        self.timezone = timezone
        if clock is not None and not isinstance(clock, (FrozenClock, SteppingClock)):
            raise ValueError(f"clock must be a FrozenClock, a SteppingClock or None, not {clock!r}")
        self.clock = clock
        self.prompt_extra = prompt_extra
        if tool_style not in ("call_tool", "functions"):
            raise ValueError(f"tool_style must be 'call_tool' or 'functions', not {tool_style!r}")
        # script text -> _checked's answer under the settings below (their setters clear it)
        self._check_memo: dict[str, tuple[str, str | None, tuple[int, ...]]] = {}
        self._tool_style = tool_style
        self._rewrite_scripts = bool(rewrite_scripts)
        self._check_scripts = bool(check_scripts)
        # Only in a build with the `type-check` cargo feature (docs/type-check.md).
        self.check_types = bool(check_types) and hasattr(_monty, "type_check")
        if max_stdout <= 0:
            raise ValueError("max_stdout must be a positive number of bytes")
        if snapshot_key is not None and (not isinstance(snapshot_key, bytes) or len(snapshot_key) < 16):
            raise ValueError("snapshot_key must be bytes, at least 16 of them")
        if isolation not in ("in_process", "process"):
            raise ValueError(f"isolation must be 'in_process' or 'process', got {isolation!r}")
        self.isolation = isolation
        self._record_key = (
            hmac.new(snapshot_key, b"codeact turn records v1", hashlib.sha256).digest() if snapshot_key else None
        )
        engine_config: dict[str, Any] = dict(
            max_duration=self.limits.max_duration,
            max_memory=self.limits.max_memory,
            max_recursion_depth=self.limits.max_recursion_depth,
            mounts=_options.engine_mounts(self.mounts),
            environ=list(self.environ.items()),
            system_clock=self.system_clock,
            tool_style=tool_style,
            max_stdout=max_stdout,
            snapshot_key=snapshot_key,
            max_os_calls=self.limits.max_os_calls,
            timezone=timezone,
            clock=None if clock is None else clock.instants(),
        )
        # Built in both modes: it validates the configuration here, in the host.
        self._engine: Any = _monty.MontyEngine(**engine_config)
        self._native_engine = self._engine
        if isolation == "process":
            from ._process import ProcessEngine

            self._engine = ProcessEngine(**engine_config)
        self._capabilities = RuntimeCapabilities(
            supports_suspension=True,
            prompt=self._build_prompt(),
            supports_await=True,
            supports_namespace_session=isolation == "in_process" and bool(namespace_sessions),
            importable_modules=STDLIB_MODULES,
            live_output=isolation == "in_process",
        )

    @property
    def tool_style(self) -> Literal["call_tool", "functions"]:
        """How tools are offered to scripts: ``"call_tool"`` or ``"functions"``; fixed at
        construction (the native engine is built for it)."""
        return self._tool_style

    @property
    def rewrite_scripts(self) -> bool:
        """Whether the subset check's rewrites are applied to scripts before they run."""
        return self._rewrite_scripts

    @rewrite_scripts.setter
    def rewrite_scripts(self, on: bool) -> None:
        """Turns the rewrites on or off; forgets the remembered check answers."""
        self._rewrite_scripts = bool(on)
        self._check_memo.clear()

    @property
    def check_scripts(self) -> bool:
        """Whether scripts go through the static subset check before they run."""
        return self._check_scripts

    @check_scripts.setter
    def check_scripts(self, on: bool) -> None:
        """Turns the subset check on or off; forgets the remembered check answers."""
        self._check_scripts = bool(on)
        self._check_memo.clear()

    def seal(self, data: bytes) -> str | None:
        """An HMAC-SHA256 (hex) of ``data`` under a key derived from ``snapshot_key``, or None
        without a key. The agent seals what it stores beside the continuation and what decides
        which tool runs (the turn record's call positions and pending calls, journal records),
        so with a key nothing a writer of the store can edit changes what executes
        (docs/security.md)."""
        if self._record_key is None:
            return None
        return hmac.new(self._record_key, data, hashlib.sha256).hexdigest()

    # -- the seam -------------------------------------------------------------------------

    def start(
        self,
        script: str,
        script_name: str = "main.py",
        *,
        os_replay: Sequence[tuple[str, Any]] = (),
        on_output: OutputListener | None = None,
    ) -> RunStep:
        """Compiles and runs ``script`` to its first stop (the GIL is released meanwhile).

        ``os_replay``: ``(kind, value)`` entries of earlier ``os_log``s, answered first, in
        order, to the script's nondeterministic requests (clock, random seed, entropy);
        raises ``ReplayDivergenceError`` when the script asks for another kind.

        ``on_output``: the run's live output listener, ``on_output(stream, text)``: what the
        script prints reaches it while the script runs, in this and the run's later advances
        (the contract: ``LiveOutputRuntime``); the steps' ``stdout`` / ``stderr`` are the same
        with or without it. Ignored under ``isolation="process"`` (``capabilities()
        .live_output`` is False there). TypeError when it is not callable.

        Unless turned off, the script first goes through the static subset check
        (``rewrite_scripts``, ``check_scripts``): rewrites are applied silently; constructs
        left that Monty cannot run give a ``Raised`` step without running anything.

        Returns:
            ``Call`` (paused at a tool call), ``Complete`` or ``Raised`` (syntax error,
            uncaught exception, limit hit, refused call form, subset check findings).
        """
        checked = self._check_memo.get(script)
        if checked is None:
            checked = self._checked(script)
        text, findings, deferred = checked
        if findings is not None:
            return Raised(findings)
        replay = self._layered(os_replay)
        if on_output is not None and self.isolation == "in_process":
            live: RunStep = self._engine.start(text, script_name, replay, deferred or None, on_output)
            return live
        step: RunStep = self._engine.start(text, script_name, replay, deferred or None)
        return step

    def _layered(self, os_replay: Sequence[tuple[str, Any]]) -> tuple[tuple[str, Any], ...] | None:
        """``os_replay`` as the engine takes it; with an overlay mount and no layer given (a
        direct start or resume), an empty layer first, so the script's writes stay off the host
        (they come back in the step's ``os_log``)."""
        replay = tuple(os_replay)
        if self._overlay and not (replay and replay[0][0] == "files"):
            replay = (("files", _options.EMPTY_LAYER), *replay)
        return replay or None

    def script_as_run(self, script: str) -> str:
        """The text the interpreter runs for ``script`` (``start`` or a session's ``feed``):
        ``script`` after the subset check's same-meaning rewrites, unchanged without them.
        The positions a paused call reports (``MontyContinuation.position``) index this
        text. Costs a dictionary lookup for a script started lately, else one check."""
        checked = self._check_memo.get(script)
        if checked is None:
            checked = self._checked(script)
        return checked[0]

    def _checked(self, script: str) -> tuple[str, str | None, tuple[int, ...]]:
        """The script after the subset check's rewrites, the findings text (or None), and
        the byte offsets of the tool calls it awaits (``_awaits.deferred_offsets``).

        Remembered per runtime by script text (``_check_memo``, up to ``_CHECK_MEMO``
        scripts, then forgotten all at once): a script started again (the same turn
        replayed, a benchmark's loop) costs one dictionary lookup in ``start``."""
        if len(script) > _monty.MAX_SCRIPT_BYTES:  # refused by the engine; no point parsing it
            return script, None, ()
        checked = self._check_uncached(script)
        memo = self._check_memo
        if len(memo) >= _CHECK_MEMO:
            memo.clear()
        memo[script] = checked
        return checked

    def _check_uncached(self, script: str) -> tuple[str, str | None, tuple[int, ...]]:
        functions_style = self.tool_style == "functions"
        rewrite, detect = self.rewrite_scripts, self.check_scripts
        if rewrite or detect:
            checked = cached_check_result((script, rewrite, functions_style, detect)) or check_script_safely(
                script, rewrite=rewrite, functions_style=functions_style, detect=detect
            )
            if checked.findings and detect:
                return script, format_findings(checked.findings), ()
            return checked.script, None, checked.deferred
        if "await" in script:
            return script, None, check_script_safely(script, rewrite=False, functions_style=functions_style).deferred
        return script, None, ()

    def check_tool_calls(
        self, script: str, tools: Sequence[Tool], *, namespace: Sequence[str] | None = ()
    ) -> str | None:
        """The seam's optional type check (``ToolCallChecking``): the tool calls in
        ``script`` that cannot succeed against ``tools``' stubs, as the text to feed back
        ("nothing was executed"), or None. None without looking when ``check_types`` is off.
        Costs a few milliseconds once per script text and tool set, the GIL released
        (``runtime._typecheck``)."""
        if not self.check_types:
            return None
        from ._typecheck import check_tool_calls, format_tool_call_errors

        errors = check_tool_calls(script, tools, functions_style=self.tool_style == "functions", namespace=namespace)
        return format_tool_call_errors(errors) if errors else None

    def wake_workers(self) -> None:
        """Wakes a native step worker ahead of a ``start_async`` or ``resume_async`` that
        follows within about a millisecond: workers park after 1.5 ms without a step, and a
        step handed to a parked one waits for its wake-up (about 0.2 ms on a virtual machine,
        several times what starting a short script takes). The agent loop calls it when a
        model reply arrives, so the wake-up overlaps the reply's extraction and storage.
        Costs one hand-off of an empty job; does nothing where steps do not run on native
        workers (``isolation="process"``, a build without them)."""
        if getattr(self._engine, "start_async", None) is None:  # process isolation: no native workers
            return
        wake = getattr(_monty, "wake_step_worker", None)
        if wake is not None:
            wake()

    def start_async(
        self,
        script: str,
        script_name: str = "main.py",
        *,
        os_replay: Sequence[tuple[str, Any]] = (),
        on_output: OutputListener | None = None,
    ) -> Any:
        """Like ``start``, but the advance runs on a native worker thread that never takes
        the GIL; returns a ticket with ``wait(timeout=None) -> bool`` and ``result() ->
        RunStep``. The agent loop uses it to keep its event loop free. The subset check runs
        here, on the calling thread. ``on_output``: as for ``start`` (it is called on the
        native delivery thread, never on the worker)."""
        if len(script) > _INLINE_CHECK_BYTES and (self.rewrite_scripts or self.check_scripts):
            # A long script's check takes milliseconds of CPython parsing: off the caller's thread.
            return ThreadTicket(
                _CHECK_POOL.submit(self.start, script, script_name, os_replay=os_replay, on_output=on_output)
            )
        checked = self._check_memo.get(script)
        if checked is None:
            checked = self._checked(script)
        script, findings, deferred = checked
        if findings is not None:
            return _Ready(Raised(findings))
        replay = self._layered(os_replay)
        start_async = getattr(self._engine, "start_async", None)
        if start_async is None:
            return ThreadTicket(_OFFLOAD_POOL.submit(self._engine.start, script, script_name, replay, deferred or None))
        if on_output is not None:
            return start_async(script, script_name, replay, deferred or None, on_output)
        return start_async(script, script_name, replay, deferred or None)

    def resume_async(
        self, snapshot: bytes, outcome: ResumeValue | ResumeError, *, os_replay: Sequence[tuple[str, Any]] = ()
    ) -> Any:
        """Like ``resume``, on a native worker; returns a ticket (see ``start_async``)."""
        replay = self._layered(os_replay)
        resume_async = getattr(self._engine, "resume_async", None)
        if resume_async is None:
            return ThreadTicket(_OFFLOAD_POOL.submit(self._engine.resume, snapshot, outcome, replay))
        return resume_async(snapshot, outcome, replay)

    def resume(
        self, snapshot: bytes, outcome: ResumeValue | ResumeError, *, os_replay: Sequence[tuple[str, Any]] = ()
    ) -> RunStep:
        """Restores a script from ``snapshot`` bytes (possibly from another process) and
        resumes it with ``outcome``.

        Raises:
            SnapshotError: truncated, altered, foreign or wrongly signed bytes.
            ValueConversionError: ``outcome.value`` is not plain data.
        """
        step: RunStep = self._engine.resume(snapshot, outcome, self._layered(os_replay))
        return step

    def resume_gather(
        self,
        snapshot: bytes,
        outcomes: Mapping[int, ResumeValue | ResumeError],
        *,
        os_replay: Sequence[tuple[str, Any]] = (),
    ) -> RunStep:
        """Restores a script paused at a ``Gather`` from its snapshot bytes and settles the
        calls in ``outcomes`` (``call_id -> ResumeValue | ResumeError``, a subset allowed);
        runs to the next stop (another ``Gather`` while the script still waits).

        Raises:
            SnapshotError: bytes that cannot be loaded, or a snapshot paused at one call.
            ValueError: an empty mapping or a ``call_id`` the snapshot does not await.
            ValueConversionError: a value that is not plain data.
        """
        step: RunStep = self._engine.resume_gather(snapshot, dict(outcomes), self._layered(os_replay))
        return step

    def restore(self, snapshot: bytes, *, on_output: OutputListener | None = None) -> RunStep:
        """Opens a paused script's bytes into the step they paused at, without resuming
        anything: a ``Call`` (its ``call`` is the live continuation) or a ``Gather``. Until it
        is resumed, the continuation's ``dump()`` gives back ``snapshot`` itself. A namespace
        session's bytes open with ``restore_session``. ``on_output``: the live output listener
        of the continuation's later advances (as for ``start``; ignored under
        ``isolation="process"``).

        Raises:
            SnapshotError: bytes that cannot be loaded (truncated, altered, foreign, wrongly
                signed), or a namespace session's bytes (saying which method takes them).
        """
        if on_output is not None and self.isolation == "in_process":
            live: RunStep = self._engine.restore(snapshot, False, on_output)
            return live
        step: RunStep = self._engine.restore(snapshot, False)
        return step

    # -- namespace sessions (persist_namespace; ADR 0003) --------------------------------------

    def start_session(self) -> NamespaceSession:
        """A new, empty ``NamespaceSession``: scripts fed to it share their globals.

        Raises:
            CodeRuntimeError: under ``isolation="process"`` (not supported there yet).
        """
        return NamespaceSession(self, _monty.MontySession.start(self._session_engine()))

    def load_session(self, snapshot: bytes) -> NamespaceSession:
        """Restores an idle session from ``NamespaceSession.dump()`` bytes.

        Raises:
            SnapshotError: bytes that cannot be loaded (truncated, altered, foreign, wrongly
                signed, a Monty dump version this build cannot read), or the bytes of a
                session paused at a tool call or a gather (use ``resume_session`` /
                ``resume_session_gather``).
        """
        session, paused = _monty.MontySession.load(self._session_engine(), snapshot)
        if isinstance(paused, Gather):
            raise SnapshotError(
                "snapshot error: the session is paused at a gather of tool calls; resume it with resume_session_gather"
            )
        if paused is not None:
            raise SnapshotError("snapshot error: the session is paused at a tool call; resume it with resume_session")
        return NamespaceSession(self, session)

    def resume_session(
        self, snapshot: bytes, outcome: ResumeValue | ResumeError, *, os_replay: Sequence[tuple[str, Any]] = ()
    ) -> tuple[NamespaceSession, RunStep]:
        """Restores a session paused at a tool call (the bytes of that ``Call``'s
        ``call.dump()``) and resumes the feed with ``outcome``.

        Returns:
            ``(session, step)``: the restored session (idle again once ``step`` is
            ``Complete`` or ``Raised``) and the feed's next step.

        Raises:
            SnapshotError: bytes that cannot be loaded, an idle session's bytes, or a session
                paused at a gather (use ``resume_session_gather``).
            ValueConversionError: ``outcome.value`` is not plain data.
        """
        session, paused = _monty.MontySession.load(self._session_engine(), snapshot)
        if paused is None:
            raise SnapshotError(
                "snapshot error: the session is idle, not paused at a tool call; load it with load_session"
            )
        if not isinstance(paused, Call):
            raise SnapshotError(
                "snapshot error: the session is paused at a gather of tool calls, not at one call; resume it "
                "with resume_session_gather"
            )
        return NamespaceSession(self, session), paused.call.resume(outcome, os_replay=self._layered(os_replay) or ())

    def resume_session_gather(
        self,
        snapshot: bytes,
        outcomes: Mapping[int, ResumeValue | ResumeError],
        *,
        os_replay: Sequence[tuple[str, Any]] = (),
    ) -> tuple[NamespaceSession, RunStep]:
        """Restores a session paused at a ``Gather`` (the bytes of that step's ``dump()``)
        and settles the calls in ``outcomes`` (``call_id -> ResumeValue | ResumeError``, a
        subset allowed); the feed runs to its next stop (another ``Gather`` while it still
        waits).

        Returns:
            ``(session, step)``: the restored session (idle again once ``step`` is
            ``Complete`` or ``Raised``) and the feed's next step.

        Raises:
            SnapshotError: bytes that cannot be loaded, an idle session's bytes, or a session
                paused at one tool call (use ``resume_session``).
            ValueError: an empty mapping or a ``call_id`` the session does not await.
            ValueConversionError: a value that is not plain data.
        """
        session, paused = _monty.MontySession.load(self._session_engine(), snapshot)
        if not isinstance(paused, Gather):
            what = "idle" if paused is None else "paused at one tool call"
            hint = "load_session" if paused is None else "resume_session"
            raise SnapshotError(f"snapshot error: the session is {what}, not paused at a gather; use {hint}")
        return NamespaceSession(self, session), paused.resume(outcomes, os_replay=self._layered(os_replay) or ())

    def restore_session(
        self, snapshot: bytes, *, on_output: OutputListener | None = None
    ) -> tuple[NamespaceSession, RunStep]:
        """Opens a paused namespace session's bytes (a session ``Call``'s ``call.dump()`` or
        ``Gather``'s ``dump()``) into the restored session and the step its feed paused at,
        without resuming anything (as ``restore`` does for a script).

        Returns:
            ``(session, step)``: ``step`` is a ``Call`` or a ``Gather``; the session is idle
            again once the feed completes.

        ``on_output``: the live output listener of the feed's later advances (as for
        ``start``).

        Raises:
            SnapshotError: bytes that cannot be loaded, an idle session's bytes (use
                ``load_session``), or a paused script's bytes (use ``restore``).
            CodeRuntimeError: under ``isolation="process"``.
        """
        step: Call | Gather = self._session_engine().restore(snapshot, True, on_output)
        native: Any = step.call if isinstance(step, Call) else step.continuation
        return NamespaceSession(self, native.session), step

    def inspect_session(self, snapshot: bytes) -> tuple[str, tuple[Any, ...], dict[str, Any], int]:
        """Reads the call a session paused at a tool call waits on, without resuming it:
        ``(name, positional_args, keyword_args, call_id)`` (for a session paused at a
        ``Gather``, its first call; see ``inspect_session_gather``).

        Raises:
            SnapshotError: bytes that cannot be loaded, or an idle session's bytes.
        """
        return self.inspect_session_gather(snapshot)[0]

    def inspect_session_gather(self, snapshot: bytes) -> tuple[tuple[str, tuple[Any, ...], dict[str, Any], int], ...]:
        """The calls a paused session awaits without resuming it, in call order, each as
        ``(name, positional_args, keyword_args, call_id)`` (one entry for a session paused
        at a single call).

        Raises:
            SnapshotError: bytes that cannot be loaded, or an idle session's bytes.
        """
        _session, paused = _monty.MontySession.load(self._session_engine(), snapshot)
        if paused is None:
            raise SnapshotError(
                "snapshot error: the session is idle, not paused at a tool call; load it with load_session"
            )
        calls = paused.calls if isinstance(paused, Gather) else (paused.call,)
        return tuple((c.name, c.positional_args, c.keyword_args, c.call_id) for c in calls)

    def _session_engine(self) -> Any:
        if self.isolation != "in_process":
            raise CodeRuntimeError('namespace sessions need isolation="in_process"')
        return self._native_engine

    def inspect_gather(self, snapshot: bytes) -> tuple[tuple[str, tuple[Any, ...], dict[str, Any], int], ...]:
        """The calls a snapshot awaits without resuming it, in call order, each as
        ``(name, positional_args, keyword_args, call_id)`` (one entry for a snapshot paused
        at a single call). Raises ``SnapshotError``."""
        return tuple(self._engine.inspect_gather(snapshot))

    def inspect(self, snapshot: bytes) -> tuple[str, tuple[Any, ...], dict[str, Any], int]:
        """Reads the call a snapshot is paused at without resuming it:
        ``(name, positional_args, keyword_args, call_id)`` (for a snapshot paused at a
        ``Gather``, its first call; see ``inspect_gather``). Raises ``SnapshotError``."""
        view: tuple[str, tuple[Any, ...], dict[str, Any], int] = self._engine.inspect(snapshot)
        return view

    def run(self, code: str, *, tools: Mapping[str, Callable[..., Any]] | None = None, **options: Any) -> RunResult:
        """Runs ``code`` to completion in one call; see ``codeact.runtime._oneshot.run_script``.

        Args:
            code: the script; its last expression is the result.
            tools: tool name -> callable (sync or async), called with the script's arguments.
            **options: ``inputs`` (name -> plain value, bound as globals before the script),
                ``script_name`` (default ``"main.py"``), ``max_tool_calls`` (default 10,000; None
                for no cap).

        Returns:
            ``RunResult(value, stdout, tool_calls, stderr)``.

        Raises:
            ScriptError: the script failed (syntax error, uncaught exception, limit, subset check),
                or was refused before it ran (``await call_tool(...)``, importing a tool; no tool ran).
            ToolCallLimitError: more than ``max_tool_calls`` tool calls.
            ValueConversionError: a tool returned a value that cannot cross into the script.
        """
        return run_script(self, code, tools=tools, **options)

    async def arun(
        self, code: str, *, tools: Mapping[str, Callable[..., Any]] | None = None, **options: Any
    ) -> RunResult:
        """Async ``run`` (asyncio or trio): advances run on native workers, async tools are
        awaited, sync tools run on a worker thread (``sync_tools_in_thread=False`` runs them on
        the event loop). Same result and errors as ``run``."""
        return await arun_script(self, code, tools=tools, **options)

    def capabilities(self) -> RuntimeCapabilities:
        """What this runtime supports (suspension, ``await``, namespace sessions) and its prompt,
        fixed at construction."""
        return self._capabilities

    def render_tools(self, tools: Sequence[Tool]) -> str:
        """Renders each tool as the exact call the script must write, with its description
        collapsed to one comment line. Pure function of ``tools``."""
        from ._render import render_call_tool, render_functions

        return render_functions(tools) if self.tool_style == "functions" else render_call_tool(tools)

    # -- prompt ---------------------------------------------------------------------------

    def _build_prompt(self) -> str:
        parts = [
            render_language_section(),
            _CALL_CONTRACT if self.tool_style == "call_tool" else _FUNCTIONS_CONTRACT,
            self._os_section(),
        ]
        if self.prompt_extra:
            parts.append(self.prompt_extra)
        return "\n\n".join(parts)

    def _os_section(self) -> str:
        if isinstance(self.clock, FrozenClock):
            at = as_utc(self.clock.at).isoformat()
            clock = f" `date.today()` and `datetime.now()` read a clock set by the host, stopped at {at}."
        elif isinstance(self.clock, SteppingClock):
            clock = (
                f" `date.today()` and `datetime.now()` read a clock set by the host: "
                f"{as_utc(self.clock.start).isoformat()} at the "
                f"first read, then {self.clock.step.total_seconds():g} s later at each read."
            )
        elif self.system_clock:
            clock = " `date.today()` and `datetime.now()` read the host clock."
        else:
            clock = " The clock is not available: `date.today()` and `datetime.now()` raise OSError."
        if not self.mounts and not self.environ:
            return (
                "This is a sandbox: there is no filesystem access (every path is inaccessible), os.environ is "
                "empty, and there is no network and no subprocess." + clock
            )
        lines = ["OS access (sandboxed):"]
        if self.mounts:
            lines.append(
                "- Filesystem: use `pathlib.Path` on the mounted paths only; any other path raises PermissionError "
                "and existence checks on it return False. Mounted:"
            )
            for m in self.mounts:
                lines.append(f'  - "{m.virtual_path}" ({m.access.value})')
            lines.append("- Supported subset of `pathlib.Path`:")
            lines.append("  - read (any mount): " + ", ".join(f"`{x}`" for x in _PATH_READ))
            lines.append("  - write (read-write mounts only): " + ", ".join(f"`{x}`" for x in _PATH_WRITE))
            lines.append("  - pure path operations: " + ", ".join(f"`{x}`" for x in _PATH_PURE))
            lines.append("  Any other Path method raises AttributeError. `os.path` is not available.")
        else:
            lines.append(
                "- Filesystem: no paths are accessible; any `pathlib.Path` read or write raises PermissionError."
            )
        if self.environ:
            names = ", ".join(f"`{k}`" for k in sorted(self.environ))
            lines.append(
                f"- Environment: `os.getenv` / `os.environ` expose {len(self.environ)} variable"
                f"{'s' if len(self.environ) != 1 else ''}: {names}."
            )
        else:
            lines.append("- Environment: `os.environ` is empty.")
        lines.append("- Clock:" + clock)
        lines.append("- No network and no subprocess.")
        return "\n".join(lines)


FINAL_ANSWER = "final_answer"
"""In the functions style, ``final_answer(x)`` ends the script with the final result ``x``
(a synonym of the last expression ``{"type": "final_result", "value": x}``) unless a tool of
that name exists."""


class NamespaceSession:
    """Scripts that share one namespace: a Monty REPL whose globals (functions, closures
    with their state, lambdas, iterators, sets, instances, imported modules, data) carry
    from ``feed`` to ``feed``. Made by ``MontyRuntime.start_session`` / ``load_session`` /
    ``resume_session``; backs ``persist_namespace`` (ADR 0003).

    A feed runs like ``MontyRuntime.start``: the same subset check, limits (``max_duration``
    per advance; ``max_memory`` counts the session's whole heap, the carried namespace
    included), OS policy, ``os_log`` / ``os_replay`` journal and steps. After ``Complete``
    the script's globals stay; after ``Raised`` the namespace is the one the script started
    with (Monty's own REPL would keep what the script changed before it failed). Tracebacks
    name the script ``script_name``, and frames in functions an earlier feed defined
    ``<script N>``: the session's N-th script that completed, counting from 1.

    ``await asyncio.gather(call_tool(...), ...)`` gives a ``Gather`` step as in a run (also
    for the calls of a coroutine an earlier feed defined); its ``dump()`` is the paused
    session's bytes, for ``MontyRuntime.resume_session_gather``.
    """

    __slots__ = ("_native", "_runtime")

    def __init__(self, runtime: MontyRuntime, native: Any) -> None:
        self._runtime = runtime
        self._native = native

    def feed(
        self,
        script: str,
        script_name: str = "main.py",
        *,
        os_replay: Sequence[tuple[str, Any]] = (),
        on_output: OutputListener | None = None,
    ) -> RunStep:
        """Runs ``script`` in the session to its first stop (the GIL is released meanwhile).
        ``on_output``: the feed's live output listener (as for ``MontyRuntime.start``).

        Returns:
            ``Call`` (its ``call.dump()`` is the paused session's bytes, for
            ``MontyRuntime.resume_session``), ``Gather`` (the script awaits several tool
            calls; its ``dump()`` is for ``MontyRuntime.resume_session_gather``),
            ``Complete`` or ``Raised``.

        Raises:
            CodeRuntimeError: the session is paused at a tool call or a gather that was not
                resumed.
            ReplayDivergenceError: ``os_replay`` does not match the script's requests.
            TypeError: ``on_output`` is not callable.
        """
        script, findings, deferred = self._runtime._checked(script)
        if findings is not None:
            return Raised(findings)
        step: RunStep = self._native.feed(
            script, script_name, self._runtime._layered(os_replay), deferred or None, on_output
        )
        return step

    def dump(self) -> bytes:
        """The idle session as snapshot bytes (same envelope and integrity as a paused
        script's; signed under ``snapshot_key``). Raises ``CodeRuntimeError`` mid-feed."""
        data: bytes = self._native.dump()
        return data

    @property
    def idle(self) -> bool:
        """Whether the session is between feeds (ready for ``feed`` and ``dump``)."""
        return bool(self._native.idle)

    @property
    def memory_used(self) -> int:
        """Bytes charged to the session now (its heap and interpreter state)."""
        return int(self._native.memory_used)


def final_answer_step(
    positional: Sequence[Any], keywords: Mapping[str, Any], stdout: str = ""
) -> Complete | ResumeError:
    """What a ``final_answer(...)`` call means in the functions style.

    Returns:
        ``Complete({"type": "final_result", "value": x})`` for ``final_answer(x)`` or
        ``final_answer(answer=x)``; otherwise a ``ResumeError`` (``TypeError``) to raise into
        the script, naming the form to write.
    """
    if len(positional) == 1 and not keywords:
        value = positional[0]
    elif not positional and len(keywords) == 1 and next(iter(keywords)) in ("answer", "value", "result"):
        value = next(iter(keywords.values()))
    else:
        return ResumeError(
            "final_answer() takes exactly one argument, the final result: final_answer(value)", "TypeError"
        )
    return Complete({"type": "final_result", "value": value}, stdout)
