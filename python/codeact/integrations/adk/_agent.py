"""``CodeActAdkAgent``: a codeact ``CodeActAgent`` as a Google ADK ``BaseAgent``, so it can be an
``LlmAgent`` sub-agent (reached by ``transfer_to_agent``), wrapped in ``AgentTool``, or the root
agent of an ADK ``Runner`` / ``adk web``.

Each ADK invocation runs the codeact agent once, in a codeact session with the same app, user
and session ids (held by ``session_service``, in memory by default, seeded with the ADK
session's state on first use). Every codeact event comes back as ADK events authored by this
agent (see ``to_adk_events``), and a call awaiting a human decision goes through ADK's own
confirmation flow (``adk_request_confirmation``), as an ``LlmAgent`` with the same
``FunctionTool`` would. A call in doubt (it started before its runner stopped and may have
run) is never offered as a confirmation: it is ADK's input request (``adk_request_input``)
whose ``response_schema`` names rerun, skip (with a value) or fail.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import pydantic
from google.adk.agents import BaseAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.run_config import StreamingMode
from google.adk.events import Event as AdkEvent
from google.adk.events import EventActions as AdkEventActions
from google.adk.tools.tool_confirmation import ToolConfirmation as AdkToolConfirmation
from google.genai import types
from pydantic import ConfigDict, Field, PrivateAttr

from ...agent import CodeActAgent, InDoubtDecision, RunConfig
from ...events import Content, Event, EventActions, FunctionResponse, Part, PendingCallInfo
from ...exceptions import AlreadyResumingError, CallsPendingError, DecisionRefusedError, NoPendingCallError
from ...runner import Runner
from ...sessions import BaseSessionService, InMemorySessionService
from ...sessions._service import TEMP_PREFIX
from ...sessions._types import Session

__all__ = (
    "IN_DOUBT_SCHEMA",
    "REQUEST_CONFIRMATION",
    "REQUEST_INPUT",
    "CodeActAdkAgent",
    "confirmation_call_id",
    "in_doubt_call_id",
    "to_adk_events",
)

REQUEST_CONFIRMATION = "adk_request_confirmation"
"""The function-call name of ADK's confirmation request (``google.adk`` keeps it private)."""

REQUEST_INPUT = "adk_request_input"
"""The function-call name of ADK's input request (``google.adk.events.RequestInput``; the name
is private to ``google.adk``)."""

IN_DOUBT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "InDoubtDecision",
    "description": (
        "The call started before its runner stopped and its outcome was never recorded: it may have run. "
        "rerun: run it again; skip: do not run it, the script gets `value` as its result; fail: do not run "
        "it, the script gets a RuntimeError (with `reason`)."
    ),
    "properties": {
        "action": {"type": "string", "enum": ["rerun", "skip", "fail"]},
        "value": {"description": "skip: the result the script gets instead (plain JSON data)."},
        "reason": {"type": "string", "description": "fail: the reason the script's RuntimeError gives."},
    },
    "required": ["action"],
}
"""The ``response_schema`` of the ``adk_request_input`` asking about a call in doubt: the answer
is ``{"action": "rerun"}``, ``{"action": "skip", "value": ...}`` or ``{"action": "fail",
"reason": ...}`` (also accepted wrapped as ``{"result": {...}}``, as ADK's CLI sends it)."""

_CONFIRM_PREFIX = "adk-codeact-confirm-"
_IN_DOUBT_PREFIX = "adk-codeact-in-doubt-"
_OWN_KEYS = "codeact"
_ADK_HAS_ROUTE = "route" in AdkEventActions.model_fields  # ADK 2's workflow edges
_REJECTED = {"error": "This tool call requires confirmation, please approve or reject."}  # ADK's FunctionTool text


def confirmation_call_id(call_key: str) -> str:
    """The id of the ``adk_request_confirmation`` function call asking about codeact call
    ``call_key``: derived from the key (``"adk-codeact-confirm-<call key>"``), so an answer
    maps back to the call after a restart without any stored table."""
    return _CONFIRM_PREFIX + call_key


def in_doubt_call_id(call_key: str) -> str:
    """The id (and ``interruptId``) of the ``adk_request_input`` function call asking about
    codeact call ``call_key`` in doubt: ``"adk-codeact-in-doubt-<call key>"``."""
    return _IN_DOUBT_PREFIX + call_key


