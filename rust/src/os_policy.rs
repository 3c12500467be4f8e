//! The OS-access policy: mounted folders, the environment map and the clock switch.
//!
//! Every OS effect a script asks for is answered here, in place, never as a tool and
//! never by pausing the agent. The filesystem boundary itself (canonicalization,
//! mount-prefix matching, symlink-escape detection) is enforced by `monty-fs`.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::engine::interp;
use crate::engine::interp::{
    DateTimeSource, ExcType, ExtFunctionResult, MontyDate, MontyDateTime, MontyException,
    MontyObject, MontyTimeZone, OsFunctionCall, ProcessTime, RandomSeed, RandomStart,
    ResourceTracker, SandboxTimeZone, SleepMode,
};
use crate::engine::interp::{MountCallOutcome, MountError, MountMode, MountTable, OverlayState};
use chrono::{DateTime, Datelike, Local, NaiveDateTime, Offset, Timelike, Utc};
use num_bigint::BigInt;

use crate::errors::HostError;
use crate::journal::{CLOCK, JVal, Journal, URANDOM};

/// One host folder visible to scripts at `virtual_path`.
#[derive(Debug, Clone)]
pub struct MountSpec {
    pub virtual_path: String,
    pub host_path: PathBuf,
    pub read_write: bool,
    /// An overlay mount's memory budget in bytes (monty-fs's accounting: paths, contents and
    /// a small per-entry overhead), applied when the mount is served through a layer: a write
    /// past it is an error in the script. `None`: monty-fs's default.
    pub overlay_budget: Option<u64>,
}

/// What a script may see of the host besides its tools.
#[derive(Debug, Clone, Default)]
pub struct OsPolicy {
    pub mounts: Vec<MountSpec>,
    pub environ: Vec<(String, String)>,
    pub system_clock: bool,
    /// The sandbox's local zone; `None`: the host's offset at each run, with no name (a
    /// host whose zone has no name the tz database knows).
    pub timezone: Option<SandboxTimeZone>,
    /// A clock of the host's choosing in place of the system clock (`None`: the system
    /// clock, when `system_clock` grants it).
    pub clock: Option<FixedClock>,
}

/// A frozen or stepping clock: the `n`-th clock read of a run (from 0) answers the instant
/// `start + n * step` (UTC float seconds since the Unix epoch; `step` 0 is a frozen clock).
/// The count travels with the run (in its snapshots), so a resumed run reads on from where
/// it paused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FixedClock {
    pub start: f64,
    pub step: f64,
}

impl FixedClock {
    /// Checks the instants: finite, and within the years the datetime module can show.
    pub fn new(start: f64, step: f64) -> Result<Self, HostError> {
        // 0001-01-01 and 9999-12-31T23:59:59 UTC.
        const RANGE: std::ops::RangeInclusive<f64> = -62_135_596_800.0..=253_402_300_799.0;
        if !RANGE.contains(&start) {
            return Err(HostError::Config(format!(
                "clock start must be an instant between the years 1 and 9999, got {start} s"
            )));
        }
        if !step.is_finite() || step < 0.0 {
            return Err(HostError::Config(format!(
                "clock step must be a finite number of seconds, 0 or more, got {step}"
            )));
        }
        Ok(Self { start, step })
    }

    /// The instant of read number `n`.
    fn read(&self, n: u64) -> f64 {
        self.start + self.step * n as f64
    }
}

/// The zone a `timezone` option names: `"local"` (the host's zone, by name when the tz
/// database knows it), `"UTC"`, or an IANA name such as `"Europe/Paris"`.
pub fn resolve_timezone(option: &str) -> Result<Option<SandboxTimeZone>, HostError> {
    match option {
        "local" => Ok(host_zone_name().and_then(|name| SandboxTimeZone::named(&name).ok())),
        "UTC" => Ok(Some(SandboxTimeZone::utc())),
        name => SandboxTimeZone::named(name).map(Some).map_err(|e| {
            HostError::Config(format!(
                "timezone must be 'local', 'UTC' or a time zone name the tz database knows: {e}"
            ))
        }),
    }
}

