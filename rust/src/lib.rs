//! `codeact._monty`: the native core of codeact, embedding the Monty interpreter.

mod convert;
mod engine;
mod errors;
mod files;
mod journal;
mod live;
mod memory;
mod os_policy;
mod output;
mod plain;
mod process;
mod py_api;
mod py_continuation;
mod py_repl;
mod screen;
mod seam;
mod slot;
mod snapshot;
mod spin;
mod stack;
mod traceback;
#[cfg(feature = "type-check")]
mod type_check;
mod worker;

use pyo3::prelude::*;

/// Every allocation is counted for the run being advanced on its thread (ADR 0003).
#[global_allocator]
static ALLOC: memory::CountingAlloc = memory::CountingAlloc;

#[pymodule]
fn _monty(m: &Bound<'_, PyModule>) -> PyResult<()> {
    memory::install_probe();
    engine::callback_hint::install();
    m.add_class::<py_api::MontyEngine>()?;
    m.add_class::<py_continuation::MontyContinuation>()?;
    m.add_class::<py_continuation::MontyCall>()?;
    m.add_class::<py_continuation::StepTicket>()?;
    m.add_class::<seam::ResumeValue>()?;
    m.add_class::<seam::ResumeError>()?;
    m.add_class::<py_repl::MontySession>()?;
    m.add_class::<screen::SubsetScreen>()?;
    m.add_function(wrap_pyfunction!(screen::parses, m)?)?;
    #[cfg(feature = "type-check")]
    m.add_function(wrap_pyfunction!(type_check::type_check, m)?)?;
    #[cfg(feature = "type-check")]
    m.add_function(wrap_pyfunction!(type_check::warm_type_checker, m)?)?;
    #[cfg(feature = "type-check")]
    m.add_function(wrap_pyfunction!(type_check::type_checkers_idle, m)?)?;
    m.add_function(wrap_pyfunction!(plain::plain_json, m)?)?;
    m.add_function(wrap_pyfunction!(plain::plain_json_digest, m)?)?;
    m.add_function(wrap_pyfunction!(py_api::register_seam_types, m)?)?;
    m.add_function(wrap_pyfunction!(py_continuation::register_gather_type, m)?)?;
    m.add_function(wrap_pyfunction!(py_api::remaining_stack, m)?)?;
    m.add_function(wrap_pyfunction!(py_api::wake_step_worker, m)?)?;
    m.add("MONTY_VERSION", snapshot::MONTY_VERSION)?;
    m.add("SNAPSHOT_FORMAT_VERSION", snapshot::FORMAT_VERSION)?;
    m.add("MONTY_DUMP_VERSION", engine::DUMP_VERSION)?;
    m.add("MONTY_MIN_DUMP_VERSION", engine::MIN_SUPPORTED_DUMP_VERSION)?;
    m.add("MAX_VALUE_DEPTH", convert::MAX_DEPTH)?;
    m.add("RECURSION_CEILING", engine::RECURSION_CEILING)?;
    m.add("MAX_SCRIPT_BYTES", engine::MAX_SCRIPT_BYTES)?;
    Ok(())
}
