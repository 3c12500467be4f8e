"""The ``Tool`` base class."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ._context import ToolContext

__all__ = ("Tool",)


class Tool:
    """A tool a script can call with ``call_tool("name", {...})``.

    The runtime seam needs only ``name``, ``description``, ``parameters`` and
    ``is_long_running``; the agent loop calls ``run``.

    Args:
        name: the name scripts call it by; any string ("fetch-cart", "class" work).
        description: one paragraph for the model.
        parameters: a JSON schema (``type: object``) of its arguments, or None.
        is_long_running: the result arrives later: the run suspends after starting it and
            resumes when the caller sends a function response (runtimes that cannot
            suspend run it inline).
        requires_confirmation: a human must approve each call (human in the loop); a tool
            that decides per call overrides ``confirmation_required``.
        returns: a JSON schema of the result, or None when undeclared; tool listings show
            it as the return type (``FunctionTool`` takes it from the return annotation).
        on_in_doubt: what recovery does with a call of this tool that started but has no
            recorded outcome (the runner stopped while it ran, so it may have run):
            ``"rerun"`` (default: at least once, SPEC §5), ``"ask"`` (pause for a human:
            ``Runner.resolve_in_doubt``) or ``"fail"`` (the script gets a ``RuntimeError``).
            Use ``"ask"`` for tools that are not idempotent and cannot use
            ``ToolContext.function_call_id`` as an idempotency key.
        result_type: for a long-running tool, the type its completion value must have (a
            pydantic model, a ``TypedDict``, ``list[int]``, ...): ``Runner.complete`` /
            a function response is validated against it before the script resumes
            (``DecisionValueError`` naming the field); ``result_schema`` is its JSON schema.
        payload_type: for a tool that asks for confirmation, the type of the payload an
            approval carries (``Decision.payload``), validated the same way; the approved
            tool reads it as ``ToolContext.tool_confirmation.payload``; ``payload_schema``
            is its JSON schema.
        editable: a reviewer may approve a call of this tool with edited arguments
            (``Runner.approve(args=...)``); ``False`` refuses such an approval
            (``EditNotSupportedError``): the call runs as the script made it, or not at all.
        read_only: the tool changes nothing outside the script (a lookup, a search, a read):
            running it again after a crash is harmless. Its calls write no journal intent and
            their outcomes become durable with the turn's next durable write (the next call
            with effects, a pause, the end of the script) instead of one commit each; a call
            whose outcome was not yet durable runs again after a crash, and ``on_in_doubt``
            never applies to it (SPEC §5, docs/durability.md). Default False: every call is
            an effect (an intent before it starts, its outcome before the script goes on).
    """

    on_in_doubt: Literal["rerun", "ask", "fail"] = "rerun"
    read_only: bool = False

    def __init__(
        self,
        name: str,
        description: str = "",
        parameters: dict[str, Any] | None = None,
        *,
        is_long_running: bool = False,
        requires_confirmation: bool = False,
        returns: dict[str, Any] | None = None,
        on_in_doubt: Literal["rerun", "ask", "fail"] = "rerun",
        editable: bool = True,
        result_type: Any = None,
        payload_type: Any = None,
        read_only: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a tool needs a non-empty string name")
        if on_in_doubt not in ("rerun", "ask", "fail"):
            raise ValueError(f"on_in_doubt must be 'rerun', 'ask' or 'fail', not {on_in_doubt!r}")
        self.on_in_doubt = on_in_doubt
        self.read_only = bool(read_only)
        self.name = name
        self.description = description
        self.parameters = parameters
        self.is_long_running = is_long_running
        self.requires_confirmation = requires_confirmation
        self.returns = returns
        self.editable = editable
        self.result_type = result_type
        self.payload_type = payload_type
        self._answer_adapters: dict[str, Any] = {}

    def _adapter(self, what: str) -> Any:
        """The pydantic ``TypeAdapter`` of ``result_type`` / ``payload_type``, or None."""
        kind = self.result_type if what == "result" else self.payload_type
        if kind is None:
            return None
        adapters = self.__dict__.setdefault("_answer_adapters", {})
        if what not in adapters:
            from pydantic import TypeAdapter

            adapters[what] = TypeAdapter(kind)
        return adapters[what]

    @property
    def result_schema(self) -> dict[str, Any] | None:
        """The JSON schema of ``result_type`` (None: undeclared)."""
        adapter = self._adapter("result")
        return adapter.json_schema() if adapter is not None else None

    @property
    def payload_schema(self) -> dict[str, Any] | None:
        """The JSON schema of ``payload_type`` (None: undeclared)."""
        adapter = self._adapter("payload")
        return adapter.json_schema() if adapter is not None else None

    def check_answer(self, what: Literal["result", "payload"], value: Any) -> list[tuple[str, str]]:
        """The fields ``value`` gets wrong against ``result_type`` (``what="result"``) or
        ``payload_type`` (``"payload"``), as ``(dotted field, message)``; ``[]`` when it fits
        or no type is declared."""
        adapter = self._adapter(what)
        if adapter is None:
            return []
        from pydantic import ValidationError

        try:
            adapter.validate_python(value)
        except ValidationError as exc:
            return [(".".join(str(p) for p in e["loc"]), str(e["msg"])) for e in exc.errors(include_url=False)]
        return []

    async def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Executes the tool.

        Args:
            args: the call's arguments, bound by name.
            tool_context: the per-call context (call key, state, actions).

        Returns:
            A JSON-compatible value handed back to the script.

        Raises:
            Exception: any failure; the agent raises it into the script as a catchable
                exception (after retries and fallbacks), as the nearest builtin type every
                runtime has (``ConnectionError`` becomes ``OSError`` with the text
                ``"ConnectionError: ..."``; a ``ValueError`` stays a ``ValueError``; a class
                with no builtin ancestor but ``Exception`` becomes ``RuntimeError``).
        """
        raise NotImplementedError(f"tool {self.name!r} does not implement run()")

    def check_args(self, args: dict[str, Any]) -> None:
        """Checks ``args`` against the tool's signature without running it (the agent does so
        before asking a human to approve a call). The default accepts anything; ``run``
        still validates.

        Raises:
            ToolArgumentError: ``args`` can never be valid for this tool.
        """

    async def confirmation_required(self, args: dict[str, Any]) -> bool:
        """Whether this call (its bound ``args``) waits for a human, asked only when
        ``requires_confirmation`` is set and the agent does not already gate the tool. The
        default says yes; a subclass may decide per call (the ADK adapter evaluates an ADK
        ``require_confirmation`` predicate here, as ADK's ``FunctionTool`` does).

        Raises:
            Exception: the check failed; the script gets the error and the tool does not run.
        """
        del args
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
