"""The agent's option types and what building an agent checks: the defaults, the shapes of
the callbacks its fields take, and the checks and compiled forms (tools, tool names to
confirm, sub-agent names, schemas, skills) of ``CodeActAgent``'s ``model_validator``. Split
from ``CodeActAgent`` (``_agent``), whose fields these are."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema  # type: ignore[import-untyped,unused-ignore]
from pydantic import TypeAdapter

from ..events import Content
from ..models import GenerateContentConfig, LlmRequest, LlmResponse
from ..plugins import MaybeAwaitable
from ..skills import Skill, SkillIndex
from ..tools import FunctionTool, Tool, ToolContext
from ._context import CallbackContext
from ._dispatch import ToolOutcome
from ._run import gated_tools, unknown_tool_error

if TYPE_CHECKING:
    from ._agent import CodeActAgent

__all__ = (
    "DEFAULT_MAX_ERROR_CHARS",
    "DEFAULT_MAX_ITERATIONS",
    "AfterAgentCallback",
    "AfterModelCallback",
    "AfterToolCallback",
    "AfterToolFullCallback",
    "BeforeAgentCallback",
    "BeforeModelCallback",
    "BeforeToolCallback",
    "InstructionProvider",
    "OnToolErrorCallback",
    "check_options",
    "check_tool_names",
    "known_tools",
)

DEFAULT_MAX_ITERATIONS = 12
DEFAULT_MAX_ERROR_CHARS = 4000


InstructionProvider = Callable[[CallbackContext], "str | Any"]

# The shapes of the agent's callbacks; each may be sync or async (``MaybeAwaitable``). A field
# takes one callback, a list of them or None.
BeforeAgentCallback = Callable[[CallbackContext], MaybeAwaitable[Content | str | None]]
"""``before_agent(ctx)``: a value answers without calling the model."""
AfterAgentCallback = Callable[[CallbackContext], MaybeAwaitable[Content | str | None]]
"""``after_agent(ctx)``: a value is yielded as one more event after a final result."""
BeforeModelCallback = Callable[[CallbackContext, LlmRequest], MaybeAwaitable[LlmResponse | Content | str | None]]
"""``before_model(ctx, request)``: the first reply skips the model."""
AfterModelCallback = Callable[[CallbackContext, LlmResponse], MaybeAwaitable[LlmResponse | Content | str | None]]
"""``after_model(ctx, response)``: a reply replaces the model's (a pipeline)."""
BeforeToolCallback = Callable[[Tool, dict[str, Any], ToolContext], MaybeAwaitable[Any]]
"""``before_tool(tool, args, tool_context)``: the first non-None value replaces the call."""
AfterToolCallback = Callable[[Tool, dict[str, Any], ToolContext, Any], MaybeAwaitable[Any]]
"""``after_tool(tool, args, tool_context, value)``: the first non-None value replaces the result."""
AfterToolFullCallback = Callable[[Tool, dict[str, Any], ToolContext, Any, ToolOutcome], MaybeAwaitable[Any]]
"""``after_tool_full(tool, args, tool_context, value, outcome)``: sees the ``ToolOutcome``."""
OnToolErrorCallback = Callable[[Tool, dict[str, Any], ToolContext, str], MaybeAwaitable[Any]]
"""``on_tool_error(tool, args, tool_context, error)``: the first non-None value is the fallback."""


def check_options(agent: CodeActAgent) -> CodeActAgent:
    """What building an agent checks and compiles (``CodeActAgent``'s ``model_validator``): the
    sampling shorthands merged, the static tools wrapped, the tool names to confirm, unique
    sub-agent names, the input and output schemas, the skill index.

    Raises:
        ValueError: no model or runtime, or two sub-agents share a name (pydantic reports it
            as a ``ValidationError``).
        UnknownToolError: a ``require_tool_confirmation`` name matches no tool.
        jsonschema.SchemaError: a schema dict is not a valid JSON schema.
    """
    if agent.model is None:
        raise ValueError("CodeActAgent requires a model")
    if agent.runtime is None:
        raise ValueError("CodeActAgent requires a code runtime")
    shorthands = {k: getattr(agent, k) for k in ("temperature", "top_p", "top_k", "max_output_tokens")}
    if any(v is not None for v in shorthands.values()):
        base = agent.generate_content_config or GenerateContentConfig()
        agent.generate_content_config = base.model_copy(update={k: v for k, v in shorthands.items() if v is not None})
    agent._tools = [t if isinstance(t, Tool) else FunctionTool(t) for t in agent.tools]
    check_tool_names(agent)
    seen: set[str] = set()
    for sub in agent.sub_agents:
        if sub.name in seen:
            raise ValueError(f"duplicate sub-agent name: {sub.name}")
        seen.add(sub.name)
    if agent.output_schema is not None:
        if isinstance(agent.output_schema, dict):
            cls = jsonschema.validators.validator_for(agent.output_schema)
            cls.check_schema(agent.output_schema)
            agent._schema = agent.output_schema
            agent._schema_validator = cls(agent.output_schema)
        else:
            agent._schema_adapter = TypeAdapter(agent.output_schema)
            agent._schema = agent._schema_adapter.json_schema()
    if agent.input_schema is not None:
        if isinstance(agent.input_schema, dict):
            cls = jsonschema.validators.validator_for(agent.input_schema)
            cls.check_schema(agent.input_schema)
            agent._input_validator = cls(agent.input_schema)
        else:
            agent._input_adapter = TypeAdapter(agent.input_schema)
    if isinstance(agent.skills, SkillIndex):
        agent._skill_index = agent.skills
    elif isinstance(agent.skills, (str, Path)):
        agent._skill_index = SkillIndex.from_dir(agent.skills)
    elif agent.skills is not None:
        agent._skill_index = SkillIndex(s if isinstance(s, Skill) else Skill.model_validate(s) for s in agent.skills)
    return agent


def known_tools(agent: CodeActAgent, *, partial: bool = False) -> list[Tool] | None:
    """The tools of ``agent`` known without a run: its static tools, then those of each toolset
    whose ``static_tools()`` lists them. None when a toolset lists its tools only at run start,
    unless ``partial`` (then the tools that are known)."""
    known = list(agent._tools)
    for toolset in agent.toolsets:
        listed = toolset.static_tools() if hasattr(toolset, "static_tools") else None
        if listed is None:
            if not partial:
                return None
            continue
        known.extend(listed)
    return known


def check_tool_names(agent: CodeActAgent) -> None:
    """``require_tool_confirmation`` names only tools the agent has, as far as they are known
    without a run: the static tools and the toolsets whose ``static_tools`` are known. With a
    toolset whose tools are listed at run start, the names none of the known ones match are
    checked then (``CodeActAgent._loop``).

    Raises:
        UnknownToolError: a name matches no tool, and no toolset is listed at run start.
    """
    if not agent.require_tool_confirmation:
        return
    known = known_tools(agent)
    if known is None:
        return  # some names may belong to a toolset's tools: checked at run start
    _, unknown = gated_tools(agent.require_tool_confirmation, known)
    if unknown:
        raise unknown_tool_error("require_tool_confirmation", agent.name, unknown, known)
