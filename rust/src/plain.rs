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
    // A bound that is not a non-negative int of 32 bits (never what a caller passes) is left
    // to the Python check, as is every other doubt.
    let int_bound = match max_int_digits {
        None => None,
        Some(digits) => match digits.extract::<u32>() {
            Ok(d) if digits.is_exact_instance_of::<PyInt>() => 10u64.checked_pow(d),
            _ => return false,
        },
    };
    Rule {
        lone_surrogates,
        int_bound,
    }
    .accepts(value, 0)
}

struct Rule {
    lone_surrogates: bool,
    /// Ints of this magnitude or more have too many digits (None: every `i64` fits).
    int_bound: Option<u64>,
}

impl Rule {
    fn accepts(&self, value: &Bound<'_, PyAny>, depth: usize) -> bool {
        if value.is_none()
            || value.is_exact_instance_of::<PyBool>()
            || value.is_exact_instance_of::<PyFloat>()
        {
            return true;
        }
        if let Ok(s) = value.cast_exact::<PyString>() {
            return self.string(s);
        }
        if value.is_exact_instance_of::<PyInt>() {
            return match value.extract::<i64>() {
                Ok(i) => self.int_bound.is_none_or(|bound| i.unsigned_abs() < bound),
                Err(_) => false,
            };
        }
        if depth >= MAX_DEPTH {
            return false;
        }
        if let Ok(list) = value.cast_exact::<PyList>() {
            return list.iter().all(|item| self.accepts(&item, depth + 1));
        }
        if let Ok(dict) = value.cast_exact::<PyDict>() {
            return dict.iter().all(|(k, v)| {
                k.cast_exact::<PyString>().is_ok_and(|k| self.string(k))
                    && self.accepts(&v, depth + 1)
            });
        }
        false
    }

    fn string(&self, s: &Bound<'_, PyString>) -> bool {
        // `to_str` fails exactly on a string with lone surrogates (no UTF-8 form).
        self.lone_surrogates || s.to_str().is_ok()
    }
}
