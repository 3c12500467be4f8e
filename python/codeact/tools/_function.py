"""Tools from typed Python callables: ``FunctionTool``, ``LongRunningFunctionTool``, ``tool``.

pydantic builds the argument validator and the JSON schema from the signature; the
description and the parameter descriptions come from the docstring. The approach follows
pydantic-ai's function tools (schema from the signature, lax validation, docstring
descriptions) and Google ADK's ``FunctionTool`` (``tool_context`` injection, long-running
tools returning a handle).
"""

from __future__ import annotations

import concurrent.futures
import functools
import inspect
import logging
import os
import re
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar, overload

import anyio.to_thread
from pydantic import ConfigDict, Field, PydanticUserError, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema
from typing_extensions import NotRequired, TypedDict

from .._values import MAX_DEPTH, problem, to_plain
from ..exceptions import ToolArgumentError
from ._base import Tool
from ._context import ToolContext

_log = logging.getLogger("codeact.tools")

_INLINE_WAIT = 0.002
"""Seconds the caller blocks waiting for a sync tool before awaiting it without blocking."""

_TOOL_THREADS = concurrent.futures.ThreadPoolExecutor(
    max_workers=max(8, min(64, (os.cpu_count() or 2) * 4)), thread_name_prefix="codeact-tool"
)


QUICK_CALL = 0.001
"""Seconds within which a sync tool's call counts as quick (see ``FunctionTool``)."""

_QUICK_STREAK = 3
"""Quick threaded calls in a row after which a sync tool runs inline."""

_MAX_OVERRUNS = 3
"""Inline calls slower than ``QUICK_CALL`` after which a sync tool stays on threads for good."""

_PLAIN_LEAVES = frozenset({bool, int, float, bytes, str})
"""Result types that are plain data as they are (a str with lone surrogates too: the agent
escapes it when it records it)."""
_NEVER_AWAITABLE = frozenset({type(None), bool, int, float, str, bytes, list, tuple, dict})
"""Result types (exact) that cannot be awaitable, so ``run`` skips the awaitable probe."""


