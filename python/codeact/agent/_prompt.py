"""System prompt assembly and ``{key}`` state injection into instructions."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import MissingStateError

__all__ = ("CODEACT_SYSTEM_PROMPT", "MissingStateError", "assemble_system_prompt", "inject_state", "transfer_section")

CODEACT_SYSTEM_PROMPT = """\
You act by writing code. Each turn, reply with exactly ONE fenced ```python block; it runs as one \
script. Tools are functions you call from the script: compose them (use one tool's result as \
another's input, loop over results) in a single script instead of one call per turn.

End the script with an expression that is a dict tagged with "type"; it is the script's result:
- {"type": "observation", "value": ...}: something you want to look at; you get another turn.
- {"type": "error", "message": "..."}: a problem worth recording; you get another turn.
- {"type": "final_result", "value": ...}: the answer; this ends the task.

If the script raises, you see the error and the printed output, and can fix it in the next \
turn. Use final_result only when the task is really done."""
"""The base CodeAct contract, always part of the system prompt."""


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_:.]*)(\?)?\}")
_STATE_NAME = re.compile(r"^(?:(?:app|user|temp):)?[A-Za-z_][A-Za-z0-9_]*$")


def inject_state(template: str, state: Mapping[str, Any], artifacts: Mapping[str, str] | None = None) -> str:
    """Replaces ``{key}`` with the session state value ``key`` (strings as they are, other
    values as compact JSON) and ``{key?}`` with the value or nothing. Keys may carry the
    ``app:``, ``user:`` or ``temp:`` prefix; ``{artifact.name}`` inserts an artifact's text.
    Other brace text is left alone (the Google ADK instruction template rules).

    Raises:
        MissingStateError: a required ``{key}`` (no ``?``) is not in state.
    """

    def replace(match: re.Match[str]) -> str:
        name, optional = match.group(1), match.group(2) == "?"
        if name.startswith("artifact."):
            art = name[len("artifact.") :]
            if artifacts is not None and art in artifacts:
                return artifacts[art]
            if optional:
                return ""
            raise MissingStateError(f"Artifact '{art}' not found for the instruction template")
        if not _STATE_NAME.match(name):
            return match.group(0)
        if name in state:
            value = state[name]
            return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        if optional:
            return ""
        raise MissingStateError(f"State variable '{name}' not found (write {{{name}?}} to make it optional)")

    return _PLACEHOLDER.sub(replace, template)


def transfer_section(targets: Sequence[str]) -> str:
    """The prompt section offering ``transfer_to_agent``; empty when there is no target."""
    if not targets:
        return ""
    return (
        "You may also hand the task to another agent by ending the script with "
        '{"type": "transfer_to_agent", "agent_name": "..."}; this transfers control and ends your turn. '
        f"Valid agents: {', '.join(targets)}."
    )


def assemble_system_prompt(
    *,
    skill_block: str = "",
    global_instruction: str = "",
    instruction: str = "",
    runtime_prompt: str = "",
    tools_section: str = "",
    transfer: str = "",
    output_schema: Mapping[str, Any] | None = None,
) -> str:
    """Joins the non-empty sections with a blank line, in this order: skill, global
    instruction, instruction, the CodeAct contract, the runtime prompt, the tools, the
    transfer section; then the output schema sentence."""
    tools = f"Tools available to the script:\n\n{tools_section.strip()}" if tools_section.strip() else ""
    parts = [skill_block, global_instruction, instruction, CODEACT_SYSTEM_PROMPT, runtime_prompt, tools, transfer]
    prompt = "\n\n".join(p.strip() for p in parts if p and p.strip())
    if output_schema is not None:
        prompt += (
            "\n\nThe value of your final_result MUST be valid JSON conforming to this JSON schema:\n"
            + json.dumps(output_schema, ensure_ascii=False, separators=(",", ":"))
        )
    return prompt