/// The host's zone name, as the C library finds it: `TZ` (a name, or a path into the
/// zoneinfo folder), else the `/etc/localtime` link, else `/etc/timezone`.
fn host_zone_name() -> Option<String> {
    fn from_path(path: &str) -> Option<String> {
        path.split_once("zoneinfo/")
            .map(|(_, name)| name.to_string())
    }
    if let Ok(tz) = std::env::var("TZ") {
        let tz = tz.strip_prefix(':').unwrap_or(&tz);
        if tz.is_empty() {
            return Some("UTC".to_string()); // glibc reads an empty TZ as UTC
        }
        return if tz.starts_with('/') {
            from_path(tz)
        } else {
            Some(tz.to_string())
        };
    }
    if let Ok(target) = std::fs::read_link("/etc/localtime")
        && let Some(name) = target.to_str().and_then(from_path)
    {
        return Some(name);
    }
    std::fs::read_to_string("/etc/timezone")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Checks a virtual mount path: absolute, normalized, not the root.
pub fn validate_virtual_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("mount virtual path must be absolute: {path:?}"));
    }
    if path == "/" {
        return Err("mount virtual path must not be the root '/'".to_string());
    }
    if path.ends_with('/') {
        return Err(format!(
            "mount virtual path must not end with '/': {path:?}"
        ));
    }
    if path.contains('\0') {
        return Err(format!("mount virtual path must not contain NUL: {path:?}"));
    }
    for part in path[1..].split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(format!(
                "mount virtual path must not contain empty, '.' or '..' parts: {path:?}"
            ));
        }
    }
    Ok(())
}

impl OsPolicy {
    /// Validates mounts when the runtime is built: virtual paths (see
    /// [`validate_virtual_path`]), no duplicates, host paths that are existing folders.
    pub fn new(
        mounts: Vec<MountSpec>,
        environ: Vec<(String, String)>,
        system_clock: bool,
        timezone: &str,
        clock: Option<FixedClock>,
    ) -> Result<Self, HostError> {
        let timezone = resolve_timezone(timezone)?;
        let mut seen = HashSet::new();
        let mut checked = Vec::with_capacity(mounts.len());
        for mut m in mounts {
            validate_virtual_path(&m.virtual_path).map_err(HostError::Config)?;
            if !seen.insert(m.virtual_path.clone()) {
                return Err(HostError::Config(format!(
                    "mount virtual path given twice: {:?}",
                    m.virtual_path
                )));
            }
            let host = std::fs::canonicalize(&m.host_path).map_err(|e| {
                HostError::Config(format!(
                    "mount host path {:?} cannot be used: {e}",
                    m.host_path.display()
                ))
            })?;
            if !host.is_dir() {
                return Err(HostError::Config(format!(
                    "mount host path {:?} is not a folder",
                    m.host_path.display()
                )));
            }
            m.host_path = host;
            checked.push(m);
        }
        Ok(Self {
            mounts: checked,
            environ,
            system_clock,
            timezone,
            clock,
        })
    }

    /// Builds the mount table for one advance (only when a filesystem call arrives). With
    /// the session's file `layer` (`crate::files`), a read-write mount is an overlay rebuilt
    /// from the layer's entries under it: its writes stay off the host.
    pub fn mount_table(
        &self,
        layer: Option<&crate::files::Layer>,
    ) -> Result<MountTable, HostError> {
        let mut table = MountTable::new();
        for m in &self.mounts {
            let mode = match (m.read_write, layer) {
                (true, Some(layer)) => MountMode::OverlayMemory(OverlayState::from_layer(
                    crate::files::for_mount(layer, &m.virtual_path),
                )),
                (true, None) => MountMode::ReadWrite,
                (false, _) => MountMode::ReadOnly,
            };
            let overlay = matches!(mode, MountMode::OverlayMemory(_));
            let fail = |e: monty_fs::MountError| {
                HostError::Internal(format!(
                    "failed to mount {} at {}: {e}",
                    m.host_path.display(),
                    m.virtual_path
                ))
            };
            let mut mount =
                monty_fs::Mount::new(&m.virtual_path, &m.host_path, mode, None).map_err(fail)?;
            if let (true, Some(budget)) = (overlay, m.overlay_budget) {
                mount = mount.with_memory_usage_limit(budget);
            }
            table.push_mount(mount).map_err(fail)?;
        }
        Ok(table)
    }