def _timed(timing: list[float], func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    started = time.perf_counter()
    try:
        return func(*args, **kwargs)
    finally:
        timing.append(time.perf_counter() - started)


async def _in_thread(name: str, fn: Callable[[], Any]) -> Any:
    """Runs a sync tool on a worker thread. A quick one is waited for in place (no event-loop
    round trip); past ``_INLINE_WAIT`` it is awaited without blocking and can be cancelled
    (a timeout): the thread runs on, and its result is discarded and logged."""
    future = _TOOL_THREADS.submit(fn)
    try:
        return future.result(timeout=_INLINE_WAIT)
    except concurrent.futures.TimeoutError:
        pass
    try:
        return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        future.add_done_callback(functools.partial(_late, name))
        raise


def _late(name: str, future: concurrent.futures.Future[Any]) -> None:
    error = future.exception()
    _log.warning(
        "tool %r finished after its call was abandoned (timeout or cancellation); its %s was discarded",
        name,
        f"error ({error!r})" if error is not None else "result",
    )


__all__ = ("FunctionTool", "LongRunningFunctionTool", "ToolArgumentError", "tool")

_F = TypeVar("_F", bound=Callable[..., Any])
_typed_dict: Any = TypedDict  # called with a computed name and fields, which type checkers refuse


# --------------------------------------------------------------------------- docstrings

_GOOGLE_PARAM_SECTIONS = frozenset(
    {"args", "arguments", "params", "parameters", "keyword args", "keyword arguments", "other parameters"}
)
_GOOGLE_HEADER = re.compile(r"^(\s*)([A-Za-z][A-Za-z ]*?)\s*:\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(.*)$")
_NUMPY_PARAM_SECTIONS = frozenset({"parameters", "other parameters", "keyword arguments"})
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_SPHINX_FIELD = re.compile(r"^(\s*):(\w+)(?:\s+([^:]*?))?\s*:(.*)$")
_SPHINX_PARAM_FIELDS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})
_SPHINX_TYPE_FIELDS = frozenset({"type", "kwtype"})


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_numpy_header(lines: list[str], i: int) -> bool:
    return bool(lines[i].strip()) and i + 1 < len(lines) and bool(_NUMPY_UNDERLINE.match(lines[i + 1]))


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Splits a docstring into a description and per-parameter descriptions.

    A small parser for the three common styles, instead of a dependency (griffe,
    docstring_parser): Google (``Args:`` / ``Arguments:`` / ``Parameters:`` sections with
    ``name (type): text`` entries), Sphinx (``:param [type] name: text``, ``:type name:``) and
    NumPy (a ``Parameters`` header underlined with dashes, ``name : type`` entries). Continuation
    lines are joined with single spaces.

    Args:
        doc: the docstring (indented as written, or already cleaned), or None.

    Returns:
        ``(description, params)``: the description is the cleaned docstring with the parameter
        sections (and Sphinx ``:type:`` fields) removed, everything else kept verbatim (a
        ``Returns:`` or ``Raises:`` section tells a script what it gets back); ``params`` maps
        parameter names, without leading ``*``, to their text.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    out: list[str] = []
    params: dict[str, str] = {}
    n = len(lines)
    i = 0
    while i < n:
        line = lines[i]
        header = _GOOGLE_HEADER.match(line)
        if header and header.group(2).lower() in _GOOGLE_PARAM_SECTIONS and not _is_numpy_header(lines, i):
            base = len(header.group(1))
            entry_indent: int | None = None
            current: str | None = None
            i += 1
            while i < n:
                text = lines[i]
                if not text.strip():
                    i += 1
                    continue
                ind = _indent(text)
                if ind <= base:
                    break
                if entry_indent is None:
                    entry_indent = ind
                entry = _GOOGLE_ENTRY.match(text.strip()) if ind <= entry_indent else None
                if entry:
                    current = entry.group(1)
                    params[current] = entry.group(2).strip()
                elif current is not None:
                    params[current] = f"{params[current]} {text.strip()}".strip()
                i += 1
            continue
        if line.strip().lower() in _NUMPY_PARAM_SECTIONS and _is_numpy_header(lines, i):
            base = _indent(line)
            names: list[str] = []
            i += 2
            while i < n and not _is_numpy_header(lines, i):
                text = lines[i]
                if text.strip():
                    if _indent(text) <= base:
                        names = [s.strip().lstrip("*") for s in text.split(":", 1)[0].split(",") if s.strip()]
                        for name in names:
                            params[name] = ""
                    else:
                        for name in names:
                            params[name] = f"{params[name]} {text.strip()}".strip()
                i += 1
            continue
        field = _SPHINX_FIELD.match(line)
        if field and (field.group(2) in _SPHINX_PARAM_FIELDS or field.group(2) in _SPHINX_TYPE_FIELDS):
            base = len(field.group(1))
            target = (field.group(3) or "").split()
            name = target[-1].lstrip("*") if target else ""
            text_parts = [field.group(4).strip()]
            i += 1
            while i < n and lines[i].strip() and _indent(lines[i]) > base:
                text_parts.append(lines[i].strip())
                i += 1
            if field.group(2) in _SPHINX_PARAM_FIELDS and name:
                params[name] = " ".join(p for p in text_parts if p)
            continue
        out.append(line)
        i += 1
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(s.rstrip() for s in out)).strip()
    return description, params


# --------------------------------------------------------------------------- schema


