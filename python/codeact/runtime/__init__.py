"""The runtime seam and the runtimes behind it (SPEC §2–3)."""

from ..exceptions import CodeRuntimeError, SnapshotError, ValueConversionError
from ._oneshot import RunResult, ScriptError, ScriptSuspended, SuspendScript, ToolCallLimitError
from ._seam import (
    Call,
    CodeRuntime,
    Complete,
    Gather,
    OsLog,
    PendingCall,
    Raised,
    ReplayDivergenceError,
    ResumeError,
    ResumeValue,
    RunStep,
    RuntimeCapabilities,
    SessionRestoringRuntime,
    SuspendingRuntime,
    bind_call_args,
    default_tool_catalog,
)
from .cpython import CPythonRuntime
from .monty import FrozenClock, MontyRuntime, Mount, NamespaceSession, PathAccess, ResourceLimits, SteppingClock

__all__ = (
    "CPythonRuntime",
    "Call",
    "CodeRuntime",
    "CodeRuntimeError",
    "Complete",
    "FrozenClock",
    "Gather",
    "Mount",
    "MontyRuntime",
    "NamespaceSession",
    "PathAccess",
    "PendingCall",
    "OsLog",
    "Raised",
    "ReplayDivergenceError",
    "ResourceLimits",
    "ResumeError",
    "ResumeValue",
    "RunStep",
    "RunResult",
    "RuntimeCapabilities",
    "ScriptError",
    "ScriptSuspended",
    "SessionRestoringRuntime",
    "SuspendScript",
    "SnapshotError",
    "SteppingClock",
    "SuspendingRuntime",
    "ToolCallLimitError",
    "ValueConversionError",
    "bind_call_args",
    "default_tool_catalog",
)
