//! The type check of a script against stubs of its tools (`monty-type-checking`, ty-based),
//! before anything of the script runs.
//!
//! The Python side (`codeact.runtime._typecheck`) writes the stubs (the tools as `call_tool`
//! overloads or typed functions, names an earlier script left) and decides which diagnostics
//! gate the script; this module only runs the checker and hands back its diagnostics as the
//! crate's JSON rendering (a list of objects with `code`, `message`, `location`,
//! `end_location`, `filename`).
//!
//! A `TypeChecker` holds a salsa database and is not `Sync`: checkers are pooled, each used
//! by one thread at a time. A check takes an idle one or builds a new one (so concurrent
//! sessions never queue behind one checker), and gives it back afterwards unless the pool
//! already holds [`POOL_IDLE`] idle checkers. A checker is dropped after [`CHECKS_PER_CHECKER`]
//! checks, so what its database keeps from earlier scripts stays bounded. The GIL is
//! released while checking, and the check runs with [`CHECK_STACK`] bytes of stack.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use crate::engine::interp;
use crate::engine::interp::{ModuleStub, TypeCheckingConfig, TypeCheckingFormat};
use crate::engine::interp::{SourceFile, TypeCheckContext, TypeChecker};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::stack::with_stack;

/// Idle checkers kept for reuse (more are built when more checks run at once).
const POOL_IDLE: usize = 8;
/// Checks one checker serves before it is dropped (bounds the memory its database keeps).
const CHECKS_PER_CHECKER: u32 = 500;
/// Bytes of stack a check runs with (ty recurses on nested expressions; Monty's nesting
/// bound, checked first, keeps a script within what this holds).
const CHECK_STACK: usize = 64 * 1024 * 1024;

/// A pooled checker and how many checks it served.
struct Pooled {
    checker: TypeChecker,
    uses: u32,
}

static POOL: Mutex<Vec<Pooled>> = Mutex::new(Vec::new());

fn take_checker() -> Pooled {
    let idle = POOL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .pop();
    idle.unwrap_or_else(|| Pooled {
        checker: TypeChecker::default(),
        uses: 0,
    })
}

fn give_back(pooled: Pooled) {
    if pooled.uses >= CHECKS_PER_CHECKER {
        return;
    }
    let mut pool = POOL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if pool.len() < POOL_IDLE {
        pool.push(pooled);
    }
}

/// What one check found: `Ok(None)` clean, `Ok(Some(json))` diagnostics, `Err` the checker
/// failed (an internal error or a panic): the caller treats that as no verdict.
fn check(script: &str, stubs: &str, modules: &[ModuleStub]) -> Result<Option<String>, String> {
    let mut pooled = take_checker();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let source = SourceFile::new(script, "main.py");
        let stub_file = SourceFile::new(stubs, "codeact_tools.pyi");
        let context = TypeCheckContext {
            stubs: (!stubs.is_empty()).then_some(&stub_file),
            module_stubs: modules,
            prelude: "",
        };
        let config = TypeCheckingConfig {
            format: TypeCheckingFormat::Json,
            color: false,
        };
        pooled
            .checker
            .run_with(&source, &context, config)
            .map(|found| found.map(|diagnostics| diagnostics.to_string()))
    }));
    match outcome {
        Ok(result) => {
            pooled.uses += 1;
            give_back(pooled);
            result
        }
        // A panicking checker may hold a half-updated database: it is not reused.
        Err(_) => Err("the type checker panicked".to_owned()),
    }
}

/// Type-checks `script` (as `main.py`) against `stubs` (a `.pyi` text whose names the
/// script sees, star-imported) and `modules` (`(dotted_name, pyi_text)` module stubs the
/// script may import), with the GIL released.
///
/// Returns `None` when the checker finds nothing, else the diagnostics as a JSON array (ruff's
/// JSON rendering: `code`, `message`, `location: {row, column}`, `end_location`, 1-based).
/// Raises `ValueError` for an invalid module name and `RuntimeError` when the checker fails
/// internally (the caller treats it as no verdict). A script nested past Monty's bound is
/// not checked (`None`): the interpreter refuses it itself.
#[pyfunction]
#[pyo3(signature = (script, stubs, modules = Vec::new()))]
pub fn type_check(
    py: Python<'_>,
    script: &str,
    stubs: &str,
    modules: Vec<(String, String)>,
) -> PyResult<Option<String>> {
    let modules = modules
        .into_iter()
        .map(|(name, source)| {
            ModuleStub::new(name, source).map_err(|e| PyValueError::new_err(e.to_string()))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let outcome = py.detach(|| {
        if !interp::source_within_nesting_bound(script, 0)
            || !interp::source_within_nesting_bound(stubs, 0)
        {
            return Ok(None);
        }
        with_stack(CHECK_STACK, || check(script, stubs, &modules))
    });
    outcome.map_err(pyo3::exceptions::PyRuntimeError::new_err)
}

/// Builds one checker ahead of the first check and leaves it in the pool (the first check
/// in a process otherwise pays for loading the bundled typeshed), with the GIL released.
#[pyfunction]
pub fn warm_type_checker(py: Python<'_>) {
    py.detach(|| {
        let _ = with_stack(CHECK_STACK, || check("", "", &[]));
    });
}

/// Idle checkers in the pool right now (tests and benchmarks).
#[pyfunction]
pub fn type_checkers_idle() -> usize {
    POOL.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .len()
}
