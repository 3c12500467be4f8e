//! The traceback text of a script's uncaught exception, with Monty 1.4's missing positions
//! repaired.
//!
//! Monty 1.4 compiles the load of an augmented assignment's target (`counter += 1`) without
//! a source position of its own: when that load fails (`NameError`, `UnboundLocalError`)
//! the frame shows the position of the expression compiled before it, or, when there is
//! none in that function or module, no position at all: a file named `"\0"`, line 1. The
//! model would read a file it never wrote and a line that is not the one to fix. Here such
//! a frame is named after the script and pointed at the augmented assignment of the name
//! the error is about (the first one at or after where Monty placed it, when the script's
//! source is known).

use std::sync::Arc;

use crate::engine::interp::{CodeLoc, ExcType, MontyException, StackFrame};

/// The file name Monty gives a position it does not have.
pub const UNKNOWN_FILE: &str = "\0";

/// Whether `filename` is that of a position Monty does not have: [`UNKNOWN_FILE`] in a
/// frame, and in a suspension's position either that or the empty name of
/// `SourceRange::unknown`. A name looked up there is an augmented assignment's target, which
/// is never called.
pub fn unknown_position(filename: &str) -> bool {
    filename == UNKNOWN_FILE || filename.is_empty()
}

/// `exc` rendered as a traceback, repaired as the module documentation says. `source` is
/// the script and the file name its frames carry, when known (not for a script restored
/// from bytes: frames without position then take the name of the script's other frames).
///
/// A tool called inside a function that a builtin calls back (`sorted(key=...)`, `map`)
/// fails there with Monty's `NotImplementedError`, which the script can catch; uncaught, its
/// traceback ends with the way to write it instead ([`CALLBACK_HINT`]).
pub fn render(exc: MontyException, source: Option<(&str, &str)>) -> String {
    let hint = in_callback(&exc).then_some(CALLBACK_HINT);
    let text = render_frames(exc, source);
    match hint {
        Some(hint) => format!("{text}\n{hint}"),
        None => text,
    }
}

/// What the traceback of a tool call made inside a callback ends with.
pub const CALLBACK_HINT: &str = "A tool cannot be called inside a function that a builtin calls \
    back (a sorted/min/max key=, map, filter). Instead: call the tool for each item first, then \
    use the results: keys = {v: call_tool(...) for v in xs}; sorted(xs, key=lambda v: keys[v])";

/// Whether `exc` is Monty's refusal of an external (tool) call in a synchronous context.
fn in_callback(exc: &MontyException) -> bool {
    exc.exc_type() == ExcType::NotImplementedError
        && exc.message().is_some_and(|m| {
            m.starts_with("external function '")
                && m.ends_with("' cannot suspend in this synchronous context")
        })
}

fn render_frames(exc: MontyException, source: Option<(&str, &str)>) -> String {
    let name = failed_name(&exc);
    let frames = exc.traceback();
    let last = frames.len().saturating_sub(1);
    let broken = |i: usize, f: &StackFrame| {
        unknown_position(&f.filename)
            || (i == last
                && name.is_some_and(|n| {
                    source.is_some_and(|(_, file)| f.filename == file)
                        && !f.preview_line.as_deref().is_some_and(|l| mentions(l, n))
                }))
    };
    if !frames.iter().enumerate().any(|(i, f)| broken(i, f)) {
        return exc.to_string();
    }
    let file = source.map(|(_, file)| file.to_owned()).or_else(|| {
        frames
            .iter()
            .find(|f| !unknown_position(&f.filename))
            .map(|f| f.filename.clone())
    });
    let mut repaired = frames.to_vec();
    for (i, frame) in repaired.iter_mut().enumerate() {
        if !broken(i, frame) {
            continue;
        }
        let from = if unknown_position(&frame.filename) {
            // No position at all: the load is the first expression of its function (or
            // of the module), so look from the function's `def`.
            frame
                .frame_name
                .as_deref()
                .zip(source)
                .and_then(|(f, (script, _))| def_line(script, f))
                .unwrap_or(1)
        } else {
            frame.start.line
        };
        if let Some(file) = &file {
            frame.filename.clone_from(file);
        }
        let found = i == last && name.is_some();
        if let (true, Some(n), Some((script, _))) = (found, name, source)
            && let Some((line, column, text)) = augmented_assignment(script, n, from)
        {
            let width = n.chars().count() as u32;
            frame.start = CodeLoc { line, column };
            frame.end = CodeLoc {
                line,
                column: column + width,
            };
            frame.preview_line = Some(Arc::from(text));
            frame.hide_caret = false;
        }
    }
    let message = exc.message().map(str::to_owned);
    let mut exc = exc;
    let data = exc.take_data();
    MontyException::with_traceback(exc.exc_type(), message, repaired)
        .with_data(data)
        .to_string()
}

