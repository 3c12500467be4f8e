"""Type stub of the native core ``codeact._monty`` (Rust, PyO3, embedding Monty)."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

from typing_extensions import disjoint_base

from .runtime._seam import Call, Complete, Gather, Raised

_Step = Call | Gather | Complete | Raised
_CallInfo = tuple[str, tuple[Any, ...], dict[str, Any], int]
_OnOutput = Callable[[str, str], object]

__all__ = [
    "MontyCall",
    "MontyContinuation",
    "MontyEngine",
    "ResumeError",
    "ResumeValue",
    "MontySession",
    "StepTicket",
    "SubsetScreen",
    "parses",
    "plain_json",
    "plain_json_digest",
    "register_gather_type",
    "register_seam_types",
    "remaining_stack",
    "wake_step_worker",
    "MONTY_VERSION",
    "SNAPSHOT_FORMAT_VERSION",
    "MONTY_DUMP_VERSION",
    "MONTY_MIN_DUMP_VERSION",
    "MAX_VALUE_DEPTH",
    "RECURSION_CEILING",
    "MAX_SCRIPT_BYTES",
]

MONTY_VERSION: str
"""The Monty release embedded in this build."""
SNAPSHOT_FORMAT_VERSION: int
"""The version of the snapshot envelope this build writes and reads."""
MONTY_DUMP_VERSION: int
"""Monty's dump version this build writes (recorded in every snapshot)."""
MONTY_MIN_DUMP_VERSION: int
"""The oldest Monty dump version this build loads (older dumps are upgraded while loading)."""
MAX_VALUE_DEPTH: int
"""Deepest container nesting that may cross the boundary, in levels (100): the one limit
every layer reads (``codeact._values.MAX_DEPTH``)."""
RECURSION_CEILING: int
"""Highest recursion limit a script may get, in frames, even when unlimited."""
MAX_SCRIPT_BYTES: int
"""Longest script accepted, in bytes (longer ones come back as a ``Raised`` step)."""

@disjoint_base
class ResumeValue:
    """Resume a paused call: the call returns ``value`` (plain data: None, bool, int, float,
    str, bytes, list, tuple, dict, set, frozenset). Re-exported as ``codeact.runtime.ResumeValue``; behaves
    as a frozen dataclass.

    Any value is accepted here; it is converted when the call is resumed, where a value that
    is not plain data raises ``ValueConversionError`` (and the paused call stays pending)."""

    __match_args__ = ("value",)
    def __new__(cls, value: Any) -> ResumeValue: ...
    @property
    def value(self) -> Any: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@disjoint_base
class ResumeError:
    """Resume a paused call by raising an exception the script can catch. Re-exported as
    ``codeact.runtime.ResumeError``; behaves as a frozen dataclass.

    Attributes:
        message: the exception's message.
        exc_type: the name of a builtin exception type (``RuntimeError`` by default; an
            unknown name falls back to ``RuntimeError``).

    Raises:
        TypeError: ``message`` or ``exc_type`` is not a ``str`` (checked when built).
    """

    __match_args__ = ("message", "exc_type")
    def __new__(cls, message: str, exc_type: str = "RuntimeError") -> ResumeError: ...
    @property
    def message(self) -> str: ...
    @property
    def exc_type(self) -> str: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

def register_seam_types(
    call: type[Call],
    complete: type[Complete],
    raised: type[Raised],
    resume_value: type[ResumeValue],
    resume_error: type[ResumeError],
) -> None:
    """Registers the pure-Python step and outcome classes the engine builds and reads. The
    steps are built with the fields ``(call | value | message, stdout, os_log, stderr)``."""

def register_gather_type(gather: type[Gather]) -> None:
    """Registers the pure-Python ``Gather`` step class the engine builds, called as
    ``Gather(calls, stdout, os_log, continuation, stderr)``."""

def remaining_stack() -> int | None:
    """Bytes of native stack left on the calling thread, or None when unknown."""

def parses(script: str) -> bool:
    """Whether ``script`` parses as a Python module with the parser Monty uses (ruff's, in
    Rust; the GIL released). On a thread with a short stack, False also for a source nested
    past Monty's bound (which Monty refuses to run)."""

def type_check(script: str, stubs: str, modules: list[tuple[str, str]] = ...) -> str | None:
    """Type-checks ``script`` against ``stubs`` (a ``.pyi`` text, star-imported) and
    ``modules`` (``(dotted_name, pyi_text)`` module stubs) with Monty's ty-based checker (a
    pooled checker, the GIL released). None when it finds nothing, else the diagnostics as a
    JSON array (``code``, ``message``, ``location: {row, column}``, 1-based). Raises
    ``ValueError`` for an invalid module name, ``RuntimeError`` when the checker fails."""

def warm_type_checker() -> None:
    """Builds one checker ahead of the first check (it loads the bundled typeshed)."""

