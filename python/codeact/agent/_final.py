"""The two ends of a run the agent's schemas check: the user's message against
``input_schema`` when the run starts, and a script's ``final_result`` (``output_schema``, the
output guardrails, ``output_key``) when it ends. Split from ``CodeActAgent`` (``_agent``)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from .._values import to_plain
from ..events import Content, Event
from ..guardrails import run_guardrails
from ._context import ReadonlyContext
from ._output import render_final, schema_errors_summary
from ._run import Run

if TYPE_CHECKING:
    from ._agent import CodeActAgent

__all__ = ("as_content", "check_input", "final_result", "otel_usage", "schema_error_room", "validate_output")


def check_input(agent: CodeActAgent, content: Content | None) -> str | None:
    """Why the user's message does not match ``input_schema``, or None."""
    if agent.input_schema is None or content is None or not content.text:
        return None
    text = content.text
    try:
        data = json.loads(text)
    except ValueError as exc:
        if agent._input_adapter is not None or (
            isinstance(agent.input_schema, dict) and agent.input_schema.get("type") not in (None, "string")
        ):
            return f"the user message must be JSON matching the input schema of agent {agent.name!r} ({exc})"
        data = text
    if agent._input_adapter is not None:
        try:
            agent._input_adapter.validate_python(data)
        except ValidationError as exc:
            errs = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors())
            return f"the user message does not match the input schema of agent {agent.name!r}: {errs}"
        return None
    errors = sorted(agent._input_validator.iter_errors(data), key=lambda e: list(e.path))
    if errors:
        errs = "; ".join(f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors)
        return f"the user message does not match the input schema of agent {agent.name!r}: {errs}"
    return None


async def final_result(agent: CodeActAgent, run: Run, value: Any) -> AsyncGenerator[Event, None]:
    """The events of a script's ``final_result``: checked against ``output_schema`` (a
    mismatch is fed back until ``output_max_retries``), passed through the output guardrails,
    stored under ``output_key``; the run ends ``"final"``."""
    errors = validate_output(agent, value)
    if errors is not None:
        if run.schema_retries >= agent.output_max_retries:
            run.end("error")
            yield run.error_event(
                "codeact.output_schema",
                f"final result failed schema validation after {agent.output_max_retries + 1} attempt(s): {errors}",
                clear=run.clear_delta() is not None,
            )
            return
        run.schema_retries += 1
        agent._feed_back(
            run,
            "Error during execution:\nfinal_result did not match the required schema: "
            f"{errors}. Return a conforming final_result.",
            outcome="OUTCOME_FAILED",
        )
        return
    if agent._schema_adapter is not None:
        validated = agent._schema_adapter.validate_python(value)
        try:
            value = agent._schema_adapter.dump_python(validated, mode="json")
        except (PydanticSerializationError, ValueError, TypeError):
            # a frozenset or tuple key JSON cannot name: the plain value, tagged when stored
            value = to_plain(agent._schema_adapter.dump_python(validated))
    try:
        rendered = render_final(value)
    except ValueError as exc:  # plain data the store cannot hold (nested too deep when tagged)
        agent._feed_back(
            run,
            f"Error during execution:\nthe final_result value cannot be stored: {exc}. "
            "Return a flatter value (fewer nested tuples, sets or dicts with non-str keys).",
            outcome="OUTCOME_FAILED",
        )
        return
    delta = run.clear_delta() or {}
    content = Content.from_text(rendered, role="model")
    if agent.output_guardrails:
        verdict = await run_guardrails(agent.output_guardrails, content, ReadonlyContext(run.ctx, run.pending))
        if verdict.blocked:
            run.end("error")
            yield run.error_event(
                "codeact.output_guardrail",
                f"output guardrails blocked the final answer: {verdict.reason}",
                clear=bool(delta),
            )
            return
        content = verdict.content
        if content.text != rendered:
            value = content.text
    if agent.output_key:
        delta[agent.output_key] = value
    yield agent._result_event(run, [], "OUTCOME_OK")
    run.turn_stdout = ""
    run.end("final")
    yield run.event(content=content, state_delta=delta)


def validate_output(agent: CodeActAgent, value: Any) -> str | None:
    """Why ``value`` does not match ``output_schema`` (a summary of the errors), or None."""
    if agent._schema_adapter is not None:
        try:
            agent._schema_adapter.validate_python(value)
        except ValidationError as exc:
            pairs = [(".".join(map(str, e["loc"])), e["msg"]) for e in exc.errors()]
            return schema_errors_summary(pairs, schema_error_room(agent))
        return None
    if agent._schema_validator is not None:
        try:
            errs = sorted(agent._schema_validator.iter_errors(value), key=lambda e: list(e.path))
        except Exception as exc:  # a value JSON Schema has no word for (a tuple key in a pattern)
            return f"the value cannot be checked against the schema ({type(exc).__name__}: {exc})"
        if errs:
            pairs = [("/".join(map(str, e.path)), e.message) for e in errs]
            return schema_errors_summary(pairs, schema_error_room(agent))
    return None


def schema_error_room(agent: CodeActAgent) -> int:
    """Characters the schema errors may take in the feedback (``max_error_chars`` less the
    words around them)."""
    return max(agent.max_error_chars - 120, 200)


def otel_usage(run: Run) -> Any:
    """The run's token totals in the shape ``AgentRun.end`` reads (``prompt_tokens`` / ``completion_tokens``)."""
    from ..models import Usage

    return Usage(prompt_tokens=run.prompt_tokens, completion_tokens=run.completion_tokens)


def as_content(value: Any) -> Content:
    """A callback's answer as a model-role ``Content`` (a text becomes one text part)."""
    if isinstance(value, Content):
        return value
    return Content.from_text(str(value), role="model")
