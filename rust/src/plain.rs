//! The journal's quick verdict on a value (issue 21): whether it is plain data of exact
//! types that also has a JSON form giving it back as it was, decided in one native walk.
//!
//! Every inline tool call checks its arguments and its result twice in Python: as plain
//! data that may cross the boundary (`codeact.runtime._values.problem`) and as JSON-native
//! (`codeact.agent._protocol._json_native`, which picks the journal's untagged form). On the
//! usual small dict those two walks were several Python calls per value. [`plain_json`]
//! answers both at once for the common case and only ever says yes where both Python checks
//! say yes; every other value (a subclass, bytes, a tuple or set, a non-str key, a big int,
//! a string with lone surrogates where they are refused, nesting near the limit) gets
//! `false`, and the caller's Python check gives the verdict and its message as before.
//! `tests/test_plain_json.py` holds it to that.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};

use crate::convert::MAX_DEPTH;

/// Whether `value` is None, or an exact `bool`, `int` (within `i64`, and of at most
/// `max_int_digits` decimal digits when given), `float` or `str` (without lone surrogates
/// unless `lone_surrogates`), or an exact `list` of such values or an exact `dict` with
/// exact `str` keys (the same rule for them) and such values, containers nested fewer than
/// `MAX_VALUE_DEPTH` levels. Never raises; false means "ask the Python check".
#[pyfunction]
#[pyo3(signature = (value, lone_surrogates, max_int_digits=None))]
pub fn plain_json(
    value: &Bound<'_, PyAny>,
    lone_surrogates: bool,
    max_int_digits: Option<&Bound<'_, PyAny>>,
) -> bool {
    let int_bound = match max_int_digits {
        None => None,
        Some(digits) => match digit_bound(digits) {
            Some(bound) => bound,
            None => return false,
        },
    };
    Rule {
        lone_surrogates,
        int_bound,
        json: None,
    }
    .accepts(value, 0)
}

/// `args_digest(value)` in the same walk, for the usual arguments (issue 21): 16 hex digits
/// of BLAKE2b (8-byte digest) over `value`'s compact JSON, byte for byte what
/// `pydantic_core.to_json` writes, for a value `plain_json(value, False, max_int_digits)`
/// accepts whose JSON is at most `max_bytes` long. When such a value holds a float (whose
/// text is pydantic's to write), the empty string: the value is plain, hash its JSON in
/// Python. None for every other value (the caller's Python path decides, as before).
/// Never raises: arguments of the wrong kind give None too.
#[pyfunction]
#[pyo3(signature = (value, max_int_digits, max_bytes))]
pub fn plain_json_digest(
    value: &Bound<'_, PyAny>,
    max_int_digits: &Bound<'_, PyAny>,
    max_bytes: &Bound<'_, PyAny>,
) -> Option<String> {
    use blake2::Blake2bVar;
    use blake2::digest::{Update, VariableOutput};

    let int_bound = digit_bound(max_int_digits)?;
    let max_bytes = match max_bytes.extract::<usize>() {
        Ok(n) if max_bytes.is_exact_instance_of::<PyInt>() => n,
        _ => return None,
    };
    let mut rule = Rule {
        lone_surrogates: false,
        int_bound,
        json: Some(Json {
            bytes: Vec::with_capacity(64),
            max_bytes,
            float_seen: false,
        }),
    };
    if !rule.accepts(value, 0) {
        return None;
    }
    let json = rule.json?;
    if json.bytes.len() > max_bytes {
        return None;
    }
    if json.float_seen {
        return Some(String::new());
    }
    let mut hasher = Blake2bVar::new(8).ok()?;
    hasher.update(&json.bytes);
    let mut digest = [0u8; 8];
    hasher.finalize_variable(&mut digest).ok()?;
    let mut hex = String::with_capacity(16);
    for byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    Some(hex)
}

