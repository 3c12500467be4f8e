"""codeact: agents that act by writing Python (the CodeAct pattern), run in-process on Monty.

Each turn the model writes one script; tools are reached through
``call_tool("name", {"arg": value})``; the runtime advances the script to its next stop
(a tool call, completion, or an error) and can snapshot a paused script as bytes.
"""

from ._monty import MONTY_VERSION
from .exceptions import CodeActError, CodeRuntimeError, SnapshotError, ValueConversionError
from .runtime import (
    Call,
    CodeRuntime,
    Complete,
    CPythonRuntime,
    Mount,
    MontyRuntime,
    PathAccess,
    PendingCall,
    Raised,
    ResourceLimits,
    ResumeError,
    ResumeValue,
    RunStep,
    RuntimeCapabilities,
    bind_call_args,
    default_tool_catalog,
)
from .tools import Tool

__version__ = "0.1.0"

__all__ = (
    "MONTY_VERSION",
    "CPythonRuntime",
    "Call",
    "CodeActError",
    "CodeRuntime",
    "CodeRuntimeError",
    "Complete",
    "Mount",
    "MontyRuntime",
    "PathAccess",
    "PendingCall",
    "Raised",
    "ResourceLimits",
    "ResumeError",
    "ResumeValue",
    "RunStep",
    "RuntimeCapabilities",
    "SnapshotError",
    "Tool",
    "ValueConversionError",
    "bind_call_args",
    "default_tool_catalog",
)