class _ToolJsonSchema(GenerateJsonSchema):
    """pydantic's JSON schema without per-field titles (the property name says it)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _is_tool_context(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, ToolContext)


def _plain_name(func: Callable[..., Any]) -> str:
    target: Any = func
    while isinstance(target, functools.partial):
        target = target.func
    name = getattr(target, "__name__", None)
    return name if isinstance(name, str) else type(target).__name__


def _docstring(func: Callable[..., Any]) -> str | None:
    target: Any = func
    while isinstance(target, functools.partial):
        target = target.func
    return inspect.getdoc(target)


def _return_schema(annotation: Any) -> dict[str, Any] | None:
    """The JSON schema of a return annotation (serialization mode: what the script receives),
    or None when there is none or pydantic cannot describe it. ``Awaitable[T]`` / a coroutine
    annotation are not unwrapped: ``async def f() -> T`` is annotated ``T`` already."""
    if annotation is inspect.Signature.empty or annotation is Any:
        return None
    try:
        schema = TypeAdapter(annotation).json_schema(mode="serialization", schema_generator=_ToolJsonSchema)
    except (PydanticUserError, TypeError, ValueError):
        return None
    return schema or None


# --------------------------------------------------------------------------- results

# --------------------------------------------------------------------------- tools


_FOREIGN = (
    ("google.adk", "an ADK tool: wrap it with codeact.integrations.adk.from_adk([tool])"),
    ("langchain_core", "a langchain tool: wrap it with codeact.integrations.langchain.from_langchain([tool])"),
    ("langchain_community", "a langchain tool: wrap it with codeact.integrations.langchain.from_langchain([tool])"),
    ("langchain", "a langchain tool: wrap it with codeact.integrations.langchain.from_langchain([tool])"),
    (
        "pydantic_ai",
        "a pydantic-ai tool: give codeact its function, or put the pydantic-ai toolset behind "
        "codeact.integrations.pydantic_ai.CodeActToolset",
    ),
    ("mcp", "an MCP object: reach the server's tools with codeact.integrations.mcp.McpToolset"),
)


def foreign_tool_hint(obj: Any) -> str | None:
    """A one-line message naming the adapter for a tool object of another framework (ADK,
    langchain, pydantic-ai, MCP: told apart by the module of its class), or None."""
    for cls in type(obj).__mro__:
        module = getattr(cls, "__module__", "") or ""
        for prefix, what in _FOREIGN:
            if module == prefix or module.startswith(prefix + "."):
                return f"{type(obj).__name__} is {what}"
    return None


class FunctionTool(Tool):
    """A ``Tool`` made from a typed Python callable, sync or async.

    The parameters' JSON schema and the argument validator are built once, by pydantic, from
    the signature (pydantic-ai's function tools): each parameter becomes a property with its
    type, its default (then not required) and its description from the docstring's ``Args:``
    section (Google, Sphinx ``:param x:`` or NumPy style; a ``Field(description=...)`` in an
    ``Annotated`` hint wins). ``required`` lists parameters in declaration order and extra
    arguments are refused (``additionalProperties: false``). A parameter without annotation
    takes any value.

    A parameter annotated ``ToolContext`` (any name), or named ``tool_context`` (Google ADK's
    convention), receives the per-call context and is not in the schema.

    Args:
        func: the callable; plain and async functions, bound methods, ``functools.partial``
            objects and callable instances all work. ``*args`` / ``**kwargs`` are refused.
        name: the tool name; defaults to ``func.__name__``.
        description: the description for the model; defaults to the docstring without its
            parameter section (summary, body, ``Returns:`` and ``Raises:`` kept). The return
            annotation becomes ``returns`` (its JSON schema), shown as the return type.
        requires_confirmation: a human must approve each call.
        on_in_doubt: ``"rerun"`` / ``"ask"`` / ``"fail"``, as ``Tool``.
        editable: a reviewer may approve a call with edited arguments (validated against
            this signature first), as ``Tool``.
        result_type / payload_type: the type of a completion's value (a long-running tool)
            and of an approval's payload, as ``Tool``.
        read_only: the function changes nothing outside the script, as ``Tool``: its calls
            write no journal intent and become durable with the turn's next durable write.
        run_in_thread: run a sync ``func`` in a worker thread (default), so a blocking
            function never stalls the event loop: the caller waits up to 2 ms for a quick
            function, then awaits the thread without blocking. The agent's ``tool_timeout``
            holds: at the deadline the script gets ``TimeoutError``; the thread cannot be
            killed, so it runs on and its late result is discarded (logged on the
            ``codeact.tools`` logger). A function whose first three calls each returned
            within 1 ms (``QUICK_CALL``) then runs inline, where a thread round trip would
            cost more than the call. An inline call slower than that puts it back on
            threads, where three quick calls in a row earn it inline again; the third slow
            inline call keeps it on threads for good (so at most three slow calls ever run
            inline, and a timeout cannot interrupt an inline call; one slow call is not
            enough, as a busy host can preempt a quick function for over a millisecond).
            ``False`` always calls it inline on the event loop thread. Ignored for async
            functions.

    Raises:
        TypeError: ``func`` is not callable, takes ``*args`` or ``**kwargs``, has two
            context parameters, has a type hint that cannot be resolved, or has a parameter
            type pydantic cannot validate.

    Attributes:
        func: the wrapped callable.
        run_in_thread: as given.
        context_parameter: the name of the injected ``ToolContext`` parameter, or None.
    """

    _long_running = False

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_confirmation: bool = False,
        run_in_thread: bool = True,
        on_in_doubt: Literal["rerun", "ask", "fail"] = "rerun",
        editable: bool = True,
        result_type: Any = None,
        payload_type: Any = None,
        read_only: bool = False,
    ) -> None:
        hint = foreign_tool_hint(func)
        if hint is not None:
            raise TypeError(hint)
        if not callable(func):
            raise TypeError(f"FunctionTool needs a callable, got {type(func).__name__}")
        tool_name = name if name is not None else _plain_name(func)
        try:
            signature = inspect.signature(func, eval_str=True)
        except NameError as e:
            raise TypeError(
                f"tool {tool_name!r}: cannot resolve the type hints of {func!r}: {e} "
                "(define the names the hints use at module level)"
            ) from e
        doc_description, param_docs = _parse_docstring(_docstring(func))

        fields: dict[str, Any] = {}
        context_parameter: str | None = None
        positional_only: list[str] = []
        for param in signature.parameters.values():
            if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                star = "*" if param.kind is inspect.Parameter.VAR_POSITIONAL else "**"
                raise TypeError(
                    f"tool {tool_name!r}: {star}{param.name} is not supported; a tool's arguments are "
                    "passed by name (call_tool(name, {...})), so declare each parameter explicitly"
                )
            annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
            if param.name == "tool_context" or _is_tool_context(annotation):
                if context_parameter is not None:
                    raise TypeError(
                        f"tool {tool_name!r}: two ToolContext parameters ({context_parameter!r}, {param.name!r})"
                    )
                context_parameter = param.name
                if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                    positional_only.append(param.name)
                continue
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                positional_only.append(param.name)
            field_kwargs: dict[str, Any] = {}
            doc = param_docs.get(param.name)
            if doc and FieldInfo.from_annotation(annotation).description is None:
                field_kwargs["description"] = doc
            if param.default is not inspect.Parameter.empty:
                field_kwargs["default"] = param.default
                fields[param.name] = NotRequired[Annotated[annotation, Field(**field_kwargs)]]
            elif field_kwargs:
                fields[param.name] = Annotated[annotation, Field(**field_kwargs)]
            else:
                fields[param.name] = annotation

        arguments = _typed_dict(re.sub(r"\W", "_", f"{tool_name}_arguments"), fields)
        arguments.__pydantic_config__ = ConfigDict(extra="forbid")
        try:
            adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(arguments)
            schema = adapter.json_schema(schema_generator=_ToolJsonSchema)
        except PydanticUserError as e:  # PydanticSchemaGenerationError, PydanticInvalidForJsonSchema, ...
            raise TypeError(f"tool {tool_name!r}: cannot build a validator for its parameters: {e}") from e
        schema.pop("title", None)
        parameters: dict[str, Any] = {"type": "object", "properties": schema.pop("properties", {})}
        if "required" in schema:
            parameters["required"] = schema.pop("required")
        schema.pop("type", None)
        parameters["additionalProperties"] = schema.pop("additionalProperties", False)
        parameters.update(schema)  # $defs

        super().__init__(
            tool_name,
            description if description is not None else doc_description,
            parameters,
            is_long_running=self._long_running,
            requires_confirmation=requires_confirmation,
            returns=_return_schema(signature.return_annotation),
            on_in_doubt=on_in_doubt,
            editable=editable,
            result_type=result_type,
            payload_type=payload_type,
            read_only=read_only,
        )
        self.func = func
        self.run_in_thread = run_in_thread
        self._quick_calls = 0  # threaded calls in a row that each took <= QUICK_CALL; -1: always threaded
        self._overruns = 0  # inline calls that took longer than QUICK_CALL
        self.context_parameter = context_parameter
        self._positional_only = tuple(positional_only)
        self._validate = adapter.validator.validate_python
        self._field_names = tuple(fields)
        self._is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
            getattr(func, "__call__", None)  # noqa: B004 - an instance with an async __call__
        )

    @property
    def runs_inline(self) -> bool:
        """Whether the next call runs on the event loop thread (then a timeout cannot
        interrupt it; see ``run_in_thread``)."""
        return not self._is_async and (not self.run_in_thread or self._quick_calls >= _QUICK_STREAK)

    def check_args(self, args: dict[str, Any]) -> None:
        """Validates ``args`` against the signature (as ``run`` does) without calling the
        function.

        Raises:
            ToolArgumentError: ``args`` do not match the signature.
        """
        try:
            self._validate(args if args is not None else {})
        except ValidationError as e:
            raise ToolArgumentError(self.name, self._describe_errors(e)) from e

    async def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Validates ``args``, calls the function and returns its result as plain data.

        Validation is pydantic's lax mode (``"3"`` is accepted for an ``int``, a dict for a
        pydantic model parameter), as in pydantic-ai.

        Args:
            args: the call's arguments by name (None counts as no arguments).
            tool_context: the per-call context, passed to the context parameter if any.

        Returns:
            The function's result (awaited if it is awaitable) as plain data (SPEC §3 v3,
            ``codeact._values.to_plain``): plain values are kept as they are (bytes,
            tuples, sets and frozensets included); pydantic models and dataclasses become
            dicts, enums their values, and other values go through
            ``pydantic_core.to_jsonable_python`` (datetimes become ISO 8601 strings, UUIDs
            and Decimals strings).

        Raises:
            ToolArgumentError: ``args`` do not match the signature (wrong type, missing,
                unknown argument).
            TypeError: the result cannot be converted to plain data.
            ValueError: the result nests deeper than ``MAX_VALUE_DEPTH`` levels.
            Exception: whatever the function raises, unchanged.
        """
        positional, values = self._bind(args, tool_context)
        func = self.func
        if self._is_async:
            result = await func(*positional, **values)
        elif self.run_in_thread:
            if self._quick_calls >= _QUICK_STREAK:
                result = self._call_timed(positional, values)
            else:
                timing: list[float] = []
                result = await _in_thread(self.name, functools.partial(_timed, timing, func, *positional, **values))
                if self._quick_calls >= 0:
                    self._quick_calls = self._quick_calls + 1 if timing and timing[0] <= QUICK_CALL else 0
        else:
            result = func(*positional, **values)
        if type(result) not in _NEVER_AWAITABLE and inspect.isawaitable(result):
            result = await result
        return self._plain(result)

    def run_inline(self, args: dict[str, Any]) -> Any:
        """``run`` without a coroutine, for a call that runs on the calling thread
        (``runs_inline``) of a tool without a context parameter (how the agent runs the usual
        quick call, issue 21): the same validation, the same quick-call bookkeeping, the same
        result, the same exceptions (a ``StopIteration`` out of the tool becomes the ``RuntimeError`` a
        coroutine turns it into, PEP 479).

        Returns:
            The result as plain data, as ``run`` returns it; when the function returned an
            awaitable, a coroutine to await for that (``inspect.iscoroutine`` tells it from
            plain data); ``NotImplemented`` when the call does not run inline now (an async
            tool, or a threaded one outside its quick streak: the caller awaits ``run``
            instead, so the mode is read once per call).

        Raises:
            ToolArgumentError, TypeError, ValueError, Exception: as ``run``.
            RuntimeError: the tool takes a context parameter.
        """
        if self.context_parameter is not None:
            raise RuntimeError(f"tool {self.name!r} takes a context; use run")
        if not self.runs_inline:
            return NotImplemented
        threaded = self.run_in_thread
        try:
            try:  # _bind, for a function without a context parameter
                values = self._validate(args if args is not None else {})
            except ValidationError as e:
                raise ToolArgumentError(self.name, self._describe_errors(e)) from e
            positional = [values.pop(n) for n in self._positional_only] if self._positional_only else ()
            result = self._call_timed(positional, values) if threaded else self.func(*positional, **values)
            kind = type(result)
            if result is None or kind in _PLAIN_LEAVES:
                return result  # plain as it is (_plain)
            if kind not in _NEVER_AWAITABLE and inspect.isawaitable(result):
                return self._settle(result)
            return self._plain(result)
        except StopIteration as exc:
            raise RuntimeError("coroutine raised StopIteration") from exc

    async def _settle(self, result: Any) -> Any:
        return self._plain(await result)

    def _bind(self, args: dict[str, Any] | None, tool_context: Any) -> tuple[Any, dict[str, Any]]:
        """The validated arguments as (positional-only values, keyword values)."""
        try:
            values = self._validate(args if args is not None else {})
        except ValidationError as e:
            raise ToolArgumentError(self.name, self._describe_errors(e)) from e
        if self.context_parameter is not None:
            values[self.context_parameter] = tool_context
        positional = [values.pop(n) for n in self._positional_only] if self._positional_only else ()
        return positional, values

    def _call_timed(self, positional: Any, values: dict[str, Any]) -> Any:
        """Calls a threaded tool's function inline (its quick streak); a call slower than
        ``QUICK_CALL`` counts as an overrun, and enough of them send the tool back to threads."""
        started = time.perf_counter()
        try:
            return self.func(*positional, **values)
        finally:
            if time.perf_counter() - started > QUICK_CALL:  # wall time: a sleep counts
                self._overruns += 1
                self._quick_calls = -1 if self._overruns >= _MAX_OVERRUNS else 0

    def _plain(self, result: Any) -> Any:
        if result is None or type(result) in _PLAIN_LEAVES:
            return result  # plain as it is (what to_plain and problem answer for it)
        value = to_plain(result)
        found = problem(value, "", lone_surrogates=True)  # the label is spelled out only for a message
        if found is not None:
            found = problem(value, f"the result of {self.name!r}", lone_surrogates=True)
        if found is not None:
            if found.endswith(f"nests deeper than {MAX_DEPTH} levels"):
                raise ValueError(found)
            raise TypeError(f"tool {self.name!r} returned a value that is not plain data: {found}")
        return value

    def _describe_errors(self, error: ValidationError) -> list[tuple[str, str]]:
        described: list[tuple[str, str]] = []
        for item in error.errors(include_url=False, include_context=False, include_input=False):
            loc = ""
            for part in item["loc"]:
                loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
            kind = item["type"]
            if kind == "missing" and len(item["loc"]) == 1:
                message = "missing required argument"
            elif kind == "extra_forbidden" and len(item["loc"]) == 1:
                message = f"unexpected argument (parameters: {', '.join(self._field_names) or 'none'})"
            else:
                message = item["msg"]
            described.append((loc, message))
        return described


class LongRunningFunctionTool(FunctionTool):
    """A ``FunctionTool`` whose result arrives later (``is_long_running=True``; Google ADK's
    ``LongRunningFunctionTool``).

    The function starts the work and returns a handle, for example
    ``{"status": "pending", "task_id": "..."}``; the run suspends after the call and resumes
    when the caller sends the real result as a function response. Runtimes that cannot
    suspend run it inline and hand the handle to the script. Arguments, schema and errors are
    as for ``FunctionTool``.
    """

    _long_running = True


@overload
def tool(func: _F, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_confirmation: bool = False,
    run_in_thread: bool = True,
    on_in_doubt: Literal["rerun", "ask", "fail"] = "rerun",
    editable: bool = True,
    read_only: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_confirmation: bool = False,
    run_in_thread: bool = True,
    on_in_doubt: Literal["rerun", "ask", "fail"] = "rerun",
    editable: bool = True,
    read_only: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Makes a ``FunctionTool``, as ``@tool``, ``@tool(name="x")`` or ``tool(func)``.

    The decorated name becomes the ``FunctionTool`` (the function stays reachable as
    ``.func``). Keyword arguments are ``FunctionTool``'s.

    Returns:
        A ``FunctionTool`` when given ``func``, else a decorator that makes one.

    Raises:
        TypeError: as ``FunctionTool``.
    """

    def make(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            description=description,
            requires_confirmation=requires_confirmation,
            run_in_thread=run_in_thread,
            on_in_doubt=on_in_doubt,
            editable=editable,
            read_only=read_only,
        )

    return make(func) if func is not None else make
