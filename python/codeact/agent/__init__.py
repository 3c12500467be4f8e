"""The CodeAct agent loop: prompt, extraction, dispatch, checkpoints and events."""

from ._agent import DEFAULT_MAX_ERROR_CHARS, DEFAULT_MAX_ITERATIONS, CodeActAgent
from ._agent_tool import AgentTool
from ._checkpoint import PENDING_STATE_KEY
from ._context import BaseAgent, CallbackContext, InDoubtDecision, InvocationContext, ReadonlyContext, RunConfig
from ._dispatch import RetryBudget, ToolOutcome
from ._extract import NO_CODE_FEEDBACK, explain_no_code, extract_code
from ._output import decode_script_output, render_final, truncate_middle
from ._overlay import OVERLAY_STATE_KEY, SessionFile
from ._prompt import CODEACT_SYSTEM_PROMPT, MissingStateError, inject_state

__all__ = (
    "SessionFile",
    "CODEACT_SYSTEM_PROMPT",
    "DEFAULT_MAX_ERROR_CHARS",
    "DEFAULT_MAX_ITERATIONS",
    "NO_CODE_FEEDBACK",
    "OVERLAY_STATE_KEY",
    "PENDING_STATE_KEY",
    "AgentTool",
    "BaseAgent",
    "CallbackContext",
    "CodeActAgent",
    "InvocationContext",
    "MissingStateError",
    "ReadonlyContext",
    "RetryBudget",
    "InDoubtDecision",
    "RunConfig",
    "ToolOutcome",
    "decode_script_output",
    "explain_no_code",
    "extract_code",
    "inject_state",
    "render_final",
    "truncate_middle",
)
