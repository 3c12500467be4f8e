//! The one file that names the Monty crates (`monty`, `monty-types`, `monty-fs`, and
//! `monty-type-checking` behind the `type-check` feature). The rest of the extension imports
//! what it uses of them from here, so a Monty bump (a renamed type, a moved function) is
//! mended in this folder and the list below says which of Monty's names the extension uses.

pub(crate) use monty::{
    DUMP_VERSION, Dump, FunctionCall, MIN_SUPPORTED_DUMP_VERSION, MontyRepl, MontyRun, NameLookup,
    OsCall, ReplFunctionCall, ReplNameLookup, ReplOsCall, ReplProgress, ReplResolveFutures,
    ReplStartError, ResolveFutures, RunProgress, SYNCHRONOUS_CALL_MESSAGE, Session, SessionRef,
    dump, source_within_nesting_bound,
};
pub(crate) use monty_fs::{
    LayerEntry, MountCallOutcome, MountError, MountMode, MountTable, OverlayState,
};
#[cfg(feature = "type-check")]
pub(crate) use monty_type_checking::{SourceFile, TypeCheckContext, TypeChecker};
pub(crate) use monty_types::{
    CallArgs, CodeLoc, CompileOptions, DateTimeSource, ExcType, ExtFunctionResult, MEMORY_PROBE,
    MontyDate, MontyDateTime, MontyException, MontyObject, MontyTimeZone, NameLookupResult,
    ObjectRef, OsFunctionCall, OsPolicy, PrintWriter, PrintWriterCallback, ProcessTime, RandomSeed,
    RandomStart, ResourceLimits, ResourceTracker, SandboxTimeZone, SleepMode, SourceRange,
    StackFrame, unstable,
};
#[cfg(feature = "type-check")]
pub(crate) use monty_types::{ModuleStub, TypeCheckingConfig, TypeCheckingFormat};
