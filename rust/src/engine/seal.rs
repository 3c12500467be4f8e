//! Sealed snapshot bytes of a run: Monty's dump in the envelope (`crate::snapshot`) with the
//! run's awaited calls and counters, and the way back (a paused call or a paused gather).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::engine::interp::unstable::{self, NodeId};
use crate::engine::interp::{self, CallArgs, RunProgress};
use crate::errors::HostError;
use crate::memory::{RunMemory, charge_to};
use crate::output::Printed;
use crate::snapshot;

use super::request::{Keywords, ToolName, ToolRequest, check_request, classify};
use super::{
    Deferred, EngineConfig, Paused, PausedGather, PendingTool, RECURSION_CEILING, RunCounts,
    RunCtx, Tasks, ToolStyle, guarded, unbox,
};

/// Serializes a paused call into sealed snapshot bytes; hands the call back.
pub fn dump(cfg: &EngineConfig, paused: Paused) -> (Result<Vec<u8>, HostError>, Paused) {
    let Paused(call, ctx) = paused;
    let (call, room) = unbox(call);
    let progress = RunProgress::FunctionCall(call);
    let bytes = seal_progress(cfg, &progress, &ctx);
    let call = progress
        .into_function_call()
        .expect("just wrapped a function call");
    (bytes, Paused(Box::write(room, call), ctx))
}

/// The recursion limit a snapshot runs under, read from its envelope header so the caller
/// can size the stack before loading it. The integrity tag is checked once, by `load`,
/// before a single payload byte is decoded; a header that does not parse is refused here.
pub fn snapshot_depth(bytes: &[u8]) -> Result<usize, HostError> {
    Ok(snapshot::peek_depth(bytes)?.min(RECURSION_CEILING))
}

/// Restores a paused call from sealed snapshot bytes.
pub fn load(cfg: &EngineConfig, bytes: &[u8]) -> Result<(Paused, ToolRequest), HostError> {
    match load_any(cfg, bytes)? {
        Loaded::Call(paused, req) => Ok((paused, req)),
        Loaded::Gather(..) => Err(HostError::Snapshot(
            "snapshot is a script awaiting several tool calls (a gather): resume it with \
             resume_gather"
                .into(),
        )),
    }
}

/// A continuation restored from bytes.
pub enum Loaded {
    Call(Paused, ToolRequest),
    /// Paused where its tasks await started calls (sorted call ids).
    Gather(Box<PausedGather>, Vec<u32>),
}

/// Restores a paused call or a paused gather from sealed snapshot bytes.
pub fn load_any(cfg: &EngineConfig, bytes: &[u8]) -> Result<Loaded, HostError> {
    let (payload, extra) = snapshot::open_run(bytes, cfg.snapshot_key.as_deref())?;
    // The restored heap is the run's memory: charge its allocation to a fresh counter.
    let memory = RunMemory::new();
    let _charging = charge_to(&memory);
    guarded("load", || {
        let (tasks, counts) = match extra {
            Some(extra) => tasks_from_bytes(cfg.tool_style, extra)?,
            None => (Tasks::default(), RunCounts::default()),
        };
        let ctx = Arc::new(RunCtx::new(memory.clone(), None, tasks, counts));
        let dump = interp::Dump::load(payload)
            .map_err(|e| HostError::Snapshot(format!("cannot decode the paused script: {e}")))?;
        let interp::Session::Running(progress) = dump.state else {
            return Err(HostError::Snapshot(
                "snapshot is not a script paused at a tool call".into(),
            ));
        };
        let progress = match *progress {
            RunProgress::ResolveFutures(futures) => {
                let mut ids = futures.pending_call_ids().to_vec();
                ids.sort_unstable();
                if ids.is_empty() || !ctx.with_pending(|t| ids.iter().all(|id| t.contains_key(id)))
                {
                    return Err(HostError::Snapshot(
                        "snapshot awaits tool calls it does not describe".into(),
                    ));
                }
                return Ok(Loaded::Gather(Box::new(PausedGather(futures, ctx)), ids));
            }
            other => other,
        };
        let mut call = progress.into_function_call().ok_or_else(|| {
            HostError::Snapshot("snapshot is not a script paused at a tool call".into())
        })?;
        // This runtime's limits apply to a restored script (the stricter of them and the
        // limits stored with it).
        call.tracker_mut()
            .tighten_limits(&cfg.limits.resource_limits());
        let request = match classify(cfg.tool_style, &call) {
            Ok(r) => r,
            Err(_) => {
                return Err(HostError::Snapshot(
                    "snapshot is not paused at a valid tool call".into(),
                ));
            }
        };
        Ok(Loaded::Call(
            Paused(Box::new(call), Arc::clone(&ctx)),
            request,
        ))
    })
}

