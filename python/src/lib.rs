//! egrad's Python module, `egrad._egrad` (the package `egrad` re-exports
//! it with the exception classes of `egrad/errors.py`).
//!
//! `compile(source)` and `compile_file(path)` check a program; its
//! functions and gradients compile once and are called on NumPy arrays,
//! read in place where their layout allows (`args.rs` says exactly when).
//! egrad's errors become `egrad.EgradError`s with the CLI's text and the
//! place (`errors.rs`); no Rust panic reaches Python.

mod args;
mod errors;
mod options;
mod program;

use egrad::Program;
use program::{load, PyFunction, PyGradient, PyProgram};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// Parse and check a program given as text.
///
/// `name` is what diagnostics call it (`<string>` by default). Keywords:
/// `prelude` (False: check without the prelude), `copy` (the default for
/// the program's functions: None converts arguments that cannot be read in
/// place, False refuses them), and compile options that become the
/// program's defaults (`lam`, `dims`, `no_optimize`, `fast_math`,
/// `node_limit`, `iter_limit`, `time_limit`, `simd`, `gemm`, `rules`).
#[pyfunction]
#[pyo3(signature = (source, name="<string>", **options))]
fn compile(
    py: Python<'_>,
    source: String,
    name: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyProgram> {
    let name = name.to_string();
    load(py, move |p| Program::parse_with(&name, &source, p), options)
}

/// Read, parse and check a `.eg` file; diagnostics name it as `path` is
/// given. Keywords as for `compile`.
#[pyfunction]
#[pyo3(signature = (path, **options))]
fn compile_file(
    py: Python<'_>,
    path: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyProgram> {
    load(py, move |p| Program::from_file_with(&path, p), options)
}

#[pymodule]
fn _egrad(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(compile_file, m)?)?;
    m.add_class::<PyProgram>()?;
    m.add_class::<PyFunction>()?;
    m.add_class::<PyGradient>()?;
    Ok(())
}
