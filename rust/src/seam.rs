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

use pyo3::exceptions::PyTypeError;
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
/// str, bytes, list, tuple, dict, set, frozenset).
///
/// Any value is accepted here; it is converted (and checked) when the call is resumed, where
/// a value that cannot cross raises `ValueConversionError` (the paused call stays pending).
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
///
/// Raises:
///     TypeError: ``message`` or ``exc_type`` is not a ``str``.
#[pyclass(frozen, subclass, module = "codeact.runtime", name = "ResumeError")]
pub struct ResumeError {
    pub(crate) message: Py<PyAny>,
    pub(crate) exc_type: Py<PyAny>,
}

#[pymethods]
impl ResumeError {
    #[new]
    #[pyo3(signature = (message, exc_type = None), text_signature = "(message, exc_type='RuntimeError')")]
    fn new(py: Python<'_>, message: Py<PyAny>, exc_type: Option<Py<PyAny>>) -> PyResult<Self> {
        let exc_type =
            exc_type.unwrap_or_else(|| intern!(py, "RuntimeError").clone().into_any().unbind());
        // Checked here, where the mistake is made, not when the call is resumed.
        for (field, value, example) in [
            ("message", &message, "'the tool failed: ...'"),
            ("exc_type", &exc_type, "'ValueError'"),
        ] {
            let value = value.bind(py);
            if value.is_instance_of::<PyString>() {
                continue;
            }
            let got = match value.cast::<PyType>() {
                // `exc_type=ValueError`: the class instead of its name.
                Ok(class) => {
                    let name = class.name()?;
                    format!("the class {name}: write {field}='{name}'")
                }
                Err(_) => format!("{}", value.get_type().qualname()?),
            };
            return Err(PyTypeError::new_err(format!(
                "ResumeError {field} must be a str such as {example}, not {got}"
            )));
        }
        Ok(Self { message, exc_type })
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
    /// When the class is a plain dataclass with exactly these fields and no
    /// `__post_init__` (its `__init__` only assigns them): its `tp_new` and the interned
    /// field names, in declaration order; instances are then built without `__init__`.
    direct: Option<(ffi::newfunc, [Field; 4])>,
}

/// One field of a step dataclass: its interned name and, for a `__slots__` member, the
/// member descriptor and its setter (called directly: no attribute lookup per step).
struct Field {
    name: Py<PyString>,
    member: Option<(Py<PyAny>, ffi::descrsetfunc)>,
}

impl Field {
    fn new(class: &Bound<'_, PyType>, name: &str) -> PyResult<Self> {
        let py = class.py();
        let descr = class.getattr(intern!(py, "__dict__"))?.get_item(name).ok();
        let member = match descr {
            Some(d) if d.get_type().name()? == "member_descriptor" => {
                // SAFETY: reading a slot of the descriptor's (live) type object.
                let set = unsafe {
                    ffi::PyType_GetSlot(d.get_type().as_type_ptr(), ffi::Py_tp_descr_set)
                };
                // SAFETY: the `Py_tp_descr_set` slot holds a `descrsetfunc`.
                (!set.is_null()).then(|| {
                    (d.unbind(), unsafe {
                        std::mem::transmute::<*mut std::ffi::c_void, ffi::descrsetfunc>(set)
                    })
                })
            }
            _ => None,
        };
        Ok(Self {
            name: PyString::intern(py, name).unbind(),
            member,
        })
    }

    fn set(&self, obj: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = obj.py();
        let Some((descr, set)) = &self.member else {
            return obj.setattr(self.name.bind(py), value);
        };
        // SAFETY: the member descriptor's own setter, called with the descriptor, an
        // instance of the class that owns it and a live value, as `object.__setattr__`
        // would; it checks the instance's type itself and reports failure with -1.
        if unsafe { set(descr.as_ptr(), obj.as_ptr(), value.as_ptr()) } < 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(())
    }
}

impl StepClass {
    /// Inspects `class` once, at registration: `fields` are the names the engine fills.
    pub fn new(py: Python<'_>, class: Py<PyType>, fields: [&str; 4]) -> PyResult<Self> {
        // SAFETY: reading a slot of a live type object; every type has `tp_new` set
        // (checked for NULL anyway), and the class is kept alive by `self.class`.
        let new = unsafe { ffi::PyType_GetSlot(class.bind(py).as_type_ptr(), ffi::Py_tp_new) };
        let direct = if !new.is_null() && plain_dataclass(class.bind(py), &fields)? {
            // SAFETY: the `Py_tp_new` slot holds a `newfunc`.
            let new: ffi::newfunc = unsafe { std::mem::transmute(new) };
            let [a, b, c, d] = fields.map(|f| Field::new(class.bind(py), f));
            Some((new, [a?, b?, c?, d?]))
        } else {
            None
        };
        Ok(Self { class, direct })
    }

    /// An instance with `values` as its four fields.
    pub fn build(&self, py: Python<'_>, values: [Bound<'_, PyAny>; 4]) -> PyResult<Py<PyAny>> {
        let class = self.class.bind(py);
        let Some((new, fields)) = &self.direct else {
            return class.call1(PyTuple::new(py, values)?).map(Bound::unbind);
        };
        // SAFETY: `new` is the class's own `tp_new` (object.__new__ for a dataclass), called
        // with the class and an empty argument tuple as `type.__call__` would; the result is
        // checked for NULL.
        let obj = unsafe {
            let empty = PyTuple::empty(py);
            Bound::from_owned_ptr_or_err(
                py,
                new(class.as_type_ptr(), empty.as_ptr(), std::ptr::null_mut()),
            )?
        };
        for (field, value) in fields.iter().zip(values) {
            field.set(&obj, &value)?;
        }
        Ok(obj.unbind())
    }
}

/// Whether `class` is a dataclass whose fields are exactly `fields`, all set by its
/// generated `__init__`, with no `__post_init__` and `object.__new__`.
fn plain_dataclass(class: &Bound<'_, PyType>, fields: &[&str; 4]) -> PyResult<bool> {
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
