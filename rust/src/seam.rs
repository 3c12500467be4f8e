//! The hot half of the runtime seam, native: the `ResumeValue` / `ResumeError` outcome
//! classes (re-exported by `codeact.runtime`) and a fast way to build the pure-Python step
//! dataclasses (`Call`, `Complete`, `Raised`).
//!
//! A tool round trip creates one outcome and one step. As frozen Python dataclasses the
//! outcome cost about a microsecond to build (every field goes through
//! `object.__setattr__`) and a `getattr` to read; here it is a plain native object read in
//! place. The steps stay Python dataclasses (equality, `repr`, `dataclasses.replace` and
//! the rest unchanged); the engine fills their slots directly instead of running their
//! generated `__init__`, which is all that `__init__` does.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyTuple, PyType};
use pyo3::{ffi, intern};

static FROZEN_INSTANCE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// `dataclasses.FrozenInstanceError` for an assignment to `name`, as a frozen dataclass raises.
fn frozen_error(py: Python<'_>, name: &str) -> PyErr {
    let class = FROZEN_INSTANCE_ERROR.get_or_try_init(py, || {
        py.import("dataclasses")?
            .getattr("FrozenInstanceError")?
            .cast_into::<PyType>()
            .map(Bound::unbind)
            .map_err(PyErr::from)
    });
    match class {
        Ok(class) => PyErr::from_type(
            class.bind(py).clone(),
            format!("cannot assign to field '{name}'"),
        ),
        Err(e) => e,
    }
}

/// Whether `a` and `b` are equal as one-field tuples compare (identity first, then `==`),
/// as a dataclass's `__eq__` does.
fn fields_equal(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
    if a.is(b) {
        return Ok(true);
    }
    a.eq(b)
}

/// Resume a paused call: the call returns `value` (plain data: None, bool, int, float,
/// str, bytes, list, tuple, dict).
#[pyclass(frozen, subclass, module = "codeact.runtime", name = "ResumeValue")]
pub struct ResumeValue {
    pub(crate) value: Py<PyAny>,
}

#[pymethods]
impl ResumeValue {
    #[new]
    fn new(value: Py<PyAny>) -> Self {
        Self { value }
    }

    /// The value the paused call returns.
    #[getter]
    fn value(&self, py: Python<'_>) -> Py<PyAny> {
        self.value.clone_ref(py)
    }

    #[classattr]
    fn __match_args__() -> (&'static str,) {
        ("value",)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(format!(
            "{}(value={})",
            slf.get_type().qualname()?,
            slf.get().value.bind(slf.py()).repr()?
        ))
    }

    fn __eq__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        if !other.get_type().is(slf.get_type()) {
            return Ok(py.NotImplemented());
        }
        let other = other.cast::<Self>()?;
        let equal = fields_equal(slf.get().value.bind(py), other.get().value.bind(py))?;
        Ok(pyo3::types::PyBool::new(py, equal)
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        PyTuple::new(py, [self.value.bind(py)])?.hash()
    }

    fn __setattr__(&self, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(frozen_error(_value.py(), name))
    }

    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(frozen_error(py, name))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        PyTuple::new(
            py,
            [
                slf.get_type().into_any(),
                PyTuple::new(py, [slf.get().value.bind(py)])?.into_any(),
            ],
        )
    }
}

/// Resume a paused call by raising an exception the script can catch.
///
/// Attributes:
///     message: the exception's message.
///     exc_type: the name of a builtin exception type (``RuntimeError`` by default; an
///         unknown name falls back to ``RuntimeError``).
#[pyclass(frozen, subclass, module = "codeact.runtime", name = "ResumeError")]
pub struct ResumeError {
    pub(crate) message: Py<PyAny>,
    pub(crate) exc_type: Py<PyAny>,
}

#[pymethods]
impl ResumeError {
    #[new]
    #[pyo3(signature = (message, exc_type = None), text_signature = "(message, exc_type='RuntimeError')")]
    fn new(py: Python<'_>, message: Py<PyAny>, exc_type: Option<Py<PyAny>>) -> Self {
        Self {
            message,
            exc_type: exc_type
                .unwrap_or_else(|| intern!(py, "RuntimeError").clone().into_any().unbind()),
        }
    }

    /// The exception's message.
    #[getter]
    fn message(&self, py: Python<'_>) -> Py<PyAny> {
        self.message.clone_ref(py)
    }

    /// The name of the builtin exception type raised in the script.
    #[getter]
    fn exc_type(&self, py: Python<'_>) -> Py<PyAny> {
        self.exc_type.clone_ref(py)
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("message", "exc_type")
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let me = slf.get();
        Ok(format!(
            "{}(message={}, exc_type={})",
            slf.get_type().qualname()?,
            me.message.bind(py).repr()?,
            me.exc_type.bind(py).repr()?
        ))
    }

