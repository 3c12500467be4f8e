//! The one file that talks to the `monty` crate: compile, step, drive, dump, load.
//!
//! Everything a script does besides calling a tool (OS calls, name lookups, futures,
//! refused call forms) is answered here, in place, so an advance only stops at a tool
//! call, at completion, or at an uncaught exception.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::str::FromStr;
use std::time::Duration;

use monty::{FunctionCall, MontyRun, RunProgress};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, LimitedTracker, MontyException, MontyObject,
    NameLookupResult, PrintWriter, ResourceLimits,
};

use crate::convert::check_plain;
use crate::errors::HostError;
use crate::os_policy::OsPolicy;
use crate::output::CappedOutput;
use crate::snapshot;

/// Highest recursion depth a script may ask for, in frames, even when "unlimited".
pub const RECURSION_CEILING: usize = 10_000;

/// Per-advance resource limits; they travel inside snapshots with the tracker.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_duration: Option<Duration>,
    pub max_memory: Option<usize>,
    pub max_recursion_depth: usize,
}

impl Limits {
    /// The recursion limit scripts really get: the configured one, at most the ceiling.
    pub fn recursion_depth(&self) -> usize {
        self.max_recursion_depth.min(RECURSION_CEILING)
    }

    fn tracker(&self) -> LimitedTracker {
        LimitedTracker::new(ResourceLimits {
            max_duration: self.max_duration,
            max_memory: self.max_memory,
            gc_interval: None,
            max_recursion_depth: Some(self.max_recursion_depth.min(RECURSION_CEILING)),
        })
    }
}

/// How scripts reach tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStyle {
    /// Only `call_tool("name", {...})`; every other call form is refused in the script.
    CallTool,
    /// Any call of an undefined name surfaces as a tool call with its arguments.
    Functions,
}

/// Everything an advance needs besides the script or snapshot.
pub struct EngineConfig {
    pub limits: Limits,
    pub os: OsPolicy,
    pub tool_style: ToolStyle,
    pub max_stdout: usize,
    pub snapshot_key: Option<Vec<u8>>,
}

/// A live continuation paused at a tool call.
pub struct Paused(FunctionCall<LimitedTracker>);

/// The tool call a paused script is waiting on, already unwrapped and checked.
pub struct ToolRequest {
    pub name: String,
    pub positional: Vec<MontyObject>,
    pub keyword: Vec<(String, MontyObject)>,
    pub call_id: u32,
}

/// Where an advance stopped.
pub enum Stop {
    Call(Box<Paused>, ToolRequest),
    Complete(MontyObject),
    Raised(String),
}

/// One advance: where it stopped and what the script printed on the way.
pub struct Advance {
    pub stop: Stop,
    pub stdout: String,
}

/// What the paused call returns to the script.
pub enum Outcome {
    Value(MontyObject),
    Error { exc_type: String, message: String },
}

type Progress = Result<RunProgress<LimitedTracker>, MontyException>;

fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, HostError>) -> Result<T, HostError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(HostError::Internal(format!(
                "Monty panicked during {what}: {detail}"
            )))
        }
    }
}

/// Longest script accepted, in bytes; longer ones are refused as a script mistake.
pub const MAX_SCRIPT_BYTES: usize = 4 * 1024 * 1024;

/// Host stack a start needs on top of the recursion allowance, per byte of source:
/// Monty's parser and compiler recurse along long flat chains (`1+1+...`, `a.b.c...`)
/// that its nesting guard does not count (measured: up to about 33 bytes per source byte).
pub const STACK_PER_SOURCE_BYTE: usize = 64;

/// Compiles and runs `script` up to its first stop.
pub fn start(cfg: &EngineConfig, script: String, script_name: &str) -> Result<Advance, HostError> {
    if script.len() > MAX_SCRIPT_BYTES {
        return Ok(Advance {
            stop: Stop::Raised(format!(
                "SyntaxError: the script is too long: {} bytes (at most {MAX_SCRIPT_BYTES}); \
                 split the work across turns",
                script.len()
            )),
            stdout: String::new(),
        });
    }
    guarded("start", || {
        let mut out = CappedOutput::new(cfg.max_stdout);
        let run = match MontyRun::new(script, script_name, Vec::new(), CompileOptions::default()) {
            Ok(run) => run,
            Err(exc) => {
                return Ok(Advance {
                    stop: Stop::Raised(exc.to_string()),
                    stdout: String::new(),
                });
            }
        };
        let progress = run.start(
            Vec::new(),
            cfg.limits.tracker(),
            PrintWriter::Callback(&mut out),
        );
        let stop = drive(cfg, progress, &mut out)?;
        Ok(Advance {
            stop,
            stdout: out.text,
        })
    })
}