def _in_doubt_key(request_id: str) -> str | None:
    return request_id[len(_IN_DOUBT_PREFIX) :] if request_id.startswith(_IN_DOUBT_PREFIX) else None


def _in_doubt_decision(response: Any) -> InDoubtDecision:
    """The decision an ``adk_request_input`` answer carries.

    Raises:
        ValueError: not ``{"action": "rerun" | "skip" | "fail", ...}`` (or that under ``"result"``).
    """
    answer = response
    if isinstance(answer, dict) and "action" not in answer and "result" in answer:
        answer = answer["result"]
    if isinstance(answer, str):
        answer = {"action": answer}
    if not isinstance(answer, dict) or answer.get("action") not in ("rerun", "skip", "fail"):
        raise ValueError(f"expected {{'action': 'rerun' | 'skip' | 'fail', 'value'?, 'reason'?}}, got {response!r}")
    reason = answer.get("reason", "")
    return InDoubtDecision(
        action=answer["action"], value=answer.get("value"), reason=reason if isinstance(reason, str) else str(reason)
    )


def _in_doubt_request(key: str, tool: str, args: dict[str, Any]) -> types.FunctionCall:
    """ADK's ``RequestInput`` as its function call (``create_request_input_event``'s shape)."""
    request_id = in_doubt_call_id(key)
    return types.FunctionCall(
        id=request_id,
        name=REQUEST_INPUT,
        args={
            "interruptId": request_id,
            "message": (
                f"Call {key} to {tool!r} started before its runner stopped and its outcome was never recorded: it "
                "may have run. Answer rerun (run it again), skip with a value (the script gets it as the result) "
                "or fail (the script gets an error)."
            ),
            "payload": {"callKey": key, "tool": tool, "args": dict(args)},
            "response_schema": IN_DOUBT_SCHEMA,
        },
    )


def _error_text(response: Any) -> str | None:
    """The text of an ADK error response (``{"error": "..."}``, the shape ADK's own tools and
    flows send for a failed call), else None: a long-running call answered so fails in the
    script (``RuntimeError``) instead of returning the dict as its result."""
    if isinstance(response, dict) and set(response) == {"error"} and isinstance(response["error"], str):
        return response["error"]
    return None


def _call_key(request_id: str) -> str | None:
    return request_id[len(_CONFIRM_PREFIX) :] if request_id.startswith(_CONFIRM_PREFIX) else None


def _confirm_hint(tool: str) -> str:
    # The hint ADK's FunctionTool gives when require_confirmation asks (function_tool.py).
    return (
        f"Please approve or reject the tool call {tool}() by responding with a FunctionResponse with an expected "
        "ToolConfirmation payload."
    )


def _user_text(ctx: InvocationContext) -> str:
    content = ctx.user_content
    if content is None or not content.parts:
        for event in reversed(ctx.session.events):
            if event.author == "user" and event.content and event.content.parts:
                content = event.content
                break
    if content is None:
        return ""
    return "".join(p.text or "" for p in content.parts or [] if not p.thought)


def _adk_part(part: Part) -> types.Part:
    if part.function_call is not None:
        fc = part.function_call
        return types.Part(function_call=types.FunctionCall(id=fc.id, name=fc.name, args=fc.args))
    if part.function_response is not None:
        fr = part.function_response
        response = fr.response if isinstance(fr.response, dict) else {"result": fr.response}
        return types.Part(function_response=types.FunctionResponse(id=fr.id, name=fr.name, response=response))
    if part.executable_code is not None:
        code = part.executable_code
        return types.Part(executable_code=types.ExecutableCode(code=code.code, language=types.Language.PYTHON))
    if part.code_execution_result is not None:
        result = part.code_execution_result
        return types.Part(
            code_execution_result=types.CodeExecutionResult(outcome=types.Outcome(result.outcome), output=result.output)
        )
    return types.Part(text=part.text or "", thought=part.thought or None)


def _usage(event: Event) -> types.GenerateContentResponseUsageMetadata | None:
    u = event.usage_metadata
    if u is None or (u.prompt_token_count is None and u.candidates_token_count is None and u.total_token_count is None):
        return None
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=u.prompt_token_count,
        candidates_token_count=u.candidates_token_count,
        total_token_count=u.total_token_count,
    )