/// The int bound for `max_int_digits`: None when it is no exact non-negative int of 32 bits
/// (never what a caller passes: the Python check then decides), else the magnitude ints
/// must stay under (None inside: every `i64` fits).
fn digit_bound(digits: &Bound<'_, PyAny>) -> Option<Option<u64>> {
    match digits.extract::<u32>() {
        Ok(d) if digits.is_exact_instance_of::<PyInt>() => Some(10u64.checked_pow(d)),
        _ => None,
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

struct Rule {
    lone_surrogates: bool,
    /// Ints of this magnitude or more have too many digits (None: every `i64` fits).
    int_bound: Option<u64>,
    /// Where the walk writes the value's JSON (`plain_json_digest`); None for `plain_json`.
    json: Option<Json>,
}

/// The JSON `plain_json_digest`'s walk writes (serde_json's compact form, which
/// pydantic_core writes).
struct Json {
    bytes: Vec<u8>,
    max_bytes: usize,
    /// A float was met: nothing is written for it (the JSON is then only checked, not
    /// hashed), and the rest of the value is still checked.
    float_seen: bool,
}

impl Rule {
    fn accepts(&mut self, value: &Bound<'_, PyAny>, depth: usize) -> bool {
        if let Some(json) = &self.json
            && json.bytes.len() > json.max_bytes
        {
            return false;
        }
        if value.is_none() {
            self.write(b"null");
            return true;
        }
        if value.is_exact_instance_of::<PyBool>() {
            self.write(if value.is_truthy().unwrap_or(false) {
                b"true"
            } else {
                b"false"
            });
            return true;
        }
        if value.is_exact_instance_of::<PyFloat>() {
            if let Some(json) = &mut self.json {
                json.float_seen = true;
            }
            return true;
        }
        if let Ok(s) = value.cast_exact::<PyString>() {
            return self.string(s);
        }
        if value.is_exact_instance_of::<PyInt>() {
            return match value.extract::<i64>() {
                Ok(i) if self.int_bound.is_none_or(|bound| i.unsigned_abs() < bound) => {
                    if let Some(json) = &mut self.json {
                        json.bytes.extend_from_slice(i.to_string().as_bytes());
                    }
                    true
                }
                _ => false,
            };
        }
        if depth >= MAX_DEPTH {
            return false;
        }
        if let Ok(list) = value.cast_exact::<PyList>() {
            self.write(b"[");
            for (i, item) in list.iter().enumerate() {
                if i > 0 {
                    self.write(b",");
                }
                if !self.accepts(&item, depth + 1) {
                    return false;
                }
            }
            self.write(b"]");
            return true;
        }
        if let Ok(dict) = value.cast_exact::<PyDict>() {
            self.write(b"{");
            for (i, (k, v)) in dict.iter().enumerate() {
                if i > 0 {
                    self.write(b",");
                }
                let Ok(key) = k.cast_exact::<PyString>() else {
                    return false;
                };
                if !self.string(key) {
                    return false;
                }
                self.write(b":");
                if !self.accepts(&v, depth + 1) {
                    return false;
                }
            }
            self.write(b"}");
            return true;
        }
        false
    }

    /// A string value or key: accepted unless it has lone surrogates where they are refused
    /// (`to_str` fails exactly on those: no UTF-8 form); written as JSON when writing.
    fn string(&mut self, s: &Bound<'_, PyString>) -> bool {
        if self.json.is_none() && self.lone_surrogates {
            return true; // nothing to write, nothing refused: no UTF-8 form is made
        }
        match s.to_str() {
            Ok(text) => {
                if let Some(json) = &mut self.json {
                    write_str(&mut json.bytes, text);
                }
                true
            }
            Err(_) => self.lone_surrogates,
        }
    }

    fn write(&mut self, text: &[u8]) {
        if let Some(json) = &mut self.json {
            json.bytes.extend_from_slice(text);
        }
    }
}

/// `s` as a JSON string the way serde_json escapes it: `"` and `\`, the short escapes
/// `\b \t \n \f \r`, other control characters as `\u00XX` (lowercase hex); everything
/// else as its UTF-8 bytes.
fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            0x0c => b"\\f",
            b'\r' => b"\\r",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}