/// Serializes a paused gather into sealed snapshot bytes; hands it back.
pub fn dump_gather(
    cfg: &EngineConfig,
    paused: PausedGather,
) -> (Result<Vec<u8>, HostError>, PausedGather) {
    let PausedGather(futures, ctx) = paused;
    let progress = RunProgress::ResolveFutures(futures);
    let bytes = seal_progress(cfg, &progress, &ctx);
    let futures = progress
        .into_resolve_futures()
        .expect("just wrapped a paused gather");
    (bytes, PausedGather(futures, ctx))
}

/// Monty's dump of `progress` in the envelope, with the run's awaited-call state when it
/// has any (a run that awaits nothing seals exactly as before).
fn seal_progress(
    cfg: &EngineConfig,
    progress: &RunProgress,
    ctx: &RunCtx,
) -> Result<Vec<u8>, HostError> {
    let extra = tasks_to_bytes(ctx)?;
    interp::dump("main.py", None, &[], interp::SessionRef::Running(progress))
        .map(|payload| {
            snapshot::seal_with_extra(
                &payload,
                cfg.snapshot_key.as_deref(),
                cfg.limits.recursion_depth() as u32,
                extra.as_deref(),
            )
        })
        .map_err(|e| HostError::Snapshot(format!("cannot serialize the paused script: {e}")))
}

/// Version of the awaited-call section of the envelope written when the run has
/// counters to carry (formats 1, without them, and 2, without the clock reads, are still
/// read).
const TASKS_FORMAT: u8 = 3;
const TASKS_FORMAT_1: u8 = 1;
const TASKS_FORMAT_2: u8 = 2;

/// A started call in bytes: call id, tool name, positional and keyword argument ids, their
/// arena.
pub(crate) type PendingRecord = (u32, String, Vec<NodeId>, Vec<(String, NodeId)>, CallArgs);
/// A [`PendingRecord`] to serialize (the same bytes), borrowing what it can from the call.
pub(crate) type PendingRecordRef<'a> = (
    u32,
    &'a str,
    &'a [NodeId],
    Vec<(String, NodeId)>,
    &'a CallArgs,
);
type TasksRecord = (u8, String, Vec<u32>, Vec<PendingRecord>);
/// Format 2: format 1 plus the run's counters (bytes printed, cut or not, OS calls).
type TasksRecord2 = (u8, String, Vec<u32>, Vec<PendingRecord>, (u64, bool, u64));
/// Format 3: format 2's counters plus the run's clock reads.
type TasksRecord3 = (
    u8,
    String,
    Vec<u32>,
    Vec<PendingRecord>,
    (u64, bool, u64, u64),
);

fn tasks_to_bytes(ctx: &RunCtx) -> Result<Option<Vec<u8>>, HostError> {
    let d = &ctx.tasks.deferred;
    let counts = ctx.counts();
    ctx.with_pending(|t| {
        if d.offsets.is_empty() && t.is_empty() && counts.is_zero() {
            return Ok(None);
        }
        let pending: Vec<_> = t.iter().map(|(id, p)| p.record(*id)).collect();
        let c = (
            counts.printed.used as u64,
            counts.printed.truncated,
            counts.os_calls,
            counts.clock_reads,
        );
        postcard::to_allocvec(&(TASKS_FORMAT, &d.script, &d.offsets, pending, c))
            .map(Some)
            .map_err(|e| HostError::Snapshot(format!("cannot serialize the awaited calls: {e}")))
    })
}

