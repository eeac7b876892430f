//! Writing what a command prints, where every write can fail.
//!
//! The command's output goes to a locked, buffered stdout through
//! fallible writes (never `print!`, which panics when the write fails).
//! When the reader has gone (`egrad run ... | head -1`, EPIPE) egrad stops
//! quietly with the exit code the command had: the reader asked for no
//! more. Any other failure (a full disk, ENOSPC; `> /dev/full`) is an io
//! error: one line on stderr and exit code 1. What egrad writes on stderr
//! is written once, and a failure there is ignored: there is nowhere left
//! to tell it, and the exit code still says how the command went.

use egrad::error::Error;
use std::io::{self, Write};

/// Write `body` to stdout (locked and buffered) and flush it.
pub fn stdout(body: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let out = io::stdout();
    let mut w = io::BufWriter::new(out.lock());
    body(&mut w)?;
    w.flush()
}

/// Write `text` to stderr; a failure is ignored (see the module's docs).
pub fn stderr(text: &str) {
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

/// The exit code once writing stdout gave `result`, for a command whose
/// own exit code is `code`: a closed pipe keeps `code` quietly; another
/// failure is told on stderr as an io error and exits 1 (or `code` when
/// the command had already failed).
pub fn exit_code(result: io::Result<()>, code: i32) -> i32 {
    match result {
        Ok(()) => code,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => code,
        Err(e) => {
            let e = Error::io("write", "standard output", e);
            stderr(&e.to_string());
            if code == 0 {
                e.exit_code()
            } else {
                code
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_keeps_the_code_and_other_failures_are_io_errors() {
        let pipe = || Err(io::Error::from(io::ErrorKind::BrokenPipe));
        assert_eq!(exit_code(pipe(), 0), 0);
        assert_eq!(exit_code(pipe(), 2), 2);
        let full = || Err(io::Error::from_raw_os_error(28));
        assert_eq!(exit_code(full(), 0), 1);
        assert_eq!(exit_code(full(), 2), 2);
        assert_eq!(exit_code(Ok(()), 0), 0);
    }
}
