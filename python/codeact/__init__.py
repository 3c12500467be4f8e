"""codeact: agents that act by writing Python (the CodeAct pattern), run in-process on Monty.

Each turn the model writes one script; tools are reached through
``call_tool("name", {"arg": value})``; the runtime advances the script to its next stop
(a tool call, completion, or an error) and can snapshot a paused script as bytes, so a run
can suspend for a human decision or a long-running tool and resume in another process.
"""

import typing as _typing

from ._monty import MONTY_VERSION
from .agent import (
    PENDING_STATE_KEY,
    AgentTool,
    BaseAgent,
    CallbackContext,
    CodeActAgent,
    InDoubtDecision,
    InvocationContext,
    ReadonlyContext,
    RetryBudget,
    RunConfig,
    ToolOutcome,
    explain_no_code,
    extract_code,
)
from .events import PendingCallInfo
from .exceptions import (
    AlreadyResumingError,
    CallsPendingError,
    CodeActError,
    CodeRuntimeError,
    ConfirmationHandlerError,
    DecisionMismatchError,
    DecisionRefusedError,
    DecisionValueError,
    EditNotSupportedError,
    MissingStateError,
    ModelError,
    NoPendingCallError,
    SessionNotFoundError,
    SessionStoreError,
    SnapshotError,
    StaleCheckpointError,
    SuspensionError,
    ToolArgumentError,
    ToolHostError,
    UnknownToolError,
    UnsupportedMountError,
    ValueConversionError,
)
from .guardrails import GuardrailResult
from .models import GenerateContentConfig, Llm, LlmRequest, LlmResponse, OpenAIChatModel, ScriptedModel
from .plugins import Plugin
from .runner import Runner, TurnInfo
from .runtime import (
    Call,
    CodeRuntime,
    Complete,
    CPythonRuntime,
    FrozenClock,
    Gather,
    MontyRuntime,
    Mount,
    NamespaceSession,
    PathAccess,
    PendingCall,
    Raised,
    ReplayDivergenceError,
    ResourceLimits,
    ResumeError,
    ResumeValue,
    RunStep,
    RuntimeCapabilities,
    SteppingClock,
    bind_call_args,
    default_tool_catalog,
)
from .services import (
    Artifact,
    BaseArtifactService,
    BaseMemoryService,
    FileArtifactService,
    InMemoryArtifactService,
    InMemoryMemoryService,
    MemoryEntry,
    SecretNotFoundError,
    SecretsProvider,
)
from .sessions import (
    BaseSessionService,
    CodeExecutionResult,
    Content,
    Event,
    EventActions,
    ExecutableCode,
    FunctionCall,
    FunctionResponse,
    InMemorySessionService,
    Part,
    Session,
    SqliteSessionService,
    ToolConfirmation,
    UsageMetadata,
)
from .skills import Skill, SkillIndex, SkillPolicy
from .tools import FunctionTool, LongRunningFunctionTool, State, Tool, ToolContext, tool
from .toolsets import FunctionToolset, Toolset
from .turns import Decision, DecisionRecord

__version__ = "0.2.0"

if _typing.TYPE_CHECKING:
    from .sessions import PostgresSessionService as PostgresSessionService


def __getattr__(name: str) -> _typing.Any:
    if name == "PostgresSessionService":  # imported on first use: it needs codeact[postgres]
        from . import sessions

        return sessions.PostgresSessionService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = (
    "MONTY_VERSION",
    "PENDING_STATE_KEY",
    "AgentTool",
    "AlreadyResumingError",
    "ConfirmationHandlerError",
    "Decision",
    "DecisionMismatchError",
    "DecisionRecord",
    "DecisionRefusedError",
    "DecisionValueError",
    "EditNotSupportedError",
    "InDoubtDecision",
    "StaleCheckpointError",
    "TurnInfo",
    "Artifact",
    "BaseAgent",
    "BaseArtifactService",
    "BaseMemoryService",
    "BaseSessionService",
    "CPythonRuntime",
    "Call",
    "CallbackContext",
    "CodeActAgent",
    "CallsPendingError",
    "CodeActError",
    "CodeExecutionResult",
    "CodeRuntime",
    "CodeRuntimeError",
    "UnsupportedMountError",
    "Complete",
    "Content",
    "Event",
    "EventActions",
    "ExecutableCode",
    "FileArtifactService",
    "FunctionCall",
    "FunctionResponse",
    "FunctionTool",
    "Gather",
    "FunctionToolset",
    "GenerateContentConfig",
    "GuardrailResult",
    "InMemoryArtifactService",
    "InMemoryMemoryService",
    "InMemorySessionService",
    "InvocationContext",
    "Llm",
    "LlmRequest",
    "LlmResponse",
    "LongRunningFunctionTool",
    "MemoryEntry",
    "MissingStateError",
    "ModelError",
    "NoPendingCallError",
    "FrozenClock",
    "MontyRuntime",
    "NamespaceSession",
    "Mount",
    "OpenAIChatModel",
    "Part",
    "PathAccess",
    "PendingCall",
    "SteppingClock",
    "Plugin",
    "Raised",
    "ReplayDivergenceError",
    "ReadonlyContext",
    "ResourceLimits",
    "ResumeError",
    "ResumeValue",
    "RetryBudget",
    "RunConfig",
    "RunStep",
    "PendingCallInfo",
    "Runner",
    "RuntimeCapabilities",
    "ScriptedModel",
    "SecretNotFoundError",
    "SecretsProvider",
    "Session",
    "SessionNotFoundError",
    "SessionStoreError",
    "Skill",
    "SkillIndex",
    "SkillPolicy",
    "SnapshotError",
    "SuspensionError",
    "SqliteSessionService",
    "State",
    "Tool",
    "ToolArgumentError",
    "ToolHostError",
    "UnknownToolError",
    "ToolConfirmation",
    "UsageMetadata",
    "ToolContext",
    "ToolOutcome",
    "Toolset",
    "ValueConversionError",
    "bind_call_args",
    "default_tool_catalog",
    "explain_no_code",
    "extract_code",
    "tool",
)