def to_adk_events(
    event: Event,
    *,
    author: str,
    invocation_id: str,
    branch: str | None = None,
    pending: Mapping[str, PendingCallInfo] | None = None,
) -> list[AdkEvent]:
    """``event`` (a codeact event) as the ADK events an ADK app reads.

    - content: each part as the ``google.genai.types.Part`` of the same kind (``text``,
      ``executable_code``, ``code_execution_result``, ``function_call``, ``function_response``;
      a non-dict function response as ``{"result": value}``), the role kept;
    - ``actions``: ``state_delta`` without codeact's ``codeact*`` bookkeeping keys,
      ``artifact_delta``, ``escalate``, ``skip_summarization`` (a transfer inside the codeact
      agent tree stays inside);
    - ``long_running_tool_ids``, ``error_code`` / ``error_message``, ``interrupted``,
      ``turn_complete``;
    - ``usage_metadata`` as ``GenerateContentResponseUsageMetadata`` (prompt, candidates and
      total tokens); codeact's ``model_calls`` and ``kind`` go to ``custom_metadata``
      (``codeact_model_calls``, ``codeact_kind``);
    - ``partial`` is set only on codeact's live previews (``Event.partial``: the reply's text
      as it streams, printed output), which ADK's runner never stores; a complete
      ``model_reply`` is an ordinary event (``CodeActAdkAgent`` puts its text and
      ``executable_code`` in front of the next event it yields, so that it is stored and
      only the answer is ``is_final_response()``).

    A confirmation request (``actions.requested_tool_confirmations``) becomes the three events
    an ADK ``LlmAgent`` emits for a ``FunctionTool`` with ``require_confirmation`` (ADK 1.x-2.x
    ``functions.py`` / ``_functions.py``): the original ``function_call`` (id = the codeact
    call key), the ``adk_request_confirmation`` function call (args ``originalFunctionCall``
    and ``toolConfirmation``, its id from ``confirmation_call_id`` in
    ``long_running_tool_ids``), and the tool's placeholder ``function_response`` carrying
    ``requested_tool_confirmations`` and ``skip_summarization``. An event with nothing left to
    show (only bookkeeping) gives no ADK event.

    The announcement of calls in doubt (they may have run; ``codeact_kind`` ``"in_doubt"`` with
    ``call_keys``) is never a confirmation: it becomes one event holding ADK's
    ``adk_request_input`` function call per call (id and ``interruptId`` from
    ``in_doubt_call_id``, in ``long_running_tool_ids``; ``message``, ``payload``
    ``{"callKey", "tool", "args"}`` with the arguments from ``pending`` (the verified turn's
    calls by key), and ``response_schema`` ``IN_DOUBT_SCHEMA``: rerun, skip with a value, or
    fail). The notice a recovered call in doubt gets as it is met (``codeact_kind``
    ``"in_doubt"`` with one ``call_key``) is an ordinary event (``CodeActAdkAgent`` puts it in
    front of the next event, as a model reply).
    """
    metadata = dict(event.custom_metadata or {})
    if event.usage_metadata is not None:
        metadata["codeact_model_calls"] = event.usage_metadata.model_calls
    common: dict[str, Any] = {"invocation_id": invocation_id, "author": author, "branch": branch}
    delta = {k: v for k, v in event.actions.state_delta.items() if not k.startswith(_OWN_KEYS)}
    keys = metadata.get("call_keys")
    if event.kind == "in_doubt" and isinstance(keys, list) and not event.error_code:
        named = metadata.get("tools")
        tools: list[Any] = named if isinstance(named, list) else []
        inputs = []
        for i, key in enumerate(map(str, keys)):
            info = (pending or {}).get(key)
            tool = info.tool if info is not None else str(tools[i]) if i < len(tools) else ""
            inputs.append(_in_doubt_request(key, tool, dict(info.args) if info is not None else {}))
        return [
            AdkEvent(
                **common,
                content=types.Content(role="model", parts=[types.Part(function_call=c) for c in inputs]),
                actions=AdkEventActions(state_delta=delta),
                long_running_tool_ids={c.id for c in inputs if c.id},
                usage_metadata=_usage(event),
                custom_metadata=metadata or None,
            )
        ]
    asked = event.actions.requested_tool_confirmations
    if asked and not event.error_code:
        calls = [
            types.FunctionCall(id=key, name=request.tool_name, args=dict(request.args))
            for key, request in asked.items()
        ]
        confirmations = {
            key: AdkToolConfirmation(hint=request.hint or _confirm_hint(request.tool_name))
            for key, request in asked.items()
        }
        requests = [
            types.FunctionCall(
                id=confirmation_call_id(call.id or ""),
                name=REQUEST_CONFIRMATION,
                args={
                    "originalFunctionCall": call.model_dump(exclude_none=True, by_alias=True),
                    "toolConfirmation": confirmations[call.id or ""].model_dump(by_alias=True, exclude_none=True),
                },
            )
            for call in calls
        ]
        return [
            AdkEvent(**common, content=types.Content(role="model", parts=[types.Part(function_call=c) for c in calls])),
            AdkEvent(
                **common,
                content=types.Content(role="model", parts=[types.Part(function_call=r) for r in requests]),
                long_running_tool_ids={r.id for r in requests if r.id},
                usage_metadata=_usage(event),
                custom_metadata=metadata or None,
            ),
            AdkEvent(
                **common,
                content=types.Content(
                    role="user",
                    parts=[
                        types.Part(function_response=types.FunctionResponse(id=c.id, name=c.name, response=_REJECTED))
                        for c in calls
                    ],
                ),
                actions=AdkEventActions(
                    state_delta=delta, skip_summarization=True, requested_tool_confirmations=confirmations
                ),
            ),
        ]
    content = None
    if event.content is not None and event.content.parts:
        content = types.Content(role=event.content.role, parts=[_adk_part(p) for p in event.content.parts])
    a = event.actions
    routed = a.route is not None
    if not (content or delta or a.artifact_delta or a.escalate or a.skip_summarization or event.error_code or routed):
        return []
    extra: dict[str, Any] = {"route": a.route} if routed and _ADK_HAS_ROUTE else {}
    if routed and not _ADK_HAS_ROUTE:  # an ADK without workflow routes: keep it readable
        metadata["codeact_route"] = a.route
    # Only a live preview (RunConfig(streaming=True), ADK's StreamingMode.SSE) is partial: ADK's
    # runner does not store it and it is never is_final_response().
    partial = True if event.partial else None
    return [
        AdkEvent(
            **common,
            partial=partial,
            content=content,
            actions=AdkEventActions(
                state_delta=delta,
                artifact_delta=dict(a.artifact_delta),
                escalate=a.escalate or None,
                skip_summarization=a.skip_summarization or None,
                **extra,
            ),
            long_running_tool_ids=set(event.long_running_tool_ids) or None,
            error_code=event.error_code,
            error_message=event.error_message,
            interrupted=event.interrupted or None,
            turn_complete=event.turn_complete or None,
            usage_metadata=_usage(event),
            custom_metadata=metadata or None,
        )
    ]