/// Resumes a paused call with `outcome` and runs to the next stop.
pub fn resume(cfg: &EngineConfig, paused: Paused, outcome: Outcome) -> Result<Advance, HostError> {
    guarded("resume", || {
        let mut call = paused.0;
        // Limits apply per advance: give this advance a fresh time budget.
        let tracker = call.tracker_mut();
        if let Some(d) = tracker.max_duration() {
            tracker.set_max_duration(d);
        }
        let result = match outcome {
            Outcome::Value(v) => ExtFunctionResult::Return(v),
            Outcome::Error { exc_type, message } => {
                // Only Exception subclasses: a script must be able to catch a tool failure.
                let kind = ExcType::from_str(&exc_type)
                    .ok()
                    .filter(|k| k.is_subclass_of(ExcType::Exception))
                    .unwrap_or(ExcType::RuntimeError);
                ExtFunctionResult::Error(MontyException::new(kind, Some(message)))
            }
        };
        let mut out = CappedOutput::new(cfg.max_stdout);
        let progress = call.resume(result, PrintWriter::Callback(&mut out));
        let stop = drive(cfg, progress, &mut out)?;
        Ok(Advance {
            stop,
            stdout: out.text,
        })
    })
}

/// Serializes a paused call into sealed snapshot bytes; hands the call back.
pub fn dump(cfg: &EngineConfig, paused: Paused) -> (Result<Vec<u8>, HostError>, Paused) {
    let progress = RunProgress::FunctionCall(paused.0);
    let bytes = progress
        .dump()
        .map(|payload| {
            snapshot::seal(
                &payload,
                cfg.snapshot_key.as_deref(),
                cfg.limits.recursion_depth() as u32,
            )
        })
        .map_err(|e| HostError::Snapshot(format!("cannot serialize the paused script: {e}")));
    let call = progress
        .into_function_call()
        .expect("just wrapped a function call");
    (bytes, Paused(call))
}

/// The recursion limit a snapshot runs under, read from its envelope header so the caller
/// can size the stack before loading it. The integrity tag is checked once, by `load`,
/// before a single payload byte is decoded; a header that does not parse is refused here.
pub fn snapshot_depth(bytes: &[u8]) -> Result<usize, HostError> {
    Ok(snapshot::peek_depth(bytes)?.min(RECURSION_CEILING))
}

/// Restores a paused call from sealed snapshot bytes.
pub fn load(cfg: &EngineConfig, bytes: &[u8]) -> Result<(Paused, ToolRequest), HostError> {
    let payload = snapshot::open(bytes, cfg.snapshot_key.as_deref())?;
    guarded("load", || {
        let progress = RunProgress::<LimitedTracker>::load(payload)
            .map_err(|e| HostError::Snapshot(format!("cannot decode the paused script: {e}")))?;
        let call = progress.into_function_call().ok_or_else(|| {
            HostError::Snapshot("snapshot is not a script paused at a tool call".into())
        })?;
        let request = match classify(cfg.tool_style, &call) {
            Ok(r) => r,
            Err(_) => {
                return Err(HostError::Snapshot(
                    "snapshot is not paused at a valid tool call".into(),
                ));
            }
        };
        Ok((Paused(call), request))
    })
}

fn type_error(msg: String) -> MontyException {
    MontyException::new(ExcType::TypeError, Some(msg))
}

