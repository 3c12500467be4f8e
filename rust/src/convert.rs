//! Plain-data conversion between Monty values and Python values.
//!
//! The value contract (SPEC §3): None, bool, int (any size), float (NaN and infinities
//! included), str, bytes, list, tuple and dict cross the boundary. Anything else is an
//! error naming the type and where it sits (`value['items'][2]`), never a crash.
//! Nesting deeper than [`MAX_DEPTH`] levels is refused the same way.

use monty_types::{DictPairs, MontyObject};
use num_bigint::BigInt;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// Deepest nesting of containers that may cross the boundary, in levels.
pub const MAX_DEPTH: usize = 200;

/// Where a value sits, rendered lazily only when an error is reported.
#[derive(Clone)]
enum Step {
    Index(usize),
    Key(String),
}

fn render_path(root: &str, steps: &[Step]) -> String {
    let mut out = root.to_string();
    for step in steps {
        match step {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Key(k) => out.push_str(&format!("[{k}]")),
        }
    }
    out
}

/// A value that cannot cross: what it is and where it sits.
pub struct ConvertError {
    pub type_name: String,
    pub path: String,
    pub too_deep: bool,
}

impl ConvertError {
    pub fn describe(&self) -> String {
        if self.too_deep {
            format!("{} nests deeper than {MAX_DEPTH} levels", self.path)
        } else {
            format!(
                "{} is {} {}, which cannot cross the boundary (allowed: None, bool, int, float, str, bytes, list, tuple, dict)",
                self.path,
                article(&self.type_name),
                self.type_name
            )
        }
    }
}

fn key_label(key: &MontyObject) -> String {
    match key {
        MontyObject::String(s) => format!("{s:?}").replace('"', "'"),
        other => other.py_repr(),
    }
}

// ---------------------------------------------------------------- Monty -> Python

/// Converts a Monty value to a Python value; `root` names it in errors (e.g. `result`).
pub fn monty_to_py(
    py: Python<'_>,
    value: &MontyObject,
    root: &str,
) -> Result<Py<PyAny>, ConvertError> {
    let mut steps = Vec::new();
    to_py(py, value, root, &mut steps).map(Bound::unbind)
}

/// A readable type name; values Monty only hands out as a repr (functions, classes,
/// modules) are named from that repr.
fn monty_type_label(value: &MontyObject) -> String {
    match value {
        MontyObject::Repr(text) | MontyObject::Cycle(_, text) => {
            let kind = text
                .trim_start_matches('<')
                .split([' ', '\'', '>'])
                .next()
                .unwrap_or("");
            match kind {
                "function" | "class" | "module" | "method" | "bound" => format!("{kind} ({text})"),
                "built-in" => format!("builtin function ({text})"),
                _ => format!("object ({text})"),
            }
        }
        MontyObject::Function { name, .. } => format!("function ({name})"),
        other => other.type_name().to_string(),
    }
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

fn unsupported_monty(value: &MontyObject, root: &str, steps: &[Step]) -> ConvertError {
    ConvertError {
        type_name: monty_type_label(value),
        path: render_path(root, steps),
        too_deep: false,
    }
}

fn to_py<'py>(
    py: Python<'py>,
    value: &MontyObject,
    root: &str,
    steps: &mut Vec<Step>,
) -> Result<Bound<'py, PyAny>, ConvertError> {
    if steps.len() > MAX_DEPTH {
        return Err(ConvertError {
            type_name: String::new(),
            path: render_path(root, steps),
            too_deep: true,
        });
    }
    let obj = match value {
        MontyObject::None => py.None().into_bound(py),
        MontyObject::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        MontyObject::Int(i) => i
            .into_pyobject(py)
            .expect("int conversion is infallible")
            .into_any(),
        MontyObject::BigInt(b) => b
            .into_pyobject(py)
            .expect("bigint conversion is infallible")
            .into_any(),
        MontyObject::Float(f) => PyFloat::new(py, *f).into_any(),
        MontyObject::String(s) => PyString::new(py, s).into_any(),
        MontyObject::Bytes(b) => PyBytes::new(py, b).into_any(),
        MontyObject::List(items) => {
            let list = PyList::empty(py);
            for (i, item) in items.iter().enumerate() {
                steps.push(Step::Index(i));
                let v = to_py(py, item, root, steps)?;
                steps.pop();
                list.append(v).expect("list append cannot fail");
            }
            list.into_any()
        }
        MontyObject::Tuple(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                steps.push(Step::Index(i));
                out.push(to_py(py, item, root, steps)?);
                steps.pop();
            }
            PyTuple::new(py, out)
                .expect("tuple build cannot fail")
                .into_any()
        }
        MontyObject::Dict(pairs) => {
            let dict = PyDict::new(py);
            for (k, v) in pairs {
                steps.push(Step::Key(key_label(k)));
                let key = match k {
                    MontyObject::List(_) | MontyObject::Dict(_) => {
                        return Err(unsupported_monty(k, root, steps));
                    }
                    _ => to_py(py, k, root, steps)?,
                };
                let val = to_py(py, v, root, steps)?;
                steps.pop();
                if dict.set_item(key, val).is_err() {
                    return Err(unsupported_monty(k, root, steps));
                }
            }
            dict.into_any()
        }
        other => return Err(unsupported_monty(other, root, steps)),
    };
    Ok(obj)
}

