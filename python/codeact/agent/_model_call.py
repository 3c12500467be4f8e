"""One model call of the loop: the request built from the run's transcript, the plugins' and
the agent's model callbacks around it, and the usage it adds to the run (with the usage limits
checked before each call). Split from ``CodeActAgent`` (``_agent``)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from ..events import Content, Event, UsageMetadata
from ..models import LlmRequest, LlmResponse, ModelResponseError, stream_content
from ._dispatch import call_callback
from ._driver import escape_surrogates
from ._run import Run, as_callbacks
from ._streaming import partial_event

if TYPE_CHECKING:
    from ._agent import CodeActAgent

__all__ = ("as_response", "call_model", "stream_model", "usage_breach")


async def call_model(agent: CodeActAgent, run: Run) -> str:
    """One model call for the run's transcript, through the plugins' and the agent's model
    callbacks; counts the call and its tokens. Returns the reply's text (lone surrogates
    escaped)."""
    request, response = await _before_model(agent, run)
    run.last_usage = None
    if response is None:
        run.model_calls += 1
        otel = run.otel
        if otel is not None and otel.active:
            with otel.chat(request.model, request=request) as chat:
                response = await agent.model.generate_content(request)
                chat.record_response(response)
        else:
            response = await agent.model.generate_content(request)
        _count_usage(run, response)
    return await _after_model(agent, run, response)


async def stream_model(
    agent: CodeActAgent, run: Run, *, show: bool = True, on_text: Callable[[str], None] | None = None
) -> AsyncGenerator[Event | str, None]:
    """``call_model`` streaming (``RunConfig(streaming=True)``): yields a ``partial`` event
    (kind ``"model_reply"``, one text part with the new text) per chunk the model streams,
    then, last, the reply's text as ``call_model`` returns it (after the model callbacks).
    A model without ``generate_content_stream`` gives no partial event; a before-model
    callback that answers gives none either. A stream that breaks off raises its
    ``ModelError`` after its partial events: nothing of the reply is stored or run.
    ``show=False``: no partial event (eager start without streaming); ``on_text`` gets each
    chunk's text as the model sent it (eager start's ``EagerRun.feed``)."""
    request, response = await _before_model(agent, run)
    run.last_usage = None
    if response is None:
        run.model_calls += 1
        otel = run.otel
        span = otel.chat(request.model, request=request) if otel is not None and otel.active else nullcontext()
        with span as chat:
            async for item in stream_content(agent.model, request):
                if item.partial:
                    text = item.text
                    if on_text is not None:
                        on_text(text)
                    if not show:
                        continue
                    shown = partial_event(run, "model_reply", text if text.isascii() else escape_surrogates(text))
                    if shown is not None:
                        yield shown
                else:
                    response = item
            if response is None:
                raise ModelResponseError(
                    f"model {agent.model.name!r} ended its stream without a complete reply", model=agent.model.name
                )
            if chat is not None:
                chat.record_response(response)
        _count_usage(run, response)
    yield await _after_model(agent, run, response)


async def _before_model(agent: CodeActAgent, run: Run) -> tuple[LlmRequest, LlmResponse | None]:
    """The request for the run's transcript after the before-model callbacks, and the reply
    a callback gave instead of the model (or None)."""
    request = LlmRequest(
        model=getattr(agent.model, "name", None),
        system_instruction=run.system_prompt,
        contents=list(run.transcript),
        config=agent.generate_content_config,
    )
    response: LlmResponse | None = None
    for plugin in run.plugins:
        result = await call_callback(plugin.before_model, run.cb_ctx, request)
        if isinstance(result, LlmRequest):
            request = result
        elif result is not None:
            response = as_response(result)
            break
    for cb in as_callbacks(agent.before_model) if response is None else ():
        result = await call_callback(cb, run.cb_ctx, request)
        if result is not None:
            response = as_response(result)
            break
    return request, response


def _count_usage(run: Run, response: LlmResponse) -> None:
    """Counts the model call's tokens into the run (``run.last_usage``: this call's)."""
    usage = getattr(response, "usage", None)
    run.last_usage = UsageMetadata(model_calls=1)
    if usage is not None:
        prompt, completion = usage.prompt_tokens, usage.completion_tokens
        run.total_tokens += int(getattr(usage, "total_tokens", 0) or 0)
        if prompt is not None:
            run.prompt_tokens = (run.prompt_tokens or 0) + prompt
        if completion is not None:
            run.completion_tokens = (run.completion_tokens or 0) + completion
        run.last_usage = UsageMetadata(
            prompt_token_count=prompt,
            candidates_token_count=completion,
            total_token_count=usage.total_tokens,
            model_calls=1,
        )


async def _after_model(agent: CodeActAgent, run: Run, response: LlmResponse | None) -> str:
    """The after-model callbacks over ``response``; the reply's text (lone surrogates escaped)."""
    for plugin in run.plugins:
        result = await call_callback(plugin.after_model, run.cb_ctx, response)
        if result is not None:
            response = as_response(result)
    for cb in as_callbacks(agent.after_model):
        result = await call_callback(cb, run.cb_ctx, response)
        if result is not None:
            response = as_response(result)
    text = response.text if response is not None else ""
    # A reply with lone surrogates cannot be stored as it is: it is kept escaped (\udcxx).
    return text if text.isascii() else escape_surrogates(text)


def usage_breach(run: Run) -> str | None:
    """Why the run's usage limits forbid another model call, or None."""
    rc = run.ctx.run_config
    if rc.max_model_calls is not None and run.model_calls >= rc.max_model_calls:
        return f"the run reached max_model_calls={rc.max_model_calls} without a final result"
    if rc.max_total_tokens is not None and run.total_tokens >= rc.max_total_tokens:
        return (
            f"the run used {run.total_tokens} tokens, reaching max_total_tokens={rc.max_total_tokens}, "
            "without a final result"
        )
    return None


def as_response(value: Any) -> LlmResponse:
    """A callback's reply (an ``LlmResponse``, a ``Content`` or text) as an ``LlmResponse``."""
    if isinstance(value, LlmResponse):
        return value
    if isinstance(value, Content):
        return LlmResponse(content=value)
    return LlmResponse(content=Content.from_text(str(value), role="model"))