def type_checkers_idle() -> int:
    """Idle checkers in the pool."""

def plain_json(value: object, lone_surrogates: bool, max_int_digits: int | None = None) -> bool:
    """Whether ``value`` is None, or an exact bool, int (within 64 bits, and of at most
    ``max_int_digits`` decimal digits when given), float or str (without lone surrogates
    unless ``lone_surrogates``), or an exact list of such values or exact dict with exact str
    keys and such values, nested fewer than ``MAX_VALUE_DEPTH`` levels: plain data whose JSON
    form gives it back as it was. Never raises; False means the caller's own check decides."""

def plain_json_digest(value: object, max_int_digits: int, max_bytes: int) -> str | None:
    """16 hex digits of BLAKE2b (8-byte digest) over ``value``'s compact JSON, byte for byte
    ``pydantic_core.to_json``'s, for a value ``plain_json(value, False, max_int_digits)``
    accepts whose JSON is at most ``max_bytes`` bytes; ``""`` for such a value that holds a
    float (its JSON is pydantic's to write); None for any other value, and for arguments of
    the wrong kind (the caller's own path decides). Never raises."""

def wake_step_worker() -> None:
    """Wakes a native step worker ahead of a ``start_async`` / ``resume_async``: hands the
    pool an empty job, so the step does not pay a parked thread's wake-up (about 0.2 ms on a
    virtual machine)."""

@final
class SubsetScreen:
    """Whether a script needs the subset check (``codeact.runtime._check``): a pass of the
    lexer Monty's parser uses (ruff's, in Rust), then, only when the tokens do not clear the
    script, one parse and a walk; both over-approximate every rule's trigger. Built once from
    the check's name tables (each a list of names; ``gap_imports`` a list of ``(module, name)``
    pairs)."""

    def __new__(
        cls,
        missing_builtins: list[str],
        exception_names: list[str],
        method_names: list[str],
        gap_attributes: list[str],
        call_attributes: list[str],
        allowed_modules: list[str],
        gap_imports: list[tuple[str, str]],
    ) -> SubsetScreen: ...
    def needs_check(self, script: str) -> bool:
        """True when any rule of the check could apply to ``script``, or when the screen
        cannot tell (a parse error, a source nested past Monty's bound); False means the
        check would find nothing and rewrite nothing, and no call is awaited. Releases the
        GIL while it runs."""
    def tokens_may_need_check(self, script: str) -> bool:
        """The first gate of ``needs_check`` alone (the lexer pass), for tests."""
    def tree_needs_check(self, script: str) -> bool:
        """The second gate of ``needs_check`` alone (the parse and the walk), for tests."""

