"""Guardrails: checks on what enters and leaves an agent.

A guardrail is a sync or async callable ``(content, ctx) -> GuardrailResult | None``
(``None`` passes). ``content`` is the ``Content`` checked (the user's message for input
guardrails, the final answer for output guardrails); ``ctx`` is a read-only context.
Results:

- ``GuardrailResult.passed()`` (or ``None``): the content goes on unchanged;
- ``GuardrailResult.block(reason)``: the content is stopped. A blocked input ends the run
  with an event (``error_code="codeact.input_guardrail"``) saying why, and the message is not
  stored; a blocked output is never returned: the final answer is replaced by an error event
  (``error_code="codeact.output_guardrail"``) and nothing is stored under ``output_key``;
- ``GuardrailResult.rewrite(content)``: the content is replaced (a ``str`` or a
  ``Content``) and the next guardrail sees the rewritten one.

Guardrails of a set run in order; the first block stops the set. An exception raised by a
guardrail counts as a block whose reason is the exception text.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .events import Content

__all__ = ("Guardrail", "GuardrailResult", "GuardrailVerdict", "run_guardrails")

Guardrail = Callable[..., Any]
"""``(content: Content, ctx: ReadonlyContext) -> GuardrailResult | None`` (or an awaitable)."""


class GuardrailResult(BaseModel):
    """What one guardrail decided.

    Attributes:
        action: ``"pass"``, ``"block"`` or ``"rewrite"``.
        reason: why (shown in the event of a block).
        content: the replacement (``"rewrite"`` only).
    """

    model_config = ConfigDict(frozen=True)

    action: Literal["pass", "block", "rewrite"] = "pass"
    reason: str = ""
    content: Content | None = None

    @classmethod
    def passed(cls) -> GuardrailResult:
        """Let the content through unchanged (``action="pass"``)."""
        return cls(action="pass")

    @classmethod
    def block(cls, reason: str) -> GuardrailResult:
        """Stop the content; ``reason`` is shown in the event of the block."""
        return cls(action="block", reason=reason)

    @classmethod
    def rewrite(cls, content: Content | str, reason: str = "") -> GuardrailResult:
        """Replace the content with ``content`` (a ``str`` becomes a one-text-part ``Content``)."""
        if isinstance(content, str):
            content = Content.from_text(content)
        return cls(action="rewrite", content=content, reason=reason)


class GuardrailVerdict(BaseModel):
    """The outcome of a whole set: ``blocked`` with a ``reason``, or the (possibly
    rewritten) ``content``."""

    blocked: bool = False
    reason: str = ""
    content: Content


def _name(g: Any) -> str:
    return str(getattr(g, "name", None) or getattr(g, "__name__", None) or type(g).__name__)


async def run_guardrails(guardrails: Sequence[Guardrail], content: Content, ctx: Any) -> GuardrailVerdict:
    """Runs a set in order on ``content``; see the module docstring."""
    current = content
    for g in guardrails:
        try:
            result = g(current, ctx)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            return GuardrailVerdict(blocked=True, reason=f"{_name(g)}: {type(exc).__name__}: {exc}", content=current)
        if result is None or result.action == "pass":
            continue
        if not isinstance(result, GuardrailResult):
            raise TypeError(f"guardrail {_name(g)} returned {type(result).__name__}, expected GuardrailResult or None")
        if result.action == "block":
            return GuardrailVerdict(blocked=True, reason=f"{_name(g)}: {result.reason or 'blocked'}", content=current)
        assert result.content is not None
        role = current.role
        current = result.content.model_copy(update={"role": role})
    return GuardrailVerdict(content=current)