def _reason(confirmation: AdkToolConfirmation) -> str:
    payload = confirmation.payload
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict) and isinstance(payload.get("reason"), str):
        return payload["reason"]
    return ""


class _Projection:
    """codeact events as the ADK events of one invocation, so that ADK's
    ``is_final_response()`` holds for the answer (and the events that end or pause the run)
    and for nothing before it: ADK's quickstart loop (``if event.is_final_response(): ...
    break``) then reads the answer, not a progress event.

    - a live preview (``partial``: the reply as it streams, printed output) is yielded as it
      comes (ADK's runner does not store it);
    - a complete ``model_reply`` (its text and ``executable_code``) and an in-doubt notice
      are held and put in front of the content of the next event yielded (the tool's
      ``function_call``, the ``script_result`` with its trailing ``code_execution_result``,
      the confirmation request, ...), which ADK stores and never counts as final on its own
      account of them; a reply still held at the end is yielded alone;
    - an event that only changes state (no content: a tool's state write) is not yielded on
      its own, which ADK would count as final: its ``state_delta`` is carried by the next
      event (the tool's ``function_response``, the ``script_result``, the answer).
    """

    def __init__(self, author: str, invocation_id: str, branch: str | None) -> None:
        self._common: dict[str, Any] = {"author": author, "invocation_id": invocation_id, "branch": branch}
        self._delta: dict[str, Any] = {}
        self._held: list[AdkEvent] = []

    def feed(self, event: Event, pending: Mapping[str, PendingCallInfo] | None = None) -> list[AdkEvent]:
        out: list[AdkEvent] = []
        held_kind = event.kind == "model_reply" or (
            event.kind == "in_doubt" and "call_keys" not in (event.custom_metadata or {})
        )
        for adk_event in to_adk_events(event, **self._common, pending=pending):
            if adk_event.partial:
                out.append(adk_event)
                continue
            if held_kind and not adk_event.error_code:
                self._held.append(adk_event)
                continue
            quiet = (
                adk_event.content is None
                and not adk_event.error_code
                and not adk_event.actions.escalate
                and not adk_event.actions.artifact_delta
                and not adk_event.actions.skip_summarization
                and getattr(adk_event.actions, "route", None) is None
            )
            if quiet:
                self._delta.update(adk_event.actions.state_delta)
                continue
            if self._held:
                self._carry(adk_event)
            if self._delta:
                adk_event.actions.state_delta = {**self._delta, **adk_event.actions.state_delta}
                self._delta = {}
            out.append(adk_event)
        return out

    def _carry(self, event: AdkEvent) -> None:
        """Puts the held events' parts, state and usage in front of ``event``'s."""
        held, self._held = self._held, []
        parts: list[types.Part] = []
        meta: dict[str, Any] = {}
        kinds: list[str] = []
        for h in held:
            parts.extend(h.content.parts or [] if h.content is not None else [])
            self._delta.update(h.actions.state_delta)
            h_meta = dict(h.custom_metadata or {})
            kind = h_meta.pop("codeact_kind", None)
            if kind:
                kinds.append(kind)
            meta.update(h_meta)
            if event.usage_metadata is None and h.usage_metadata is not None:
                event.usage_metadata = h.usage_metadata
        if event.content is None:
            event.content = types.Content(role="model", parts=parts)
        else:
            event.content.parts = [*parts, *(event.content.parts or [])]
        merged = {**meta, **(event.custom_metadata or {})}
        if kinds:
            merged["codeact_carries"] = kinds
        event.custom_metadata = merged or None

    def flush(self) -> list[AdkEvent]:
        """What is still held: a reply or a state change after the last yielded event."""
        out, self._held = self._held, []
        if self._delta:
            delta, self._delta = self._delta, {}
            if out:
                out[-1].actions.state_delta = {**delta, **out[-1].actions.state_delta}
            else:
                out.append(AdkEvent(**self._common, actions=AdkEventActions(state_delta=delta)))
        return out


