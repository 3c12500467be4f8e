"""The runtime seam: the only way the agent talks to an interpreter (SPEC §2).

A runtime starts a script and advances it to its next stop: a tool ``Call``, a ``Gather``
(the script awaits several tool calls at once), ``Complete`` or ``Raised``. A paused call is
resumed in place (``PendingCall.resume``, ``Gather.resume``) or, when the runtime supports
suspension, from snapshot bytes: ``CodeRuntime.resume``, or ``SuspendingRuntime.restore``,
which opens any paused bytes into the live step they paused at (a ``Call`` or a ``Gather``).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from .._monty import ResumeError, ResumeValue
from ..exceptions import CodeRuntimeError, ReplayDivergenceError

if TYPE_CHECKING:
    from ._render import Tool

__all__ = (
    "AdvanceTicket",
    "Call",
    "OsLog",
    "ReplayDivergenceError",
    "CodeRuntime",
    "Complete",
    "Gather",
    "GatherContinuation",
    "LiveOutputRuntime",
    "OutputListener",
    "PendingCall",
    "Raised",
    "ResumeError",
    "ResumeValue",
    "RunStep",
    "RuntimeCapabilities",
    "SessionRestoringRuntime",
    "SuspendingRuntime",
    "ToolCallChecking",
    "ThreadTicket",
    "ToolStyle",
    "bind_call_args",
    "check_tool_calls",
    "default_tool_catalog",
    "resume_in_thread",
    "step_within",
)

OutputListener = Callable[[str, str], object]
"""A run's live output listener: ``on_output(stream, text)``, ``stream`` ``"stdout"`` or
``"stderr"``, ``text`` what the script printed since the previous call (see
``LiveOutputRuntime``). Its return value is ignored."""

ToolStyle = Literal["call_tool", "functions"]
"""How scripts reach tools: only through ``call_tool("name", {...})``, or also as bare
functions (``name(...)``, ``final_answer(value)``)."""


@runtime_checkable
class AdvanceTicket(Protocol):
    """An advance (a resume) running off the calling thread: wait for it, then take its step
    once."""

    def wait(self, timeout: float | None = None) -> bool:
        """Waits up to ``timeout`` seconds (forever when None); whether the advance finished."""
        ...

    def result(self) -> RunStep:
        """The step the advance reached; raises what the advance raised, or
        ``CodeRuntimeError`` before it finished or when taken twice."""
        ...


@runtime_checkable
class PendingCall(Protocol):
    """A script paused at a tool call. Single use: resume it once.

    Attributes:
        name: the tool name the script called.
        positional_args: positional arguments (empty in the ``call_tool`` style).
        keyword_args: keyword arguments, in the script's order.
        call_id: the interpreter's counter for this call, unique within one script run only.
    """

    @property
    def name(self) -> str: ...
    @property
    def positional_args(self) -> tuple[Any, ...]: ...
    @property
    def keyword_args(self) -> dict[str, Any]: ...
    @property
    def call_id(self) -> int: ...

    def dump(self) -> bytes:
        """Serializes the live continuation. Raises ``CodeRuntimeError`` after ``resume``
        or when the runtime cannot suspend."""
        ...

    def resume(self, outcome: ResumeValue | ResumeError, *, os_replay: Sequence[tuple[str, Any]] = ()) -> RunStep:
        """Resumes in place with ``outcome``. Raises ``CodeRuntimeError`` on a second call.
        ``os_replay``: see ``MontyRuntime.start`` (ignored by runtimes without a journal)."""
        ...

    def resume_async(
        self, outcome: ResumeValue | ResumeError, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> AdvanceTicket:
        """``resume`` off the calling thread (a native worker, or a thread: ``resume_in_thread``);
        the ticket to wait on. Raises as ``resume`` does for a call resumed twice."""
        ...

    def resume_within(
        self, outcome: ResumeValue | ResumeError, timeout: float, os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> RunStep | AdvanceTicket:
        """``resume_async``, then waits up to ``timeout`` seconds: the step when the advance
        finished by then (the usual short one, in one call), else its ticket. The agent's
        driver resumes every call this way."""
        ...


OsLog = tuple[tuple[str, Any], ...]
"""The nondeterministic answers the runtime gave a script during one advance, in order:
``(kind, value)`` pairs with plain JSON values, e.g. ``("clock", 1767225600.25)`` (UTC
seconds), ``("random_seed", 123)``, ``("urandom", "<hex>")``. Pass the concatenated logs back
as ``os_replay`` to re-run a script to the same state."""


@dataclass(slots=True)
class Call:
    """The script is paused at a tool call."""

    call: PendingCall
    stdout: str = ""
    os_log: OsLog = ()
    stderr: str = ""


@dataclass(slots=True)
class Complete:
    """The script finished; ``value`` is its last expression as a plain Python value."""

    value: Any
    stdout: str = ""
    os_log: OsLog = ()
    stderr: str = ""


@dataclass(slots=True)
class Raised:
    """The script failed: syntax error, uncaught exception, resource limit or refused call
    form. ``message`` is a traceback-style text the model can act on."""

    message: str
    stdout: str = ""
    os_log: OsLog = ()
    stderr: str = ""


@runtime_checkable
class GatherContinuation(Protocol):
    """The live continuation behind a ``Gather`` step (the runtime's own object)."""

    def resume(
        self, outcomes: Mapping[int, ResumeValue | ResumeError], os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> RunStep: ...

    def resume_async(
        self, outcomes: Mapping[int, ResumeValue | ResumeError], os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> AdvanceTicket: ...

    def resume_within(
        self,
        outcomes: Mapping[int, ResumeValue | ResumeError],
        timeout: float,
        os_replay: Sequence[tuple[str, Any]] | None = None,
    ) -> RunStep | AdvanceTicket: ...

    def dump(self) -> bytes: ...


@dataclass(slots=True)
class Gather:
    """The script awaits several tool calls at once (``await asyncio.gather(call_tool(...),
    call_tool(...))``): run them concurrently, then settle them with ``resume``.

    Attributes:
        calls: the awaited calls in call order (``name``, ``positional_args``,
            ``keyword_args``, ``call_id`` as for a ``Call``); they are settled through this
            step, never resumed one by one.
        continuation: the runtime's continuation (``resume`` / ``dump``).
    """

    calls: tuple[PendingCall, ...]
    stdout: str = ""
    os_log: OsLog = ()
    continuation: GatherContinuation | None = field(default=None, repr=False, compare=False)
    stderr: str = ""

    def resume(
        self, outcomes: Mapping[int, ResumeValue | ResumeError], *, os_replay: Sequence[tuple[str, Any]] = ()
    ) -> RunStep:
        """Settles the calls in ``outcomes`` (``call_id -> ResumeValue | ResumeError``; a
        subset is allowed) and runs the script to its next stop: another ``Gather`` with the
        calls it still awaits, a ``Call``, ``Complete`` or ``Raised``.

        Raises:
            CodeRuntimeError: resumed twice.
            ValueError: an empty mapping, or a ``call_id`` this step does not await.
            ValueConversionError: a value that is not plain data.
        """
        return self._continuation().resume(dict(outcomes), tuple(os_replay) or None)

    def resume_async(
        self, outcomes: Mapping[int, ResumeValue | ResumeError], os_replay: Sequence[tuple[str, Any]] | None = None
    ) -> AdvanceTicket:
        """``resume`` off the calling thread (the runtime's native worker, or a thread); the
        ticket to wait on (``wait(timeout=None) -> bool``, ``result() -> RunStep``)."""
        return self._continuation().resume_async(dict(outcomes), tuple(os_replay) if os_replay else None)

    def resume_within(
        self,
        outcomes: Mapping[int, ResumeValue | ResumeError],
        timeout: float,
        os_replay: Sequence[tuple[str, Any]] | None = None,
    ) -> RunStep | AdvanceTicket:
        """``resume_async``, then waits up to ``timeout`` seconds: the step when the advance
        finished by then, else its ticket."""
        return self._continuation().resume_within(dict(outcomes), timeout, tuple(os_replay) if os_replay else None)

    def dump(self) -> bytes:
        """The paused script as snapshot bytes (``MontyRuntime.resume_gather`` resumes them).
        Raises ``CodeRuntimeError`` after ``resume``."""
        return self._continuation().dump()

    def _continuation(self) -> GatherContinuation:
        if self.continuation is None:
            raise CodeRuntimeError("this Gather has no continuation to resume")
        return self.continuation


RunStep = Call | Gather | Complete | Raised
"""One stop of a script: ``Call | Gather | Complete | Raised``, each with the ``stdout`` and
the ``stderr`` (``print(..., file=sys.stderr)``) written since the previous stop."""


# ``ResumeValue(value)`` and ``ResumeError(message, exc_type="RuntimeError")`` are native
# (``codeact._monty``, rust/src/seam.rs): one is built per tool round trip, and as frozen
# dataclasses they were the largest Python-side cost of it. They behave as frozen dataclasses
# do: keyword or positional construction, ``==`` and ``hash`` by fields, ``repr``,
# ``__match_args__``, ``dataclasses.FrozenInstanceError`` on assignment, pickling.


@dataclass(slots=True, frozen=True)
class RuntimeCapabilities:
    """What a runtime can do.

    Attributes:
        supports_suspension: whether ``PendingCall.dump`` and ``CodeRuntime.resume`` work.
        prompt: a description of the language and environment for the model.
        supports_await: scripts may ``await`` tool calls (``asyncio.gather`` over several
            gives a ``Gather`` step); when False the agent refuses ``await call_tool(...)``
            before the script runs.
        supports_namespace_session: the runtime has ``start_session()`` /
            ``load_session(bytes)`` / ``resume_session(...)``: scripts fed to one
            ``NamespaceSession`` share their globals (``persist_namespace`` uses it).
        importable_modules: the top-level modules a script may import; None when any
            installed module may be (the agent's pre-check names them beside an import
            it refuses).
        live_output: the runtime is a ``LiveOutputRuntime``: ``start`` (and a namespace
            session's ``feed``, and ``restore``) take ``on_output``, and what a script prints
            reaches it while the script runs.
    """

    supports_suspension: bool = False
    prompt: str = ""
    supports_await: bool = False
    supports_namespace_session: bool = False
    importable_modules: tuple[str, ...] | None = None
    live_output: bool = False


@runtime_checkable
class CodeRuntime(Protocol):
    """An interpreter behind the seam. Synchronous: the agent decides how to call it
    without blocking its event loop."""

    def start(self, script: str, script_name: str = "main.py", *, os_replay: Sequence[tuple[str, Any]] = ()) -> RunStep:
        """Runs ``script`` to its first stop. A syntax error is a ``Raised`` step."""
        ...

    def resume(
        self, snapshot: bytes, outcome: ResumeValue | ResumeError, *, os_replay: Sequence[tuple[str, Any]] = ()
    ) -> RunStep:
        """Restores a dumped continuation and resumes it. Raises ``CodeRuntimeError`` for
        bytes that cannot be loaded."""
        ...

    def capabilities(self) -> RuntimeCapabilities: ...

    def render_tools(self, tools: Sequence[Tool]) -> str:
        """Describes ``tools`` for the model: a pure function of the list."""
        ...

    @property
    def tool_style(self) -> ToolStyle:
        """How scripts reach tools (``"call_tool"`` for a runtime with no other form)."""
        ...

    def seal(self, data: bytes) -> str | None:
        """The runtime's MAC of ``data`` under its snapshot key (what binds a stored turn and
        its journal to the key), or None when the runtime has no key: stored turns are then
        not sealed."""
        ...


@runtime_checkable
class SuspendingRuntime(CodeRuntime, Protocol):
    """A ``CodeRuntime`` with ``supports_suspension``: any bytes a paused step dumped open
    again into that step (an addition to SPEC §2's seam, used to resume a stored turn)."""

    def restore(self, snapshot: bytes) -> RunStep:
        """The step ``snapshot`` paused at, live and not resumed: a ``Call`` (its ``call``
        resumes with one outcome) or a ``Gather`` (settled with ``{call_id: outcome}``). Its
        continuation's ``dump()`` gives back ``snapshot`` until it is resumed.

        Raises:
            SnapshotError: bytes that cannot be loaded (truncated, altered, foreign, wrongly
                signed, of another kind).
        """
        ...


@runtime_checkable
class SessionRestoringRuntime(SuspendingRuntime, Protocol):
    """A ``SuspendingRuntime`` with namespace sessions (``supports_namespace_session``)."""

    def start_session(self) -> Any:
        """A new, empty namespace session (``feed(script)``, ``dump()``)."""
        ...

    def load_session(self, snapshot: bytes) -> Any:
        """An idle session restored from its ``dump()`` bytes. Raises ``SnapshotError``."""
        ...

    def restore_session(self, snapshot: bytes) -> tuple[Any, RunStep]:
        """A paused session's bytes opened as ``restore`` opens a script's: ``(session,
        step)``. Raises ``SnapshotError``."""
        ...


@runtime_checkable
class LiveOutputRuntime(CodeRuntime, Protocol):
    """An optional part of the seam: a runtime whose scripts' printed output reaches the
    caller while they run (``RuntimeCapabilities.live_output``; ``MontyRuntime`` in process).
    A runtime without it collects output on the steps only; callers check the capability
    before passing ``on_output``.

    The listener contract (``on_output(stream, text)``, an ``OutputListener``):

    - ``text`` is what the script printed to ``stream`` since the previous call, within
      ``max_stdout`` (the truncation marker included, once); joined per stream over a run,
      the calls give exactly the steps' ``stdout`` / ``stderr``, which stay as they are
      without a listener;
    - the first delivery of a run comes within milliseconds of its print, also inside one
      advance that calls no tool (a loop that prints and sleeps); later ones start at least
      100 ms apart, what is printed meanwhile coalesced: at most 10 deliveries a second per
      run (a delivery calls the listener once per stream change, once when the script
      prints to one stream);
    - what is left when an advance stops is delivered before its step is returned when the
      run ended (``Complete`` / ``Raised``; this last delivery may come sooner than 100 ms
      after the previous), and at a pause (``Call`` / ``Gather``) when a delivery is due,
      else within 100 ms after it, while the tool runs;
    - it is called on any thread (a runtime's delivery thread while the script runs, the
      thread that takes the step for the flush at a stop), never two calls of one run at a
      time, in print order. It must not block: hand the text to an event loop with
      ``call_soon_threadsafe`` (or trio's ``from_thread.run_sync``);
    - what it raises is swallowed: the script and the host go on (``MontyRuntime`` logs the
      first failure of a run on ``codeact.runtime``).

    The run's continuations keep the listener for its later advances (``resume``,
    ``resume_async``, ``resume_within``); a continuation restored from bytes gets one through
    ``restore(snapshot, on_output=...)``.
    """

    def start(
        self,
        script: str,
        script_name: str = "main.py",
        *,
        os_replay: Sequence[tuple[str, Any]] = (),
        on_output: OutputListener | None = None,
    ) -> RunStep:
        """``CodeRuntime.start``, delivering what the run prints to ``on_output`` as it goes."""
        ...


@runtime_checkable
class ToolCallChecking(Protocol):
    """An optional part of the seam: a runtime that can tell, before a script runs, which of
    its tool calls cannot succeed (``MontyRuntime``: a type check against the tools' stubs).
    The agent asks any runtime through ``check_tool_calls``; one without it reports nothing."""

    def check_tool_calls(
        self, script: str, tools: Sequence[Tool], *, namespace: Sequence[str] | None = ()
    ) -> str | None:
        """The corrective text for the tool calls in ``script`` that cannot succeed (unknown
        tool, unknown or missing argument, a wrong argument type), or None to run it. Nothing
        has run when it is given. ``namespace``: names an earlier script left
        (``persist_namespace``), None when they are not known. Never raises for a script."""
        ...


def check_tool_calls(
    runtime: object, script: str, tools: Sequence[Tool], *, namespace: Sequence[str] | None = ()
) -> str | None:
    """``runtime.check_tool_calls(script, tools, namespace=...)`` when the runtime has it
    (``ToolCallChecking``), else None."""
    check = getattr(runtime, "check_tool_calls", None)
    if check is None:
        return None
    found: str | None = check(script, tools, namespace=namespace)
    return found


# ------------------------------------------------------------------ advances on a thread

_RESUME_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="codeact-resume")
"""Runs the advances of runtimes without a native worker (``resume_in_thread``)."""


class ThreadTicket:
    """An ``AdvanceTicket`` over a Python future (``resume_in_thread``)."""

    __slots__ = ("_future",)

    def __init__(self, future: concurrent.futures.Future[RunStep]) -> None:
        self._future = future

    @property
    def done(self) -> bool:
        """Whether the advance finished."""
        return self._future.done()

    def wait(self, timeout: float | None = None) -> bool:
        """Waits up to ``timeout`` seconds (forever when None); whether the advance finished."""
        concurrent.futures.wait([self._future], timeout=timeout)
        return self._future.done()

    def result(self) -> RunStep:
        """The step; raises what the advance raised."""
        return self._future.result()


def resume_in_thread(
    resume: Callable[..., RunStep], outcome: Any, os_replay: Sequence[tuple[str, Any]] | None
) -> ThreadTicket:
    """``resume(outcome, os_replay=...)`` on a worker thread, as its ticket: the body of
    ``resume_async`` for a runtime without a native worker."""
    return ThreadTicket(_RESUME_POOL.submit(resume, outcome, os_replay=os_replay or ()))


def step_within(ticket: AdvanceTicket, timeout: float) -> RunStep | AdvanceTicket:
    """The ticket's step when its advance finishes within ``timeout`` seconds, else the
    ticket: the body of ``resume_within`` over a ``resume_async``."""
    return ticket.result() if ticket.wait(timeout) else ticket


# ------------------------------------------------------------------ argument binding


def _parameter_names(schema: Mapping[str, Any] | None) -> list[str]:
    if not schema:
        return []
    names: list[str] = [n for n in schema.get("required", ()) if isinstance(n, str)]
    for n in schema.get("properties", {}) or {}:
        if n not in names:
            names.append(n)
    return names


def bind_call_args(tool: Tool, positional: Sequence[Any], keyword: Mapping[str, Any]) -> dict[str, Any]:
    """Binds a call's positional and keyword arguments to ``tool``'s declared parameters.

    The one place positional arguments are bound (runtimes never do it). Positional
    argument ``i`` goes to the ``i``-th parameter name: the schema's ``required`` names in
    order, then the other ``properties``. A tool without declared parameters takes
    positionals as ``arg0``, ``arg1``, ... (the ADK-Rust convention).

    Args:
        tool: the tool called; its ``parameters`` JSON schema gives the names.
        positional: positional arguments, in call order.
        keyword: keyword arguments.

    Returns:
        The arguments as one dict, keyword order first, then bound positionals.

    Raises:
        TypeError: too many positionals, a parameter given twice, or an unknown name when
            the schema forbids extra properties (``additionalProperties: false``). The agent
            raises it into the script.
    """
    schema = tool.parameters
    result = dict(keyword)
    if positional:
        names = _parameter_names(schema)
        if names and len(positional) > len(names):
            raise TypeError(
                f"tool {tool.name!r} takes at most {len(names)} positional argument(s) "
                f"({', '.join(names)}) but {len(positional)} were given"
            )
        for i, value in enumerate(positional):
            key = names[i] if names else f"arg{i}"
            if key in result:
                raise TypeError(f"tool {tool.name!r} got multiple values for argument {key!r}")
            result[key] = value
    if schema and schema.get("additionalProperties") is False:
        allowed = schema.get("properties", {}) or {}
        if not isinstance(allowed, dict):
            allowed = set(allowed)
        for k in result:
            if k not in allowed:
                raise TypeError(
                    f"tool {tool.name!r} got an unexpected argument {k!r}; "
                    f"its parameters are: {', '.join(_parameter_names(schema)) or '(none)'}"
                )
    return result


def default_tool_catalog(tools: Sequence[Tool]) -> str:
    """A language-neutral listing of ``tools`` for runtimes without a better rendering.

    Returns:
        ``""`` when there is nothing to list, else ``"Available tools:"`` followed by one
        entry per tool (name, description, ``[long-running]`` marker, one line per argument
        with its type, default and description, the return type, parameters as JSON).
    """
    from ._render import render_catalog

    return render_catalog(tools)
