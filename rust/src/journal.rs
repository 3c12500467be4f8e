//! The OS journal: the nondeterministic answers a script gets (clock reads, the random
//! seed, entropy), logged per advance and replayable in order.
//!
//! A durable host stores each advance's `os_log`; to re-run a script to the same state it
//! passes the stored entries back as `os_replay`, and every request is answered from the
//! replay first (in order), then live. A request whose kind differs from the next replay
//! entry's kind is a [`HostError::ReplayDivergence`].

use std::collections::VecDeque;

use crate::errors::HostError;
use crate::os_policy::AdvanceClock;

/// One journaled value: plain JSON data.
#[derive(Debug, Clone, PartialEq)]
pub enum JVal {
    Int(i64),
    Float(f64),
    Str(String),
    /// Only the file layer's entry ([`crate::files::FILES`]) carries bytes.
    Bytes(Vec<u8>),
}

/// `(kind, value)` entries, in the order the script asked for them.
pub type OsLog = Vec<(String, JVal)>;

/// Kind of the entry holding the `random` module's seed (first entry of a start).
pub const RANDOM_SEED: &str = "random_seed";
/// Kind of a clock read: the UTC instant, in float seconds since the Unix epoch.
pub const CLOCK: &str = "clock";
/// Kind of an `os.urandom` answer: the bytes, hex-encoded.
pub const URANDOM: &str = "urandom";

/// Replay entries still to answer from, and the log of this advance; and the advance's
/// clock (its time budget, charged at each OS call).
#[derive(Debug, Default)]
pub struct Journal {
    replay: VecDeque<(String, JVal)>,
    log: OsLog,
    pub clock: AdvanceClock,
    /// The session's file layer when the host gave one (`crate::files`): read-write mounts
    /// are then overlays rebuilt from it, and the advance hands it back updated.
    pub files: Option<crate::files::Layer>,
    /// Whether a mount was used in this advance (its layer goes back in the log).
    pub files_touched: bool,
}

impl Journal {
    pub fn new(replay: OsLog) -> Self {
        Self {
            replay: replay.into(),
            log: Vec::new(),
            clock: AdvanceClock::default(),
            files: None,
            files_touched: false,
        }
    }

    /// Answers a request of `kind`: from the replay when an entry is left, else `live()`.
    /// The answer is logged either way.
    pub fn answer(&mut self, kind: &str, live: impl FnOnce() -> JVal) -> Result<JVal, HostError> {
        let value = match self.replay.pop_front() {
            Some((k, v)) if k == kind => v,
            Some((k, _)) => {
                return Err(HostError::ReplayDivergence(format!(
                    "the script asked for '{kind}' where the journal recorded '{k}': the script \
                     no longer makes the same requests in the same order"
                )));
            }
            None => live(),
        };
        self.log.push((kind.to_owned(), value.clone()));
        Ok(value)
    }

    /// The seed of the `random` module for a start: replayed or fresh from the OS.
    pub fn random_seed(&mut self) -> Result<i64, HostError> {
        let v = self.answer(RANDOM_SEED, || {
            // Non-negative and exactly representable as a JSON number in most decoders.
            JVal::Int((fresh_seed() >> 11) as i64)
        })?;
        match v {
            JVal::Int(i) => Ok(i),
            other => Err(HostError::ReplayDivergence(format!(
                "the journal's random seed is not an integer: {other:?}"
            ))),
        }
    }

    /// The advance's log; the file layer last, when the advance used a mount.
    pub fn into_log(mut self) -> OsLog {
        if self.files_touched
            && let Some(layer) = &self.files
        {
            let bytes = crate::files::encode(layer);
            self.log
                .push((crate::files::FILES.to_owned(), JVal::Bytes(bytes)));
        }
        self.log
    }
}

/// A fresh seed for a start's `random` module without a system call per start (reading
/// `/dev/urandom` was three, about a third of starting `1 + 1`): SplitMix64 over a key drawn
/// once per process from the OS, the process id (a forked child draws other seeds) and a
/// counter. Python's `random` is not for secrets, in Monty as in CPython; `os.urandom` still
/// reads the OS source each time.
fn fresh_seed() -> u64 {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static KEY: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let key = *KEY.get_or_init(|| {
        let mut buf = [0u8; 8];
        fill_random(&mut buf);
        u64::from_le_bytes(buf)
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut z = key
        ^ (u64::from(crate::process::process_id()) << 40)
        ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fills `buf` from the OS entropy source (falls back to a time-and-address hash).
pub fn fill_random(buf: &mut [u8]) {
    use std::io::Read;
    if let Ok(mut f) = std::fs::File::open("/dev/urandom")
        && f.read_exact(buf).is_ok()
    {
        return;
    }
    use std::hash::{BuildHasher, Hasher};
    for chunk in buf.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        let bytes = h.finish().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_in_order_then_answers_live() {
        let mut j = Journal::new(vec![(CLOCK.into(), JVal::Float(1.5))]);
        assert_eq!(
            j.answer(CLOCK, || JVal::Float(9.0)).unwrap(),
            JVal::Float(1.5)
        );
        assert_eq!(
            j.answer(CLOCK, || JVal::Float(9.0)).unwrap(),
            JVal::Float(9.0)
        );
        assert_eq!(j.into_log().len(), 2);
    }

    #[test]
    fn a_different_kind_diverges() {
        let mut j = Journal::new(vec![(URANDOM.into(), JVal::Str("00".into()))]);
        assert!(matches!(
            j.answer(CLOCK, || JVal::Float(0.0)),
            Err(HostError::ReplayDivergence(_))
        ));
    }

    #[test]
    fn fresh_seeds_do_not_repeat() {
        let seeds: std::collections::HashSet<u64> = (0..100_000).map(|_| fresh_seed()).collect();
        assert_eq!(seeds.len(), 100_000);
        let mut j = Journal::new(Vec::new());
        let (a, b) = (j.random_seed().unwrap(), j.random_seed().unwrap());
        assert!(a >= 0 && b >= 0 && a != b);
    }
}