/// The name a `NameError` / `UnboundLocalError` is about, from its message.
fn failed_name(exc: &MontyException) -> Option<&str> {
    let prefix = match exc.exc_type() {
        ExcType::NameError => "name '",
        ExcType::UnboundLocalError => "cannot access local variable '",
        _ => return None,
    };
    let rest = exc.message()?.strip_prefix(prefix)?;
    let name = &rest[..rest.find('\'')?];
    (!name.is_empty() && name.chars().all(|c| c == '_' || c.is_alphanumeric())).then_some(name)
}

/// Whether `line` holds `name` as a whole identifier.
fn mentions(line: &str, name: &str) -> bool {
    let ident = |c: char| c == '_' || c.is_alphanumeric();
    line.match_indices(name).any(|(at, _)| {
        !line[..at].chars().next_back().is_some_and(ident)
            && !line[at + name.len()..].chars().next().is_some_and(ident)
    })
}

/// The 1-based line of `def <function>(` in `script`.
fn def_line(script: &str, function: &str) -> Option<u32> {
    script.lines().zip(1u32..).find_map(|(line, n)| {
        let rest = line.trim_start();
        let rest = rest.strip_prefix("async ").unwrap_or(rest);
        let rest = rest.strip_prefix("def ")?.trim_start();
        rest.strip_prefix(function)?
            .trim_start()
            .starts_with('(')
            .then_some(n)
    })
}

/// The first line at or after `from` (1-based) that starts with the augmented assignment
/// `name <op>= ...`: its number, the 1-based column of `name`, and its text.
fn augmented_assignment<'s>(script: &'s str, name: &str, from: u32) -> Option<(u32, u32, &'s str)> {
    const OPERATORS: [&str; 13] = [
        "+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", "<<=", ">>=",
    ];
    script
        .lines()
        .zip(1u32..)
        .skip(from.saturating_sub(1) as usize)
        .find_map(|(line, n)| {
            let body = line.trim_start();
            let rest = body.strip_prefix(name)?.trim_start();
            OPERATORS.iter().any(|op| rest.starts_with(op)).then(|| {
                let indent = line[..line.len() - body.len()].chars().count() as u32;
                (n, indent + 1, line)
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_augmented_assignment_of_the_name() {
        let script = "x = 1\ndef f():\n    y = 2\n    counter  += 1\ncounter = 3\ncounterx += 1\n";
        assert_eq!(
            augmented_assignment(script, "counter", 1),
            Some((4, 5, "    counter  += 1"))
        );
        assert_eq!(augmented_assignment(script, "counter", 5), None);
        assert_eq!(augmented_assignment(script, "y", 1), None);
        assert_eq!(def_line(script, "f"), Some(2));
        assert_eq!(def_line(script, "g"), None);
    }

    #[test]
    fn a_name_is_mentioned_as_a_whole_identifier() {
        assert!(mentions("counter += 1", "counter"));
        assert!(mentions("x = (counter)", "counter"));
        assert!(!mentions("counters = 1", "counter"));
        assert!(!mentions("x = 5", "counter"));
    }
}
