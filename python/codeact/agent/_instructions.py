"""What the model is sent when a run starts: the system prompt (the instructions with state
and artifacts injected, the skills that match the message, the runtime's prompt, the tools,
the transfer targets and the output schema) and the transcript seeded from the session's
history. Split from ``CodeActAgent`` (``_agent``), which calls these once per run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..events import INTERMEDIATE_KINDS, Content
from ..exceptions import MissingStateError
from ..services._artifacts import check_filename
from ..tools import Tool
from ._checkpoint import PENDING_STATE_KEY
from ._context import InvocationContext, ReadonlyContext
from ._dispatch import call_callback
from ._prompt import _PLACEHOLDER, assemble_system_prompt, inject_state, transfer_section
from ._run import Run

if TYPE_CHECKING:
    from ._agent import CodeActAgent

__all__ = ("instruction_text", "seed_transcript", "skill_block", "system_prompt", "template_artifacts")


async def instruction_text(source: str | Callable[..., Any], run: Run) -> str:
    """A provider's text (not template-expanded), or the string with ``{key}`` /
    ``{artifact.name}`` injected."""
    if callable(source):
        text = await call_callback(source, ReadonlyContext(run.ctx, run.pending))
        return text or ""
    if not source:
        return ""
    state = {**run.ctx.session.state, **run.pending.state_delta}
    return inject_state(source, state, await template_artifacts(source, run))


async def template_artifacts(template: str, run: Run) -> dict[str, str]:
    """The text of each artifact a template names (``{artifact.name}``)."""
    out: dict[str, str] = {}
    for m in _PLACEHOLDER.finditer(template):
        name, optional = m.group(1), m.group(2) == "?"
        if not name.startswith("artifact."):
            continue
        filename = name[len("artifact.") :]
        try:
            check_filename(filename)
        except ValueError as exc:
            raise MissingStateError(str(exc)) from None
        service = run.ctx.artifact_service
        if service is None:
            if optional:
                continue
            raise MissingStateError(
                f"the instruction uses {{artifact.{filename}}} but there is no artifact service "
                "(pass Runner(artifact_service=...))"
            )
        s = run.ctx.session
        art = await service.load_artifact(app_name=s.app_name, user_id=s.user_id, session_id=s.id, filename=filename)
        if art is not None:
            out[filename] = art.text or ""
    return out


def skill_block(agent: CodeActAgent, run: Run) -> str:
    """The skills that best match the user's message, each rendered within ``skill_budget``."""
    if agent._skill_index is None or run.ctx.user_content is None:
        return ""
    query = "\n".join(p.text for p in run.ctx.user_content.parts if p.text and not p.thought)
    matches = agent._skill_index.select(query, agent.skill_policy)
    return "\n\n".join(m.skill.render(agent.skill_budget) for m in matches)


async def system_prompt(agent: CodeActAgent, run: Run, tools: Sequence[Tool]) -> str:
    """The run's system prompt (``assemble_system_prompt``) for ``tools``."""
    global_instruction = await instruction_text(agent.global_instruction, run)
    instruction = await instruction_text(agent.instruction, run)
    return assemble_system_prompt(
        skill_block=skill_block(agent, run),
        global_instruction=global_instruction,
        instruction=instruction,
        runtime_prompt=agent.runtime.capabilities().prompt,
        tools_section=agent.runtime.render_tools(tools),
        transfer=transfer_section(agent.transfer_targets(run.ctx)),
        output_schema=agent._schema,
    )


def seed_transcript(agent: CodeActAgent, ctx: InvocationContext) -> list[Content]:
    """The transcript a new run starts with: the session's history (unless
    ``include_contents="none"``), then the user's message."""
    if agent.include_contents == "none":
        return [ctx.user_content] if ctx.user_content is not None else []
    history: list[Content] = []
    events = ctx.session.events
    # A run that ended at max_iterations keeps its transcript: the next run goes on with it.
    continued = {ev.invocation_id for ev in events if ev.author != "user" and ev.error_code == "codeact.max_iterations"}
    for ev in events:
        if ev.kind == "turn_discarded" and ev.content is not None:
            # what a discarded paused turn had done: the model is told before the new message
            history.append(Content.from_text(ev.content.text, role="user"))
            continue
        if ev.kind is not None:
            if ev.kind in INTERMEDIATE_KINDS and ev.invocation_id in continued and ev.content is not None:
                if ev.kind == "model_reply":
                    history.append(Content.from_text(ev.content.text, role="model"))
                elif ev.kind == "script_result":
                    history.extend(
                        Content.from_text(p.text, role="user") for p in ev.content.parts if p.text is not None
                    )
            continue
        if ev.content is None or ev.error_code or ev.actions.state_delta.get(PENDING_STATE_KEY):
            continue
        if ev.author == "user" and ev.invocation_id == ctx.invocation_id:
            continue
        text = ev.content.text
        if not text:
            continue
        history.append(Content.from_text(text, role="user" if ev.author == "user" else "model"))
    if ctx.user_content is not None and ctx.user_content.text:
        if not history or history[-1].role != "user" or history[-1].text != ctx.user_content.text:
            history.append(Content.from_text(ctx.user_content.text, role="user"))
    return history
