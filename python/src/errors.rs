//! egrad's errors as Python exceptions, and the guard that keeps a Rust
//! panic from crossing into Python.
//!
//! The exception classes are plain Python (`egrad/errors.py`): one per
//! [`ErrorKind`], all under `egrad.EgradError`, some also under the
//! built-in exception Python code would expect (`EgradTypeError` is a
//! `TypeError`, `EgradUsageError` a `ValueError`, ...). This module builds
//! an instance with the text the CLI prints (`str(e)`) and the parts of it
//! as attributes: `kind`, `message`, `file`, `line`, `column`, `location`,
//! `notes`, `helps`, `exit_code`.

use egrad::{Error, ErrorKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The class in `egrad.errors` an error of this kind is raised as.
pub fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Syntax => "EgradSyntaxError",
        ErrorKind::Type => "EgradTypeError",
        ErrorKind::Unsupported => "EgradUnsupportedError",
        ErrorKind::Limit => "EgradLimitError",
        ErrorKind::Usage => "EgradUsageError",
        ErrorKind::Io => "EgradIOError",
        ErrorKind::Runtime => "EgradRuntimeError",
        ErrorKind::Internal => "EgradInternalError",
    }
}

/// Where an error points: the file (the program's, or `<prelude>`), the
/// 1-based line and column, the one-line message, the notes and the help
/// lines (the egrad form of a Python or NumPy habit, "did you mean") of its
/// first diagnostic. Errors without a place have only the message.
struct Parts {
    message: String,
    place: Option<(String, usize, usize)>,
    notes: Vec<String>,
    helps: Vec<String>,
}

fn parts(err: &Error) -> Parts {
    match err {
        Error::Source(d) => match d.items.first() {
            Some(item) => {
                let (file, span) = d.file.resolve(item.span);
                let (line, col) = file.line_col(span.start);
                Parts {
                    message: item.message.clone(),
                    place: Some((file.name.to_string(), line, col)),
                    notes: item.notes.clone(),
                    helps: item.helps.clone(),
                }
            }
            None => Parts {
                message: err.to_string().trim_end().to_string(),
                place: None,
                notes: Vec::new(),
                helps: Vec::new(),
            },
        },
        Error::Usage(m) | Error::Limit(m) | Error::Internal(m) => Parts {
            message: m.clone(),
            place: None,
            notes: Vec::new(),
            helps: Vec::new(),
        },
        Error::Io { message, .. } => Parts {
            message: message.clone(),
            place: None,
            notes: Vec::new(),
            helps: Vec::new(),
        },
    }
}

/// `err` as an instance of its `egrad.errors` class. If that module cannot
/// be imported (egrad's own files are broken), a `RuntimeError` with the
/// same text.
pub fn to_py(py: Python<'_>, err: &Error) -> PyErr {
    let text = err.to_string().trim_end().to_string();
    match build(py, err, &text) {
        Ok(e) => e,
        Err(import_failure) => PyRuntimeError::new_err(format!(
            "{text}\n(egrad.errors could not be used: {import_failure})"
        )),
    }
}

fn build(py: Python<'_>, err: &Error, text: &str) -> PyResult<PyErr> {
    let kind = err.kind();
    let class = py.import("egrad.errors")?.getattr(class_name(kind))?;
    let p = parts(err);
    let kw = PyDict::new(py);
    kw.set_item("kind", kind.name())?;
    kw.set_item("message", &p.message)?;
    kw.set_item("exit_code", kind.exit_code())?;
    kw.set_item("notes", PyList::new(py, &p.notes)?)?;
    kw.set_item("helps", PyList::new(py, &p.helps)?)?;
    if let Some((file, line, col)) = &p.place {
        kw.set_item("file", file)?;
        kw.set_item("line", line)?;
        kw.set_item("column", col)?;
    }
    let instance = class.call((text,), Some(&kw))?;
    Ok(PyErr::from_value(instance))
}

/// Result of egrad's with the error converted.
pub fn py_result<T>(py: Python<'_>, r: Result<T, Error>) -> PyResult<T> {
    r.map_err(|e| to_py(py, &e))
}

/// Run `f`, turning a panic into an internal error (a bug in egrad, which
/// the message says) instead of unwinding into Python.
pub fn guarded<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            Err(Error::internal(format!("panic: {what}")))
        }
    }
}
