//! Captured `print()` output with a byte cap that truncates with a visible marker.
//!
//! stdout and stderr (`print(..., file=sys.stderr)`) are kept apart, and the cap counts them
//! together: one `used` count, one marker, in the stream where the cut falls.
//!
//! The cap (`max_stdout`) bounds a whole run, not one advance: [`RunOutput`] carries what the
//! run printed so far from advance to advance (and inside its snapshots), and each advance's
//! [`CappedOutput`] only takes what is left. The marker is shown once per run, where the cut
//! falls; later output of the run is dropped. Host memory holds at most the cap (across the
//! steps the host keeps) plus the marker.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock};

use crate::engine::interp::{MontyException, PrintWriterCallback};

use crate::live::{LiveOutput, Stream};

/// What a run printed so far: bytes kept (across its advances) and whether it was cut.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Printed {
    pub used: usize,
    pub truncated: bool,
}

/// The run-wide stdout account, shared by the advances of one run, and the run's live
/// output listener when it has one ([`crate::live`]).
#[derive(Default)]
pub struct RunOutput {
    printed: Mutex<Printed>,
    live: OnceLock<Arc<LiveOutput>>,
}

impl RunOutput {
    pub fn new(printed: Printed) -> Self {
        Self {
            printed: Mutex::new(printed),
            live: OnceLock::new(),
        }
    }

    /// Gives the run a live output listener; false when it already has one.
    pub fn listen(&self, live: Arc<LiveOutput>) -> bool {
        self.live.set(live).is_ok()
    }

    pub fn get(&self) -> Printed {
        *self
            .printed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The capture of the next advance: what is left of `cap` after what the run printed.
    pub fn capture(&self, cap: usize) -> CappedOutput {
        CappedOutput::continuing(cap, self.get()).with_live(self.live.get().cloned())
    }

    /// Records what an advance printed.
    pub fn keep(&self, out: &CappedOutput) {
        *self
            .printed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = out.printed();
    }
}

/// Collects one advance's stdout and stderr. Past `cap` bytes printed in the run (both
/// streams), output is dropped and a marker is appended once, so a flood can neither exhaust
/// host memory nor vanish silently.
pub struct CappedOutput {
    /// stdout.
    pub text: String,
    /// stderr.
    pub err: String,
    cap: usize,
    /// Bytes the run kept before this advance, plus this advance's.
    used: usize,
    truncated: bool,
    /// Where what is kept also goes as it is printed (the run's `on_output` listener).
    live: Option<Arc<LiveOutput>>,
    /// Kept text not yet handed to `live`, and its stream: handed over between whole prints
    /// ([`Self::release`]), so one `print` (Monty writes its parts one call each) is never
    /// delivered in pieces.
    unsent: String,
    unsent_stream: Stream,
}

impl CappedOutput {
    /// The capture of a run's first advance.
    pub fn new(cap: usize) -> Self {
        Self::continuing(cap, Printed::default())
    }

    /// The capture of an advance of a run that already printed `printed`.
    pub fn continuing(cap: usize, printed: Printed) -> Self {
        Self {
            text: String::new(),
            err: String::new(),
            cap,
            used: printed.used,
            truncated: printed.truncated,
            live: None,
            unsent: String::new(),
            unsent_stream: Stream::Stdout,
        }
    }

    /// The same capture, also handing what it keeps to `live` as it is printed.
    pub fn with_live(mut self, live: Option<Arc<LiveOutput>>) -> Self {
        self.live = live;
        self
    }

    /// The run's account after this advance.
    pub fn printed(&self) -> Printed {
        Printed {
            used: self.used,
            truncated: self.truncated,
        }
    }

    fn push(&mut self, s: &str, stderr: bool) {
        if self.truncated {
            return;
        }
        let room = self.cap.saturating_sub(self.used);
        let (stream, name) = if stderr {
            (&mut self.err, "stderr")
        } else {
            (&mut self.text, "stdout")
        };
        if s.len() <= room {
            stream.push_str(s);
            self.used += s.len();
            self.forward(s, stderr);
            return;
        }
        let mut cut = room;
        while cut > 0 && !s.is_char_boundary(cut) {
            cut -= 1;
        }
        stream.push_str(&s[..cut]);
        self.used += cut;
        let both = if self.err.is_empty() && !stderr {
            ""
        } else {
            " (stdout and stderr together)"
        };
        let marker = format!(
            "\n[{name} truncated: the script printed more than max_stdout={} bytes{both} in this \
             run; the rest of its output is dropped]\n",
            self.cap
        );
        let stream = if stderr {
            &mut self.err
        } else {
            &mut self.text
        };
        stream.push_str(&marker);
        self.truncated = true;
        self.forward(&s[..cut], stderr);
        self.forward(&marker, stderr);
    }

