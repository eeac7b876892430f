//! The `egrad` binary run as a child under the conditions the reliability
//! tests set (issue 38): stdout a pipe, a pipe whose reader is gone
//! (EPIPE) or `/dev/full` (ENOSPC); an address-space limit (RLIMIT_AS);
//! a deadline past which it is killed as hung. Its pipes are read while it
//! runs, so a child writing more than a pipe holds is never taken for a
//! hung one.

#![allow(dead_code)]

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the child's stdout goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stdout {
    /// A pipe, read to the end.
    Piped,
    /// A pipe whose read end is closed before the child runs: a write
    /// fails with EPIPE.
    Closed,
    /// `/dev/full`: a write fails with ENOSPC.
    Full,
}

/// How to run the child.
#[derive(Clone, Debug)]
pub struct How {
    pub stdout: Stdout,
    /// RLIMIT_AS, in bytes, set in the child before it runs egrad.
    pub address_space: Option<u64>,
    /// Killed (and reported hung) when still running after this.
    pub deadline: Duration,
}

impl Default for How {
    fn default() -> How {
        How {
            stdout: Stdout::Piped,
            address_space: None,
            deadline: Duration::from_secs(60),
        }
    }
}

/// What became of the child.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it (SIGKILL when it hung).
    pub signal: Option<i32>,
    /// Still running at the deadline, and killed.
    pub hung: bool,
    pub out: String,
    pub err: String,
}

/// Read `r` to its end on a thread of its own.
fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

/// Run the `egrad` binary of this build with `args` and `stdin` as `how`
/// says.
pub fn run_egrad(args: &[OsString], stdin: &[u8], how: &How) -> Outcome {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_egrad"));
    cmd.args(args).stdin(Stdio::piped()).stderr(Stdio::piped());
    match how.stdout {
        Stdout::Piped | Stdout::Closed => cmd.stdout(Stdio::piped()),
        Stdout::Full => cmd.stdout(Stdio::from(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full exists on Linux"),
        )),
    };
    if let Some(bytes) = how.address_space {
        let limit = libc::rlimit {
            rlim_cur: bytes,
            rlim_max: bytes,
        };
        // SAFETY: between fork and exec the closure only calls
        // setrlimit, which is async-signal-safe, on a value it owns.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().expect("run egrad");
    let out = child.stdout.take().map(|o| {
        if how.stdout == Stdout::Closed {
            drop(o);
            None
        } else {
            Some(drain(o))
        }
    });
    let err = drain(child.stderr.take().expect("stderr"));
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    // The child may be gone already: that is no failure of the test.
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let start = Instant::now();
    let mut hung = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("the child's status") {
            break s;
        }
        if start.elapsed() >= how.deadline {
            hung = true;
            let _ = child.kill();
            break child.wait().expect("the killed child's status");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let _ = feeder.join();
    let text = |v: Vec<u8>| String::from_utf8_lossy(&v).into_owned();
    Outcome {
        code: status.code(),
        signal: status.signal(),
        hung,
        out: out
            .flatten()
            .map(|h| text(h.join().unwrap()))
            .unwrap_or_default(),
        err: text(err.join().unwrap()),
    }
}

/// `args` as the `OsString`s [`run_egrad`] takes.
pub fn os_args(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}