// ---------------------------------------------------------------- Python -> Monty

/// Converts a Python value to a Monty value; `root` names it in errors (e.g. `value`).
pub fn py_to_monty(value: &Bound<'_, PyAny>, root: &str) -> Result<MontyObject, ConvertError> {
    let mut steps = Vec::new();
    to_monty(value, root, &mut steps)
}

fn unsupported_py(value: &Bound<'_, PyAny>, root: &str, steps: &[Step]) -> ConvertError {
    let type_name = value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_string());
    ConvertError {
        type_name,
        path: render_path(root, steps),
        too_deep: false,
    }
}

fn to_monty(
    value: &Bound<'_, PyAny>,
    root: &str,
    steps: &mut Vec<Step>,
) -> Result<MontyObject, ConvertError> {
    if steps.len() > MAX_DEPTH {
        return Err(ConvertError {
            type_name: String::new(),
            path: render_path(root, steps),
            too_deep: true,
        });
    }
    // Exact types first (the common, fast path); subclasses of the plain types are
    // accepted afterwards by their base behaviour.
    if value.is_none() {
        return Ok(MontyObject::None);
    }
    if let Ok(s) = value.cast::<PyString>() {
        return s
            .to_str()
            .map(|s| MontyObject::String(s.to_owned()))
            .map_err(|_| ConvertError {
                type_name: "str with lone surrogates".to_string(),
                path: render_path(root, steps),
                too_deep: false,
            });
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(MontyObject::Bool(b.is_true()));
    }
    if value.cast::<PyInt>().is_ok() {
        if let Ok(i) = value.extract::<i64>() {
            return Ok(MontyObject::Int(i));
        }
        return value
            .extract::<BigInt>()
            .map(MontyObject::BigInt)
            .map_err(|_| unsupported_py(value, root, steps));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Ok(MontyObject::Float(f.value()));
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(MontyObject::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(list) = value.cast::<PyList>() {
        let mut out = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            steps.push(Step::Index(i));
            out.push(to_monty(&item, root, steps)?);
            steps.pop();
        }
        return Ok(MontyObject::List(out));
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        let mut out = Vec::with_capacity(tuple.len());
        for (i, item) in tuple.iter().enumerate() {
            steps.push(Step::Index(i));
            out.push(to_monty(&item, root, steps)?);
            steps.pop();
        }
        return Ok(MontyObject::Tuple(out));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut pairs = Vec::with_capacity(dict.len());
        for (k, v) in dict.iter() {
            let label = k
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_else(|_| "?".to_string());
            steps.push(Step::Key(label));
            let key = to_monty(&k, root, steps)?;
            if matches!(key, MontyObject::List(_) | MontyObject::Dict(_)) {
                return Err(unsupported_py(&k, root, steps));
            }
            let val = to_monty(&v, root, steps)?;
            steps.pop();
            pairs.push((key, val));
        }
        return Ok(MontyObject::Dict(DictPairs::from(pairs)));
    }
    Err(unsupported_py(value, root, steps))
}

// ---------------------------------------------------------------- plain-data check

/// Checks, without the GIL, that a Monty value is plain data that will convert.
pub fn check_plain(value: &MontyObject, root: &str) -> Result<(), ConvertError> {
    let mut steps = Vec::new();
    check(value, root, &mut steps)
}

fn check(value: &MontyObject, root: &str, steps: &mut Vec<Step>) -> Result<(), ConvertError> {
    if steps.len() > MAX_DEPTH {
        return Err(ConvertError {
            type_name: String::new(),
            path: render_path(root, steps),
            too_deep: true,
        });
    }
    match value {
        MontyObject::None
        | MontyObject::Bool(_)
        | MontyObject::Int(_)
        | MontyObject::BigInt(_)
        | MontyObject::Float(_)
        | MontyObject::String(_)
        | MontyObject::Bytes(_) => Ok(()),
        MontyObject::List(items) | MontyObject::Tuple(items) => {
            for (i, item) in items.iter().enumerate() {
                steps.push(Step::Index(i));
                check(item, root, steps)?;
                steps.pop();
            }
            Ok(())
        }
        MontyObject::Dict(pairs) => {
            for (k, v) in pairs {
                steps.push(Step::Key(key_label(k)));
                match k {
                    MontyObject::List(_) | MontyObject::Dict(_) => {
                        return Err(unsupported_monty(k, root, steps));
                    }
                    _ => check(k, root, steps)?,
                }
                check(v, root, steps)?;
                steps.pop();
            }
            Ok(())
        }
        other => Err(unsupported_monty(other, root, steps)),
    }
}