/// Unwraps and checks a call; an `Err` is the exception to raise into the script.
fn classify(
    style: ToolStyle,
    call: &FunctionCall<LimitedTracker>,
) -> Result<ToolRequest, MontyException> {
    if call.function_name != "call_tool" {
        if style == ToolStyle::Functions && !call.method_call {
            let mut keyword = Vec::with_capacity(call.kwargs.len());
            for (k, v) in &call.kwargs {
                let MontyObject::String(k) = k else {
                    return Err(type_error("keyword argument names must be strings".into()));
                };
                keyword.push((k.clone(), v.clone()));
            }
            let req = ToolRequest {
                name: call.function_name.clone(),
                positional: call.args.clone(),
                keyword,
                call_id: call.call_id,
            };
            check_request(&req)?;
            return Ok(req);
        }
        return Err(MontyException::new(
            ExcType::NameError,
            Some(format!(
                "name '{}' is not defined. Tools are not Python functions here: call them only as \
                 call_tool(\"<tool-name>\", {{\"arg\": value}})",
                call.function_name
            )),
        ));
    }
    let name = match call.args.first() {
        Some(MontyObject::String(s)) => s.clone(),
        _ => {
            return Err(type_error(
                "call_tool needs the tool name as its first argument, a string: \
                 call_tool(\"search\", {\"query\": \"...\"})"
                    .into(),
            ));
        }
    };
    if !call.kwargs.is_empty() {
        return Err(type_error(format!(
            "call_tool takes the tool's arguments in one dict, not as keyword arguments: \
             call_tool(\"{name}\", {{\"arg\": value}})"
        )));
    }
    if call.args.len() > 2 {
        return Err(type_error(format!(
            "call_tool takes exactly two arguments, the tool name and one dict of arguments: \
             call_tool(\"{name}\", {{\"arg\": value}})"
        )));
    }
    let mut keyword = Vec::new();
    match call.args.get(1) {
        None => {}
        Some(MontyObject::Dict(pairs)) => {
            for (k, v) in pairs {
                let MontyObject::String(k) = k else {
                    return Err(type_error(format!(
                        "call_tool argument names must be strings, got the {} key {}: \
                         call_tool(\"{name}\", {{\"arg\": value}})",
                        k.type_name(),
                        k.py_repr()
                    )));
                };
                keyword.push((k.clone(), v.clone()));
            }
        }
        Some(other) => {
            return Err(type_error(format!(
                "call_tool's second argument must be a dict of the tool's arguments, got {}: \
                 call_tool(\"{name}\", {{\"arg\": value}})",
                other.type_name()
            )));
        }
    }
    let req = ToolRequest {
        name,
        positional: Vec::new(),
        keyword,
        call_id: call.call_id,
    };
    check_request(&req)?;
    Ok(req)
}

fn check_request(req: &ToolRequest) -> Result<(), MontyException> {
    for (i, v) in req.positional.iter().enumerate() {
        check_plain(v, &format!("argument {i}")).map_err(|e| {
            type_error(format!(
                "tool '{}' got a value it cannot take: {}",
                req.name,
                e.describe()
            ))
        })?;
    }
    for (k, v) in &req.keyword {
        check_plain(v, &format!("argument '{k}'")).map_err(|e| {
            type_error(format!(
                "tool '{}' got a value it cannot take: {}",
                req.name,
                e.describe()
            ))
        })?;
    }
    Ok(())
}

const NO_ASYNC: &str =
    "asynchronous tool calls are not supported; call tools synchronously, without `await`";

/// Runs from `progress` until a tool call, completion or an uncaught exception.
fn drive(
    cfg: &EngineConfig,
    mut progress: Progress,
    out: &mut CappedOutput,
) -> Result<Stop, HostError> {
    let mut table = None;
    loop {
        let p = match progress {
            Ok(p) => p,
            Err(exc) => return Ok(Stop::Raised(exc.to_string())),
        };
        progress = match p {
            RunProgress::Complete(value) => {
                return Ok(match check_plain(&value, "the result") {
                    Ok(()) => Stop::Complete(value),
                    Err(e) => Stop::Raised(format!(
                        "TypeError: the script's last expression must be plain data: {}",
                        e.describe()
                    )),
                });
            }
            RunProgress::FunctionCall(call) => match classify(cfg.tool_style, &call) {
                Ok(req) => return Ok(Stop::Call(Box::new(Paused(call)), req)),
                Err(exc) => call.resume(ExtFunctionResult::Error(exc), PrintWriter::Callback(out)),
            },
            RunProgress::OsCall(call) => {
                if call.function_call.is_filesystem()
                    && table.is_none()
                    && !cfg.os.mounts.is_empty()
                {
                    table = Some(cfg.os.mount_table()?);
                }
                let os = &cfg.os;
                let t = table.as_mut();
                call.resume_with(PrintWriter::Callback(out), |c| os.service(c, t))
            }
            RunProgress::NameLookup(lookup) => {
                lookup.resume(NameLookupResult::Undefined, PrintWriter::Callback(out))
            }
            RunProgress::ResolveFutures(futures) => {
                let answers = futures
                    .pending_call_ids()
                    .iter()
                    .map(|id| {
                        (
                            *id,
                            ExtFunctionResult::Error(MontyException::new(
                                ExcType::RuntimeError,
                                Some(NO_ASYNC.into()),
                            )),
                        )
                    })
                    .collect();
                futures.resume(answers, PrintWriter::Callback(out))
            }
        };
    }
}