def _scoped(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """ADK session state split into what codeact stores (session, ``app:``, ``user:`` keys;
    codeact's own keys left out) and the invocation's ``temp:`` keys."""
    kept = {k: v for k, v in state.items() if not k.startswith((_OWN_KEYS, TEMP_PREFIX))}
    temp = {k: v for k, v in state.items() if k.startswith(TEMP_PREFIX)}
    return kept, temp


class _TempOverlay:
    """The codeact store as the codeact ``Runner`` of one invocation sees it: every loaded
    session also shows the ADK invocation's ``temp:`` state (ADK's invocation scope; never
    stored). Everything else goes to the store."""

    def __init__(self, store: BaseSessionService, temp: dict[str, Any]) -> None:
        self._store = store
        self._temp = temp

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def get_session(self, **kwargs: Any) -> Session | None:
        session = await self._store.get_session(**kwargs)
        if session is not None:
            for key, value in self._temp.items():
                session.state.setdefault(key, value)
        return session


class CodeActAdkAgent(BaseAgent):
    """Runs a ``CodeActAgent`` inside Google ADK.

    Args:
        name / description: as for every ADK agent (``CodeActAdkAgent.wrap(agent)`` copies the
            codeact agent's).
        agent: the codeact agent.
        session_service: codeact's store for the agent's own sessions (default: in memory).
            A paused script lives there: use a persistent store (``SqliteSessionService``) for
            approvals that must survive a restart of the app.
        run_config: codeact ``RunConfig`` for every run (for example
            ``RunConfig(emit_tool_events=True)`` for a ``function_call`` / ``function_response``
            event pair per tool call, or ``on_pending_message="deny"``).

    Each invocation runs the codeact agent on the invocation's user message and yields its
    events through ``to_adk_events``. Human in the loop follows ADK's confirmation flow: a
    call awaiting confirmation surfaces as an ``adk_request_confirmation`` function call (in
    ``long_running_tool_ids``); the app answers as it answers an ``LlmAgent``, with a user
    message holding a ``FunctionResponse`` named ``adk_request_confirmation`` with that id and a
    ``ToolConfirmation`` (``{"confirmed": true}``; a denial's ``payload``, a string or
    ``{"reason": ...}``, is the reason the script's ``PermissionError`` gives). The next
    invocation approves or denies the codeact call and the script resumes. A long-running
    tool's ``function_call`` is answered with a ``FunctionResponse`` of the same id.

    An answer that matches no pending call (an unknown or stale id, a finished run), an
    unreadable ``ToolConfirmation``, a new text message while calls are pending (unless
    ``run_config`` says otherwise) or a decision another runner is already resuming ends the
    invocation with one ADK event carrying ``error_code`` (``codeact.no_pending_call``,
    ``codeact.bad_confirmation``, ``codeact.calls_pending``, ``codeact.already_resuming``) and
    ``error_message``; nothing runs.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agent: Any = Field(description="the codeact CodeActAgent")
    session_service: Any = None
    run_config: Any = None
    # ADK 2.x runs a sub-agent as a workflow node; a node that is not rerun on resume is
    # fast-forwarded with the confirmation answer as its output, and the paused codeact script
    # never hears it (google-adk 2.15, workflow/utils/_replay_interceptor.py). The paused turn
    # lives in codeact's store: running the agent again is how it resumes.
    rerun_on_resume: bool = True
    _service: BaseSessionService | None = PrivateAttr(default=None)

    @classmethod
    def wrap(cls, agent: CodeActAgent, **kwargs: Any) -> CodeActAdkAgent:
        """An ADK agent named and described like ``agent``."""
        return cls(name=agent.name, description=agent.description or "", agent=agent, **kwargs)

    def model_post_init(self, context: Any, /) -> None:
        """Pydantic's post-init hook: pick the session service (``session_service``, or a new
        ``InMemorySessionService``) once, so the copies ADK makes of the agent share it.
        """
        super().model_post_init(context)
        # Made here, not on first use: ADK may run a copy of the agent, and copies share it.
        self._service = self.session_service if self.session_service is not None else InMemorySessionService()

    def _store(self) -> BaseSessionService:
        assert self._service is not None
        return self._service

    def _error(self, ctx: InvocationContext, code: str, message: str) -> AdkEvent:
        return AdkEvent(
            invocation_id=ctx.invocation_id,
            author=self.name,
            branch=ctx.branch,
            error_code=code,
            error_message=message,
        )

    def _answers(self, ctx: InvocationContext) -> list[types.FunctionResponse]:
        """The function responses of the user's latest message meant for this agent. Read from
        the session, not ``ctx.user_content``: when ADK resumes a sub-agent on an answer, the
        context keeps the invocation's first message. A response to a call another agent made
        is left to that agent."""
        events = ctx.session.events
        latest = next((e for e in reversed(events) if e.author == "user"), None)
        responses = latest.get_function_responses() if latest is not None else []
        if not responses:
            return []
        owners = {fc.id: e.author for e in events for fc in e.get_function_calls() if fc.id}
        return [r for r in responses if owners.get(r.id or "") in (None, self.name)]

    def _request(self, ctx: InvocationContext) -> tuple[Content | str | None, RunConfig] | AdkEvent:
        """What this invocation sends codeact: the message and the run config with the
        decisions its ``adk_request_confirmation`` and ``adk_request_input`` answers carry,
        or the error event."""
        base = self.run_config if self.run_config is not None else RunConfig()
        # ADK's StreamingMode.SSE is codeact's streaming; under NONE (and BIDI) no partial event.
        sse = getattr(ctx.run_config, "streaming_mode", None) == StreamingMode.SSE
        if base.streaming != sse:
            base = base.model_copy(update={"streaming": sse})
        responses = self._answers(ctx)
        if not responses:
            return _user_text(ctx), base
        decisions: dict[str, bool] = {}
        reasons: dict[str, str] = {}
        in_doubt: dict[str, InDoubtDecision] = {}
        completions: list[Part] = []
        for response in responses:
            if response.name == REQUEST_INPUT:
                key = _in_doubt_key(response.id or "")
                if key is None:
                    return self._error(
                        ctx,
                        "codeact.no_pending_call",
                        f"the {REQUEST_INPUT} response {response.id!r} answers no input request of agent "
                        f"{self.name!r} (its ids start with {_IN_DOUBT_PREFIX!r}); nothing ran",
                    )
                try:
                    in_doubt[key] = _in_doubt_decision(response.response)
                except (pydantic.ValidationError, ValueError) as exc:
                    return self._error(
                        ctx,
                        "codeact.bad_decision",
                        f"the {REQUEST_INPUT} response {response.id!r} holds no in-doubt decision ({exc}); nothing ran",
                    )
                continue
            if response.name != REQUEST_CONFIRMATION:
                failed = _error_text(response.response)
                completions.append(
                    Part(
                        function_response=FunctionResponse(
                            name=response.name or "",
                            response=None if failed is not None else response.response,
                            id=response.id,
                            error=failed,
                        )
                    )
                )
                continue
            key = _call_key(response.id or "")
            if key is None:
                return self._error(
                    ctx,
                    "codeact.no_pending_call",
                    f"the {REQUEST_CONFIRMATION} response {response.id!r} answers no confirmation request of agent "
                    f"{self.name!r} (its ids start with {_CONFIRM_PREFIX!r}); nothing ran",
                )
            try:
                confirmation = AdkToolConfirmation.from_response_dict(response.response or {})
            except (pydantic.ValidationError, ValueError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
                return self._error(
                    ctx,
                    "codeact.bad_confirmation",
                    f"the {REQUEST_CONFIRMATION} response {response.id!r} holds no ToolConfirmation "
                    f"({type(exc).__name__}: {exc}); nothing ran",
                )
            decisions[key] = confirmation.confirmed
            if not confirmation.confirmed:
                reasons[key] = _reason(confirmation)
        rc = base.model_copy(
            update={
                "tool_confirmation_decisions": decisions,
                "tool_denial_reasons": reasons,
                "in_doubt_decisions": in_doubt,
            }
        )
        message = Content(role="user", parts=completions) if completions else None
        return message, rc

    async def _sync_state(self, ctx: InvocationContext) -> dict[str, Any]:
        """Brings the codeact session up to the ADK session's state before a run (ADK → codeact;
        codeact → ADK goes through the events' ``state_delta``): creates it with that state on
        first use, else stores the keys whose values differ as one event (no content; it does
        not enter the model's history) whose ``state_delta`` codeact files by scope as ADK does
        (``app:`` per app, ``user:`` per user, the rest per session). Returns the invocation's
        ``temp:`` keys, shown to this run only."""
        session = ctx.session
        store = self._store()
        kept, temp = _scoped(dict(session.state))
        ids: dict[str, Any] = {"app_name": session.app_name, "user_id": session.user_id, "session_id": session.id}
        existing = await store.get_session(**ids)
        if existing is None:
            await store.create_session(**ids, state=kept)
            return temp
        missing = object()
        delta = {k: v for k, v in kept.items() if existing.state.get(k, missing) != v}
        if delta:
            await store.append_event(
                existing,
                Event(invocation_id=ctx.invocation_id, author="user", actions=EventActions(state_delta=delta)),
            )
        return temp

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[AdkEvent, None]:
        session = ctx.session
        store = self._store()
        request = self._request(ctx)
        if isinstance(request, AdkEvent):
            yield request
            return
        temp = await self._sync_state(ctx)
        message, run_config = request
        runner = Runner(app_name=session.app_name, agent=self.agent, session_service=_TempOverlay(store, temp))  # type: ignore[arg-type]
        events = runner.run_async(
            user_id=session.user_id, session_id=session.id, new_message=message, run_config=run_config
        )
        projection = _Projection(self.name, ctx.invocation_id, ctx.branch)
        try:
            async for event in events:
                pending = None
                if event.kind == "in_doubt" and "call_keys" in (event.custom_metadata or {}):
                    # the calls' arguments, read from the verified turn (the announcement names the calls)
                    calls = await runner.pending(user_id=session.user_id, session_id=session.id)
                    pending = {p.call_key: p for p in calls}
                for adk_event in projection.feed(event, pending):
                    yield adk_event
            for adk_event in projection.flush():
                yield adk_event
        except DecisionRefusedError as exc:  # a NoPendingCallError: first
            yield self._error(ctx, "codeact.decision_refused", str(exc))
        except NoPendingCallError as exc:
            yield self._error(ctx, "codeact.no_pending_call", str(exc))
        except CallsPendingError as exc:
            yield self._error(ctx, "codeact.calls_pending", str(exc))
        except AlreadyResumingError as exc:
            yield self._error(ctx, "codeact.already_resuming", str(exc))
