//! Captured `print()` output with a byte cap that truncates with a visible marker.

use std::borrow::Cow;

use monty_types::{MontyException, PrintWriterCallback};

/// Collects one advance's stdout. Past `cap` bytes, output is dropped and a marker is
/// appended once, so a flood can neither exhaust host memory nor vanish silently.
pub struct CappedOutput {
    pub text: String,
    cap: usize,
    truncated: bool,
}

impl CappedOutput {
    pub fn new(cap: usize) -> Self {
        Self {
            text: String::new(),
            cap,
            truncated: false,
        }
    }

    fn push(&mut self, s: &str) {
        if self.truncated {
            return;
        }
        let room = self.cap.saturating_sub(self.text.len());
        if s.len() <= room {
            self.text.push_str(s);
            return;
        }
        let mut cut = room;
        while cut > 0 && !s.is_char_boundary(cut) {
            cut -= 1;
        }
        self.text.push_str(&s[..cut]);
        self.text.push_str(&format!(
            "\n[stdout truncated: more than {} bytes printed in one step]\n",
            self.cap
        ));
        self.truncated = true;
    }
}

impl PrintWriterCallback for CappedOutput {
    fn stdout_write(&mut self, output: Cow<'_, str>) -> Result<(), MontyException> {
        self.push(&output);
        Ok(())
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        let mut buf = [0u8; 4];
        self.push(end.encode_utf8(&mut buf));
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
    fn keeps_everything_under_the_cap() {
        let mut out = CappedOutput::new(100);
        out.stdout_write(Cow::Borrowed("hello")).unwrap();
        out.stdout_push('\n').unwrap();
        assert_eq!(out.text, "hello\n");
    }
}