/// Started calls read back from bytes (a paused script's, or a paused session feed's), each
/// checked as a live call is: ids within its arena, the style's shape, plain values only.
/// `what` names them in the error (`"snapshot's awaited calls"`).
pub(crate) fn pending_table(
    style: ToolStyle,
    records: Vec<PendingRecord>,
    what: &str,
) -> Result<BTreeMap<u32, PendingTool>, HostError> {
    let bad = |why: &str| HostError::Snapshot(format!("{what} {why}"));
    let mut table = BTreeMap::new();
    for (call_id, name, positional, keyword, args) in records {
        let graph = unstable::call_args_parts(&args).0;
        let in_range = |id: &NodeId| (id.0 as usize) < graph.len();
        if !positional.iter().all(in_range)
            || !keyword.iter().all(|(_, v)| in_range(v))
            || (style == ToolStyle::CallTool && !positional.is_empty())
        {
            return Err(bad("are malformed"));
        }
        let req = ToolRequest {
            name: ToolName::Named(name),
            positional,
            keyword: Keywords::Listed(keyword),
            call_id,
        };
        check_request(graph, &req).map_err(|_| bad("hold a value that cannot cross"))?;
        table.insert(call_id, PendingTool { args, req });
    }
    Ok(table)
}

fn tasks_from_bytes(style: ToolStyle, bytes: &[u8]) -> Result<(Tasks, RunCounts), HostError> {
    let bad = |why: String| HostError::Snapshot(format!("snapshot's awaited calls {why}"));
    let decode_error = |e: postcard::Error| bad(format!("cannot be decoded: {e}"));
    let format = bytes.first().copied().unwrap_or(0);
    let (script, offsets, pending, counts) = match format {
        TASKS_FORMAT_1 => {
            let (_, script, offsets, pending): TasksRecord =
                postcard::from_bytes(bytes).map_err(decode_error)?;
            (script, offsets, pending, RunCounts::default())
        }
        TASKS_FORMAT_2 => {
            let (_, script, offsets, pending, (used, truncated, os_calls)): TasksRecord2 =
                postcard::from_bytes(bytes).map_err(decode_error)?;
            let printed = Printed {
                used: usize::try_from(used).map_err(|_| bad("are malformed".into()))?,
                truncated,
            };
            let counts = RunCounts {
                printed,
                os_calls,
                clock_reads: 0,
            };
            (script, offsets, pending, counts)
        }
        TASKS_FORMAT => {
            let (_, script, offsets, pending, (used, truncated, os_calls, clock_reads)): TasksRecord3 =
                postcard::from_bytes(bytes).map_err(decode_error)?;
            let printed = Printed {
                used: usize::try_from(used).map_err(|_| bad("are malformed".into()))?,
                truncated,
            };
            let counts = RunCounts {
                printed,
                os_calls,
                clock_reads,
            };
            (script, offsets, pending, counts)
        }
        other => {
            return Err(bad(format!(
                "have format {other}, this build reads {TASKS_FORMAT_1} to {TASKS_FORMAT}"
            )));
        }
    };
    let table = pending_table(style, pending, "snapshot's awaited calls")?;
    Ok((
        Tasks {
            deferred: Deferred { script, offsets },
            pending: Mutex::new(table),
        },
        counts,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_counters_read_back_from_formats_2_and_3() {
        let none: Vec<PendingRecord> = Vec::new();
        let v2 = postcard::to_allocvec(&(
            TASKS_FORMAT_2,
            "main.py",
            vec![1u32],
            &none,
            (5u64, true, 7u64),
        ))
        .unwrap();
        let (_, counts) = tasks_from_bytes(ToolStyle::CallTool, &v2).unwrap();
        let printed = Printed {
            used: 5,
            truncated: true,
        };
        let want = RunCounts {
            printed,
            os_calls: 7,
            clock_reads: 0,
        };
        assert_eq!(counts, want);
        let v3 = postcard::to_allocvec(&(
            TASKS_FORMAT,
            "main.py",
            vec![1u32],
            &none,
            (5u64, true, 7u64, 9u64),
        ))
        .unwrap();
        let (_, counts) = tasks_from_bytes(ToolStyle::CallTool, &v3).unwrap();
        assert_eq!(
            counts,
            RunCounts {
                clock_reads: 9,
                ..want
            }
        );
        assert!(tasks_from_bytes(ToolStyle::CallTool, &[4]).is_err());
    }
}
