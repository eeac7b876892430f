//! The crate's one error type. Every error has a [`ErrorKind`]; errors in a
//! program carry source places and render with `file:line:col` and a caret;
//! compiler bugs say so and ask for a report. Nothing in egrad classifies an
//! error by its message text: the kind is set where the error is made.

pub mod span;

use span::{Diagnostic, Diagnostics, SourceFile};
use std::fmt;

/// What kind of error: what went wrong, and so which exit code the CLI
/// returns ([`ErrorKind::exit_code`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The text is not a program: a bad token, a missing `)`.
    Syntax,
    /// A name, type, size or attribute error, or a run-time argument that does
    /// not fit its parameter.
    Type,
    /// Valid code that egrad does not handle yet: a documented limit of the
    /// language or of AD (for example reverse mode through a loop's gradient).
    Unsupported,
    /// A program or a request past one of egrad's size or depth limits.
    Limit,
    /// The command line or the API was used wrongly: an unknown function, a
    /// malformed `--dim`, a flag combination that means nothing.
    Usage,
    /// A file could not be read or written.
    Io,
    /// A check at run time failed: an index outside its array.
    Runtime,
    /// egrad broke one of its own invariants: a bug in egrad.
    Internal,
}

impl ErrorKind {
    /// The kind as one lowercase word (`syntax`, `type`, `unsupported`,
    /// `limit`, `usage`, `io`, `internal`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Syntax => "syntax",
            ErrorKind::Type => "type",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Limit => "limit",
            ErrorKind::Usage => "usage",
            ErrorKind::Io => "io",
            ErrorKind::Runtime => "runtime",
            ErrorKind::Internal => "internal",
        }
    }

    /// The CLI's exit code for an error of this kind: 1 for an error in the
    /// user's program or input (syntax, type, unsupported, limit, io,
    /// runtime), 2 for
    /// a usage error, [`EXIT_INTERNAL`] for a bug in egrad.
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Syntax
            | ErrorKind::Type
            | ErrorKind::Unsupported
            | ErrorKind::Limit
            | ErrorKind::Io
            | ErrorKind::Runtime => 1,
            ErrorKind::Usage => 2,
            ErrorKind::Internal => EXIT_INTERNAL,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The exit code of an internal error (a bug in egrad): 70, `EX_SOFTWARE`
/// of BSD's `sysexits.h`, distinct from user errors (1), usage errors (2)
/// and Rust panics (101).
pub const EXIT_INTERNAL: i32 = 70;

/// An error from any stage of egrad. Its `Debug` form is its `Display`
/// form, the rendered diagnostic, so that `fn main() -> Result<(),
/// egrad::Error>` prints what the command line would (not the structure,
/// with the whole source inside).
pub enum Error {
    /// Errors in a program (syntax, names, types, attributes, unsupported
    /// constructs) or in run-time arguments, each pointing at a place in the
    /// source; each diagnostic carries its kind.
    Source(Diagnostics),
    /// A user error with no source place (unknown function, bad CLI value).
    Usage(String),
    /// A limit met with no source place (a size too large for this machine).
    Limit(String),
    /// Reading or writing a file failed ([`Error::io`]).
    Io {
        /// The file, as the user named it.
        path: String,
        /// The whole message: what egrad tried, the file, what the
        /// operating system said.
        message: String,
    },
    /// egrad broke one of its own invariants: a bug in egrad.
    Internal(String),
}

impl Error {
    /// One diagnostic in `file`.
    pub fn at(file: &SourceFile, diag: Diagnostic) -> Error {
        Error::Source(Diagnostics {
            file: file.clone(),
            items: vec![diag],
        })
    }

    /// `action` (`read`, `write`) on the file `path` failed with `err`.
    pub fn io(action: &str, path: impl fmt::Display, err: impl fmt::Display) -> Error {
        Error::Io {
            path: path.to_string(),
            message: format!("cannot {action} {path}: {err}"),
        }
    }

    /// A bug in egrad.
    pub fn internal(what: impl fmt::Display) -> Error {
        Error::Internal(what.to_string())
    }

    /// What kind of error this is. For several diagnostics, the kind of the
    /// first (the one printed first).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Source(d) => d.items.first().map_or(ErrorKind::Type, |d| d.kind),
            Error::Usage(_) => ErrorKind::Usage,
            Error::Limit(_) => ErrorKind::Limit,
            Error::Io { .. } => ErrorKind::Io,
            Error::Internal(_) => ErrorKind::Internal,
        }
    }

    /// The CLI's exit code for this error ([`ErrorKind::exit_code`]).
    pub fn exit_code(&self) -> i32 {
        self.kind().exit_code()
    }

    /// `file:line:col` of the first diagnostic, for errors in a program.
    pub fn location(&self) -> Option<String> {
        match self {
            Error::Source(d) => d.items.first().map(|i| d.file.location(i.span)),
            _ => None,
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Source(d) => write!(f, "{d}"),
            Error::Usage(m) | Error::Limit(m) => writeln!(f, "error: {m}"),
            Error::Io { message, .. } => writeln!(f, "error: {message}"),
            Error::Internal(m) => writeln!(
                f,
                "error: internal compiler error: {m}\n  = note: this is a bug in egrad {}; please report it with the program and the command that triggered it",
                env!("CARGO_PKG_VERSION")
            ),
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with egrad's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