@final
class MontyEngine:
    """Configuration plus start / resume; shared by every script of one ``MontyRuntime``."""

    def __new__(
        cls,
        *,
        max_duration: float | None,
        max_memory: int | None,
        max_recursion_depth: int,
        mounts: list[tuple[str, str, bool, int | None]],
        environ: list[tuple[str, str]],
        system_clock: bool,
        tool_style: str,
        max_stdout: int,
        snapshot_key: bytes | None,
        max_os_calls: int | None = ...,
        timezone: str = "local",
        clock: tuple[float, float] | None = None,
    ) -> MontyEngine:
        """``timezone``: ``"local"`` (the host's zone by name, a fixed offset when the tz
        database does not know it), ``"UTC"`` or an IANA zone name; ValueError for a name
        the tz database does not know. ``clock``: ``(start, step)`` in seconds since the Unix
        epoch: the n-th clock read of a run (from 0) answers ``start + n * step`` instead of
        the system clock (``step`` 0: a frozen clock); ValueError for a start outside the
        years 1 to 9999 or a negative or non-finite step."""
    def start(
        self,
        script: str,
        script_name: str,
        os_replay: Sequence[tuple[str, Any]] | None = None,
        deferred: Sequence[int] | None = None,
        on_output: _OnOutput | None = None,
    ) -> _Step:
        """``on_output``: the run's live output listener, ``on_output(stream, text)`` with
        ``stream`` ``"stdout"`` or ``"stderr"`` and ``text`` what the script printed since the
        last call (within ``max_stdout``, the truncation marker included once), for this and
        every later advance of the run (its continuations keep it). Called with the GIL on
        the native delivery thread while the script runs (the first chunk within milliseconds
        of its print, later ones at least 100 ms apart: at most 10 deliveries a second, one
        call per stream change), and on the thread that takes the step for what is left when
        the step is returned (all of it when the run ended; at a pause when a delivery is
        due, else it follows within 100 ms). The steps' ``stdout`` / ``stderr`` are the same
        with or without it. What it raises is swallowed (the first of a run logged on
        ``codeact.runtime``). TypeError when it is not callable."""
    def resume(
        self, snapshot: bytes, outcome: ResumeValue | ResumeError, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> _Step: ...
    def resume_gather(
        self,
        snapshot: bytes,
        outcomes: Mapping[int, ResumeValue | ResumeError],
        os_replay: Sequence[tuple[str, Any]] | None = None,
    ) -> _Step: ...
    def restore(
        self, snapshot: bytes, session: bool | None = None, on_output: _OnOutput | None = None
    ) -> Call | Gather:
        """Opens any snapshot bytes into the step they paused at without resuming: a paused
        script's, or a paused namespace session's (its continuation's ``session`` is set).
        ``session``: None either kind, False only a script's, True only a session's.
        ``on_output``: the live output listener of the continuation's later advances (see
        ``start``)."""
    def inspect(self, snapshot: bytes) -> _CallInfo: ...
    def inspect_gather(self, snapshot: bytes) -> tuple[_CallInfo, ...]: ...
    def start_async(
        self,
        script: str,
        script_name: str,
        os_replay: Sequence[tuple[str, Any]] | None = None,
        deferred: Sequence[int] | None = None,
        on_output: _OnOutput | None = None,
    ) -> StepTicket: ...
    def resume_async(
        self, snapshot: bytes, outcome: ResumeValue | ResumeError, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> StepTicket: ...

@final
class MontyContinuation:
    """The one paused-script type: a script run or a namespace session's feed paused at one
    tool call or at a gather, held live; single use. A ``Call`` step's ``call`` is one; a
    ``Gather`` step holds one. ``name`` .. ``call_id`` are the (first) call's."""

    @property
    def name(self) -> str: ...
    @property
    def positional_args(self) -> tuple[Any, ...]: ...
    @property
    def keyword_args(self) -> dict[str, Any]: ...
    @property
    def call_id(self) -> int: ...
    @property
    def call_ids(self) -> list[int]: ...
    @property
    def is_gather(self) -> bool: ...
    @property
    def calls(self) -> tuple[MontyCall, ...]: ...
    @property
    def session(self) -> MontySession | None: ...
    @property
    def position(self) -> tuple[int, int] | None:
        """Where the paused call is: ``(start, end)``, the byte offsets (UTF-8, ``end``
        exclusive) of its call expression in the text the interpreter was given for this run
        or feed (the script after the host's rewrites: ``MontyRuntime.script_as_run``). None
        for a gather, when the interpreter does not know it, or when the call sits in a
        function an earlier feed of a namespace session defined. Kept in the snapshot: a
        restored continuation reports it too."""
    def dump(self) -> bytes: ...
    def resume(
        self,
        outcome: ResumeValue | ResumeError | Mapping[int, ResumeValue | ResumeError],
        os_replay: Sequence[tuple[str, Any]] | None = None,
    ) -> _Step: ...
    def resume_async(
        self,
        outcome: ResumeValue | ResumeError | Mapping[int, ResumeValue | ResumeError],
        os_replay: Sequence[tuple[str, Any]] | None = None,
    ) -> StepTicket: ...
    def resume_within(
        self,
        outcome: ResumeValue | ResumeError | Mapping[int, ResumeValue | ResumeError],
        timeout: float,
        os_replay: Sequence[tuple[str, Any]] | None = None,
    ) -> _Step | StepTicket:
        """``resume_async``, then waits up to ``timeout`` seconds with the GIL released: the
        step when the advance finished by then, else the ``StepTicket`` to wait on.

        Raises:
            ValueError: ``timeout`` is negative or not finite.
        """

@final
class MontyCall:
    """One call a ``MontyContinuation`` awaits; settled through it, never resumed by itself."""

    @property
    def name(self) -> str: ...
    @property
    def positional_args(self) -> tuple[Any, ...]: ...
    @property
    def keyword_args(self) -> dict[str, Any]: ...
    @property
    def call_id(self) -> int: ...
    def dump(self) -> bytes: ...
    def resume(self, outcome: Any, os_replay: Sequence[tuple[str, Any]] | None = None) -> _Step: ...

@final
class MontySession:
    """A namespace session: one Monty REPL whose globals carry from feed to feed."""

    @staticmethod
    def start(engine: MontyEngine) -> MontySession: ...
    @staticmethod
    def load(engine: MontyEngine, snapshot: bytes) -> tuple[MontySession, Call | Gather | None]: ...
    def feed(
        self,
        script: str,
        script_name: str,
        os_replay: Sequence[tuple[str, Any]] | None = None,
        deferred: Sequence[int] | None = None,
        on_output: _OnOutput | None = None,
    ) -> _Step:
        """``on_output``: the feed's live output listener (see ``MontyEngine.start``)."""
    def dump(self) -> bytes: ...
    @property
    def idle(self) -> bool: ...
    @property
    def memory_used(self) -> int: ...

@final
class StepTicket:
    """An advance running on a native worker thread (no GIL); wait, then take the step once."""

    def wait(self, timeout: float | None = None) -> bool: ...
    @property
    def done(self) -> bool: ...
    def result(self) -> _Step: ...