    /// Answers one OS call. `table` must be built when the call is a filesystem call.
    pub fn service(
        &self,
        call: OsFunctionCall,
        table: Option<&mut MountTable>,
    ) -> ExtFunctionResult {
        match call {
            OsFunctionCall::Getenv(args) => {
                match self.environ.iter().find(|(k, _)| *k == args.key) {
                    Some((_, v)) => ExtFunctionResult::Return(MontyObject::string(v.clone())),
                    None => ExtFunctionResult::Return(args.default),
                }
            }
            OsFunctionCall::GetEnviron => {
                let pairs: Vec<(MontyObject, MontyObject)> = self
                    .environ
                    .iter()
                    .map(|(k, v)| {
                        (
                            MontyObject::string(k.clone()),
                            MontyObject::string(v.clone()),
                        )
                    })
                    .collect();
                ExtFunctionResult::Return(MontyObject::dict(pairs))
            }
            OsFunctionCall::SystemSleep(d)
            | OsFunctionCall::Sleep(d)
            | OsFunctionCall::AsyncSystemSleep(d)
            | OsFunctionCall::AsyncSleep(d) => {
                // Capped by Monty (SleepMode::System) at SLEEP_CAP per call, and charged to
                // the advance's time budget before it gets here (`AdvanceClock::charge`).
                // The advance runs with the GIL released: the wait blocks only this script.
                // `asyncio.sleep` answered inline settles its awaitable at once (the wait
                // is done), with the `result=` Monty keeps.
                std::thread::sleep(d.min(SLEEP_CAP));
                ExtFunctionResult::Return(MontyObject::none())
            }
            other => {
                let Some(table) = table else {
                    return no_handler(other);
                };
                let existence_check = other.is_existence_check();
                match table.handle_os_call(other) {
                    MountCallOutcome::Handled(Ok(v)) => ExtFunctionResult::Return(v),
                    // A path that escapes its mount (e.g. through a symlink) does not exist
                    // for existence checks, as for any path outside every mount.
                    MountCallOutcome::Handled(Err(
                        MountError::PathEscape { .. } | MountError::NoMountPoint(_),
                    )) if existence_check => ExtFunctionResult::Return(MontyObject::bool(false)),
                    MountCallOutcome::Handled(Err(e)) => {
                        ExtFunctionResult::Error(e.into_exception())
                    }
                    MountCallOutcome::NotHandled(c) => no_handler(c),
                }
            }
        }
    }

    /// Monty's OS policy for one run: every clock read and the random seed come from the
    /// host (so they are journaled), in the host's local zone; sleeps really wait.
    pub fn monty_policy(&self, random_seed: i64) -> interp::OsPolicy {
        let timezone = self
            .timezone
            .clone()
            .unwrap_or_else(|| SandboxTimeZone::Fixed {
                offset_seconds: Local::now().offset().fix().local_minus_utc(),
                name: None,
            });
        interp::OsPolicy {
            datetime: DateTimeSource::CallHost,
            timezone,
            sleep: SleepMode::System(SLEEP_CAP),
            random_start: RandomStart::Seed(RandomSeed::Int(BigInt::from(random_seed))),
            // Every field named: `..OsPolicy::default()` would build (and drop) a default
            // zone, two allocations per start.
            process_time: ProcessTime::default(),
        }
    }

