//! The OS-access policy: mounted folders, the environment map and the clock switch.
//!
//! Every OS effect a script asks for is answered here, in place, never as a tool and
//! never by pausing the agent. The filesystem boundary itself (canonicalization,
//! mount-prefix matching, symlink-escape detection) is enforced by `monty-fs`.

use std::collections::HashSet;
use std::path::PathBuf;

use chrono::{Datelike, FixedOffset, Local, TimeZone, Timelike};
use monty_fs::{MountCallOutcome, MountError, MountMode, MountTable};
use monty_types::{
    DictPairs, ExcType, ExtFunctionResult, MontyDate, MontyDateTime, MontyException, MontyObject,
    MontyTimeZone, OsFunctionCall,
};

use crate::errors::HostError;

/// One host folder visible to scripts at `virtual_path`.
#[derive(Debug, Clone)]
pub struct MountSpec {
    pub virtual_path: String,
    pub host_path: PathBuf,
    pub read_write: bool,
}

/// What a script may see of the host besides its tools.
#[derive(Debug, Clone, Default)]
pub struct OsPolicy {
    pub mounts: Vec<MountSpec>,
    pub environ: Vec<(String, String)>,
    pub system_clock: bool,
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
    ) -> Result<Self, HostError> {
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
        })
    }

    /// Builds the mount table for one advance (only when a filesystem call arrives).
    pub fn mount_table(&self) -> Result<MountTable, HostError> {
        let mut table = MountTable::new();
        for m in &self.mounts {
            let mode = if m.read_write {
                MountMode::ReadWrite
            } else {
                MountMode::ReadOnly
            };
            table
                .mount(&m.virtual_path, &m.host_path, mode, None)
                .map_err(|e| {
                    HostError::Internal(format!(
                        "failed to mount {} at {}: {e}",
                        m.host_path.display(),
                        m.virtual_path
                    ))
                })?;
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
                    Some((_, v)) => ExtFunctionResult::Return(MontyObject::String(v.clone())),
                    None => ExtFunctionResult::Return(args.default),
                }
            }
            OsFunctionCall::GetEnviron => {
                let pairs: Vec<(MontyObject, MontyObject)> = self
                    .environ
                    .iter()
                    .map(|(k, v)| {
                        (
                            MontyObject::String(k.clone()),
                            MontyObject::String(v.clone()),
                        )
                    })
                    .collect();
                ExtFunctionResult::Return(MontyObject::Dict(DictPairs::from(pairs)))
            }
            OsFunctionCall::DateToday => match self.clock_refusal() {
                Some(err) => err,
                None => {
                    let now = Local::now();
                    ExtFunctionResult::Return(MontyObject::Date(MontyDate {
                        year: now.year(),
                        month: now.month() as u8,
                        day: now.day() as u8,
                    }))
                }
            },
            OsFunctionCall::DateTimeNow(tz) => match self.clock_refusal() {
                Some(err) => err,
                None => now_datetime(tz),
            },
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
                    )) if existence_check => ExtFunctionResult::Return(MontyObject::Bool(false)),
                    MountCallOutcome::Handled(Err(e)) => {
                        ExtFunctionResult::Error(e.into_exception())
                    }
                    MountCallOutcome::NotHandled(c) => no_handler(c),
                }
            }
        }
    }

    fn clock_refusal(&self) -> Option<ExtFunctionResult> {
        if self.system_clock {
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

fn no_handler(call: OsFunctionCall) -> ExtFunctionResult {
    if call.is_existence_check() {
        ExtFunctionResult::Return(MontyObject::Bool(false))
    } else {
        ExtFunctionResult::Error(call.on_no_handler())
    }
}

fn now_datetime(tz: Option<MontyTimeZone>) -> ExtFunctionResult {
    let (naive, offset, name) = match tz {
        None => (Local::now().naive_local(), None, None),
        Some(tz) => {
            let Some(fixed) = FixedOffset::east_opt(tz.offset_seconds) else {
                return ExtFunctionResult::Error(MontyException::new(
                    ExcType::ValueError,
                    Some(format!("invalid UTC offset: {} seconds", tz.offset_seconds)),
                ));
            };
            (
                fixed
                    .from_utc_datetime(&chrono::Utc::now().naive_utc())
                    .naive_local(),
                Some(tz.offset_seconds),
                tz.name,
            )
        }
    };
    ExtFunctionResult::Return(MontyObject::DateTime(MontyDateTime {
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
    use super::validate_virtual_path;

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