    /// Keeps kept text for the live listener, if the run has one.
    fn forward(&mut self, kept: &str, stderr: bool) {
        if self.live.is_none() || kept.is_empty() {
            return;
        }
        let stream = if stderr {
            Stream::Stderr
        } else {
            Stream::Stdout
        };
        if stream != self.unsent_stream {
            self.release();
            self.unsent_stream = stream;
        }
        self.unsent.push_str(kept);
    }

    /// Hands what was printed since the last release to the live listener (a cheap no-op
    /// without one). Called between whole prints: at the interpreter's periodic checkpoint
    /// (`poll_flush`) and by the driver whenever the host has the turn.
    pub fn release(&mut self) {
        if let Some(live) = &self.live
            && !self.unsent.is_empty()
        {
            live.push(self.unsent_stream, &self.unsent);
            self.unsent.clear();
        }
    }
}

impl PrintWriterCallback for CappedOutput {
    fn stdout_write(&mut self, output: Cow<'_, str>) -> Result<(), MontyException> {
        self.push(&output, false);
        Ok(())
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        let mut buf = [0u8; 4];
        self.push(end.encode_utf8(&mut buf), false);
        Ok(())
    }

    fn stderr_write(&mut self, output: Cow<'_, str>) -> Result<(), MontyException> {
        self.push(&output, true);
        Ok(())
    }

    fn stderr_push(&mut self, end: char) -> Result<(), MontyException> {
        let mut buf = [0u8; 4];
        self.push(end.encode_utf8(&mut buf), true);
        Ok(())
    }

    fn poll_flush(&mut self) -> Result<(), MontyException> {
        self.release();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_once_on_a_char_boundary_with_a_marker() {
        let mut out = CappedOutput::new(5);
        out.stdout_write(Cow::Borrowed("abcé")).unwrap();
        out.stdout_write(Cow::Borrowed("éxyz")).unwrap();
        out.stdout_push('\n').unwrap();
        assert!(out.text.starts_with("abcé"));
        assert_eq!(out.text.matches("stdout truncated").count(), 1);
        assert!(!out.text.contains("xyz"));
    }

    #[test]
    fn the_cap_holds_across_advances_of_one_run() {
        let run = RunOutput::default();
        let mut first = run.capture(8);
        first.stdout_write(Cow::Borrowed("12345")).unwrap();
        run.keep(&first);
        assert_eq!(first.text, "12345");
        let mut second = run.capture(8);
        second.stdout_write(Cow::Borrowed("67890")).unwrap();
        run.keep(&second);
        assert!(second.text.starts_with("678\n[stdout truncated"));
        let mut third = run.capture(8);
        third.stdout_write(Cow::Borrowed("more")).unwrap();
        assert_eq!(third.text, "", "the marker is shown once per run");
        assert_eq!(
            run.get(),
            Printed {
                used: 8,
                truncated: true
            }
        );
    }

    #[test]
    fn stderr_is_kept_apart_and_the_cap_counts_both_streams() {
        let mut out = CappedOutput::new(10);
        out.stdout_write(Cow::Borrowed("out")).unwrap();
        out.stderr_write(Cow::Borrowed("err")).unwrap();
        out.stderr_push('\n').unwrap();
        out.stdout_push('\n').unwrap();
        assert_eq!((out.text.as_str(), out.err.as_str()), ("out\n", "err\n"));
        out.stderr_write(Cow::Borrowed("12345")).unwrap();
        assert!(out.err.starts_with("err\n12\n[stderr truncated"));
        assert!(out.err.contains("(stdout and stderr together)"));
        out.stdout_write(Cow::Borrowed("more")).unwrap();
        assert_eq!(out.text, "out\n", "nothing after the cut, in either stream");
        assert_eq!(
            out.printed(),
            Printed {
                used: 10,
                truncated: true
            }
        );
    }

    #[test]
    fn keeps_everything_under_the_cap() {
        let mut out = CappedOutput::new(100);
        out.stdout_write(Cow::Borrowed("hello")).unwrap();
        out.stdout_push('\n').unwrap();
        assert_eq!(out.text, "hello\n");
    }
}