    /// Answers the nondeterministic OS requests (clock reads, entropy) through the journal;
    /// `None` for every other call. `clock_reads`: the clock reads the run made so far (a
    /// [`FixedClock`] answers by it), counted up here.
    pub fn nondeterministic(
        &self,
        call: &OsFunctionCall,
        journal: &mut Journal,
        clock_reads: &mut u64,
    ) -> Result<Option<ExtFunctionResult>, HostError> {
        let clock = matches!(
            call,
            OsFunctionCall::DateToday | OsFunctionCall::DateTimeNow(_) | OsFunctionCall::Time(_)
        );
        if clock {
            if let Some(err) = self.clock_refusal() {
                return Ok(Some(err));
            }
            let n = *clock_reads;
            *clock_reads += 1;
            let seconds = match journal.answer(CLOCK, || match &self.clock {
                Some(fixed) => JVal::Float(fixed.read(n)),
                None => {
                    let now = Utc::now();
                    JVal::Float(
                        now.timestamp() as f64 + f64::from(now.timestamp_subsec_micros()) / 1e6,
                    )
                }
            })? {
                JVal::Float(f) => f,
                JVal::Int(i) => i as f64,
                other @ (JVal::Str(_) | JVal::Bytes(_)) => {
                    return Err(HostError::ReplayDivergence(format!(
                        "the journal's clock entry is not a number: {other:?}"
                    )));
                }
            };
            let out_of_range = || {
                Ok(Some(ExtFunctionResult::Error(MontyException::new(
                    ExcType::OverflowError,
                    Some("the clock reading is out of range".into()),
                ))))
            };
            let micros = (seconds * 1e6).round() as i64;
            let Some(utc) = DateTime::from_timestamp_micros(micros).map(|d| d.naive_utc()) else {
                return out_of_range();
            };
            let local_offset = match &self.timezone {
                Some(zone) => zone.at(utc).offset_seconds,
                None => Local::now().offset().fix().local_minus_utc(),
            };
            // The instant as the script sees it must be a date the datetime module has
            // (a stepping clock can walk past the year 9999).
            let shown = match call {
                OsFunctionCall::DateTimeNow(Some(tz)) => tz.offset_seconds,
                _ => local_offset,
            };
            if !matches!(call, OsFunctionCall::Time(_))
                && !(1..=9999).contains(&shift(utc, shown).year())
            {
                return out_of_range();
            }
            return Ok(Some(match call {
                OsFunctionCall::Time(_) => ExtFunctionResult::Return(MontyObject::float(seconds)),
                OsFunctionCall::DateToday => {
                    let local = shift(utc, local_offset);
                    ExtFunctionResult::Return(MontyObject::date(MontyDate {
                        year: local.year(),
                        month: local.month() as u8,
                        day: local.day() as u8,
                    }))
                }
                OsFunctionCall::DateTimeNow(tz) => now_datetime(utc, local_offset, tz.clone()),
                _ => unreachable!("matched above"),
            }));
        }
        if let OsFunctionCall::Urandom(args) = call {
            let size = usize::try_from(args.size).unwrap_or(usize::MAX);
            if size > MAX_URANDOM {
                return Ok(Some(ExtFunctionResult::Error(MontyException::new(
                    ExcType::ValueError,
                    Some(format!(
                        "os.urandom() is limited to {MAX_URANDOM} bytes here"
                    )),
                ))));
            }
            let hex = match journal.answer(URANDOM, || {
                let mut buf = vec![0u8; size];
                crate::journal::fill_random(&mut buf);
                JVal::Str(buf.iter().map(|b| format!("{b:02x}")).collect())
            })? {
                JVal::Str(s) => s,
                other => {
                    return Err(HostError::ReplayDivergence(format!(
                        "the journal's urandom entry is not a hex string: {other:?}"
                    )));
                }
            };
            let bytes: Option<Vec<u8>> = (0..hex.len())
                .step_by(2)
                .map(|i| {
                    hex.get(i..i + 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                })
                .collect();
            return match bytes {
                Some(b) if b.len() == size => {
                    Ok(Some(ExtFunctionResult::Return(MontyObject::bytes(b))))
                }
                _ => Err(HostError::ReplayDivergence(
                    "the journal's urandom entry does not match the requested size".into(),
                )),
            };
        }
        Ok(None)
    }

    fn clock_refusal(&self) -> Option<ExtFunctionResult> {
        if self.system_clock || self.clock.is_some() {
            None
        } else {
            Some(ExtFunctionResult::Error(MontyException::new(
                ExcType::OSError,
                Some(
                    "the host clock is not granted to this script (system_clock=False)".to_string(),
                ),
            )))
        }
    }
}

/// The time one advance has spent, against the script's `max_duration`: the interpreter
/// time of its turns plus its sleeps (one per advance, in its [`Journal`]).
///
/// Monty's own budget (`max_turn_duration`) restarts at every resume, and an advance
/// resumes the interpreter at every OS call: without this a script that reads the clock or
/// sleeps in a loop would never reach its limit, and a sleep would not count at all.
#[derive(Debug, Default)]
pub struct AdvanceClock {
    used: Duration,
    /// When the advance's first turn began (set at the first charge, from that turn's
    /// length: compiling the script and waiting for a worker do not count).
    started: Option<Instant>,
}

impl AdvanceClock {
    /// Charges the turn that ended at this OS call and, for a sleep, its delay, to the
    /// advance. `tracker` is the paused interpreter's (its turn time and its limit: the
    /// stricter of the runtime's `max_duration` and the one stored in a restored snapshot).
    ///
    /// Returns the `TimeoutError` to end the script with (uncatchably, `abort`) when the
    /// advance has spent its budget or the sleep would take it past it: such a sleep does
    /// not wait at all, since the script would be stopped at its end anyway.
    pub fn charge(
        &mut self,
        call: &OsFunctionCall,
        tracker: &ResourceTracker,
    ) -> Option<MontyException> {
        let delay = match call {
            OsFunctionCall::SystemSleep(d)
            | OsFunctionCall::Sleep(d)
            | OsFunctionCall::AsyncSystemSleep(d)
            | OsFunctionCall::AsyncSleep(d) => (*d).min(SLEEP_CAP),
            _ => Duration::ZERO,
        };
        self.charge_delay(delay, tracker)
    }