    fn __eq__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        if !other.get_type().is(slf.get_type()) {
            return Ok(py.NotImplemented());
        }
        let (me, other) = (slf.get(), other.cast::<Self>()?.get());
        let equal = fields_equal(me.message.bind(py), other.message.bind(py))?
            && fields_equal(me.exc_type.bind(py), other.exc_type.bind(py))?;
        Ok(pyo3::types::PyBool::new(py, equal)
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        PyTuple::new(py, [self.message.bind(py), self.exc_type.bind(py)])?.hash()
    }

    fn __setattr__(&self, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(frozen_error(_value.py(), name))
    }

    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(frozen_error(py, name))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let me = slf.get();
        PyTuple::new(
            py,
            [
                slf.get_type().into_any(),
                PyTuple::new(py, [me.message.bind(py), me.exc_type.bind(py)])?.into_any(),
            ],
        )
    }
}

/// A registered step dataclass and how to build it.
pub struct StepClass {
    class: Py<PyType>,
    /// The interned field names, in declaration order, when the class is a plain dataclass
    /// with exactly these fields and no `__post_init__` (its `__init__` only assigns them):
    /// then instances are built without running `__init__`.
    direct: Option<[Py<PyString>; 3]>,
}

impl StepClass {
    /// Inspects `class` once, at registration: `fields` are the names the engine fills.
    pub fn new(py: Python<'_>, class: Py<PyType>, fields: [&str; 3]) -> PyResult<Self> {
        let direct = if plain_dataclass(class.bind(py), &fields)? {
            Some(fields.map(|f| PyString::intern(py, f).unbind()))
        } else {
            None
        };
        Ok(Self { class, direct })
    }

    /// An instance with `values` as its three fields.
    pub fn build(&self, py: Python<'_>, values: [Bound<'_, PyAny>; 3]) -> PyResult<Py<PyAny>> {
        let class = self.class.bind(py);
        let Some(names) = &self.direct else {
            return class.call1(PyTuple::new(py, values)?).map(Bound::unbind);
        };
        // SAFETY: `tp_new` is read from a live type object (every type has one: a
        // dataclass inherits `object.__new__`) and called with that type and an empty
        // argument tuple, as `type.__call__` would; the result is checked for NULL.
        let obj = unsafe {
            let tp = class.as_type_ptr();
            let new = ffi::PyType_GetSlot(tp, ffi::Py_tp_new);
            if new.is_null() {
                return class.call1(PyTuple::new(py, values)?).map(Bound::unbind);
            }
            let new: ffi::newfunc = std::mem::transmute(new);
            let empty = PyTuple::empty(py);
            Bound::from_owned_ptr_or_err(py, new(tp, empty.as_ptr(), std::ptr::null_mut()))?
        };
        for (name, value) in names.iter().zip(values) {
            obj.setattr(name.bind(py), value)?;
        }
        Ok(obj.unbind())
    }
}

/// Whether `class` is a dataclass whose fields are exactly `fields`, all set by its
/// generated `__init__`, with no `__post_init__` and `object.__new__`.
fn plain_dataclass(class: &Bound<'_, PyType>, fields: &[&str; 3]) -> PyResult<bool> {
    let py = class.py();
    let dataclasses = py.import("dataclasses")?;
    if !dataclasses
        .getattr("is_dataclass")?
        .call1((class,))?
        .is_truthy()?
    {
        return Ok(false);
    }
    if class.hasattr(intern!(py, "__post_init__"))? {
        return Ok(false);
    }
    let object_new = py
        .get_type::<pyo3::types::PyAny>()
        .getattr(intern!(py, "__new__"))?;
    if !class.getattr(intern!(py, "__new__"))?.is(&object_new) {
        return Ok(false);
    }
    let declared = dataclasses.getattr("fields")?.call1((class,))?;
    let mut names = Vec::new();
    for field in declared.try_iter()? {
        let field = field?;
        if !field.getattr(intern!(py, "init"))?.is_truthy()? {
            return Ok(false);
        }
        names.push(field.getattr(intern!(py, "name"))?.extract::<String>()?);
    }
    Ok(names == fields)
}

/// Reads a native `ResumeValue` (or subclass); None for anything else.
pub fn native_value<'py>(outcome: &Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
    outcome
        .cast::<ResumeValue>()
        .ok()
        .map(|v| v.get().value.bind(outcome.py()).clone())
}

/// Reads a native `ResumeError` (or subclass) as `(message, exc_type)`.
pub fn native_error(outcome: &Bound<'_, PyAny>) -> Option<PyResult<(String, String)>> {
    let err = outcome.cast::<ResumeError>().ok()?;
    let py = outcome.py();
    let me = err.get();
    Some((|| {
        let message = me.message.bind(py).extract::<String>()?;
        let exc_type = me.exc_type.bind(py).extract::<String>()?;
        Ok((message, exc_type))
    })())
}
