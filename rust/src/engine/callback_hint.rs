//! The message a script catches when it calls a tool inside a callback Monty runs
//! synchronously (a `sorted()`/`min()`/`max()` key, a `map()` or `filter()` function):
//! there the interpreter cannot pause for the host, so the call raises `NotImplementedError`.
//! Monty's own text ("cannot suspend in this synchronous context") tells the model nothing it
//! can act on; with this hook (a patch of `monty`, ADR 0003) the exception's message is
//! codeact's hint ([`CALLBACK_HINT`]), whether the script catches it or not (issue 23).

use crate::engine::interp;
use crate::traceback::CALLBACK_HINT;

/// Installs [`message`] as Monty's wording for such calls (idempotent).
pub fn install() {
    let _ = interp::SYNCHRONOUS_CALL_MESSAGE.set(message);
}

/// The hint for a tool (an external function: `call_tool`, or in the functions style the
/// tool's own name, which the hint's example then uses); `None` keeps Monty's text for OS
/// functions and host methods.
fn message(kind: &str, name: &str) -> Option<String> {
    (kind == "external function").then(|| CALLBACK_HINT.replace("call_tool(", &format!("{name}(")))
}

#[cfg(test)]
mod tests {
    use super::{CALLBACK_HINT, message};

    #[test]
    fn tools_get_the_hint_and_other_host_calls_keep_montys_text() {
        assert_eq!(
            message("external function", "call_tool").as_deref(),
            Some(CALLBACK_HINT)
        );
        let named = message("external function", "score").unwrap();
        assert!(
            named.contains("keys = {v: score(...) for v in xs}"),
            "{named}"
        );
        assert_eq!(message("OS function", "Path.read_text"), None);
        assert_eq!(message("method call", "m"), None);
    }
}
