//! The crate's error type. User errors carry source places and render with
//! `file:line:col` and a caret; compiler bugs say so.

use crate::lang::span::{Diagnostic, Diagnostics, SourceFile};
use std::fmt;

#[derive(Debug)]
pub enum Error {
    /// Errors in a program (syntax, names, types, attributes) or in run-time
    /// arguments, each pointing at a place in the source.
    Source(Diagnostics),
    /// A user error with no source place (unknown function, bad CLI value).
    Usage(String),
    /// Reading a file failed.
    Io { path: String, message: String },
    /// egrad broke one of its own invariants: a bug in egrad.
    Internal(String),
}

impl Error {
    pub fn at(file: &SourceFile, diag: Diagnostic) -> Error {
        Error::Source(Diagnostics {
            file: file.clone(),
            items: vec![diag],
        })
    }

    pub fn internal(what: impl fmt::Display) -> Error {
        Error::Internal(what.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Source(d) => write!(f, "{d}"),
            Error::Usage(m) => writeln!(f, "error: {m}"),
            Error::Io { path, message } => writeln!(f, "error: cannot read {path}: {message}"),
            Error::Internal(m) => writeln!(
                f,
                "error: internal compiler error: {m}\n  = note: this is a bug in egrad; please report it with the program that triggered it"
            ),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;