    /// Charges the turn that ended at any other pause the advance answers itself (a name
    /// lookup, a tool call refused in the script, an awaited call started as a future):
    /// Monty restarts its budget at those resumes too, so a loop of them (`while True:` /
    /// `try: undefined_name` / `except NameError: pass`) would otherwise never time out.
    pub fn charge_turn(&mut self, tracker: &ResourceTracker) -> Option<MontyException> {
        self.charge_delay(Duration::ZERO, tracker)
    }

    fn charge_delay(
        &mut self,
        delay: Duration,
        tracker: &ResourceTracker,
    ) -> Option<MontyException> {
        let turn = tracker.turn_elapsed();
        self.used += turn;
        // Wall time since the first turn began counts too: it holds what the turns do not,
        // Monty pausing and restoring the interpreter at every such stop and the host
        // answering it (a loop of name lookups spent most of its time there).
        let now = Instant::now();
        let started = *self
            .started
            .get_or_insert_with(|| now.checked_sub(turn).unwrap_or(now));
        self.used = self.used.max(now.saturating_duration_since(started));
        let limit = tracker.max_turn_duration()?;
        let total = self.used.saturating_add(delay);
        if total <= limit {
            self.used = total;
            return None;
        }
        // Shown to the microsecond (up for the time spent, down for the time left).
        let micros = |nanos: u128| Duration::from_micros(u64::try_from(nanos).unwrap_or(u64::MAX));
        let message = if delay.is_zero() {
            let spent = micros(self.used.as_nanos().div_ceil(1000));
            format!("time limit exceeded: {spent:?} > {limit:?}")
        } else {
            let left = micros(limit.saturating_sub(self.used).as_nanos() / 1000);
            format!(
                "time limit exceeded: a sleep of {delay:?} does not fit in the {left:?} left of \
                 {limit:?} (sleeps count against max_duration)"
            )
        };
        Some(MontyException::new(ExcType::TimeoutError, Some(message)))
    }
}

fn no_handler(call: OsFunctionCall) -> ExtFunctionResult {
    if call.is_existence_check() {
        ExtFunctionResult::Return(MontyObject::bool(false))
    } else {
        ExtFunctionResult::Error(call.on_no_handler())
    }
}

/// Longest single sleep a script gets, per call.
const SLEEP_CAP: Duration = Duration::from_secs(10);
/// Most bytes one `os.urandom` call may ask for.
const MAX_URANDOM: usize = 1 << 20;

fn shift(utc: NaiveDateTime, offset_seconds: i32) -> NaiveDateTime {
    utc + chrono::TimeDelta::seconds(i64::from(offset_seconds))
}

fn now_datetime(
    utc: NaiveDateTime,
    local_offset: i32,
    tz: Option<MontyTimeZone>,
) -> ExtFunctionResult {
    let (naive, offset, name) = match tz {
        None => (shift(utc, local_offset), None, None),
        Some(tz) => (
            shift(utc, tz.offset_seconds),
            Some(tz.offset_seconds),
            tz.name,
        ),
    };
    ExtFunctionResult::Return(MontyObject::datetime(MontyDateTime {
        year: naive.year(),
        month: naive.month() as u8,
        day: naive.day() as u8,
        hour: naive.hour() as u8,
        minute: naive.minute() as u8,
        second: naive.second() as u8,
        // Leap seconds show up as nanosecond values past one second; clamp them.
        microsecond: (naive.nanosecond() / 1000).min(999_999),
        offset_seconds: offset,
        timezone_name: name,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_add_up_against_the_limit_and_one_that_does_not_fit_is_refused() {
        let limits = interp::ResourceLimits {
            max_turn_duration: Some(Duration::from_millis(500)),
            ..interp::ResourceLimits::default()
        };
        let tracker = ResourceTracker::new(limits);
        let mut clock = AdvanceClock::default();
        let sleep = |ms| OsFunctionCall::SystemSleep(Duration::from_millis(ms));
        assert!(clock.charge(&sleep(300), &tracker).is_none());
        assert!(
            clock
                .charge(&OsFunctionCall::GetEnviron, &tracker)
                .is_none()
        );
        let refused = clock.charge(&sleep(300), &tracker).expect("past the limit");
        assert_eq!(refused.exc_type(), ExcType::TimeoutError);
        assert!(
            refused
                .message()
                .is_some_and(|m| m.contains("200ms left of 500ms"))
        );
        assert!(clock.charge(&sleep(200), &tracker).is_none());
        assert!(
            AdvanceClock::default()
                .charge(&sleep(10_000), &ResourceTracker::new(Default::default()))
                .is_none(),
            "no limit"
        );
    }

    #[test]
    fn a_fixed_clock_answers_by_the_count_of_reads_and_journals_them() {
        let policy = OsPolicy {
            clock: Some(FixedClock::new(100.0, 2.5).unwrap()),
            timezone: Some(SandboxTimeZone::utc()),
            ..OsPolicy::default()
        };
        let mut journal = Journal::new(Vec::new());
        let mut reads = 3;
        for call in [OsFunctionCall::DateTimeNow(None), OsFunctionCall::DateToday] {
            let answer = policy.nondeterministic(&call, &mut journal, &mut reads);
            assert!(matches!(answer, Ok(Some(ExtFunctionResult::Return(_)))));
        }
        assert_eq!(reads, 5);
        let log = journal.into_log();
        assert_eq!(
            log,
            vec![
                (CLOCK.to_string(), JVal::Float(107.5)),
                (CLOCK.to_string(), JVal::Float(110.0))
            ]
        );
        // A replayed entry wins over the clock, and still counts as a read.
        let mut journal = Journal::new(vec![(CLOCK.into(), JVal::Float(1.0))]);
        let mut reads = 0;
        policy
            .nondeterministic(&OsFunctionCall::DateToday, &mut journal, &mut reads)
            .unwrap();
        assert_eq!(reads, 1);
        assert_eq!(
            journal.into_log(),
            vec![(CLOCK.to_string(), JVal::Float(1.0))]
        );
    }

    #[test]
    fn a_fixed_clock_is_checked_and_its_reads_stay_within_the_datetime_years() {
        assert!(FixedClock::new(f64::NAN, 0.0).is_err());
        assert!(FixedClock::new(0.0, -1.0).is_err());
        assert!(FixedClock::new(0.0, f64::INFINITY).is_err());
        assert!(FixedClock::new(253_402_300_800.0, 0.0).is_err());
        let policy = OsPolicy {
            clock: Some(FixedClock::new(253_402_300_799.0, 86_400.0).unwrap()),
            timezone: Some(SandboxTimeZone::utc()),
            ..OsPolicy::default()
        };
        let mut journal = Journal::default();
        let mut reads = 1; // past 9999-12-31
        let answer = policy
            .nondeterministic(&OsFunctionCall::DateToday, &mut journal, &mut reads)
            .unwrap();
        assert!(
            matches!(answer, Some(ExtFunctionResult::Error(e)) if e.exc_type() == ExcType::OverflowError)
        );
    }

    #[test]
    fn virtual_paths_are_absolute_and_normalized() {
        for ok in ["/data", "/a/b", "/data-1/x_y"] {
            assert!(validate_virtual_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "data", "/", "/a/", "/a/../b", "/a/./b", "//a", "/a//b", "/a\0b", "",
        ] {
            assert!(validate_virtual_path(bad).is_err(), "{bad:?}");
        }
    }
}
